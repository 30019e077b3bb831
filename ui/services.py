"""What the tabs need from the rest of the product, gathered in one object.

Built once by ``app.py`` and passed to every tab; tabs call these methods and
hold no logic of their own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crs_backends.base import CRSSystem, SystemInfo
from crs_backends.registry import get_system, ready_system_ids, system_ids, system_info
from llm_clients.config import RoleConfig, all_role_configs
from storage.db import default_db_path, get_db


@dataclass
class Services:
    db_path: Path
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    refresher: Any = None  # arena.board.Refresher once the app runs
    interrupted: int = 0  # evaluations found cut off (status running) at start, now 'interrupted'
    notices: list[str] = field(default_factory=list)  # what the start-up checks decided (shown on every page)

    @classmethod
    def from_env(cls) -> Services:
        """Open (create and migrate) the database at start, so a bad path fails loudly, and mark
        evaluations a crash left ``running`` as ``interrupted``."""
        from storage.evaluations import mark_interrupted

        path = default_db_path()
        interrupted = mark_interrupted(get_db(path))
        return cls(db_path=path, interrupted=interrupted)

    def board_changed(self) -> None:
        """Votes or evaluations changed: let the leaderboard's refresher store the new board soon."""
        if self.refresher is not None:
            self.refresher.poke()

    def system_ids(self) -> list[str]:
        return system_ids()

    def ready_system_ids(self) -> list[str]:
        """Systems that answer without building anything first (neural ones without checkpoints are left out)."""
        return ready_system_ids(db_path=self.db_path)

    def system(self, system_id: str) -> CRSSystem:
        """The system, loaded (or built) on first use; raises ``SystemUnavailable`` with a message for people."""
        return get_system(system_id, db_path=self.db_path)

    def system_info(self, system_id: str) -> SystemInfo:
        """What the system runs; a neural system is described without being loaded or built."""
        return system_info(system_id, db_path=self.db_path)

    def system_choices(self) -> list[tuple[str, str]]:
        """(label with the version that runs, id) for the system selector."""
        choices = []
        for system_id in self.system_ids():
            info = self.system_info(system_id)
            choices.append((f"{info.label} · {info.variant}", system_id))
        return choices

    def role_configs(self) -> list[RoleConfig]:
        return all_role_configs(self.env)
