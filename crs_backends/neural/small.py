"""The small local versions of KBRD, BARCOR and UniCRS: trained by this project, shipped with it.

No published checkpoint can be downloaded without network access, so the project trains each system's own
architecture at small size (#40; docs/neural-systems.md): KBRD from scratch (R-GCN recommender, a small Transformer
with its vocabulary bias for replies), BARCOR as one encoder-decoder on the packaged all-MiniLM-L6-v2 (frozen) with
BART's classification head and a small reply decoder, UniCRS as knowledge-enhanced soft prompts on the frozen
SmolLM2-135M-Instruct. They learn from ReDial's real conversations restated over the bundled catalog
(:mod:`crs_backends.neural.real_replies`); synthetic dialogues over the catalog (:mod:`crs_backends.neural.synthetic`)
teach what to recommend among the titles ReDial rarely names, never how to reply. The result is a checkpoint set in
the published layout, loaded by the same code as the published checkpoints (the pretrained parts from the installed
packages, checked against the set's fingerprints)::

    small-v<N>/
        kg_bundled/                       the KG of the bundled catalog (iEvaLM layout)
        kbrd_{rec,conv}_bundled/, barcor_{rec,conv}_bundled/, unicrs_{rec,conv}_bundled/
        manifest.json                     version, command, data, seed, settings, seconds, losses, backbones
        redial_test.json                  the recipe's figures on ReDial's test split (bench/crs_fidelity.py --record)

**Shipped, not built at start.** The set in ``assets/models/small-v<N>/`` was produced by
``python -m crs_backends.neural.small build --out assets/models/small-v<N>`` (:data:`TRAIN_SETTINGS`, seed
:data:`SEED`): v6 took 1,352 s on one thread beside the ReDial bench, after the ReDial configuration had trained
BARCOR's reply decoder (:func:`_redial_reply_decoder`; about 20 minutes on two cores, cached). UniCRS's 150 steps
through the 135M-parameter decoder are most of the build.

When the shipped set is missing (a trimmed copy of the repository), :func:`ensure_small_models` trains the
same recipe into ``<cache>/models/small-v<N>/`` (``<cache>`` is ``CRS_ARENA_CACHE``, default
``~/.cache/crs-arena``), built in a temporary directory and renamed into place, so it is either complete or
absent; a lock file keeps two processes from building at once.

    python -m crs_backends.neural.small info                  # which set runs and what it holds
    python -m crs_backends.neural.small ensure                # the shipped set, or train it when absent
    python -m crs_backends.neural.small build --out DIR       # train a set (the shipped recipe)
    python -m crs_backends.neural.small build --out DIR --quick   # the same recipe at a fifth of the steps
    python -m crs_backends.neural.small measure --set DIR         # the held-back check of a set built --no-measure
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
from crs_backends.neural.names import SMALL_DATASET as DATASET
from crs_backends.neural.names import SMALL_SEED as SEED
from crs_backends.neural.names import SYSTEMS, small_models_dir, small_models_root, small_set_complete
from crs_backends.neural.recipes import DATASET_RECIPE, TRAIN_SETTINGS, dataset_settings

N_DIALOGUES = 2000
# the models that also learn from people's replies (crs_backends.neural.real_replies) when the research data is here.
# Not UniCRS: its GPT-2, trained from scratch with the prompts, answered "a funny movie like Superbad" with "Hello!"
# and wrote facts without a title ("It is an a crime film directed by Michael Moore") when trained on them (v5
# trial, 2026-11-26; 6 stutters in 300 held-back replies), where synthetic replies alone keep it coherent
REAL_REPLIES = ("kbrd", "barcor")
# the form each small model of the bundled set is created in, where its code's default (SIZES) has moved on since the
# shipped set was trained: the shipped small-v7 UniCRS predates r8 and r9 (its prompt is input vectors alone, its
# items scored with the hidden state standardised), and a set rebuilt under its name (``ensure_small_models`` where
# the shipped one is missing) must be the same model. Retraining the bundled set in r9's form is a new set (small-v8)
BUNDLED_FORMS: dict[str, dict] = {"unicrs": {"rec_layer_prefix": False, "rec_score": "standardised"}}
# ``build --quick``: the same recipe at the budget that fits 5 minutes on 2 idle cores (the v2 shipped budget);
# for trying a change of the recipe and for the builder's own tests, not for the app
QUICK_SETTINGS: dict[str, dict] = {
    "kbrd": {"epochs": 3, "max_steps": 360, "batch_size": 32, "lr": 3e-3, "reply_lr": 5e-4},
    "barcor": {"epochs": 3, "max_steps": 100, "batch_size": 32, "lr": 1e-3, "reply_lr": 1e-3},
    "unicrs": {"epochs": 1, "max_steps": 40, "batch_size": 8, "lr": 1e-3},
    # the first 3,000 real and 1,200 synthetic records only: MiniLM reads every context once (about 50 a second)
    "data": {"real_records": 3000, "synthetic_records": 1200},
}
# The same small configurations trained on a research dataset (the benches' ReDial figures): its real records plus
# this many synthetic dialogues over the dataset's own catalog (synthetic.dataset_records). ReDial's training split
# is not in the data folder; its 2,716 `redial_eval/valid` records alone left the small rankings near a popularity
# list (R@10 over popularity: KBRD 1.26, BARCOR 0.75, UniCRS 1.03, at the v2 budget). With them (v3 budget, first
# 1,000 test records): KBRD 1.58; BARCOR 0.69 and UniCRS 0.75, whose text-reading rankings stay below popularity.
DATASET_DIALOGUES = 0  # r5: people's conversations only (the replies are written by the models, #40)
THREADS = int(os.environ.get("CRS_SMALL_THREADS", "0") or 0)  # 0: torch's default

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
    settings: dict | None = None,
) -> Path:
    """The root of the small local versions: the shipped set, or the cache's, trained first when neither is there
    (or when ``force``: trained again into the cache; the shipped set is never written)."""
    if not force and small_set_complete(names.SHIPPED_SMALL_ROOT):
        return names.SHIPPED_SMALL_ROOT
    final = small_models_dir()
    if not force and small_set_complete(final):
        return final
    with _build_lock(final.parent / f"{names.SMALL_SET}.lock", log):
        if not force and small_set_complete(final):  # built by the process we waited for
            return final
        summary = _build_in_place(
            final, progress=progress, systems=systems, log=log, show_bar=show_bar, settings=settings
        )
        for stale in final.parent.glob(f".{names.SMALL_SET}.build-*"):  # left by killed builds
            if not _pid_alive(stale.name.rsplit("-", 1)[-1]):
                shutil.rmtree(stale, ignore_errors=True)
        log(f"small local versions ready in {final} ({summary['seconds']['total']:.0f} s)")
        return final


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


def build(
    root: Path,
    *,
    progress: Progress | None = None,
    systems: tuple[str, ...] = SYSTEMS,
    log: Callable[[str], None] = _say,
    show_bar: bool = True,
    settings: dict | None = None,
    measure: bool = False,
    command: str = "",
) -> dict:
    """Build the whole set into ``root`` (not atomic by itself: :func:`ensure_small_models` renames it into place).

    ``measure``: check the result on 300 held-back synthetic dialogues (:func:`fidelity.bundled_figures`) and
    write the figures into the manifest; ``command``: how the set was made, for the manifest."""
    import dataclasses

    import torch

    from catalog.catalog import data_dir, load_bundled
    from crs_backends.neural.checkpoints import write_manifest
    from crs_backends.neural.engine import ConvInput, TrainConfig
    from crs_backends.neural.kg_reader import kg_from_catalog
    from crs_backends.neural.names import model_class, training_module
    from crs_backends.neural.real_replies import real_replies
    from crs_backends.neural.synthetic import describe, record_texts, synthetic_records
    from crs_backends.neural.train_command import TqdmProgress

    if THREADS:
        torch.set_num_threads(THREADS)
    settings = settings or TRAIN_SETTINGS
    t_start = time.monotonic()
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}
    t0 = time.monotonic()
    catalog = load_bundled()
    kg = kg_from_catalog(catalog)
    kg.save(root / f"kg_{DATASET}")
    # people's conversations (ReDial's, restated over the catalog: the films they name are the catalog's, written
    # as the movie slot in replies) teach both parts; the synthetic dialogues only what to recommend (their replies
    # are templates: none is trained on)
    real = real_replies(data_dir(), kg)
    if not real.records:
        raise SmallBuildError(
            f"the small versions learn to reply from ReDial's conversations, which were not found ({real.source}); "
            "give the research data folder with CRS_DATA_DIR"
        )
    synthetic = [dataclasses.replace(r, resp="") for r in synthetic_records(catalog, N_DIALOGUES, SEED, kg=kg)]
    limits = settings.get("data") or {}  # a trial's or a test's build: the first records of each kind only
    people = real.records[: limits["real_records"]] if "real_records" in limits else real.records
    synthetic = synthetic[: limits["synthetic_records"]] if "synthetic_records" in limits else synthetic
    training = people + synthetic
    texts = record_texts(training)
    seconds["data"] = round(time.monotonic() - t0, 2)
    log(
        f"small local versions: {len(people)} real ReDial turns ({real.source}) and {len(synthetic)} "
        f"records of {N_DIALOGUES} synthetic dialogues (recommendation only), KG of {kg.n_entities} entities "
        f"({seconds['data']:.1f} s)"
    )
    probe = ConvInput(
        ["I like movies with Tom Hanks. Something like Forrest Gump?"],
        [e for e in ("Tom Hanks", "Forrest Gump (1994)") if e in kg.entity2id],
    )
    losses: dict[str, dict] = {}
    sizes: dict[str, dict] = {}
    descriptions: dict[str, str] = {}
    backbones: dict[str, str] = {}
    notes: dict[str, str] = {}
    # BARCOR last: its reply decoder is the ReDial configuration's, which may be training when the build starts
    for n, system in enumerate(sorted(systems, key=lambda s: s == "barcor"), 1):
        t0 = time.monotonic()
        cfg = TrainConfig(size="small", seed=SEED, resume=False, progress=show_bar, **settings.get(system, {}))
        bar = TqdmProgress(f"[{n}/{len(systems)}] {system} ", enabled=show_bar)

        def report(phase: str, done: int, total: int, _system=system, _bar=bar) -> None:
            _bar(phase, done, total)
            if progress:
                progress(f"{_system} {phase}", done, total)

        try:
            module = training_module(system, "small")
            form = BUNDLED_FORMS.get(system)
            create = model_class(system, "small").create
            model = create(kg, texts, size="small", seed=SEED, **({"form": form} if form else {}))
            if system == "barcor":  # its reply decoder reads no KG: the one trained on ReDial, the head trained here
                notes["barcor"] = _redial_reply_decoder(model, settings, limits, root, log)
                cfg = dataclasses.replace(cfg, max_steps=0)
            result = module.train(model, training, root, DATASET, cfg, report)
        except SmallBuildError:
            raise
        except Exception as e:
            raise SmallBuildError(f"training the small {system} failed: {type(e).__name__}: {e}") from e
        finally:
            bar.close()
        # a quick check that the result answers through the common interface
        items = model.recommend(probe, k=5)
        if not items:
            raise SmallBuildError(f"the small {system} recommends nothing")
        reply = model.generate(probe, items=[kg.entity_name(i) for i, _s in items[:3]])
        seconds[system] = round(time.monotonic() - t0, 1)
        losses[system] = {
            part: {"steps": len(v), "first": _mean(v[:10]), "last": _mean(v[-10:])}
            for part, v in result.losses.items()
            if v
        }
        sizes[system] = {**getattr(sys.modules[type(model).__module__], "SIZES", {}).get("small", {}), **(form or {})}
        descriptions[system] = model.description
        fingerprint = getattr(model, "backbone_fingerprint", "")  # a pretrained part the set is checked against
        if fingerprint:
            backbones[system] = fingerprint
        loss_text = ", ".join(f"{p} {d['first']:.2f}->{d['last']:.2f}" for p, d in losses[system].items())
        log(f"  {system}: {seconds[system]:.0f} s, {result.steps} steps ({loss_text}); reply: {reply[:70]!r}")
    shutil.rmtree(root / ".train", ignore_errors=True)  # trainer state: not needed once published
    seconds["total"] = round(time.monotonic() - t_start, 1)
    figures: dict[str, dict] = {}
    if measure:
        from crs_backends.neural.fidelity import bundled_figures

        figures = bundled_figures(root, systems)
        for system, f in figures.items():
            log(f"  {system}: {f}")
    write_manifest(
        root,
        version=names.SMALL_SET,
        command=command or "crs_backends.neural.small.build",
        dataset=DATASET,
        systems=list(systems),
        size="small",
        sizes=sizes,
        descriptions=descriptions,
        seconds=seconds,
        losses=losses,
        train_settings={s: settings[s] for s in systems},
        **({"data_limits": limits} if limits else {}),
        notes=notes,
        backbones=backbones,
        threads=torch.get_num_threads(),
        data={
            **describe(synthetic),
            "dialogues": N_DIALOGUES,
            "seed": SEED,
            "catalog": "bundled",
            "generator": "crs_backends.neural.synthetic.synthetic_records(catalog, dialogues, seed)",
            "synthetic_replies": "not trained on (recommendation only)",
            "real": {**real.describe(), "restated_by": "crs_backends.neural.real_replies.real_replies(data_dir, kg)"},
        },
        kg=f"kg_{DATASET}",
        figures=figures,
        complete=True,
    )
    return {"seconds": seconds, "losses": losses, "figures": figures}


def _redial_reply_decoder(model, settings: dict, limits: dict, root: Path, log: Callable[[str], None]) -> str:
    """Put into the small BARCOR ``model`` the reply decoder of the same recipe trained on ReDial
    (:func:`train_on_dataset`, cached: the one ``bench/crs_fidelity.py`` measures): BARCOR's decoder reads the
    encoder's states of the conversation and nothing of the catalog, so one decoder serves both item spaces and the
    app shows the replies the bench scores. A trial's recipe (``settings`` other than :data:`TRAIN_SETTINGS`) trains
    its own into ``root/.train``. Returns what the manifest says of it."""
    from catalog.catalog import data_dir
    from crs_backends.neural.barcor import BARCOR

    base = data_dir()
    if base is None or not (base / "redial" / "entity2id.json").exists():
        raise SmallBuildError("the small BARCOR's reply decoder is trained on ReDial, which was not found")
    shipped = settings is TRAIN_SETTINGS
    models = dataset_models_dir("redial") if shipped else root / ".train" / "redial"
    trained, data = train_on_dataset(
        base / "redial",
        ["barcor"],
        models,
        log=log,
        settings=None if shipped else {"barcor": settings["barcor"]},
        limit=None if shipped else limits.get("real_records"),
    )
    redial = BARCOR.load(trained, "redial", data.kg)
    model.conv_model.load_state_dict(redial.conv_model.state_dict())
    return (
        f"reply decoder: the one trained on ReDial ({data.describe()}; {models.name if shipped else 'a trial'}), "
        "the recommender (its copy of the encoder's top layers and its head) trained on this set's records"
    )


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
    build_cmd = sub.add_parser("build", help="train a set into a directory (the command behind the shipped set)")
    build_cmd.add_argument("--out", required=True, type=Path, help="directory to write (must not exist)")
    build_cmd.add_argument("--quick", action="store_true", help="a fifth of the steps: minutes, not half an hour")
    build_cmd.add_argument("--no-measure", action="store_true", help="skip the held-back check written to manifest")
    build_cmd.add_argument("--quiet", action="store_true", help="no progress bar")
    sub.add_parser("info", help="which set runs and what it holds")
    measure_cmd = sub.add_parser("measure", help="the held-back check of a built set, written to its manifest")
    measure_cmd.add_argument("--set", dest="root", required=True, type=Path, help="the set's directory")
    args = parser.parse_args(argv)
    if args.command == "info":
        print(json.dumps(info(), indent=2))
        return 0
    if args.command == "measure":
        return _measure_command(args.root)
    if args.command == "build":
        return _build_command(args.out, quick=args.quick, measure=not args.no_measure, quiet=args.quiet)
    if not args.force and small_models_root() is not None:
        print(f"small local versions present: {small_models_root()}")
        return 0
    _say("training the small local versions of KBRD, BARCOR and UniCRS (once; about half an hour on 2 CPU cores)")
    try:
        root = ensure_small_models(force=args.force, show_bar=not args.quiet)
    except KeyboardInterrupt:
        _say("interrupted: the small local versions were not built (nothing half-built was kept)")
        return 130
    except Exception as e:
        _say(
            f"ERROR: building the small local versions failed: {type(e).__name__}: {e}\n"
            "The app still starts; KBRD, BARCOR and UniCRS show this error when selected. "
            "Retry with `python -m crs_backends.neural.small ensure`."
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


def _measure_command(root: Path) -> int:
    """What ``build`` measures unless ``--no-measure`` (:func:`fidelity.bundled_figures`), for a set built without
    it: written to its manifest with the command that measured it."""
    from crs_backends.neural.checkpoints import read_manifest, write_manifest
    from crs_backends.neural.fidelity import bundled_figures

    if not small_set_complete(root):
        _say(f"ERROR: {root} holds no complete small set")
        return 2
    figures = bundled_figures(root, read_manifest(root).get("systems") or SYSTEMS)
    write_manifest(root, figures=figures, figures_command=f"python -m crs_backends.neural.small measure --set {root}")
    for system, f in figures.items():
        print(f"{system}: {f}")
    return 0


def _build_command(out: Path, *, quick: bool, measure: bool, quiet: bool) -> int:
    if out.exists():
        _say(f"ERROR: {out} exists; give a new directory (a set is never trained over another)")
        return 2
    settings = QUICK_SETTINGS if quick else TRAIN_SETTINGS
    command = (
        f"python -m crs_backends.neural.small build --out {out}"
        + (" --quick" if quick else "")
        + ("" if measure else " --no-measure")
    )
    try:
        summary = _build_in_place(
            out, systems=SYSTEMS, settings=settings, measure=measure, command=command, show_bar=not quiet
        )
    except KeyboardInterrupt:
        _say("interrupted: nothing was written")
        return 130
    except Exception as e:
        _say(f"ERROR: training failed: {type(e).__name__}: {e}")
        return 1
    print(f"trained in {summary['seconds']['total']:.0f} s: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
