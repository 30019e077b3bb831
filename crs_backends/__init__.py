"""The systems under test: one interface (`CRSSystem`), their registry and chat sessions."""

from crs_backends.base import CRSSystem, SystemInfo
from crs_backends.registry import get_system, system_ids, system_infos
from crs_backends.session import ChatSession, EmptyMessage, UserMessage, prepare_user_message

__all__ = [
    "CRSSystem",
    "ChatSession",
    "EmptyMessage",
    "SystemInfo",
    "UserMessage",
    "get_system",
    "prepare_user_message",
    "system_ids",
    "system_infos",
]
