"""Turning stored records into what Gradio components display, safely.

Model and user text is escaped before it reaches a component that renders
Markdown/HTML, so "<script>" shows as text and never runs.
"""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING

import pandas as pd

from evaluators.meta.recorded import EMBEDDED_JUDGE_OVERALL

if TYPE_CHECKING:  # types only: rendering needs no catalog, model or database code at run time
    from catalog.catalog import Catalog
    from llm_clients.config import RoleConfig
    from storage.records import Conversation

ITEM_COLUMNS = ["turn", "rank", "title", "year", "genres"]


def safe_text(text: str) -> str:
    """Escape HTML so Markdown renderers show the text literally."""
    return html.escape(text or "", quote=False)


_CODE = re.compile(r"(?s)(```.*?(?:```|$)|(`+)(?!`).+?(?<!`)\2(?!`))")


def safe_markdown(text: str) -> str:
    """Model or user text for a Markdown component (a Chatbot with ``allow_tags=False``), shown as
    written: HTML is escaped outside code, and code spans and fences are left alone, because Markdown
    shows code literally (escaping it there would show ``&lt;discussion&gt;`` instead of ``<discussion>``).
    Nothing in the text can become a tag, a link or an image either way."""
    text = text or ""
    out, last = [], 0
    for m in _CODE.finditer(text):
        out.append(_plain(text[last : m.start()]))
        out.append(m.group(0))
        last = m.end()
    out.append(_plain(text[last:]))
    return "".join(out)


_LINK_PARTS = (("![", "!\\["), ("](", "\\]("), ("][", "\\]\\["), ("]:", "\\]:"))


def _plain(text: str) -> str:
    """Outside code: HTML escaped, and the joints of link and image syntax (``![``, ``](``, ``][``, ``]:``)
    escaped so no link or image forms; a lone ``[name hidden]`` stays as written."""
    text = safe_text(text)
    for joint, escaped in _LINK_PARTS:
        text = text.replace(joint, escaped)
    return text


EMPTY_REPLY = "*(empty reply: the model generated nothing)*"


def reply_markdown(turn) -> str:
    """A system turn's text for the chat, escaped; an empty reply (the published checkpoints under the
    ``crs_arena_exact`` policy keep it empty, as CRS Arena did) is said to be one rather than shown as a blank."""
    return safe_markdown(turn.text) if (turn.text or "").strip() else EMPTY_REPLY


def chat_messages(
    conversation: Conversation | None, pending: str | None = None, turn_scores: dict[int, dict] | None = None
) -> list[dict]:
    """A conversation as Gradio 6 chat messages; ``pending`` is a reply being streamed; ``turn_scores`` (by turn
    index, :func:`storage.evaluations.latest_turn_scores`) adds each scored reply's line (:func:`turn_score_line`)."""
    messages = []
    if conversation is not None:
        for k, turn in enumerate(conversation.turns):
            role = "user" if turn.role == "user" else "assistant"
            content = safe_markdown(turn.text) if role == "user" else reply_markdown(turn)
            if role == "assistant" and understood_line(turn.metadata):
                content += "\n\n" + understood_line(turn.metadata)
            if role == "assistant" and turn_scores and k in turn_scores:
                content += "\n\n" + turn_score_line(turn_scores[k])
            messages.append({"role": role, "content": content})
    if pending is not None:
        messages.append({"role": "assistant", "content": safe_markdown(pending) or "…"})
    return messages


def understood_line(metadata: dict | None) -> str:
    """What the system understood of the request, small, under its reply (``metadata["understood"]``, recorded by
    ChatCRS and the retrieval baseline): ``*understood: comedy · 1990s · not horror*``; "" for other systems."""
    understood = (metadata or {}).get("understood")
    summary = understood.get("summary") if isinstance(understood, dict) else None
    if not isinstance(summary, str) or not summary.strip():
        return ""
    summary = re.sub(r"[*_`~\\]", " ", summary)  # names and phrases come from the person: no emphasis breaks out
    return f"*understood: {_plain(' '.join(summary.split()))}*"


def turn_score_line(score: dict) -> str:
    """One reply's turn scores, small: ``*judge: relevance 1.2/2 · interest 0.8/2*`` (or why it has none)."""
    relevance, interest = score.get("relevance"), score.get("interestingness")
    note = safe_text(str(score.get("note") or ""))
    if not isinstance(relevance, (int, float)) or not isinstance(interest, (int, float)):
        return f"*turn scores: {note or 'not scorable'}*"
    line = f"*turn scores: relevance {relevance:.1f}/2 · interest {interest:.1f}/2"
    return line + (f" ({note})*" if note else "*")


def items_table(conversation: Conversation | None, catalog: Catalog) -> pd.DataFrame:
    """Every system turn's ranked items, newest turn first."""
    rows = []
    if conversation is not None:
        system_turns = [t for t in conversation.turns if t.role == "system"]
        for n, turn in reversed(list(enumerate(system_turns, 1))):
            for rank, ref in enumerate(turn.items, 1):
                item = catalog.get(ref.id)
                rows.append(
                    {
                        "turn": n,
                        "rank": rank,
                        "title": item.title if item else ref.title,
                        "year": str(item.year) if item and item.year else "",
                        "genres": ", ".join(item.genres) if item else "",
                    }
                )
    return pd.DataFrame(rows, columns=ITEM_COLUMNS)


def roles_notice(configs: list[RoleConfig]) -> str:
    """Which model serves each role (roles on the same model share a line), and a plain
    warning when the 135M demo model is in use."""
    groups: dict[str, list[str]] = {}
    for c in configs:
        if c.is_embedded:
            name = "SmolLM2-135M-Instruct" if not c.gguf_path else c.gguf_path.rsplit("/", 1)[-1]
            where = f"{safe_text(name)} (embedded, in-process)"
        else:
            where = f"{safe_text(c.model)} at {safe_text(c.public()['endpoint'])}"
        groups.setdefault(where, []).append(c.role)
    if len(groups) == 1:
        text = f"Model for every role: {next(iter(groups))}"
    else:
        text = "Models by role: " + " · ".join(f"**{', '.join(roles)}**: {where}" for where, roles in groups.items())
    if any(c.is_embedded and not c.gguf_path for c in configs):
        text += (
            "\n\n⚠️ Roles on the embedded model run **SmolLM2-135M**, a 135-million-parameter demo model: "
            f"its answers are weak and its scores are not meaningful ({EMBEDDED_JUDGE_OVERALL.sentence()}). "
            "Set `CRS_LLM_MODEL` with `CRS_LLM_BASE_URL` or `OPENAI_API_KEY` to use a capable model."
        )
    return text
