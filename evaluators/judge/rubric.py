"""The CoRE rubric as data: ``assets/rubrics/<version>.toml`` loaded into checked models.

A :class:`Rubric` holds the twelve :class:`Factor` guidelines (definition, 0-4
levels, steps, the extra inputs each factor sees) and the feature dimensions
of each domain. Its ``version`` is stored with every score.

Factors whose standard is a count or a share carry a machine-readable
:class:`CountStandard`, so deterministic metrics score with the same
thresholds the LLM judge reads. :meth:`Factor.score_for` expects:

=========================  ======================================  ==========
factor                     quantity (``value``)                     unit
=========================  ======================================  ==========
coherence                  misaligned system replies                count
recoverability             user-flagged mistakes left unrepaired    count
proactiveness              share of replies taking initiative       share 0-1
grammatical_correctness    clear grammatical errors                 count
naturalness                share of system text sounding unnatural  share 0-1
effectiveness              target hit (1) or not (0)                flag
novelty                    less-known items, with ``total`` = list  count
                           length
diversity                  distinct values per feature dimension    mapping or
                                                                    sequence
semantic_relevance         share of text recommendations in list    share 0-1
explainability             share of recommending replies explained  share 0-1
groundedness               clear factual errors                     count
appropriateness            (none: judged only; ``count`` is None)
=========================  ======================================  ==========

``score_for`` returns None when the bands do not decide the score (an
effectiveness miss needs a similarity judgement).

A factor's ``levels`` are the scores a judge may give it (:attr:`Factor.scores`):
every level 0-4 in the extended rubric, only 4 and 0 for appropriateness in
``core-v3``, which follows CoRE's appendix A. A rubric is chosen by version
(``core-v2``) or by name (:data:`RUBRIC_NAMES`): ``core`` is the paper's levels,
``core-extended`` this project's earlier default with intermediate levels,
catalog popularity shown to the judge and explanations that must name a reason.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from evaluators.factors import DIMENSION_OF, FACTORS

RUBRICS_DIR = Path(__file__).resolve().parents[2] / "assets" / "rubrics"
# Names a user chooses a rubric by. core-v1 is kept (by version) so stored scores stay readable.
RUBRIC_NAMES = {"core": "core-v3", "core-extended": "core-v2"}
DEFAULT_VERSION = RUBRIC_NAMES["core"]
GENERIC_DOMAIN = "generic"
SCORES = (0, 1, 2, 3, 4)

Extra = Literal["targets", "item_metadata", "feature_dimensions"]
ItemField = Literal["genres", "directors", "cast", "writers", "decade"]


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Band(_Data):
    """One scoring band: holds when all its conditions hold (none: always)."""

    score: int
    min: float | None = None
    max: float | None = None
    above: float | None = None
    below: float | None = None
    share_min: float | None = None
    note: str = ""

    def holds(self, value: float, total: float | None) -> bool:
        if self.min is not None and not value >= self.min:
            return False
        if self.max is not None and not value <= self.max:
            return False
        if self.above is not None and not value > self.above:
            return False
        if self.below is not None and not value < self.below:
            return False
        if self.share_min is not None:
            if total is None:
                raise ValueError("this factor's bands need the list length: pass total=")
            if total <= 0 or value / total < self.share_min:
                return False
        return True


class FeatureRule(_Data):
    """Holds when at least ``dimensions`` dimensions have more than ``more_than`` distinct values."""

    dimensions: int
    more_than: int
    score: int
    note: str = ""

    def holds(self, counts: Sequence[float]) -> bool:
        return sum(1 for c in counts if c > self.more_than) >= self.dimensions


class CountStandard(_Data):
    """The machine-readable form of a count- or share-based standard."""

    quantity: str
    unit: Literal["count", "share", "flag", "feature_counts"]
    description: str
    bands: tuple[Band, ...] = ()
    rules: tuple[FeatureRule, ...] = ()

    @model_validator(mode="after")
    def _one_kind(self) -> CountStandard:
        if (self.unit == "feature_counts") != bool(self.rules) or bool(self.rules) == bool(self.bands):
            raise ValueError(f"{self.quantity}: feature_counts uses `rules`, every other unit uses `bands`")
        if any(b.score not in SCORES for b in self.bands) or any(r.score not in SCORES for r in self.rules):
            raise ValueError(f"{self.quantity}: band scores must be within 0-4")
        return self


class FeatureDimension(_Data):
    """One feature dimension diversity counts (e.g. directors for movies)."""

    id: str
    label: str
    item_field: ItemField | None = None
    lead: int | None = None

    def values(self, item: Any) -> tuple[str, ...]:
        """This dimension's values for a catalog item; () when the catalog does not hold them."""
        if self.item_field is None:
            return ()
        raw = getattr(item, self.item_field, None)
        if raw is None:
            return ()
        values = (raw,) if isinstance(raw, str) else tuple(raw)
        return values[: self.lead] if self.lead else values


class DomainFeatures(_Data):
    dimensions: tuple[FeatureDimension, ...]
    notes: tuple[str, ...] = ()


class Factor(_Data):
    """One factor's guideline: what it means, how to score it, what the judge sees."""

    id: str
    dimension: str
    label: str
    definition: str
    levels: dict[int, str]
    steps: tuple[str, ...]
    sees: tuple[Extra, ...] = ()
    focus: str = ""
    notes: tuple[str, ...] = ()
    levels_without_targets: dict[int, str] | None = None
    count: CountStandard | None = None

    @field_validator("levels", "levels_without_targets")
    @classmethod
    def _known_levels(cls, levels: dict[int, str] | None) -> dict[int, str] | None:
        # A level left out is one the paper does not define (core-v3's appropriateness): no judge may give it.
        if levels is not None and not ({0, 4} <= set(levels) <= set(SCORES)):
            raise ValueError(f"levels must describe 0 and 4 and lie within 0-4, got {sorted(levels)}")
        return levels

    @model_validator(mode="after")
    def _consistent(self) -> Factor:
        if DIMENSION_OF.get(self.id) != self.dimension:
            raise ValueError(f"factor {self.id!r} belongs to {DIMENSION_OF.get(self.id)!r}, not {self.dimension!r}")
        if self.levels_without_targets is not None and "targets" not in self.sees:
            raise ValueError(f"{self.id}: levels_without_targets only make sense for a factor that sees targets")
        if self.levels_without_targets is not None and sorted(self.levels_without_targets) != list(self.scores):
            raise ValueError(f"{self.id}: levels_without_targets must describe the same scores as levels")
        if self.count is not None:
            given = {b.score for b in self.count.bands} | {r.score for r in self.count.rules}
            if missing := sorted(given - set(self.scores)):
                raise ValueError(f"{self.id}: the count standard gives scores without a level: {missing}")
        return self

    @property
    def scores(self) -> tuple[int, ...]:
        """The scores a judge may give this factor: its levels, lowest first."""
        return tuple(sorted(self.levels))

    def score_for(
        self, value: float | Mapping[str, float] | Sequence[float], *, total: float | None = None
    ) -> int | None:
        """The 0-4 score the machine-readable standard gives a counted quantity.

        :param value: the factor's quantity (see the module docstring): a number,
            or for diversity the distinct-value counts per feature dimension
        :param total: the session list length, needed by novelty's share bands
        :returns: the score of the first band that holds, or None when none does
        :raises ValueError: the factor has no count standard, or the value is out of range
        """
        standard = self.count
        if standard is None:
            raise ValueError(f"{self.id} has no machine-readable standard; it is judged only")
        if standard.unit == "feature_counts":
            if isinstance(value, (int, float)):
                raise TypeError(f"{self.id} expects one count per feature dimension, not a single number")
            counts = list(value.values()) if isinstance(value, Mapping) else list(value)
            if any(c < 0 for c in counts):
                raise ValueError(f"{self.id}: counts cannot be negative")
            return next((r.score for r in standard.rules if r.holds(counts)), None)
        if not isinstance(value, (int, float)):
            raise TypeError(f"{self.id} expects a single number ({standard.quantity})")
        if value < 0 or (standard.unit in ("share", "flag") and value > 1):
            raise ValueError(f"{self.id}: {standard.quantity} out of range: {value}")
        return next((b.score for b in standard.bands if b.holds(float(value), total)), None)


class LogSpec(_Data):
    """What every factor's prompt shares (the paper's processed log), with the decisions behind it."""

    shared: tuple[Literal["history", "interaction", "recommendations"], ...]
    # The catalog's popularity rank among the item details. True for rubrics written before the key
    # (core-v1, core-v2 showed it); core-v3 sets it false: CoRE's judge uses its own knowledge.
    item_popularity: bool = True
    notes: tuple[str, ...] = ()


class Rubric(_Data):
    """All twelve factors and the domain features, under one version."""

    version: str
    log: LogSpec
    factors: dict[str, Factor]
    features: dict[str, DomainFeatures]

    @model_validator(mode="after")
    def _complete(self) -> Rubric:
        if sorted(self.factors) != sorted(FACTORS):
            raise ValueError(f"rubric {self.version} must define exactly the factors {FACTORS}")
        if GENERIC_DOMAIN not in self.features:
            raise ValueError(f"rubric {self.version} needs a [features.{GENERIC_DOMAIN}] fallback")
        return self

    def factor(self, factor_id: str) -> Factor:
        try:
            return self.factors[factor_id]
        except KeyError:
            raise KeyError(f"unknown factor {factor_id!r}; known: {', '.join(FACTORS)}") from None

    def features_for(self, domain: str) -> tuple[FeatureDimension, ...]:
        """The feature dimensions of ``domain`` (case-insensitive); the generic set for unknown domains."""
        entry = self.features.get(domain.strip().lower()) or self.features[GENERIC_DOMAIN]
        return entry.dimensions


def rubric_path(version: str) -> Path:
    return RUBRICS_DIR / f"{version.replace('-', '_')}.toml"


def rubric_version(name: str | None = None) -> str:
    """The version a rubric name (:data:`RUBRIC_NAMES`) or version stands for; the default for None."""
    if not name:
        return DEFAULT_VERSION
    return RUBRIC_NAMES.get(name.strip(), name.strip())


def load_rubric(version: str | None = None) -> Rubric:
    """The rubric of ``version`` or name (default :data:`DEFAULT_VERSION`), parsed and checked once."""
    return _load(rubric_version(version))


@cache
def _load(version: str) -> Rubric:
    path = rubric_path(version)
    if not path.exists():
        names = ", ".join(f"{n} ({v})" for n, v in RUBRIC_NAMES.items())
        raise FileNotFoundError(f"no rubric {version!r} (expected {path}); known names: {names}")
    with open(path, "rb") as f:
        rubric = rubric_from_dict(tomllib.load(f))
    if rubric.version != version:
        raise ValueError(f"{path.name} declares version {rubric.version!r}, expected {version!r}")
    return rubric


def rubric_from_dict(data: dict[str, Any]) -> Rubric:
    """Check rubric data as read from TOML; each ``[factors.<id>]`` table gets its ``id``.

    :raises pydantic.ValidationError: missing, unknown or inconsistent entries
    """
    factors = {fid: {"id": fid, **body} for fid, body in (data.get("factors") or {}).items()}
    return Rubric.model_validate({**data, "factors": factors})


def features_for(domain: str, version: str | None = None) -> tuple[FeatureDimension, ...]:
    """Shortcut: :meth:`Rubric.features_for` of the rubric ``version``."""
    return load_rubric(version).features_for(domain)
