"""Whether a system's reply says who it is ("I'm ChatGPT", "as a KBRD model", "powered by GPT-4"): a vote cast after
that is not anonymous, so the board sets it aside (LMArena's practice: a vote after a side named its model is not
rated).

The check reads the replies only, never what the person typed (they may name any system they like). It looks for

* **names that are nothing else**: ChatGPT, GPT-x, OpenAI, Anthropic, KBRD, BARCOR, UniCRS, ChatCRS, CRB-CRS,
  SmolLM, Qwen, Mixtral, Vicuna, "Meta AI", "Retrieval baseline", every registered system's label and its id when
  the id cannot be an ordinary word (``kbrd_redial``; not ``retrieval``), and the models named in the settings;
* **names that are also words or people** (Claude, Gemini, Llama, Mistral, Falcon, Bard, Phi, Alpaca), counted only
  when the reply uses them as a model's name: with a version or size ("Llama 3", "Claude 3 Haiku", "Falcon-40B",
  "Gemini Pro"), after a self-introduction ("I'm", "this is", "as", "powered by", "built on", "my name is"), before
  "here" / "at your service" / ", an AI assistant" / "model", or after a maker's possessive ("Google's Gemini").
  Followed by a capitalised word they are a person or a title ("Claude Chabrol", "Gemini Man") and never count;
* **makers named as makers**: "made by Google", "an open model from Meta", "trained by Mistral AI".

Measured on ``tests/data/name_reveal_replies.jsonl`` (replies labelled before this module was written) by
``bench/leaderboard.py`` (``BENCH name_reveal_recall`` / ``name_reveal_precision``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from pathlib import PurePath

MAX_CHARS = 20_000  # a reply is read up to here: a name that reveals a side comes early, and the regexes stay cheap

# names that are nothing but a system's, a model's or its maker's
_PLAIN = (
    r"chat\s?gpt(?:[-\s]?\d(?:\.\d)?)?",
    r"gpt(?:[-\s]?\d(?:\.\d)?[a-z]?(?:[-\s](?:turbo|mini))?)?",
    r"open\s?ai",
    r"anthropic",
    r"chat\s?crs",
    r"kbrd",
    r"barcor",
    r"uni\s?crs",
    r"crb[-_\s]crs",
    r"smol\s?lm\d*(?:[-\w.]*)?",
    r"qwen[\d.]*",
    r"mixtral",
    r"vicuna(?:-\d+b)?",
    r"meta\s+ai",
    r"mistral\s+ai",
    r"retrieval\s+(?:baseline|system)",
    r"bm25",
    r"(?:kbrd|barcor|unicrs|chatgpt|crb_crs)_\w+",
)
# names that are also words, people or titles
_AMBIGUOUS = r"claude|gemini|llama|mistral|falcon|bard|phi|alpaca"
# what makes an ambiguous name a model's: a version or size after it
_VERSIONED = (
    r"(?:" + _AMBIGUOUS + r")(?:[-\s]?\d+(?:\.\d+)*[a-z]?\b|[-\s]\d+b\b|\s+(?:pro|flash|ultra|nano|haiku|sonnet|opus|"
    r"instruct|chat)\b)"
)
# ... or a self-introduction before it
_INTRO = (
    r"(?:\bi'm|\bi\s+am|\bthis\s+is|\bit's|\bit\s+is|\bas|\bpowered\s+by|\bbased\s+on|\bbuilt\s+on|\brunning\s+on"
    r"|\bruns?\s+on|\bmy\s+name\s+is|\bcall\s+me|\byou(?:'re|\s+are)\s+(?:talking|chatting)\s+(?:to|with)"
    r"|\banswer\s+from|\bmodel:|\bmodel\s+is|(?:google|meta|microsoft|anthropic|openai|alibaba)'s)"
    r"\s+(?:(?:the|an?|instance\s+of)\s+)*"
)
# ... or a self-description after it
_AFTER = (
    r"\s+(?:here\b|at\s+your\s+service|again\b|model\b|llm\b)"
    r"|,\s+(?:an?|the)\s+(?:[\w-]+\s+){0,3}(?:model|assistant|ai|chatbot|recommender|llm)\b"
)
_MAKERS = r"google|meta|microsoft|anthropic|openai|alibaba(?:\s+cloud)?|mistral\s+ai|tii|hugging\s?face"
_MAKER = (
    r"\b(?:made|built|developed|created|trained|designed|provided)\s+by\s+(?:" + _MAKERS + r")\b"
    r"|\b(?:model|assistant|ai|llm|chatbot)\s+(?:from|by)\s+(?:" + _MAKERS + r")\b"
)

_PLAIN_RE = re.compile(r"(?<![\w-])(?:" + "|".join(_PLAIN) + r")(?![\w])", re.IGNORECASE)
_VERSIONED_RE = re.compile(r"(?<![\w-])" + _VERSIONED, re.IGNORECASE)
_AMBIGUOUS_RE = re.compile(r"(?<![\w-])(" + _AMBIGUOUS + r")(?![\w-])", re.IGNORECASE)
_INTRO_RE = re.compile(_INTRO + r"$", re.IGNORECASE)
_AFTER_RE = re.compile(_AFTER, re.IGNORECASE)
_MAKER_RE = re.compile(_MAKER, re.IGNORECASE)
_PERSON_AFTER = re.compile(r"\s+(?!(?:AI|Pro|Flash|Ultra|Nano|Haiku|Sonnet|Opus|Instruct|Chat)\b)[A-Z][a-z]")
_WORDY_ID = re.compile(r"[a-z]+")  # a registry id that is one plain word ("retrieval") could be any reply's word


def names_in(text: str, extra: Iterable[str] = ()) -> list[str]:
    """The names ``text`` reveals (as written, in order, each once): see the module's docstring. ``extra``: more
    names that count whenever they stand as whole words (a system's label, a configured model)."""
    text = (text or "")[:MAX_CHARS].replace("’", "'")
    found: list[tuple[int, str]] = []
    for m in _PLAIN_RE.finditer(text):
        found.append((m.start(), m.group(0)))
    for m in _VERSIONED_RE.finditer(text):
        found.append((m.start(), m.group(0)))
    for m in _AMBIGUOUS_RE.finditer(text):
        if _PERSON_AFTER.match(text, m.end()):
            continue  # "Claude Chabrol", "Gemini Man": a person or a title
        before = text[max(0, m.start() - 40) : m.start()]
        if _INTRO_RE.search(before) or _AFTER_RE.match(text, m.end()):
            found.append((m.start(), m.group(0)))
    for m in _MAKER_RE.finditer(text):
        found.append((m.start(), m.group(0)))
    pattern = _extra_pattern(tuple(sorted({e for e in extra if e})))
    if pattern is not None:
        found += [(m.start(), m.group(0)) for m in pattern.finditer(text)]
    return list(dict.fromkeys(name for _, name in sorted(found)))


def reveals_name(text: str, extra: Iterable[str] = ()) -> bool:
    return bool(names_in(text, extra))


@functools.lru_cache(maxsize=64)
def _extra_pattern(names: tuple[str, ...]) -> re.Pattern[str] | None:
    if not names:
        return None
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(r"(?<![\w-])(?:" + alternatives + r")(?![\w-])", re.IGNORECASE)


def system_names(systems: dict[str, str], models: Iterable[str] = ()) -> tuple[str, ...]:
    """The extra names that reveal a side: each system's label (without a parenthesised note: "KBRD (small)" →
    "KBRD") and its id unless the id is one plain word, and each configured model's name (a path's last part, a
    file's stem; "embedded" and names under four characters are no names)."""
    out: set[str] = set()
    for system_id, label in systems.items():
        if not _WORDY_ID.fullmatch(system_id or ""):
            out.add(system_id)
        base = re.sub(r"\s*\(.*?\)\s*", " ", label or "").strip()
        if len(base) >= 4 and not _WORDY_ID.fullmatch(base):  # a lower-case word ("heat") could be anyone's word
            out.add(base)
    for model in models:
        name = PurePath(str(model or "").replace("\\", "/")).name
        name = re.sub(r"\.(?:gguf|bin|safetensors)$", "", name, flags=re.IGNORECASE)
        if len(name) >= 4 and name.lower() != "embedded" and not _WORDY_ID.fullmatch(name.lower()):
            out.add(name)
    return tuple(sorted(out))


def configured_names() -> tuple[str, ...]:
    """:func:`system_names` of the registered systems and the models in the settings (read now: the operator may
    add systems)."""
    from crs_backends import registry
    from llm_clients.config import all_role_configs

    systems = {system_id: label for system_id, (label, _factory) in registry.systems().items()}
    try:
        models = [c.model for c in all_role_configs()]
    except Exception:  # a settings error is reported where the models are used; here it only costs extra names
        models = []
    return system_names(systems, models)
