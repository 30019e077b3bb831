"""Fitting the proxy scorer's overall model, offline: training data, the ridge fit, cross-validation.

Run with ``python -m evaluators calibrate``; it writes the calibration file that the app's runtime
scorer (:mod:`evaluators.proxy.scorer`) reads. scikit-learn is used here and only here.

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

The saved file (``assets/calibration/proxy_<version>.json``, :class:`~evaluators.proxy.scorer.Calibration`)
records the proxy version, the similarity the proxies used, the feature names, the fitted parameters,
the cross-validated results and the seed.
"""

from __future__ import annotations

import csv
import os
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import sklearn
from sklearn.impute import SimpleImputer
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import GroupKFold
from sklearn.preprocessing import StandardScaler

from catalog.catalog import Catalog
from evaluators.judge.rubric import load_rubric
from evaluators.log_readers import read_crsarena_dial, read_crsarena_eval
from evaluators.meta.correlation import correlate, vote_agreement
from evaluators.proxy.factor_proxies import PROXY_RUBRIC
from evaluators.proxy.features import PROXY_VERSION, ProxyResult, proxy_scores
from evaluators.proxy.scorer import FEATURES, MODEL_FEATURES, Calibration, Model, feature_vector
from evaluators.proxy.similarity import LEXICAL, MINILM, Embedder
from evaluators.proxy.turn_evidence import TURN_FEATURES, TurnEvidence
from evaluators.proxy.turn_scores import AGGREGATES as TURN_AGGREGATES
from evaluators.proxy.turn_scores import ASPECTS, Linear, TurnModel, aggregate, score_turns
from storage.records import Conversation

ALPHAS: tuple[float, ...] = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0)
PAIR_WEIGHT = 1.0
MARGIN = 1.0
N_SPLITS = 10
SEED = 0
_USER = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


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
    turns: list[tuple[TurnEvidence, ...]] = field(default_factory=list)  # per labelled dialogue
    turn_labels: list[dict[int, dict[str, float | None]]] = field(default_factory=list)  # turn index -> labels
    A_turns: list[tuple[TurnEvidence, ...]] = field(default_factory=list)  # per vote
    B_turns: list[tuple[TurnEvidence, ...]] = field(default_factory=list)


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
    labelled = _labelled(eval_path, catalog, embedder)
    A, B, outcome, vote_users, skipped = [], [], [], [], 0
    A_turns: list[tuple[TurnEvidence, ...]] = []
    B_turns: list[tuple[TurnEvidence, ...]] = []
    if votes_dir is not None:
        dial: dict[str, Conversation] = {}
        for path in sorted(Path(votes_dir).glob("crs_arena_dial_*.json")):
            dial.update({c.id: c for c in read_crsarena_dial(path, catalog).conversations})
        cache: dict[str, ProxyResult] = {}

        def result(cid: str) -> ProxyResult:
            if cid not in cache:
                cache[cid] = proxy_scores(dial[cid], catalog, embedder=embedder)
            return cache[cid]

        for vote in read_votes(votes_dir):
            a, b = f"{vote['crs1']}_{vote['user_id']}", f"{vote['crs2']}_{vote['user_id']}"
            if a not in dial or b not in dial or not (_judgeable(dial[a]) and _judgeable(dial[b])):
                skipped += 1
                continue
            A.append(feature_vector(result(a)))
            B.append(feature_vector(result(b)))
            A_turns.append(result(a).turns)
            B_turns.append(result(b).turns)
            outcome.append(0 if vote["vote"] == "tie" else 1 if vote["vote"] == vote["crs1"] else -1)
            vote_users.append(vote["user_id"])
    width = len(FEATURES)
    return replace(
        labelled,
        A=np.array(A, dtype=float).reshape(len(A), width),
        B=np.array(B, dtype=float).reshape(len(B), width),
        outcome=np.array(outcome, dtype=float),
        vote_users=vote_users,
        skipped_votes=skipped,
        A_turns=A_turns,
        B_turns=B_turns,
    )


def _labelled(path: str | os.PathLike, catalog: Catalog, embedder: Embedder | None) -> TrainingData:
    """The dialogues of a CRSArena-Eval-layout file that have a ``dialogue_overall`` label, as model inputs (no
    votes); the user of each is the uuid that ends its ``conv_id`` (:func:`user_of`)."""
    read = read_crsarena_eval(path, catalog)
    labelled = [
        c
        for c in read.conversations
        if read.labels[c.id].dialogue.get("dialogue_overall") is not None and _judgeable(c)
    ]
    results = [proxy_scores(c, catalog, embedder=embedder) for c in labelled]
    width = len(FEATURES)
    return TrainingData(
        X=np.array([feature_vector(r) for r in results], dtype=float).reshape(len(results), width),
        y=np.array([read.labels[c.id].dialogue["dialogue_overall"] for c in labelled], dtype=float),
        ids=[c.id for c in labelled],
        systems=[c.system_id for c in labelled],
        users=[user_of(c.id) for c in labelled],
        A=np.empty((0, width)),
        B=np.empty((0, width)),
        outcome=np.empty(0),
        vote_users=[],
        similarity=results[0].similarity if results else (LEXICAL if embedder is None else MINILM),
        datasets=[c.metadata.get("dataset") for c in labelled],
        turns=[r.turns for r in results],
        turn_labels=[read.labels[c.id].turns for c in labelled],
    )


def with_labels(
    data: TrainingData, paths: Iterable[str | os.PathLike], catalog: Catalog, *, embedder: Embedder | None = None
) -> TrainingData:
    """``data`` with the labelled dialogues of more CRSArena-Eval-layout files added (people's ratings exported by
    ``python -m arena export-labels``); a dialogue id already present is refused."""
    for path in paths:
        extra = _labelled(path, catalog, embedder)
        repeated = sorted(set(extra.ids) & set(data.ids))
        if repeated:
            raise ValueError(f"{path}: dialogue(s) already in the training data: {repeated[:3]}")
        data = replace(
            data,
            X=np.vstack([data.X, extra.X]),
            y=np.concatenate([data.y, extra.y]),
            ids=data.ids + extra.ids,
            systems=data.systems + extra.systems,
            users=data.users + extra.users,
            datasets=data.datasets + extra.datasets,
            turns=data.turns + extra.turns,
            turn_labels=data.turn_labels + extra.turn_labels,
        )
    return data


def _judgeable(conversation: Conversation) -> bool:
    return any(t.role == "system" for t in conversation.turns)


# -- the model ------------------------------------------------------------------------------------------


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
    if A is not None and B is not None and len(A) and pair_weight > 0:
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


def fit_turn_model(
    turns: list[tuple[TurnEvidence, ...]],
    labels: list[dict[int, dict[str, float | None]]],
    *,
    alphas: Iterable[float] = ALPHAS,
) -> TurnModel:
    """Ridge regressions of each turn aspect (:data:`evaluators.proxy.turn_scores.ASPECTS`) on the scorable
    labelled turns of these dialogues; inputs standardised, the strength chosen by leave-one-out among ``alphas``."""
    fitted = {}
    for aspect in ASPECTS:
        rows = [
            (t.features, labels[d][t.index][aspect])
            for d in range(len(turns))
            for t in turns[d]
            if t.unscorable is None and labels[d].get(t.index, {}).get(aspect) is not None
        ]
        X = np.array([r[0] for r in rows], dtype=float).reshape(len(rows), len(TURN_FEATURES))
        y = np.array([r[1] for r in rows], dtype=float)
        if not len(y):
            raise ValueError(f"no labelled turn with {aspect} to fit the turn scorer on")
        scaler = StandardScaler().fit(X)
        ridge = RidgeCV(alphas=list(alphas)).fit(scaler.transform(X), y)
        fitted[aspect] = Linear(
            mean=scaler.mean_.tolist(),
            scale=scaler.scale_.tolist(),
            coef=ridge.coef_.tolist(),
            intercept=float(ridge.intercept_),
            alpha=float(ridge.alpha_),
        )
    return TurnModel(features=list(TURN_FEATURES), **fitted)


def model_inputs(X: np.ndarray, turns: list[tuple[TurnEvidence, ...]], turn_model: TurnModel | None) -> np.ndarray:
    """``X`` (the :data:`~evaluators.proxy.scorer.FEATURES` rows) with each conversation's turn aggregates (NaN,
    imputed later, without a turn model or for a row without turns)."""
    rows = [aggregate(score_turns(turn_model, t) if turn_model is not None else []) for t in (turns or [()] * len(X))]
    return np.hstack([X, np.array(rows, dtype=float).reshape(len(X), len(TURN_AGGREGATES))])


def _turn_model_for(
    turns: list[tuple[TurnEvidence, ...]], labels: list[dict[int, dict[str, float | None]]], alphas: Iterable[float]
) -> TurnModel | None:
    """The turn scorer fitted on these dialogues, or None when none of their turns is labelled."""
    if not any(labels):
        return None
    return fit_turn_model(turns, labels, alphas=alphas)


# -- cross-validation -----------------------------------------------------------------------------------


@dataclass
class CrossValidation:
    """Out-of-fold predictions for the labelled dialogues and the votes, and the fold of each."""

    predictions: np.ndarray  # one per labelled dialogue, 0-4
    pair_scores: np.ndarray  # (votes, 2): the predictions for A and B
    folds: list[tuple[np.ndarray, np.ndarray]]  # (train, test) indices over labelled rows + votes
    turn_predictions: dict[str, dict[str, float | None]] = field(default_factory=dict)  # "<dialogue>#<turn>"

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
        levels["within_system"] = correlate(
            _centred(preds, data.systems), _centred(human, data.systems), n_boot=n_boot, seed=seed
        )["dialogue"]
        for aspect in ASPECTS:
            predicted = self.turn_predictions.get(aspect, {})
            labelled = {
                f"{i}#{k}": labels.get(aspect)
                for i, turn_labels in zip(data.ids, data.turn_labels)
                for k, labels in turn_labels.items()
            }
            if predicted and any(v is not None for v in labelled.values()):
                levels[f"turn_{aspect}"] = correlate(predicted, labelled, n_boot=n_boot, seed=seed)["dialogue"]
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
    turn_predictions: dict[str, dict[str, float | None]] = {aspect: {} for aspect in ASPECTS}
    for train, test in folds:
        lab, votes = train[train < n], train[train >= n] - n
        turn_model = _turn_model_for(
            [data.turns[i] for i in lab] if data.turns else [],
            [data.turn_labels[i] for i in lab] if data.turn_labels else [],
            alphas,
        )
        X = model_inputs(data.X, data.turns, turn_model)
        A = model_inputs(data.A, data.A_turns, turn_model)
        B = model_inputs(data.B, data.B_turns, turn_model)
        model = fit_model(
            X[lab],
            data.y[lab],
            A[votes],
            B[votes],
            data.outcome[votes],
            alphas=alphas,
            pair_weight=pair_weight,
            margin=margin,
        )
        t_lab, t_votes = test[test < n], test[test >= n] - n
        if len(t_lab):
            predictions[t_lab] = model.predict(X[t_lab])
        if len(t_votes):
            pair_scores[t_votes] = np.column_stack([model.predict(A[t_votes]), model.predict(B[t_votes])])
        if turn_model is None or not data.turns:
            continue
        for i in t_lab:  # the held-out dialogues' turns, scored by a turn model that never saw them
            for score in score_turns(turn_model, data.turns[i]):
                turn_predictions["relevance"][f"{data.ids[i]}#{score.index}"] = score.relevance
                turn_predictions["interestingness"][f"{data.ids[i]}#{score.index}"] = score.interestingness
    return CrossValidation(predictions, pair_scores, folds, turn_predictions)


def _centred(values: dict[str, float], systems: list[str]) -> dict[str, float]:
    """Each dialogue's value minus the mean of its system's dialogues (the within-system view)."""
    ids = list(values)
    by_system: dict[str, list[float]] = {}
    for i, system in zip(ids, systems, strict=True):
        by_system.setdefault(system, []).append(values[i])
    means = {system: float(np.mean(v)) for system, v in by_system.items()}
    return {i: values[i] - means[system] for i, system in zip(ids, systems, strict=True)}


# -- fitting the saved calibration ---------------------------------------------------------------------


def calibrate(
    data: TrainingData,
    *,
    seed: int = SEED,
    n_splits: int = N_SPLITS,
    n_boot: int = 1000,
    sources: dict[str, str | None] | None = None,
) -> Calibration:
    """Cross-validate, then fit on everything: the calibration to save."""
    cv = cross_validate(data, seed=seed, n_splits=n_splits)
    labels_only = cross_validate(data, seed=seed, n_splits=n_splits, pair_weight=0.0)
    turn_model = _turn_model_for(data.turns, data.turn_labels, ALPHAS)
    if turn_model is None:
        raise ValueError("no labelled turn (relevance, interestingness) to fit the turn scorer on")
    model = fit_model(
        model_inputs(data.X, data.turns, turn_model),
        data.y,
        model_inputs(data.A, data.A_turns, turn_model),
        model_inputs(data.B, data.B_turns, turn_model),
        data.outcome,
    )
    return Calibration(
        proxy_version=PROXY_VERSION,
        similarity=data.similarity,
        features=list(MODEL_FEATURES),
        model=model,
        turn_model=asdict(turn_model),
        seed=seed,
        settings={
            "alphas": list(ALPHAS),
            "pair_weight": PAIR_WEIGHT,
            "margin": MARGIN,
            "n_splits": n_splits,
            "folds": "GroupKFold by user, shuffled with the seed",
            "n_boot": n_boot,
            "rubric": load_rubric(PROXY_RUBRIC).version,
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
