"""pytest.ini's warning filters: a deprecation from our own packages fails a test, a third party's does not."""

from __future__ import annotations

import importlib
import sys
import warnings

import pytest

import storage

OURS = ("app", "arena", "catalog", "crs_backends", "evaluators", "llm_clients", "storage", "ui")


def _warn_from(module: str) -> None:
    """A DeprecationWarning attributed to ``module``, as ``warnings.warn`` inside it would attribute it."""
    warnings.warn_explicit("old API", DeprecationWarning, f"{module.replace('.', '/')}.py", 1, module=module)


@pytest.mark.parametrize("module", [*OURS, "storage.db", "crs_backends.neural.small"])
def test_a_deprecation_from_our_code_is_an_error(module):
    with pytest.raises(DeprecationWarning, match="old API"):
        _warn_from(module)


@pytest.mark.parametrize("module", ["sqlite_utils.db", "gradio.components", "application", "storage_backend"])
def test_a_third_party_deprecation_is_ignored(module):
    _warn_from(module)  # no error; "application" and "storage_backend" only start like our packages


def test_a_real_warning_raised_inside_our_package_is_an_error(tmp_path, monkeypatch):
    """Through ``warnings.warn`` in a module of ours (not a hand-made attribution)."""
    module = "storage._deprecated_probe"
    path = tmp_path / "_deprecated_probe.py"
    path.write_text("import warnings\n\ndef old():\n    warnings.warn('old storage API', DeprecationWarning)\n")
    monkeypatch.setattr(storage, "__path__", [*storage.__path__, str(tmp_path)])
    probe = importlib.import_module(module)
    try:
        with pytest.raises(DeprecationWarning, match="old storage API"):
            probe.old()
    finally:
        sys.modules.pop(module, None)
