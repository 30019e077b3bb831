"""Which systems exist and how to build one."""

from __future__ import annotations

import os
from typing import Callable

from catalog.catalog import get_catalog
from crs_backends.base import CRSSystem, SystemInfo
from llm.registry import client_for


def _chatcrs(db_path) -> CRSSystem:
    from crs_backends.chatcrs import ChatCRS

    return ChatCRS(client_for("crs", db_path=db_path), catalog_for_chat())


def _retrieval(db_path) -> CRSSystem:
    from crs_backends.retrieval import RetrievalCRS

    return RetrievalCRS(catalog_for_chat())


# id -> (label, factory). The neural systems join this table as they land.
SYSTEMS: dict[str, tuple[str, Callable[..., CRSSystem]]] = {
    "chatcrs": ("ChatCRS", _chatcrs),
    "retrieval": ("Retrieval baseline", _retrieval),
}

_built: dict[tuple[str, str], CRSSystem] = {}


def catalog_for_chat():
    """The catalog systems recommend from: ``CRS_CATALOG`` (default: the bundled movies)."""
    return get_catalog(os.environ.get("CRS_CATALOG", "bundled"))


def system_ids() -> list[str]:
    return list(SYSTEMS)


def get_system(system_id: str, *, db_path=None) -> CRSSystem:
    """The (cached) system for ``system_id``."""
    if system_id not in SYSTEMS:
        raise KeyError(f"unknown system {system_id!r}; known: {', '.join(SYSTEMS)}")
    key = (system_id, str(db_path))
    if key not in _built:
        _built[key] = SYSTEMS[system_id][1](db_path)
    return _built[key]


def system_infos(*, db_path=None) -> list[SystemInfo]:
    return [get_system(s, db_path=db_path).info for s in SYSTEMS]
