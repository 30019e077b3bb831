"""The leaderboard as a read model: computed when votes or evaluations change, never written on read.

``board_state.version`` (storage migration m004) is bumped by triggers on every vote, evaluation
and conversation system/source change. A board is computed for one set of filters at one version:

* :func:`read_board` (the Leaderboard tab, ``/leaderboard``) reads the version, then returns the
  board from this process's cache, or from the stored snapshot of that version, or computes it in
  memory. It never writes to the database, so anonymous reads cost no write and leave no rows.
* :func:`refresh_board` (after a vote, after judging, after an import, at start, and from the
  background :class:`Refresher` that catches writes by other processes such as the command line)
  stores a snapshot of the default board when the version moved since the last one; older
  snapshots beyond :data:`storage.battle_votes.SNAPSHOTS_KEPT` per filter set are deleted.

A board is plain Bradley–Terry or style-controlled (``style``, :func:`arena.board_compute.compute_board`); the
style-controlled one has its own cache key, and every board carries ``fit``, which says the method that produced
it; a snapshot stores it beside the filters (``filters["fit"]``), so a stored board says how it was made.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import plotly.graph_objects as go
from sqlite_utils import Database

from arena.board_compute import (
    PLAIN,
    battle_table,
    choose_scorer,
    compute_board,
    judge_setup_choices,
    win_rate_figure,
)
from storage.battle_votes import board_version, latest_leaderboard_snapshot, save_leaderboard_snapshot
from storage.db import close_thread_connections, db_file, get_db
from storage.uploads import uploads_on_leaderboard

log = logging.getLogger(__name__)

CACHE_SIZE = 32
_cache: OrderedDict[tuple, Board] = OrderedDict()
_cache_lock = threading.Lock()


@dataclass
class Board:
    rows: list[dict]
    figures: dict[str, go.Figure]
    scorer: str | None
    version: int
    available_scorers: list[str] = field(default_factory=list)
    source: str = "computed"  # computed | snapshot | cache
    fit: dict = field(default_factory=dict)  # how the ratings were made (arena.board_compute.ComputedBoard.fit)


def board_key(
    *,
    domain: str | None,
    dataset: str | None,
    scorer: str | None,
    uploads: bool,
    style: bool = False,
    kind: str | None = None,
    revealed: bool = False,
) -> str:
    """The filters, canonical: the snapshot and cache key (a style-controlled board adds ``"style": true``, a kind's
    board ``"kind"``, a board rating the votes that revealed a name ``"revealed": true``)."""
    key: dict = {"domain": domain, "dataset": dataset, "scorer": scorer, "uploads": uploads}
    if style:
        key["style"] = True
    if kind:
        key["kind"] = kind
    if revealed:
        key["revealed"] = True
    return json.dumps(key, sort_keys=True)


def read_board(
    db: Database,
    *,
    domain: str | None = None,
    dataset: str | None = None,
    scorer: str | None = None,
    style: bool = False,
    kind: str | None = None,
    revealed: bool = False,
) -> Board:
    """The board for these filters at the current data version (``style``: style-controlled; ``kind``: one kind of
    request's board; ``revealed``: votes that revealed a name rated too). Never writes."""
    version = board_version(db)
    uploads = uploads_on_leaderboard()
    setups = judge_setup_choices(db, uploads=uploads)  # read once: the menu and the setup shown
    available = [label for label, _ in setups]
    chosen = choose_scorer(available, scorer)
    key = board_key(
        domain=domain, dataset=dataset, scorer=chosen, uploads=uploads, style=style, kind=kind, revealed=revealed
    )
    cache_key = (_db_file(db), key, version)
    with _cache_lock:
        hit = _cache.get(cache_key)
        if hit is not None:
            _cache.move_to_end(cache_key)
            return Board(hit.rows, hit.figures, hit.scorer, version, available, "cache", hit.fit)
    snapshot = latest_leaderboard_snapshot(db, key)
    if snapshot is not None and snapshot["version"] == version:
        rows = snapshot["rows"]
        fit = snapshot["filters"].get("fit") or {"method": PLAIN, "style": style}  # older snapshots: plain
        figures = {"win_rate": _figure(db, domain, dataset, rows, kind, revealed)}
        board = Board(rows, figures, chosen, version, available, "snapshot", fit)
    else:
        computed = compute_board(
            db,
            domain=domain,
            dataset=dataset,
            scorer=chosen,
            uploads=uploads,
            setups=setups,
            style=style,
            kind=kind,
            revealed=revealed,
        )
        board = Board(computed.rows, computed.figures, chosen, version, available, "computed", computed.fit)
    _remember(cache_key, board)
    return board


def refresh_board(db: Database) -> int | None:
    """Store a snapshot of the default board (no filters, default scorer) if the data changed since
    the last one. Returns the snapshot id, or None when it was already current. Battles voted without a tag yet
    (before the tags existed, restored from a backup) are tagged first (:func:`arena.battle_tags.tag_missing`)."""
    from arena.battle_tags import tag_missing

    try:
        tag_missing(db)
    except Exception:  # the tags wait for the next refresh; the board is stored all the same
        log.exception("tagging the battles failed")
    version = board_version(db)
    board = read_board(db)
    if board.version != version:
        return None
    key = board_key(domain=None, dataset=None, scorer=board.scorer, uploads=uploads_on_leaderboard())
    return save_leaderboard_snapshot(
        db,
        board.rows,
        scorer=board.scorer or "",
        key=key,
        version=version,
        filters={"domain": None, "dataset": None, "scorer": board.scorer, "fit": board.fit},
    )


class Refresher:
    """A daemon thread that calls :func:`refresh_board` when the data version moves (checked every
    ``every`` seconds, or after :meth:`poke`).

    Refreshes coalesce: any number of pokes while a refresh runs, or within ``min_gap`` seconds after one,
    lead to one more refresh, not one per vote; a vote is on the stored board within about ``min_gap`` plus
    one refresh. (Under 700 votes a second, a refresh per vote would redraw the board back to back.)"""

    def __init__(self, db_path, *, every: float = 5.0, min_gap: float = 1.0):
        self.db_path = db_path
        self.every = every
        self.min_gap = min_gap
        self.refreshes = 0  # stored snapshots, for the tests and the benches
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="board-refresher", daemon=True)
        self._seen: int | None = None

    def start(self) -> Refresher:
        self._thread.start()
        return self

    def poke(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    db = get_db(self.db_path)
                    version = board_version(db)
                    if version != self._seen:
                        refresh_board(db)
                        self._seen = version
                        self.refreshes += 1
                        self._stop.wait(self.min_gap)  # pokes meanwhile are kept and answered by one refresh
                except Exception:  # never let the refresher die; readers compute in memory meanwhile
                    log.exception("leaderboard refresh failed")
                self._wake.wait(self.every)
                self._wake.clear()
        finally:
            close_thread_connections()


def _remember(key: tuple, board: Board) -> None:
    with _cache_lock:
        _cache[key] = board
        _cache.move_to_end(key)
        while len(_cache) > CACHE_SIZE:
            _cache.popitem(last=False)


def _figure(
    db: Database, domain: str | None, dataset: str | None, rows: list[dict], kind: str | None, revealed: bool
) -> go.Figure:
    battles = battle_table(db, domain=domain, dataset=dataset, kind=kind, revealed=revealed)
    order = [r["system"] for r in rows if r["rating"] is not None]
    return win_rate_figure(battles if order else battles.iloc[0:0], order)


def _db_file(db: Database) -> str:
    return db_file(db) or f"memory:{id(db.conn)}"
