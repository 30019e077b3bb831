"""What the tabs need from the rest of the product, gathered in one object.

Built once by ``app.py`` and passed to every tab; tabs call these methods and
hold no logic of their own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from crs_backends.base import CRSSystem, SystemInfo
from crs_backends.registry import get_system, system_ids
from llm.config import RoleConfig, all_role_configs
from storage.db import default_db_path, get_db


@dataclass
class Services:
    db_path: Path
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    @classmethod
    def from_env(cls) -> "Services":
        path = default_db_path()
        get_db(path)  # create and migrate at start, so a bad path fails loudly
        return cls(db_path=path)

    def system_ids(self) -> list[str]:
        return system_ids()

    def system(self, system_id: str) -> CRSSystem:
        return get_system(system_id, db_path=self.db_path)

    def system_info(self, system_id: str) -> SystemInfo:
        return self.system(system_id).info

    def role_configs(self) -> list[RoleConfig]:
        return all_role_configs(self.env)
