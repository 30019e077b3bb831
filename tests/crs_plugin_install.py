"""Register the toy plug-in package (tests/crs_plugin_example) the way an installation does: a
``.dist-info`` folder with its entry points, read from pyproject.toml, on a path Python searches."""

from __future__ import annotations

import tomllib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent / "crs_plugin_example"


def install_toy_plugin(site: Path) -> list[str]:
    """Write ``toy_crs_plugin-<version>.dist-info`` into ``site``; returns the paths to put on sys.path
    (or PYTHONPATH): ``site`` and the package's folder."""
    project = tomllib.loads((PACKAGE / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    dist = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n", encoding="utf-8"
    )
    lines = []
    for group, points in project["entry-points"].items():
        lines.append(f"[{group}]")
        lines += [f"{name} = {target}" for name, target in points.items()]
    (dist / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [str(site), str(PACKAGE)]
