"""Plain records shared by every layer: what a conversation, a turn, a score is.

These are dataclasses with no behaviour beyond (de)serialisation, so that the
storage layer, the systems, the evaluators and the UI all speak about the same
objects without importing each other.
"""

from __future__ import annotations

import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

ROLES = ("user", "system")
SOURCES = ("chat", "arena", "simulation", "import", "upload")  # upload: an anonymous log upload
VOTE_CHOICES = ("a", "b", "tie", "both_bad")


def utc_now() -> str:
    """ISO-8601 UTC timestamp with seconds precision, the format stored everywhere."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def new_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class ItemRef:
    """A recommended item as stored on a turn: catalog id and display title."""

    id: str
    title: str

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ItemRef:
        return cls(id=str(data["id"]), title=str(data.get("title", "")))


RANKING_MAX = 100  # entries of a system's ranking kept on a turn (iEvaLM reads the top 50)


@dataclass
class Turn:
    """One utterance. System turns carry the list of items they show (``items``, ranked) and, when the system
    ranks more than it shows, its whole ranking (``ranking``: a neural model's top 50, a remote CRS's items up to
    :data:`RANKING_MAX`), which iEvaLM's Recall@k reads. An entry whose item is not in the catalog has id ``""``
    (it keeps its rank and never matches a target)."""

    role: str
    text: str
    items: list[ItemRef] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    ranking: list[ItemRef] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"turn role must be one of {ROLES}, got {self.role!r}")
        self.items = [i if isinstance(i, ItemRef) else ItemRef.from_dict(i) for i in self.items]
        self.ranking = [i if isinstance(i, ItemRef) else ItemRef.from_dict(i) for i in self.ranking[:RANKING_MAX]]

    def ranked(self) -> list[ItemRef]:
        """What the system ranked: its whole ranking when it kept one, else the items it showed."""
        return self.ranking or self.items

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Turn:
        return cls(
            role=data["role"],
            text=data.get("text", ""),
            items=[ItemRef.from_dict(i) for i in data.get("items") or []],
            metadata=dict(data.get("metadata") or {}),
            ranking=[ItemRef.from_dict(i) for i in data.get("ranking") or []],  # capped in __post_init__
        )


@dataclass
class Conversation:
    """A dialogue with one system.

    ``history`` is context given to the system (never judged); ``turns`` is the
    interaction that is judged. ``targets`` are ground-truth items, if known.
    """

    system_id: str
    id: str = field(default_factory=new_id)
    domain: str = "movies"
    source: str = "chat"
    history: list[Turn] = field(default_factory=list)
    turns: list[Turn] = field(default_factory=list)
    targets: list[ItemRef] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    status: str = "active"
    created_at: str = field(default_factory=utc_now)

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"conversation source must be one of {SOURCES}, got {self.source!r}")
        self.targets = [t if isinstance(t, ItemRef) else ItemRef.from_dict(t) for t in self.targets]

    @property
    def all_turns(self) -> list[Turn]:
        return [*self.history, *self.turns]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Conversation:
        return cls(
            id=data.get("id") or new_id(),
            system_id=data["system_id"],
            domain=data.get("domain", "movies"),
            source=data.get("source", "import"),
            history=[Turn.from_dict(t) for t in data.get("history") or []],
            turns=[Turn.from_dict(t) for t in data.get("turns") or []],
            targets=[ItemRef.from_dict(t) for t in data.get("targets") or []],
            metadata=dict(data.get("metadata") or {}),
            status=data.get("status", "active"),
            created_at=data.get("created_at") or utc_now(),
        )


@dataclass
class FactorScore:
    """One factor's judgement. ``score`` is None when the judge failed (see ``error``)."""

    factor: str
    score: float | None
    judge: str
    rubric_version: str
    distribution: dict[str, float] | None = None
    rationale: str = ""
    error: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass
class DebateMessage:
    """One persona's statement in one round of the debate."""

    round: int
    role: str
    model: str
    statement: str
    score: float | None
    error: str | None = None
    raw: str = ""


@dataclass
class Evaluation:
    """One scoring run over one conversation, with its factor scores and debate."""

    conversation_id: str
    scorer: str
    id: str = field(default_factory=new_id)
    rubric_version: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    status: str = "running"
    overall: float | None = None
    rounds_used: int | None = None
    consensus: bool | None = None
    error: str | None = None
    created_at: str = field(default_factory=utc_now)
    fingerprint: str = ""  # identifies the judge configuration; a re-run with the same one fills gaps
    metrics: dict[str, Any] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    factor_scores: list[FactorScore] = field(default_factory=list)
    debate: list[DebateMessage] = field(default_factory=list)


@dataclass
class Battle:
    """Two anonymous systems answering the same user in the arena."""

    system_a: str
    system_b: str
    conversation_a: str
    conversation_b: str
    id: str = field(default_factory=new_id)
    domain: str = "movies"
    session: str = ""
    created_at: str = field(default_factory=utc_now)


@dataclass
class Vote:
    battle_id: str
    choice: str
    feedback: str = ""
    voter: str = ""
    created_at: str = field(default_factory=utc_now)

    def __post_init__(self) -> None:
        if self.choice not in VOTE_CHOICES:
            raise ValueError(f"vote must be one of {VOTE_CHOICES}, got {self.choice!r}")
