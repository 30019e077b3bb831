"""Systems from installed Python packages: the ``crs_arena.systems`` entry-point group.

A package declares, in its ``pyproject.toml``::

    [project.entry-points."crs_arena.systems"]
    my_crs = "my_package.system:MyCRS"

``MyCRS`` is a :class:`~crs_backends.base.CRSSystem` subclass (or any callable returning one), called as
``MyCRS(catalog, **options)`` with the catalog the app recommends from and the ``options`` table of its
systems-file entry. Installing a package registers nothing: the operator lists it in the systems file
(``entry_point = "my_crs"``). Its turns are checked like a remote system's (text, items mapped onto the
catalog, limits), and whatever it raises becomes a plain message, the traceback going to the server log.
"""

from __future__ import annotations

import importlib.util
import json
import logging
from collections.abc import Callable
from importlib import metadata
from typing import Any

from catalog.catalog import Catalog
from crs_backends.base import DEFAULT_LIST_SIZE, CRSSystem, SystemInfo
from crs_backends.remote_crs import InvalidResponse, RemoteCRSError, parse_response
from llm_clients.types import LLMError
from storage.records import Conversation, Turn

log = logging.getLogger(__name__)

GROUP = "crs_arena.systems"

# this repository's top-level packages: one of them failing to import is a bug, never "not installed"
OWN_PACKAGES = frozenset(
    {"app", "arena", "commands", "catalog", "crs_backends", "evaluators", "llm_clients", "storage", "ui"}
)


class PluginNotInstalled(LookupError):
    """No installed package provides the entry point, or the package it names needs one that is not installed."""


def missing_package(error: ImportError) -> str | None:
    """The third-party package whose absence ``error`` reports, or None when ``error`` means something else.

    Only a :class:`ModuleNotFoundError` for a top-level package that is not one of ours and cannot be found
    is "not installed". A module of this repository that is missing or fails to import, a submodule missing
    from an installed package, or ``cannot import name`` is a broken installation or a bug: the caller
    re-raises it, or reports it as an error naming the module, never as something to install.
    """
    if not isinstance(error, ModuleNotFoundError) or not error.name:
        return None
    top = error.name.partition(".")[0]
    if top in OWN_PACKAGES:
        return None
    try:
        found = importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        found = False
    return None if found else top


def available() -> dict[str, metadata.EntryPoint]:
    """Entry points installed in the ``crs_arena.systems`` group, by name."""
    return {ep.name: ep for ep in metadata.entry_points(group=GROUP)}


def describe(ep: metadata.EntryPoint) -> str:
    """``name = module:attr (distribution version)`` for listings."""
    dist = getattr(ep, "dist", None)
    where = f" ({dist.name} {dist.version})" if dist is not None else ""
    return f"{ep.name} = {ep.value}{where}"


class PluginSystem(CRSSystem):
    """A plug-in's system under the id, label and description the operator gave it, its turns checked."""

    def __init__(
        self,
        *,
        system_id: str,
        label: str,
        description: str,
        entry_point: str,
        factory: Callable[..., Any],
        catalog: Catalog,
        options: dict[str, Any] | None = None,
        list_size: int = DEFAULT_LIST_SIZE,
    ):
        self.system_id, self.label, self.description = system_id, label, description
        self.entry_point = entry_point
        self.catalog = catalog
        self.list_size = list_size
        try:
            inner = factory(catalog, **(options or {}))
        except Exception:
            log.exception("plug-in %s (%s) could not be built", system_id, entry_point)
            raise RemoteCRSError(
                f"{label} could not be started (plug-in {entry_point}); the details are in the server log.",
                kind="plugin",
                model=system_id,
            ) from None
        if not isinstance(inner, CRSSystem):
            raise RemoteCRSError(
                f"{label}: plug-in {entry_point} did not give a CRSSystem (it gave a {type(inner).__name__}).",
                kind="plugin",
                model=system_id,
            )
        self.inner = inner

    @property
    def info(self) -> SystemInfo:
        try:
            own = self.inner.info
            demo = bool(own.demo)
        except Exception:  # a broken info property must not break the selector
            own, demo = None, False
        variant = self.description or (own.variant if own else "") or f"plug-in {self.entry_point}"
        return SystemInfo(id=self.system_id, label=self.label, variant=variant, demo=demo)

    def warm_up(self) -> None:
        prepare = getattr(self.inner, "warm_up", None)
        if prepare:
            prepare()

    def respond(self, conversation: Conversation) -> Turn:
        try:
            turn = self.inner.respond(conversation)
        except LLMError as e:  # the plug-in's own model failed: its message is already meant for people
            raise RemoteCRSError(f"{self.label}: {e}", kind=getattr(e, "kind", "error"), model=self.system_id) from None
        except Exception:
            log.exception("plug-in system %s failed on a turn", self.system_id)
            raise RemoteCRSError(
                f"{self.label} failed on this turn; the details are in the server log.",
                kind="plugin",
                model=self.system_id,
            ) from None
        return self._checked(turn)

    def _checked(self, turn: Any) -> Turn:
        if not isinstance(turn, Turn) or turn.role != "system":
            log.warning("plug-in system %s returned %r, not a system Turn", self.system_id, type(turn).__name__)
            raise RemoteCRSError(
                f"{self.label} gave an invalid answer (not a system turn); nothing was stored.",
                kind="bad_response",
                model=self.system_id,
            )
        data = {"text": turn.text, "items": [{"id": ref.id, "title": ref.title} for ref in turn.items]}
        try:
            reply = parse_response(data, self.catalog, list_size=self.list_size)
        except InvalidResponse as e:
            raise RemoteCRSError(
                f"{self.label} gave an invalid answer ({e}); nothing was stored.",
                kind="bad_response",
                model=self.system_id,
            ) from None
        metadata = _storable(turn.metadata)
        metadata.update(
            {
                "system": self.system_id,
                "plugin": self.entry_point,
                "items_returned": reply.returned,
                "items_unmapped": reply.unmapped_count,
            }
        )
        if reply.unmapped:
            metadata["unmapped"] = reply.unmapped
        return Turn(role="system", text=reply.text, items=[i.ref() for i in reply.items], metadata=metadata)


def _storable(metadata: Any) -> dict[str, Any]:
    """The plug-in's own turn metadata if it can be stored as JSON (and is small), else nothing."""
    try:
        text = json.dumps(dict(metadata or {}), allow_nan=False)
    except (TypeError, ValueError):
        return {}
    return json.loads(text) if len(text) <= 100_000 else {}


def load_factory(name: str) -> Callable[..., Any]:
    """The object the entry point ``name`` names (imports its module).

    Raises :class:`PluginNotInstalled` when no installed package provides ``name`` or its module needs a
    package that is not installed (the message names it); any other import error (a broken module of the
    plug-in's or of ours) propagates as it is, with its module name and traceback.
    """
    found = available().get(name)
    if found is None:
        raise PluginNotInstalled(f"no installed package provides the entry point {name!r} in group {GROUP!r}")
    try:
        return found.load()
    except ImportError as e:
        package = missing_package(e)
        if package is None:
            raise
        raise PluginNotInstalled(
            f"the entry point {name!r} ({found.value}) needs the package {package!r}, which is not installed"
        ) from e
