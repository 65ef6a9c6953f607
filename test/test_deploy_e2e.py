"""End to end: ``para-deploy`` runs sim + inference + executor as separate processes over DDS; the arm moves in
response to chunks, no command it was sent breaks a limit of config/yam.yaml, and SIGINT stops everything cleanly.

The launcher is started as a user would (its own process), stopped with SIGINT, and judged by what it leaves: its
recording (every ``/joint_trajectory`` command and ``/joint_states`` message, read back with rosbags), its
summary.json and the node pids. Limits are read here with plain yaml; FK is the i2rt SDK's own (test/executor_helpers).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from executor_helpers import ReferenceKinematics, load_limits
from test_deploy_launcher import pid_gone

from para_ros.dds_env import loopback_dds_env
from para_ros.ros_io.spin import spin_until

REPO = Path(__file__).resolve().parent.parent
ARM_JOINTS = [f"joint{i}" for i in range(1, 7)]
TOL_RAD = 1e-6
TOL_M = 1e-4  # the executor checks its own FK of the same MJCF; allow float noise, not a violation


def read_bag(path: Path):
    from rosbags.rosbag2 import Reader

    from para_ros.bag.recording import make_typestore

    store = make_typestore()
    out = {"/joint_trajectory": [], "/joint_states": [], "/para/action_chunk": []}
    with Reader(path) as reader:
        connections = [c for c in reader.connections if c.topic in out]
        for c, t_ns, raw in reader.messages(connections=connections):
            out[c.topic].append((t_ns, store.deserialize_cdr(raw, c.msgtype)))
    return out


def stamp_ns(header) -> int:
    return header.stamp.sec * 1_000_000_000 + header.stamp.nanosec


class CommandListener:
    """Every ``/joint_trajectory`` command this process receives, with the executor's publication sequence number:
    consecutive numbers are consecutive commands, whatever the delivery did (bunched after a busy moment, or some lost
    by a loaded subscriber), so the speed check counts the executor's ticks truly instead of guessing them from
    receive times. Also the earliest observation stamp (ns) of the action chunks it hears: it subscribes before the
    graph starts, so it holds the first chunk even where the recording's subscription matched after it."""

    def __init__(self):
        import threading

        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import QoSProfile
        from trajectory_msgs.msg import JointTrajectory

        from para_msgs.msg import ActionChunk

        # (publication sequence number, message, its source timestamp: the publisher's system clock, ns)
        self.commands: list[tuple[int, object, int]] = []
        self.first_chunk_stamp_ns: int | None = None
        self.context = rclpy.Context()
        rclpy.init(args=[], context=self.context)
        self.node = rclpy.create_node("e2e_command_listener", context=self.context)
        self.node.create_subscription(JointTrajectory, "/joint_trajectory", self._on_command, QoSProfile(depth=1000))
        self.node.create_subscription(ActionChunk, "/para/action_chunk", self._on_chunk, QoSProfile(depth=10))
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _on_command(self, msg, info) -> None:
        self.commands.append((info["publication_sequence_number"], msg, info["source_timestamp"]))

    def _on_chunk(self, msg) -> None:
        t_ns = stamp_ns(msg.header)
        if self.first_chunk_stamp_ns is None or t_ns < self.first_chunk_stamp_ns:
            self.first_chunk_stamp_ns = t_ns

    def _spin(self) -> None:
        spin_until(self.executor, lambda: not self.context.ok(), on_error="stop")

    def close(self) -> None:
        self.context.try_shutdown()
        self.thread.join(timeout=2.0)


@pytest.mark.slow
@pytest.mark.ros
def test_deploy_graph_moves_the_sim_arm_within_limits_and_stops_cleanly(tmp_path):
    out = tmp_path / "run"
    listener = CommandListener()
    launcher = subprocess.Popen(
        # the untrained model without task resets: its wild chunks exercise the executor's limits (the shipped
        # policy and the task driver are covered by test_sim_record_eval.py's closed-loop test)
        [
            sys.executable,
            "-m",
            "para_ros.commands.deploy",
            "--duration",
            "0",
            "--out",
            str(out),
            "--record-image-period",
            "1.0",
            "--checkpoint",
            "none",
            "--no-task",
        ],
        env={**loopback_dds_env(), "MUJOCO_GL": "egl"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
    )
    lines = []
    try:
        deadline = time.monotonic() + 240
        for line in launcher.stdout:  # progress lines every 10 s: "t= ... s: F scene frames, C chunks, N commands"
            lines.append(line)
            m = re.search(r"(\d+) chunks, (\d+) commands", line)
            if m and int(m.group(1)) >= 30 or time.monotonic() > deadline:
                break
        time.sleep(2.0)
        launcher.send_signal(signal.SIGINT)
        rest, _ = launcher.communicate(timeout=90)
    finally:
        if launcher.poll() is None:
            launcher.kill()
        listener.close()
    text = "".join(lines) + rest
    assert launcher.returncode == 0, text
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stop_reason"] == "SIGINT received"
    # Every node stopped on SIGINT within the shutdown timeout (5 s), none had to be killed, none is left.
    assert set(summary["nodes"]) == {"sim_node", "inference_node", "chunk_executor"}
    for name, node in summary["nodes"].items():
        assert (node["returncode"], node["killed"], node["exited_early"]) == (0, False, False), (name, text)
        assert pid_gone(node["pid"]), f"{name} left behind"

    bag = read_bag(Path(summary["recording"]))
    commands, states, chunks = bag["/joint_trajectory"], bag["/joint_states"], bag["/para/action_chunk"]
    assert len(chunks) >= 10 and len(commands) >= 100 and len(states) >= 100, text

    # --- every command against config/yam.yaml
    limits = load_limits()
    lower, upper = np.array(limits["joint_lower_rad"]), np.array(limits["joint_upper_rad"])
    max_speed = np.array(limits["max_joint_speed_rad_s"])
    box_lo, box_hi = np.array(limits["workspace_min_m"]), np.array(limits["workspace_max_m"])
    executor_yaml = yaml.safe_load((REPO / "config" / "executor.yaml").read_text())
    executor_params = executor_yaml["chunk_executor"]["ros__parameters"]
    period_s = 1.0 / executor_params["control_rate_hz"]
    kin = ReferenceKinematics()
    for _, msg in commands:  # every command the recording holds: within the joint limits and the workspace
        names = list(msg.joint_names)
        assert names[:6] == ARM_JOINTS and len(msg.points) == 1
        q = np.array(msg.points[0].positions[:6])
        assert np.all(q >= lower - TOL_RAD) and np.all(q <= upper + TOL_RAD), f"joint limit broken: {q}"
        p = kin.fk(q)[:3, 3]
        assert np.all(p >= box_lo - TOL_M) and np.all(p <= box_hi + TOL_M), f"tool outside the workspace: {p}"
        g = msg.points[0].positions[names.index("gripper")] if "gripper" in names else None
        if g is not None:
            assert limits["gripper_min"] - 1e-9 <= g <= limits["gripper_max"] + 1e-9
    # Speeds between commands, one control period per published command (the executor publishes one command a tick,
    # each limited against the one before): n periods between two commands whose sequence numbers differ by n.
    # One exception, the executor's restart after lost feedback (the joint state older than joint_state_timeout_s, as a
    # loaded machine can make it): it stops commanding and starts again from the arm's MEASURED joints, so that
    # command is one period's step from a joint state the arm reported just before it (same clock: the simulator
    # stamps its states with the system time, DDS the command's publication), not from the last command.
    measured_ns = np.array([stamp_ns(m.header) for _, m in states])
    measured_q = np.array([[dict(zip(m.name, m.position))[j] for j in ARM_JOINTS] for _, m in states])

    def restarted_from_measured(q: np.ndarray, published_ns: int) -> bool:
        recent = (measured_ns <= published_ns) & (measured_ns >= published_ns - 1_000_000_000)
        step = max_speed * period_s + TOL_RAD
        return bool(np.any(np.all(np.abs(measured_q[recent] - q) <= step, axis=1)))

    heard = sorted(listener.commands, key=lambda c: c[0])
    assert len(heard) >= 100 and heard[0][0] is not None, "the listener heard too few commands, or no sequence numbers"
    prev = None
    restarts = 0
    for seq, msg, published_ns in heard:
        names = list(msg.joint_names)
        q = np.array(msg.points[0].positions[:6])
        p = kin.fk(q)[:3, 3]
        g = msg.points[0].positions[names.index("gripper")] if "gripper" in names else None
        if prev is not None:
            assert seq > prev[0], f"sequence number {seq} twice"
            dt = period_s * (seq - prev[0])
            if not np.all(np.abs(q - prev[1]) <= max_speed * dt + TOL_RAD):
                assert restarted_from_measured(q, published_ns), f"joint speed limit broken at #{seq}"
                restarts += 1
            else:
                assert np.linalg.norm(p - prev[2]) <= limits["max_ee_speed_m_s"] * dt + TOL_M, (
                    f"tool too fast at #{seq}"
                )
                if g is not None and prev[3] is not None:
                    assert abs(g - prev[3]) <= limits["max_gripper_speed_per_s"] * dt + 1e-6
        prev = (seq, q, p, g)
    assert restarts <= 5, (
        f"{restarts} restarts from the measured joints in one minute: feedback was lost again and again"
    )

    # --- the arm stands still until the first chunk, then moves. Judged on the publishers' stamps (the state's time,
    # the chunk's observation: a chunk exists only after its observation), not on when a loaded subscriber ran its
    # callback, and from the earliest chunk either the recording or this process's listener holds.
    chunk_stamps_ns = [stamp_ns(m.header) for _, m in chunks]
    if listener.first_chunk_stamp_ns is not None:
        chunk_stamps_ns.append(listener.first_chunk_stamp_ns)
    # Both may have missed the first chunks (their subscriptions match the inference node, which starts in about 2 s,
    # a little after its first chunks go out); the executor's own reports bound the window too: until one said
    # chunks_received 0, it had none.
    none_yet_ns = [
        stamp_ns(diag.header)
        for _, diag in bag.get("/diagnostics", [])
        for status in diag.status
        if "chunk_executor" in status.name and {kv.key: kv.value for kv in status.values}.get("chunks_received") == "0"
    ]
    first_chunk_ns = min(chunk_stamps_ns + ([max(none_yet_ns)] if none_yet_ns else []))
    arm = [(stamp_ns(m.header), np.array([dict(zip(m.name, m.position))[j] for j in ARM_JOINTS])) for _, m in states]
    before = [q for t, q in arm if t < first_chunk_ns]
    after = [q for t, q in arm if t > first_chunk_ns]
    assert before and after
    start = before[0]
    assert max(np.abs(q - start).max() for q in before) < 0.01, "the arm moved before any chunk"
    assert max(np.abs(q - start).max() for q in after) > 0.05, "the arm did not move in response to the chunks"
    # the untrained model's chunks leave the workspace: the executor clamped them, and says so
    assert (summary["chunks_modified"] or 0) + (summary["commands_limited"] or 0) > 0
    assert summary["untrained_model"] is True and Path(summary["snapshot"]).is_file()

    # --- the recording holds both cameras, so it replays offline through a policy and scores the live chunks
    for mode in (["--random-preset", "tiny", "--max-frames", "6"], ["--recorded-chunks"]):
        eval_out = tmp_path / f"eval_{mode[0].strip('-')}"
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "para_ros.commands.bag",
                "eval",
                summary["recording"],
                *mode,
                "--out",
                str(eval_out),
                "--quiet",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={**loopback_dds_env(), "MUJOCO_GL": "egl"},
            cwd=REPO,
        )
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        metrics = json.loads((eval_out / "metrics.json").read_text())
        assert metrics["chunks_evaluated"] > 0, metrics
