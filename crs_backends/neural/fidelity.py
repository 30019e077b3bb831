"""Checks of the small local versions over the bundled catalog (rankings that follow the conversation, replies that
neither stutter nor contradict the catalog, written into a set's manifest by its build). The figures themselves,
and the reference rankings that read no text, are defined in :mod:`crs_backends.neural.evaluation`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from catalog.catalog import Catalog
from catalog.ievalm_records import Record
from crs_backends.neural import policy, reply_facts
from crs_backends.neural.engine import ConvInput, NeuralModel

# what an unfilled slot looks like once a reply is shown: a slot token, or a phrase whose item went missing
_EMPTY_SLOT = re.compile(r"<(?:movie|genre|director|actor|year|pad|mask)>|\b(?:seen|about)\s*[?.!]", re.IGNORECASE)


def held_back_inputs(records: Sequence[Record], n: int = 300) -> list[Record]:
    """One record per dialogue, ``n`` of them: the dialogue's last record with a recommendation (the whole
    conversation up to it), so that each held-back dialogue counts once, with all it says."""
    last: dict[str, Record] = {}
    for r in records:
        if r.rec:
            last[r.dialog_id] = r
    return list(last.values())[:n]


def distinct_ratio(rankings: Sequence[Sequence[tuple[int, float]]], k: int = 3) -> float:
    """Distinct top-``k`` lists among rankings already computed, as a share of them."""
    tops = [tuple(e for e, _ in ranked[:k]) for ranked in rankings]
    return len(set(tops)) / len(tops) if tops else 0.0


@dataclass
class ReplyCheck:
    replies: int = 0
    stutters: list[str] = field(default_factory=list)
    contradictions: list[str] = field(default_factory=list)
    empty_slots: list[str] = field(default_factory=list)
    samples: list[str] = field(default_factory=list)
    # different texts the reply model generated (slots unfilled): a model that ignores the conversation writes one
    # (the small BARCOR of v4 answered "Hi!" and a horror request with the same recommendation sentence)
    distinct_generated: int = 0


def open_small(system: str, root, catalog: Catalog):
    """The small ``system`` of the set at ``root`` as the app runs it (:func:`crs_backends.neural.system.open_system`:
    its text recommender read from the set)."""
    from crs_backends.neural.sources import small_source
    from crs_backends.neural.system import open_system

    source = small_source(system, root)
    if source is None:
        raise FileNotFoundError(f"no small {system} in {root}")
    return open_system(source, catalog)


def shown_reply(model: NeuralModel, inp: ConvInput, ranked=None, generated: str | None = None) -> str:
    """The reply a small version shows when it does not list: its generated text with its placeholder filled from
    its ranking (``ranked``: its top 10 when already computed), what the ``crs_arena`` policy does on such turns;
    ``generated``: its generated text when already generated."""
    ranked = model.recommend(inp, k=10) if ranked is None else ranked
    names = [model.kg.entity_name(int(e)) for e, _ in ranked]
    generated = model.reply_text(inp) if generated is None else generated
    return policy.fill_placeholders(generated, model.placeholder, names)


def check_replies(
    model: NeuralModel,
    inputs: Iterable[ConvInput],
    catalog: Catalog,
    keep: int = 5,
    rankings: Sequence | None = None,
) -> ReplyCheck:
    """``rankings``: each input's top 10 when already computed (else each is ranked here)."""
    out = ReplyCheck()
    titles = [item.name for item in catalog.items]  # "Title (Year)", as the replies name them
    generated: set[str] = set()
    for n, inp in enumerate(inputs):
        raw = model.reply_text(inp)  # generated once: counted here, shown below
        generated.add(raw)
        text = shown_reply(model, inp, rankings[n] if rankings is not None else None, raw)
        out.replies += 1
        out.stutters += [f"{w!r} in {text!r}" for w in reply_facts.stutters(text, titles)]
        out.contradictions += [f"{p} in {text!r}" for p in reply_facts.contradictions(text, catalog)]
        if _EMPTY_SLOT.search(text) or not text.strip():
            out.empty_slots.append(text)
        if len(out.samples) < keep:
            out.samples.append(text)
    out.distinct_generated = len(generated)
    return out


HELD_BACK_SEED_OFFSET = 7  # the held-back dialogues: another seed than the training records'


def genre_following(model: NeuralModel, catalog: Catalog, item_of, k: int = 10) -> dict[str, float]:
    """Per catalog genre, the share of the top ``k`` that is of that genre when the conversation asks for the genre
    alone ("Any good comedy films?", the genre entity linked), as a chat that opens with a genre does."""
    out: dict[str, float] = {}
    for genre in sorted({g for item in catalog.items for g in item.genres}):
        if not model.kg.ids_of([genre]):
            continue
        inp = ConvInput([f"Any good {reply_facts.genre_word(genre)} films?"], [genre])
        ranked = [item_of(e) for e, _ in model.recommend(inp, k=k)]
        out[genre] = sum(item is not None and genre in item.genres for item in ranked) / k
    return out


@dataclass
class BundledCheck:
    """One small system on ``n`` held-back synthetic dialogues over the bundled catalog."""

    distinct: float  # distinct top-3 lists / dialogues
    hit10: float  # dialogues whose target item is in the top 10
    check: ReplyCheck  # the replies it shows when it does not list
    dialogues: int
    seconds: float
    genres: dict[str, float] = field(default_factory=dict)  # genre_following: top-10 share of the asked genre

    @property
    def genre_share(self) -> float:
        """The top-10 share of the asked genre, over the catalog's genres."""
        return sum(self.genres.values()) / len(self.genres) if self.genres else 0.0

    def summary(self) -> dict:
        return {
            "distinct_top3": round(self.distinct, 3),
            "hit10": round(self.hit10, 3),
            "replies": self.check.replies,
            "stutters": len(self.check.stutters),
            "contradictions": len(self.check.contradictions),
            "empty_slots": len(self.check.empty_slots),
            "distinct_generated": self.check.distinct_generated,
            "genre_top10": round(self.genre_share, 3),
            "dialogues": self.dialogues,
        }


def bundled_checks(root, systems: Sequence[str], n: int = 300) -> dict[str, BundledCheck]:
    """Each small system of the set in ``root`` on ``n`` held-back synthetic dialogues (the last record of each,
    generated with another seed than the training records): distinct top-3 ratio, hit@10 and the reply checks; and
    how much of the top 10 is of a genre the conversation asks for alone (:func:`genre_following`)."""
    import time
    from pathlib import Path

    from catalog.catalog import get_catalog
    from crs_backends.neural.kg_reader import load_kg
    from crs_backends.neural.names import SMALL_SEED as SEED
    from crs_backends.neural.names import set_dataset
    from crs_backends.neural.synthetic import synthetic_records

    root = Path(root)
    catalog = get_catalog("bundled")
    kg = load_kg(root / f"kg_{set_dataset(root)}")
    held = held_back_inputs(synthetic_records(catalog, 2 * n, SEED + HELD_BACK_SEED_OFFSET, kg=kg), n)
    inputs = [r.conv_input() for r in held]
    out = {}
    for system in systems:
        t0 = time.monotonic()
        crs = open_small(system, root, catalog)
        model = crs.model
        rankings = [model.recommend(inp, k=10) for inp in inputs]  # once per dialogue, for all three figures
        hits = sum(any(g in {e for e, _ in ranked} for g in kg.ids_of(r.rec)) for r, ranked in zip(held, rankings))
        out[system] = BundledCheck(
            distinct=distinct_ratio(rankings),
            hit10=hits / len(held) if held else 0.0,
            check=check_replies(model, inputs, catalog, rankings=rankings),
            dialogues=len(inputs),
            seconds=time.monotonic() - t0,
            genres=genre_following(model, catalog, crs.item_of),
        )
    return out


def bundled_figures(root, systems: Sequence[str], n: int = 300) -> dict[str, dict]:
    """:func:`bundled_checks` as plain figures (for a manifest)."""
    return {system: check.summary() for system, check in bundled_checks(root, systems, n).items()}
