"""The systems under test: one interface (`CRSSystem`) and chat sessions.

The registry (:mod:`crs_backends.registry`) is imported where it is used, never here: importing the package
(for training, a bench, a model file) reads no systems file and builds nothing.
"""

from crs_backends.base import CRSSystem, SystemInfo
from crs_backends.session import ChatSession, EmptyMessage, UserMessage, prepare_user_message

__all__ = [
    "CRSSystem",
    "ChatSession",
    "EmptyMessage",
    "SystemInfo",
    "UserMessage",
    "prepare_user_message",
]
