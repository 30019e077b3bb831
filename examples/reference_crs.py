"""A reference CRS server for the CRS Arena remote protocol (crs-arena/1). Standard library only.

It recommends from the bundled catalog (assets/catalog/movies.jsonl) by keyword overlap between what the
user said and each movie's genres, people, title and description, never recommends back what it already
suggested or what the user named, and answers a follow-up question about the movie it just suggested.
It is small on purpose: a starting point for your own system, and what the tests and benchmarks talk to.

    python examples/reference_crs.py --port 8800                  # then in the systems file:
    #   [[system]]
    #   id = "reference"
    #   label = "Reference CRS"
    #   url = "http://127.0.0.1:8800/"
    python examples/reference_crs.py --port 8800 --key-env REFERENCE_CRS_KEY   # require a Bearer key
    python examples/reference_crs.py --latency-ms 200             # pretend to think for 200 ms per turn

Protocol (docs/remote-crs.md): POST JSON ``{"protocol", "request_id", "conversation_id", "domain",
"catalog", "max_items", "turns": [{"role", "text", "items"?}]}``; the answer is ``{"text", "items":
[{"id", "title", "year", "score", "explanation"}], "system_version"}``. GET /health answers ``{"ok": true}``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import threading
import time
import unicodedata
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

VERSION = "reference-crs 1.0"
CATALOG = Path(__file__).resolve().parent.parent / "assets" / "catalog" / "movies.jsonl"
MAX_REQUEST_BYTES = 1_000_000

# words people use for a genre, in English and a few other languages, -> the catalog's genre
GENRE_WORDS = {
    "sci-fi": "Sci-Fi",
    "scifi": "Sci-Fi",
    "science": "Sci-Fi",
    "space": "Sci-Fi",
    "aliens": "Sci-Fi",
    "alien": "Sci-Fi",
    "spaceships": "Sci-Fi",
    "futuristic": "Sci-Fi",
    "ciencia": "Sci-Fi",
    "romantic": "Romance",
    "romance": "Romance",
    "romántica": "Romance",
    "amour": "Romance",
    "comedy": "Comedy",
    "funny": "Comedy",
    "hilarious": "Comedy",
    "laugh": "Comedy",
    "comedia": "Comedy",
    "horror": "Horror",
    "scary": "Horror",
    "terror": "Horror",
    "crime": "Crime",
    "heist": "Crime",
    "gangster": "Crime",
    "mafia": "Crime",
    "policial": "Crime",
    "thriller": "Thriller",
    "tense": "Thriller",
    "suspense": "Thriller",
    "animated": "Animation",
    "animation": "Animation",
    "cartoon": "Animation",
    "animación": "Animation",
    "kids": "Family",
    "children": "Family",
    "family": "Family",
    "niños": "Family",
    "hijos": "Family",
    "war": "War",
    "guerra": "War",
    "western": "Western",
    "musical": "Musical",
    "music": "Music",
    "drama": "Drama",
    "documentary": "Documentary",
    "fantasy": "Fantasy",
    "adventure": "Adventure",
    "action": "Action",
    "acción": "Action",
    "mystery": "Mystery",
    "biography": "Biography",
    "sport": "Sport",
    "history": "History",
    "historical": "History",
}
STOP = set(
    "a an the and or of to in on for with about me my i you it is are be can do have like want please "
    "some something movie movies film films watch tonight recommend one good great more other else "
    "that this what who how very really any just".split()
)
_WORD = re.compile(r"[^\W\d_]+(?:-[^\W\d_]+)?")
# a question about the movie just suggested ("Who is in it?") and a request for another one
FOLLOW_UP = re.compile(r"\?|\b(?:who|when|what|how|tell me more)\b", re.IGNORECASE)
MORE = re.compile(r"\b(?:else|another|other|different|seen|not|no|don't|didn't|instead|rather)\b", re.IGNORECASE)


def _fold(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", text.lower()) if not unicodedata.combining(c))


def _words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOP and len(w) > 2]


class ReferenceCRS:
    """The recommender: keyword overlap over the catalog, no model."""

    def __init__(self, catalog_path: Path = CATALOG):
        self.items = [
            json.loads(line) for line in Path(catalog_path).read_text(encoding="utf-8").splitlines() if line.strip()
        ]
        self.by_id = {item["id"]: item for item in self.items}
        self.docs = []
        for item in self.items:
            words: dict[str, float] = {}
            for g in item.get("genres", []):
                words[f"genre:{g}"] = 3.0
            for w in _words(" ".join([item["title"], *item.get("directors", []), *item.get("cast", [])])):
                words[_fold(w)] = max(words.get(_fold(w), 0), 2.0)
            for w in _words(item.get("description", "")):
                words.setdefault(_fold(w), 1.0)
            self.docs.append(words)

    def answer(self, request: dict) -> dict:
        turns = request.get("turns") or []
        max_items = max(1, min(int(request.get("max_items") or 10), 50))
        users = [t.get("text", "") for t in turns if t.get("role") == "user"]
        suggested = [ref.get("id") for t in turns if t.get("role") == "system" for ref in t.get("items") or []]
        if not users:
            ranked = self._rank({}, set())[:max_items]
            return self._reply(
                "Hello! What kind of movie are you in the mood for? Here are a few popular ones "
                f"to start with, such as {self._name(ranked[0][0])}.",
                ranked,
                {},
            )
        last = users[-1]
        said = _fold(" ".join(users))
        named = {
            i["id"]
            for i in self.items
            if len(i["title"]) > 3 and re.search(rf"\b{re.escape(_fold(i['title']))}\b", said)
        }
        cues = self._cues(users)
        if suggested and FOLLOW_UP.search(last) and not MORE.search(last) and not self._genres([last]):
            return self._about(self.by_id.get(suggested[-1]), suggested, max_items, cues)
        ranked = self._rank(cues, set(suggested) | named)[:max_items]
        reasons = {i["id"]: self._why(i, cues) for i, _ in ranked}
        if not cues:
            text = (
                f"Here is a crowd favourite: {self._name(ranked[0][0])}. Tell me a genre or a movie you like "
                "and I will narrow it down."
            )
        else:
            shown = " and ".join(self._name(i) for i, _ in ranked[:2])
            text = f"Since you mentioned {self._cue_words(cues)}, you might like {shown}."
        return self._reply(text, ranked, reasons)

    def _genres(self, texts: list[str]) -> list[str]:
        return [c for c in self._cues(texts) if c.startswith("genre:")]

    def _cues(self, texts: list[str]) -> dict[str, float]:
        cues: dict[str, float] = {}
        for n, text in enumerate(texts):
            weight = 2.0 if n == len(texts) - 1 else 1.0
            for w in _words(text):
                key = f"genre:{GENRE_WORDS[w]}" if w in GENRE_WORDS else _fold(w)
                cues[key] = cues.get(key, 0.0) + weight
        return cues

    def _rank(self, cues: dict[str, float], exclude: set[str]) -> list[tuple[dict, float]]:
        """(item, score in 0-1) best first; ties go to the better-known movie."""
        scored = []
        for item, doc in zip(self.items, self.docs):
            if item["id"] in exclude:
                continue
            score = sum(weight * doc.get(cue, 0.0) for cue, weight in cues.items())
            score += 1.0 / (10 + (item.get("popularity") or 1000))
            scored.append((score, item))
        scored.sort(key=lambda pair: -pair[0])
        top = scored[0][0] if scored and scored[0][0] > 0 else 1.0
        return [(item, round(score / top, 4)) for score, item in scored]

    def _about(self, item, suggested, max_items, cues) -> dict:
        if item is None:
            return self._reply("Which movie do you mean? Tell me its title and I will tell you about it.", [], {})
        cast = ", ".join(item.get("cast", [])[:3]) or "a fine cast"
        director = ", ".join(item.get("directors", [])) or "an unknown director"
        genres = " and ".join(g.lower() for g in item.get("genres", [])[:2]) or "well-liked"
        text = (
            f"{self._name(item)} is a {genres} film directed by {director}, starring {cast}. "
            f"{item.get('description', '')}"
        ).strip()
        others = self._rank(cues, set(suggested))[: max_items - 1]
        return self._reply(text, [(item, 1.0), *others], {item["id"]: "the movie you asked about"})

    def _why(self, item, cues) -> str:
        genres = [
            c.split(":", 1)[1] for c in cues if c.startswith("genre:") and c.split(":", 1)[1] in item.get("genres", [])
        ]
        return f"matches {', '.join(g.lower() for g in genres)}" if genres else "close to what you described"

    @staticmethod
    def _cue_words(cues) -> str:
        genres = [c.split(":", 1)[1].lower() for c in cues if c.startswith("genre:")]
        return " and ".join(genres[:2]) + " movies" if genres else "that"

    @staticmethod
    def _name(item) -> str:
        return f"{item['title']} ({item['year']})"

    @staticmethod
    def _reply(text: str, ranked: list[tuple[dict, float]], reasons: dict[str, str]) -> dict:
        return {
            "text": text,
            "items": [
                {
                    "id": i["id"],
                    "title": i["title"],
                    "year": i["year"],
                    "score": score,
                    **({"explanation": reasons[i["id"]]} if i["id"] in reasons else {}),
                }
                for i, score in ranked
            ],
            "system_version": VERSION,
        }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the app reuses connections
    disable_nagle_algorithm = True  # headers and body go out at once (else ~40 ms of delayed ACK per answer)
    server: ReferenceServer

    def log_message(self, format, *args):
        if self.server.verbose:
            super().log_message(format, *args)

    def do_GET(self):
        if self.path.rstrip("/") == "/health":
            self._send(200, {"ok": True, "system_version": VERSION})
        else:
            self._send(404, {"error": "POST the conversation to this server"})

    def do_POST(self):
        start = time.perf_counter()
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_REQUEST_BYTES:
            self._send(413, {"error": "request too large"}, close=True)
            return
        body = self.rfile.read(length)
        if self.server.key and self.headers.get("Authorization") != f"Bearer {self.server.key}":
            self._send(401, {"error": "a valid key is required"})
            return
        try:
            request = json.loads(body)
            if not isinstance(request, dict) or not isinstance(request.get("turns", []), list):
                raise ValueError
        except ValueError:
            self._send(400, {"error": "the body must be a JSON object with a 'turns' list"})
            return
        answer = self.server.crs.answer(request)
        if self.server.latency:
            time.sleep(self.server.latency)
        self._send(200, answer, timing=(time.perf_counter() - start) * 1000)

    def _send(self, status: int, payload: dict, *, timing: float | None = None, close: bool = False) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        if timing is not None:  # the system's own time, so the app can tell its overhead from ours
            self.send_header("Server-Timing", f"crs;dur={timing:.2f}")
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)


class ReferenceServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address,
        *,
        latency: float = 0.0,
        key: str | None = None,
        catalog: Path = CATALOG,
        verbose: bool = False,
        handler=Handler,
    ):
        super().__init__(address, handler)
        self.crs = ReferenceCRS(catalog)
        self.latency, self.key, self.verbose = latency, key, verbose

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"

    def start(self) -> ReferenceServer:
        """Serve in a background thread (for tests and benchmarks); :meth:`stop` ends it."""
        threading.Thread(target=self.serve_forever, name="reference-crs", daemon=True).start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()

    def __enter__(self) -> ReferenceServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8800)
    parser.add_argument("--latency-ms", type=float, default=0.0, help="extra time per answer")
    parser.add_argument("--key-env", default=None, help="require the key held by this environment variable")
    parser.add_argument("--catalog", default=str(CATALOG))
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    key = os.environ.get(args.key_env) if args.key_env else None
    if args.key_env and not key:
        sys.exit(f"{args.key_env} is not set")
    server = ReferenceServer(
        (args.host, args.port),
        latency=args.latency_ms / 1000,
        key=key,
        catalog=Path(args.catalog),
        verbose=args.verbose,
    )
    print(f"reference CRS on {server.url} ({len(server.crs.items)} movies)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
