"""bench/bench_soak.py: its figures and growth rule by hand (fast), and a 2-minute soak of the whole graph against the
simulator that fails on growth (slow): a node's RSS growing more than a bound between the second report and the last,
the chunks stopping in a window, chunks too late for the executor, a node dying.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from para_ros.dds_env import loopback_dds_env

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_soak.py"
RSS_GROWTH_BOUND_MIB = 64.0  # between the second report (40 s) and the last (120 s): far above what a settled node does


def _bench():
    spec = importlib.util.spec_from_file_location("bench_soak_under_test", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_proc_figures_of_this_process():
    bench = _bench()
    rss = bench.rss_mib(os.getpid())
    status = Path(f"/proc/{os.getpid()}/status").read_text()
    kb = int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])
    assert rss == pytest.approx(kb / 1024.0, rel=0.2)  # read again a moment later: close
    t0 = bench.cpu_time_s(os.getpid())
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:  # 0.3 s of CPU
        pass
    assert bench.cpu_time_s(os.getpid()) - t0 >= 0.25
    assert bench.rss_mib(2**22 + 12345) is None and bench.cpu_time_s(2**22 + 12345) is None  # no such pid


def test_growth_is_last_minus_second_report_and_per_hour():
    bench = _bench()

    def report(t, rss, rate):
        return {
            "t_s": t,
            "nodes": {"n": {"pid": 1, "rss_mib": rss, "cpu_pct": 10.0}},
            "chunk_rate_hz": rate,
            "command_rate_hz": 100.0,
            "latency_p50_ms": 50.0,
            "latency_p99_ms": 90.0,
        }

    reports = [report(60, 900.0, 5.0), report(120, 300.0, 10.0), report(240, 302.0, 10.0), report(1920, 310.0, 9.0)]
    g = bench.growth(reports)
    assert g["n.rss_mib"] == {"second": 300.0, "last": 310.0, "growth": 10.0, "growth_per_hour": 20.0}
    assert g["chunk_rate_hz"]["growth"] == -1.0 and g["n.cpu_pct"]["growth"] == 0.0
    assert "n.pid" not in g
    assert bench.growth(reports[:2]) == {}  # the second report would be the last


def test_bad_arguments_are_refused():
    bench = _bench()
    assert bench.main(["--duration", "30", "--report-every", "20"]) == 2  # fewer than 3 reports
    assert bench.main(["--camera-rate", "0"]) == 2


@pytest.mark.slow
@pytest.mark.ros
def test_two_minute_soak_of_the_graph_shows_no_growth(tmp_path):
    out = tmp_path / "soak"
    cmd = [
        sys.executable,
        str(BENCH),
        "--duration",
        "120",
        "--report-every",
        "20",
        "--checkpoint",
        "none",
        "--camera-rate",
        "10",
        "--out",
        str(out),
        "--max-rss-growth-mib",
        str(RSS_GROWTH_BOUND_MIB),
        "--shutdown-timeout",
        "20",
    ]  # a loaded machine (load 10 on 2 cores) made the inference node miss 5 s
    env = loopback_dds_env()
    env.setdefault("MUJOCO_GL", "egl")
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=480)
    print(res.stdout[-6000:], res.stderr[-3000:])
    assert res.returncode == 0, res.stderr[-3000:]
    result = json.loads((out / "soak.json").read_text())
    reports, grown = result["reports"], result["growth"]
    assert len(reports) == 6 and result["stop_reason"] == "duration reached"
    assert set(reports[-1]["nodes"]) == {"sim_node", "inference_node", "chunk_executor"}
    for r in reports[1:]:  # the graph kept working in every window after the start-up
        assert r["chunks"] > 0 and r["command_rate_hz"] > 10.0, r
    for name in reports[-1]["nodes"]:
        rss = grown[f"{name}.rss_mib"]
        assert rss["growth"] <= RSS_GROWTH_BOUND_MIB, (name, rss)
    # Rates and latency percentiles follow the machine's load (2 shared cores: a busy neighbour halved the chunk rate
    # and sent p99 from 170 to 1400 ms in one window of a run, every node's CPU % down with it), so they are
    # bounded by what the graph needs, not by their trend: chunks young enough for the executor (max_chunk_age_s 1 s).
    assert grown["latency_p50_ms"]["last"] < 1000.0, grown["latency_p50_ms"]
    assert result["task"] is not None and result["task"]["error"] is None, result["task"]
    assert all(not n["exited_early"] and not n["killed"] for n in result["nodes"].values()), result["nodes"]
