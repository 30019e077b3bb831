"""Reading a request with a real model: one structured call, validated, in the rules reader's state.

ChatCRS with a capable endpoint asks its model once per turn for the conversation's request as one JSON object
(the keys of :class:`~crs_backends.request_state.RequestState`; the prompt is ``assets/prompts/request_reader.toml``).
The answer is validated (:class:`ModelReading`) and grounded in the catalog: genres must be the catalog's, titles
are matched to catalog items (a title that matches none is dropped), people are catalog names where the catalog
knows them and kept as written otherwise. When the answer is not valid JSON or does not fit the schema, the rules
reader's state is used instead and its ``note`` says so. Either way the same ranking code reads the state.
An endpoint failure (:class:`~llm_clients.types.LLMError`) is raised, as for any ChatCRS turn.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from catalog.catalog import Catalog
from catalog.items import Item
from crs_backends import request_words as w
from crs_backends.request_reader import named_in, read_request
from crs_backends.request_state import RequestState
from crs_backends.request_vocabulary import fold, vocabulary
from llm_clients.base import LLMClient
from llm_clients.prompts import prompt, prompts_version
from storage.records import Conversation

TRANSCRIPT_TURNS = 12  # the most recent turns the model reads
MAX_READING_TOKENS = 400
MAX_NAMES = 12  # per list: more is no reading of one conversation

Act = Literal["recommend", "ask_about", "accept", "reject", "goodbye", "none"]
Aspect = Literal["director", "cast", "writer", "year", "genre", "plot", "why", "more"]


class ModelReading(BaseModel):
    """The model's answer, as the prompt asks for it. Unknown keys are ignored; a wrong type or act is an error."""

    model_config = ConfigDict(extra="ignore")

    genres: list[str] = Field(default_factory=list)
    not_genres: list[str] = Field(default_factory=list)
    people: list[str] = Field(default_factory=list)
    not_people: list[str] = Field(default_factory=list)
    liked: list[str] = Field(default_factory=list)
    disliked: list[str] = Field(default_factory=list)
    seen: list[str] = Field(default_factory=list)
    min_year: int | None = None
    max_year: int | None = None
    act: Act = "none"
    about: Aspect | None = None
    subject: str | None = None

    @field_validator("genres", "not_genres", "people", "not_people", "liked", "disliked", "seen", mode="before")
    @classmethod
    def _null_is_empty(cls, value: Any) -> Any:
        return [] if value is None else value

    @field_validator("min_year", "max_year")
    @classmethod
    def _a_film_year(cls, year: int | None) -> int | None:
        if year is not None and not 1870 <= year <= 2100:
            raise ValueError(f"{year} is no year of a film")
        return year


def reading_messages(conversation: Conversation, catalog: Catalog) -> list[dict]:
    """The structured call's messages: the instructions (with the catalog's genres) and the transcript."""
    genres = sorted({g for item in catalog.items for g in item.genres})
    newest = vocabulary(catalog).newest
    recent = str(newest - w.RECENT_YEARS) if newest else "the last ten years"
    system = prompt("request_reader", "system").replace("{genres}", ", ".join(genres)).replace("{recent}", recent)
    lines = []
    for turn in conversation.all_turns[-TRANSCRIPT_TURNS:]:
        who = "Person" if turn.role == "user" else "Recommender"
        lines.append(f"{who}: {' '.join((turn.text or '').split())}")
    user = prompt("request_reader", "transcript").replace("{transcript}", "\n".join(lines))
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def read_with_model(client: LLMClient, conversation: Conversation, catalog: Catalog) -> RequestState:
    """The conversation's request as the model reads it; the rules' reading when its answer is not valid."""
    rules = read_request(conversation, catalog)
    completion = client.chat(
        reading_messages(conversation, catalog),
        temperature=0.0,
        max_tokens=MAX_READING_TOKENS,
        seed=0,
        json_mode=True,
    )
    try:
        reading = ModelReading.model_validate(parse_object(completion.text))
    except (ValueError, ValidationError) as e:
        why = "not JSON" if isinstance(e, json.JSONDecodeError) or "no JSON object" in str(e) else "not the schema"
        return replace(rules, note=f"read by rules: the model's reading was {why}")
    return grounded(reading, conversation, catalog, rules)


def parse_object(text: str) -> dict[str, Any]:
    """The JSON object in a model's answer (a code fence around it is allowed)."""
    text = (text or "").strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, re.DOTALL)
    if fenced:
        text = fenced.group(1)
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("no JSON object")
    return data


def grounded(reading: ModelReading, conversation: Conversation, catalog: Catalog, rules: RequestState) -> RequestState:
    """The model's reading in the catalog's terms (see the module docstring); search words come from the rules."""
    vocab = vocabulary(catalog)

    def genres(names: list[str]) -> tuple[str, ...]:
        out: list[str] = []
        for name in names[:MAX_NAMES]:
            key = " ".join(str(name).lower().split())
            said = (key,) if key in vocab.genres else tuple(g.lower() for g in w.GENRE_WORDS.get(key, ()))
            out += [vocab.genres[g] for g in said if g in vocab.genres and vocab.genres[g] not in out]
        return tuple(out)

    def people(names: list[str]) -> tuple[str, ...]:
        out: list[str] = []
        for name in names[:MAX_NAMES]:
            written = " ".join(str(name).split())[:60]
            if not written:
                continue
            key = fold(written)
            known = vocab.full.get(key) or vocab.surname.get(key.split()[-1] if len(key.split()) == 1 else "")
            if (known or written) not in out:
                out.append(known or written)
        return tuple(out)

    def titles(names: list[str]) -> tuple[Item, ...]:
        found = [catalog.match_name(str(n)) for n in names[:MAX_NAMES] if str(n).strip()]
        return tuple(dict.fromkeys(i for i in found if i is not None))

    subject = None
    if reading.act == "ask_about":
        subject = catalog.match_name(reading.subject) if reading.subject else None
        if subject is None:
            last_system = [named_in(t, catalog) for t in conversation.all_turns if t.role == "system"]
            named = next((n for n in reversed(last_system) if n), ())
            subject = named[0] if named else None
    lo, hi = reading.min_year, reading.max_year
    if lo is not None and hi is not None and lo > hi:
        lo, hi = hi, lo
    liked, disliked, seen = titles(reading.liked), titles(reading.disliked), titles(reading.seen)
    taken = {i.id for i in (*liked, *disliked, *seen)}
    return RequestState(
        genres=genres(reading.genres),
        not_genres=genres(reading.not_genres),
        people=people(reading.people),
        not_people=people(reading.not_people),
        liked=liked,
        disliked=disliked,
        seen=seen,
        mentioned=tuple(i for i in rules.mentioned if i.id not in taken),
        min_year=lo,
        max_year=hi,
        act=reading.act,
        about=reading.about if reading.act == "ask_about" else None,
        subject=subject,
        terms=rules.terms,
        read_by="model",
        note="",
    )


def reader_version() -> str:
    return prompts_version("request_reader")
