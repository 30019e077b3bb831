"""What the tabs need from the rest of the product, gathered in one object.

Built once by ``app.py`` and passed to every tab; tabs call these methods (and the service
functions of ``arena`` and ``evaluators``) and hold no logic of their own. Nothing else in ``ui``
opens the database: :meth:`Services.db` is the connection the tabs hand to ``arena``. At start
:meth:`Services.from_env` opens (creates and migrates) it, so a bad path fails loudly, and marks
evaluations a crash left ``running`` as ``interrupted``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlite_utils import Database

from arena.board_view import BoardView, board_view
from arena.crsarena_import import DEFAULT_CATALOG, ImportReport, LabelImportReport, import_dial, import_eval_labels
from crs_backends import health
from crs_backends.base import CRSSystem, SystemInfo
from crs_backends.registry import catalog_for_chat, get_system, ready_system_ids, system_ids, system_info
from llm_clients.config import RoleConfig, all_role_configs
from llm_clients.registry import model_for
from storage.conversations import get_conversation
from storage.db import DatabaseFacts, default_db_path, describe, get_db
from storage.evaluations import latest_turn_scores, mark_interrupted
from storage.records import Conversation
from storage.text import clean_text
from storage.uploads import StoreReport, UploadRefused, store

# clean_text: what every tab applies to text a person typed; UploadRefused: what store_upload raises, for people
__all__ = ["Services", "UploadRefused", "clean_text"]


@dataclass
class Services:
    db_path: Path
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    refresher: Any = None  # arena.board_cache.Refresher once the app runs
    interrupted: int = 0  # evaluations found cut off (status running) at start, now 'interrupted'
    notices: list[str] = field(default_factory=list)  # what the start-up checks decided (shown on every page)
    scoring: Any = None  # evaluators.background.BackgroundScorer once the app runs (scores every conversation)
    restore: Any = None  # arena.hub_restore.RestoreReport: what the start restored from the Hub dataset

    @classmethod
    def from_env(cls) -> Services:
        """Open (create and migrate) the database at start, so a bad path fails loudly, and mark
        evaluations a crash left ``running`` as ``interrupted``."""
        path = default_db_path()  # raises DatabasePathError for a mistyped CRS_ARENA_DB
        return cls(db_path=path, interrupted=mark_interrupted(get_db(path)))

    def db(self) -> Database:
        """The calling thread's connection to the app's database."""
        return get_db(self.db_path)

    def conversation(self, conversation_id: str) -> Conversation | None:
        """A stored conversation with its turns, or None when there is none with that id."""
        return get_conversation(self.db(), conversation_id)

    def database_facts(self) -> DatabaseFacts:
        return describe(self.db_path)

    def leaderboard(
        self,
        *,
        domain: str | None,
        dataset: str | None,
        scorer: str | None,
        style: bool = False,
        kind: str | None = None,
        revealed: bool = False,
    ) -> BoardView:
        """The leaderboard as displayed for these filters (None: no filter, or the default scorer); ``style``: the
        style-controlled ratings; ``kind``: one kind of request's board; ``revealed``: votes cast after a reply named
        a system rated too."""
        return board_view(
            self.db(), domain=domain, dataset=dataset, scorer=scorer, style=style, kind=kind, revealed=revealed
        )

    def leaderboard_kinds(self, *, domain: str | None, revealed: bool = False) -> dict[str, int]:
        """Votes per kind of request, as the kinds' boards count them (:func:`arena.board_compute.kind_counts`)."""
        from arena.board_compute import kind_counts

        return kind_counts(self.db(), domain=domain, revealed=revealed)

    def import_crsarena(self) -> ImportReport:
        """Import CRSArena-Dial from ``<data dir>/crsarena``, exactly as ``python -m arena import-crsarena``
        does; raises :class:`arena.crsarena_import.ImportRefused` with a message for people."""
        report = import_dial(self.db(), catalog_name=DEFAULT_CATALOG, score=True)
        self.board_changed()
        return report

    def import_crsarena_eval(self) -> LabelImportReport:
        """Import CRSArena-Eval's labelled dialogues, exactly as ``python -m arena import-crsarena-eval`` does;
        raises :class:`arena.crsarena_import.ImportRefused` with a message for people."""
        report = import_eval_labels(self.db(), catalog_name=DEFAULT_CATALOG, score=True)
        self.board_changed()
        return report

    def store_upload(self, conversations: list[Conversation]) -> StoreReport:
        """Store uploaded conversations in the upload namespace (system ``upload:<name>``; stored ones are never
        touched); raises :class:`UploadRefused` with a message for people when one breaks a rule of the namespace."""
        return store(self.db(), conversations, upload=True)

    def turn_scores(self, conversation_id: str | None) -> dict[int, dict]:
        """Each system turn's scores from the conversation's latest evaluation that has them (by turn index)."""
        return latest_turn_scores(self.db(), conversation_id) if conversation_id else {}

    def board_changed(self) -> None:
        """Votes or evaluations changed: let the leaderboard's refresher store the new board soon."""
        if self.refresher is not None:
            self.refresher.poke()

    def conversation_changed(self, *conversation_ids: str | None, ended: bool = False) -> None:
        """A chat or arena conversation got a turn (``ended``: a vote closed it): the background scorer scores it
        once it goes idle, or at once when it ended. Returns at once: nobody waits for the judge."""
        if self.scoring is not None:
            for conversation_id in conversation_ids:
                self.scoring.touch(conversation_id, ended=ended)

    def system_ids(self) -> list[str]:
        return system_ids()

    def ready_system_ids(self) -> list[str]:
        """Systems that answer without building anything first (neural ones without checkpoints are left out)."""
        return ready_system_ids(db_path=self.db_path)

    def resting_system_labels(self) -> list[str]:
        """Labels of the systems the arena leaves out for now: their latest answer failed a moment ago."""
        return [self.system_info(s).label for s in health.resting_ids(self.system_ids())]

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

    def chat_domain(self) -> str:
        """The domain of the catalog the systems recommend from (a battle's domain)."""
        return catalog_for_chat().domain

    def role_configs(self) -> list[RoleConfig]:
        return all_role_configs(self.env)

    def model_health(self, config: RoleConfig) -> tuple[bool, str]:
        """One short call to the role's model: (ok, detail). Raises when the model cannot even be built."""
        return model_for(config).health()
