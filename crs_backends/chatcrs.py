"""ChatCRS: a language model prompted as a movie recommender, grounded in the catalog.

The model sees the conversation and a short list of catalog candidates that fit
the user's words (retrieval over item descriptions). Its reply is then read for
titles: the ones that match catalog items lead the turn's ranked list, the list
is topped up by retrieval, and titles that match nothing are recorded on the
turn (``metadata["unmatched_titles"]``) instead of being listed. An item that is
not in the catalog never appears in the list.
"""

from __future__ import annotations

import time
from typing import Iterator

from catalog.catalog import Catalog
from catalog.items import Item
from crs_backends.base import DEFAULT_LIST_SIZE, CRSSystem, SystemInfo
from crs_backends.user_context import UserContext, user_context
from llm.base import LLMClient
from llm.prompts import prompt, prompts_version
from llm.types import Completion
from storage.records import Conversation, Turn

N_CANDIDATES = 8
MAX_REPLY_TOKENS = 160
HISTORY_TURNS = 12  # the most recent turns shown to the model


class ChatCRS(CRSSystem):
    def __init__(
        self,
        client: LLMClient,
        catalog: Catalog,
        *,
        list_size: int = DEFAULT_LIST_SIZE,
        n_candidates: int = N_CANDIDATES,
        temperature: float = 0.7,
    ):
        self.client = client
        self.catalog = catalog
        self.list_size = list_size
        self.n_candidates = n_candidates
        self.temperature = temperature

    @property
    def info(self) -> SystemInfo:
        return SystemInfo(
            id="chatcrs",
            label="ChatCRS",
            variant=self.client.describe(),
            demo=self.client.is_demo,
        )

    def warm_up(self) -> None:
        """Build the catalog indexes now rather than during the first reply."""
        self.catalog.retriever, self.catalog.matcher  # noqa: B018 (cached properties)

    # -- what the model sees ---------------------------------------------

    def candidates(self, context: UserContext) -> list[Item]:
        """Catalog items that fit what the user said, none of the user's own titles."""
        return self.catalog.search(context.query, self.n_candidates, exclude=context.title_ids)

    def messages(self, conversation: Conversation, candidates: list[Item]) -> list[dict]:
        lines = "\n".join(
            f"- {i.name}: {', '.join(i.genres[:3])}. {i.description}" for i in candidates
        )
        system = prompt("chatcrs", "system") + "\n\n" + prompt("chatcrs", "candidates").format(candidates=lines)
        messages = [{"role": "system", "content": system}]
        for turn in conversation.all_turns[-HISTORY_TURNS:]:
            messages.append({"role": "user" if turn.role == "user" else "assistant", "content": turn.text})
        return messages

    # -- answering ---------------------------------------------------------

    def respond(self, conversation: Conversation) -> Turn:
        turn = None
        for piece in self.stream(conversation):
            if isinstance(piece, Turn):
                turn = piece
        assert turn is not None
        return turn

    def stream(self, conversation: Conversation) -> Iterator[str | Turn]:
        start = time.perf_counter()
        context = user_context(conversation, self.catalog)
        candidates = self.candidates(context)
        completion: Completion | None = None
        for piece in self.client.stream(
            self.messages(conversation, candidates),
            temperature=self.temperature,
            max_tokens=MAX_REPLY_TOKENS,
            seed=len(conversation.turns),
        ):
            if isinstance(piece, Completion):
                completion = piece
            else:
                yield piece
        assert completion is not None
        yield self.build_turn(context, completion, candidates, int((time.perf_counter() - start) * 1000))

    def build_turn(self, context: UserContext, completion: Completion, candidates: list[Item], latency_ms: int) -> Turn:
        """Ground the reply: mentioned catalog titles first, then retrieval, never unknown items."""
        seen = context.title_ids
        mentions = self.catalog.mentions(completion.text)
        ranked: list[Item] = []
        for m in mentions:
            if m.item is not None and m.item.id not in seen and m.item not in ranked:
                ranked.append(m.item)
        for item in candidates:
            if len(ranked) >= self.list_size:
                break
            if item not in ranked:
                ranked.append(item)
        if len(ranked) < self.list_size:
            exclude = seen | {i.id for i in ranked}
            ranked += self.catalog.search(context.query, self.list_size - len(ranked), exclude=exclude)
        text = completion.text.strip()
        if not text:  # small models sometimes stop at once: say what the list holds
            text = "You might like " + ", ".join(i.name for i in ranked[:3]) + "."
        return Turn(
            role="system",
            text=text,
            items=[i.ref() for i in ranked[: self.list_size]],
            metadata={
                "system": "chatcrs",
                "model": completion.model,
                "mentioned": [m.item.name for m in mentions if m.item is not None],
                "unmatched_titles": [m.text for m in mentions if m.item is None],
                "latency_ms": latency_ms,
                "prompt_tokens": completion.usage.prompt_tokens,
                "completion_tokens": completion.usage.completion_tokens,
                "cache_hit": completion.cache_hit,
                "empty_reply": not completion.text.strip(),
                "prompts_version": prompts_version("chatcrs"),
                "catalog": self.catalog.name,
            },
        )
