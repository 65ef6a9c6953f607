"""Lockstep in batches (para_ros.sim.lockstep rule 7) ends every episode exactly as the per-tick protocol does: the
same three layouts through the real graph (real sim_node, inference_node with a tiny random-weights checkpoint,
chunk_executor over DDS), once with ``lockstep_batch: false`` (one round trip per 10 ms step) and once with the
default batches, give report rows equal in every figure but the wall time. The batched run must really have batched
(the simulator says so in its log) and the per-tick one not, else the comparison proves nothing. Catches a batch that
lets physics between two instants follow the wrong command, a horizon that passes a camera frame or a chunk's
release, and a /tf or task state missing an instant. The policy steps 0.2 s, as the shipped one, so the batched run
sends /tf on the 0.1 s grid of its frames and past steps only (``lockstep_tf_period_s``, which para-sim eval sets):
catches a grid that misses an instant the inference node looks up (its past positions would differ)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("rclpy")

from core_fixtures import tiny_checkpoint  # noqa: E402

from para_ros.commands import sim as sim_cli  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.ros]

BATCH_LOG = "lockstep: ticking in batches"  # sim_node's log line at its first batch


def test_batched_lockstep_gives_the_per_tick_protocols_report_rows(tmp_path):
    ck = tiny_checkpoint(tmp_path / "ck", frame_stride=2, dataset_fps=10.0)  # steps of 0.2 s

    def run(name: str, batch: bool) -> tuple[list[dict], str]:
        out = tmp_path / name
        argv = ["eval", "--checkpoint", str(ck), "--episodes", "3", "--seed", "100000", "--time-limit", "2",
                "--settle", "0.5", "--lockstep", "--no-videos", "--out", str(out),
                "--node-param", f"sim_node:lockstep_batch:={'true' if batch else 'false'}"]  # fmt: skip
        assert sim_cli.main(argv) == 0
        rows = json.loads((out / "report.json").read_text())["episodes"]
        return rows, (Path(out) / "logs" / "sim_node.log").read_text(errors="replace")

    per_tick, per_tick_log = run("per_tick", batch=False)
    batched, batched_log = run("batched", batch=True)
    assert BATCH_LOG in batched_log, "the batched run never batched: the comparison proves nothing"
    assert BATCH_LOG not in per_tick_log
    assert "/tf every 10 steps" in batched_log, "the batched run sent /tf of every instant: the grid was not tested"
    assert [r["seed"] for r in batched] == [100000, 100001, 100002]
    assert all(r["outcome"] != "fault" for r in per_tick + batched), [r["fault"] for r in per_tick + batched]
    assert any(r["chunks"] > 0 for r in per_tick), "no chunk reached the executor: nothing moved the arm"
    for a, b in zip(per_tick, batched):
        for key in a:
            if key != "wall_s":
                assert a[key] == b[key], f"seed {a['seed']} {key}: {a[key]!r} per tick, {b[key]!r} in batches"
