"""Train KBRD, BARCOR or UniCRS on a dataset in the iEvaLM layout, and report their recommendation quality.

    crs-arena train kbrd --data ../shared/data/redial --out models/ --size small
    crs-arena train unicrs --data bundled --out models/ --max-steps 200
    crs-arena train report --models models/ --data ../shared/data/redial

``--data`` is a knowledge-graph directory in the iEvaLM layout (``entity2id.json``, ``relation2id.json``,
``kg.json``, ``item_ids.json``); a bare name (``redial``) is looked up in the data directory
(``CRS_DATA_DIR``, default ``../shared/data``). ``--data bundled`` trains on synthetic dialogues over the
bundled catalog (:mod:`crs_backends.neural.synthetic`); with a dataset, ``--dialogues N`` adds N synthetic
dialogues over the dataset's own catalog to its real records (the benches' recipe trains on people's conversations
only). With ``--size small`` on a dataset each system starts from the recipe its reported figures come from
(:func:`crs_backends.neural.recipes.dataset_settings`, as ``bench/crs_fidelity.py`` trains it); ``--epochs``,
``--max-steps``, ``--batch-size`` and ``--lr`` change it. Training records (iEvaLM processed JSONL) come
from ``--records``, else the first of ``<data>_eval/train_data_processed.jsonl``,
``<data>/train_data_processed.jsonl``, ``<data>_eval/valid_data_processed.jsonl``. A fixed tenth of the
conversations is held out of training as the validation split (:func:`crs_backends.neural.evaluation.is_validation`;
``train report --split validation`` reports on it): recipes are chosen there, the test split is reported once.

The result is written in the published layout under ``--out`` (``<system>_{rec,conv}_<dataset>/``, the
dataset being the data directory's name), so it loads through the same code path as the published
checkpoints. Training is resumable: the trainers keep their state in ``<out>/.train/``; running the
same command again continues where it stopped (raise ``--epochs`` / ``--max-steps`` to train further).
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from crs_backends.command_line import CommandGroup
from crs_backends.neural.evaluation import (
    PUBLISHED_RECALL,
    RECALL_KS,
    Interval,
    Recall,
    gold_items,
    interval_at_10,
    recall_at_k,
    recall_named_and_new,
    recall_named_by_repeats,
    reference_rankings,
    repeated_films,
    split_by_conversation,
)
from crs_backends.neural.names import LABELS, SYSTEMS, model_class, training_module

if TYPE_CHECKING:  # the neural modules import torch; they load when training starts
    from crs_backends.neural.kg_reader import KGData

BUNDLED = "bundled"


class DataError(click.ClickException):
    """--data / --records / --test do not name usable data (the message says what was looked for)."""


# ------------------------------------------------------------------------------- data
@dataclass
class TrainData:
    dataset: str  # the name the published layout uses (<system>_<part>_<dataset>)
    kg: KGData
    kg_dir: Path | None  # None for the bundled catalog (its KG is built in memory)
    records: list  # list[Record]
    source: str  # where the records came from
    synthetic: int = 0  # how many of the records, at the end, are synthetic dialogues added to a dataset's own
    # the dataset's records of its validation conversations (evaluation.is_validation): never in ``records``
    validation: list = field(default_factory=list)
    # the seeker's turns that name a film, of the training conversations (raw_turns): not in ``records``;
    # only a trainer whose config asks (TrainConfig.rec_every_turn) learns from them
    seeker_records: list = field(default_factory=list)

    @property
    def real_records(self) -> list:
        return self.records[: len(self.records) - self.synthetic]

    def describe(self) -> str:
        with_rec = sum(1 for r in self.records if r.rec)
        held = (
            f"; {len(self.validation)} records of {len({r.dialog_id for r in self.validation})} validation "
            "conversations held out"
            if self.validation
            else ""
        )
        seekers = (
            f"; {len(self.seeker_records)} seeker turns naming a film (for the small UniCRS: --seeker-turns)"
            if self.seeker_records
            else ""
        )
        return (
            f"dataset {self.dataset}: {self.kg.n_entities} entities, {len(self.kg.item_ids)} items, "
            f"{self.kg.n_relations} relations; {len(self.records)} records ({with_rec} with a target) "
            f"from {self.source}{held}{seekers}"
        )


def resolve_data_dir(data: str) -> Path:
    """A KG directory from a path or a bare dataset name in the data directory; clear errors otherwise."""
    from catalog.catalog import data_dir
    from crs_backends.neural.kg_reader import KG_FILES

    path = Path(data).expanduser()
    if not path.exists() and not path.is_absolute() and len(path.parts) == 1:
        base = data_dir()
        if base is not None and (base / data).is_dir():
            path = base / data
    if not path.exists():
        raise DataError(
            f"--data {data}: no such directory. Give a knowledge-graph directory in the iEvaLM layout "
            f"(e.g. ../shared/data/redial), a dataset name in CRS_DATA_DIR, or '{BUNDLED}'"
        )
    if not path.is_dir():
        raise DataError(f"--data {data}: {path} is a file; give the dataset directory holding {', '.join(KG_FILES)}")
    missing = [f for f in KG_FILES if not (path / f).exists()]
    if missing:
        raise DataError(f"--data {data}: {path} is not a dataset in the iEvaLM layout (missing {', '.join(missing)})")
    return path


def default_records_file(kg_dir: Path) -> Path | None:
    for candidate in record_candidates(kg_dir):
        if candidate.exists():
            return candidate
    return None


def record_candidates(kg_dir: Path) -> list[Path]:
    eval_dir = kg_dir.parent / f"{kg_dir.name}_eval"
    return [
        eval_dir / "train_data_processed.jsonl",
        kg_dir / "train_data_processed.jsonl",
        eval_dir / "valid_data_processed.jsonl",
    ]


def read_records_file(path: Path, limit: int | None):
    from catalog.ievalm_records import read_records

    if not path.is_file():
        raise DataError(f"records file not found: {path}")
    try:
        records = read_records(path, limit=limit)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise DataError(f"cannot read records from {path}: {e}") from e
    if not records:
        raise DataError(f"{path} holds no records")
    return records


def partial_train_path(kg_dir: Path) -> Path:
    """``<dataset>_train_partial/train_partial.jsonl``: raw ReDial conversations beside the KG folder (3,101 of
    ReDial's train split in the shared data)."""
    return kg_dir.parent / f"{kg_dir.name}_train_partial" / "train_partial.jsonl"


def raw_turns(kg_dir: Path, kg, path: Path) -> tuple[list, list]:
    """(the recommender's turns, the seeker's turns that name a film) of the raw ReDial conversations in ``path``
    (:func:`catalog.redial_raw.records_from_conversation`), read once and their entities linked as the small versions
    link a conversation (the titles it names, genres and people by name); ([], []) where ``path`` or
    ``kg_dir/id2info.json`` is not there."""
    from catalog.redial_raw import is_seeker_turn, read_raw_conversations
    from crs_backends.neural.mentions import link_conversations

    info = kg_dir / "id2info.json"
    if not path.exists() or not info.exists():
        return [], []
    try:
        id2info = json.loads(info.read_text(encoding="utf-8"))
        records = link_conversations(read_raw_conversations(path, id2info, seeker_turns=True), kg)
    except (OSError, ValueError) as e:
        raise DataError(f"cannot read {path}: {e}") from e
    return [r for r in records if not is_seeker_turn(r)], [r for r in records if is_seeker_turn(r)]


def load_train_data(
    data: str, records: str | None = None, *, limit: int | None = None, dialogues: int | None = None, seed: int = 0
) -> TrainData:
    """The KG and training records named by ``--data`` / ``--records``. A dataset's real records are parted by
    conversation (:func:`crs_backends.neural.evaluation.split_by_conversation`): the validation tenth goes to
    ``TrainData.validation`` and is never trained on; ``limit`` keeps the first N training records."""
    from crs_backends.neural.kg_reader import KGError, kg_from_catalog, load_kg

    if data == BUNDLED:
        from catalog.catalog import load_bundled
        from crs_backends.neural.synthetic import N_DIALOGUES, synthetic_records

        catalog = load_bundled()
        kg = kg_from_catalog(catalog)
        if records:
            recs, source = read_records_file(Path(records), limit), str(records)
        else:
            n = dialogues or N_DIALOGUES
            recs = synthetic_records(catalog, n, seed, kg=kg)
            recs = recs[:limit] if limit else recs
            source = f"{n} synthetic dialogues over the bundled catalog (seed {seed})"
        return TrainData(BUNDLED, kg, None, recs, source)
    kg_dir = resolve_data_dir(data)
    try:
        kg = load_kg(kg_dir)
    except KGError as e:
        raise DataError(f"--data {data}: {e}") from e
    if records:
        path = Path(records)
    else:
        found = default_records_file(kg_dir)
        if found is None:
            tried = ", ".join(str(p) for p in record_candidates(kg_dir))
            raise DataError(f"no training records for {kg_dir.name}: looked for {tried}; pass --records FILE")
        path = found
    real = read_records_file(path, None)
    source = str(path)
    extra: list = []
    seekers: list = []  # the seeker's turns that name a film (TrainData.seeker_records)
    if not records and not limit:  # ReDial's own train conversations, where the data folder holds a part of them
        extra, partial_seekers = raw_turns(kg_dir, kg, partial_train_path(kg_dir))
        if extra:  # and the seeker's turns of the raw file that the records file processed
            seekers = raw_turns(kg_dir, kg, kg_dir / "valid_data.jsonl")[1] + partial_seekers
    if extra:
        real += extra
        source += f" and {len(extra)} records of {kg_dir.name}'s train conversations ({kg_dir.name}_train_partial/)"
    real, validation = split_by_conversation(real)
    if limit:
        real = real[:limit]
    if not real:
        raise DataError(f"{path} holds no training records outside the validation conversations")
    trained = {r.dialog_id for r in real}  # the seeker's turns of training conversations only, with a target
    seekers = [r for r in seekers if r.dialog_id in trained and r.rec]
    if not dialogues:
        return TrainData(kg_dir.name, kg, kg_dir, real, source, validation=validation, seeker_records=seekers)
    from crs_backends.neural.synthetic import dataset_records

    try:
        synthetic = dataset_records(kg_dir, real, dialogues, seed, kg=kg)
    except ValueError as e:
        raise DataError(f"--dialogues {dialogues}: {e}") from e
    source = f"{source} and {dialogues} synthetic dialogues over the {kg_dir.name} catalog (seed {seed})"
    return TrainData(
        kg_dir.name,
        kg,
        kg_dir,
        real + synthetic,
        source,
        synthetic=len(synthetic),
        validation=validation,
        seeker_records=seekers,
    )


def record_texts(records) -> list[str]:
    from crs_backends.neural.synthetic import record_texts as texts

    return texts(records)


# ------------------------------------------------------------------------------- progress
class TqdmProgress:
    """A ``ProgressFn`` showing one tqdm bar per phase (rec, conv, ...)."""

    def __init__(self, prefix: str = "", enabled: bool = True):
        self.prefix, self.enabled = prefix, enabled
        self.bar: Any = None  # a tqdm bar (tqdm ships no types)
        self.phase: str | None = None

    def __call__(self, phase: str, done: int, total: int) -> None:
        if not self.enabled:
            return
        from tqdm import tqdm

        if phase != self.phase or self.bar is None:
            self.close()
            self.phase = phase
            self.bar = tqdm(
                total=total,
                initial=0,
                desc=f"{self.prefix}{phase}",
                unit="step",
                dynamic_ncols=True,
                file=sys.stderr,
                leave=False,
            )
        if total and self.bar.total != total:
            self.bar.total = total
        self.bar.n = done
        self.bar.refresh()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


# ------------------------------------------------------------------------------- training
def has_published_layout(root: Path, system: str, dataset: str) -> bool:
    from crs_backends.neural.sources import has_parts

    return has_parts(root, system, dataset)


def train_system(system: str, data: TrainData, out: Path, config, *, progress=None, log=print):
    """Create (or, when resuming, load the saved) model and train it; returns (model, TrainReport)."""
    from crs_backends.neural.checkpoints import CheckpointError

    if config.rec_every_turn and (system, config.size) != ("unicrs", "small"):
        raise DataError(f"rec_every_turn: only the small UniCRS learns from the seeker's turns, not {system}")
    if config.form and (system, config.size) != ("unicrs", "small"):
        raise DataError(f"form: only the small UniCRS is created in a form other than its size's, not {system}")
    cls = model_class(system, config.size)
    module = training_module(system, config.size)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if data.kg_dir is None:  # the bundled catalog: keep its KG beside the models so they can be loaded later
        data.kg.save(out / f"kg_{data.dataset}")
    model = None
    if config.resume and has_published_layout(out, system, data.dataset):
        try:
            model = cls.load(out, data.dataset, data.kg, device=config.device)
            log(f"{system}: continuing from {out} ({data.dataset})")
        except CheckpointError as e:
            log(f"{system}: cannot load the saved model ({e}); starting from a new {config.size} model")
    if model is None:
        t0 = time.monotonic()
        form = {"form": config.form} if config.form else {}  # the small UniCRS alone, checked above
        model = cls.create(data.kg, record_texts(data.records), size=config.size, seed=config.seed, **form)
        log(f"{system}: new {config.size} model ({time.monotonic() - t0:.1f} s incl. tokenizer)")
    more = {"rec_only": data.seeker_records} if config.rec_every_turn else {}  # the small UniCRS alone, checked above
    report = module.train(model, data.records, out, data.dataset, config, progress, **more)
    return model, report


def format_report(report) -> str:
    lines = [f"{report.system}: {report.steps} new steps in {report.seconds:.1f} s -> {report.out}"]
    for part, values in report.losses.items():
        if values:
            head = sum(values[:5]) / len(values[:5])
            tail = sum(values[-5:]) / len(values[-5:])
            lines.append(f"  {part}: {len(values)} steps, loss {head:.3f} (first 5) -> {tail:.3f} (last 5)")
        else:
            lines.append(f"  {part}: no steps")
    return "\n".join(lines)


@click.group(cls=CommandGroup, context_settings={"help_option_names": ["-h", "--help"]})
def cli():
    """Train KBRD / BARCOR / UniCRS (published layout, resumable) and report their Recall@k."""


def _train_command(system: str):
    @click.option(
        "--data",
        "data",
        required=True,
        help="dataset dir in the iEvaLM layout (e.g. ../shared/data/redial), "
        "a dataset name in CRS_DATA_DIR, or 'bundled' (synthetic dialogues over the bundled catalog)",
    )
    @click.option(
        "--out",
        "out",
        required=True,
        type=click.Path(file_okay=False, path_type=Path),
        help="root of the published layout to write",
    )
    @click.option("--size", type=click.Choice(["small", "full"]), default="small", show_default=True)
    @click.option(
        "--records",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="training records (iEvaLM processed JSONL); default: the first present of "
        "<data>_eval/train_data_processed.jsonl, <data>/train_data_processed.jsonl, "
        "<data>_eval/valid_data_processed.jsonl",
    )
    @click.option("--limit", type=int, default=None, help="use only the first N records")
    @click.option(
        "--dialogues",
        type=int,
        default=None,
        help="synthetic dialogues: all of --data bundled's records (default 2000); for a dataset, added to its "
        "real records over the dataset's own catalog (default none)",
    )
    @click.option("--epochs", type=int, default=None)
    @click.option("--max-steps", type=int, default=None, help="optimizer steps in total (rec + conv)")
    @click.option("--batch-size", type=int, default=None)
    @click.option("--lr", type=float, default=None)
    @click.option("--seed", type=int, default=0, show_default=True)
    @click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
    @click.option("--no-resume", is_flag=True, help="start again instead of continuing a previous run in --out")
    @click.option(
        "--seeker-turns",
        is_flag=True,
        help="the small UniCRS only: its recommendation prompt also learns from the seeker's turns that name a film, "
        "as UniCRS's own data has them (read from the raw conversations: <data>/valid_data.jsonl, "
        "<data>_train_partial/)",
    )
    @click.option("--quiet", is_flag=True, help="no progress bar")
    def command(
        data,
        out,
        size,
        records,
        limit,
        dialogues,
        epochs,
        max_steps,
        batch_size,
        lr,
        seed,
        device,
        no_resume,
        seeker_turns,
        quiet,
    ):
        from crs_backends.neural.engine import TrainConfig

        if device == "cuda":
            import torch

            if not torch.cuda.is_available():
                raise click.ClickException("--device cuda: no CUDA device is available")
        for name, value in (
            ("--epochs", epochs),
            ("--max-steps", max_steps),
            ("--batch-size", batch_size),
            ("--limit", limit),
            ("--dialogues", dialogues),
        ):
            if value is not None and value < (0 if name == "--max-steps" else 1):
                raise click.BadParameter(f"{name} must be positive, got {value}")
        if lr is not None and not (lr > 0 and math.isfinite(lr)):
            raise click.BadParameter(f"--lr must be a positive number, got {lr}")
        train_data = load_train_data(
            data, str(records) if records else None, limit=limit, dialogues=dialogues, seed=seed
        )
        click.echo(train_data.describe())
        if seeker_turns and (system, size) == ("unicrs", "small") and not train_data.seeker_records:
            raise DataError(
                f"--seeker-turns: no seeker turns naming a film for --data {data} (they are read from the raw "
                "conversations beside it, and not with --records or --limit)"
            )
        recipe: dict = {}
        if size == "small" and train_data.kg_dir is not None:  # a dataset: the recipe its reported figures come from
            from crs_backends.neural.recipes import DATASET_RECIPE, dataset_settings

            recipe = dataset_settings(system)
            click.echo(
                f"recipe {DATASET_RECIPE} (crs_backends/neural/recipes.py, as bench/crs_fidelity.py trains it): "
                + ", ".join(f"{k} {v}" for k, v in recipe.items())
                + "; --epochs, --max-steps, --batch-size and --lr change it"
            )
        elif size == "small":  # the bundled catalog: not how the app's set is trained, and the line says so
            click.echo(
                "bundled: the engine's small defaults on synthetic dialogues alone; the app's set is built by "
                "`python -m crs_backends.neural.small build` (people's ReDial replies too, recipes.TRAIN_SETTINGS)"
            )
        config = TrainConfig(
            size=size,
            seed=seed,
            device=device,
            resume=not no_resume,
            progress=not quiet,
            rec_every_turn=seeker_turns,
            **recipe,
        )
        for field_name, value in (("epochs", epochs), ("max_steps", max_steps), ("batch_size", batch_size), ("lr", lr)):
            if value is not None:
                setattr(config, field_name, value)
        progress = TqdmProgress(f"{system} ", enabled=not quiet)
        try:
            _model, report = train_system(system, train_data, out, config, progress=progress, log=click.echo)
        finally:
            progress.close()
        click.echo(format_report(report))

    command.__doc__ = f"Train {LABELS[system]} (rec + conv) and write {system}_{{rec,conv}}_<dataset>/ under --out."
    return cli.command(name=system)(command)


for _system in SYSTEMS:
    _train_command(_system)


# ------------------------------------------------------------------------------- quality report
@dataclass
class Ranked:
    """What :func:`model_recall` read: its figures, and per ranked record (those with a gold item in the KG) the
    ranking, the gold items and the conversation, for an interval (``evaluation.recall_interval``)."""

    recall: Recall
    parts: dict[str, Recall]
    rankings: list[list[int]]
    gold: list[list[int]]
    groups: list[str]


def model_recall(model, records, ks=RECALL_KS, *, progress=None, repeated: frozenset[int] | None = None) -> Ranked:
    """Recall@k of ``model`` (:func:`crs_backends.neural.evaluation.recall_at_k`) on ``records``, each record with a
    gold item in the model's KG ranked once; and the same on the gold items the conversation named before and on the
    new ones apart (:func:`crs_backends.neural.evaluation.recall_named_and_new`); with ``repeated`` (the films the
    training records repeat), the named ones parted again (``evaluation.recall_named_by_repeats``)."""
    ranked, rankings, gold = [], [], []
    for n, record in enumerate(records, 1):
        items = gold_items(record, model.kg)
        if items:
            ranked.append(record)
            gold.append(items)
            rankings.append([i for i, _s in model.recommend(record.conv_input(), k=max(ks))])
        if progress:
            progress("eval", n, len(records))
    parts = recall_named_and_new(rankings, ranked, model.kg, ks)
    if repeated is not None:
        parts |= recall_named_by_repeats(rankings, ranked, model.kg, repeated, ks)
    groups = [str(r.dialog_id) for r in ranked]
    return Ranked(recall_at_k(zip(rankings, gold), ks), parts, rankings, gold, groups)


def quality_report(
    models: Path,
    data: str,
    test: Path | None = None,
    *,
    systems=SYSTEMS,
    limit: int | None = None,
    dataset: str | None = None,
    device: str = "cpu",
    progress: bool = True,
    echo=print,
    split: str = "test",
    against: Path | None = None,
) -> dict:
    """Recall@1/10/50 of each system trained under ``models`` on the ``test`` records, beside the published numbers;
    ``split="validation"``: on the dataset's validation conversations instead (what recipes are chosen on). R@10
    comes with a 95% interval over the conversations; ``against`` (another set of the same systems, e.g. the recipe
    in use) ranks the same records with that set too and prints the difference with its paired interval."""
    from crs_backends.neural.kg_reader import KGError, load_kg

    kg_dir = resolve_data_dir(data)
    try:
        kg = load_kg(kg_dir)
    except KGError as e:
        raise DataError(f"--data {data}: {e}") from e
    dataset = dataset or kg_dir.name
    repeated = None
    train_data: TrainData | None  # the training records the references count their popularity from
    if split == "validation" and test is None:
        train_data = load_train_data(str(kg_dir))
        records = train_data.validation[:limit]
        repeated = repeated_films(train_data.records, kg)
        echo(f"validation: {len(records)} records of {kg_dir.name}'s validation conversations; models: {models}")
    else:
        if test is None:
            test = kg_dir.parent / f"{kg_dir.name}_eval" / "test_data_processed.jsonl"
        records = read_records_file(Path(test), limit)
        echo(f"test: {test} ({len(records)} records); models: {models} (dataset {dataset})")
        try:
            train_data = load_train_data(str(kg_dir))
        except DataError as e:
            train_data = None
            echo(f"no references (popularity, named first): {e.message}")
    results: dict[str, dict] = {}
    for system in systems:
        if not has_published_layout(Path(models), system, dataset):
            echo(f"{LABELS[system]}: not trained under {models} ({system}_rec_{dataset}/ missing) - skipped")
            continue
        from crs_backends.neural.checkpoints import CheckpointError

        try:
            model = model_class(system).load(models, dataset, kg, device=device)
        except CheckpointError as e:
            echo(f"{LABELS[system]}: cannot load ({e}) - skipped")
            continue
        bar = TqdmProgress(f"{system} ", enabled=progress)
        t0 = time.monotonic()
        try:
            ranked = model_recall(model, records, progress=bar, repeated=repeated)
        finally:
            bar.close()
        recall = ranked.recall
        results[system] = {
            "recall": recall.at,
            "records": recall.records,
            "samples": recall.samples,
            "by_gold": {part: (r.at, r.samples) for part, r in ranked.parts.items()},
            "seconds": time.monotonic() - t0,
            "description": getattr(model, "description", system),
            "interval": interval_at_10(ranked.rankings, ranked.gold, ranked.groups),
        }
        if against is not None:
            results[system]["against"] = _compare(system, ranked, Path(against), dataset, kg, records, device, echo)
    if results:
        echo("")
        echo(
            f"{'system':<8} {'records':>7} {'samples':>7}   {'R@1':>6} {'R@10':>6} {'R@50':>6}   "
            f"{'published R@1/10/50':>20}"
        )
        for system, r in results.items():
            rec = r["recall"]
            pub = PUBLISHED_RECALL[system]
            echo(
                f"{LABELS[system]:<8} {r['records']:>7} {r['samples']:>7}   {rec[1]:>6.3f} {rec[10]:>6.3f} "
                f"{rec[50]:>6.3f}   {pub[0]:>6.3f} {pub[1]:>6.3f} {pub[2]:>6.3f}"
            )
        if train_data is not None:  # what the records give away to a ranking that reads no text
            what = {
                "popularity": "the training records' most recommended films",
                "named first": "the films the conversation named, then popularity",
            }
            gold = [gold_items(r, kg) for r in records]  # once, for both references
            for name, ranks in reference_rankings(train_data.records, records, kg).items():
                ref = recall_at_k(zip(ranks, gold))
                echo(
                    f"{name:<11} {ref.records:>4} {ref.samples:>7}   {ref.at[1]:>6.3f} {ref.at[10]:>6.3f} "
                    f"{ref.at[50]:>6.3f}   (reads no text: {what[name]})"
                )
        for system, r in results.items():
            (named, n_named), (new, n_new) = r["by_gold"]["named"], r["by_gold"]["new"]
            echo(
                f"  {LABELS[system]}: R@1/10/50 on the {n_named} gold items the conversation named before "
                f"{named[1]:.3f} / {named[10]:.3f} / {named[50]:.3f}, on the {n_new} new ones "
                f"{new[1]:.3f} / {new[10]:.3f} / {new[50]:.3f}"
            )
            if "named_repeated" in r["by_gold"]:
                (seen, n_seen), (other, n_other) = r["by_gold"]["named_repeated"], r["by_gold"]["named_other"]
                echo(
                    f"  {LABELS[system]}: of the named, R@10 on the {n_seen} whose film the training records repeat "
                    f"{seen[10]:.3f}, on the {n_other} others {other[10]:.3f}"
                )
        for system, r in results.items():
            echo(f"  {LABELS[system]}: R@10 {_interval_text(r['interval'])}")
            if r.get("against") is not None:
                other, diff = r["against"]
                echo(
                    f"  {LABELS[system]}: R@10 under {against}: {other.at[10]:.3f}; this set minus that one "
                    f"{_interval_text(diff, signed=True)} (paired: the same records)"
                )
        for system, r in results.items():
            echo(f"  {LABELS[system]}: {r['description']}; {r['seconds']:.1f} s")
        if test is not None:  # the BENCH lines report a test split only
            for system, r in results.items():
                echo(
                    f"BENCH {system}_recall_at_10 {r['recall'][10]:.3f} ratio target >= "
                    f"{PUBLISHED_RECALL[system][1]:.3f}"
                )
    return results


def _interval_text(interval: Interval | None, *, signed: bool = False) -> str:
    if interval is None:
        return "(no interval: the records do not name their conversations)"
    f = "+.3f" if signed else ".3f"
    return (
        f"{interval.value:{f}} ({interval.level:.0%} interval {interval.low:{f}} to {interval.high:{f}}, "
        f"resampling {interval.groups} conversations)"
    )


def _compare(system, ranked: Ranked, other_root: Path, dataset, kg, records, device, echo):
    """``system`` under ``other_root`` on the same records: (its Recall, the paired interval of the difference);
    None where it is not there or cannot load."""
    from crs_backends.neural.checkpoints import CheckpointError

    if not has_published_layout(other_root, system, dataset):
        echo(f"{LABELS[system]}: not trained under {other_root} - not compared")
        return None
    try:
        model = model_class(system).load(other_root, dataset, kg, device=device)
    except CheckpointError as e:
        echo(f"{LABELS[system]}: cannot load from {other_root} ({e}) - not compared")
        return None
    other = model_recall(model, records)
    if other.groups != ranked.groups:  # the same records and KG give the same ranked records
        echo(f"{LABELS[system]}: the two sets rank other records (another KG?) - not compared")
        return None
    return other.recall, interval_at_10(ranked.rankings, ranked.gold, ranked.groups, against=other.rankings)


@cli.command(name="report")
@click.option(
    "--models",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="root of a checkpoint set in the published layout (ours or the published one)",
)
@click.option("--data", required=True, help="the dataset's KG dir (e.g. ../shared/data/redial) or its name")
@click.option(
    "--test",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="test records (default <data>_eval/test_data_processed.jsonl)",
)
@click.option("--systems", default=",".join(SYSTEMS), show_default=True)
@click.option("--dataset", default=None, help="dataset name in the layout (default: the data dir's name)")
@click.option("--limit", type=int, default=None, help="only the first N test records")
@click.option(
    "--split",
    type=click.Choice(["test", "validation"]),
    default="test",
    show_default=True,
    help="validation: the dataset's validation conversations, which training holds out (choose recipes on it)",
)
@click.option(
    "--against",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="another set of the same systems (e.g. the recipe in use): the same records ranked by both, their R@10 "
    "difference with a paired interval",
)
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu", show_default=True)
@click.option("--quiet", is_flag=True)
def report_command(models, data, test, systems, dataset, limit, split, against, device, quiet):
    """Recall@1/10/50 of each trained system beside the published full-model numbers (a report, not a gate)."""
    chosen = [s.strip() for s in systems.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SYSTEMS]
    if unknown:
        raise click.BadParameter(f"unknown systems {', '.join(unknown)}; choose from {', '.join(SYSTEMS)}")
    quality_report(
        models,
        data,
        test,
        systems=chosen,
        limit=limit,
        dataset=dataset,
        device=device,
        progress=not quiet,
        echo=click.echo,
        split=split,
        against=against,
    )


def main(argv=None):
    cli.main(args=argv, prog_name="python -m crs_backends.train")
