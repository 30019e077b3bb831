"""The LLM call cache and the call log (tokens, cost, latency)."""

from __future__ import annotations

from sqlite_utils import Database

from storage.db import write_transaction
from storage.jsonutil import dumps, loads
from storage.records import utc_now


def cache_get(db: Database, key: str) -> dict | None:
    """The cached response for ``key``, or None."""
    rows = list(db.table("llm_cache").rows_where("key = ?", [key], select="response"))
    return loads(rows[0]["response"]) if rows else None


def cache_put(db: Database, key: str, *, model: str, request: dict, response: dict) -> None:
    """Store a response; a concurrent writer of the same key wins, which is harmless."""
    with write_transaction(db):
        db.execute(
            "insert into llm_cache (key, model, request, response, created_at) "
            "values (?, ?, ?, ?, ?) on conflict(key) do nothing",
            [key, model, dumps(request), dumps(response), utc_now()],
        )


def log_call(
    db: Database,
    *,
    role: str,
    model: str,
    backend: str,
    kind: str,
    duration_ms: int,
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    cost_usd: float = 0.0,
    cache_hit: bool = False,
    error: str | None = None,
) -> None:
    with write_transaction(db):
        db.table("llm_calls").insert(
            {
                "role": role,
                "model": model,
                "backend": backend,
                "kind": kind,
                "duration_ms": duration_ms,
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "cost_usd": cost_usd,
                "cache_hit": int(cache_hit),
                "error": error,
                "created_at": utc_now(),
            }
        )


def usage_summary(db: Database) -> list[dict]:
    """Calls, tokens and cost per (role, model)."""
    return list(
        db.query(
            "select role, model, count(*) as calls, sum(cache_hit) as cache_hits, "
            "sum(prompt_tokens) as prompt_tokens, sum(completion_tokens) as completion_tokens, "
            "round(sum(cost_usd), 6) as cost_usd, sum(error is not null) as errors "
            "from llm_calls group by role, model order by role, model"
        )
    )
