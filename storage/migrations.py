"""The schema, as an append-only list of migrations.

Never edit a migration that has shipped: add a new ``mNNN_`` function instead.
The number of applied migrations is the schema version.
"""

from __future__ import annotations

from sqlite_utils import Database, Migrations

migrations = Migrations("crs_arena")


@migrations()
def m001_initial(db: Database) -> None:
    db.table("conversations").create(
        {
            "id": str,
            "system_id": str,
            "domain": str,
            "source": str,
            "status": str,
            "targets": str,  # JSON list of {id, title}
            "metadata": str,  # JSON object
            "created_at": str,
            "updated_at": str,
        },
        pk="id",
        not_null={"system_id", "source", "created_at"},
    )
    db.table("conversations").create_index(["system_id"])
    db.table("conversations").create_index(["source", "created_at"])

    db.table("turns").create(
        {
            "id": int,
            "conversation_id": str,
            "part": str,  # "history" (context) or "interaction" (judged)
            "idx": int,
            "role": str,
            "text": str,
            "items": str,  # JSON list of {id, title}, ranked
            "metadata": str,
            "created_at": str,
        },
        pk="id",
        foreign_keys=[("conversation_id", "conversations", "id")],
        not_null={"conversation_id", "part", "idx", "role", "text"},
    )
    db.table("turns").create_index(["conversation_id", "part", "idx"], unique=True)

    db.table("evaluations").create(
        {
            "id": str,
            "conversation_id": str,
            "scorer": str,  # "proxy", "llm:<model>", "ensemble", ...
            "rubric_version": str,
            "config": str,
            "status": str,  # running | done | error
            "overall": float,  # debate / calibrated score 0-100
            "rounds_used": int,
            "consensus": int,
            "error": str,
            "created_at": str,
            "finished_at": str,
        },
        pk="id",
        foreign_keys=[("conversation_id", "conversations", "id")],
        not_null={"conversation_id", "scorer", "status", "created_at"},
    )
    db.table("evaluations").create_index(["conversation_id"])
    db.table("evaluations").create_index(["scorer"])

    db.table("factor_scores").create(
        {
            "id": int,
            "evaluation_id": str,
            "factor": str,
            "judge": str,
            "score": float,  # NULL when the judge failed: never a silent 0
            "distribution": str,
            "rationale": str,
            "rubric_version": str,
            "error": str,
            "metadata": str,
            "created_at": str,
        },
        pk="id",
        foreign_keys=[("evaluation_id", "evaluations", "id")],
        not_null={"evaluation_id", "factor", "judge"},
    )
    db.table("factor_scores").create_index(["evaluation_id", "factor", "judge"], unique=True)

    db.table("debate_messages").create(
        {
            "id": int,
            "evaluation_id": str,
            "round": int,
            "role": str,
            "model": str,
            "statement": str,
            "score": float,
            "error": str,
            "raw": str,
            "created_at": str,
        },
        pk="id",
        foreign_keys=[("evaluation_id", "evaluations", "id")],
        not_null={"evaluation_id", "round", "role"},
    )
    db.table("debate_messages").create_index(["evaluation_id", "round", "role"], unique=True)

    db.table("battles").create(
        {
            "id": str,
            "system_a": str,
            "system_b": str,
            "conversation_a": str,
            "conversation_b": str,
            "domain": str,
            "session": str,
            "created_at": str,
        },
        pk="id",
        foreign_keys=[
            ("conversation_a", "conversations", "id"),
            ("conversation_b", "conversations", "id"),
        ],
        not_null={"system_a", "system_b", "created_at"},
    )
    db.table("battles").create_index(["system_a", "system_b"])

    db.execute(
        """
        CREATE TABLE votes (
            id INTEGER PRIMARY KEY,
            battle_id TEXT NOT NULL UNIQUE REFERENCES battles(id),
            choice TEXT NOT NULL CHECK (choice IN ('a', 'b', 'tie', 'both_bad')),
            feedback TEXT,
            voter TEXT,
            created_at TEXT NOT NULL
        )
        """
    )

    db.table("leaderboard_snapshots").create(
        {
            "id": int,
            "created_at": str,
            "filters": str,
            "scorer": str,
            "rows": str,  # JSON list of leaderboard rows
        },
        pk="id",
    )

    db.table("llm_cache").create(
        {
            "key": str,  # sha256 of (model, messages, parameters)
            "model": str,
            "request": str,
            "response": str,
            "created_at": str,
        },
        pk="key",
    )

    db.table("llm_calls").create(
        {
            "id": int,
            "role": str,
            "model": str,
            "backend": str,
            "kind": str,  # chat | score
            "duration_ms": int,
            "prompt_tokens": int,
            "completion_tokens": int,
            "cost_usd": float,
            "cache_hit": int,
            "error": str,
            "created_at": str,
        },
        pk="id",
    )
    db.table("llm_calls").create_index(["created_at"])


@migrations()
def m002_evaluation_metrics_and_usage(db: Database) -> None:
    """Deterministic metrics and token usage/cost travel with each evaluation."""
    db.table("evaluations").add_column("metrics", str)  # JSON object
    db.table("evaluations").add_column("usage", str)  # JSON: calls, tokens, cost, cache hits
    db.table("evaluations").add_column("fingerprint", str)  # hash of the judge configuration
    db.table("evaluations").create_index(["conversation_id", "fingerprint"])


@migrations()
def m003_simulations(db: Database) -> None:
    """Simulated-user benchmark runs and their (record, system) dialogues, for resumable batches."""
    db.table("sim_runs").create(
        {
            "id": str,  # derived from the run's configuration (or chosen by the user)
            "config": str,  # JSON: dataset, protocol, seed, hit_k, personas, models, prompt versions
            "selection": str,  # JSON: records scanned, skipped and why, chosen case ids
            "status": str,  # running | done | interrupted
            "summary": str,  # JSON: per-system figures of the latest report
            "report_dir": str,
            "created_at": str,
            "updated_at": str,
        },
        pk="id",
        not_null={"config", "status", "created_at"},
    )
    db.table("sim_dialogues").create(
        {
            "run_id": str,
            "case_id": str,  # dataset record (e.g. redial:20001:3) or target item
            "system_id": str,
            "conversation_id": str,  # the stored conversation (source 'simulation')
            "status": str,  # running | done | failed (the system failed) | error (simulator or endpoint fault)
            "attempts": int,
            "result": str,  # JSON: stop reason, hit turn, leaks, persuasiveness, sincerity, reliability
            "evaluation_id": str,
            "error": str,
            "created_at": str,
            "updated_at": str,
        },
        pk=("run_id", "case_id", "system_id"),
        foreign_keys=[("run_id", "sim_runs", "id")],
        not_null={"run_id", "case_id", "system_id", "status", "created_at"},
    )
    db.table("sim_dialogues").create_index(["run_id", "status"])
    db.table("sim_dialogues").create_index(["conversation_id"])


@migrations()
def m004_board_version_and_uploads(db: Database) -> None:
    """The leaderboard as a read model, and uploads in their own namespace.

    ``board_state.version`` counts changes to what the leaderboard is computed from: triggers bump it
    whenever a vote or an evaluation is written or a conversation changes system or source. A
    snapshot records the version it was computed at (``version``) and the filters it is for (``key``),
    so a reader knows without computing whether the stored board is current, and a new snapshot is
    written only when the version moved. Uploaded logs are conversations with source ``upload``.
    """
    db.table("board_state").create({"id": int, "version": int, "changed_at": str}, pk="id")
    db.execute("insert into board_state (id, version, changed_at) values (1, 0, datetime('now'))")
    bump = "update board_state set version = version + 1, changed_at = datetime('now') where id = 1;"
    for table, events in (
        ("votes", ("insert", "update", "delete")),
        ("evaluations", ("insert", "update", "delete")),
        ("battles", ("delete",)),
    ):
        for event in events:
            db.execute(f"create trigger board_{table}_{event} after {event} on {table} begin {bump} end")
    db.execute(
        f"create trigger board_conversations_update after update of system_id, source on conversations begin {bump} end"
    )
    db.execute(f"create trigger board_conversations_delete after delete on conversations begin {bump} end")
    db.table("leaderboard_snapshots").add_column("version", int)
    db.table("leaderboard_snapshots").add_column("key", str)
    db.table("leaderboard_snapshots").create_index(["key", "id"])
    db.table("evaluations").create_index(["status"])


@migrations()
def m005_turn_ranking(db: Database) -> None:
    """A system turn's whole ranking (JSON list of {id, title}, at most 100), beside the items it showed: iEvaLM's
    Recall@k reads the recommender's top 50, which the shown list (three titles under CRS Arena's policy) is not."""
    db.table("turns").add_column("ranking", str)


@migrations()
def m006_human_labels(db: Database) -> None:
    """People's ratings of conversations (#23): after an arena vote, one row per side, and in the Chat tab for one
    conversation; imported CRSArena-Eval labels live here too (``origin``).

    One row per conversation, rater and origin: a second submission replaces the first. The four items are the
    CRSArena-Eval aspects people were asked (``understanding``, ``task_completion``, ``interest_arousal``,
    ``dialogue_overall``), on the scale of their origin (0-4 in this app; CRSArena-Eval's own scales for imports).
    ``names_seen`` is 1 when the rater had seen which systems answered before rating. ``battles.revealed_at`` is
    when a battle's names were first shown to its voter (the reveal now follows the ratings or their skip).
    """
    db.table("human_labels").create(
        {
            "id": int,
            "conversation_id": str,
            "system_id": str,
            "battle_id": str,
            "side": str,
            "rater": str,
            "origin": str,  # arena | chat | crsarena_eval
            "understanding": float,
            "task_completion": float,
            "interest_arousal": float,
            "dialogue_overall": float,
            "names_seen": int,
            "created_at": str,
            "updated_at": str,
        },
        pk="id",
        foreign_keys=[("conversation_id", "conversations", "id")],
        not_null={"conversation_id", "system_id", "rater", "origin", "created_at"},
    )
    db.table("human_labels").create_index(["conversation_id", "rater", "origin"], unique=True)
    db.table("human_labels").create_index(["battle_id"])
    db.table("battles").add_column("revealed_at", str)


@migrations()
def m007_small_versions_own_ids(db: Database) -> None:
    """The small local versions of KBRD, BARCOR and UniCRS answer under ids of their own (``kbrd_small``, …; #40), so
    that their votes and scores never count as the published models'. Before, both ran as ``kbrd``: a conversation
    recorded under ``kbrd`` (``barcor``, ``unicrs``) whose system turns say a small local version answered (every
    neural turn records ``metadata.origin``, ``small local`` for those, since the systems came into the app) moves to
    ``kbrd_small``, with its side of any battle and its people's ratings. A conversation with no such turn keeps its
    id: an upload or import under ``kbrd`` carries no origin, and a battle side that never answered has no vote.
    ``sim_dialogues`` keep the id their run asked for (what resuming the run looks up); the board reads the
    conversation's."""
    small_answered = (
        "select conversation_id from turns where role = 'system' and "
        "(case when json_valid(metadata) then json_extract(metadata, '$.origin') end) = 'small local'"
    )
    for system in ("kbrd", "barcor", "unicrs"):
        args = {"system": system, "small": f"{system}_small"}
        for side in ("a", "b"):
            db.execute(
                f"update battles set system_{side} = :small where system_{side} = :system "
                f"and conversation_{side} in ({small_answered})",
                args,
            )
        db.execute(
            f"update human_labels set system_id = :small where system_id = :system and conversation_id in "
            f"({small_answered})",
            args,
        )
        db.execute(
            f"update conversations set system_id = :small where system_id = :system and id in ({small_answered})", args
        )


# Migrations that change rows only and may run again harmlessly. A backup read back into a new file (the Hub dataset's
# export: arena/hub_restore.py) was written at some schema version; the rows it restores never met the migrations
# numbered above that version, which a file upgraded in place would have, so those of them listed here run over
# the restored rows. A migration that changes the schema needs no replay: the new file has that schema already.
REPLAYABLE = (m007_small_versions_own_ids,)


def replay_after(db: Database, version: int) -> list[str]:
    """Run the :data:`REPLAYABLE` migrations numbered above ``version`` (their ``mNNN_`` number); returns their
    names."""
    replayed = []
    for migration in REPLAYABLE:
        if int(migration.__name__[1:4]) > version:
            migration(db)
            replayed.append(migration.__name__)
    return replayed


@migrations()
def m008_battle_tags(db: Database) -> None:
    """What each voted battle is about, and whether a side gave its name away (#75), beside the vote.

    ``battle_tags`` holds per battle the kinds of request its first message makes (``kinds``: a JSON list, see
    ``arena/request_kinds.py``), how that message was read (``read_by``: ``rules`` or ``model``) and the names a
    reply revealed before the vote (``names``: a JSON list; empty when none, and then the vote is rated). Reading a
    request needs the catalog, which the storage layer does not reach: this migration gives every battle voted so far
    a row with ``kinds`` NULL, "not read yet", and the arena's next board refresh reads them
    (``arena.battle_tags.tag_missing``); a vote cast from now on is tagged when it is stored. A tag written or
    changed moves the board's version, as a vote does."""
    db.table("battle_tags").create(
        {"battle_id": str, "kinds": str, "read_by": str, "names": str, "tagged_at": str},
        pk="battle_id",
        foreign_keys=[("battle_id", "battles", "id")],
    )
    db.execute("insert or ignore into battle_tags (battle_id) select battle_id from votes")
    bump = "update board_state set version = version + 1, changed_at = datetime('now') where id = 1;"
    for event in ("insert", "update", "delete"):
        db.execute(f"create trigger board_battle_tags_{event} after {event} on battle_tags begin {bump} end")
