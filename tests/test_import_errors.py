"""An import error in this repository's code is a failure, never "not installed" and never a skipped test.

Every module of ours imports (a renamed module left behind fails here, whatever later catches ImportError);
:func:`crs_backends.plugins.missing_package` tells a third-party package that is not installed from a broken
module, and plug-in loading reports only the first as not installed.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import sys
from importlib import metadata
from pathlib import Path

import pytest

import crs_backends
from crs_backends import plugins
from crs_backends.plugins import OWN_PACKAGES, PluginNotInstalled, missing_package
from crs_backends.systems_file import load_systems_file

PACKAGES = sorted(OWN_PACKAGES - {"app", "commands"})  # modules, not packages: app.py starts services when imported
# (the app tests run it); commands.py is imported by test_command_lines


def test_own_packages_are_the_repositorys_top_level_packages():
    root = Path(__file__).resolve().parent.parent
    found = {p.parent.name for p in root.glob("*/*.py")} | {p.stem for p in root.glob("*.py")}
    assert found - {"bench", "tests", "examples"} == OWN_PACKAGES  # a new package must be added to OWN_PACKAGES


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_of_ours_imports(package):
    modules = [
        info.name
        for info in pkgutil.walk_packages(importlib.import_module(package).__path__, f"{package}.")
        if not info.name.endswith(".__main__")  # runs its command line when imported
    ]
    assert modules
    for name in modules:
        importlib.import_module(name)  # an ImportError here names the module and fails the test


def _error(statement: str) -> ImportError:
    with pytest.raises(ImportError) as caught:
        exec(statement, {})
    return caught.value


def test_a_third_party_package_that_is_not_installed_is_reported_by_name():
    assert missing_package(_error("import crs_no_such_package_xyz")) == "crs_no_such_package_xyz"
    assert missing_package(_error("import crs_no_such_package_xyz.sub")) == "crs_no_such_package_xyz"


@pytest.mark.parametrize(
    "statement",
    [
        "import crs_backends.retrieval",  # a module of ours that was renamed (now tfidf_baseline)
        "from llm import registry",  # the package llm_clients used to be called: installed, but not ours
        "from catalog.catalog import no_such_name",  # cannot import name
        "import sqlite_utils.no_such_module",  # a submodule missing from an installed package
    ],
)
def test_a_broken_or_renamed_module_is_not_reported_as_not_installed(statement):
    assert missing_package(_error(statement)) is None


@pytest.fixture
def own_module(tmp_path, monkeypatch):
    """Writes a module into the crs_backends package (via its __path__) and imports it."""
    monkeypatch.setattr(crs_backends, "__path__", [*crs_backends.__path__, str(tmp_path)])
    created = []

    def make(name: str, source: str):
        (tmp_path / f"{name}.py").write_text(source)
        created.append(f"crs_backends.{name}")
        return importlib.import_module(f"crs_backends.{name}")

    yield make
    for name in created:
        sys.modules.pop(name, None)


def test_a_module_of_ours_with_a_missing_optional_dependency_names_the_dependency(own_module):
    with pytest.raises(ImportError) as caught:
        own_module("_probe_optional", "import crs_no_such_package_xyz\n")
    assert missing_package(caught.value) == "crs_no_such_package_xyz"


def test_a_module_of_ours_importing_a_renamed_module_is_an_error(own_module):
    with pytest.raises(ImportError) as caught:
        own_module("_probe_renamed", "from crs_backends.retrieval import RetrievalCRS\n")
    assert missing_package(caught.value) is None and caught.value.name == "crs_backends.retrieval"


# ---------------------------------------------------------------- plug-ins


@pytest.fixture
def entry_points(tmp_path, monkeypatch):
    """Plug-in modules on sys.path, offered under entry-point names (as an installed package's would be)."""
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    points: dict[str, metadata.EntryPoint] = {}
    monkeypatch.setattr(plugins, "available", lambda: dict(points))

    def offer(name: str, module: str, source: str) -> None:
        (site / f"{module}.py").write_text(source)
        points[name] = metadata.EntryPoint(name, f"{module}:Factory", plugins.GROUP)
        monkeypatch.delitem(sys.modules, module, raising=False)

    yield offer
    for ep in points.values():
        sys.modules.pop(ep.module, None)


def test_a_plugin_whose_dependency_is_not_installed_says_which(entry_points):
    entry_points("needs_dep", "plugin_needs_dep", "import crs_no_such_package_xyz\nFactory = None\n")
    with pytest.raises(PluginNotInstalled, match="needs the package 'crs_no_such_package_xyz', which is not installed"):
        plugins.load_factory("needs_dep")
    with pytest.raises(PluginNotInstalled, match="no installed package provides the entry point 'nobody'"):
        plugins.load_factory("nobody")


def test_a_plugin_importing_a_broken_module_of_ours_raises_that_error(entry_points, tmp_path, caplog):
    entry_points("uses_old", "plugin_uses_old", "from crs_backends.retrieval import RetrievalCRS as Factory\n")
    with pytest.raises(ModuleNotFoundError) as caught:
        plugins.load_factory("uses_old")
    assert not isinstance(caught.value, PluginNotInstalled) and caught.value.name == "crs_backends.retrieval"
    # through the systems file: listed as not available, the log names the module that failed
    path = tmp_path / "systems.toml"
    path.write_text('[[system]]\nid = "old"\nlabel = "Old"\nentry_point = "uses_old"\n')
    with caplog.at_level(logging.ERROR):
        system = load_systems_file(path)[0].build()
    assert system.info.variant.startswith("not available: its plug-in 'uses_old' could not be loaded")
    assert "No module named 'crs_backends.retrieval'" in caplog.text and "not installed" not in caplog.text
