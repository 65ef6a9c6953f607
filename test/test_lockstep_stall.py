"""Lockstep outcomes do not depend on how the machine treats the inference node: one episode through the real graph
(real sim_node, inference_node with a tiny checkpoint, chunk_executor over DDS), run once undisturbed and once with
the inference node stalled (SIGSTOP for 3 s, twice) and slowed (stopped 0.2 s of every 0.5 s), ends the same to the
last digit of every figure in its report row; the undisturbed one runs that layout second in its run, the stalled
one first, so the first episode after the graph's start must also equal the same layout later in a run. Catches a lockstep that lets the simulator step without the chunk of
a frame, one that counts a stall as the policy's failure (or a fault), and one whose outcome follows wall time."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("rclpy")

from core_fixtures import tiny_checkpoint  # noqa: E402

from para_ros.commands import sim as sim_cli  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.ros]

INFERENCE_MODULE = b"para_ros.nodes.inference_node"


def _inference_pid() -> int | None:
    """The inference node started by this process (a child of it), or None."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
            ppid = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if INFERENCE_MODULE in cmdline and ppid == os.getpid():
            return int(proc.name)
    return None


class Staller(threading.Thread):
    """Once the episode runs (the simulator logged its task reset), stops the inference node for 3 s twice, then
    0.2 s of every 0.5 s for 5 s; counts the stops made while the node lived."""

    def __init__(self, sim_log: Path):
        super().__init__(daemon=True)
        self.sim_log = sim_log
        self.stops = 0
        self.done = threading.Event()

    def _stop_for(self, pid: int, seconds: float) -> None:
        try:
            os.kill(pid, signal.SIGSTOP)
            self.stops += 1
            time.sleep(seconds)
        finally:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass

    def run(self) -> None:
        deadline = time.monotonic() + 300.0
        while time.monotonic() < deadline and not self.done.is_set():
            if self.sim_log.is_file() and "task reset" in self.sim_log.read_text(errors="replace"):
                break
            time.sleep(0.1)
        pid = _inference_pid()
        if pid is None:
            return
        try:
            for stall_s in (3.0, 3.0):
                self._stop_for(pid, stall_s)
                time.sleep(1.0)
            for _ in range(10):
                self._stop_for(pid, 0.2)
                time.sleep(0.3)
        except ProcessLookupError:
            pass


def test_a_stalled_and_slowed_inference_node_leaves_the_outcome_as_it_was(tmp_path):
    ck = tiny_checkpoint(tmp_path / "ck")

    def run(out: Path, first_seed: int, episodes: int) -> dict:
        argv = ["eval", "--checkpoint", str(ck), "--episodes", str(episodes), "--seed", str(first_seed),
                "--time-limit", "5", "--settle", "0.5", "--lockstep", "--no-videos", "--out", str(out)]  # fmt: skip
        assert sim_cli.main(argv) == 0
        rows = json.loads((out / "report.json").read_text())["episodes"]
        assert [r["seed"] for r in rows] == list(range(first_seed, first_seed + episodes))
        return rows[-1]

    calm = run(tmp_path / "calm", 99999, 2)  # layout 100000 as the second episode of its run
    staller = Staller(tmp_path / "stalled" / "logs" / "sim_node.log")
    staller.start()
    try:
        stalled = run(tmp_path / "stalled", 100000, 1)  # and as the first
    finally:
        staller.done.set()
        staller.join(timeout=30.0)
    assert staller.stops >= 2, "the inference node was never stopped while the episode ran: the test proves nothing"
    assert stalled["outcome"] != "fault" and stalled["fault"] == ""
    assert stalled["wall_s"] > calm["wall_s"] + 3.0, "the stalls did not hold the episode up"
    for key in ("outcome", "duration_s", "place_error_m", "max_lift_m", "chunks", "chunks_rejected"):
        assert stalled[key] == calm[key], f"{key}: {calm[key]!r} undisturbed, {stalled[key]!r} stalled"
