"""Restoring the board at a Space's start (arena/hub_restore.py): how long it takes, and whether the board comes back
the same.

Two exports, each written by ``arena.hub_sync.write_export`` from a database and restored into an empty one by
``arena.hub_restore.restore_folder`` (what the app runs after downloading the files):

* CRSArena-Dial (``<data dir>/crsarena``, read by the project's importer), its votes with their conversations and the
  proxy's judgments of them;
* 100,000 synthetic votes among 20 systems (tests/synthetic_votes.py's vote model), each battle with its two
  conversations of two turns (200,000 conversations), written with the storage layer's bulk writes.

For each: ``BENCH restore_s`` (the restore alone: reading, checking, writing; target <= 10 s for the 100,000 votes on
two cores) and the board before against the board after (every system's rating within 1e-9).

    python bench/space_restore.py [--votes 100000] [--votes-only]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from synthetic_votes import synthetic_votes

from arena.board_compute import compute_board
from arena.crsarena_import import import_crsarena
from arena.hub_restore import restore_folder
from arena.hub_sync import write_export
from catalog.catalog import data_dir
from storage.battle_votes import insert_voted_battles
from storage.conversations import insert_new_conversations
from storage.db import open_db
from storage.records import Battle, Conversation, Turn, Vote

TARGET_S = 10.0


def board(db_path: Path, rounds: int) -> dict[str, float]:
    db = open_db(db_path)
    try:
        rows = compute_board(db, rounds=rounds, seed=0).rows
        return {r["system"]: r["rating"] for r in rows if r["rating"] is not None}
    finally:
        db.close()


def measure(name: str, source: Path, work: Path, *, rounds: int, target: bool) -> bool:
    started = time.perf_counter()
    counts = write_export(source, work / f"{name}_export")
    exported = time.perf_counter() - started
    started = time.perf_counter()
    restored = restore_folder(work / f"{name}_restored.db", work / f"{name}_export")
    seconds = time.perf_counter() - started
    before, after = board(source, rounds), board(work / f"{name}_restored.db", rounds)
    worst = max((abs(before[s] - after.get(s, float("inf"))) for s in before), default=0.0)
    same = before.keys() == after.keys() and worst <= 1e-9
    print(f"{name}: exported {counts} in {exported:.1f} s; restored {restored}")
    if target:  # one BENCH line, the target's: the synthetic 100,000 votes
        print(f"BENCH restore_s {seconds:.2f} s target <= {TARGET_S:g}")
    else:
        print(f"{name}: restore_s {seconds:.2f} s")
    print(
        f"{name}: board after the restore {'equals' if same else 'DIFFERS FROM'} the board before "
        f"({len(before)} systems, largest rating difference {worst:.1e}, tolerance 1e-9)"
    )
    return same and (not target or seconds <= TARGET_S)


def crsarena(work: Path) -> Path | None:
    folder = (data_dir() or Path("/nonexistent")) / "crsarena"
    if not folder.is_dir():
        print(f"CRSArena-Dial: not found under {folder} (set CRS_DATA_DIR): skipped")
        return None
    source = work / "crsarena.db"
    db = open_db(source)
    try:
        report = import_crsarena(db, folder, score=True)
    finally:
        db.close()
    print(f"CRSArena-Dial: {report.summary()}")
    return source


def synthetic(work: Path, n_votes: int, *, conversations_too: bool = True) -> Path:
    """``n_votes`` votes, each battle with its two conversations (``conversations_too``) or with sides that hold no
    stored conversation (as three of CRSArena-Dial's sides)."""
    source = work / f"synthetic{'' if conversations_too else '_votes_only'}.db"
    frame = synthetic_votes(20, n_votes, seed=7)
    conversations: list[Conversation] = []
    voted: list[tuple[Battle, Vote]] = []
    for k, (a, b, winner) in enumerate(frame[["model_a", "model_b", "winner"]].itertuples(index=False)):
        stamp = f"2025-01-01T00:00:{k % 60:02d}+00:00"
        sides = [
            Conversation(
                system_id=system,
                id=f"syn-{k}-{side}",
                source="arena",
                turns=[Turn("user", f"a film for tonight ({k})"), Turn("system", f"{system} suggests film {k}.")],
                created_at=stamp,
            )
            for side, system in (("a", a), ("b", b))
        ]
        ids: list = [None, None]
        if conversations_too:
            conversations += sides
            ids = [sides[0].id, sides[1].id]
        battle = Battle(a, b, ids[0], ids[1], id=f"syn-{k}", created_at=stamp)
        voted.append((battle, Vote(f"syn-{k}", winner, created_at=stamp)))
    db = open_db(source)
    try:
        insert_new_conversations(db, conversations)
        insert_voted_battles(db, voted)
    finally:
        db.close()
    return source


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--votes", type=int, default=100_000, help="synthetic votes (default 100,000)")
    parser.add_argument("--rounds", type=int, default=20, help="bootstrap rounds of each board (default 20)")
    parser.add_argument(
        "--votes-only", action="store_true", help="synthetic battles without stored conversations (the votes alone)"
    )
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory(prefix="bench-space-restore-") as tmp:
        work = Path(tmp)
        dial = crsarena(work)
        if dial is not None:
            ok &= measure("crsarena-dial", dial, work, rounds=args.rounds, target=False)
        if args.votes_only:
            source = synthetic(work, args.votes, conversations_too=False)
            ok &= measure(f"synthetic-{args.votes}-votes-only", source, work, rounds=args.rounds, target=True)
        else:
            ok &= measure(f"synthetic-{args.votes}", synthetic(work, args.votes), work, rounds=args.rounds, target=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
