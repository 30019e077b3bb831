"""A plug-in system for CRS Arena: recommends the catalog's movies of the genres the user names."""

from __future__ import annotations

from crs_backends.base import CRSSystem, SystemInfo
from storage.records import Conversation, ItemRef, Turn


class ToyCRS(CRSSystem):
    """Built as ``ToyCRS(catalog, **options)``; ``options`` come from the systems file's [system.options]."""

    def __init__(self, catalog, *, greeting: str = "Hello", invent: bool = False):
        self.catalog = catalog
        self.greeting = greeting
        self.invent = invent  # also name a movie the catalog does not have (it must be left out)

    @property
    def info(self) -> SystemInfo:
        return SystemInfo(id="toy", label="Toy", variant="genre lookup")

    def respond(self, conversation: Conversation) -> Turn:
        said = " ".join(t.text.lower() for t in conversation.all_turns if t.role == "user")
        genres = {g for i in self.catalog.items for g in i.genres if g.lower() in said}
        # never a title it showed before (one the user turned down included): the checker's rejection rule passes
        shown = {i.id for t in conversation.all_turns if t.role == "system" for i in t.items}
        fresh = [i for i in self.catalog.items if i.id not in shown]
        chosen = [i for i in fresh if genres & set(i.genres)] or [
            i for i in self.catalog.popular(10 + len(shown)) if i.id not in shown
        ]
        items = [i.ref() for i in chosen[:10]]
        if self.invent:
            items.insert(0, ItemRef(id="nope", title="A Film Nobody Made (1931)"))
        return Turn(
            "system", f"{self.greeting}! Try {chosen[0].name}.", items=items, metadata={"genres": sorted(genres)}
        )


class BrokenCRS(ToyCRS):
    def respond(self, conversation: Conversation) -> Turn:
        raise RuntimeError("secret internal detail /srv/model.bin")
