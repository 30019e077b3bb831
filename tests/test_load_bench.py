"""bench/load.py's failure path: a level that raises is reported and counted, and every later level still runs
and prints (the bench once stopped at its second level and printed nan for the 50-session target)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _load_bench():
    spec = importlib.util.spec_from_file_location("load_bench", ROOT / "bench" / "load.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["load_bench"] = module  # its dataclasses look their module up while being defined
    spec.loader.exec_module(module)
    return module


def test_a_failing_level_is_reported_and_the_next_levels_still_run(capsys):
    bench = _load_bench()
    ran: list[int] = []

    def run(n, turns, limit):
        ran.append(n)
        if n == 16:
            raise TypeError("unhashable type: 'dict'")
        level = bench.Level(n)
        level.latencies = [0.1 * (k + 1) for k in range(20)]
        print(f"N={n:>3}: fine")
        return level, 1 if n == 100 else 0

    problems, p95_at_50 = bench.run_levels(bench.LEVELS, run)
    out = capsys.readouterr().out
    assert ran == [1, 16, 50, 100]  # the level after the failure ran
    assert "N= 16: the level failed: TypeError: unhashable type: 'dict'" in out
    assert out.count("fine") == 3 and problems == 2  # the failed level and the one problem reported later
    assert abs(p95_at_50 - 1.9) < 1e-9  # the 50-session figure is there, not nan


def test_percentiles_of_nothing_are_nan_not_an_error():
    bench = _load_bench()
    assert bench.pct([], 0.95) != bench.pct([], 0.95)  # nan
    assert bench.pct([3.0, 1.0, 2.0], 0.5) == 2.0
