"""KBRD, BARCOR and UniCRS behind the common interface: a :class:`NeuralCRS` wraps any loaded
:class:`~crs_backends.neural.engine.NeuralModel`, its knowledge graph and the catalog its ranking is named in.

Three reply policies (:mod:`crs_backends.neural.policy`):

- ``crs_arena_exact`` (default for the published checkpoints): as CRS Arena served these systems, the input
  quirks of its serving code included (:meth:`NeuralCRS.exact_input`, the model files' ``served`` inputs).
- ``crs_arena`` (its clean variant; default for the small local versions): the same policy with each message given
  once (every message in order, whitespace collapsed, ``''`` first when the system spoke first; entities fuzzy-
  linked per message, rapidfuzz WRatio >= 90). In both, the model generates, chooses an option by its letter scores
  plus the conversation's option state (kept on each turn's ``metadata["choice"]``), and either lists the top 3 of
  its ranking over its dataset's item set ("I would recommend the following items: …") or answers with the generated
  text. ``Turn.items`` are the items the reply names; the whole top 50 is the turn's ``ranking``. The small local
  versions (ours, trained on annotated entities) also link catalog titles, genres and people
  (:mod:`crs_backends.neural.mentions`); the published sets link exactly as ``crs_fighter``.
- ``enhanced`` (ours): the conversation with same-side turns joined and exact catalog mentions added to the
  entities; the ranking mapped to the chat catalog (items the user mentioned skipped), a top-10 list every
  turn, and the reply's movie slots filled by those items with no empty slot left (:func:`repair_text`).

The small local versions answer through the same code as the published sets: nothing of ours sits between their
model and the person but the policy (no input edited, no ranking reordered, no text rewritten); their movie slot
(``<movie>``) is filled with the ranking as the ``crs_arena`` variant fills every model's. Every turn records the
policy that answered (``metadata["policy"]``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import time
from functools import lru_cache
from pathlib import Path

import torch

from catalog.catalog import Catalog, get_catalog
from catalog.items import Item
from crs_backends.base import DEFAULT_LIST_SIZE, CRSSystem, SystemInfo
from crs_backends.neural import policy
from crs_backends.neural.engine import MOVIE_SLOT, TOP_K, ConvInput, NeuralModel
from crs_backends.neural.kg_reader import KGData, load_kg
from crs_backends.neural.mentions import AttributeLinker
from crs_backends.neural.mixed_precision import prepared_forward
from crs_backends.neural.names import LABELS, SourceError, model_class
from crs_backends.neural.policy import EXACT, check_policy, default_policy
from crs_backends.neural.sources import CheckpointSource, resolve
from storage.records import Conversation, ItemRef, Turn

log = logging.getLogger(__name__)

SHOWN_IN_FALLBACK = 3
LINK_CACHE = 4096  # utterances whose entity links are remembered
# what a model that takes more than one route says of each step of a turn (the small UniCRS: torch or llama.cpp),
# recorded in the turn's metadata; cleared when a turn starts
ROUTE_ATTRIBUTES = ("option_route", "rank_route", "reply_route")

# what a model may leave where an item should be: our slot, UniCRS's published placeholders, ReDial's ids
_PLACEHOLDER = re.compile(r"<movie>|<mask>|<pad>|\[(?:movie|item)\]|@\d{4,}", re.IGNORECASE)
_JUNK = re.compile(r"<unk>|__unk__|<\|endoftext\|>|</?s>", re.IGNORECASE)
# a phrase whose item went missing ("Have you seen ?", "I recommend .", "how about ?"), at a sentence start
_LEAD = r"(?:^|(?<=[.!?,])\s*|\b(?:so|and|or|but|then|well|also)\s+)"
_EMPTY_SLOT = re.compile(
    _LEAD + r"((?:have|did) you (?:ever |already )?(?:seen|see|watched|watch|heard of)"
    r"|i (?:would |'d |really |also )?(?:recommend|suggest)"
    r"|you (?:should|could|might|would|will) (?:try|watch|see|check out|love|enjoy|like)"
    r"|(?:how|what) about|try|check out|watch)"
    r"\s*(?=[?!.;:]|$)",
    re.IGNORECASE,
)
_EMPTY_QUOTES = re.compile(r"([\"'*_])\s*\1|“\s*”|\(\s*\)|\[\s*\]")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([?!.,;:])")


class NeuralCRS(CRSSystem):
    """A KBRD / BARCOR / UniCRS model answering through the common interface."""

    def __init__(
        self,
        model: NeuralModel,
        catalog: Catalog,
        *,
        source: CheckpointSource | None = None,
        list_size: int = DEFAULT_LIST_SIZE,
        variant: str | None = None,
        policy: str | None = None,
    ):
        self.model = model
        self.kg: KGData = model.kg
        self.catalog = catalog
        self.source = source
        # unset: the published checkpoints as CRS Arena served them, the small versions with the clean variant
        self.policy = check_policy(policy or default_policy(self.small))
        self.list_size = list_size
        self._variant = variant
        self._lock = threading.Lock()  # one turn at a time per model: CPU-bound, and generation keeps state
        self._item_of: dict[int, Item | None] = {}
        self._by_name: dict[str, Item] = {}
        for item in catalog.items:
            self._by_name.setdefault(item.name, item)
            entity_name = item.extra.get("entity_name") if item.extra else None
            if entity_name:
                self._by_name.setdefault(str(entity_name), item)
        self._link = lru_cache(maxsize=LINK_CACHE)(self._link_uncached)
        self._fuzzy = lru_cache(maxsize=LINK_CACHE)(lambda text: tuple(self.kg.link(text)))
        # crs_arena_exact: linked on the text as sent, untrimmed (src/model/utils.py L138-145)
        self._fuzzy_as_sent = lru_cache(maxsize=LINK_CACHE)(lambda text: tuple(self.kg.link(text, as_sent=True)))
        self._small_links = lru_cache(maxsize=LINK_CACHE)(self._small_links_uncached)
        self._attributes: AttributeLinker | None = None

    # ------------------------------------------------------------------ identity
    @property
    def info(self) -> SystemInfo:
        system = self.model.system
        variant = self._variant or (self.source.variant if self.source else self.model.description)
        if self.source is not None:  # a small local version answers under its own id and name (kbrd_small)
            return SystemInfo(
                id=self.source.system_id, label=self.source.label, variant=variant, demo=self.source.small
            )
        return SystemInfo(id=system, label=LABELS.get(system, system), variant=variant)

    def warm_up(self) -> None:
        """Build the catalog's matcher and run one turn so that the first real one is quick."""
        self.catalog.matcher  # noqa: B018 (cached property)
        self.respond(Conversation(system_id=self.model.system, turns=[Turn(role="user", text="Hi")]))

    # ------------------------------------------------------------------ the model's view
    def conv_input(self, conversation: Conversation) -> ConvInput:
        context: list[str] = []
        roles: list[str] = []
        for turn in conversation.all_turns:
            text = " ".join((turn.text or "").split())
            if roles and roles[-1] == turn.role:
                context[-1] = f"{context[-1]} {text}".strip()
                continue
            if not roles and turn.role == "system":
                context.append("")
                roles.append("user")
            context.append(text)
            roles.append(turn.role)
        entities: list[str] = []
        for text in context:
            entities += self._link(text)
        return ConvInput(context=context, entities=entities)

    def _link_uncached(self, text: str) -> list[str]:
        if not text:
            return []
        found = list(self._fuzzy(text))  # the fuzzy links, computed once per text for both policies
        for mention in self.catalog.mentions(text):
            if mention.item is None:
                continue
            name = self._entity_name_of(mention.item)
            if name is not None:
                found.append(name)
        return found

    def _entity_name_of(self, item: Item) -> str | None:
        for name in (item.extra.get("entity_name") if item.extra else None, item.name):
            if name and name in self.kg.entity2id:
                return str(name)
        return None

    def item_of(self, entity_id: int) -> Item | None:
        """The chat-catalog item for a KG item entity (by exact name, else title match with the same year)."""
        if entity_id not in self._item_of:
            name = self.kg.entity_name(entity_id)
            item = self._by_name.get(name)
            if item is None and name and name != "<pad>":
                item = self.catalog.match_name(name)
            self._item_of[entity_id] = item
        return self._item_of[entity_id]

    def user_items(self, conversation: Conversation, inp: ConvInput) -> set[str]:
        """Catalog ids of the items the user mentioned (exact mentions and linked item entities)."""
        seen: set[str] = set()
        item_ids = self._item_entity_ids
        for turn in conversation.all_turns:
            if turn.role != "user":
                continue
            for mention in self.catalog.mentions(turn.text or ""):
                if mention.item is not None:
                    seen.add(mention.item.id)
            for name in self._link(" ".join((turn.text or "").split())):
                entity = self.kg.entity2id.get(name)
                if entity in item_ids:
                    item = self.item_of(entity)
                    if item is not None:
                        seen.add(item.id)
        return seen

    @property
    def _item_entity_ids(self) -> set[int]:
        ids = getattr(self, "_item_id_set", None)
        if ids is None:
            ids = self._item_id_set = set(self.kg.item_ids)
        return ids

    def rank(self, inp: ConvInput, exclude: set[str]) -> tuple[list[Item], list[tuple[int, float]]]:
        """The model's ranking as catalog items (top :data:`TOP_K`), and the model's own top entities."""
        n_items = len(self.kg.item_ids)
        # ask for the whole ranking: items outside the chat catalog are skipped, the list still fills up
        ranked = self.model.recommend(inp, k=n_items) if n_items else []
        items: list[Item] = []
        taken: set[str] = set()
        for entity_id, _score in ranked:
            item = self.item_of(int(entity_id))
            if item is None or item.id in exclude or item.id in taken:
                continue
            items.append(item)
            taken.add(item.id)
            if len(items) >= TOP_K:
                break
        return items, ranked[:TOP_K]

    # ------------------------------------------------------------------ answering
    def respond(self, conversation: Conversation) -> Turn:
        if self.policy == "enhanced":
            return self._respond_enhanced(conversation)
        return self._respond_crs_arena(conversation, exact=self.policy == EXACT)

    def exact_input(self, conversation: Conversation) -> ConvInput:
        """The conversation exactly as CRS Arena's serving code handed it to the model (iai-group/iEvaLM-CRS at
        b33b8b3):

        - ``crs_arena/arena.py`` L184-186 stores the user's message in the session before ``get_crs_response``
          passes the whole session as ``history`` (L249; the ``history[:-1]`` of L245 is never used), and
          ``crs_arena/crs_fighter.py`` L87 appends ``input_message`` once more: the newest user message comes
          twice, the copy in the system's position, and its entities are linked twice;
        - messages go in as they were typed and shown (L87: ``m["message"]``), whitespace and the list template's
          line breaks included, an empty reply as ``''``;
        - the conversation starts with the user's first message: nothing is put in front when a system turn
          comes first (CRS Arena never lets the system speak first).

        Entities: each utterance linked on its own (L88-91, ``get_entity``) on the text as sent, untrimmed
        (``src/model/utils.py`` L138-145: WRatio's length scaling links a list reply ending in ``"  \n"``
        differently from its stripped text), the small versions with their own linking."""
        turns = conversation.all_turns
        context = [t.text or "" for t in turns]
        if turns and turns[-1].role == "user":
            context.append(turns[-1].text or "")  # crs_fighter.py L87: [history …, u_n] + [input_message]
        entities: list[str] = []
        for text in context:
            if text:
                entities += list(self._small_links(text)) if self.small else list(self._fuzzy_as_sent(text))
        return ConvInput(context=context, entities=entities, served=True)

    def arena_input(self, conversation: Conversation) -> ConvInput:
        """The conversation as crs_fighter builds it: every message in order (``''`` first only when the
        system spoke first), and for each the KG entities fuzzy-linked (WRatio >= 90), nothing else; the small
        local versions also link catalog titles, genres and people (:mod:`crs_backends.neural.mentions`)."""
        context = [" ".join((t.text or "").split()) for t in conversation.all_turns]
        if conversation.all_turns and conversation.all_turns[0].role == "system":
            context.insert(0, "")
        entities: list[str] = []
        for text in context:
            if not text:
                continue
            # the small versions also link titles (catalog mentions), genres and people: see mentions.py
            entities += list(self._small_links(text)) if self.small else list(self._fuzzy(text))
        return ConvInput(context=context, entities=entities)

    def _small_links_uncached(self, text: str) -> tuple[str, ...]:
        found = list(self._link(text))  # the fuzzy links, then catalog title mentions
        if self._attributes is None:
            self._attributes = AttributeLinker(self.kg.entity2id, self.kg.item_ids)
        return tuple(dict.fromkeys(found + self._attributes(text)))

    def _respond_crs_arena(self, conversation: Conversation, *, exact: bool) -> Turn:
        """One turn of CRS Arena's policy (see :mod:`crs_backends.neural.policy`); ``exact``: with its serving
        code's input quirks (:meth:`exact_input`). The same code answers for the small and the published sets."""
        start = time.perf_counter()
        info = self.info
        dataset = self.source.dataset if self.source else ""
        notes: list[str] = []
        precision = served_precision(exact, _device_type(self.model), self.model.system)
        # fp16 exactly where CRS Arena's accelerator put it: the prepared models' forward (mixed_precision.py)
        half = (
            prepared_forward(self.model.prepared_modules(), "cuda", torch.float16)
            if precision == FP16_AUTOCAST
            else contextlib.nullcontext()
        )
        with self._lock, torch.no_grad(), half:
            for attribute in ROUTE_ATTRIBUTES:  # what this turn's steps record, never a step of the turn before
                if hasattr(self.model, attribute):
                    setattr(self.model, attribute, "")
            inp = self.exact_input(conversation) if exact else self.arena_input(conversation)
            generated = self.model.reply_text(inp)  # get_conv
            menu = [letter for letter, _ in policy.options_for(dataset)]
            choice = None
            try:  # get_choice
                scores = self.model.option_scores(inp, menu)
                choice = policy.choose(
                    scores,
                    policy.previous_state(conversation.all_turns, info.id),
                    dataset,
                    rule=self.model.penalty_rule,
                )
            except Exception as e:
                log.warning(
                    "%s: option choice failed (%s: %s); answering with the generated reply",
                    info.id,
                    type(e).__name__,
                    e,
                )
                notes.append(f"option choice failed ({type(e).__name__}); the generated reply was used")
            n_items = len(self.kg.item_ids)
            ranked = self.model.recommend(inp, k=min(TOP_K, n_items)) if n_items else []  # get_rec
        names = [self.kg.entity_name(int(e)) for e, _ in ranked]
        ranked_items = [self.item_of(int(e)) for e, _ in ranked]
        act = "recommend" if choice is not None and choice.recommend else "reply"
        if act == "recommend":
            text = policy.list_reply(names)
            listed = [item for item in ranked_items[: policy.LIST_SIZE] if item is not None]
        else:
            text = generated
            if exact and not self.model.fills_placeholder:
                pass  # src/model/KBRD.py L334, BARCOR.py L298-299: the generated text as it is, nothing filled
            else:
                text = policy.fill_placeholders(text, self.model.placeholder, names)
                if exact:  # src/model/UNICRS.py L513: response = generated_response.strip()
                    text = text.strip()
            listed = self._named_items(text, ranked_items)
        if not text.strip():
            # CRS Arena shows what get_response returned, an empty reply included, and keeps it in the history
            notes.append("the model generated an empty reply; it is shown empty, as CRS Arena showed it")
        return Turn(
            role="system",
            text=text,
            items=[i.ref() for i in listed],
            ranking=[i.ref() if i is not None else ItemRef("", n) for i, n in zip(ranked_items, names)],
            metadata={
                **self._identity_metadata(info),
                "policy": self.policy,
                "choice": choice.record() if choice is not None else None,
                # where the option letters' logits came from, which decoder ranked and which wrote the reply (the
                # small UniCRS: torch and llama.cpp take part); a step this turn did not run records nothing
                **{a: route for a in ROUTE_ATTRIBUTES if (route := getattr(self.model, a, ""))},
                "recommended": act == "recommend",
                "act": act,
                "entities": list(inp.entities),
                "generated": generated,
                "notes": notes,
                "precision": precision,
                "latency_ms": int((time.perf_counter() - start) * 1000),
                "catalog": self.catalog.name,
            },
        )

    def choose_action(self, conversation: Conversation, options: list[str]) -> str:
        """iEvaLM attribute mode (``script/ask.py``) with the model's own choice: the option letters scored as
        ``get_choice`` scores them; options no longer offered (attributes already asked) are left out, as the
        published state's -1e5 leaves them out. Used by the simulator's ``attr`` protocol."""
        menu = policy.options_for(self.source.dataset if self.source else "")
        letters = [letter for letter, _ in menu]
        with self._lock, torch.no_grad():
            scores = self.model.option_scores(self.arena_input(conversation), letters)
        allowed = [(score, n) for n, ((_, attribute), score) in enumerate(zip(menu, scores)) if attribute in options]
        if not allowed:
            return options[-1]
        best = max(allowed, key=lambda pair: (pair[0], -pair[1]))  # the first maximum, as torch.argmax
        return menu[best[1]][1]

    @property
    def small(self) -> bool:
        return bool(self.source and self.source.small) or getattr(self.model, "size", "") == "small"

    def _named_items(self, text: str, ranked: list[Item | None]) -> list[Item]:
        """The items a reply names: ranked items whose name it contains, then other catalog titles it names."""
        lowered = text.lower()
        out = [i for i in ranked if i is not None and i.name.lower() in lowered]
        for mention in self.catalog.mentions(text):
            if mention.item is not None and mention.item not in out:
                out.append(mention.item)
        return out[: self.list_size]

    def _identity_metadata(self, info: SystemInfo) -> dict:
        return {
            "system": info.id,
            "variant": info.variant,
            "version": self.source.version if self.source else "",
            "origin": self.source.origin if self.source else "",
            "dataset": self.source.dataset if self.source else "",
            "demo": info.demo,
        }

    def _respond_enhanced(self, conversation: Conversation) -> Turn:
        """Ours: generate, fill slots with the chat catalog's top items, repair, show a top-10 list."""
        start = time.perf_counter()
        with self._lock, torch.no_grad():
            inp = self.conv_input(conversation)
            mentioned = self.user_items(conversation, inp)
            items, model_top = self.rank(inp, mentioned)
            shown = items[: self.list_size]
            names = [i.name for i in shown]
            generated = self.model.generate(inp, items=names)
        text, repaired = repair_text(generated, names)
        info = self.info
        return Turn(
            role="system",
            text=text,
            items=[i.ref() for i in shown],
            ranking=[i.ref() for i in items],
            metadata={
                **self._identity_metadata(info),
                "policy": "enhanced",
                "entities": list(inp.entities),
                "model_top_entities": [self.kg.entity_name(e) for e, _ in model_top[:10]],
                "user_items": sorted(mentioned),
                "generated": generated,
                "repaired": repaired,
                "latency_ms": int((time.perf_counter() - start) * 1000),
                "catalog": self.catalog.name,
            },
        )


def repair_text(text: str, items: list[str]) -> tuple[str, bool]:
    """The reply with leftover placeholders filled, empty slots filled or rephrased, never empty.

    Returns (text, whether anything was changed). Items already named in the text are not used twice.
    """
    original = text or ""
    text = " ".join(original.replace(MOVIE_SLOT, " <movie> ").split())
    remaining = [n for n in items if n.lower() not in text.lower()]
    fallback_name = "one of the movies in the list" if items else "a movie you liked lately"

    def next_name() -> str:
        return (
            remaining.pop(0)
            if remaining
            else (items[0] if items and items[0].lower() not in text.lower() else fallback_name)
        )

    text = _JUNK.sub(" ", text)
    text = _PLACEHOLDER.sub(lambda m: next_name(), text)
    text = _EMPTY_QUOTES.sub(" ", text)
    text = _EMPTY_SLOT.sub(lambda m: m.group(0).rstrip() + " " + next_name(), text)
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", " ".join(text.split()))
    text = text.strip(" ,;:")
    if not re.search(r"\w", text):
        text = fallback_sentence(items)
    return text, text != _SPACE_BEFORE_PUNCT.sub(r"\1", " ".join(original.split()))


def fallback_sentence(items: list[str]) -> str:
    if not items:
        return (
            "Could you tell me a bit more about what you like? A genre, an actor or a movie you enjoyed "
            "would help me find something for you."
        )
    shown = items[:SHOWN_IN_FALLBACK]
    listed = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + f" or {shown[-1]}"
    return f"You might like {listed}."


def load_model(source: CheckpointSource, *, device: str = "cpu") -> NeuralModel:
    """Load the model of ``source`` (its KG, then the checkpoints, strictly checked; a small set's pretrained parts
    from the installed packages, checked against the set's fingerprints)."""
    kg = load_kg(source.kg_dir)
    return model_class(source.system).load(source.root, source.dataset, kg, device=device)


def item_catalog_for(source: CheckpointSource, chat_catalog: Catalog) -> Catalog:
    """The catalog a set's ranking is named in: for a published set its dataset's own item set (``id2info.json``
    beside its KG: ReDial 6,583 movies), as CRS Arena ranks; for the small versions the chat catalog they were
    trained on."""
    if source.small or source.dataset == chat_catalog.name:
        return chat_catalog
    from crs_backends.neural.datasets import dataset_file, fetch_command

    info = Path(source.kg_dir) / "id2info.json"
    if not info.exists():
        info = dataset_file(source.dataset, "id2info.json", Path(source.root)) or info
    if not info.exists():
        raise SourceError(
            f"{LABELS.get(source.system, source.system)}: the item metadata of {source.dataset!r} "
            f"(id2info.json) is missing beside its knowledge graph in {source.kg_dir}; fetch the "
            f"dataset files with: {fetch_command(source.dataset)}"
        )
    return get_catalog(str(info.parent))


FP16_AUTOCAST, FP32 = "fp16 autocast", "fp32"


def served_precision(exact: bool, device_type: str, system: str = "kbrd") -> str:
    """The arithmetic a turn runs in. CRS Arena's three wrappers build ``Accelerator(mixed_precision="fp16")``
    (iai-group/iEvaLM-CRS at b33b8b3: ``src/model/KBRD.py`` L70, ``BARCOR.py`` L43, ``UNICRS.py`` L43) and
    ``prepare`` their models, which with accelerate 0.18 wraps each prepared model's forward in fp16 autocast on a
    GPU (on a CPU mixed precision is off: fp32). KBRD prepares both models (L90, L113), BARCOR its conversation
    model only (L64); what of a turn met autocast is those models' ``forward`` alone (the decoder's steps and KBRD's
    recommendation; not ``generate``'s encoder pass nor KBRD's user vector for the reply:
    :mod:`crs_backends.neural.mixed_precision`). ``crs_arena_exact`` on a GPU does the same. UniCRS prepares only
    its prompt encoders (L120, L140), whose fp16 output then met an fp32 GPT-2; that mix is not reproduced: UniCRS
    runs in fp32,
    as do the clean variant and ``enhanced`` everywhere. Recorded per turn (``metadata["precision"]``)."""
    return FP16_AUTOCAST if exact and device_type == "cuda" and system in ("kbrd", "barcor") else FP32


def _device_type(model) -> str:
    device = getattr(model, "device", "cpu")
    try:
        return torch.device(device).type
    except (TypeError, RuntimeError):
        return "cpu"


def policy_setting() -> str | None:
    """``CRS_NEURAL_POLICY``: ``crs_arena_exact``, ``crs_arena`` or ``enhanced``; unset (None): each set's default
    (:func:`crs_backends.neural.policy.default_policy`)."""
    value = (os.environ.get("CRS_NEURAL_POLICY") or "").strip()
    return check_policy(value) if value else None


def open_system(
    source: CheckpointSource,
    chat_catalog: Catalog,
    *,
    list_size: int = DEFAULT_LIST_SIZE,
    policy: str | None = None,
) -> NeuralCRS:
    """The system a resolved checkpoint set runs as: its item catalog (a published set ranks over its dataset's
    items, a small one over ``chat_catalog``), its loaded model, the reply policy (None: the set's default).
    Raises what :func:`item_catalog_for` and :func:`load_model` raise."""
    items = item_catalog_for(source, chat_catalog)
    model = load_model(source)
    return NeuralCRS(model, items, source=source, list_size=list_size, policy=policy)


def load_neural_system(
    system: str,
    catalog: Catalog,
    *,
    dataset: str | None = None,
    list_size: int = DEFAULT_LIST_SIZE,
    policy: str | None = None,
) -> NeuralCRS:
    """Resolve ``system``'s checkpoints (published first, else the small local version) and open it
    (:func:`open_system`; the policy: ``policy``, else ``CRS_NEURAL_POLICY``, else the set's default). Raises
    :class:`~crs_backends.neural.names.SourceError`, :class:`~crs_backends.neural.checkpoints.CheckpointError` or
    :class:`~crs_backends.neural.kg.KGError`."""
    return open_system(resolve(system, dataset), catalog, list_size=list_size, policy=policy or policy_setting())
