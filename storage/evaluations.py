"""Evaluations: factor scores and debate messages for one conversation."""

from __future__ import annotations

from sqlite_utils import Database

from storage.db import write_transaction
from storage.jsonutil import dumps, loads
from storage.records import DebateMessage, Evaluation, FactorScore, utc_now
from storage.text import clean_text


def start_evaluation(db: Database, evaluation: Evaluation) -> Evaluation:
    with write_transaction(db):
        db.table("evaluations").insert(
            {
                "id": evaluation.id,
                "conversation_id": evaluation.conversation_id,
                "scorer": evaluation.scorer,
                "rubric_version": evaluation.rubric_version,
                "config": dumps(evaluation.config),
                "status": evaluation.status,
                "created_at": evaluation.created_at,
                "fingerprint": evaluation.fingerprint,
                "metrics": dumps(evaluation.metrics),
                "usage": dumps(evaluation.usage),
            }
        )
    return evaluation


def save_factor_score(db: Database, evaluation_id: str, score: FactorScore) -> None:
    """Store one factor's result as soon as it is known (replaces an earlier try)."""
    row = {
        "evaluation_id": evaluation_id,
        "factor": score.factor,
        "judge": score.judge,
        "score": score.score,
        "distribution": dumps(score.distribution) if score.distribution is not None else None,
        "rationale": clean_text(score.rationale),
        "rubric_version": score.rubric_version,
        "error": clean_text(score.error),
        "metadata": dumps(score.metadata),
        "created_at": utc_now(),
    }
    with write_transaction(db):
        _upsert(db, "factor_scores", row, ("evaluation_id", "factor", "judge"))


def save_debate_message(db: Database, evaluation_id: str, message: DebateMessage) -> None:
    row = {
        "evaluation_id": evaluation_id,
        "round": message.round,
        "role": message.role,
        "model": message.model,
        "statement": clean_text(message.statement),
        "score": message.score,
        "error": clean_text(message.error),
        "raw": clean_text(message.raw),
        "created_at": utc_now(),
    }
    with write_transaction(db):
        _upsert(db, "debate_messages", row, ("evaluation_id", "round", "role"))


def _upsert(db: Database, table: str, row: dict, keys: tuple[str, ...]) -> None:
    """One ``INSERT … ON CONFLICT (keys) DO UPDATE`` on the table's unique index over ``keys``: a single statement,
    where sqlite-utils' upsert reads the table's schema first (about twenty statements per row, which made up
    most of an evaluation's own time between model calls: bench/eval_latency.py)."""
    columns = list(row)
    names = ", ".join(f'"{c}"' for c in columns)
    updates = ", ".join(f'"{c}" = excluded."{c}"' for c in columns if c not in keys)
    sql = (
        f'INSERT INTO "{table}" ({names}) VALUES ({", ".join("?" for _ in columns)}) '
        f"ON CONFLICT ({', '.join(keys)}) DO UPDATE SET {updates}"
    )
    db.conn.execute(sql, [row[c] for c in columns])


def finish_evaluation(
    db: Database,
    evaluation_id: str,
    *,
    status: str = "done",
    overall: float | None = None,
    rounds_used: int | None = None,
    consensus: bool | None = None,
    error: str | None = None,
    metrics: dict | None = None,
    usage: dict | None = None,
) -> None:
    updates = {
        "status": status,
        "overall": overall,
        "rounds_used": rounds_used,
        "consensus": None if consensus is None else int(consensus),
        "error": clean_text(error),
        "finished_at": utc_now(),
    }
    if metrics is not None:
        updates["metrics"] = dumps(metrics)
    if usage is not None:
        updates["usage"] = dumps(usage)
    with write_transaction(db):
        db.table("evaluations").update(evaluation_id, updates)


def get_evaluation(db: Database, evaluation_id: str) -> Evaluation | None:
    rows = list(db.table("evaluations").rows_where("id = ?", [evaluation_id]))
    if not rows:
        return None
    row = rows[0]
    evaluation = Evaluation(
        id=row["id"],
        conversation_id=row["conversation_id"],
        scorer=row["scorer"],
        rubric_version=row["rubric_version"] or "",
        config=loads(row["config"], {}),
        status=row["status"],
        overall=row["overall"],
        rounds_used=row["rounds_used"],
        consensus=None if row["consensus"] is None else bool(row["consensus"]),
        error=row["error"],
        created_at=row["created_at"],
        fingerprint=row["fingerprint"] or "",
        metrics=loads(row["metrics"], {}),
        usage=loads(row["usage"], {}),
    )
    for r in db.table("factor_scores").rows_where("evaluation_id = ?", [evaluation_id], order_by="id"):
        evaluation.factor_scores.append(
            FactorScore(
                factor=r["factor"],
                score=r["score"],
                judge=r["judge"],
                rubric_version=r["rubric_version"] or "",
                distribution=loads(r["distribution"]),
                rationale=r["rationale"] or "",
                error=r["error"],
                metadata=loads(r["metadata"], {}),
            )
        )
    for r in db.table("debate_messages").rows_where("evaluation_id = ?", [evaluation_id], order_by="round, id"):
        evaluation.debate.append(
            DebateMessage(
                round=r["round"],
                role=r["role"],
                model=r["model"] or "",
                statement=r["statement"] or "",
                score=r["score"],
                error=r["error"],
                raw=r["raw"] or "",
            )
        )
    return evaluation


def evaluations_for(db: Database, conversation_id: str, *, fingerprint: str | None = None) -> list[str]:
    """Ids of a conversation's evaluations (optionally with one judge configuration), oldest first."""
    where, args = "conversation_id = ?", [conversation_id]
    if fingerprint is not None:
        where += " and fingerprint = ?"
        args.append(fingerprint)
    return [r["id"] for r in db.table("evaluations").rows_where(where, args, order_by="created_at, rowid", select="id")]


def clear_debate(db: Database, evaluation_id: str) -> None:
    """Remove an evaluation's debate messages before the debate is run again."""
    with write_transaction(db):
        db.table("debate_messages").delete_where("evaluation_id = ?", [evaluation_id])


def mark_interrupted(db: Database) -> int:
    """At start: evaluations still ``running`` were cut off (a crash or a kill); mark them
    ``interrupted``, keeping every factor score and debate message they stored. Returns how many."""
    with write_transaction(db):
        db.execute(
            "update evaluations set status = 'interrupted', "
            "error = 'interrupted (the app stopped while judging); resume to fill the gaps' "
            "where status = 'running'"
        )
        return db.conn.execute("select changes()").fetchone()[0]


def evaluations_with_status(db: Database, status: str, *, limit: int | None = None) -> list[dict]:
    """Evaluations in ``status`` (oldest first): id, conversation id, scorer, config (decoded),
    created_at, the conversation's system and source, and how many factor scores they hold."""
    sql = (
        "select e.id, e.conversation_id, e.scorer, e.config, e.fingerprint, e.created_at, c.system_id, c.source, "
        "(select count(*) from factor_scores f where f.evaluation_id = e.id and f.score is not null) as scored "
        "from evaluations e join conversations c on c.id = e.conversation_id where e.status = ? "
        "order by e.created_at, e.rowid"
    )
    args: list = [status]
    if limit:
        sql += " limit ?"
        args.append(limit)
    return [{**r, "config": loads(r["config"], {})} for r in db.query(sql, args)]


def set_evaluation_status(db: Database, evaluation_id: str, status: str) -> None:
    with write_transaction(db):
        db.table("evaluations").update(evaluation_id, {"status": status})


def latest_turn_scores(db: Database, conversation_id: str) -> dict[int, dict]:
    """The turn scores of the conversation's latest finished evaluation that has them (the proxy's
    ``metrics["turn_scores"]``), keyed by the turn's index in ``Conversation.turns``; empty when none has."""
    rows = db.query(
        "select metrics from evaluations where conversation_id = ? and status in ('done', 'partial') "
        "and metrics like '%turn_scores%' order by created_at desc, rowid desc limit 1",
        [conversation_id],
    )
    for row in rows:
        scores = loads(row["metrics"], {}).get("turn_scores")
        if isinstance(scores, list):
            return {int(s["turn"]): s for s in scores if isinstance(s, dict) and isinstance(s.get("turn"), int)}
    return {}
