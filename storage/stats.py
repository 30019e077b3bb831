"""Read queries for the leaderboard and the arena import.

"Finished" evaluations are those with status ``done`` or ``partial`` (a partial one has some
factor scores; its missing ones are NULL, never 0). When a conversation was evaluated several
times, only its latest finished evaluation counts, so re-runs never weigh twice.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlite_utils import Database

from storage.board_inputs import board_system_sql
from storage.jsonutil import dumps

FINISHED = ("done", "partial")
_FINISHED_SQL = "(" + ", ".join(f"'{status}'" for status in FINISHED) + ")"


def _latest_evaluations_sql(
    *, scorer: str | None, source: str | None, domain: str | None, uploads: bool = False, fingerprint: str | None = None
) -> tuple[str, list]:
    """A ``latest`` CTE: one row per conversation, its latest finished evaluation (of ``scorer``, and of
    one judge setup when ``fingerprint`` is given). Anonymous uploads (source ``upload``) are left out
    unless ``uploads``."""
    where = [f"e.status in {_FINISHED_SQL}"]
    if not uploads:
        where.append("c.source != 'upload'")
    args: list = []
    for column, value in (
        ("e.scorer", scorer),
        ("c.source", source),
        ("c.domain", domain),
        ("e.fingerprint", fingerprint),
    ):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    sql = f"""
        with ranked as (
            select e.id, e.conversation_id, e.scorer, e.overall, e.metrics, e.status,
                   {board_system_sql("c.system_id", "c.id")} as system_id, c.source, c.domain,
                   row_number() over (
                       partition by e.conversation_id order by e.created_at desc, e.rowid desc
                   ) as k
            from evaluations e join conversations c on c.id = e.conversation_id
            where {" and ".join(where)}
        ),
        latest as (select * from ranked where k = 1)
    """
    return sql, args


def latest_evaluations(
    db: Database,
    *,
    scorer: str | None = None,
    source: str | None = None,
    domain: str | None = None,
    uploads: bool = False,
    fingerprint: str | None = None,
) -> list[dict]:
    """The latest finished evaluation of each conversation, optionally of one scorer only.

    Rows: ``id, conversation_id, scorer, overall, metrics (JSON text), status, system_id, source,
    domain``.
    """
    cte, args = _latest_evaluations_sql(
        scorer=scorer, source=source, domain=domain, uploads=uploads, fingerprint=fingerprint
    )
    return list(db.query(cte + " select * from latest order by system_id, conversation_id", args))


def factor_means(
    db: Database, *, scorer: str, domain: str | None = None, uploads: bool = False, fingerprint: str | None = None
) -> list[dict]:
    """Mean factor score per system over the latest evaluations of ``scorer``.

    Several judges of one factor (an ensemble) are averaged within the conversation first.
    Rows: ``system_id, factor, mean, n`` (n = conversations with a score for the factor).
    """
    cte, args = _latest_evaluations_sql(
        scorer=scorer, source=None, domain=domain, uploads=uploads, fingerprint=fingerprint
    )
    sql = (
        cte
        + """,
        per_conversation as (
            select l.system_id, f.factor, avg(f.score) as score
            from latest l join factor_scores f on f.evaluation_id = l.id
            where f.score is not null
            group by l.id, f.factor
        )
        select system_id, factor, avg(score) as mean, count(*) as n
        from per_conversation group by system_id, factor order by system_id, factor
    """
    )
    return list(db.query(sql, args))


def judge_setups(db: Database, *, uploads: bool = False) -> list[dict]:
    """Each judge setup (scorer and configuration fingerprint) with finished evaluations, most used
    first. Rows: ``scorer, fingerprint, config`` (JSON text of its latest evaluation), ``n``
    (conversations it finished)."""
    rows = db.query(
        "select e.scorer, coalesce(e.fingerprint, '') as fingerprint, count(distinct e.conversation_id) as n, "
        "max(e.created_at) as latest, (select e2.config from evaluations e2 where e2.scorer = e.scorer and "
        "coalesce(e2.fingerprint, '') = coalesce(e.fingerprint, '') order by e2.created_at desc limit 1) as config "
        "from evaluations e join conversations c on c.id = e.conversation_id "
        f"where e.status in {_FINISHED_SQL}"
        + ("" if uploads else " and c.source != 'upload'")
        + " group by e.scorer, coalesce(e.fingerprint, '') order by n desc, e.scorer, fingerprint"
    )
    return [dict(r) for r in rows]


def battle_domains(db: Database) -> list[str]:
    """Domains that have at least one voted battle."""
    rows = db.query(
        "select distinct b.domain from battles b join votes v on v.battle_id = b.id "
        "where b.domain is not null order by b.domain"
    )
    return [r["domain"] for r in rows]


def existing_ids(db: Database, table: str, ids: Iterable[str]) -> set[str]:
    """Which of ``ids`` are primary keys of ``table`` (``conversations`` or ``battles``)."""
    if table not in ("conversations", "battles"):
        raise ValueError(f"no id lookup for table {table!r}")
    rows = db.query(f"select id from {table} where id in (select value from json_each(?))", [dumps(list(ids))])
    return {r["id"] for r in rows}


def voted_ids(db: Database, battle_ids: Iterable[str]) -> set[str]:
    """Which of ``battle_ids`` already have their vote."""
    rows = db.query(
        "select battle_id from votes where battle_id in (select value from json_each(?))", [dumps(list(battle_ids))]
    )
    return {r["battle_id"] for r in rows}


def promote_uploads(db: Database, system_ids: Iterable[str] | None = None) -> int:
    """The operator's deliberate import: uploaded conversations (of ``system_ids``, or all) become
    source ``import`` and so count on the main leaderboard; their ``upload:`` system ids stay.
    Returns how many conversations changed."""
    from storage.db import write_transaction

    with write_transaction(db):
        if system_ids is None:
            db.execute("update conversations set source = 'import' where source = 'upload'")
        else:
            db.execute(
                "update conversations set source = 'import' where source = 'upload' "
                "and system_id in (select value from json_each(?))",
                [dumps(list(system_ids))],
            )
        return db.conn.execute("select changes()").fetchone()[0]


def unscored_conversations(
    db: Database,
    *,
    fingerprint: str,
    sources: Iterable[str] = ("chat", "arena"),
    limit: int = 1000,
    conversation_id: str | None = None,
) -> list[str]:
    """Conversations of ``sources`` with at least one system turn whose latest finished evaluation by the
    judge setup ``fingerprint`` is missing or judged fewer turns than the conversation has now (the
    evaluation's ``turns_judged`` metric), the least recently active first; only ``conversation_id`` when
    given (whether that one needs scoring)."""
    sources = list(sources)
    marks = ", ".join("?" for _ in sources)
    one = "and c.id = ?" if conversation_id is not None else ""
    sql = f"""
        with t as (
            select conversation_id, count(*) as n, sum(role = 'system') as replies, max(id) as last
            from turns where part = 'interaction' group by conversation_id
        ),
        e as (
            select conversation_id, max(coalesce(json_extract(metrics, '$.turns_judged'), 0)) as judged
            from evaluations where fingerprint = ? and status in {_FINISHED_SQL} group by conversation_id
        )
        select c.id from conversations c
        join t on t.conversation_id = c.id
        left join e on e.conversation_id = c.id
        where c.source in ({marks}) and t.replies > 0 and coalesce(e.judged, -1) < t.n {one}
        order by t.last limit ?
    """
    args = [fingerprint, *sources, *([conversation_id] if conversation_id is not None else []), limit]
    return [r["id"] for r in db.query(sql, args)]


def latest_scores(db: Database, *, scorer: str, fingerprint: str | None) -> dict[str, dict]:
    """Each conversation's latest finished evaluation of one judge setup, uploads included:
    ``{conversation_id: {"system_id", "source", "overall", "factors": {factor: mean score}}}``."""
    cte, args = _latest_evaluations_sql(scorer=scorer, source=None, domain=None, uploads=True, fingerprint=fingerprint)
    scores: dict[str, dict] = {}
    for r in db.query(cte + " select id, conversation_id, system_id, source, overall from latest", args):
        scores[r["conversation_id"]] = {**dict(r), "factors": {}}
    by_evaluation = {s["id"]: s for s in scores.values()}
    sql = (
        cte + " select f.evaluation_id, f.factor, avg(f.score) as score from latest l "
        "join factor_scores f on f.evaluation_id = l.id where f.score is not null group by f.evaluation_id, f.factor"
    )
    for r in db.query(sql, args):
        by_evaluation[r["evaluation_id"]]["factors"][r["factor"]] = r["score"]
    return scores


def conversation_sentiments(db: Database, *, sources: tuple[str, ...]) -> dict[str, str]:
    """How each conversation of ``sources`` ended for its person (``metadata.sentiment``: satisfied or frustrated),
    for the conversations that say."""
    marks = ", ".join("?" for _ in sources)
    rows = db.query(
        f"select id, json_extract(metadata, '$.sentiment') as sentiment from conversations where source in ({marks}) "
        "and json_extract(metadata, '$.sentiment') in ('satisfied', 'frustrated')",
        list(sources),
    )
    return {r["id"]: r["sentiment"] for r in rows}
