"""The small local versions of KBRD, BARCOR and UniCRS: trained by this project on ReDial, shipped with it.

No published checkpoint can be downloaded without network access, so the project trains each system's own
architecture at small size (#40, #72; docs/neural-systems.md): KBRD from scratch (R-GCN recommender, a small
Transformer with its vocabulary bias for replies), BARCOR as one encoder-decoder on the packaged all-MiniLM-L6-v2
(frozen) with BART's classification head and a small reply decoder, UniCRS as knowledge-enhanced soft prompts on the
frozen SmolLM2-135M-Instruct. All three learn from ReDial's training conversations in the research data folder (the
validation tenth held out, :func:`crs_backends.neural.evaluation.is_validation`) over all of ReDial's items, at the
recipe chosen on that tenth (:mod:`crs_backends.neural.recipes`). The set is in the published layout, loaded by the
same code as the published checkpoints (the pretrained parts from the installed packages, checked against the set's
fingerprints), and ranks ReDial's items; the app shows those of its catalog::

    small-v<N>/
        kg_redial/                        what serving needs of ReDial's KG (names and relations; SOURCE.md)
        kbrd_{rec,conv}_redial/, barcor_{rec,conv}_redial/, unicrs_{rec,conv}_redial/
        manifest.json                     version, command, recipe, data, seed, steps and losses, backbones, and
                                          the figures bench/crs_fidelity.py --set measured on it

**Shipped, not built at start.** ``python -m crs_backends.neural.small build --out assets/models/small-v<N>`` trains
in ``<cache>/build/small-v<N>/train`` (resumable: run the same command again after an interruption) and writes the
set into a temporary sibling of ``--out``, renamed into place at the end, so a half-built set is never served. The
whole recipe takes hours on two cores (UniCRS's two epochs through the frozen decoder are most of it); ``--quick``
trains a few steps on a few records, to try the wiring.

    python -m crs_backends.neural.small info                  # which set runs and what it holds
    python -m crs_backends.neural.small report                # its figures on ReDial's test split, as the README
    python -m crs_backends.neural.small build --out DIR       # train a set (the shipped recipe), resumable
    python -m crs_backends.neural.small build --out DIR --quick   # a few steps on a few records
    python -m crs_backends.neural.small build --work DIR --train-only   # train only (resumable); the set comes later
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

from crs_backends.neural import names
from crs_backends.neural.names import SMALL_SEED as SEED
from crs_backends.neural.names import SYSTEMS, small_models_dir, small_models_root, small_set_complete
from crs_backends.neural.recipes import DATASET_RECIPE, dataset_settings

DATASET = "redial"  # what the small sets are trained on (its items are what they rank)
# ``build --quick``: the recipe at a few steps on the first records: the wiring, for the builder's tests and trials
QUICK_SETTINGS: dict[str, dict] = {
    "kbrd": {"epochs": 1, "max_steps": 40, "batch_size": 32},
    "barcor": {"epochs": 1, "max_steps": 10, "batch_size": 32},
    "unicrs": {"epochs": 1, "max_steps": 4, "batch_size": 8, "stage_steps": {"conv": 2}},
}
QUICK_RECORDS = 400
QUICK_VALIDATION = 60  # validation records a trial's storage check ranks (the build ranks them all)
DATASET_DIALOGUES = 0  # r5: people's conversations only (the replies are written by the models, #40)
THREADS = int(os.environ.get("CRS_SMALL_THREADS", "0") or 0)  # 0: torch's default
# where the build trains: CRS_SMALL_DEVICE, else a GPU where torch sees one (a lent GPU trains UniCRS's 2,668
# recommendation steps in minutes, where two CPU cores take hours), else the CPU; the training state resumes on either
DEVICE_ENV = "CRS_SMALL_DEVICE"


def train_device() -> str:
    import torch

    return os.environ.get(DEVICE_ENV) or ("cuda" if torch.cuda.is_available() else "cpu")


Progress = Callable[[str, int, int], None]  # (phase, done, total)


class SmallBuildError(RuntimeError):
    """Building the small local versions failed (the message says which step)."""


@contextmanager
def _build_lock(path: Path, log: Callable[[str], None]):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another process is building the small local versions ({path}); waiting for it")
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            f.seek(0)
            f.truncate()
            f.write(f"{os.getpid()}\n")
            f.flush()
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def ensure_small_models(
    progress: Progress | None = None,
    force: bool = False,
    *,
    systems: tuple[str, ...] = SYSTEMS,
    log: Callable[[str], None] = _say,
    show_bar: bool = True,
    settings: dict[str, dict] | None = None,
    limit: int | None = None,
) -> Path:
    """The root of the small local versions: the shipped set, or the cache's, trained first when neither is there
    (or when ``force``: trained again into the cache; the shipped set is never written). Training needs ReDial in
    the research data folder and takes hours at the shipped recipe (``settings``/``limit``: a trial's)."""
    if not force and small_set_complete(names.SHIPPED_SMALL_ROOT):
        return names.SHIPPED_SMALL_ROOT
    final = small_models_dir()
    if not force and small_set_complete(final):
        return final
    with _build_lock(final.parent / f"{names.SMALL_SET}.lock", log):
        if not force and small_set_complete(final):  # built by the process we waited for
            return final
        summary = _build_in_place(
            final,
            systems=systems,
            settings=settings,
            limit=limit,
            log=log,
            progress_for=_progress_for(progress, show_bar, len(systems)),
            command=names.SMALL_COMMAND,
            # a trial's few steps train apart: they must never resume into (or from) the recipe's run
            work=build_work_dir(f"{names.SMALL_SET}-trial") if settings or limit else None,
        )
        for stale in final.parent.glob(f".{names.SMALL_SET}.build-*"):  # left by killed builds
            if not _pid_alive(stale.name.rsplit("-", 1)[-1]):
                shutil.rmtree(stale, ignore_errors=True)
        log(f"small local versions ready in {final} ({summary['seconds']['total']:.0f} s)")
        return final


def _progress_for(progress: Progress | None, show_bar: bool, n: int) -> Callable[[str], Progress | None]:
    """Per system, a callback that draws its bar and tells ``progress`` (phase named ``"<system> <stage>"``)."""
    from crs_backends.neural.train_command import TqdmProgress

    order: list[str] = []

    def for_system(system: str) -> Progress | None:
        if not (show_bar or progress):
            return None
        order.append(system)
        bar = TqdmProgress(f"[{len(order)}/{n}] {system} ", enabled=show_bar)

        def report(phase: str, done: int, total: int) -> None:
            bar(phase, done, total)
            if progress:
                progress(f"{system} {phase}", done, total)
            if done >= total:
                bar.close()

        return report

    return for_system


def _build_in_place(final: Path, **build_args) -> dict:
    """:func:`build` into a temporary sibling of ``final``, then renamed into place: ``final`` ends up complete,
    or as it was (a failed or interrupted build leaves nothing behind)."""
    tmp = final.parent / f".{final.name}.build-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        summary = build(tmp, **build_args)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = final.parent / f".{final.name}.old-{os.getpid()}"
    if final.exists():
        os.replace(final, old)
    os.replace(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
    return summary


def _pid_alive(pid: str) -> bool:
    try:
        os.kill(int(pid), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


def build_work_dir(name: str) -> Path:
    """Where the build of the set called ``name`` trains (``<cache>/build/<name>/train``): kept across interrupted
    runs, so that the same command resumes where it stopped (every 50 steps or minute, :mod:`.training`)."""
    return names.cache_dir() / "build" / name / "train"


def train_parts(
    work: Path,
    systems: tuple[str, ...] = SYSTEMS,
    *,
    settings: dict[str, dict] | None = None,
    limit: int | None = None,
    progress_for: Callable[[str], Progress | None] | None = None,
    log: Callable[[str], None] = _say,
):
    """The training half of :func:`build`: each of ``systems`` trained on ReDial in ``work`` (resumable; a system whose
    parts are there is not trained again). Returns (the folder of the parts, the TrainData)."""
    import torch

    from catalog.catalog import data_dir

    for system in systems:
        try:
            names.check_system(system)
        except ValueError as e:
            raise SmallBuildError(str(e)) from None
    base = data_dir()
    if base is None or not (base / DATASET / "entity2id.json").exists():
        raise SmallBuildError(
            f"the small versions are trained on ReDial's conversations, which were not found "
            f"({base / DATASET if base else 'no research data folder'}); give the research data folder (iEvaLM's "
            "layout: redial/, redial_eval/) with CRS_DATA_DIR"
        )
    if THREADS:
        torch.set_num_threads(THREADS)
    try:
        return train_on_dataset(
            base / DATASET, systems, Path(work), settings=settings, limit=limit, progress_for=progress_for, log=log
        )
    except (OSError, ValueError, RuntimeError) as e:
        raise SmallBuildError(f"training on {base / DATASET} failed: {type(e).__name__}: {e}") from e


def build(
    root: Path,
    *,
    systems: tuple[str, ...] = SYSTEMS,
    settings: dict[str, dict] | None = None,
    limit: int | None = None,
    work: Path | None = None,
    progress_for: Callable[[str], Progress | None] | None = None,
    log: Callable[[str], None] = _say,
    command: str = "",
) -> dict:
    """Train ``systems`` on ReDial (:func:`train_on_dataset`: its training conversations, the validation tenth held
    out, the recipe of :mod:`.recipes`; ``settings``/``limit``: a trial's changes, as ``--quick``) in ``work``
    (resumable), then write the set into ``root``: each system's two parts, the part of ReDial's knowledge graph
    serving needs (``kg_redial/``, with its source and licence) and ``manifest.json``. Not atomic by itself
    (:func:`_build_in_place` renames it into place)."""
    import torch

    from crs_backends.neural.checkpoints import write_manifest
    from crs_backends.neural.engine import ConvInput
    from crs_backends.neural.half_storage import store_half
    from crs_backends.neural.kg_reader import load_kg
    from crs_backends.neural.names import model_class

    t_start = time.monotonic()
    root = Path(root)
    work = Path(work) if work is not None else build_work_dir(root.name.split(".build-")[0].lstrip("."))
    models, data = train_parts(work, systems, settings=settings, limit=limit, progress_for=progress_for, log=log)
    trained = time.monotonic() - t_start
    root.mkdir(parents=True, exist_ok=True)
    for system in systems:
        for part in names.PARTS:
            folder = f"{system}_{part}_{DATASET}"
            shutil.copytree(models / folder, root / folder)
    kg_dir = data.kg.save(root / f"kg_{DATASET}")
    (kg_dir / "SOURCE.md").write_text(KG_SOURCE, encoding="utf-8")
    kg = load_kg(kg_dir)
    probe = ConvInput(
        ["I like movies with Tom Hanks. Something like Forrest Gump?"],
        [e for e in ("Tom Hanks", "Forrest Gump (1994)") if e in kg.entity2id],
    )
    descriptions, backbones, sizes = {}, {}, {}
    for system in systems:  # each loads from what the set holds and answers through the common interface
        model = model_class(system).load(root, DATASET, kg)
        # written again by this code's save, so the set records what it records now (the small UniCRS's text encoder
        # fingerprint, where an interrupted build resumed a model an earlier version trained)
        model.save(root, DATASET)
        if not model.recommend(probe, k=5):
            raise SmallBuildError(f"the small {system} recommends nothing")
        descriptions[system] = model.description
        sizes[system] = {**getattr(sys.modules[type(model).__module__], "SIZES", {}).get("small", {})}
        fingerprint = getattr(model, "backbone_fingerprint", "")  # a pretrained part the set is checked against
        if fingerprint:
            backbones[system] = fingerprint
    storage = {}
    # a trial (``limit``: --quick) measures on a few validation records, the build on all of them
    validation = data.validation[:QUICK_VALIDATION] if limit else data.validation
    for system in systems:  # half precision where the validation figures do not move (the set stays under 150 MB)
        stored = storage[system] = store_half(
            root, system, DATASET, kg, validation, lambda s=system: model_class(s).load(root, DATASET, kg)
        )
        log(
            f"{system}: stored as {stored['dtype']} ({stored['bytes'] / 1e6:.0f} MB; validation R@10 "
            f"{stored['recall_float32']['10']} in float32, {stored['recall_float16']['10']} through float16, "
            f"{stored['top10_changed']} top-10 lists changed)"
        )
    recipe = {s: {**dataset_settings(s), **(settings or {}).get(s, {})} for s in systems}
    write_manifest(
        root,
        version=root.name.split(".build-")[0].lstrip("."),
        command=command or "crs_backends.neural.small.build",
        dataset=DATASET,
        systems=list(systems),
        size="small",
        recipe=DATASET_RECIPE,
        train_settings=recipe,
        stages=trained_stages(work, systems, DATASET),
        descriptions=descriptions,
        sizes=sizes,
        backbones=backbones,
        storage=storage,
        threads=torch.get_num_threads(),
        seconds={"this_run": round(trained, 1), "total": round(time.monotonic() - t_start, 1)},
        data={
            "description": data.describe(),
            "training_records": len(data.records),
            "validation_records": len(data.validation),
            "seed": SEED,
            **({"limit": limit} if limit else {}),
        },
        kg=f"kg_{DATASET}",
        complete=True,
    )
    return {"seconds": {"total": round(time.monotonic() - t_start, 1)}, "work": str(work)}


# what ships of ReDial's knowledge graph beside a set, and under which terms (kg_redial/SOURCE.md)
KG_SOURCE = """# kg_redial: what serving needs of ReDial's knowledge graph

entity2id.json, relation2id.json, kg.json and item_ids.json as iEvaLM-CRS publishes them (RUCAIBox/iEvaLM-CRS,
data/redial/; the same files CRS Arena's checkpoints read): entity names (films with their year, genres, people)
and the relations genre, star, director and writer between them. No plot or other IMDb-derived text.

- Films and conversations: ReDial (Li et al., 2018), CC BY 4.0.
- The entities and relations: derived from DBpedia by KGSF/UniCRS's preprocessing, CC BY-SA 3.0; this folder is
  shared under the same terms.
"""


def trained_stages(work: Path, systems, dataset: str) -> dict[str, dict[str, dict]]:
    """Per system and stage, the optimizer steps taken and the mean loss of the first and last ten (from the training
    states in ``work/.train``): what the set's manifest says of its training."""
    from crs_backends.neural.training import STATE_FILE, has_state, read_state

    out: dict[str, dict[str, dict]] = {}
    for system in systems:
        folders = sorted((Path(work) / ".train").glob(f"{system}_*_{dataset}"))
        for path in (f / STATE_FILE for f in folders if has_state(f / STATE_FILE)):
            try:
                state = read_state(path, mmap=True)
            except Exception:  # a damaged state says nothing (unpickling raises what it likes)
                continue
            stage = path.parent.name[len(system) + 1 : -len(dataset) - 1]
            if isinstance(state, dict) and isinstance(state.get("step"), int):
                losses = {k: v for k, v in (state.get("losses") or {}).items() if v}
                out.setdefault(system, {})[stage] = {
                    "steps": int(state["step"]),
                    **({"devices": list(state["devices"])} if state.get("devices") else {}),
                    **{name: {"first": _mean(v[:10]), "last": _mean(v[-10:])} for name, v in losses.items()},
                }
    return out


CARRY_MAX_BYTES = 90_000_000  # a repository's file limit (GitHub refuses files over 100 MB), with room to spare


def carry(work: Path, systems=SYSTEMS, dataset: str = DATASET, max_bytes: int = CARRY_MAX_BYTES) -> list[str]:
    """Make a build's folder fit to commit, so that another machine finishes the build (build-state/README.md): a
    system whose two parts are written keeps, of each stage's state, only what the manifest reads (stage, steps,
    losses, devices; the build does not train it again); any other state over ``max_bytes`` is split into parts that
    the training joins when it resumes. Returns what it did, a line per state. Run it while the build is stopped."""
    import torch

    from crs_backends.neural.train_command import has_published_layout
    from crs_backends.neural.training import STATE_FILE, has_state, read_state, split_state

    done = []
    for system in systems:
        finished = has_published_layout(Path(work), system, dataset)
        for folder in sorted((Path(work) / ".train").glob(f"{system}_*_{dataset}")):
            path = folder / STATE_FILE
            if not has_state(path):
                continue
            state = read_state(path)
            if finished:
                kept = {k: state[k] for k in ("stage", "step", "losses", "devices") if k in state}
                if set(kept) != set(state):
                    torch.save(kept, path)
                    done.append(f"{folder.name}: step {state['step']}, kept its steps and losses (its system is built)")
            elif path.exists() and path.stat().st_size > max_bytes:
                parts = split_state(path, max_bytes)
                done.append(f"{folder.name}: step {state['step']}, split into {len(parts)} parts")
    return done


def dataset_models_dir(dataset: str) -> Path:
    """Where the small configurations trained on ``dataset`` are kept (``<cache>/models/quality-…``)."""
    return names.models_dir() / f"quality-{dataset}-{names.SMALL_SET}-d{DATASET_DIALOGUES}-{DATASET_RECIPE}"


def train_on_dataset(
    data_dir: Path,
    systems,
    models: Path | None = None,
    *,
    retrain: bool = False,
    progress_for: Callable[[str], Progress | None] | None = None,
    log: Callable[[str], None] = _say,
    dialogues: int = DATASET_DIALOGUES,
    settings: dict[str, dict] | None = None,
    limit: int | None = None,
):
    """Train the small configurations of ``systems`` (:func:`crs_backends.neural.recipes.dataset_settings`, seed
    :data:`SEED`) on the dataset in ``data_dir`` (its real training records, the validation conversations held out,
    plus ``dialogues`` synthetic dialogues) into ``models`` (default :func:`dataset_models_dir`), skipping those
    already there unless ``retrain``; resumable. Returns (models, the TrainData). ``progress_for(system)``: a progress
    callback for one system's training; ``settings``: per system, what to change in its recipe, and ``limit``: the
    first N training records only (a quick trial; give it its own ``models`` folder)."""
    from crs_backends.neural.engine import TrainConfig
    from crs_backends.neural.train_command import has_published_layout, load_train_data, train_system

    data = load_train_data(str(data_dir), dialogues=dialogues, seed=SEED, limit=limit)
    models = Path(models) if models is not None else dataset_models_dir(data.dataset)
    todo = [s for s in systems if retrain or not has_published_layout(models, s, data.dataset)]
    if todo:
        log(f"training the small configurations on {data.dataset} into {models}: {data.describe()}")
    for system in todo:
        progress = progress_for(system) if progress_for else None
        config = TrainConfig(
            size="small",
            seed=SEED,
            device=train_device(),
            resume=not retrain,
            progress=progress is not None,
            **{**dataset_settings(system), **(settings or {}).get(system, {})},
        )
        train_system(system, data, models, config, progress=progress, log=log)
    return models, data


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 4) if values else float("nan")


def info() -> dict:
    root = small_models_root()
    if root is None:
        return {"built": False, "dir": str(small_models_dir())}
    from crs_backends.neural.checkpoints import read_manifest

    return {"built": True, "shipped": root == names.SHIPPED_SMALL_ROOT, "dir": str(root), **read_manifest(root)}


def main(argv: list[str] | None = None, *, prog: str = "python -m crs_backends.neural.small") -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog=prog,
        description="The small local versions of KBRD, BARCOR, UniCRS: describe the set that runs, or train one.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ensure = sub.add_parser("ensure", help="use the shipped set, or train one into the cache when it is missing")
    ensure.add_argument("--force", action="store_true", help="train again into the cache even when a set is present")
    ensure.add_argument("--quiet", action="store_true", help="no progress bar")
    build_cmd = sub.add_parser(
        "build", help="train a set on ReDial into a new directory (the command behind the shipped set; resumable)"
    )
    build_cmd.add_argument("--out", type=Path, help="directory to write (must not exist; not with --train-only)")
    build_cmd.add_argument("--quick", action="store_true", help="a few steps on a few records: the wiring, minutes")
    build_cmd.add_argument("--quiet", action="store_true", help="no progress bar")
    build_cmd.add_argument(
        "--work",
        type=Path,
        help="where it trains and resumes from (default <cache>/build/<name>/train): a folder that outlives this "
        "machine lets another one finish the build",
    )
    build_cmd.add_argument(
        "--train-only",
        action="store_true",
        help="train in --work and stop before the set is written (the same command without it then writes the set "
        "from what --work holds)",
    )
    carry_cmd = sub.add_parser(
        "carry", help="make a build's --work folder fit to commit, so that another machine finishes the build"
    )
    carry_cmd.add_argument("--work", required=True, type=Path, help="the folder the build trains in")
    sub.add_parser("info", help="which set runs and what it holds")
    report_cmd = sub.add_parser(
        "report", help="a set's figures on ReDial's test split, as the README shows them (markdown, from its manifest)"
    )
    report_cmd.add_argument("--set", dest="root", type=Path, default=None, help="the set (default: the one that runs)")
    args = parser.parse_args(argv)
    if args.command == "info":
        print(json.dumps(info(), indent=2))
        return 0
    if args.command == "report":
        from crs_backends.neural.set_report import readme_section

        root = args.root or small_models_root()
        if root is None or not (Path(root) / "manifest.json").is_file():
            _say(f"ERROR: no small set with a manifest at {root or small_models_dir()}")
            return 2
        print(readme_section(names.read_manifest_quietly(Path(root))))
        return 0
    if args.command == "carry":
        if not (args.work / ".train").is_dir():
            _say(f"ERROR: {args.work} holds no training state (.train/)")
            return 2
        for line in carry(args.work) or ["nothing to change"]:
            print(line)
        return 0
    if args.command == "build":
        if args.train_only:
            if args.work is None or args.out is not None:
                _say("ERROR: --train-only trains in --work (required) and writes no set (no --out)")
                return 2
            return _build_command(None, quick=args.quick, quiet=args.quiet, work=args.work)
        if args.out is None:
            _say("ERROR: --out names the directory the set is written to")
            return 2
        return _build_command(args.out, quick=args.quick, quiet=args.quiet, work=args.work)
    if not args.force and small_models_root() is not None:
        print(f"small local versions present: {small_models_root()}")
        return 0
    _say("training the small local versions of KBRD, BARCOR and UniCRS on ReDial (hours on 2 CPU cores; resumable)")
    try:
        root = ensure_small_models(force=args.force, show_bar=not args.quiet)
    except KeyboardInterrupt:
        _say("interrupted: the small local versions were not built (run the same command again to resume)")
        return 130
    except Exception as e:
        _say(
            f"ERROR: building the small local versions failed: {type(e).__name__}: {e}\n"
            "The app still starts; KBRD, BARCOR and UniCRS show this error when selected."
        )
        return 1
    print(f"small local versions: {root}")
    return 0


def command():
    """``crs-arena small …``: this module's command line (argparse) under the one command line; every argument,
    ``--help`` included, goes to :func:`main`."""
    import click

    @click.command(
        "small",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        add_help_option=False,
        help="The small local versions of KBRD, BARCOR and UniCRS: info, ensure or build a set "
        "(`crs-arena small --help` for the options).",
    )
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def small(args) -> None:
        raise SystemExit(main(list(args), prog="crs-arena small"))

    return small


def _build_command(out: Path | None, *, quick: bool, quiet: bool, work: Path | None = None) -> int:
    """``build``: the set written into ``out``, or, where ``out`` is None (``--train-only``), the training in ``work``
    alone."""
    if out is not None and out.exists():
        _say(f"ERROR: {out} exists; give a new directory (a set is never trained over another)")
        return 2
    settings, limit = (QUICK_SETTINGS, QUICK_RECORDS) if quick else (None, None)
    progress_for = _progress_for(None, not quiet, len(SYSTEMS))
    try:
        if out is None:
            assert work is not None  # --train-only requires --work (main)
            models, _data = train_parts(work, SYSTEMS, settings=settings, limit=limit, progress_for=progress_for)
            print(f"trained in {models}; the set is written by the same command with --out DIR instead of --train-only")
            return 0
        command = f"python -m crs_backends.neural.small build --out {out}" + (" --quick" if quick else "")
        # a quick build trains in a folder of its own: its few steps never resume into the real recipe's run
        if work is None and quick:
            work = build_work_dir(f"{out.name}-quick")
        summary = _build_in_place(
            out,
            systems=SYSTEMS,
            command=command,
            work=work,
            progress_for=progress_for,
            settings=settings,
            limit=limit,
        )
    except KeyboardInterrupt:
        written = "nothing was written to --out; " if out is not None else ""
        _say(f"interrupted: {written}run the same command again to resume the training")
        return 130
    except SmallBuildError as e:
        _say(f"ERROR: {e}")
        return 1
    except Exception as e:  # a model that failed to load or answer: the message, not a traceback
        _say(f"ERROR: building the set failed: {type(e).__name__}: {e}")
        return 1
    print(f"built in {summary['seconds']['total']:.0f} s: {out} (trained in {summary['work']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
