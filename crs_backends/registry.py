"""Which systems exist and how to build one.

ChatCRS and the retrieval baseline are built at once. KBRD, BARCOR and UniCRS resolve their
checkpoints (:mod:`crs_backends.neural.sources`: ``CRS_MODELS_DIR``, the fetched CRS Arena archive, a
fetched Hub repository, else the small local versions) and load them; when nothing is there, the small
local versions are built first (minutes, once; ``CRS_NEURAL_BUILD=never`` turns that off). A system that
cannot run raises :class:`SystemUnavailable`, whose message says why and which command fixes it.

A small local version is a system of its own: ``kbrd_small`` ("KBRD (small)"), never ``kbrd``. The selectors offer
``kbrd`` (the published checkpoint where there is one, else the small version); what answers records its own id
(:attr:`SystemInfo.id`), the arena pairs the ids of what runs (:func:`ready_system_ids`), and ``kbrd_small`` itself
always runs the small version. So a small version's conversations, votes and scores never count as the published
model's (storage migration ``m007_small_versions_own_ids`` moved those recorded before under the published id).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from catalog.catalog import get_catalog
from crs_backends import health
from crs_backends.base import CRSSystem, SystemInfo
from crs_backends.neural.names import (
    FETCH_COMMAND,
    SMALL_COMMAND,
    SMALL_IDS,
    SMALL_LABELS,
    SYSTEM_OF_SMALL_ID,
    SourceError,
)
from crs_backends.neural.names import LABELS as LABELS_NEURAL
from crs_backends.neural.names import SYSTEMS as SYSTEMS_NEURAL
from crs_backends.plugins import missing_package
from llm_clients.registry import client_for
from llm_clients.sentence_encoder import MODEL_LOAD_LOCK

log = logging.getLogger(__name__)

NEURAL = SYSTEMS_NEURAL  # the published systems that run from checkpoints
NEURAL_LABELS = LABELS_NEURAL


class SystemUnavailable(RuntimeError):
    """A system cannot answer now (no checkpoint, a broken one, or its small version is being built)."""


def _chatcrs(db_path) -> CRSSystem:
    from crs_backends.chatcrs import ChatCRS

    return ChatCRS(client_for("crs", db_path=db_path), catalog_for_chat())


def _retrieval(db_path) -> CRSSystem:
    from crs_backends.tfidf_baseline import RetrievalCRS

    return RetrievalCRS(catalog_for_chat())


def neural_build_allowed() -> bool:
    """Whether a neural system may build the small local versions when no checkpoint is there."""
    # ``never`` by default: the small sets train on ReDial for hours (crs_backends.neural.small); a copy without its
    # shipped set says which command builds one rather than start that on a person's first message
    return (os.environ.get("CRS_NEURAL_BUILD") or "never").strip().lower() not in ("never", "0", "no", "false", "off")


class _BuildState:
    """The one build of the small local versions that may run at a time, and how far it got."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.phase = ""
        self.done = 0
        self.total = 0

    @property
    def running(self) -> bool:
        return self.lock.locked()

    def progress(self, phase: str, done: int, total: int) -> None:
        self.phase, self.done, self.total = phase, done, total

    def describe(self) -> str:
        if not self.phase:
            return "starting"
        share = f" {100 * self.done // self.total}%" if self.total else ""
        return f"{self.phase}{share}"


_build = _BuildState()


def _being_built_message(system_id: str) -> str:
    system = SYSTEM_OF_SMALL_ID.get(system_id, system_id)
    return (
        f"{SMALL_LABELS[system]}: the small local versions of KBRD, BARCOR and UniCRS are being built "
        f"({_build.describe()}); this happens once and takes hours on ReDial. Pick "
        "another system meanwhile."
    )


def _neural(system_id: str) -> Callable[..., CRSSystem]:
    """``kbrd``: the published checkpoint where one is there, else the small local version (``kbrd_small``'s, the
    same loaded system), built first when allowed."""

    def factory(db_path) -> CRSSystem:
        from crs_backends.neural import sources

        policy = _policy(NEURAL_LABELS[system_id])
        try:
            source = sources.resolve(system_id)
        except SourceError as missing:
            # checkpoints without their dataset files: name the fetch command, do not build something else instead
            if (
                isinstance(missing, sources.DatasetFilesMissing)
                or not neural_build_allowed()
                or not _small_builder_present()
            ):
                raise SystemUnavailable(str(missing)) from None
            source = None  # nothing yet: the small local version, built first
        if source is None or source.small:
            return get_system(SMALL_IDS[system_id], db_path=db_path)
        return _open(source, policy)

    return factory


def _small_neural(system: str) -> Callable[..., CRSSystem]:
    """``kbrd_small``: the small local version of ``kbrd`` and nothing else, built first when allowed."""

    def factory(db_path) -> CRSSystem:
        from crs_backends.neural import sources

        policy = _policy(SMALL_LABELS[system])
        source = sources.small_source(system)
        if source is None:
            if not neural_build_allowed() or not _small_builder_present():
                raise SystemUnavailable(
                    f"{SMALL_LABELS[system]}: the small local versions are not built (run `{SMALL_COMMAND}`)."
                )
            source = _build_and_resolve(system)
        return _open(source, policy)

    return factory


def _policy(label: str) -> str | None:
    from crs_backends.neural.system import policy_setting

    try:
        return policy_setting()
    except ValueError as e:  # CRS_NEURAL_POLICY names no policy
        raise SystemUnavailable(f"{label}: {e} (setting CRS_NEURAL_POLICY)") from None


def _open(source, policy: str | None) -> CRSSystem:
    """The system that answers from ``source`` (a resolved checkpoint set); loading errors as messages."""
    from crs_backends.neural.checkpoints import CheckpointError
    from crs_backends.neural.kg_reader import KGError
    from crs_backends.neural.system import open_system

    label = source.label
    try:
        with MODEL_LOAD_LOCK:  # one model load at a time: transformers' lazy imports race across threads
            return open_system(source, catalog_for_chat(), policy=policy)
    except ImportError as e:
        package = missing_package(e)
        if package is None:  # a module of ours is broken or renamed: an error, never "not installed"
            log.exception("the model code of %s failed to import", source.system)
            raise SystemUnavailable(
                f"{label}'s model code failed to import ({e.name or 'a module'}); the details are in the server log."
            ) from None
        raise SystemUnavailable(f"{label} needs the package {package!r}, which is not installed ({e}).") from None
    except (CheckpointError, KGError, SourceError, OSError, ValueError) as e:
        raise SystemUnavailable(
            f"{label} could not load its checkpoint ({source.variant}, {source.root}): {e}"
        ) from None
    except Exception as e:  # anything else while loading: a message in the UI, the details in the log
        log.exception("loading %s from %s failed", source.system, source.root)
        raise SystemUnavailable(
            f"{label} could not load its checkpoint ({source.variant}, {source.root}): {type(e).__name__}: {e}"
        ) from None


def _small_builder():
    """The builder of the small local versions (:mod:`crs_backends.neural.small`), or None where its third-party
    packages are not installed (a broken module of ours raises)."""
    try:
        from crs_backends.neural import small
    except ImportError as e:
        if missing_package(e) is None:
            raise
        log.debug("small versions cannot be built here: %s", e)
        return None
    return small


def _small_builder_present() -> bool:
    return _small_builder() is not None


def _build_and_resolve(system_id: str):
    """Build the small local versions (one build at a time; others are told it is running), then the small version
    of ``system_id``."""
    from crs_backends.neural import sources

    if not _build.lock.acquire(blocking=False):
        raise SystemUnavailable(_being_built_message(system_id))
    try:
        _build.progress("", 0, 0)
        log.warning("no checkpoint for %s: building the small local versions (once; hours on ReDial)", system_id)
        try:
            builder = _small_builder()
            if builder is None:
                raise SourceError("the small local versions cannot be built here: their packages are missing")
            builder.ensure_small_models(progress=_build.progress)
        except SourceError as e:
            raise SystemUnavailable(str(e)) from None
        except Exception as e:  # whatever the builder raises, the UI shows a message, not a crash
            log.exception("building the small local versions failed")
            raise SystemUnavailable(
                f"Building the small local versions failed: {type(e).__name__}: {e}. "
                f"Run `{SMALL_COMMAND}` to see the details."
            ) from None
    finally:
        _build.lock.release()
    found = sources.small_source(system_id)
    if found is None:
        raise SystemUnavailable(f"{SMALL_LABELS[system_id]}: the small local versions were built without it.")
    return found


# id -> (label, factory)
SYSTEMS: dict[str, tuple[str, Callable[..., CRSSystem]]] = {
    "chatcrs": ("ChatCRS", _chatcrs),
    "retrieval": ("Retrieval baseline", _retrieval),
    **{s: (NEURAL_LABELS[s], _neural(s)) for s in NEURAL},
    **{SMALL_IDS[s]: (SMALL_LABELS[s], _small_neural(s)) for s in NEURAL},
}

_operator_read = False
_operator_lock = threading.Lock()


def systems() -> dict[str, tuple[str, Callable[..., CRSSystem]]]:
    """Every registered system: the built-in ones and those the operator registered in the systems file
    (``CRS_SYSTEMS_FILE``: remote HTTP systems and plug-ins), so the Chat selector, the arena, the simulator
    and the leaderboard see them. The file is read on first use, never at import; a file that cannot be
    used raises :class:`crs_backends.systems_file.SystemsFileError` naming its file and line (the app and
    every command line print that line and stop)."""
    global _operator_read
    if not _operator_read:
        with _operator_lock:
            if not _operator_read:
                from crs_backends.systems_file import operator_systems

                SYSTEMS.update(operator_systems(reserved=SYSTEMS))
                _operator_read = True
    return SYSTEMS


_built: dict[tuple[str, str], CRSSystem] = {}
_locks: dict[tuple[str, str], threading.Lock] = {}
_locks_guard = threading.Lock()


def entry_of(system_id: str):
    """The systems-file entry (:class:`crs_backends.systems_file.SystemEntry`) of a registered system, if it came
    from the file; None for a built-in one or an unknown id."""
    from crs_backends.systems_file import EntryFactory

    found = systems().get(system_id)
    return found[1].entry if found and isinstance(found[1], EntryFactory) else None


def catalog_for_chat():
    """The catalog systems recommend from: ``CRS_CATALOG`` (default: the bundled movies)."""
    return get_catalog(os.environ.get("CRS_CATALOG", "bundled"))


def system_ids() -> list[str]:
    """The systems people choose from: every registered one but the small versions' own ids (``kbrd`` offers the
    small version where no published checkpoint is there, under its own id)."""
    return [s for s in systems() if s not in SYSTEM_OF_SMALL_ID]


def get_system(system_id: str, *, db_path=None) -> CRSSystem:
    """The (cached) system for ``system_id``.

    Raises KeyError for an unknown id and :class:`SystemUnavailable` when the system cannot run now.
    """
    known = systems()
    if system_id not in known:
        raise KeyError(f"unknown system {system_id!r}; known: {', '.join(known)}")
    key = (system_id, str(db_path))
    if key in _built:
        return _built[key]
    with _locks_guard:
        lock = _locks.setdefault(key, threading.Lock())
    if not lock.acquire(blocking=False):
        if (system_id in NEURAL or system_id in SYSTEM_OF_SMALL_ID) and _build.running:
            raise SystemUnavailable(_being_built_message(system_id))
        lock.acquire()
    try:
        if key not in _built:  # a failure is not cached: the next call tries again
            _built[key] = known[system_id][1](db_path)
        return _built[key]
    finally:
        lock.release()


def ready_system_ids(*, db_path=None) -> list[str]:
    """The ids of the systems that can answer without a build first, as what runs answers under them (``kbrd``, or
    ``kbrd_small`` where the small version runs): all but the neural ones that have no checkpoint yet (for the
    arena, which should not make a person wait for a build), and those whose latest answer failed a moment ago
    (:mod:`crs_backends.health`: a battle with a side that cannot answer cannot be voted on)."""
    ready = []
    for system_id in system_ids():
        if system_id in NEURAL:
            runs_as = _runs_as(system_id, db_path)
            if runs_as is None:
                continue
            system_id = runs_as
        if not health.resting(system_id):
            ready.append(system_id)
    return ready


def board_id(system_id: str) -> str:
    """The id the answers of ``system_id`` (an id what runs answers under) are rated under now: a small local
    version's with the set that runs (``kbrd_small@v8``; :func:`storage.board_inputs.board_system_sql` reads the
    same from the turns it recorded), any other system's as it is."""
    from crs_backends.neural import sources
    from storage.board_inputs import SET_MARK

    system = SYSTEM_OF_SMALL_ID.get(system_id)
    source = sources.small_source(system) if system else None
    return f"{system_id}{SET_MARK}{source.version}" if source is not None else system_id


def _runs_as(system_id: str, db_path) -> str | None:
    """The id the neural ``system_id`` answers under now (``kbrd`` or ``kbrd_small``); None when nothing is there
    to run without a build."""
    from crs_backends.neural import sources

    built = _built.get((system_id, str(db_path)))
    if built is not None:
        return built.info.id
    try:
        return sources.resolve(system_id).system_id
    except Exception:
        return None


def system_info(system_id: str, *, db_path=None) -> SystemInfo:
    """What ``system_id`` runs, without loading a neural model (nor building its small version)."""
    known = systems()
    if system_id not in known:
        raise KeyError(f"unknown system {system_id!r}; known: {', '.join(known)}")
    built = _built.get((system_id, str(db_path)))
    if built is not None:
        return built.info
    if system_id in NEURAL:
        return _describe_neural(system_id)
    if system_id in SYSTEM_OF_SMALL_ID:
        return _describe_small(SYSTEM_OF_SMALL_ID[system_id])
    return get_system(system_id, db_path=db_path).info


def _describe_neural(system_id: str) -> SystemInfo:
    from crs_backends.neural import sources

    label = NEURAL_LABELS[system_id]
    try:
        source = sources.resolve(system_id)
        return SystemInfo(id=source.system_id, label=source.label, variant=source.variant, demo=source.small)
    except sources.DatasetFilesMissing as e:
        from crs_backends.neural.datasets import fetch_command

        return SystemInfo(
            id=system_id,
            label=label,
            variant=f"not available: published checkpoints without their dataset files (run "
            f"`{fetch_command(e.dataset)}`)",
        )
    except SourceError:
        pass
    except Exception as e:  # a broken manifest or folder: describe, do not crash the page
        return SystemInfo(id=system_id, label=label, variant=f"not available ({type(e).__name__}: {e})")
    if neural_build_allowed() and _small_builder_present():
        return _small_to_build(system_id)
    return SystemInfo(
        id=system_id,
        label=label,
        variant=f"not available: no checkpoint (run `{FETCH_COMMAND}` or `{SMALL_COMMAND}`)",
    )


def _small_to_build(system: str) -> SystemInfo:
    when = "being built now" if _build.running else "built on first use (hours: trained on ReDial)"
    return SystemInfo(
        id=SMALL_IDS[system], label=SMALL_LABELS[system], variant=f"small local version ({when})", demo=True
    )


def _describe_small(system: str) -> SystemInfo:
    """What ``<system>_small`` runs, without loading it (nor building it)."""
    from crs_backends.neural import sources

    try:
        source = sources.small_source(system)
    except Exception as e:  # a broken manifest or folder: describe, do not crash the page
        source = None
        log.warning("the small %s cannot be described: %s", system, e)
    if source is not None:
        return SystemInfo(id=source.system_id, label=source.label, variant=source.variant, demo=True)
    if neural_build_allowed() and _small_builder_present():
        return _small_to_build(system)
    return SystemInfo(
        id=SMALL_IDS[system], label=SMALL_LABELS[system], variant=f"not available: not built (run `{SMALL_COMMAND}`)"
    )


def system_infos(*, db_path=None) -> list[SystemInfo]:
    return [system_info(s, db_path=db_path) for s in system_ids()]


# The system the Chat tab opens on. Compared by chatting offline (the three messages and the
# batch in crs_backends/chatcrs_check.py): ChatCRS on the embedded model, constrained to catalog titles,
# asks when it knows nothing yet, recommends what fits the genres, people and years asked for, and
# explains on "why?" (bench/chatcrs_offline.py: 0 invented titles, 0 wrong facts over 20 turns); the
# retrieval baseline answers every message with two items
# ("Something funny please" -> Alien), and the small neural versions need a build of minutes first.
# With a capable model configured for the crs role ChatCRS writes freely, as iEvaLM prompts it.
DEFAULT_SYSTEM = "chatcrs"

# What each built-in system is, in a few words (the Chat tab shows one line per system).
ABOUT = {
    "chatcrs": "an LLM prompted as a recommender (iEvaLM's ChatCRS), grounded in the catalog",
    "retrieval": "TF-IDF search over the catalog with template replies, the floor every system should beat",
    "kbrd": "knowledge-graph recommender with a BART reply model (KBRD)",
    "barcor": "BART recommender and reply model (BARCOR)",
    "unicrs": "prompt-learning recommender over DialoGPT and RoBERTa (UniCRS)",
}

# What the small local versions are, in one sentence each (the Chat tab's line for a system running one; the details
# are in docs/neural-systems.md): each its namesake's architecture at small size, trained here
# (crs_backends/neural/small.py); :func:`small_recall_note` adds the R@10 its set measured on ReDial's test split
ABOUT_SMALL = {
    "kbrd": "KBRD's architecture at small size (a knowledge-graph recommender and a small Transformer that replies)",
    "barcor": "BARCOR's architecture at small size, with all-MiniLM-L6-v2 as its encoder",
    "unicrs": "UniCRS's knowledge-enhanced soft prompts on the frozen SmolLM2-135M-Instruct",
}


def small_recall_note(system: str) -> str:
    """The R@10 on ReDial's test split that the running small set's manifest records for ``system`` (measured on
    that set by bench/crs_fidelity.py), beside the published one; says so where the set records none."""
    from crs_backends.neural import sources
    from crs_backends.neural.evaluation import PUBLISHED_RECALL

    source = sources.small_source(system)
    manifest = sources.read_manifest_quietly(source.root) if source is not None else {}
    reading = manifest.get("redial_test")
    recall = _of_system(reading.get("recall") if isinstance(reading, dict) else None, system).get("10")
    if not isinstance(recall, int | float):
        return "not measured on ReDial's test split"
    return f"R@10 {recall:.3f} on ReDial's test split (published {PUBLISHED_RECALL[system][1]:.3f})"


def _of_system(table, system: str) -> dict:
    value = table.get(system) if isinstance(table, dict) else None
    return value if isinstance(value, dict) else {}


_KINDS = ("not available", "published checkpoint", "small local version", "locally trained checkpoint")


def default_system_id() -> str:
    """The system the Chat tab opens on (:data:`DEFAULT_SYSTEM`, else the first one registered)."""
    known = systems()
    return DEFAULT_SYSTEM if DEFAULT_SYSTEM in known else next(iter(known))


def system_kind(info: SystemInfo) -> str:
    """What kind of thing runs: published checkpoint, small local version, demo model, no model, ..."""
    variant = info.variant.strip()
    for kind in _KINDS:
        if variant.lower().startswith(kind):
            return kind
    if info.id == "retrieval":
        return "no model"
    if info.id == "chatcrs":
        return "demo model" if info.demo else "LLM"
    return "demo version" if info.demo else "registered system"


def system_line(info: SystemInfo) -> str:
    """One line for people: the system, what kind of thing runs, what it is, and the details of what runs."""
    kind = system_kind(info)
    detail = info.variant.strip()
    if detail.lower().startswith(kind):
        detail = detail[len(kind) :].strip().removeprefix(":").strip()
        if detail.startswith("(") and detail.endswith(")"):
            detail = detail[1:-1]
    system = SYSTEM_OF_SMALL_ID.get(info.id, info.id)
    if kind == "small local version" and system in ABOUT_SMALL:
        # one sentence: what it is, what it was trained on, what it measured (details: docs/neural-systems.md)
        return f"{info.label} · {ABOUT_SMALL[system]}, {detail}; {small_recall_note(system)}."
    about = ABOUT.get(system, "")
    line = f"{info.label} · {kind}"
    if about:
        line += f" — {about}"
    if detail and info.id != "retrieval":
        line += f"; {detail}"
    return line
