"""What the user has said so far, as both catalog-grounded systems read it."""

from __future__ import annotations

from dataclasses import dataclass

from catalog.catalog import Catalog
from catalog.items import Item
from storage.records import Conversation


@dataclass(frozen=True)
class UserContext:
    texts: tuple[str, ...]  # the user's turns, history included
    titles: tuple[Item, ...]  # catalog items the user named (seen or liked: never recommended back)

    @property
    def title_ids(self) -> set[str]:
        return {i.id for i in self.titles}

    @property
    def query(self) -> str:
        """Retrieval query: the user's turns, the latest twice (it matters most), and what their titles are about."""
        if not self.texts:
            return ""
        about = " ".join(" ".join((*i.genres, *i.directors)) for i in self.titles)
        return " ".join([*self.texts, self.texts[-1], about])


def user_context(conversation: Conversation, catalog: Catalog) -> UserContext:
    """Read the user's turns once: their text and the catalog items they mention, in order."""
    texts = tuple(t.text for t in conversation.all_turns if t.role == "user")
    titles: dict[str, Item] = {}
    for text in texts:
        for m in catalog.mentions(text):
            if m.item is not None:
                titles.setdefault(m.item.id, m.item)
    return UserContext(texts, tuple(titles.values()))
