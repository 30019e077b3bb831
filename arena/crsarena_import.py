"""CRSArena-Dial in, JSONL out.

:func:`import_dial` is the one way the app (Leaderboard tab) and ``python -m arena import-crsarena``
import: it finds the folder (default ``<data dir>/crsarena``), loads the catalog, imports, scores
with the proxy and stores a fresh leaderboard snapshot. Whatever stops it is an
:class:`ImportRefused` whose message says what is missing and which setting fixes it, the same words
on both paths. A missing catalog is refused, not imported without one: ids derive from the source
rows, so titles imported unmatched would stay unmatched (importing again adds nothing).

Import (:func:`import_crsarena`) reads a CRSArena-Dial folder (``crs_arena_dial_{open,closed}.json``
and ``votes_{open,closed}.csv``, see ``../shared/data/README.md``):

* every dialogue becomes a conversation (source ``import``; id = the dataset's "conversation ID",
  ``<system>_<user uuid>``; ``metadata.dataset`` from the system id suffix, ``metadata.setting``
  open or closed) through :func:`evaluators.log_readers.read_crsarena_dial`;
* every vote row becomes a battle and its vote. A row names the two systems (``crs1`` = side A,
  ``crs2`` = side B) and the user; the user's dialogue with each system, ``<system>_<user>``, is
  that side's conversation when the files hold it (otherwise the side's conversation is NULL).
  ``vote`` = crs1 → ``a``, crs2 → ``b``, ``tie`` → ``tie``. The battle id is
  ``crsarena-dial:<setting>:<user>:<crs1>:<crs2>``, so a repeated row for the same battle (the
  same user voting twice on the same pair) is one battle whose vote is the later row's; the
  session field holds ``crsarena-dial:<setting>``; the voter is the user uuid; timestamps are the
  CSV's ``session_id`` (no zone given; taken as UTC). The domain is ``movies``: every CRS Arena
  system recommends movies, trained on ReDial or OpenDialKG (the id suffix, kept per system by
  :func:`arena.board_compute.dataset_of` and per conversation in ``metadata.dataset``).

Ids derive from the source rows, so importing again adds nothing.

Export (:func:`export_jsonl`) writes the rows of :mod:`storage.export` to one JSONL file, each
line tagged with its ``type``: ``conversation`` (``Conversation.to_dict()``), ``vote`` (the battle's
systems and conversations, choice, feedback; no voter id) and ``judgment`` (an evaluation with its
factor scores and debate).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlite_utils import Database

from catalog.catalog import Catalog, data_dir, get_catalog
from evaluators.log_readers import LogFormatError, Skipped, checked, read_crsarena_dial
from storage.battle_votes import save_battle, save_vote
from storage.conversations import save_conversation
from storage.export import EXPORTS
from storage.records import Battle, Vote
from storage.stats import existing_ids, voted_ids

SETTINGS = ("open", "closed")
FILE_NAMES = tuple(f"crs_arena_dial_{s}.json" for s in SETTINGS) + tuple(f"votes_{s}.csv" for s in SETTINGS)
DEFAULT_CATALOG = "redial"  # every CRSArena-Dial title is a movie; ReDial's catalog matches most of them
VOTE_COLUMNS = ("session_id", "user_id", "crs1", "crs2", "vote", "feedback")
DOMAIN = "movies"


@dataclass
class ImportReport:
    """What an import read and what it added (a second import adds nothing)."""

    conversations_read: int = 0
    conversations_added: int = 0
    vote_rows: int = 0
    battles: int = 0  # distinct battles in the vote files
    battles_added: int = 0
    votes_added: int = 0
    repeated_rows: int = 0  # rows for a battle that another row already gave (the later row counts)
    sides_without_conversation: int = 0  # battle sides whose dialogue is not in the files
    skipped: list[Skipped] = field(default_factory=list)
    scored: int | None = None  # conversations with a finished proxy evaluation after the import (None: not asked)
    score_failed: int = 0
    tagged: int = 0  # battles whose kinds and revealed names were read (arena.battle_tags)

    def summary(self) -> str:
        line = (
            f"{self.conversations_added} of {self.conversations_read} conversations added; "
            f"{self.battles_added} of {self.battles} battles and {self.votes_added} votes added "
            f"from {self.vote_rows} vote rows ({self.repeated_rows} repeated rows merged, "
            f"{self.sides_without_conversation} battle sides without a dialogue in the files)"
        )
        if self.scored is not None:
            line += f"; {self.scored} of {self.conversations_read} conversations scored with the proxy"
            if self.score_failed:
                line += f" ({self.score_failed} could not be scored: no system reply to judge)"
        return line


class ImportRefused(Exception):
    """The import cannot run as asked. The message is for people: what is missing and what to set;
    ``reason`` is ``files``, ``catalog`` or ``format``."""

    def __init__(self, message: str, reason: str):
        super().__init__(message)
        self.reason = reason


def crsarena_files(directory: str | Path) -> list[Path]:
    """The CRSArena-Dial files present in ``directory``."""
    directory = Path(directory)
    return [directory / n for n in FILE_NAMES if (directory / n).is_file()]


def default_folder() -> Path | None:
    """``<data dir>/crsarena`` (the data dir is ``CRS_DATA_DIR``, else ``../shared/data``), None without a data dir."""
    base = data_dir()
    return base / "crsarena" if base is not None else None


def import_dial(
    db: Database,
    directory: str | Path | None = None,
    *,
    catalog_name: str | None = DEFAULT_CATALOG,
    score: bool = True,
) -> ImportReport:
    """Import CRSArena-Dial from ``directory`` (default :func:`default_folder`) with titles matched to the
    catalog ``catalog_name`` (None: keep them as written), score the conversations with the proxy when
    ``score``, and store the new default leaderboard.

    :raises ImportRefused: no CRSArena-Dial files there, the catalog is missing, or a file does not
        follow the format; the message says which and what to do
    """
    folder = Path(directory) if directory is not None else default_folder()
    if folder is None or not crsarena_files(folder):
        raise ImportRefused(missing_files_message(folder), "files")
    catalog = _catalog(catalog_name)
    try:
        report = import_crsarena(db, folder, catalog=catalog, score=score)
    except LogFormatError as e:
        raise ImportRefused(f"Import failed: {e}", "format") from None
    from arena.board_cache import refresh_board

    refresh_board(db)
    return report


@dataclass
class LabelImportReport:
    """What an import of CRSArena-Eval labels read and added (a second import adds nothing new)."""

    path: str
    conversations_read: int = 0
    conversations_added: int = 0
    labelled: int = 0  # conversations with at least one dialogue-level label, stored as imported ratings
    scored: int = 0
    score_failed: int = 0

    def summary(self) -> str:
        return (
            f"{Path(self.path).name}: {self.conversations_added} of {self.conversations_read} conversations added, "
            f"{self.labelled} with people's dialogue-level labels, {self.scored} scored with the proxy"
            + (f" ({self.score_failed} could not be scored)" if self.score_failed else "")
        )


def import_eval_labels(
    db: Database, path: str | Path | None = None, *, catalog_name: str | None = DEFAULT_CATALOG, score: bool = True
) -> LabelImportReport:
    """Import a CRSArena-Eval file (default: ``<data dir>/crsarena/crs_arena_eval_dev.json``): its dialogues become
    conversations (source ``import``, ids as in the file), its dialogue-level labels imported ratings (origin
    ``crsarena_eval``, CRSArena-Eval's own scales, rater ``crsarena_eval:<file>``), so the Judge vs people panel
    shows them apart from the app's own; with ``score`` every imported conversation is proxy-scored. Idempotent.

    :raises ImportRefused: the file or the catalog is missing, or the file does not follow the format
    """
    from evaluators.log_readers import read_crsarena_eval
    from storage.human_labels import IMPORTED_ORIGIN, ITEMS, Rating, save_ratings

    folder = default_folder()
    file = Path(path) if path is not None else (folder / "crs_arena_eval_dev.json" if folder else None)
    if file is None or not file.is_file():
        raise ImportRefused(
            f"CRSArena-Eval file not found{f' at {file}' if file else ''}: place crs_arena_eval_dev.json under "
            "<data dir>/crsarena (the data dir is CRS_DATA_DIR, else ../shared/data) or name the file.",
            "files",
        )
    catalog = _catalog(catalog_name)
    try:
        read = read_crsarena_eval(file, catalog)
    except LogFormatError as e:
        raise ImportRefused(f"Import failed: {e}", "format") from None
    report = LabelImportReport(str(file), conversations_read=len(read.conversations))
    present = existing_ids(db, "conversations", [c.id for c in read.conversations])
    for conversation in read.conversations:
        if conversation.id not in present:
            save_conversation(db, conversation)
            report.conversations_added += 1
    labelled = [
        Rating(
            conversation_id=c.id,
            system_id=c.system_id,
            rater=f"crsarena_eval:{file.name}",
            origin=IMPORTED_ORIGIN,
            values={item: read.labels[c.id].dialogue.get(item) for item in ITEMS},
        )
        for c in read.conversations
        if any(read.labels[c.id].dialogue.get(item) is not None for item in ITEMS)
    ]
    save_ratings(db, labelled)
    report.labelled = len(labelled)
    if score:
        report.scored, report.score_failed = _score_with_proxy(db, [c.id for c in read.conversations], catalog)
    from arena.board_cache import refresh_board

    refresh_board(db)
    return report


def _catalog(name: str | None) -> Catalog | None:
    """The catalog titles are matched to (None: keep titles as written), or :class:`ImportRefused` saying how to
    get it."""
    if name is None:
        return None
    try:
        return get_catalog(name)
    except FileNotFoundError:
        raise ImportRefused(missing_catalog_message(name), "catalog") from None


def missing_files_message(folder: Path | None) -> str:
    """Why nothing can be imported from ``folder`` (None: there is no data directory), and the fix."""
    where = (
        f"in {folder}"
        if folder is not None
        else "(no data directory: CRS_DATA_DIR is unset or none, and ../shared/data is absent)"
    )
    return (
        f"CRSArena-Dial files not found {where}. Expected {', '.join(FILE_NAMES)}; "
        "set CRS_DATA_DIR to a folder whose crsarena subfolder holds them."
    )


def missing_catalog_message(name: str) -> str:
    """Why an import without the catalog ``name`` is refused, and the fix."""
    base = data_dir()
    where = f"under the data directory {base}" if base is not None else "(there is no data directory)"
    return (
        f"The {name} catalog was not found: expected {name}/id2info.json {where}. Without it the listed "
        "titles cannot be matched to catalog items, and since importing again adds nothing they would stay "
        f"unmatched. Set CRS_DATA_DIR to the folder holding {name}/id2info.json."
    )


def import_crsarena(
    db: Database, directory: str | Path, *, catalog: Catalog | None = None, score: bool = False
) -> ImportReport:
    """Import CRSArena-Dial dialogues and votes from ``directory``; ``catalog`` maps listed titles
    to catalog items (without one they keep ``title:`` ids). With ``score``, every imported
    conversation is also scored with the proxy (a finished proxy evaluation is reused), so the
    leaderboard shows votes and automatic scores side by side; the report says how many.

    :raises FileNotFoundError: the folder has none of the CRSArena-Dial files
    :raises LogFormatError: a file does not follow the format
    """
    directory = Path(directory)
    if not crsarena_files(directory):
        raise FileNotFoundError(
            f"no CRSArena-Dial files in {directory} (expected crs_arena_dial_open.json, "
            "crs_arena_dial_closed.json, votes_open.csv, votes_closed.csv)"
        )
    report = ImportReport()
    imported = []
    for setting in SETTINGS:
        path = directory / f"crs_arena_dial_{setting}.json"
        if path.is_file():
            result = checked(read_crsarena_dial(path, catalog), path)
            report.skipped.extend(result.skipped)
            report.conversations_read += len(result.conversations)
            imported += [c.id for c in result.conversations]
            present = existing_ids(db, "conversations", [c.id for c in result.conversations])
            for conversation in result.conversations:
                if conversation.id not in present:
                    save_conversation(db, conversation)
                    report.conversations_added += 1
    for setting in SETTINGS:
        path = directory / f"votes_{setting}.csv"
        if path.is_file():
            _import_votes(db, path, setting, report)
    from arena.battle_tags import tag_missing

    report.tagged = tag_missing(db, catalog=catalog)  # the kinds of request and the names replies revealed (#75)
    if score:
        report.scored, report.score_failed = _score_with_proxy(db, imported, catalog)
    return report


def _score_with_proxy(db: Database, conversation_ids: list[str], catalog: Catalog | None) -> tuple[int, int]:
    """Proxy-score the stored conversations (as stored, so an id taken by another conversation is
    scored as that conversation says); returns (scored, failed)."""
    from evaluators.pipeline import evaluate_conversation
    from evaluators.scorer_setup import build_setup
    from storage.conversations import get_conversation
    from storage.db import db_file as file_of

    path = file_of(db)
    setup = build_setup(db_path=path, scorer="proxy", catalog_name=catalog.name if catalog is not None else "bundled")
    scored = failed = 0
    for conversation_id in conversation_ids:
        conversation = get_conversation(db, conversation_id)
        if conversation is None or not any(t.role == "system" for t in conversation.turns):
            failed += 1  # nothing to judge: no system reply
            continue
        try:
            evaluation = evaluate_conversation(conversation, setup, db_path=path)
        except ValueError:  # the pipeline found nothing to judge
            failed += 1
            continue
        scored += evaluation.status in ("done", "partial")
    return scored, failed


def _import_votes(db: Database, path: Path, setting: str, report: ImportReport) -> None:
    battles: dict[str, tuple[Battle, Vote]] = {}
    for n, row in enumerate(_read_votes(path), 2):  # line 1 is the header
        report.vote_rows += 1
        user, a, b = row["user_id"].strip(), row["crs1"].strip(), row["crs2"].strip()
        where = f"line {n}"
        if not user or not a or not b or a == b:
            raise LogFormatError(path, where, "a user_id and two different systems crs1, crs2")
        choice = {a: "a", b: "b", "tie": "tie"}.get(row["vote"].strip())
        if choice is None:
            raise LogFormatError(path, where, f"vote = {a!r}, {b!r} or 'tie' (got {row['vote']!r})")
        when = _timestamp(path, where, row["session_id"])
        battle = Battle(
            id=f"crsarena-dial:{setting}:{user}:{a}:{b}",
            system_a=a,
            system_b=b,
            conversation_a=f"{a}_{user}",
            conversation_b=f"{b}_{user}",
            domain=DOMAIN,
            session=f"crsarena-dial:{setting}",
            created_at=when,
        )
        if battle.id in battles:
            report.repeated_rows += 1
            battle = battles[battle.id][0]  # the battle began with the first row; the later vote counts
        vote = Vote(
            battle_id=battle.id,
            choice=choice,
            feedback=(row.get("feedback") or "").strip(),
            voter=user,
            created_at=when,
        )
        battles[battle.id] = (battle, vote)
    report.battles += len(battles)
    conversations = existing_ids(
        db,
        "conversations",
        [c for battle, _ in battles.values() for c in (battle.conversation_a, battle.conversation_b)],
    )
    present = existing_ids(db, "battles", battles)
    voted = voted_ids(db, battles)
    for battle_id, (battle, vote) in battles.items():
        if battle.conversation_a not in conversations:
            battle.conversation_a = None  # type: ignore[assignment]  # records.Battle says str; a side may be NULL
            report.sides_without_conversation += 1
        if battle.conversation_b not in conversations:
            battle.conversation_b = None  # type: ignore[assignment]  # records.Battle says str; a side may be NULL
            report.sides_without_conversation += 1
        if battle_id not in present:
            save_battle(db, battle)
            report.battles_added += 1
        if battle_id not in voted:
            save_vote(db, vote)
            report.votes_added += 1


def _read_votes(path: Path) -> list[dict]:
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            missing = [c for c in VOTE_COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise LogFormatError(
                    path, "header", f"the columns {', '.join(VOTE_COLUMNS)} (missing {', '.join(missing)})"
                )
            rows = list(reader)
    except UnicodeDecodeError as e:
        raise LogFormatError(path, f"byte {e.start + 1}", "UTF-8 text") from None
    except csv.Error as e:
        raise LogFormatError(path, "a row", f"CSV ({e})") from None
    for n, row in enumerate(rows, 2):
        if any(v is None for v in row.values()) or None in row:
            raise LogFormatError(path, f"line {n}", f"the {len(reader.fieldnames or ())} columns of the header")
    return rows


def _timestamp(path: Path, where: str, text: str) -> str:
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise LogFormatError(path, where, f"session_id as a timestamp (got {text!r})") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.astimezone(UTC).isoformat(timespec="seconds")


EXPORT_KINDS = {
    "conversations": "conversation",
    "votes": "vote",
    "judgments": "judgment",
    "human_labels": "human_label",
}


DIAL_EXPORT = "crs_arena_dial_app.json"
VOTES_EXPORT = "votes_app.csv"


def export_dial(db: Database, folder: str | Path) -> dict[str, int]:
    """This app's chat and arena conversations (those the system answered) and its votes in CRSArena-Dial's layout:
    ``crs_arena_dial_app.json`` (``conversation ID`` = ``<system>_<uuid>``, the uuid being the battle's, so both
    sides share a "user" as in CRS Arena, or the chat conversation's; ``agent``, ``user``, ``conversation`` with
    ``utterance ID`` s, ``metadata.sentiment`` where the person said how it ended) and ``votes_app.csv``
    (``session_id`` = the vote's time, ``user_id``, ``crs1``, ``crs2``, ``vote`` = the winner's system or ``tie``;
    *both bad* is a tie, as CRS Arena had no such button; ``feedback``). No session or voter id is written.
    Returns the rows of each file."""
    from storage.conversations import get_conversation
    from storage.human_labels import export_user

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    group_of = {}
    for b in db.query("select id, conversation_a, conversation_b from battles"):
        group_of[b["conversation_a"]] = group_of[b["conversation_b"]] = b["id"]
    dialogues = []
    for row in db.query("select id from conversations where source in ('chat', 'arena') order by created_at, rowid"):
        conversation = get_conversation(db, row["id"])
        if conversation is None or not any(t.role == "system" for t in conversation.turns):
            continue
        user = export_user(group_of.get(conversation.id, conversation.id))
        conv_id = f"{conversation.system_id}_{user}"
        sentiment = conversation.metadata.get("sentiment")
        dialogues.append(
            {
                "conversation ID": conv_id,
                "agent": {"id": conversation.system_id, "type": "AGENT"},
                "user": {"id": user, "type": "USER"},
                "conversation": [
                    {
                        "participant": "USER" if t.role == "user" else "AGENT",
                        "utterance": t.text,
                        "utterance ID": f"{conversation.system_id}-{user}_{n}",
                    }
                    for n, t in enumerate(conversation.turns)
                ],
                "metadata": {"sentiment": sentiment} if sentiment else {},
            }
        )
    (folder / DIAL_EXPORT).write_text(json.dumps(dialogues, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    votes = list(
        db.query(
            "select v.created_at, v.choice, v.feedback, b.id, b.system_a, b.system_b from votes v "
            "join battles b on b.id = v.battle_id join conversations c on c.id = b.conversation_a "
            "where c.source = 'arena' order by v.created_at, v.id"
        )
    )
    with open(folder / VOTES_EXPORT, "w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(VOTE_COLUMNS)
        for v in votes:
            user = export_user(v["id"])
            winner = {"a": v["system_a"], "b": v["system_b"]}.get(v["choice"], "tie")
            writer.writerow([v["created_at"], user, v["system_a"], v["system_b"], winner, v["feedback"] or ""])
    return {"conversations": len(dialogues), "votes": len(votes)}


def export_jsonl(db: Database, path: str | Path) -> dict[str, int]:
    """Write the database's conversations, votes, judgments and people's ratings to ``path``, one JSON object per
    line tagged ``"type": "conversation" | "vote" | "judgment" | "human_label"`` (rows from :mod:`storage.export`,
    which leaves out voter and rater ids). Returns the number of rows of each export."""
    counts = {}
    with open(path, "w", encoding="utf-8") as f:
        for name, rows in EXPORTS.items():
            counts[name] = 0
            for row in rows(db):
                f.write(json.dumps({"type": EXPORT_KINDS.get(name, name), **row}, ensure_ascii=False) + "\n")
                counts[name] += 1
    return counts
