"""The operator's systems file: remote (HTTP) systems and plug-ins registered without a code change.

``CRS_SYSTEMS_FILE`` names a TOML file with one ``[[system]]`` table per system::

    [[system]]
    id = "my_crs"                      # stable id: stored with conversations, used by `simulate --systems`
    label = "My CRS"                   # shown in the Chat selector and after an arena vote
    description = "item-kNN + templates, v0.3"   # the selector's variant line
    catalog = "bundled"                # catalog it recommends from (default: the app's, CRS_CATALOG)
    url = "http://127.0.0.1:8800/"     # an HTTP system (crs-arena/1 protocol, docs/remote-crs.md), or a list of the
                                       # URLs of several workers serving it: turns go round them (docs/deploy.md) ...
    key_env = "MY_CRS_KEY"             # ... the NAME of the variable holding its key (sent as a Bearer token)
    timeout = 20                       # seconds per attempt (default CRS_LLM_TIMEOUT, else 60)
    max_retries = 2                    # (default CRS_LLM_MAX_RETRIES, else 3)
    list_size = 10                     # items kept per turn (1-100)

    [[system]]
    id = "toy"
    label = "Toy plug-in"
    entry_point = "toy"                # ... or a plug-in: a name in the `crs_arena.systems` entry-point group
    [system.options]                   # keyword arguments for the plug-in's class
    greeting = "Hello"

Only the operator registers systems: the file is read once, on the registry's first use (the app's start, a
command that needs the systems). Nothing in the app can add a system or point the server at a URL. A file that cannot be
used stops the start with ``<file>:<line>: <what is wrong>`` (an unknown key, a duplicate id, a URL that is not
http(s), a plug-in that is not installed, ...). Values are never echoed in those messages (a key pasted into
the wrong field must not reach a log).
"""

from __future__ import annotations

import logging
import os
import re
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crs_backends.base import DEFAULT_LIST_SIZE, CRSSystem, SystemInfo
from crs_backends.command_line import SystemsFileError
from crs_backends.remote_crs import RemoteConfig, RemoteCRS, RemoteCRSError, default_retries, default_timeout, http_url
from storage.records import Turn

log = logging.getLogger(__name__)

ENV = "CRS_SYSTEMS_FILE"
KINDS = ("http", "plugin")
COMMON_KEYS = ("id", "label", "description", "kind", "catalog", "list_size")
HTTP_KEYS = ("url", "key_env", "timeout", "max_retries")
PLUGIN_KEYS = ("entry_point", "options")
ALL_KEYS = COMMON_KEYS + HTTP_KEYS + PLUGIN_KEYS
_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,99}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_URLS = 16  # workers listed for one system


@dataclass(frozen=True)
class SystemEntry:
    """One ``[[system]]`` table, checked."""

    id: str
    label: str
    kind: str
    line: int
    description: str = ""
    catalog: str | None = None
    list_size: int = DEFAULT_LIST_SIZE
    url: str | None = None  # the first of urls
    urls: tuple[str, ...] = ()  # every worker's URL, when the entry lists several
    key_env: str | None = None
    timeout: float = 60.0
    max_retries: int = 3
    entry_point: str | None = None
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def variant(self) -> str:
        """The selector's line before the system has answered."""
        if self.description:
            return self.description
        return "remote system (HTTP)" if self.kind == "http" else f"plug-in {self.entry_point}"

    def catalog_name(self, env=os.environ) -> str:
        return self.catalog or env.get("CRS_CATALOG") or "bundled"

    def remote_config(self, *, max_retries: int | None = None, timeout: float | None = None) -> RemoteConfig:
        return RemoteConfig(
            id=self.id,
            label=self.label,
            url=self.url or "",
            description=self.description,
            key_env=self.key_env,
            catalog=self.catalog,
            timeout=self.timeout if timeout is None else timeout,
            max_retries=self.max_retries if max_retries is None else max_retries,
            list_size=self.list_size,
            urls=self.urls,
        )

    def build(self, *, max_retries: int | None = None, timeout: float | None = None) -> CRSSystem:
        """The system (no request is sent). A plug-in or catalog that cannot be loaded gives a stand-in whose
        variant line says so and whose every turn is a plain error, so that listing systems never fails."""
        from catalog.catalog import get_catalog

        try:
            catalog = get_catalog(self.catalog_name())
        except (OSError, ValueError) as e:
            log.error("system %s: catalog %r cannot be loaded: %s", self.id, self.catalog_name(), e)
            return Unavailable(self, f"its catalog {self.catalog_name()!r} cannot be loaded")
        if self.kind == "http":
            return RemoteCRS(self.remote_config(max_retries=max_retries, timeout=timeout), catalog)
        from crs_backends import plugins

        try:
            factory = plugins.load_factory(self.entry_point or "")
            return plugins.PluginSystem(
                system_id=self.id,
                label=self.label,
                description=self.description,
                entry_point=self.entry_point or "",
                factory=factory,
                catalog=catalog,
                options=self.options,
                list_size=self.list_size,
            )
        except Exception:  # an import error or a constructor that raised: the log has it, people get a sentence
            log.exception("plug-in %s (%s) could not be loaded", self.id, self.entry_point)
            return Unavailable(self, f"its plug-in {self.entry_point!r} could not be loaded (see the server log)")


class Unavailable(CRSSystem):
    """Stands in for a registered system that cannot be built: listed as not available, every turn an error."""

    def __init__(self, entry: SystemEntry, reason: str):
        self.entry, self.reason = entry, reason

    @property
    def info(self) -> SystemInfo:
        return SystemInfo(id=self.entry.id, label=self.entry.label, variant=f"not available: {self.reason}")

    def respond(self, conversation) -> Turn:
        raise RemoteCRSError(f"{self.entry.label} is not available: {self.reason}.", kind="config", model=self.entry.id)


def load_systems_file(
    path: str | os.PathLike,
    *,
    reserved: Iterable[str] = (),
    env=os.environ,
    installed_plugins: Callable[[], Iterable[str]] | None = None,
) -> list[SystemEntry]:
    """Read and check the systems file. ``reserved``: ids already taken (the built-in systems).

    Raises :class:`SystemsFileError` naming the file and line of the first problem.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SystemsFileError(f"{path}:0: the systems file cannot be read ({type(e).__name__})") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        line = re.search(r"line (\d+)", str(e))
        raise SystemsFileError(f"{path}:{line.group(1) if line else 0}: not valid TOML ({_toml_reason(e)})") from None
    lines = _Lines(text)

    def fail(line: int, message: str):
        raise SystemsFileError(f"{path}:{line}: {message}")

    for key in data:
        if key != "system":
            fail(lines.top_level(key), f"unknown key {key!r} (the file holds [[system]] tables only)")
    tables = data.get("system", [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        fail(lines.top_level("system"), "'system' must be written as [[system]] tables")
    reserved = set(reserved)
    plugins_installed = None
    entries: list[SystemEntry] = []
    ids: dict[str, int] = {}
    labels: dict[str, int] = {}
    for index, table in enumerate(tables):
        at = lambda key=None, i=index: lines.key(i, key)  # noqa: E731
        for key in table:
            if key not in ALL_KEYS:
                fail(at(key), f"unknown key {key!r} in [[system]] (known: {', '.join(ALL_KEYS)})")
        system_id = table.get("id")
        if not isinstance(system_id, str) or not _ID.match(system_id):
            fail(at("id"), "'id' is required: lower-case letters, digits, '_' or '-', at most 40 characters")
        if system_id in reserved:
            fail(at("id"), f"duplicate id {system_id!r}: a built-in system has it")
        if system_id in ids:
            fail(at("id"), f"duplicate id {system_id!r} (first used on line {ids[system_id]})")
        ids[system_id] = at("id")
        label = _text(table, "label", 60, at, fail, required=True)
        if label.casefold() in labels:
            fail(at("label"), f"duplicate label {label!r} (first used on line {labels[label.casefold()]})")
        labels[label.casefold()] = at("label")
        description = _text(table, "description", 200, at, fail)
        catalog = _text(table, "catalog", 200, at, fail) or None
        if catalog and not _catalog_exists(catalog):
            fail(at("catalog"), f"no catalog {catalog!r}: use 'bundled' or a dataset folder under CRS_DATA_DIR")
        list_size = _integer(table, "list_size", DEFAULT_LIST_SIZE, 1, 100, at, fail)
        if "url" in table and "entry_point" in table and "kind" not in table:
            fail(
                max(at("url"), at("entry_point")),
                "a system has either a 'url' (HTTP) or an 'entry_point' (plug-in), not both",
            )
        kind = table.get("kind") or ("plugin" if "entry_point" in table else "http")
        if kind not in KINDS:
            fail(at("kind"), f"'kind' must be one of {', '.join(KINDS)}")
        wrong = [k for k in table if k in (PLUGIN_KEYS if kind == "http" else HTTP_KEYS)]
        if wrong:
            fail(
                at(wrong[0]),
                f"key {wrong[0]!r} does not apply to {'an HTTP' if kind == 'http' else 'a plug-in'} system",
            )
        common = dict(
            id=system_id,
            label=label,
            kind=kind,
            line=at(),
            description=description,
            catalog=catalog,
            list_size=list_size,
        )
        if kind == "http":
            url = table.get("url")
            if url is None:
                fail(at(), f"system {system_id!r} needs a 'url' (or an 'entry_point' for a plug-in)")
            listed = url if isinstance(url, list) else [url]
            if not 1 <= len(listed) <= MAX_URLS:
                fail(at("url"), f"'url' must be a URL or a list of 1 to {MAX_URLS} URLs (one per worker)")
            urls: list[str] = []
            for n, one in enumerate(listed, 1):
                try:
                    checked = http_url(one)
                except ValueError as e:
                    fail(at("url"), f"'url'{f' (entry {n})' if len(listed) > 1 else ''}: {e}")
                if checked in urls:
                    fail(at("url"), f"'url' lists the same URL twice (entry {n})")
                urls.append(checked)
            url = urls[0]
            key_env = table.get("key_env")
            if key_env is not None and (not isinstance(key_env, str) or not _ENV_NAME.match(key_env)):
                fail(
                    at("key_env"),
                    "'key_env' is the NAME of an environment variable (e.g. MY_CRS_KEY), never the key itself",
                )
            timeout = _number(table, "timeout", default_timeout(env), 0.1, 600, at, fail)
            retries = _integer(table, "max_retries", default_retries(env), 0, 10, at, fail)
            entries.append(
                SystemEntry(
                    **common,
                    url=url,
                    urls=tuple(urls) if len(urls) > 1 else (),
                    key_env=key_env,
                    timeout=timeout,
                    max_retries=retries,
                )
            )
        else:
            name = table.get("entry_point")
            if not isinstance(name, str) or not name.strip():
                fail(
                    at("entry_point") if "entry_point" in table else at(),
                    f"system {system_id!r} needs an 'entry_point' (the plug-in's name in crs_arena.systems)",
                )
            if plugins_installed is None:
                if installed_plugins is None:
                    from crs_backends import plugins

                    installed_plugins = lambda: plugins.available().keys()  # noqa: E731
                plugins_installed = set(installed_plugins())
            if name not in plugins_installed:
                known = ", ".join(sorted(plugins_installed)) or "none"
                fail(
                    at("entry_point"),
                    f"no installed package provides the plug-in {name!r} (group crs_arena.systems; installed: {known})",
                )
            options = table.get("options", {})
            if not isinstance(options, dict):
                fail(at("options"), "'options' must be a table ([system.options])")
            entries.append(SystemEntry(**common, entry_point=name, options=dict(options)))
    return entries


def _catalog_exists(name: str) -> bool:
    from catalog.catalog import data_dir

    if name == "bundled" or (Path(name) / "id2info.json").exists():
        return True
    base = data_dir()
    return base is not None and (base / name / "id2info.json").exists()


def _toml_reason(error: Exception) -> str:
    return re.sub(r"\s*\(at line \d+, column \d+\)", "", str(error))[:120]


def _text(table, key, limit, at, fail, *, required=False) -> str:
    value = table.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or not value.strip() or len(value) > limit or _CONTROL.search(value):
        fail(
            at(key) if key in table else at(),
            f"'{key}' {'is required and ' if required else ''}must be a single-line string of 1 to {limit} characters",
        )
    return value.strip()


def _integer(table, key, default, low, high, at, fail) -> int:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        fail(at(key), f"'{key}' must be a whole number from {low} to {high}")
    return value


def _number(table, key, default, low, high, at, fail) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        fail(at(key), f"'{key}' must be a number of seconds from {low:g} to {high:g}")
    return float(value)


class _Lines:
    """Where things are in the file: the line of each [[system]] table and of each key in it.

    tomllib keeps no positions, so the text is scanned line by line (multi-line strings skipped); a key
    whose line cannot be found is reported at its table's header.
    """

    _HEADER = re.compile(r"^\s*\[\[\s*([^\]]+?)\s*\]\]")
    _TABLE = re.compile(r"^\s*\[\s*([^\]]+?)\s*\]")
    _KEY = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)\s*[=.]""")

    def __init__(self, text: str):
        self.tables: list[dict[str, int]] = []
        self.top: dict[str, int] = {}
        current: dict[str, int] | None = self.top
        in_string = None
        for number, line in enumerate(text.splitlines(), 1):
            if in_string:
                if line.count(in_string) % 2 == 1:
                    in_string = None
                continue
            header = self._HEADER.match(line)
            table = self._TABLE.match(line) if not header else None
            if header:
                name = header.group(1).strip()
                if name == "system":
                    current = {"": number}
                    self.tables.append(current)
                else:
                    self.top.setdefault(name.split(".")[0].strip("\"'"), number)
                    current = None
            elif table:
                name = table.group(1).strip()
                first, _, sub = name.partition(".")
                if first != "system":
                    self.top.setdefault(first.strip("\"'"), number)
                elif sub and self.tables:  # [system.options] belongs to the [[system]] above it
                    self.tables[-1].setdefault(sub.strip().strip("\"'"), number)
                current = None  # a sub-table such as [system.options]: its keys are not the system's
            else:
                key = self._KEY.match(line)
                if key and current is not None:
                    current.setdefault(key.group(1).strip("\"'"), number)
            for quote in ('"""', "'''"):
                if line.count(quote) % 2 == 1:
                    in_string = quote
                    break

    def key(self, index: int, key: str | None = None) -> int:
        if index >= len(self.tables):
            return 0
        table = self.tables[index]
        return table.get(key, table[""]) if key else table[""]

    def top_level(self, key: str) -> int:
        return self.top.get(key, 1)


# -- what the registry registers ----------------------------------------------------------------------

_loaded: dict[str, list[SystemEntry]] = {}  # cache: systems file path -> its entries


def configured_path(env=os.environ) -> Path | None:
    value = (env.get(ENV) or "").strip()
    return Path(value) if value else None


def registered(env=os.environ) -> list[SystemEntry]:
    """The entries of the configured systems file (as loaded at start); [] when none is configured."""
    path = configured_path(env)
    if path is None:
        return []
    if str(path) not in _loaded:
        _loaded[str(path)] = load_systems_file(path, env=env)
    return _loaded[str(path)]


def operator_systems(
    *, reserved: Iterable[str] = (), env=os.environ
) -> dict[str, tuple[str, Callable[..., CRSSystem]]]:
    """``{id: (label, factory)}`` for the registry, from the configured systems file (raises
    :class:`SystemsFileError` when it cannot be used)."""
    path = configured_path(env)
    if path is None:
        return {}
    entries = load_systems_file(path, reserved=reserved, env=env)
    _loaded[str(path)] = entries
    log.info("systems file %s: %s", path, ", ".join(e.id for e in entries) or "no systems")
    return registry_entries(entries)


def registry_entries(entries: Iterable[SystemEntry]) -> dict[str, tuple[str, Callable[..., CRSSystem]]]:
    """The registry's shape for ``entries``: ``{id: (label, factory(db_path))}``."""
    return {e.id: (e.label, EntryFactory(e)) for e in entries}


@dataclass(frozen=True, eq=False)  # hashed and compared by identity, as the function it replaces was
class EntryFactory:
    """The registry's factory for a systems-file entry; it keeps the entry (the checker and Settings tab read it)."""

    entry: SystemEntry

    def __call__(self, db_path=None) -> CRSSystem:
        return self.entry.build()
