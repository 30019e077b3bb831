"""Item catalogs: the bundled movies, iEvaLM-layout datasets, title matching, knowledge graphs."""

from catalog.catalog import Catalog, data_dir, get_catalog, load_bundled, load_ievalm
from catalog.items import Item, split_name
from catalog.matcher import TitleMatcher, normalize_title
from catalog.mentions import Mention, find_mentions

__all__ = [
    "Catalog",
    "Item",
    "Mention",
    "TitleMatcher",
    "data_dir",
    "find_mentions",
    "get_catalog",
    "load_bundled",
    "load_ievalm",
    "normalize_title",
    "split_name",
]
