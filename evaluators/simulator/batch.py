"""Batch benchmark: dataset records × systems, simulated concurrently, stored, evaluated, reported.

:func:`run_simulation` is what ``python -m evaluators simulate`` and the Simulate tab call:

1. read the records and choose up to ``n`` whose targets are in the systems' catalog (seeded order;
   what was skipped and why goes into the report);
2. play every (record, system) pair not finished yet, ``concurrency`` at a time. A pair is stored the
   moment it ends, conversation and outcome in one transaction; a rerun skips ``done`` and ``failed``
   pairs and redoes the rest (interrupted, or the simulator's endpoint failed), under the same
   conversation ids, so nothing is lost and nothing is duplicated;
3. evaluate each finished conversation (CoRE factors and debate, or the offline proxy; metrics with
   Recall@1/5/10/50) — a stored evaluation with the same setup is reused — and add the simulated
   user's persuasiveness and the simulation figures to its metrics;
4. write ``report.html`` (plotly charts), ``summary.csv``, ``dialogues.csv`` and
   ``conversations.jsonl`` into the run's folder (default ``<database folder>/simulations/<run id>``).

The run id is derived from everything that shapes a dialogue (records, protocol, seed, hit k,
personas, models, prompt version) but not from ``n`` or the systems, so a larger ``n`` or another
system extends the same run. Simulated conversations have source ``simulation``; the leaderboard
reads their evaluations (Recall@k and the scorer's factor and overall scores).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass, field
from pathlib import Path

from catalog.catalog import Catalog
from crs_backends.registry import catalog_for_chat, get_system, system_ids
from evaluators.judge.persuasiveness import VARIANTS as PERSUASIVENESS_VARIANTS
from evaluators.metrics import DEFAULT_HIT_K
from evaluators.pipeline import evaluate_conversation
from evaluators.simulator.personas import persona_for
from evaluators.simulator.protocols import (
    PROTOCOLS,
    Protocol,
    persuasiveness,
    reliability_probe,
    run_dialogue,
    sincerity_signal,
)
from evaluators.simulator.records import Case, read_records, records_path, select_cases
from evaluators.simulator.report import build_report, write_report
from evaluators.simulator.user import DEFAULT_SEEKER, SEEKERS, SimulatedUser, turn_seed
from llm_clients.base import LLMClient
from llm_clients.prompts import prompts_version
from llm_clients.registry import client_for
from storage.conversations import get_conversation
from storage.db import default_db_path, get_db
from storage.records import Conversation
from storage.simulations import (
    FINAL,
    dialogue_statuses,
    ensure_run,
    finish_dialogue,
    finish_run,
    merge_evaluation_metrics,
    run_dialogues,
    set_dialogue_evaluation,
    start_dialogue,
)

log = logging.getLogger(__name__)

PERSUASIVENESS_MODES = ("auto", "probability", "reasoned", "off")
REPORTS = "simulations"  # report folders live beside the database: <db folder>/simulations/<run id>


class UnknownSystem(ValueError):
    """A system id the registry does not know; the message lists the known ones."""


class SystemNotReady(RuntimeError):
    """A known system could not be built (e.g. no checkpoint); the message says which and why."""


@dataclass
class SimulationConfig:
    """One batch. ``systems`` are registry ids; ``dataset`` a name (redial, opendialkg), an iEvaLM folder or a
    ``.jsonl`` file."""

    systems: list[str]
    dataset: str = "redial"
    split: str = "test"
    n: int = 20
    protocol: str = "core"
    seed: int = 0
    hit_k: int = DEFAULT_HIT_K
    max_turns: int | None = None  # None: the protocol's (5)
    personas: bool = False
    reliability: bool = False
    persuasiveness: str = "auto"  # auto: probability under the free-form protocol (iEvaLM's), off otherwise
    seeker: str = DEFAULT_SEEKER  # ievalm: told the targets' titles (iEvaLM C.3, CoRE §6.4); described: leak-safe
    # what the persuasiveness judge reads of the lists: auto is iEvaLM's released script (its top 50 on the turn it
    # stopped at) under the free-form protocol, the shown items elsewhere
    persuasiveness_variant: str = "auto"
    temperature: float = 0.0
    concurrency: int = 4
    evaluate: bool = True
    scorer: str = "auto"
    debate: bool = True
    retry_failed: bool = False
    run_id: str | None = None
    out_dir: str | Path | None = None

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {self.protocol!r}; protocols: {', '.join(PROTOCOLS)}")
        if self.seeker not in SEEKERS:
            raise ValueError(f"unknown seeker {self.seeker!r}; seekers: {', '.join(SEEKERS)}")
        if self.persuasiveness not in PERSUASIVENESS_MODES:
            raise ValueError(f"persuasiveness must be one of {', '.join(PERSUASIVENESS_MODES)}")
        if self.persuasiveness_variant not in ("auto", *PERSUASIVENESS_VARIANTS):
            raise ValueError(f"persuasiveness_variant must be one of auto, {', '.join(PERSUASIVENESS_VARIANTS)}")
        if self.persuasiveness_variant == "auto":
            self.persuasiveness_variant = "ievalm_released" if self.protocol == "free" else "shown"
        if self.persuasiveness == "auto":
            # iEvaLM reports persuasiveness for its free-form protocol only (§4.4, Table 6); elsewhere on request
            self.persuasiveness = "probability" if self.protocol == "free" else "off"
        if self.n < 1:
            raise ValueError("n must be at least 1")
        if self.concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.systems = list(dict.fromkeys(s.strip() for s in self.systems if s.strip()))
        if not self.systems:
            raise ValueError("choose at least one system")


@dataclass
class Progress:
    done: int
    total: int
    message: str


@dataclass
class BatchResult:
    run_id: str
    out_dir: Path
    counts: dict[str, int]
    selection: dict
    report: dict  # see evaluators.simulator.report.build_report
    files: list[Path] = field(default_factory=list)

    def summary_line(self) -> str:
        c = self.counts
        return (
            f"run {self.run_id}: {c.get('done', 0)} dialogue(s) done, {c.get('failed', 0)} failed (the system "
            f"raised), {c.get('error', 0)} with simulator errors (run again to complete them); "
            f"{c.get('evaluated', 0)} evaluated; {c.get('skipped_now', 0)} were already finished"
        )


def check_systems(requested: list[str]) -> list[str]:
    """``requested`` if the registry knows every id; else :class:`UnknownSystem` naming the known ones."""
    known = system_ids()
    unknown = [s for s in requested if s not in known]
    if unknown:
        raise UnknownSystem(f"unknown system(s): {', '.join(unknown)}; known systems: {', '.join(known)}")
    return requested


def conversation_id(run_id: str, case_id: str, system_id: str) -> str:
    return hashlib.sha256(f"{run_id}\x1f{case_id}\x1f{system_id}".encode()).hexdigest()[:32]


def reports_root(db_path=None) -> Path:
    """Where run reports go by default: ``simulations/`` beside the SQLite file."""
    return Path(db_path if db_path is not None else default_db_path()).parent / REPORTS


def dataset_label(dataset: str) -> str:
    """A short name for the records: the dataset name, or the folder of a path (``redial_eval`` → ``redial``)."""
    path = Path(dataset)
    if not path.exists():
        return str(dataset)
    folder = path if path.is_dir() else path.parent
    return folder.name.removesuffix("_eval") or "records"


def run_identity(config: SimulationConfig, *, source: Path, catalog: Catalog, simulator: str) -> dict:
    """What shapes every dialogue of a run (the run id is its hash)."""
    return {
        "records": f"{source.parent.name}/{source.name}",
        "dataset": dataset_label(config.dataset),
        "protocol": config.protocol,
        "seed": config.seed,
        "hit_k": config.hit_k,
        "max_turns": config.max_turns,
        "personas": config.personas,
        "reliability": config.reliability,
        "persuasiveness": config.persuasiveness,
        "persuasiveness_variant": config.persuasiveness_variant,
        "temperature": config.temperature,
        "seeker": config.seeker,
        "catalog": catalog.name,
        "simulator": simulator,
        "prompts": prompts_version("simulator"),
    }


def run_simulation(
    config: SimulationConfig,
    *,
    db_path=None,
    progress: Callable[[Progress], None] | None = None,
    stop: threading.Event | None = None,
    simulator: LLMClient | None = None,
) -> BatchResult:
    """Run (or resume) the batch described by ``config``; see the module docstring.

    :param progress: called after each finished dialogue and evaluation
    :param stop: when set, no new dialogue starts (running ones finish and are stored); a later call resumes
    :param simulator: the simulated user's model (default: the ``simulator`` role's configured client)
    :raises UnknownSystem: a system id the registry does not know
    :raises RecordError: the records cannot be found or read
    """
    check_systems(config.systems)
    catalog = catalog_for_chat()
    source = records_path(config.dataset, config.split)
    records = read_records(source, dataset=dataset_label(config.dataset))
    cases, selection = select_cases(records, catalog, config.n, seed=config.seed, source=str(source))
    client = simulator or client_for("simulator", db_path=db_path)
    identity = run_identity(config, source=source, catalog=catalog, simulator=client.model.key)
    run_id = config.run_id or (
        f"{config.protocol}-{identity['dataset']}-s{config.seed}-"
        + hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:10]
    )
    db = get_db(db_path)
    ensure_run(db, run_id, config={**identity, "run_id": run_id}, selection=selection.to_dict())
    protocol = Protocol.named(
        config.protocol, hit_k=config.hit_k, writer="opendialkg" in str(source).lower(), max_turns=config.max_turns
    )
    systems = {}
    for system_id in config.systems:
        try:
            systems[system_id] = get_system(system_id, db_path=db_path)
        except Exception as e:  # e.g. a neural system without a checkpoint: say which, stop before any dialogue
            raise SystemNotReady(f"system {system_id!r} cannot run: {e}") from e
    for system in systems.values():
        warm = getattr(system, "warm_up", None)
        if callable(warm):
            warm()

    statuses = dialogue_statuses(db, run_id)
    final = ("done",) if config.retry_failed else FINAL
    pairs = [(case, s) for case in cases for s in config.systems]
    todo = [(case, s) for case, s in pairs if statuses.get((case.id, s)) not in final]
    total = len(todo)
    counts = {"skipped_now": len(pairs) - total}
    finished = 0
    lock = threading.Lock()

    def report_progress(message: str) -> None:
        if progress is not None:
            progress(Progress(finished, total, message))

    def one(case: Case, system_id: str) -> str:
        return play_pair(
            run_id, case, system_id, systems[system_id], protocol, config, client, catalog, db_path, identity
        )

    report_progress("simulating")
    with ThreadPoolExecutor(max_workers=config.concurrency, thread_name_prefix="simulate") as pool:
        queue = list(todo)
        running: dict[Future[str], tuple[str, str]] = {}  # in flight: (case id, system id)
        while queue or running:
            while queue and len(running) < config.concurrency and not (stop is not None and stop.is_set()):
                case, system_id = queue.pop(0)
                running[pool.submit(one, case, system_id)] = (case.id, system_id)
            if not running:
                break  # stopped: nothing in flight, the rest waits for a rerun
            completed, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in completed:
                case_id, system_id = running.pop(future)
                status = future.result()
                with lock:
                    finished += 1
                report_progress(f"{system_id} on {case_id}: {status}")
    stopped = bool(stop is not None and stop.is_set() and queue)

    wanted = {c.id for c in cases}
    rows = run_dialogues(db, run_id, systems=config.systems, cases=sorted(wanted))
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    if config.evaluate and not stopped:
        counts["evaluated"] = evaluate_run(run_id, rows, config, catalog, db_path, progress)
        rows = run_dialogues(db, run_id, systems=config.systems, cases=sorted(wanted))

    out_dir = Path(config.out_dir) if config.out_dir else reports_root(db_path) / run_id
    order = {c.id: i for i, c in enumerate(cases)}
    rows.sort(key=lambda r: (order.get(r["case_id"], 0), config.systems.index(r["system_id"])))
    report = build_report(
        rows,
        db,
        config=asdict(config) | {"run_id": run_id, **identity},
        selection=selection.to_dict(),
        demo=client.is_demo,
    )
    files = write_report(report, out_dir, rows, db)
    complete = not stopped and counts.get("done", 0) + counts.get("failed", 0) == len(pairs)
    finish_run(
        db,
        run_id,
        status="done" if complete else "incomplete",
        summary=report["summary_records"],
        report_dir=str(out_dir),
    )
    return BatchResult(run_id, out_dir, counts, selection.to_dict(), report, files)


def play_pair(
    run_id: str,
    case: Case,
    system_id: str,
    system,
    protocol: Protocol,
    config: SimulationConfig,
    client: LLMClient,
    catalog: Catalog,
    db_path,
    identity: dict,
) -> str:
    """One dialogue, stored when it ends; returns its status."""
    db = get_db(db_path)
    cid = conversation_id(run_id, case.id, system_id)
    start_dialogue(db, run_id, case.id, system_id, cid)
    persona = persona_for(case.id, config.seed) if config.personas else None
    info = system.info
    conversation = Conversation(
        system_id=info.id,  # what answered: a small local version has its own id (kbrd_small), not the one asked for
        id=cid,
        source="simulation",
        domain=catalog.domain,
        metadata={
            "variant": info.variant,
            "demo": info.demo,
            "simulation": {
                "run_id": run_id,
                "case_id": case.id,
                "protocol": protocol.describe(),
                "dataset": identity["dataset"],
                "seed": config.seed,
                "simulator": identity["simulator"],
                "prompts": identity["prompts"],
                "persona": persona.id if persona else None,
                "seeker": config.seeker,
                "unmatched_targets": list(case.unmatched_targets),
            },
        },
    )
    user = SimulatedUser(
        client if protocol.name != "attr" else None,
        case.targets,
        persona=persona,
        seed=turn_seed(config.seed, case.id),
        temperature=config.temperature,
        domain=catalog.domain,
        seeker=config.seeker,
    )
    outcome = run_dialogue(case, system, user, protocol, conversation=conversation)
    result = outcome.result()
    result["persona"] = persona.id if persona else None
    result["sincerity"] = sincerity_signal(conversation, case, catalog, protocol.hit_k)
    status, error = outcome.status, outcome.error
    if status == "done" and config.persuasiveness != "off":
        result["persuasiveness"] = persuasiveness(
            conversation, client, config.persuasiveness, system=system, variant=config.persuasiveness_variant
        )
        if result["persuasiveness"]["retry"]:
            status, error = "error", "persuasiveness: " + result["persuasiveness"]["error"]
    if status == "done" and config.reliability:
        result["reliability"] = reliability_probe(
            system,
            SimulatedUser(
                client,
                case.targets,
                seed=turn_seed(config.seed, case.id, "paraphrase"),
                temperature=config.temperature,
                domain=catalog.domain,
            ),
            conversation,
        )
        if result["reliability"].get("retry"):
            status, error = "error", "reliability probe: " + result["reliability"]["error"]
    conversation.status = status
    if error:
        conversation.metadata["error"] = error
    finish_dialogue(
        db, run_id, case.id, system_id, conversation=conversation, status=status, result=result, error=error
    )
    return status


def evaluate_run(
    run_id: str,
    rows: list[dict],
    config: SimulationConfig,
    catalog: Catalog,
    db_path,
    progress: Callable[[Progress], None] | None = None,
) -> int:
    """Evaluate every ``done`` dialogue of the run (stored evaluations of the same setup are reused) and add
    the simulation figures to each evaluation's metrics. Returns the number evaluated."""
    from evaluators.scorer_setup import build_setup

    setup = build_setup(db_path=db_path, scorer=config.scorer, debate=config.debate, catalog_name=catalog.name)
    done = [r for r in rows if r["status"] == "done"]
    evaluated = 0

    def one(row: dict) -> tuple[dict, str | None, str | None]:
        db = get_db(db_path)
        conversation = get_conversation(db, row["conversation_id"])
        if conversation is None or not any(t.role == "system" for t in conversation.turns):
            return row, None, "no system turn to judge"
        try:
            evaluation = evaluate_conversation(conversation, setup, db_path=db_path)
        except Exception as e:  # one bad evaluation must not stop the report
            log.warning("evaluation of %s failed: %s", conversation.id, e)
            return row, None, f"{type(e).__name__}: {e}"
        result = row["result"]
        extra = {
            "persuasiveness": (result.get("persuasiveness") or {}).get("score"),
            "persuasiveness_expected": (result.get("persuasiveness") or {}).get("expected"),
            "persuasiveness_error": (result.get("persuasiveness") or {}).get("error"),
            "sim_hit": result.get("hit"),
            "sim_first_hit_turn": result.get("first_hit_turn"),
            "sim_system_turns": result.get("system_turns"),
            "sim_leaks_regenerated": result.get("leaks_regenerated"),
            "sim_leaks_redacted": result.get("leaks_redacted"),
            "sim_deception_suspected": (result.get("sincerity") or {}).get("deception_suspected"),
            "sim_reliability_overlap": (result.get("reliability") or {}).get("overlap"),
            "sim_run_id": run_id,
        }
        merge_evaluation_metrics(get_db(db_path), evaluation.id, extra)
        set_dialogue_evaluation(get_db(db_path), run_id, row["case_id"], row["system_id"], evaluation.id)
        return row, evaluation.id, None

    workers = max(1, min(config.concurrency, 4))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sim-eval") as pool:
        for n, (row, evaluation_id, error) in enumerate(pool.map(one, done), 1):
            if evaluation_id is not None:
                evaluated += 1
            elif error:
                row["result"]["evaluation_error"] = error
            if progress is not None:
                progress(Progress(n, len(done), f"evaluated {row['system_id']} on {row['case_id']}"))
    return evaluated
