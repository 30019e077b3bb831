"""The catalog's item model."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from storage.records import ItemRef

_YEAR_SUFFIX = re.compile(r"\s*\((\d{4})\)\s*$")


@dataclass(frozen=True)
class Item:
    """A recommendable item (a movie in the bundled catalog).

    ``title`` is the bare title; :attr:`name` is "Title (Year)", the form the
    iEvaLM / ReDial data uses as its join key.
    """

    id: str
    title: str
    year: int | None = None
    genres: tuple[str, ...] = ()
    directors: tuple[str, ...] = ()
    cast: tuple[str, ...] = ()
    writers: tuple[str, ...] = ()
    description: str = ""
    popularity: int | None = None  # rank: 1 = best known
    extra: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def name(self) -> str:
        return f"{self.title} ({self.year})" if self.year else self.title

    @property
    def decade(self) -> str | None:
        return f"{self.year // 10 * 10}s" if self.year else None

    def ref(self) -> ItemRef:
        return ItemRef(id=self.id, title=self.name)

    def features(self) -> dict[str, tuple[str, ...]]:
        """Metadata dimensions used for diversity and knowledge-graph building."""
        return {
            "genre": self.genres,
            "director": self.directors,
            "star": self.cast,
            "writer": self.writers,
            "decade": (self.decade,) if self.decade else (),
        }

    def document(self) -> str:
        """Text used for retrieval over the catalog."""
        parts = [
            self.name,
            " ".join(self.genres),
            " ".join(self.directors),
            " ".join(self.cast),
            self.description,
        ]
        return " . ".join(p for p in parts if p)


def split_name(name: str) -> tuple[str, int | None]:
    """ "Title (1999)" → ("Title", 1999); a name without a year keeps None."""
    match = _YEAR_SUFFIX.search(name)
    if not match:
        return name.strip(), None
    return name[: match.start()].strip(), int(match.group(1))
