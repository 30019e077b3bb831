"""What the user has said so far, as both catalog-grounded systems read it."""

from __future__ import annotations

from dataclasses import dataclass, field

from catalog.catalog import Catalog
from catalog.items import Item
from crs_backends.preferences import Dislikes, is_goodbye, read_dislikes, without_dislikes
from storage.records import Conversation


@dataclass(frozen=True)
class UserContext:
    texts: tuple[str, ...]  # the user's turns, history included
    titles: tuple[Item, ...]  # catalog items the user named (seen or liked: never recommended back)
    dislikes: Dislikes = field(default_factory=Dislikes)  # what they said they do not want
    leaving: bool = False  # the latest message only thanks or takes leave

    @property
    def title_ids(self) -> set[str]:
        """Never recommended: the user's own titles and the titles they said they dislike."""
        return {i.id for i in self.titles} | set(self.dislikes.items)

    @property
    def wanted_texts(self) -> tuple[str, ...]:
        """The user's turns without their dislike clauses: what a search for what they want reads."""
        return tuple(without_dislikes(t) for t in self.texts)

    @property
    def query(self) -> str:
        """Retrieval query: the user's turns (dislikes left out), the latest twice (it matters most), and what their
        titles are about."""
        if not self.texts:
            return ""
        wanted = self.wanted_texts
        return " ".join([*wanted, wanted[-1], self.titles_about])

    @property
    def titles_about(self) -> str:
        """The genres and directors of the user's own titles, as search words."""
        return " ".join(" ".join((*i.genres, *i.directors)) for i in self.titles)

    def allows(self, item: Item) -> bool:
        return item.id not in self.title_ids and not self.dislikes.excludes(item)


def user_context(conversation: Conversation, catalog: Catalog) -> UserContext:
    """Read the user's turns once: their text, the catalog items they mention (outside a dislike), what they
    dislike, and whether they are leaving."""
    texts = tuple(t.text for t in conversation.all_turns if t.role == "user")
    dislikes = read_dislikes(texts, catalog)
    titles: dict[str, Item] = {}
    for text in texts:
        for m in catalog.mentions(without_dislikes(text)):
            if m.item is not None and m.item.id not in dislikes.items:
                titles.setdefault(m.item.id, m.item)
    leaving = bool(texts) and is_goodbye(texts[-1])
    return UserContext(texts, tuple(titles.values()), dislikes, leaving)
