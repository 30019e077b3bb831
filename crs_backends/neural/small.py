"""The small local versions of KBRD, BARCOR and UniCRS: trained here, on the bundled catalog, once.

No published checkpoint can be downloaded without network access, so the project trains its own
small configurations (``size="small"`` of each model module) on synthetic dialogues over the bundled
catalog (:mod:`crs_backends.neural.synthetic`), with locally trained tokenizers. The result is a
checkpoint set in the published layout, loaded by the same code as the published checkpoints::

    <cache>/models/small-v<N>/
        kg_bundled/                       the KG of the bundled catalog (iEvaLM layout)
        data/synthetic_bundled.jsonl      the training records (with <movie> templates)
        {kbrd,barcor,unicrs}_{rec,conv}_bundled/   (+ unicrs_{gpt2,roberta}_bundled/)
        manifest.json                     version, systems, sizes, seconds, losses, data

``<cache>`` is ``CRS_ARENA_CACHE`` (default ``~/.cache/crs-arena``). The set is built in a temporary
directory and renamed into place, so it is either complete or absent; a lock file keeps two processes
from building at once (the second waits, then uses the first one's result).

    python -m crs_backends.neural.small ensure   # build when absent (``make run`` does this)
    python -m crs_backends.neural.small info     # where it is and what it holds

The training budget (all three within about 5 minutes on 2 CPU cores, tokenizers and data included)
is set in :data:`TRAIN_SETTINGS`, the one place to tune it.
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

VERSION = 2  # bump when the data, the settings or a model's small size changes: the set is rebuilt
DATASET = "bundled"
SYSTEMS = ("kbrd", "barcor", "unicrs")
N_DIALOGUES = 2000
SEED = 0
BUDGET_SECONDS = 300  # all three systems, 2 CPU cores
# optimizer steps are the budget: epochs over the synthetic records, capped by max_steps (rec + conv)
TRAIN_SETTINGS: dict[str, dict] = {
    # Measured (v1) on 2 idle cores: 240 KBRD steps 49 s, 100 BARCOR steps 29 s, 90 UniCRS steps 31 s. v2: BARCOR's
    # recommender steps cost about 3x its reply steps; UniCRS needs its joint stage long enough for the reply model
    # (at 108 joint steps it answered "tem:tem"): prompt 160, joint 240.
    "kbrd": {"epochs": 3, "max_steps": 360, "batch_size": 32, "lr": 3e-3},  # split evenly: rec 180, conv 180
    "barcor": {"epochs": 3, "max_steps": 300, "batch_size": 32, "lr": 2e-3},  # conv 105, rec 195 (at lr 1e-3)
    "unicrs": {"epochs": 3, "max_steps": 400, "batch_size": 32, "lr": 2e-3},
}
THREADS = int(os.environ.get("CRS_SMALL_THREADS", "0") or 0)  # 0: torch's default

Progress = Callable[[str, int, int], None]  # (phase, done, total)


class SmallBuildError(RuntimeError):
    """Building the small local versions failed (the message says which step)."""


def cache_root() -> Path:
    return Path(os.environ.get("CRS_ARENA_CACHE") or Path.home() / ".cache" / "crs-arena").expanduser()


def small_models_dir() -> Path:
    """Where the current version lives (whether or not it is built)."""
    return cache_root() / "models" / f"small-v{VERSION}"


def _complete(root: Path) -> bool:
    manifest = root / "manifest.json"
    if not manifest.exists():
        return False
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return data.get("complete") is True and (root / f"kg_{DATASET}" / "entity2id.json").exists()


def small_models_root() -> Path | None:
    """The built set, or None when it is not built (yet)."""
    root = small_models_dir()
    return root if _complete(root) else None


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
) -> Path:
    """The root of the small local versions, built first when absent (or when ``force``)."""
    final = small_models_dir()
    if not force and _complete(final):
        return final
    with _build_lock(final.parent / f"small-v{VERSION}.lock", log):
        if not force and _complete(final):  # built by the process we waited for
            return final
        tmp = final.parent / f".small-v{VERSION}.build-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            summary = build(tmp, progress=progress, systems=systems, log=log, show_bar=show_bar)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        old = final.parent / f".small-v{VERSION}.old-{os.getpid()}"
        if final.exists():
            os.replace(final, old)
        os.replace(tmp, final)
        shutil.rmtree(old, ignore_errors=True)
        for stale in final.parent.glob(f".small-v{VERSION}.build-*"):  # left by killed builds
            if not _pid_alive(stale.name.rsplit("-", 1)[-1]):
                shutil.rmtree(stale, ignore_errors=True)
        log(f"small local versions ready in {final} ({summary['seconds']['total']:.0f} s)")
        return final


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
) -> dict:
    """Build the whole set into ``root`` (not atomic by itself: :func:`ensure_small_models` renames it into place)."""
    import torch

    from catalog.catalog import load_bundled
    from crs_backends.neural.checkpoints import write_manifest
    from crs_backends.neural.engine import ConvInput, TrainConfig
    from crs_backends.neural.kg_reader import kg_from_catalog
    from crs_backends.neural.synthetic import describe, record_texts, synthetic_records, write_synthetic
    from crs_backends.train import TqdmProgress, model_class, model_module

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
    records = synthetic_records(catalog, N_DIALOGUES, SEED, kg=kg)
    write_synthetic(root / "data" / f"synthetic_{DATASET}.jsonl", records)
    texts = record_texts(records)
    seconds["data"] = round(time.monotonic() - t0, 2)
    log(
        f"small local versions: {len(records)} records from {N_DIALOGUES} synthetic dialogues, KG of "
        f"{kg.n_entities} entities ({seconds['data']:.1f} s)"
    )
    probe = ConvInput(
        ["I like movies with Tom Hanks. Something like Forrest Gump?"],
        [e for e in ("Tom Hanks", "Forrest Gump (1994)") if e in kg.entity2id],
    )
    losses: dict[str, dict] = {}
    sizes: dict[str, dict] = {}
    descriptions: dict[str, str] = {}
    for n, system in enumerate(systems, 1):
        t0 = time.monotonic()
        try:
            module = model_module(system)
        except Exception as e:
            raise SmallBuildError(f"no model code for {system!r}: {e}") from e
        cfg = TrainConfig(size="small", seed=SEED, resume=False, progress=show_bar, **settings.get(system, {}))
        bar = TqdmProgress(f"[{n}/{len(systems)}] {system} ", enabled=show_bar)

        def report(phase: str, done: int, total: int, _system=system, _bar=bar) -> None:
            _bar(phase, done, total)
            if progress:
                progress(f"{_system} {phase}", done, total)

        try:
            model = model_class(system).create(kg, texts, size="small", seed=SEED)
            result = module.train(model, records, root, DATASET, cfg, report)
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
        sizes[system] = dict(getattr(module, "SIZES", {}).get("small", {}))
        descriptions[system] = model.description
        loss_text = ", ".join(f"{p} {d['first']:.2f}->{d['last']:.2f}" for p, d in losses[system].items())
        log(f"  {system}: {seconds[system]:.0f} s, {result.steps} steps ({loss_text}); reply: {reply[:70]!r}")
    shutil.rmtree(root / ".train", ignore_errors=True)  # trainer state: not needed once published
    seconds["total"] = round(time.monotonic() - t_start, 1)
    write_manifest(
        root,
        version=f"small-v{VERSION}",
        dataset=DATASET,
        systems=list(systems),
        size="small",
        sizes=sizes,
        descriptions=descriptions,
        seconds=seconds,
        losses=losses,
        train_settings={s: settings[s] for s in systems},
        threads=torch.get_num_threads(),
        data={
            **describe(records),
            "dialogues": N_DIALOGUES,
            "seed": SEED,
            "catalog": "bundled",
            "file": f"data/synthetic_{DATASET}.jsonl",
        },
        kg=f"kg_{DATASET}",
        complete=True,
    )
    if seconds["total"] > BUDGET_SECONDS:
        log(f"note: the build took {seconds['total']:.0f} s, over the {BUDGET_SECONDS} s budget")
    return {"seconds": seconds, "losses": losses}


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 4) if values else float("nan")


def info() -> dict:
    root = small_models_root()
    if root is None:
        return {"built": False, "dir": str(small_models_dir())}
    from crs_backends.neural.checkpoints import read_manifest

    return {"built": True, "dir": str(root), **read_manifest(root)}


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m crs_backends.neural.small",
        description="Build or describe the small local versions of KBRD, BARCOR, UniCRS.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    ensure = sub.add_parser("ensure", help="build them when absent")
    ensure.add_argument("--force", action="store_true", help="build again even when present")
    ensure.add_argument("--quiet", action="store_true", help="no progress bar")
    sub.add_parser("info", help="where they are and what they hold")
    args = parser.parse_args(argv)
    if args.command == "info":
        print(json.dumps(info(), indent=2))
        return 0
    if not args.force and small_models_root() is not None:
        print(f"small local versions present: {small_models_root()}")
        return 0
    _say("building the small local versions of KBRD, BARCOR and UniCRS (once; a few minutes on 2 CPU cores)")
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


if __name__ == "__main__":
    sys.exit(main())
