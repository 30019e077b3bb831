"""The registry reports a missing third-party package as not installed, a broken module of ours as an error."""

from __future__ import annotations

import logging

import pytest

from crs_backends import registry
from crs_backends.neural import sources, system
from crs_backends.neural.sources import CheckpointSource


def _failing_load(monkeypatch, tmp_path, error: ImportError):
    found = CheckpointSource("kbrd", tmp_path, "bundled", tmp_path, "local dir", "v1")
    monkeypatch.setattr(sources, "resolve", lambda system_id: found)
    monkeypatch.setattr(system, "item_catalog_for", lambda source, catalog: catalog)

    def load_model(source):
        raise error

    monkeypatch.setattr(system, "load_model", load_model)


def test_a_missing_third_party_package_is_named_as_not_installed(monkeypatch, tmp_path):
    _failing_load(monkeypatch, tmp_path, ModuleNotFoundError("No module named 'torch_geo_xyz'", name="torch_geo_xyz"))
    with pytest.raises(
        registry.SystemUnavailable, match="KBRD needs the package 'torch_geo_xyz', which is not installed"
    ):
        registry._neural("kbrd")(None)


def test_a_broken_module_of_ours_is_an_error_not_a_missing_install(monkeypatch, tmp_path, caplog):
    error = ModuleNotFoundError("No module named 'crs_backends.neural.kg'", name="crs_backends.neural.kg")
    _failing_load(monkeypatch, tmp_path, error)
    with caplog.at_level(logging.ERROR), pytest.raises(registry.SystemUnavailable) as caught:
        registry._neural("kbrd")(None)
    assert "failed to import (crs_backends.neural.kg)" in str(caught.value)
    assert "not installed" not in str(caught.value) and "crs_backends.neural.kg" in caplog.text


def test_a_broken_small_builder_is_raised_not_taken_for_absent(monkeypatch):
    import sys

    import crs_backends.neural

    monkeypatch.delattr(crs_backends.neural, "small", raising=False)
    monkeypatch.setitem(sys.modules, "crs_backends.neural.small", None)  # as if it failed to import
    with pytest.raises(ImportError):
        registry._small_builder_present()
