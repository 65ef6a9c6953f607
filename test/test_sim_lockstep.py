"""Lockstep over real DDS: the real ``sim_node`` and ``chunk_executor`` (both ``lockstep: true``) in their own
processes, and, in this process, a stand-in for the inference node that answers each camera frame with a chunk
stamped like the inference node stamps them (the frame's stamp), when the test lets it.

- A late answer holds the simulator: while the chunk of a frame is missing, ``/clock`` never passes the frame's time;
  once it comes, the simulator steps again, ``/clock`` on the executor's 0.01 s grid and at every camera frame (in
  batches, rule 7, it goes out only at the instant after each batch).
- A node busy through a reset right after the start (rclpy keeps only the newest ``/clock``) still sees the clock hop
  forward and come back, i.e. a jump back it clears its frames at.
- A frame lost on its way (the stand-in drops its first delivery): the simulator publishes it again after
  ``lockstep_reask_s`` and goes on once its chunk comes.
- A chunk that never comes: the lockstep episode ends as a fault naming the missing chunk, and the next episode
  runs (here to its time limit, the stand-in's chunks being empty).
"""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("rclpy")

import rclpy  # noqa: E402
from rclpy.executors import SingleThreadedExecutor  # noqa: E402
from rclpy.node import Node  # noqa: E402
from rclpy.qos import QoSProfile  # noqa: E402
from ros_helpers import start_python, stop_process, wait_for  # noqa: E402
from rosgraph_msgs.msg import Clock  # noqa: E402
from sensor_msgs.msg import Image  # noqa: E402
from std_srvs.srv import Trigger  # noqa: E402

from para_msgs.msg import ActionChunk  # noqa: E402
from para_ros.ros_io.spin import spin_until  # noqa: E402

pytestmark = pytest.mark.ros

STEP_NS = 10_000_000  # lockstep_step_s 0.01
EPOCH_NS = 1_000_000_000_000  # lockstep's first instant after a reset (para_ros.nodes.lockstep_hooks)
TIMEOUT_S = 8.0  # the simulator's lockstep_timeout_s here (a loaded machine answers slowly)
HOP_HOLD_S = 1.0  # the simulator's lockstep_hop_hold_s here (default 0.3; longer for a loaded test machine)
REASK_S = 0.5  # the simulator's lockstep_reask_s here (default 5)


def ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


class LateInference(Node):
    """Answers every scene frame with an (empty) ActionChunk stamped with the frame's stamp, when ``answer`` is set
    and the frame is older than ``hold_from_ns``; the others are answered at :meth:`flush` once they may be."""

    def __init__(self, context):
        super().__init__("lockstep_test_inference", context=context)
        self.lock = threading.Lock()
        self.answer = False
        self.hold_from_ns = 1 << 62
        self.lose_from_ns = 1 << 62  # the first frame at or after this is "lost" on its first delivery
        self.lost_ns: int | None = None
        self.clocks: list[int] = []
        self.frames: list[int] = []
        self.unanswered: list = []
        self.pub = self.create_publisher(ActionChunk, "/para/action_chunk", QoSProfile(depth=10))
        self.create_subscription(Clock, "/clock", self._on_clock, QoSProfile(depth=1000))
        self.create_subscription(Image, "/scene_cam/image_raw", self._on_image, QoSProfile(depth=10))
        self.reset_client = self.create_client(Trigger, "/sim_node/reset_task")

    def _on_clock(self, msg):
        with self.lock:
            self.clocks.append(ns(msg.clock))

    def _on_image(self, msg):
        with self.lock:
            if ns(msg.header.stamp) >= self.lose_from_ns:
                self.lost_ns, self.lose_from_ns = ns(msg.header.stamp), 1 << 62
                return
            if any(ns(u) == ns(msg.header.stamp) for u in self.unanswered):
                return  # asked for again while its answer is held: the inference node refuses it as not newer
            self.frames.append(ns(msg.header.stamp))
            self.unanswered.append(msg.header.stamp)
        self.flush()

    def flush(self):
        with self.lock:
            if not self.answer:
                return
            stamps = [s for s in self.unanswered if ns(s) < self.hold_from_ns]
            self.unanswered = [s for s in self.unanswered if ns(s) >= self.hold_from_ns]
        for stamp in stamps:
            chunk = ActionChunk()
            chunk.header.stamp = stamp
            chunk.header.frame_id = "base"
            self.pub.publish(chunk)


@pytest.fixture(scope="module")
def rig():
    context = rclpy.Context()
    rclpy.init(context=context)
    node = LateInference(context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    spin = threading.Thread(target=lambda: _spin(executor, context), daemon=True)
    spin.start()
    sim = start_python(
        [
            "para_ros.nodes.sim_node",
            "--ros-args",
            "-p",
            "lockstep:=true",
            "-p",
            "publish_clock:=true",
            "-p",
            "image_width:=64",
            "-p",
            "image_height:=48",
            "-p",
            f"lockstep_timeout_s:={TIMEOUT_S}",
            "-p",
            "lockstep_resend_s:=0.5",
            "-p",
            f"lockstep_reask_s:={REASK_S}",
            "-p",
            f"lockstep_hop_hold_s:={HOP_HOLD_S}",
        ],
        module=True,
    )
    exe = start_python(
        [
            "para_ros.nodes.chunk_executor",
            "--ros-args",
            "-p",
            "lockstep:=true",
            "-p",
            "use_sim_time:=true",
            "-p",
            "auto_engage:=true",
            "-p",
            "control_thread_priority:=0",
        ],
        module=True,
    )
    try:
        assert node.reset_client.wait_for_service(timeout_sec=60.0), "sim_node did not come up"
        assert sim.poll() is None and exe.poll() is None, "a node exited early"
        yield node, sim, exe
    finally:
        for proc in (sim, exe):
            rc, out = stop_process(proc)
            if rc not in (0, None, -2, 130):
                print(out[-3000:])
        context.try_shutdown()
        spin.join(timeout=2.0)


def _spin(executor, context):
    spin_until(executor, lambda: not context.ok(), on_error="stop")


def reset(node) -> None:
    future = node.reset_client.call_async(Trigger.Request())
    wait_for(future.done, 20.0, None, "the task reset")
    assert future.result().success


def test_a_late_chunk_holds_the_simulator_at_its_frame_until_it_comes(rig):
    node, sim, _ = rig
    frame_ns = EPOCH_NS + 300_000_000  # the frame of t = 0.3 s after the reset is answered late
    node.hold_from_ns = frame_ns
    node.answer = True
    reset(node)
    wait_for(lambda: frame_ns in node.frames, 60.0, None, "the camera frame of t = 0.3 s")
    time.sleep(0.3)
    with node.lock:
        node.clocks.clear()
    time.sleep(1.5)  # the answer is late (well within the simulator's lockstep_timeout_s)
    with node.lock:
        held = list(node.clocks)
    assert all(c <= frame_ns for c in held), (
        f"the simulator went on to t={max(held) / 1e9:.3f} s without the chunk of the frame at {frame_ns / 1e9:.3f} s"
    )
    node.hold_from_ns = 1 << 62
    node.flush()
    wait_for(
        lambda: node.clocks and node.clocks[-1] >= frame_ns + 30 * STEP_NS,
        30.0,
        None,
        "the simulator to go on once the chunk came",
    )
    with node.lock:
        after = [c for c in node.clocks if c > frame_ns]
    assert sim.poll() is None
    # In batches (the default, para_ros.sim.lockstep rule 7) /clock goes out at the instant after each batch: on the
    # executor's period grid, increasing, and never past the next camera frame (0.1 s on) without stopping there.
    assert all((c - frame_ns) % STEP_NS == 0 for c in after), "instants off the executor's period grid"
    assert all(b > a for a, b in zip(after[:-1], after[1:])), "the clock went back or repeated an instant"
    assert after[0] <= frame_ns + 10 * STEP_NS, "the first batch after the chunk passed the next camera frame"
    assert all(
        (a - EPOCH_NS) // (10 * STEP_NS) == (b - EPOCH_NS - 1) // (10 * STEP_NS) for a, b in zip(after[:-1], after[1:])
    ), "a batch passed a camera frame (every 0.1 s) without publishing its instant"


def test_a_lost_frame_is_asked_for_again_and_the_episode_goes_on(rig):
    """A frame that never reached the inference node (best-effort sensor data on a busy machine) would leave the
    simulator waiting until its timeout; it publishes the frame again (same stamp) and goes on once answered."""
    node, sim, _ = rig
    node.hold_from_ns = 1 << 62
    node.answer = False  # the simulator holds at the reset's first frame: nothing of the earlier test in flight
    with node.lock:
        node.frames.clear()
    reset(node)
    wait_for(lambda: EPOCH_NS in node.frames, 30.0, None, "the first frame after the reset")
    node.lose_from_ns = EPOCH_NS + 200_000_000
    node.answer = True
    node.flush()
    wait_for(lambda: node.lost_ns is not None, 30.0, None, "the frame to lose")
    frame_ns = node.lost_ns
    wait_for(
        lambda: node.clocks and node.clocks[-1] >= frame_ns + 20 * STEP_NS,
        TIMEOUT_S - 1.0,
        None,
        "the simulator to go on past the lost frame (asked for again, well before its lockstep_timeout_s)",
    )
    assert node.frames.count(frame_ns) == 1, "the frame came again and was answered once"
    assert sim.poll() is None


def test_a_chunk_that_never_comes_ends_the_episode_as_a_fault_and_the_evaluation_goes_on(rig):
    from para_ros.deploy.closed_loop import EvalSettings
    from para_ros.deploy.episodes import TaskClient, run_lockstep_episode
    from para_ros.sim.yam_scene import SimConfig

    node, sim, _ = rig
    settings = EvalSettings(
        checkpoint="", episodes=2, seed=100000, time_limit_s=0.5, settle_s=0.2, videos=False, lockstep=True
    )
    ev = TaskClient(SimConfig().scene_cam_T_world_cam())
    stop = threading.Event()
    try:
        node.answer = False
        silent = run_lockstep_episode(ev, settings, 0, 100000, stop, False, timeout_s=TIMEOUT_S)
        node.answer = True
        node.flush()
        answered = run_lockstep_episode(ev, settings, 1, 100001, stop, False, timeout_s=TIMEOUT_S)
    finally:
        ev.close()
    assert silent.outcome == "fault"
    assert "the chunk predicted from the camera frame of t=1000.000 s" in silent.fault
    assert f"within {TIMEOUT_S:g} s of wall time" in silent.fault
    assert answered.outcome != "fault" and answered.fault == ""
    assert answered.duration_s == pytest.approx(0.5, abs=0.011)  # ran to its time limit, in simulated seconds
    assert sim.poll() is None


def test_a_node_busy_through_a_reset_still_sees_the_clock_jump_back(rig):
    """A reset while the simulator is still within 1 s of the epoch would restart at stamps the nodes have seen; it
    hops /clock forward first. rclpy's own clock subscription keeps only the newest message (depth 1, best effort):
    were the hop and the way back sent together, a node busy meanwhile (the inference node running its model) would
    read only the way back, see no jump, and drop every new frame as not newer (the episode then faults)."""
    from rclpy.qos import ReliabilityPolicy

    node, sim, _ = rig
    node.answer = False  # the simulator stays at the first instant of the reset below
    reset(node)
    busy_context = rclpy.Context()
    rclpy.init(context=busy_context)
    busy = Node("lockstep_test_busy", context=busy_context)
    seen: list[int] = []
    busy.create_subscription(
        Clock,
        "/clock",
        lambda m: seen.append(ns(m.clock)),
        QoSProfile(depth=1, reliability=ReliabilityPolicy.BEST_EFFORT),
    )
    busy_executor = SingleThreadedExecutor(context=busy_context)
    busy_executor.add_node(busy)
    try:
        spin_until(busy_executor, lambda: bool(seen) and seen[-1] == EPOCH_NS, 30.0)
        assert seen and seen[-1] == EPOCH_NS, "the busy node never read the first instant"
        seen.clear()
        reset(node)
        time.sleep(0.2 * HOP_HOLD_S)  # busy: reads nothing meanwhile (its queue keeps the newest /clock only)
        spin_until(busy_executor, lambda: False, 3.0 * HOP_HOLD_S)  # spin for that long: read what comes
    finally:
        busy_executor.shutdown()
        busy.destroy_node()
        busy_context.try_shutdown()
    assert seen, "the busy node read no /clock after the reset"
    assert seen[0] >= EPOCH_NS + 500_000_000, (
        f"after the reset the busy node first read t={seen[0] / 1e9:.3f} s: the hop forward was gone already"
    )
    assert EPOCH_NS in seen[1:], "the clock did not come back to the first instant after the hop"
    assert sim.poll() is None
