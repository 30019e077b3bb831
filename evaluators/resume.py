"""Resuming evaluations a crash cut off.

At start the app marks evaluations still ``running`` as ``interrupted``
(:func:`storage.evaluations.mark_interrupted`). :func:`resume_interrupted` (the Evaluate tab's
"Resume interrupted evaluations" and ``python -m evaluators resume``) runs each of them again with
the judge setup it was started with: the pipeline reuses the stored evaluation (same fingerprint),
keeps every factor score and debate message it holds, and fills only the gaps, so nothing is
judged twice and no row is duplicated. An evaluation whose setup cannot be rebuilt from the current
configuration (another judge model is configured now) is left ``interrupted`` and the report says
why; one superseded by a later evaluation with the same setup is marked ``superseded``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from evaluators.pipeline import EvaluationSetup, evaluate_conversation
from evaluators.scorer_setup import build_setup, stored_options
from llm_clients.types import LLMError
from storage.conversations import get_conversation
from storage.db import get_db
from storage.evaluations import evaluations_for, evaluations_with_status, set_evaluation_status

log = logging.getLogger(__name__)


@dataclass
class ResumeReport:
    resumed: list[str] = field(default_factory=list)  # evaluation ids now finished
    left: list[tuple[str, str]] = field(default_factory=list)  # (evaluation id, why it stays interrupted)
    superseded: int = 0

    def summary(self) -> str:
        line = f"{len(self.resumed)} interrupted evaluation(s) resumed"
        if self.superseded:
            line += f", {self.superseded} superseded by a later evaluation with the same setup"
        if self.left:
            line += f", {len(self.left)} left interrupted: " + "; ".join(f"{e}: {why}" for e, why in self.left[:5])
        return line


def interrupted(db_path) -> list[dict]:
    """The evaluations waiting to be resumed (see :func:`storage.evaluations.evaluations_with_status`)."""
    return evaluations_with_status(get_db(db_path), "interrupted")


def setup_for(row: dict, db_path) -> EvaluationSetup | None:
    """The judge setup an evaluation was started with, rebuilt from its stored configuration, or None
    when the current configuration cannot give the same fingerprint."""
    candidates = stored_options(row["scorer"], row["config"] or {})
    for options in candidates:
        try:
            setup = build_setup(db_path=db_path, **options)
        except (LLMError, ValueError, FileNotFoundError):
            continue
        if setup.fingerprint() == row["fingerprint"]:
            return setup
    return None


def resume_interrupted(
    db_path, *, limit: int | None = None, progress: Callable[[int, int], None] | None = None
) -> ResumeReport:
    """Finish the interrupted evaluations (oldest first, at most ``limit``)."""
    report = ResumeReport()
    rows = interrupted(db_path)[: limit or None]
    for n, row in enumerate(rows, 1):
        db = get_db(db_path)
        conversation = get_conversation(db, row["conversation_id"])
        latest = evaluations_for(db, row["conversation_id"], fingerprint=row["fingerprint"])
        if latest and latest[-1] != row["id"]:
            set_evaluation_status(db, row["id"], "superseded")
            report.superseded += 1
        elif conversation is None or not any(t.role == "system" for t in conversation.turns):
            report.left.append((row["id"], "its conversation has no system turn"))
        else:
            setup = setup_for(row, db_path)
            if setup is None:
                report.left.append((row["id"], f"its judge setup ({row['scorer']}) is not the one configured now"))
            else:
                try:
                    evaluate_conversation(conversation, setup, db_path=db_path)
                    report.resumed.append(row["id"])
                except (LLMError, ValueError) as e:
                    report.left.append((row["id"], str(e)))
        if progress:
            progress(n, len(rows))
    return report
