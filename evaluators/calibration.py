"""The proxy judge's overall score: a ridge model over the proxies, fitted on human labels and votes.

Model. Inputs are the twelve factor proxies and the reaction and text features of
:func:`evaluators.proxy.proxy_scores` (:data:`FEATURES`). Missing values (a factor that could not be
measured) are replaced by the training median, every input is standardised on the labelled training
dialogues, and a ridge regression predicts the human ``dialogue_overall`` (0-4); the prediction is
clipped to 0-4 and reported as well on 0-100 (x 25).

Pairwise evidence. Each CRSArena-Dial vote between two conversations of the same user adds one row to
the same least-squares problem: the difference of the two conversations' standardised inputs, with
target ``margin`` (winner minus loser, one point of the 0-4 scale) for a decisive vote and 0 for a
tie, weighted by ``pair_weight``. The intercept cancels in a difference, and the inputs are centred on
the labelled dialogues, so the intercept is the labels' mean and the ridge is solved without one.
The ridge strength is chosen among :data:`ALPHAS` by scikit-learn's efficient leave-one-out
(``RidgeCV``) on the training rows.

Validation. Folds are scikit-learn's ``GroupKFold`` (shuffled with the seed) over users: a CRS Arena
user's conversations, their labels and their vote always fall in the same fold, so no test dialogue
and no test vote shares a user with the training data. Every figure reported is out of fold:
dialogue-level and system-level correlations of the predictions with the labels (with bootstrap
intervals from :func:`evaluators.meta.correlate`), and the agreement with the held-out votes (the
share of decisive votes where the winner scores higher; the mean score gap on ties next to the mean
gap on decisive votes).

The saved file (``assets/calibration/proxy_<version>.json``) records the proxy version, the
similarity the proxies used, the feature names, the fitted parameters, the cross-validated results and
the seed. Loading a file made for another proxy version or similarity is refused.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import sklearn
from sklearn.impute import SimpleImputer
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import GroupKFold
from sklearn.preprocessing import StandardScaler

from catalog.catalog import Catalog
from evaluators.factors import FACTORS
from evaluators.log_readers import read_crsarena_dial, read_crsarena_eval
from evaluators.meta import correlate
from evaluators.proxy import FEATURES as REACTION_FEATURES
from evaluators.proxy import LEXICAL, MINILM, PROXY_VERSION, Embedder, ProxyResult, load_embedder, proxy_scores
from evaluators.rubric import load_rubric
from storage.records import Conversation

CALIBRATION_DIR = Path(__file__).resolve().parent.parent / "assets" / "calibration"
FEATURES: tuple[str, ...] = (*FACTORS, *REACTION_FEATURES)
ALPHAS: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0)
PAIR_WEIGHT = 1.0
MARGIN = 1.0
N_SPLITS = 10
SEED = 0
_USER = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


class CalibrationMismatch(ValueError):
    """A calibration file that was fitted for other proxies than the ones running."""


def default_path(version: str = PROXY_VERSION, similarity: str = LEXICAL) -> Path:
    """``assets/calibration/proxy_v1.json`` for proxy version ``proxy-v1`` (``proxy_v1_minilm.json`` with
    MiniLM similarity)."""
    suffix = "" if similarity == LEXICAL else f"_{similarity}"
    return CALIBRATION_DIR / f"{version.replace('-', '_')}{suffix}.json"


def feature_vector(result: ProxyResult) -> list[float]:
    """The model inputs of one conversation in :data:`FEATURES` order; NaN where not measurable."""
    values = {**{f: result.factors[f].score for f in FACTORS}, **result.features}
    return [math.nan if values[f] is None else float(values[f]) for f in FEATURES]


# -- training data ------------------------------------------------------------------------------------


@dataclass
class TrainingData:
    """Labelled dialogues and vote pairs, as model inputs.

    ``X`` / ``y`` / ``ids`` / ``systems`` / ``users``: one row per labelled dialogue.
    ``A`` / ``B`` / ``outcome`` / ``vote_users``: one row per vote with both conversations
    (outcome +1: A won, -1: B won, 0: tie).
    """

    X: np.ndarray
    y: np.ndarray
    ids: list[str]
    systems: list[str]
    users: list[str]
    A: np.ndarray
    B: np.ndarray
    outcome: np.ndarray
    vote_users: list[str]
    skipped_votes: int = 0
    similarity: str = LEXICAL
    datasets: list[str | None] = field(default_factory=list)


def user_of(conversation_id: str) -> str:
    """The CRS Arena user id at the end of a conversation id (the whole id when there is none)."""
    m = _USER.search(conversation_id)
    return m.group(0) if m else conversation_id


def read_votes(votes_dir: str | os.PathLike) -> list[dict[str, str]]:
    """All rows of ``votes_*.csv`` in ``votes_dir`` (columns user_id, crs1, crs2, vote = crs1, crs2 or tie).

    :raises ValueError: a missing column or a vote for neither system, naming the file and line
    """
    rows: list[dict[str, str]] = []
    for path in sorted(Path(votes_dir).glob("votes_*.csv")):
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            missing = {"user_id", "crs1", "crs2", "vote"} - set(reader.fieldnames or ())
            if missing:
                raise ValueError(f"{path}: line 1: missing column(s) {sorted(missing)}")
            for row in reader:
                if row["vote"] not in (row["crs1"], row["crs2"], "tie"):
                    raise ValueError(
                        f"{path}: line {reader.line_num}: vote {row['vote']!r} is neither "
                        f"{row['crs1']!r}, {row['crs2']!r} nor 'tie'"
                    )
                rows.append(row)
    return rows


def load_training_data(
    eval_path: str | os.PathLike,
    votes_dir: str | os.PathLike | None,
    catalog: Catalog,
    *,
    embedder: Embedder | None = None,
) -> TrainingData:
    """Proxies of the labelled CRSArena-Eval dialogues and of the voted CRSArena-Dial conversation pairs.

    A vote counts when both its conversations are in ``crs_arena_dial_*.json`` of ``votes_dir``.
    """
    read = read_crsarena_eval(eval_path, catalog)
    labelled = [
        c
        for c in read.conversations
        if read.labels[c.id].dialogue.get("dialogue_overall") is not None and _judgeable(c)
    ]
    results = [proxy_scores(c, catalog, embedder=embedder) for c in labelled]
    similarity = results[0].similarity if results else LEXICAL
    X = np.array([feature_vector(r) for r in results], dtype=float).reshape(len(results), len(FEATURES))
    A, B, outcome, vote_users, skipped = [], [], [], [], 0
    if votes_dir is not None:
        dial: dict[str, Conversation] = {}
        for path in sorted(Path(votes_dir).glob("crs_arena_dial_*.json")):
            dial.update({c.id: c for c in read_crsarena_dial(path, catalog).conversations})
        cache: dict[str, list[float]] = {}

        def vector(cid: str) -> list[float]:
            if cid not in cache:
                cache[cid] = feature_vector(proxy_scores(dial[cid], catalog, embedder=embedder))
            return cache[cid]

        for vote in read_votes(votes_dir):
            a, b = f"{vote['crs1']}_{vote['user_id']}", f"{vote['crs2']}_{vote['user_id']}"
            if a not in dial or b not in dial or not (_judgeable(dial[a]) and _judgeable(dial[b])):
                skipped += 1
                continue
            A.append(vector(a))
            B.append(vector(b))
            outcome.append(0 if vote["vote"] == "tie" else 1 if vote["vote"] == vote["crs1"] else -1)
            vote_users.append(vote["user_id"])
    width = len(FEATURES)
    return TrainingData(
        X=X,
        y=np.array([read.labels[c.id].dialogue["dialogue_overall"] for c in labelled], dtype=float),
        ids=[c.id for c in labelled],
        systems=[c.system_id for c in labelled],
        users=[user_of(c.id) for c in labelled],
        A=np.array(A, dtype=float).reshape(len(A), width),
        B=np.array(B, dtype=float).reshape(len(B), width),
        outcome=np.array(outcome, dtype=float),
        vote_users=vote_users,
        skipped_votes=skipped,
        similarity=similarity,
        datasets=[c.metadata.get("dataset") for c in labelled],
    )


def _judgeable(conversation: Conversation) -> bool:
    return any(t.role == "system" for t in conversation.turns)


# -- the model ------------------------------------------------------------------------------------------


@dataclass
class Model:
    """Fitted parameters: predict = clip(intercept + ((impute(x) - mean) / scale) . coef, 0, 4)."""

    impute: list[float]
    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    alpha: float

    def predict(self, X: np.ndarray) -> np.ndarray:
        X = np.atleast_2d(np.asarray(X, dtype=float))
        X = np.where(np.isnan(X), np.asarray(self.impute), X)
        z = (X - np.asarray(self.mean)) / np.asarray(self.scale)
        return np.clip(self.intercept + z @ np.asarray(self.coef), 0.0, 4.0)


def fit_model(
    X: np.ndarray,
    y: np.ndarray,
    A: np.ndarray | None = None,
    B: np.ndarray | None = None,
    outcome: np.ndarray | None = None,
    *,
    alphas: Iterable[float] = ALPHAS,
    pair_weight: float = PAIR_WEIGHT,
    margin: float = MARGIN,
) -> Model:
    """Ridge on the labelled rows plus (weighted) vote-difference rows; see the module docstring."""
    imputer = SimpleImputer(strategy="median", keep_empty_features=True).fit(X)
    scaler = StandardScaler().fit(imputer.transform(X))

    def z(M: np.ndarray) -> np.ndarray:
        return scaler.transform(imputer.transform(M))

    rows, targets, weights = [z(X)], [y - y.mean()], [np.ones(len(y))]
    if A is not None and len(A) and pair_weight > 0:
        rows.append(z(A) - z(B))
        targets.append(margin * np.asarray(outcome, dtype=float))
        weights.append(np.full(len(A), pair_weight))
    ridge = RidgeCV(alphas=list(alphas), fit_intercept=False).fit(
        np.vstack(rows), np.concatenate(targets), sample_weight=np.concatenate(weights)
    )
    return Model(
        impute=imputer.statistics_.tolist(),
        mean=scaler.mean_.tolist(),
        scale=scaler.scale_.tolist(),
        coef=ridge.coef_.tolist(),
        intercept=float(y.mean()),
        alpha=float(ridge.alpha_),
    )


# -- cross-validation -----------------------------------------------------------------------------------


@dataclass
class CrossValidation:
    """Out-of-fold predictions for the labelled dialogues and the votes, and the fold of each."""

    predictions: np.ndarray  # one per labelled dialogue, 0-4
    pair_scores: np.ndarray  # (votes, 2): the predictions for A and B
    folds: list[tuple[np.ndarray, np.ndarray]]  # (train, test) indices over labelled rows + votes

    def summary(self, data: TrainingData, *, n_boot: int = 1000, seed: int = SEED) -> dict[str, Any]:
        """Correlations (dialogue, per dataset, system) and vote agreement, as stored in the calibration file."""
        out: dict[str, Any] = {}
        preds = dict(zip(data.ids, self.predictions.tolist()))
        human = dict(zip(data.ids, data.y.tolist()))
        levels = correlate(preds, human, systems=dict(zip(data.ids, data.systems)), n_boot=n_boot, seed=seed)
        for dataset in ("redial", "opendialkg"):
            keep = [i for i, d in zip(data.ids, data.datasets) if d == dataset]
            if keep:
                levels[f"dialogue_{dataset}"] = correlate(
                    {i: preds[i] for i in keep}, {i: human[i] for i in keep}, n_boot=n_boot, seed=seed
                )["dialogue"]
        for name, level in levels.items():
            out[name] = {"n": level.n, **{m: asdict(c) for m, c in level.coefficients.items()}}
        out["votes"] = vote_agreement(self.pair_scores, data.outcome, n_boot=n_boot, seed=seed)
        return out


def cross_validate(
    data: TrainingData,
    *,
    seed: int = SEED,
    n_splits: int = N_SPLITS,
    alphas: Iterable[float] = ALPHAS,
    pair_weight: float = PAIR_WEIGHT,
    margin: float = MARGIN,
) -> CrossValidation:
    """Group k-fold by user over the labelled dialogues and the votes together (see the module docstring)."""
    n, m = len(data.y), len(data.outcome)
    groups = np.array([*data.users, *data.vote_users])
    splitter = GroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    predictions = np.full(n, np.nan)
    pair_scores = np.full((m, 2), np.nan)
    folds = list(splitter.split(np.zeros(n + m), groups=groups))
    for train, test in folds:
        lab, votes = train[train < n], train[train >= n] - n
        model = fit_model(
            data.X[lab],
            data.y[lab],
            data.A[votes],
            data.B[votes],
            data.outcome[votes],
            alphas=alphas,
            pair_weight=pair_weight,
            margin=margin,
        )
        t_lab, t_votes = test[test < n], test[test >= n] - n
        if len(t_lab):
            predictions[t_lab] = model.predict(data.X[t_lab])
        if len(t_votes):
            pair_scores[t_votes] = np.column_stack([model.predict(data.A[t_votes]), model.predict(data.B[t_votes])])
    return CrossValidation(predictions, pair_scores, folds)


def vote_agreement(
    pair_scores: np.ndarray, outcome: np.ndarray, *, n_boot: int = 1000, seed: int = SEED
) -> dict[str, Any]:
    """How scores agree with votes: decisive votes the winner scores higher in (a tie of scores counts
    half), with a bootstrap 95% interval; the mean score gap on tied votes and on decisive ones."""
    decisive = outcome != 0
    if not len(outcome):
        return {
            "decisive": 0,
            "ties": 0,
            "accuracy": None,
            "accuracy_low": None,
            "accuracy_high": None,
            "tie_gap": None,
            "decisive_gap": None,
        }
    diff = (pair_scores[:, 0] - pair_scores[:, 1]) * np.where(decisive, outcome, 1)
    hits = np.where(diff[decisive] > 0, 1.0, np.where(diff[decisive] == 0, 0.5, 0.0))
    gap = np.abs(pair_scores[:, 0] - pair_scores[:, 1])
    low = high = None
    if len(hits):
        rng = np.random.default_rng(seed)
        draws = hits[rng.integers(0, len(hits), (n_boot, len(hits)))].mean(axis=1)
        low, high = float(np.percentile(draws, 2.5)), float(np.percentile(draws, 97.5))
    return {
        "decisive": int(decisive.sum()),
        "ties": int((~decisive).sum()),
        "accuracy": float(hits.mean()) if len(hits) else None,
        "accuracy_low": low,
        "accuracy_high": high,
        "tie_gap": float(gap[~decisive].mean()) if (~decisive).any() else None,
        "decisive_gap": float(gap[decisive].mean()) if decisive.any() else None,
    }


# -- the saved calibration ------------------------------------------------------------------------------


@dataclass
class Calibration:
    """A fitted calibration as saved: what it was fitted for, its parameters and its validation."""

    proxy_version: str
    similarity: str
    features: list[str]
    model: Model
    seed: int
    settings: dict[str, Any]
    training: dict[str, Any]
    cv: dict[str, Any]
    fitted_with: dict[str, str]

    def predict(self, result: ProxyResult) -> float:
        """The calibrated overall score (0-4) of one conversation's proxies."""
        if result.version != self.proxy_version or result.similarity != self.similarity:
            raise CalibrationMismatch(
                f"this calibration was fitted on {self.proxy_version} proxies with {self.similarity} similarity; "
                f"got {result.version} with {result.similarity}"
            )
        return float(self.model.predict([feature_vector(result)])[0])

    @property
    def fingerprint(self) -> str:
        """A short hash of the fitted parameters (stored with every evaluation that uses them)."""
        return hashlib.sha256(json.dumps(asdict(self.model), sort_keys=True).encode()).hexdigest()[:12]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def save(self, path: str | os.PathLike) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n", encoding="utf-8")
        return path


def load_calibration(path: str | os.PathLike | None = None, *, similarity: str = LEXICAL) -> Calibration:
    """Read a calibration file (default: the one for :data:`PROXY_VERSION` and ``similarity``).

    :raises FileNotFoundError: no such file (refit with ``python -m evaluators calibrate``)
    :raises CalibrationMismatch: the file was fitted for another proxy version, similarity or feature list
    """
    path = Path(path) if path else default_path(similarity=similarity)
    if not path.exists():
        raise FileNotFoundError(f"no proxy calibration at {path}; fit one with `python -m evaluators calibrate`")
    data = json.loads(path.read_text(encoding="utf-8"))
    refit = f"refit it with `python -m evaluators calibrate --out {path}" + (
        " --embeddings`" if similarity != LEXICAL else "`"
    )
    if data.get("proxy_version") != PROXY_VERSION:
        raise CalibrationMismatch(
            f"{path} was fitted for proxy version {data.get('proxy_version')!r}, but the "
            f"proxies are {PROXY_VERSION!r}: {refit}"
        )
    if data.get("similarity") != similarity:
        raise CalibrationMismatch(
            f"{path} was fitted on proxies with {data.get('similarity')!r} similarity, not {similarity!r}: {refit}"
        )
    if data.get("features") != list(FEATURES):
        raise CalibrationMismatch(f"{path} lists other features than the proxies give: {refit}")
    return Calibration(**{**data, "model": Model(**data["model"])})


def calibrate(
    data: TrainingData,
    *,
    seed: int = SEED,
    n_splits: int = N_SPLITS,
    n_boot: int = 1000,
    sources: dict[str, str] | None = None,
) -> Calibration:
    """Cross-validate, then fit on everything: the calibration to save."""
    cv = cross_validate(data, seed=seed, n_splits=n_splits)
    labels_only = cross_validate(data, seed=seed, n_splits=n_splits, pair_weight=0.0)
    model = fit_model(data.X, data.y, data.A, data.B, data.outcome)
    return Calibration(
        proxy_version=PROXY_VERSION,
        similarity=data.similarity,
        features=list(FEATURES),
        model=model,
        seed=seed,
        settings={
            "alphas": list(ALPHAS),
            "pair_weight": PAIR_WEIGHT,
            "margin": MARGIN,
            "n_splits": n_splits,
            "folds": "GroupKFold by user, shuffled with the seed",
            "n_boot": n_boot,
            "rubric": load_rubric().version,
        },
        training={
            "dialogues": len(data.y),
            "votes": len(data.outcome),
            "ties": int((data.outcome == 0).sum()),
            "skipped_votes": data.skipped_votes,
            **(sources or {}),
        },
        cv={
            "labels_and_votes": cv.summary(data, n_boot=n_boot, seed=seed),
            "labels_only": labels_only.summary(data, n_boot=n_boot, seed=seed),
        },
        fitted_with={"scikit-learn": sklearn.__version__, "numpy": np.__version__},
    )


# -- the proxy scorer ---------------------------------------------------------------------------------


@dataclass
class ProxyVerdict:
    """The proxy scorer's result for one conversation."""

    result: ProxyResult
    overall: float  # 0-4
    overall_100: float  # 0-100


@dataclass
class ProxyJudge:
    """The ``proxy`` scorer: the twelve factor proxies and the calibrated overall score, no LLM.

    :param calibration: the fitted overall model (its similarity must match ``embedder``'s)
    :param embedder: sentence embedder for the proxies; None: lexical similarity
    """

    calibration: Calibration
    embedder: Embedder | None = None
    notes: tuple[str, ...] = ()
    name: str = "proxy"

    def __post_init__(self) -> None:
        used = LEXICAL if self.embedder is None else MINILM
        if used != self.calibration.similarity:
            raise CalibrationMismatch(
                f"the calibration was fitted on {self.calibration.similarity} similarity, the proxies would use {used}"
            )

    def describe(self) -> dict[str, Any]:
        """What decides this scorer's results (stored with each evaluation)."""
        return {
            "scorer": self.name,
            "proxy_version": self.calibration.proxy_version,
            "similarity": self.calibration.similarity,
            "calibration": self.calibration.fingerprint,
            "rubric": load_rubric().version,
        }

    def score(self, conversation: Conversation, catalog: Catalog) -> ProxyVerdict:
        result = proxy_scores(conversation, catalog, embedder=self.embedder)
        overall = self.calibration.predict(result)
        return ProxyVerdict(result, overall, overall * 25.0)


def load_proxy_judge(path: str | os.PathLike | None = None, *, embeddings: bool = False) -> ProxyJudge:
    """The proxy scorer with the saved calibration; with ``embeddings``, MiniLM similarity when it loads
    (else lexical, said in :attr:`ProxyJudge.notes`, and the calibration must then be lexical)."""
    embedder, note = load_embedder() if embeddings else (None, "similarity: lexical")
    calibration = load_calibration(path, similarity=LEXICAL if embedder is None else MINILM)
    return ProxyJudge(calibration, embedder, (note,))


# -- validity report ------------------------------------------------------------------------------------

# FACE (Joko & Hasibi), Llama-3.1-8B, on the full CRSArena-Eval (467 dialogues), as published:
# Table 1 (overall impression, dialogue level, per subset) and Table 2 (system level, mean of 7 aspects).
FACE_PUBLISHED: tuple[dict[str, Any], ...] = (
    {"score": "overall", "level": "dialogue (RD systems)", "n": None, "spearman": 0.668, "pearson": 0.712},
    {"score": "overall", "level": "dialogue (KG systems)", "n": None, "spearman": 0.679, "pearson": 0.766},
    {"score": "mean of 7 aspects", "level": "system", "n": 9, "spearman": 0.838, "pearson": 0.918},
)
_LEVEL_NAMES = {
    "dialogue": "dialogue",
    "dialogue_redial": "dialogue (RD systems)",
    "dialogue_opendialkg": "dialogue (KG systems)",
    "system": "system",
}


def _cell(c: dict[str, Any] | None) -> str:
    if not c or c.get("value") is None:
        return "–"
    interval = f" [{c['low']:.2f}, {c['high']:.2f}]" if c.get("low") is not None else ""
    return f"{c['value']:.3f}{interval}"


def _rows(scorer: str, score: str, fit: str, levels: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "scorer": scorer,
            "score": score,
            "fit": fit,
            "level": _LEVEL_NAMES[name],
            "n": level["n"],
            **{m: _cell(level[m]) for m in ("spearman", "pearson", "kendall")},
        }
        for name, level in levels.items()
        if name in _LEVEL_NAMES
    ]


def _correlations(
    scores: dict[str, float | None], data: TrainingData, *, subsets: bool, n_boot: int, seed: int
) -> dict[str, Any]:
    human = dict(zip(data.ids, data.y.tolist()))
    kept = {i: s for i, s in scores.items() if i in human}
    systems = dict(zip(data.ids, data.systems))
    levels = correlate(
        kept, {i: human[i] for i in kept}, systems={i: systems[i] for i in kept}, n_boot=n_boot, seed=seed
    )
    out = {name: {"n": lv.n, **{m: asdict(c) for m, c in lv.coefficients.items()}} for name, lv in levels.items()}
    if subsets:
        for dataset in ("redial", "opendialkg"):
            ids = [i for i, d in zip(data.ids, data.datasets) if d == dataset and i in kept]
            lv = correlate({i: kept[i] for i in ids}, {i: human[i] for i in ids}, n_boot=n_boot, seed=seed)["dialogue"]
            out[f"dialogue_{dataset}"] = {"n": lv.n, **{m: asdict(c) for m, c in lv.coefficients.items()}}
    return {k: out[k] for k in ("dialogue", "dialogue_redial", "dialogue_opendialkg", "system") if k in out}


def validity_report(
    data: TrainingData, *, llm_rows: list[dict[str, Any]] | None = None, seed: int = SEED, n_boot: int = 1000
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The validity table: the proxy's calibrated overall (out of fold), its factor mean and each factor
    (fixed rules, nothing fitted), the LLM judge's scores from ``evaluate --out`` rows, and FACE's
    published figures; all against the human ``dialogue_overall``. Also returns the proxy's vote agreement."""
    cv = cross_validate(data, seed=seed)
    ids = data.ids
    rows = _rows(
        "proxy",
        "overall (calibrated)",
        f"{N_SPLITS}-fold CV by user",
        _correlations(dict(zip(ids, cv.predictions.tolist())), data, subsets=True, n_boot=n_boot, seed=seed),
    )
    factor_scores = data.X[:, : len(FACTORS)]
    mean = np.nanmean(factor_scores, axis=1)
    rows += _rows(
        "proxy",
        "factor mean",
        "none",
        _correlations(dict(zip(ids, mean.tolist())), data, subsets=False, n_boot=n_boot, seed=seed),
    )
    for k, factor in enumerate(FACTORS):
        values = [None if math.isnan(v) else float(v) for v in factor_scores[:, k]]
        rows += _rows(
            "proxy",
            factor,
            "none (fixed rule)",
            _correlations(dict(zip(ids, values)), data, subsets=False, n_boot=n_boot, seed=seed),
        )
    if llm_rows:
        judged = {r["conversation_id"] for r in llm_rows}
        same = {i: p for i, p in zip(ids, cv.predictions.tolist()) if i in judged}
        rows += _rows(
            "proxy",
            f"overall (calibrated), on the {len(same)} dialogues of the LLM rows",
            f"{N_SPLITS}-fold CV by user",
            _correlations(same, data, subsets=True, n_boot=n_boot, seed=seed),
        )
        scorer = ", ".join(sorted({r.get("scorer", "llm") for r in llm_rows}))
        picks = {"overall (debate)": lambda r: r.get("overall"), "factor mean": lambda r: r.get("factor_mean")}
        picks.update({f: (lambda r, f=f: (r.get("factors") or {}).get(f)) for f in FACTORS})
        for score, pick in picks.items():
            values = {r["conversation_id"]: pick(r) for r in llm_rows}
            rows += _rows(
                scorer,
                score,
                "none",
                _correlations(values, data, subsets=score.startswith("overall"), n_boot=n_boot, seed=seed),
            )
    rows += [
        {
            "scorer": "FACE (published, Llama-3.1-8B, 467 dialogues)",
            "score": r["score"],
            "fit": "paper",
            "level": r["level"],
            "n": r["n"] or "–",
            "spearman": f"{r['spearman']:.3f}",
            "pearson": f"{r['pearson']:.3f}",
            "kendall": "–",
        }
        for r in FACE_PUBLISHED
    ]
    return rows, vote_agreement(cv.pair_scores, data.outcome, n_boot=n_boot, seed=seed)
