"""bench/bench_policy.py: --help works and a short tiny run prints the figures and the settings."""

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_policy.py"


def test_help():
    res = subprocess.run([sys.executable, str(BENCH), "--help"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "--config" in res.stdout and "--dtype" in res.stdout


def test_tiny_run_prints_figures_and_machine():
    res = subprocess.run(
        [sys.executable, str(BENCH), "--runs", "3", "--warmup", "1", "--threads", "1", "--fast-dtype", "bf16"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    for key in (
        "median",
        "min",
        "max",
        "device=cpu",
        "'reference': 'fp32', 'fast': 'bf16'",
        "config=tiny",
        "torch=",
        "cpu=",
        "allocator=glibc keeps freed memory",
        "fast / reference:",
        "/4 steps",
        "attention={'reference': 'sdpa', 'fast': 'para_cpu_blocked'}",
    ):
        assert key in res.stdout, key


def test_default_allocator_run_says_so():
    res = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--runs",
            "1",
            "--warmup",
            "0",
            "--threads",
            "1",
            "--paths",
            "fast",
            "--allocator",
            "default",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "allocator=unchanged" in res.stdout and "'fast': 'fp32'" in res.stdout


@pytest.mark.slow
def test_paper_policy_runs_on_cpu():
    """The full paper model (V = 1,048,576) through the Policy once: shapes and finiteness (about 10 s, 1.2 GB)."""
    res = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--config",
            "paper",
            "--device",
            "cpu",
            "--runs",
            "1",
            "--warmup",
            "0",
            "--threads",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert res.returncode == 0, res.stderr
    assert "V=1,048,576" in res.stdout and "config=paper" in res.stdout


def test_training_step_bench_runs_and_prints_figures():
    bench = BENCH.parent / "bench_training.py"
    res = subprocess.run(
        [
            sys.executable,
            str(bench),
            "--preset",
            "tiny",
            "--steps",
            "2",
            "--warmup",
            "1",
            "--threads",
            "1",
            "--no-compare",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    for key in ("training step", "preset=tiny", "median", "peak_rss=", "params ", "GFLOP/s", "FLOP-bound step"):
        assert key in res.stdout, key
