"""ChatCRS: a language model prompted as a movie recommender, grounded in the catalog.

The model sees the conversation and a short list of catalog candidates that fit
the user's words (retrieval over item descriptions). Its reply is then read for
titles: the ones that match catalog items lead the turn's ranked list, the list
is topped up by retrieval, and titles that match nothing are recorded on the
turn (``metadata["unmatched_titles"]``) instead of being listed. An item that is
not in the catalog never appears in the list.

On the embedded model (SmolLM2-135M, which invents films) ChatCRS runs *constrained*
(:mod:`crs_backends.chatcrs_embedded`): the model only chooses, among an opening phrase and one or two
titles from the catalog candidates, or one question from a fixed list, by its probability of
writing each option; code writes the reply around the choice from the catalog. Each turn records
in its metadata the mode, the act (ask / recommend / explain), the candidates offered, the option
probabilities and the titles chosen. With a remote model ChatCRS is prompted as iEvaLM prompts it
and writes freely (``mode: free``).

Both modes read the conversation as one request state (:class:`~crs_backends.request_state.RequestState`): offline
by the rules reader (:mod:`crs_backends.request_reader`), with a remote model by one structured call
(:mod:`crs_backends.request_reading_llm`, which falls back to the rules when the model's answer is not valid). The
same ranking code reads the state (nothing ruled out is offered; the people and years asked for come first), every
turn records it (``metadata["understood"]``), and a question about a film is answered from its catalog record
without a new recommendation.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterator

from catalog.catalog import Catalog
from catalog.items import Item
from catalog.matcher import normalize_title
from crs_backends import chatcrs_embedded as cx
from crs_backends.base import DEFAULT_LIST_SIZE, CRSSystem, SystemInfo
from crs_backends.film_answers import answer_text
from crs_backends.request_reader import genres_named, named_in, read_request
from crs_backends.request_reading_llm import read_with_model, reader_version
from crs_backends.request_state import RequestState
from llm_clients.base import LLMClient
from llm_clients.prompts import prompt, prompts_version
from llm_clients.types import Completion
from storage.records import Conversation, Turn

log = logging.getLogger(__name__)

N_CANDIDATES = 8
MAX_REPLY_TOKENS = 160
HISTORY_TURNS = 12  # the most recent turns shown to the model

MODES = ("auto", "free", "constrained")
N_CONSTRAINED = 5  # candidates offered to the embedded model (a short prompt: about 1 s on 2 cores)
CONSTRAINED_HISTORY = 3  # the person's most recent messages it sees (its own replies are code's)


class ChatCRS(CRSSystem):
    def __init__(
        self,
        client: LLMClient,
        catalog: Catalog,
        *,
        list_size: int = DEFAULT_LIST_SIZE,
        n_candidates: int = N_CANDIDATES,
        temperature: float = 0.7,
        mode: str = "auto",
    ):
        """:param mode: ``constrained`` (the model chooses among catalog titles, code writes the facts),
        ``free`` (iEvaLM's prompt, free text) or ``auto``: constrained on the embedded model."""
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.client = client
        self.catalog = catalog
        self.list_size = list_size
        self.n_candidates = n_candidates
        self.temperature = temperature
        self.mode = mode

    @property
    def constrained(self) -> bool:
        """Whether the model only chooses among catalog options (the embedded model) rather than writing freely."""
        if self.mode == "auto":
            return getattr(self.client.model, "backend", "") == "embedded"
        return self.mode == "constrained"

    @property
    def info(self) -> SystemInfo:
        variant = self.client.describe()
        if self.constrained:
            variant += ", choosing only among catalog titles"
        return SystemInfo(
            id="chatcrs",
            label="ChatCRS",
            variant=variant,
            demo=self.client.is_demo,
        )

    def warm_up(self) -> None:
        """Build the catalog indexes now rather than during the first reply."""
        self.catalog.retriever, self.catalog.matcher  # noqa: B018 (cached properties)

    # -- what the person asked for ------------------------------------------

    def read_state(self, conversation: Conversation) -> RequestState:
        """The conversation read as a request: by the rules when constrained (the embedded model does not read), else
        by one structured call to the model (the rules' reading when its answer is not valid)."""
        if self.constrained:
            return read_request(conversation, self.catalog)
        return read_with_model(self.client, conversation, self.catalog)

    # -- what the model sees ---------------------------------------------

    def candidates(self, state: RequestState) -> list[Item]:
        """Catalog items that fit what the person asked for: nothing ruled out, none of their own titles, those of
        the people and years asked for first."""
        found = self.catalog.search(_wish_query(state), self.n_candidates * 4, exclude=state.own_title_ids)
        return state.rank(found)[: self.n_candidates]

    def messages(self, conversation: Conversation, candidates: list[Item], subject: Item | None = None) -> list[dict]:
        system = prompt("chatcrs", "system")
        if subject is not None:  # a question about a film: the catalog's record, to answer from
            system += "\n\n" + prompt("chatcrs", "answer_about").format(record=_record_lines(subject))
        elif candidates:
            lines = "\n".join(f"- {i.name}: {', '.join(i.genres[:3])}. {i.description}" for i in candidates)
            system += "\n\n" + prompt("chatcrs", "candidates").format(candidates=lines)
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
        if self.constrained:
            turn = self.constrained_turn(conversation)
            yield turn.text
            yield turn
            return
        start = time.perf_counter()
        state = self.read_state(conversation)
        subject = state.subject if state.act == "ask_about" else None
        candidates = [] if state.act == "goodbye" or subject is not None else self.candidates(state)
        completion: Completion | None = None
        for piece in self.client.stream(
            self.messages(conversation, candidates, subject),
            temperature=self.temperature,
            max_tokens=MAX_REPLY_TOKENS,
            seed=len(conversation.turns),
        ):
            if isinstance(piece, Completion):
                completion = piece
            else:
                yield piece
        assert completion is not None
        yield self.build_turn(state, completion, candidates, int((time.perf_counter() - start) * 1000))

    def build_turn(self, state: RequestState, completion: Completion, candidates: list[Item], latency_ms: int) -> Turn:
        """Ground the reply: mentioned catalog titles first, then the candidates and retrieval, ranked by the state,
        never unknown items; a question about a film lists that film alone, a goodbye nothing."""
        leaving = state.act == "goodbye"
        subject = state.subject if state.act == "ask_about" else None
        mentions = self.catalog.mentions(completion.text)
        ranked: list[Item] = []
        if subject is not None:
            ranked = [subject]
        elif not leaving:
            for m in mentions:
                if m.item is not None and state.allows(m.item) and m.item not in ranked:
                    ranked.append(m.item)
            for item in candidates:
                if len(ranked) >= self.list_size:
                    break
                if item not in ranked:
                    ranked.append(item)
            if len(ranked) < self.list_size:
                exclude = state.own_title_ids | {i.id for i in ranked}
                more = self.catalog.search(_wish_query(state), self.list_size + 20, exclude=exclude)
                ranked += state.rank(more)[: self.list_size - len(ranked)]
        disliked = [  # the model named it although the person ruled it out (their own liked titles aside)
            m.item.name
            for m in mentions
            if m.item is not None and state.rules_out(m.item) not in (None, "their own title")
        ]
        text = completion.text.strip()
        if not text:  # small models sometimes stop at once: say what the list holds
            text = (
                "You might like " + ", ".join(i.name for i in ranked[:3]) + "."
                if ranked
                else cx.lines(prompt("chatcrs", "goodbyes"))[0]
            )
        return Turn(
            role="system",
            text=text,
            items=[i.ref() for i in ranked[: self.list_size]],
            metadata={
                "system": "chatcrs",
                "mode": "free",
                "act": "goodbye" if leaving else ("answer" if subject is not None else "recommend"),
                "model": completion.model,
                "mentioned": [m.item.name for m in mentions if m.item is not None],
                "unmatched_titles": [m.text for m in mentions if m.item is None],
                "disliked_mentioned": disliked,  # named by the model although the person ruled it out
                "understood": state.record(),
                "goodbye": leaving,
                "latency_ms": latency_ms,
                "prompt_tokens": completion.usage.prompt_tokens,
                "completion_tokens": completion.usage.completion_tokens,
                "cache_hit": completion.cache_hit,
                "empty_reply": not completion.text.strip(),
                "prompts_version": prompts_version("chatcrs"),
                "reader_version": reader_version(),
                "catalog": self.catalog.name,
            },
        )

    # -- constrained mode (the embedded model) ------------------------------------------------------

    def constrained_turn(self, conversation: Conversation) -> Turn:
        """One turn where the model only chooses among options and code writes from the catalog."""
        start = time.perf_counter()
        state = read_request(conversation, self.catalog)
        plan = self._plan(conversation, state)
        followups = cx.lines(prompt("chatcrs", "followups"))
        followup = followups[(len(conversation.turns) // 2) % len(followups)]
        rng = random.Random(len(conversation.turns))  # seeded: a conversation replays the same way
        messages = self._constrained_messages(conversation, plan)
        scores: dict[str, dict[str, float]] = {}
        calls = 0
        error = None

        def choose(what: str, options: list[str], prefix: str = "") -> str:
            """The option the model picks: sampled (seeded) from its probabilities of writing each one."""
            nonlocal calls
            if len(options) == 1:
                return options[0]
            heads = cx.distinct_prefixes(options)  # what decides between the options: a word or two each
            dist = self.client.score(messages, [prefix_space(h, prefix) for h in heads], prefix=prefix, min_mass=None)
            calls += 1
            probs = {heads[h]: dist.probs.get(prefix_space(h, prefix), 0.0) for h in heads}
            scores[what] = {o: round(v, 4) for o, v in probs.items()}
            return cx.sample(probs, rng, self.temperature)

        opener = plan.openers[0]
        chosen: list[Item] = []
        text = ""
        try:
            if plan.act in ("ask", "goodbye"):
                text = choose("goodbye" if plan.act == "goodbye" else "question", plan.options())
            elif plan.act == "explain":
                name = choose("title", plan.options())
                chosen = [i for i in plan.candidates if i.name == name]
            elif plan.act == "answer":  # the film asked about: nothing to choose
                chosen = plan.candidates[:1]
            else:
                opener = choose("opener", plan.openers)
                first = choose("title", plan.options(), prefix=opener)
                chosen = [i for i in plan.candidates if i.name == first]
                second = cx.second_choice(scores.get("title", {}), first, rng, self.temperature)
                chosen += [i for i in plan.candidates if i.name == second]
        except Exception as e:  # written without the model, and the reply says so
            log.warning("ChatCRS (constrained) could not get the model's choice: %s", e, exc_info=True)
            error = (
                f"the embedded model could not choose ({type(e).__name__}); "
                "the reply was written from the catalog search alone"
            )
            text, chosen, opener = (
                (plan.options()[0] if plan.act in ("ask", "goodbye") else ""),
                plan.candidates[:1],
                plan.openers[0],
            )
        if plan.act not in ("ask", "goodbye"):
            chosen = chosen or plan.candidates[:1]
            asked = cx.Wishes(genres=state.genres)
            fits = [cx.fit_of(i, asked, state.own_titles) for i in chosen]
            if plan.act == "explain":
                text = cx.explanation_text(chosen[0], fits[0], followup, self.catalog)
            elif plan.act == "answer":
                last = next((t.text for t in reversed(conversation.all_turns) if t.role == "user"), "")
                text = answer_text(
                    chosen[0],
                    state.about,
                    prompt("chatcrs", "answer_followup"),
                    asked_genres=genres_named(last, self.catalog),
                )
            else:
                text = cx.recommendation_text(opener, chosen, fits, followup)
        else:
            chosen = []
        if error:
            text = prompt("chatcrs", "model_failed") + " " + text
        if plan.act == "goodbye" or plan.no_match == "which_film":
            ranked = []
        elif plan.act == "answer":  # no new recommendation: the film the answer is about
            ranked = chosen[:1]
        else:
            ranked = self._constrained_list(state, plan, chosen)
        mentions = self.catalog.mentions(text)
        return Turn(
            role="system",
            text=text,
            items=[i.ref() for i in ranked],
            metadata={
                "system": "chatcrs",
                "mode": "constrained",
                "act": plan.act,
                "act_reason": plan.reason,
                "candidates": [i.name for i in plan.candidates],
                "chosen": [i.name for i in chosen],
                "decided_by": "fallback" if error else ("model" if calls else "code"),
                "option_probs": scores,
                "understood": state.record(),
                **({"error": error} if error else {}),
                "model": self.client.name,
                "model_calls": calls,
                "mentioned": [m.item.name for m in mentions if m.item is not None],
                "unmatched_titles": [m.text for m in mentions if m.item is None],
                "latency_ms": int((time.perf_counter() - start) * 1000),
                "prompts_version": prompts_version("chatcrs"),
                "catalog": self.catalog.name,
            },
        )

    def _plan(self, conversation: Conversation, state: RequestState) -> _Plan:
        """Decide the act of the turn and what the model may choose from."""
        named = _named_before(conversation, self.catalog)
        previous = _last_system_turn(conversation)
        openers = cx.lines(prompt("chatcrs", "openers"))
        if state.act == "goodbye":
            return _Plan("goodbye", "the person thanked or took leave", [], [], openers)
        if state.act == "ask_about":
            subject = state.subject
            if subject is None:
                return _Plan("ask", "asked about a film, but which?", [], [], openers, no_match="which_film")
            if state.about in ("why", "more"):  # the model chooses which of the titles named last to explain
                last_named = list(named_in(previous, self.catalog)) if previous is not None else []
                targets = [subject, *(i for i in last_named if i.id != subject.id)][:2]
                if subject.id not in {i.id for i in last_named}:
                    targets = [subject]
                return _Plan("explain", f"asked about a film ({state.about})", targets, [], openers)
            return _Plan("answer", f"asked about a film ({state.about})", [subject], [], openers)
        pool = self.catalog.search(
            _wish_query(state),
            len(self.catalog),  # all, ranked
            exclude=state.own_title_ids | {i.id for i in named},
        )
        taken = [*state.own_titles, *named]  # a dataset may list one film twice ("The Matrix (1999)",
        pool = [i for i in pool if not any(_same_film(i, t) for t in taken)]  # "The Matrix")
        fits_all = bool(pool)
        pool = state.rank(pool)  # nothing ruled out; the people and years asked for, then every asked genre, first
        fitting = [i for i in pool if state.fits(i)]
        if not state.said_something and (previous is None or previous.metadata.get("act") != "ask"):
            return _Plan("ask", "no preference yet", [], fitting or pool, openers)
        if not fitting:
            if fits_all and not pool:
                return _Plan("ask", "everything left is ruled out", [], [], openers, no_match="all_disliked")
            why = (
                "no catalog item fits the people, audience or years asked for"
                if pool
                else "no catalog item left to recommend"
            )
            return _Plan("ask", why, [], [], openers, no_match=True)
        reason = "preference stated" if state.said_something else "asked once already; well-known films"
        if len(state.genres) > 1:  # several genres asked: the model chooses among titles of them all, where any
            # exist (horror, then "Could it be funny as well?": it chose The Shining among four horror-only films)
            every = [i for i in fitting if set(state.genres) <= set(i.genres)]
            if every:
                return _Plan("recommend", f"{reason}; every asked genre", every[:N_CONSTRAINED], fitting, openers)
        return _Plan("recommend", reason, fitting[:N_CONSTRAINED], fitting, openers)

    def _constrained_messages(self, conversation: Conversation, plan: _Plan) -> list[dict]:
        system = prompt("chatcrs", "constrained_system")
        if plan.candidates:
            lines = "\n".join(f"- {i.name}: {', '.join(i.genres[:3])}" for i in plan.candidates)
            system += "\n\n" + prompt("chatcrs", "constrained_candidates").format(candidates=lines)
        else:
            system += "\n\n" + prompt("chatcrs", "constrained_goodbye" if plan.act == "goodbye" else "constrained_ask")
        said = [t.text for t in conversation.all_turns if t.role == "user"][-CONSTRAINED_HISTORY:]
        return [{"role": "system", "content": system}, {"role": "user", "content": "\n".join(said)}]

    def _constrained_list(self, state: RequestState, plan: _Plan, chosen: list[Item]) -> list[Item]:
        """The turn's ranked list: the chosen titles, the other candidates, then retrieval ranked by the state; never
        the person's own titles, nothing ruled out."""
        own = state.own_titles
        ranked: list[Item] = []
        for item in [*chosen, *plan.candidates, *plan.pool]:
            if len(ranked) >= self.list_size:
                break
            if item not in ranked and state.allows(item) and not any(_same_film(item, t) for t in own):
                ranked.append(item)
        if len(ranked) < self.list_size:
            exclude = state.own_title_ids | {i.id for i in ranked}
            more = self.catalog.search(_wish_query(state), self.list_size - len(ranked) + 20, exclude=exclude)
            ranked += [i for i in state.rank(more) if not any(_same_film(i, t) for t in own)]
        return ranked[: self.list_size]


class _Plan:
    """What a constrained turn does (ask / recommend / explain) and what the model may choose from."""

    def __init__(
        self,
        act: str,
        reason: str,
        candidates: list[Item],
        pool: list[Item],
        openers: list[str],
        *,
        no_match: bool | str = False,
    ):
        self.act = act
        self.reason = reason
        self.candidates: list[Item] = []
        for item in candidates:  # one per name: the model tells options apart by their names
            if all(c.name != item.name for c in self.candidates):
                self.candidates.append(item)
        self.pool = pool
        self.openers = openers
        self.no_match = no_match

    def options(self) -> list[str]:
        """The questions (ask) or titles (recommend, explain) the model chooses among; never empty."""
        if self.act == "goodbye":
            return cx.lines(prompt("chatcrs", "goodbyes"))
        if self.act == "ask":
            which = self.no_match if isinstance(self.no_match, str) else ("no_match" if self.no_match else "questions")
            return cx.lines(prompt("chatcrs", which))
        return [i.name for i in self.candidates]


def prefix_space(option: str, prefix: str) -> str:
    """An option as it follows ``prefix`` in the reply: after an opener, with the space that separates them."""
    return " " + option if prefix else option


def _same_film(a: Item, b: Item) -> bool:
    """Same title, and the same year unless one of them has none."""
    return normalize_title(a.title) == normalize_title(b.title) and (
        a.year is None or b.year is None or a.year == b.year
    )


def _wish_query(state: RequestState) -> str:
    """The retrieval query: the searchable words, the people and the genres asked for (twice: they matter most) and
    what the person's own titles are about; empty (popular films first) when they said nothing searchable."""
    about = [" ".join((*i.genres, *i.directors)) for i in (*state.liked, *state.seen, *state.mentioned)]
    return " ".join([*state.terms, *state.people, *state.genres, *state.genres, *about])


def _record_lines(item: Item) -> str:
    """A film's catalog record, one fact a line, for the model to answer a question from."""
    lines = [f"Title: {item.name}", f"Genres: {', '.join(item.genres)}"]
    if item.directors:
        lines.append(f"Directed by: {', '.join(item.directors)}")
    if item.writers:
        lines.append(f"Written by: {', '.join(item.writers)}")
    if item.cast:
        lines.append(f"Starring: {', '.join(item.cast)}")
    if item.description:
        lines.append(f"About: {item.description}")
    return "\n".join(lines)


def _last_system_turn(conversation: Conversation) -> Turn | None:
    return next((t for t in reversed(conversation.all_turns) if t.role == "system"), None)


def _named_in(turn: Turn, catalog: Catalog) -> list[Item]:
    """The catalog items a system turn named: as recorded when it was constrained, else read from its text."""
    return list(named_in(turn, catalog))


def _named_before(conversation: Conversation, catalog: Catalog) -> list[Item]:
    named: dict[str, Item] = {}
    for turn in conversation.all_turns:
        if turn.role == "system":
            for item in _named_in(turn, catalog):
                named.setdefault(item.id, item)
    return list(named.values())
