"""A worker's counters, written out in the Prometheus text format (``GET /metrics``).

Small on purpose: a handful of counters, two gauges and one histogram, kept under a lock and rendered by hand in
the exposition format version 0.0.4 (https://prometheus.io/docs/instrumenting/exposition_formats/), so a worker
needs no metrics library. Every series carries the label ``system`` (the served system's id).

- ``crs_worker_requests_total{code}``: requests answered, by HTTP status (a 503 is back-pressure or a worker that is
  loading or shutting down, a 500 a system that failed);
- ``crs_worker_errors_total``: turns the system failed to answer (its exception is in the worker's log);
- ``crs_worker_rejected_total``: turns refused because the worker was full (503 with ``Retry-After``);
- ``crs_worker_turn_seconds``: a histogram of the time to answer a turn, queueing included;
- ``crs_worker_in_flight``: turns being answered now, ``crs_worker_queued``: turns waiting for a free slot;
- ``crs_worker_ready``: 1 once the system is loaded and the worker is not shutting down;
- ``crs_worker_model_load_seconds``: how long loading (and warming up) the system took.
"""

from __future__ import annotations

import bisect
import threading

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# seconds: a retrieval turn is milliseconds, a neural one a tenth of a second on a CPU, an LLM's seconds
TURN_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def _label(value: str) -> str:
    """A label value escaped as the text format requires."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    if value == float("inf"):
        return "+Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


class WorkerMetrics:
    """What a worker counts; every method is safe to call from any thread."""

    def __init__(self, system_id: str, buckets: tuple[float, ...] = TURN_BUCKETS):
        self.system_id = system_id
        self.buckets = tuple(sorted(buckets))
        self._lock = threading.Lock()
        self.requests: dict[int, int] = {}
        self.errors = 0
        self.rejected = 0
        self.in_flight = 0
        self.queued = 0
        self.ready = False
        self.model_load_seconds: float | None = None
        self._bucket_counts = [0] * len(self.buckets)
        self._sum = 0.0
        self._count = 0

    def answered(self, status: int) -> None:
        with self._lock:
            self.requests[status] = self.requests.get(status, 0) + 1

    def reject(self) -> None:
        """One turn refused because the worker was full."""
        with self._lock:
            self.rejected += 1

    def failed(self) -> None:
        with self._lock:
            self.errors += 1

    def observe(self, seconds: float) -> None:
        """One turn answered in ``seconds``."""
        with self._lock:
            index = bisect.bisect_left(self.buckets, seconds)
            if index < len(self.buckets):
                self._bucket_counts[index] += 1
            self._sum += seconds
            self._count += 1

    def render(self) -> str:
        """Every series in the text format, one ``# HELP`` and ``# TYPE`` line per metric."""
        system = f'system="{_label(self.system_id)}"'
        with self._lock:
            requests = sorted(self.requests.items())
            counts, total, count = list(self._bucket_counts), self._sum, self._count
            scalars = (self.errors, self.rejected, self.in_flight, self.queued, self.ready, self.model_load_seconds)
        errors, rejected, in_flight, queued, ready, load = scalars
        lines = [
            "# HELP crs_worker_requests_total Requests answered, by HTTP status.",
            "# TYPE crs_worker_requests_total counter",
            *(f'crs_worker_requests_total{{{system},code="{code}"}} {n}' for code, n in requests),
            "# HELP crs_worker_errors_total Turns the system failed to answer (details in the worker's log).",
            "# TYPE crs_worker_errors_total counter",
            f"crs_worker_errors_total{{{system}}} {errors}",
            "# HELP crs_worker_rejected_total Turns refused with 503 and Retry-After because the worker was full.",
            "# TYPE crs_worker_rejected_total counter",
            f"crs_worker_rejected_total{{{system}}} {rejected}",
            "# HELP crs_worker_turn_seconds Time to answer a turn, waiting for a free slot included.",
            "# TYPE crs_worker_turn_seconds histogram",
        ]
        cumulative = 0
        for bound, n in zip(self.buckets, counts, strict=True):
            cumulative += n
            lines.append(f'crs_worker_turn_seconds_bucket{{{system},le="{_number(bound)}"}} {cumulative}')
        lines += [
            f'crs_worker_turn_seconds_bucket{{{system},le="+Inf"}} {count}',
            f"crs_worker_turn_seconds_sum{{{system}}} {_number(total)}",
            f"crs_worker_turn_seconds_count{{{system}}} {count}",
            "# HELP crs_worker_in_flight Turns being answered now.",
            "# TYPE crs_worker_in_flight gauge",
            f"crs_worker_in_flight{{{system}}} {in_flight}",
            "# HELP crs_worker_queued Turns waiting for a free slot.",
            "# TYPE crs_worker_queued gauge",
            f"crs_worker_queued{{{system}}} {queued}",
            "# HELP crs_worker_ready 1 once the system is loaded and the worker takes turns.",
            "# TYPE crs_worker_ready gauge",
            f"crs_worker_ready{{{system}}} {int(ready)}",
        ]
        if load is not None:
            lines += [
                "# HELP crs_worker_model_load_seconds Seconds it took to load and warm up the system.",
                "# TYPE crs_worker_model_load_seconds gauge",
                f"crs_worker_model_load_seconds{{{system}}} {_number(round(load, 3))}",
            ]
        return "\n".join(lines) + "\n"
