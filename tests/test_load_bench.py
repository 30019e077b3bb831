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


def test_repeated_profiles_alternate_their_arms_and_report_medians(capsys):
    """``--repeat`` / ``--compare``: each arm's runs against a fresh app, the arms alternating run by run (a change
    in the machine's load falls on both), each figure the median of its runs, lost or duplicated turns summed."""
    import contextlib

    bench = _load_bench()
    started: list[dict] = []

    @contextlib.contextmanager
    def fresh_app(settings):
        started.append(settings)
        yield len(started)

    figures = {1: 3.0, 2: 9.0, 3: 5.0, 4: 1.0, 5: 4.0, 6: 2.0}  # p95 at 50 of the app started n-th

    def profile(app):
        return {"chat_p95_s_at_50_think": figures[app], "lost_or_duplicated_think": app % 2}

    arms = {"as configured": {}, "with OMP_NUM_THREADS=1": {"OMP_NUM_THREADS": "1"}}
    measured = bench.think_profiles(fresh_app, 3, arms, profile)
    assert started == [{}, {"OMP_NUM_THREADS": "1"}] * 3
    configured = bench.median_of_runs(measured["as configured"])
    assert configured == {"chat_p95_s_at_50_think": 4.0, "lost_or_duplicated_think": 3}  # apps 1, 3, 5
    assert bench.median_of_runs(measured["with OMP_NUM_THREADS=1"])["chat_p95_s_at_50_think"] == 2.0  # 2, 4, 6
    out = capsys.readouterr().out
    assert "3.00, 5.00, 4.00  (median 4.00)" in out and "run 3 of 3" in out
    assert bench.median_of_runs([{"x": float("nan")}, {}]) == {}  # nothing measured: no figure, never nan


def test_compare_takes_environment_settings_and_refuses_anything_else():
    bench = _load_bench()
    assert bench.app_settings("OMP_NUM_THREADS=1 CRS_UNICRS_SMALL_DECODER=llamacpp") == {
        "OMP_NUM_THREADS": "1",
        "CRS_UNICRS_SMALL_DECODER": "llamacpp",
    }
    for bad in ("OMP_NUM_THREADS", "omp=1", "=1", "  "):
        try:
            bench.app_settings(bad)
        except ValueError:
            continue
        raise AssertionError(f"{bad!r} was taken")
    args = bench.options(["--think-only", "--repeat", "2", "--compare", "OMP_NUM_THREADS=1"])
    assert args.repeat == 2 and args.compare_settings == {"OMP_NUM_THREADS": "1"}
    assert bench.options(["--think-only"]).compare_settings == {}
