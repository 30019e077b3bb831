"""Simulated-user benchmark runs: the run header and one row per (record, system) dialogue.

A dialogue's conversation (history, turns with their ranked lists, targets) lives in the ordinary
``conversations`` / ``turns`` tables with source ``simulation``; the ``sim_dialogues`` row says how
far that pair got, so a rerun skips finished pairs and redoes the rest. :func:`finish_dialogue`
writes the conversation and the pair's result in one transaction: a run killed at any moment leaves
either a finished pair or one to redo, never half of one.
"""

from __future__ import annotations

from sqlite_utils import Database

from storage.conversations import save_conversation
from storage.db import write_transaction
from storage.jsonutil import dumps, loads
from storage.records import Conversation, utc_now

# statuses of a pair: ``done`` and ``failed`` are final (``failed`` = the system under test raised);
# ``running`` (interrupted) and ``error`` (the simulator or its endpoint failed) are redone by a rerun
FINAL = ("done", "failed")


def ensure_run(db: Database, run_id: str, *, config: dict, selection: dict) -> dict:
    """Create the run, or mark an existing one running again (its config is kept, the selection updated)."""
    now = utc_now()
    with write_transaction(db):
        if db.table("sim_runs").count_where("id = ?", [run_id]):
            db.table("sim_runs").update(run_id, {"status": "running", "selection": dumps(selection), "updated_at": now})
        else:
            db.table("sim_runs").insert(
                {
                    "id": run_id,
                    "config": dumps(config),
                    "selection": dumps(selection),
                    "status": "running",
                    "summary": dumps({}),
                    "report_dir": None,
                    "created_at": now,
                    "updated_at": now,
                }
            )
    run = get_run(db, run_id)
    assert run is not None  # written just above, on this connection
    return run


def get_run(db: Database, run_id: str) -> dict | None:
    rows = list(db.table("sim_runs").rows_where("id = ?", [run_id]))
    if not rows:
        return None
    row = rows[0]
    return {
        **row,
        "config": loads(row["config"], {}),
        "selection": loads(row["selection"], {}),
        "summary": loads(row["summary"], {}),
    }


def finish_run(db: Database, run_id: str, *, status: str, summary: dict, report_dir: str | None) -> None:
    with write_transaction(db):
        db.table("sim_runs").update(
            run_id, {"status": status, "summary": dumps(summary), "report_dir": report_dir, "updated_at": utc_now()}
        )


def dialogue_statuses(db: Database, run_id: str) -> dict[tuple[str, str], str]:
    """``(case_id, system_id) -> status`` for every pair of the run seen so far."""
    rows = db.table("sim_dialogues").rows_where("run_id = ?", [run_id], select="case_id, system_id, status")
    return {(r["case_id"], r["system_id"]): r["status"] for r in rows}


def start_dialogue(db: Database, run_id: str, case_id: str, system_id: str, conversation_id: str) -> int:
    """Mark a pair running (a new attempt); returns the attempt number (1 for the first)."""
    now = utc_now()
    with write_transaction(db):
        rows = list(
            db.table("sim_dialogues").rows_where(
                "run_id = ? and case_id = ? and system_id = ?", [run_id, case_id, system_id], select="attempts"
            )
        )
        attempts = (rows[0]["attempts"] or 0) + 1 if rows else 1
        db.table("sim_dialogues").upsert(
            {
                "run_id": run_id,
                "case_id": case_id,
                "system_id": system_id,
                "conversation_id": conversation_id,
                "status": "running",
                "attempts": attempts,
                "error": None,
                "created_at": now,
                "updated_at": now,
            },
            pk=("run_id", "case_id", "system_id"),
        )
    return attempts


def finish_dialogue(
    db: Database,
    run_id: str,
    case_id: str,
    system_id: str,
    *,
    conversation: Conversation | None,
    status: str,
    result: dict,
    error: str | None = None,
) -> None:
    """Store the conversation (replacing an earlier attempt's) and the pair's outcome, atomically."""
    with write_transaction(db):
        if conversation is not None:  # nested: part of this transaction
            save_conversation(db, conversation)
        db.table("sim_dialogues").update(
            (run_id, case_id, system_id),
            {
                "status": status,
                "result": dumps(result),
                "error": error,
                "updated_at": utc_now(),
                **({"conversation_id": conversation.id} if conversation is not None else {}),
            },
        )


def set_dialogue_evaluation(db: Database, run_id: str, case_id: str, system_id: str, evaluation_id: str) -> None:
    with write_transaction(db):
        db.table("sim_dialogues").update(
            (run_id, case_id, system_id), {"evaluation_id": evaluation_id, "updated_at": utc_now()}
        )


def run_dialogues(
    db: Database, run_id: str, *, systems: list[str] | None = None, cases: list[str] | None = None
) -> list[dict]:
    """The run's pair rows (result decoded), ordered by case then system; optionally only some systems/cases."""
    rows = []
    for r in db.table("sim_dialogues").rows_where("run_id = ?", [run_id], order_by="case_id, system_id"):
        if systems is not None and r["system_id"] not in systems:
            continue
        if cases is not None and r["case_id"] not in cases:
            continue
        rows.append({**r, "result": loads(r["result"], {})})
    return rows


def merge_evaluation_metrics(db: Database, evaluation_id: str, extra: dict) -> None:
    """Add simulation figures (e.g. persuasiveness) to an evaluation's metrics, keeping the rest."""
    with write_transaction(db):
        row = db.table("evaluations").get(evaluation_id)
        merged = {**loads(row["metrics"], {}), **extra}
        db.table("evaluations").update(evaluation_id, {"metrics": dumps(merged)})
