"""The probability reader: an answer's distribution over options, read *at the answer token*.

A judge that reasons before it rates writes numbers all over its answer ("3 of the 5 items…"), and an
endpoint's top-20 alternatives at early positions often hold a stray digit with a tiny probability.
Scanning the first positions for "any digit" therefore reads the wrong place. This module reads the
distribution where the answer actually is:

1. :func:`find_answer` locates the written answer: the content of the **last** ``<tag>…</tag>``
   when a tag is given (``<rating>2</rating>``), else the first option written as a stand-alone
   token after an optional prefix. It returns the option and its byte offset in the answer text.
2. :func:`read_logprobs` maps that offset onto the generated tokens (by their UTF-8 lengths, so a
   multi-byte character split over tokens does no harm) and reads the top alternatives of **the
   token that holds the answer** — for ``<rating>2</rating>`` the token after the tag, whatever
   the tokenizer did with the tag itself. Alternatives count for an option when, after the part of
   that token that comes before the answer, they spell the option and nothing that would extend it
   (so ``"1"`` counts for 1, ``"10"`` does not).
3. The option mass found there is checked: below ``min_mass`` (default :data:`MIN_MASS`) the
   alternatives do not describe the answer, and the written answer is used instead (method
   ``explicit``, all probability on it) with ``fallback`` saying why. The same happens when the
   endpoint returned no log-probabilities or the token cannot be found.

Every result records the method, the answer token's position, the option mass and the parsed answer
(:meth:`llm_clients.types.Distribution.record`), so a stored score says how it was read.

The embedded model reads the same place from its logits: the prompt plus the answer up to the
answer token, then the next-token distribution (:meth:`llm_clients.base.LLMClient.read_answer`).

This is G-Eval's reading (Liu et al. 2023, "probability-weighted scoring"), which CoRE's related work
credits to G-Eval; CoRE §4.1 itself parses the written rating. As in G-Eval, the probabilities are those of
the *rating* token, not of any digit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, overload

from llm_clients.types import Distribution

MIN_MASS = 0.5  # below this share of probability on the options at the answer token, trust the written answer
TOP_LOGPROBS = 20  # alternatives asked for per position (the OpenAI maximum)


def find_answer(
    text: str, options: Sequence[str], *, tag: str | None = None, prefix: str = ""
) -> tuple[str, int] | None:
    """(option, byte offset of the option in ``text``) of the written answer, or None.

    :param tag: the answer is the content of the last ``<tag>…</tag>`` (e.g. ``"rating"``); its
        stripped content must be one of ``options``
    :param prefix: without a tag, the answer is the first stand-alone option after the first
        ``prefix`` (when the text contains it), else after the start
    """
    if tag is not None:
        found = list(re.finditer(rf"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>", text, re.DOTALL))
        if not found:
            return None
        last = found[-1]
        value = last.group(1).strip()
        if value not in options:
            return None
        start = last.start(1) + (len(last.group(1)) - len(last.group(1).lstrip()))
        return value, len(text[:start].encode("utf-8"))
    begin = 0
    if prefix and prefix in text:
        begin = text.index(prefix) + len(prefix)
    alternatives = "|".join(re.escape(o) for o in sorted(options, key=len, reverse=True))
    match = re.compile(rf"(?<![\w.])({alternatives})(?![\w]|\.\d)").search(text, begin)
    if match is None:
        return None
    return match.group(1), len(text[: match.start(1)].encode("utf-8"))


def explicit(
    option: str, options: Sequence[str], reason: str, *, mass: float = 0.0, position: int | None = None
) -> Distribution:
    """The written answer alone (all probability on it), with the reason the probabilities were not used."""
    return Distribution(
        probs={o: float(o == option) for o in options},
        method="explicit",
        mass=mass,
        parsed=option,
        position=position,
        fallback=reason,
    )


def read_logprobs(
    logprobs: list[dict[str, Any]] | None,
    text: str,
    option: str,
    offset: int,
    options: Sequence[str],
    *,
    min_mass: float | None = MIN_MASS,
) -> Distribution:
    """The options' distribution at the token holding the answer written at byte ``offset``.

    :param logprobs: the completion's tokens (:attr:`llm_clients.types.Completion.logprobs`)
    :param option: the parsed answer (what :func:`find_answer` returned)
    :returns: a ``logprobs`` distribution, or an ``explicit`` one with ``fallback`` set
    """
    if not logprobs:
        return explicit(option, options, "the endpoint returned no log-probabilities")
    position, start = _token_at(logprobs, offset)
    if position is None:
        return explicit(option, options, "the answer token was not found among the returned tokens")
    entry = logprobs[position]
    head = _head(entry["token"], offset - start)
    mass = dict.fromkeys(options, 0.0)
    seen_sampled = False
    for token, logprob in entry.get("top") or []:
        seen_sampled |= token == entry["token"]
        matched = _option_of(token, head, options)
        if matched is not None:
            mass[matched] += math.exp(logprob)
    if not seen_sampled:  # an endpoint may leave the sampled token out of its top list
        matched = _option_of(entry["token"], head, options)
        if matched is not None:
            mass[matched] += math.exp(entry["logprob"])
    total = sum(mass.values())
    if min_mass is not None and total < min_mass:
        return explicit(
            option,
            options,
            f"only {total:.3f} of the probability at the answer token is on the options (threshold {min_mass:g})",
            mass=total,
            position=position,
        )
    if total <= 0:
        return explicit(option, options, "no option among the answer token's alternatives", position=position)
    return Distribution(
        probs={o: m / total for o, m in mass.items()},
        method="logprobs",
        mass=min(1.0, total),
        parsed=option,
        position=position,
    )


@overload
def check_mass(dist: Distribution, option: str, options: Sequence[str], min_mass: float | None) -> Distribution: ...
@overload
def check_mass(
    dist: Distribution, option: str | None, options: Sequence[str], min_mass: float | None
) -> Distribution | None: ...
def check_mass(
    dist: Distribution, option: str | None, options: Sequence[str], min_mass: float | None
) -> Distribution | None:
    """``dist`` with ``parsed`` set, or the explicit answer when its mass is below ``min_mass``.

    None when the mass is too low and there is no written answer to fall back on.
    """
    dist.parsed = option if option is not None else dist.parsed
    if min_mass is None or dist.mass >= min_mass:
        return dist
    if dist.parsed is None:
        return None
    return explicit(
        dist.parsed,
        options,
        f"only {dist.mass:.3f} of the probability at the answer token is on the options (threshold {min_mass:g})",
        mass=dist.mass,
        position=dist.position,
    )


def logprobs_from_openai(content) -> list[dict[str, Any]] | None:
    """The ``choices[i].logprobs.content`` of an OpenAI response as plain data (see ``Completion.logprobs``)."""
    if not content:
        return None
    out = []
    for position in content:
        raw = getattr(position, "bytes", None)
        out.append(
            {
                "token": position.token,
                "bytes": len(raw) if raw is not None else len(position.token.encode("utf-8")),
                "logprob": float(position.logprob),
                "top": [[top.token, float(top.logprob)] for top in (getattr(position, "top_logprobs", None) or [])],
            }
        )
    return out


def _token_at(logprobs: list[dict[str, Any]], offset: int) -> tuple[int | None, int]:
    """Index and start byte of the token that covers byte ``offset`` of the answer."""
    start = 0
    for index, entry in enumerate(logprobs):
        length = int(entry.get("bytes") or len(entry["token"].encode("utf-8")))
        if start <= offset < start + length:
            return index, start
        start += length
    return None, start


def _head(token: str, inside: int) -> str:
    """The part of ``token`` before the answer (``inside`` bytes into the token)."""
    return token.encode("utf-8")[:inside].decode("utf-8", "ignore")


def _option_of(token: str, head: str, options: Sequence[str]) -> str | None:
    """The option an alternative token spells after ``head``, if it spells exactly one."""
    if not token.startswith(head):
        return None
    rest = token[len(head) :].lstrip()
    for option in sorted(options, key=len, reverse=True):
        if rest.startswith(option):
            after = rest[len(option) :]
            if not after or not (after[0].isalnum() or re.match(r"\.\d", after)):
                return option
    return None
