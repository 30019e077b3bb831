"""ReDial conversations in their raw format (``movieMentions``, ``messages`` with ``@<id>`` mentions), as
iEvaLM :class:`~catalog.ievalm_records.Record` s.

ReDial's own files (and the slices of its train file in ``redial_train_partial/``) keep each conversation
whole: a seeker (``initiatorWorkerId``) talks with a recommender (``respondentWorkerId``), and a film is
written ``@<ReDial movie id>``, an id of ``redial/id2info.json``. :func:`records_from_conversation` makes one
record per recommender message, the way iEvaLM's processed files do: the context is every earlier message
(consecutive messages of one speaker joined, the seeker first; ``''`` where the recommender opened), each
``@id`` written as the film's name ("The Shining (1980)"); ``rec`` holds the films the message mentions;
``entity`` the films the context names. Ids that ``id2info`` lacks keep ReDial's own spelling of the title.
With ``seeker_turns``, the seeker's messages that name a film and follow some context are records too (``resp`` the
seeker's message, ``rec`` the films it names): UniCRS learns to recommend from every turn of a conversation
(RUCAIBox/UniCRS ``src/data/redial/process.py`` writes a record per turn of either speaker, and ``dataset_rec.py``
keeps those with a target).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

from catalog.ievalm_records import Record, RecordError

_MENTION = re.compile(r"@(\d+)")


def _clean_name(name: str) -> str:
    return " ".join(str(name).split())


def _text(message: str, names: dict[str, str]) -> str:
    return " ".join(_MENTION.sub(lambda m: names.get(m.group(1), m.group(0)), message or "").split())


def records_from_conversation(
    conversation: dict, id2info: dict[str, dict], *, seeker_turns: bool = False
) -> list[Record]:
    """The recommender's turns of one raw ReDial conversation, as records; with ``seeker_turns``, the seeker's turns
    that name a film after some context, in the order of the conversation (see the module's docstring)."""
    mentions = conversation.get("movieMentions") or {}
    if isinstance(mentions, list):  # some copies keep [[id, name], …]
        mentions = {str(k): v for k, v in mentions}
    names = {str(k): _clean_name(v) for k, v in mentions.items() if v}
    for m in conversation.get("messages") or []:  # id2info's spelling wins: it is the KG's entity name
        for i in _MENTION.findall(str(m.get("text") or "") if isinstance(m, dict) else ""):
            if i in id2info and id2info[i].get("name"):
                names[i] = _clean_name(id2info[i]["name"])
    seeker = conversation.get("initiatorWorkerId")
    messages = [m for m in conversation.get("messages") or [] if isinstance(m, dict)]
    turns: list[tuple[str, str, list[str]]] = []  # (role, text, films it mentions)
    for m in messages:
        role = "user" if m.get("senderWorkerId") == seeker else "system"
        raw = str(m.get("text") or "")
        films = [names[i] for i in _MENTION.findall(raw) if i in names]
        text = _text(raw, names)
        if turns and turns[-1][0] == role:
            prev = turns[-1]
            turns[-1] = (role, f"{prev[1]} {text}".strip(), prev[2] + films)
        else:
            turns.append((role, text, films))
    records: list[Record] = []
    context: list[str] = []
    named: list[str] = []
    conv_id = str(conversation.get("conversationId", ""))
    for n, (role, text, films) in enumerate(turns):
        seeker_record = seeker_turns and role == "user" and bool(films) and any(context)
        if role == "system" or seeker_record:
            if not context:
                context.append("")
            records.append(
                Record(
                    context=list(context),
                    entity=list(dict.fromkeys(named)),
                    rec=list(dict.fromkeys(films)),
                    resp=text,
                    dialog_id=conv_id,
                    turn_id=n,
                )
            )
        context.append(text)
        named += films
    return records


def is_seeker_turn(record: Record) -> bool:
    """Whether a record of this layout is the seeker's turn: its context alternates from the seeker's first message
    (``''`` where the recommender opened), so the seeker speaks next after an even number of utterances."""
    return len(record.context) % 2 == 0


def read_raw_conversations(
    path: str | os.PathLike, id2info: dict[str, dict], *, seeker_turns: bool = False
) -> Iterator[Record]:
    """Every recommender turn of every conversation in a raw ReDial ``.jsonl`` file (and, with ``seeker_turns``,
    the seeker's turns that name a film: :func:`records_from_conversation`)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise RecordError(f"cannot read {path}: {e}") from e
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            conversation = json.loads(line)
        except ValueError as e:
            raise RecordError(f"{path}:{number}: not JSON ({e})") from e
        if not isinstance(conversation, dict) or "messages" not in conversation:
            raise RecordError(f"{path}:{number}: not a ReDial conversation (no 'messages')")
        yield from records_from_conversation(conversation, id2info, seeker_turns=seeker_turns)
