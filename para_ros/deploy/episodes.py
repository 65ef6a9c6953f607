"""One pick-and-place episode through the running graph, as ``para-sim eval`` and ``para-deploy --robot sim`` run
it, and the bookkeeping of its outcomes.

Per episode (seed ``S + k``): ``/chunk_executor/stop`` (the arm holds; chunks are dropped), ``task_seed`` set on
``/sim_node`` and ``/sim_node/reset_task`` called (arm home, cube + pad at the layout), ``settle_s`` of waiting so that
the inference node's end-effector history holds only the new scene, then ``/chunk_executor/resume``: the policy has
the arm until the cube rests released on the pad (``success``, held for ``success_hold_s``) or ``time_limit_s``
passes. ``~/task_state`` (what the simulator sees) is judged by :class:`para_ros.sim.pick_place.EpisodeMonitor`,
which names the cause of a failure. :class:`TaskClient` is the ROS side (service clients and subscriptions, in its own
rclpy context), :func:`run_episode` the procedure, :class:`TaskDriver` runs episodes back to back in a thread.

Lockstep (``para-sim eval --lockstep``, ``para-deploy --robot sim --lockstep``; :func:`run_lockstep_episode`): the
same procedure on simulated time. Every moment that decides the outcome is a simulated instant, so the episode does
not depend on how fast this machine answers:

1. ``/chunk_executor/stop``; ``lockstep_run_until_s`` = ``settle_s`` (the simulator holds where it is), then the task
   reset (simulated time restarts at 0);
2. the simulator runs to ``settle_s`` and holds there; the evaluator waits until ``~/task_state`` says it is held with
   every answer for that instant in (``lockstep_held``), then calls ``/chunk_executor/resume``: the executor takes
   the arm between two simulated instants, always the same two;
3. ``lockstep_run_until_s`` = ``settle_s + time_limit_s``; the episode is judged on the task states' simulated times:
   success once the cube has rested released on the pad for ``success_hold_s`` of simulated time, else the outcome
   at the time limit (:class:`para_ros.sim.pick_place.EpisodeMonitor`);
4. ``fault`` when the simulator reports a lockstep fault (an answer that did not come within its wall-time limit; the
   reason is kept in the row) or stops publishing altogether; the evaluation goes on with the next episode.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import cv2
import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from rcl_interfaces.msg import Parameter, ParameterType, ParameterValue
from rcl_interfaces.srv import SetParameters
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import String
from std_srvs.srv import Trigger

from para_msgs.msg import ActionChunk
from para_ros.deploy.supervisor_table import held_at_s
from para_ros.execution.chunk import MEASURE_FIELDS
from para_ros.execution.executor_diagnostics import state_and_activity
from para_ros.execution.executor_state import ExecutorState, TickActivity
from para_ros.observation.camera_model import intrinsics_from_camera_info
from para_ros.ros_io.spin import spin_until
from para_ros.ros_io.task_services import call_service, reset_task
from para_ros.sim.lockstep import DEFAULT_TIMEOUT_S
from para_ros.sim.pick_place import OUTCOMES, EpisodeMonitor, Judgement, check_seed, wilson_interval
from para_ros.stamps import stamp_to_ns

# Lockstep episodes (run_lockstep_episode):
HALF_STEP_S = 0.005  # simulated instants are compared with half the simulator's 0.01 s step of slack
SILENT_MARGIN_S = 30.0  # wall seconds beyond the simulator's own answer timeout before a silent simulator is a fault
DIAGNOSTICS_WAIT_S = 0.6  # the executor's counters come on /diagnostics at 2 Hz: wait for one after a time limit


@dataclass
class EpisodeLimits:
    """How long an episode waits and lasts, seconds (each within (0, 600])."""

    time_limit_s: float = 30.0
    settle_s: float = 1.5
    success_hold_s: float = 0.5
    lockstep: bool = False  # simulated time (:func:`run_lockstep_episode`): the times above are simulated seconds
    lockstep_timeout_s: float = DEFAULT_TIMEOUT_S  # the simulator's lockstep_timeout_s (wall s)

    def __post_init__(self):
        for name in ("time_limit_s", "settle_s", "success_hold_s"):
            if not 0 < float(getattr(self, name)) <= 600:
                raise ValueError(f"{name} = {getattr(self, name)} must be within (0, 600] s")


@dataclass
class EpisodeRow:
    episode: int
    seed: int
    outcome: str
    duration_s: float
    place_error_m: float
    max_lift_m: float
    chunks: int
    chunks_rejected: int
    layout: dict = field(default_factory=dict)
    chunks_truncated: int = 0
    fault: str = ""  # why the episode ended as a fault (lockstep: the answer that never came)
    wall_s: float = float("nan")  # wall time of the whole episode (reset to judgement)
    # The confidence supervisor's first hold after the hand-over, as /diagnostics said it: episode time (s since the
    # task reset, the simulator's clock; None: never held) and the reason it named (``confidence_problem``).
    held_uncertain_at_s: float | None = None
    hold_reason: str = ""

    @classmethod
    def from_report(cls, row: dict) -> EpisodeRow:
        """A row as ``report.json`` holds it."""
        r = cls(**row)
        r.held_uncertain_at_s = held_at_s(row)
        return r


def cut_short(row: EpisodeRow, stop: threading.Event) -> bool:
    """Whether an episode ended because the run was stopped (Ctrl-C, the end of a deploy run) rather than judged: it
    is not an attempt and goes into no report. A success stands (it was judged before the stop counted)."""
    return stop.is_set() and row.outcome != "success"


def summarise(rows: list[EpisodeRow]) -> dict:
    """Success rate and outcome counts of ``rows``. A ``fault`` (the evaluation's own failure: an answer of the graph
    that never came) is no attempt of the policy: it is counted under ``faults`` and left out of ``episodes`` and of
    the rate; ``--continue`` runs its layout again."""
    judged = [r for r in rows if r.outcome != "fault"]
    n = len(judged)
    ok = sum(r.outcome == "success" for r in judged)
    lo, hi = wilson_interval(ok, n)
    causes = {o: sum(r.outcome == o for r in rows) for o in OUTCOMES}
    times = [r.duration_s for r in rows if r.outcome == "success"]
    return {
        "episodes": n,
        "faults": len(rows) - n,
        "successes": ok,
        "success_rate": ok / n if n else 0.0,
        "wilson95": [lo, hi],
        "outcomes": causes,
        "median_success_time_s": float(np.median(times)) if times else None,
        # episodes in which the confidence supervisor held the arm (as /diagnostics said), by outcome
        "held_uncertain": sum(r.held_uncertain_at_s is not None for r in judged),
        "held_uncertain_successes": sum(r.held_uncertain_at_s is not None and r.outcome == "success" for r in judged),
    }


MAX_CONFIDENCE_RECORDS = 20000  # chunks' confidence records kept between two takes (an hour at 5 chunks/s)


class TaskClient:
    """The episode procedure's ROS side: service clients, task-state, chunk, image and diagnostics subscriptions."""

    def __init__(self, scene_T_world_cam: np.ndarray, domain_id: int | None = None, videos: bool = True):
        # Its own context, no signal handlers: the command that owns this evaluator owns Ctrl-C (para-deploy runs
        # one next to its monitor, which has its own context too). ``domain_id``: the graph's DDS domain when it is
        # not this process's (``para-sim eval --compare`` runs one graph per domain). ``videos``: False leaves the
        # scene camera unsubscribed (no frames can be recorded; each image costs this process a deserialisation).
        self.context = rclpy.Context()
        rclpy.init(
            args=[],  # the command's own argv (e.g. --node-param NODE:NAME:=VALUE) is not ROS arguments
            context=self.context,
            signal_handler_options=SignalHandlerOptions.NO,
            **({} if domain_id is None else {"domain_id": int(domain_id)}),
        )
        self.rclpy = rclpy
        # No parameter services: nobody sets this client's parameters, and rclpy polls each service at every wake.
        self.node = Node("para_sim_eval", context=self.context, start_parameter_services=False)
        n = self.node
        self.clients = {
            "stop": n.create_client(Trigger, "/chunk_executor/stop"),
            "resume": n.create_client(Trigger, "/chunk_executor/resume"),
            "reset": n.create_client(Trigger, "/sim_node/reset_task"),
            "params": n.create_client(SetParameters, "/sim_node/set_parameters"),
        }
        self.lock = threading.Lock()
        self.states: list[dict] = []
        self.chunks = 0
        self.chunk_stamps_ns: deque[int] = deque(maxlen=MAX_CONFIDENCE_RECORDS)  # each chunk's stamp (its frame's)
        self.last_path_world: np.ndarray | None = None
        # every chunk's confidence measures (confidence_record), and where the running episode's chunks start
        self.chunk_confidence: list[dict] = []
        self.episode_chunks_from = 0
        self.rejected = 0
        self.truncated = 0
        # (stamp s on the graph's clock, reason) of every executor diagnostics report while it held for uncertainty
        self.holds: list[tuple[float, str]] = []
        self.camera_problem = ""  # the inference node's latest refused camera ("" while every camera is fine)
        self.executor_activity = ""  # the executor's latest reported activity (``activity`` on /diagnostics)
        self.record_frames = False
        self.frames: list[np.ndarray] = []
        self.K: np.ndarray | None = None
        self.T_world_cam = scene_T_world_cam
        n.create_subscription(String, "/sim_node/task_state", self._on_state, QoSProfile(depth=500))
        n.create_subscription(ActionChunk, "/para/action_chunk", self._on_chunk, QoSProfile(depth=10))
        n.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, QoSProfile(depth=20))
        if videos:
            n.create_subscription(Image, "/scene_cam/image_raw", self._on_image, QoSProfile(depth=2))
            n.create_subscription(CameraInfo, "/scene_cam/camera_info", self._on_info, QoSProfile(depth=2))
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(n)
        self._spin = threading.Thread(target=self._spin_forever, daemon=True)
        self._running = True
        self._spin.start()

    def _spin_forever(self):
        spin_until(self.executor, lambda: not self._running, period_s=0.05, on_error="continue")

    def close(self):
        self._running = False
        self._spin.join(timeout=2.0)
        self.node.destroy_node()
        self.rclpy.try_shutdown(context=self.context)

    # ---- callbacks
    def _on_state(self, msg):
        with self.lock:
            self.states.append(json.loads(msg.data))

    def _on_chunk(self, msg):
        path = np.array([[p.position.x, p.position.y, p.position.z] for p in msg.poses], dtype=np.float64)
        record = confidence_record(msg)
        with self.lock:
            self.chunks += 1
            self.chunk_stamps_ns.append(stamp_to_ns(msg.header.stamp))
            self.last_path_world = path
            self.chunk_confidence.append(record)
            if len(self.chunk_confidence) > MAX_CONFIDENCE_RECORDS:  # nobody takes them (a long deploy run)
                drop = len(self.chunk_confidence) // 2
                del self.chunk_confidence[:drop]
                self.episode_chunks_from = max(0, self.episode_chunks_from - drop)

    def _on_diag(self, msg):
        """/diagnostics: the executor's counts and its holds with a named reason: the confidence supervisor's, or a
        hold for want of chunks while the inference node withholds them (:func:`withheld_chunks_problem`), recorded at
        the later of the two reports (each node reports a new problem or hold at once, and again once a second)."""
        stamp_s = msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9
        for st in msg.status:
            values = {kv.key: kv.value for kv in st.values}
            with self.lock:
                reason = ""
                if "inference_node" in st.name:
                    self.camera_problem = withheld_chunks_problem(values)
                    if self.camera_problem and self.executor_activity == TickActivity.HOLD_STALE:
                        reason = self.camera_problem
                elif "chunk_executor" in st.name:
                    state, self.executor_activity = state_and_activity(values)  # also a recording's older keys
                    if state == ExecutorState.HOLDING_UNCERTAIN.value:
                        reason = values.get("confidence_problem", "")
                    elif self.executor_activity == TickActivity.HOLD_STALE and self.camera_problem:
                        reason = self.camera_problem
                if reason:
                    self.holds.append((stamp_s, reason))
                    del self.holds[: max(0, len(self.holds) - MAX_CONFIDENCE_RECORDS)]
            if "chunk_executor" not in st.name:
                continue
            for key, attr in (("chunks_rejected", "rejected"), ("chunks_truncated", "truncated")):
                try:
                    count = int(values[key])
                except (KeyError, ValueError):
                    continue
                with self.lock:
                    setattr(self, attr, count)

    def _on_info(self, msg):
        with self.lock:
            self.K = intrinsics_from_camera_info(msg, msg.width, msg.height)

    def _on_image(self, msg):
        if not self.record_frames:
            return
        rgb = np.frombuffer(bytes(msg.data), dtype=np.uint8).reshape(msg.height, msg.width, 3).copy()
        with self.lock:
            path, K = self.last_path_world, self.K
        self.frames.append(draw_path(rgb, path, K, self.T_world_cam))

    def first_hold(self, clock_offset_s: float | None, since_s: float) -> tuple[float | None, str]:
        """(episode time s, reason) of the first uncertainty hold reported since :meth:`forget_holds` at or after
        episode time ``since_s`` (the hand-over); (None, "") when none. ``clock_offset_s``: the graph's clock minus
        the episode time (:func:`clock_offset`), None: unknown."""
        with self.lock:
            holds = list(self.holds)
        if clock_offset_s is None:
            return None, ""
        holds = [(t - clock_offset_s, reason) for t, reason in holds if t - clock_offset_s >= since_s - HALF_STEP_S]
        return min(holds) if holds else (None, "")

    def forget_holds(self) -> None:
        with self.lock:
            self.holds = []
            self.camera_problem = self.executor_activity = ""

    def take_episode_confidence(self) -> list[dict]:
        """The confidence records of the chunks since the running episode handed the arm over (and forget all)."""
        with self.lock:
            records = self.chunk_confidence[self.episode_chunks_from :]
            self.chunk_confidence, self.episode_chunks_from = [], 0
        return records

    # ---- calls
    def call(self, name: str, request=None, timeout_s: float = 10.0):
        return call_service(self.clients[name], request, timeout_s)

    def reset_task(self, seed: int) -> dict:
        return reset_task(self.clients["params"], self.clients["reset"], seed)


def confidence_record(msg) -> dict:
    """One chunk's confidence measures as the evaluation writes them (``confidence.jsonl``): the observation stamp
    (s, the graph's clock) and each measure's per-step values (docs/confidence.md; empty: not measured)."""
    return {
        "stamp_s": msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9,
        "peak_mass": [round(float(v), 6) for v in msg.confidence],
        **{name: [round(float(v), 6) for v in getattr(msg, name)] for name in MEASURE_FIELDS},
    }


def draw_path(
    rgb: np.ndarray, path_world: np.ndarray | None, K: np.ndarray | None, T_world_cam: np.ndarray
) -> np.ndarray:
    """The scene image with the predicted path (world points, para_core pixel convention K) drawn in."""
    out = np.ascontiguousarray(rgb.copy())
    if path_world is None or K is None or len(path_world) == 0:
        return out
    T_cam_world = np.linalg.inv(T_world_cam)
    p_cam = path_world @ T_cam_world[:3, :3].T + T_cam_world[:3, 3]  # (T, 3)
    if np.any(p_cam[:, 2] <= 1e-6):
        return out
    uv = p_cam[:, :2] / p_cam[:, 2:3] * [K[0, 0], K[1, 1]] + [K[0, 2], K[1, 2]]  # (T, 2), centres at +0.5
    pts = [(int(round(u - 0.5)), int(round(v - 0.5))) for u, v in uv]
    for a, b in zip(pts[:-1], pts[1:]):
        cv2.line(out, a, b, (255, 255, 0), 1, cv2.LINE_AA)
    for i, p in enumerate(pts):
        f = i / max(1, len(pts) - 1)
        cv2.circle(out, p, 2, (int(255 * (1 - f)), 255, int(255 * f)), -1, cv2.LINE_AA)
    return out


# Before the first episode a lockstep simulator holds at its first instant (lockstep_run_until_s 0) once that frame is
# answered: a first chunk this process missed (its subscription matched the inference node after the chunk went out)
# would never be followed by another. Every LOCKSTEP_NUDGE_AFTER_S of wall time without one, the simulator is let run
# LOCKSTEP_NUDGE_S of simulated time further, to the next frame and its chunk; each episode's reset restarts its time.
LOCKSTEP_NUDGE_AFTER_S = 5.0
LOCKSTEP_NUDGE_S = 0.1


def wait_for_first_chunk(
    ev: TaskClient,
    graph_run,
    stop: threading.Event,
    timeout_s: float,
    lockstep: bool = False,
    nudge_after_s: float = LOCKSTEP_NUDGE_AFTER_S,
) -> None:
    """Until the first action chunk, or until ``stop`` is set (the caller sees it: an interrupted run, not an error);
    raise RuntimeError when a node of ``graph_run`` (a ``GraphRun``, or None: a graph someone else runs) died or
    ``timeout_s`` passed. ``lockstep``: the simulator is let run on while no chunk comes (the comment above)."""
    start = time.monotonic()
    deadline = start + timeout_s
    nudges = 0
    while ev.chunks == 0 and not stop.is_set():
        dead = graph_run.first_dead() if graph_run is not None else None
        if dead is not None:
            raise RuntimeError(f"{dead.spec.name} exited with status {dead.returncode}:\n{graph_run.log_tail(dead)}")
        now = time.monotonic()
        if now > deadline:
            raise RuntimeError(f"no action chunk within {timeout_s:.0f} s of starting the graph (see the logs)")
        if lockstep and now - start >= (nudges + 1) * nudge_after_s:
            nudges += 1
            set_run_until(ev, nudges * LOCKSTEP_NUDGE_S)
        time.sleep(0.1)


def episode_chunks(stamps_ns, offset_s: float, start_s: float, end_s: float) -> int:
    """Lockstep: how many of the chunks stamped ``stamps_ns`` (their frames' stamps, on the graph's clock; those that
    came after the hand-over) were predicted from the frames strictly between episode times ``start_s`` (the
    hand-over) and ``end_s`` (``offset_s``: graph clock minus episode time, :func:`clock_offset`). Counted by stamp,
    the figure is the simulated episode's alone: the chunks of the hand-over frame and of the frame at the end reach
    the evaluator before or after it counts, as the machine goes; every other one has come by then (the simulator
    passes a frame's chunk latency only with the chunk at the executor)."""
    return sum(start_s + HALF_STEP_S < s * 1e-9 - offset_s < end_s - HALF_STEP_S for s in stamps_ns)


def clock_offset(state: dict) -> float | None:
    """The graph's clock minus the episode time (s) read off one ``~/task_state`` (None when it lacks either)."""
    if "stamp_ns" not in state or "sim_time_s" not in state:
        return None
    return int(state["stamp_ns"]) * 1e-9 - float(state["sim_time_s"])


def run_episode(
    ev: TaskClient, settings: EpisodeLimits, k: int, seed: int, stop: threading.Event, record: bool
) -> EpisodeRow:
    """Episode ``k`` (layout ``seed``) on the wall clock, or in lockstep when ``settings.lockstep``."""
    if settings.lockstep:
        return run_lockstep_episode(ev, settings, k, seed, stop, record, settings.lockstep_timeout_s)
    wall0 = time.monotonic()
    ev.call("stop")
    layout = ev.reset_task(seed)
    time.sleep(settings.settle_s)
    with ev.lock:
        ev.states.clear()
        chunks0, rejected0, truncated0 = ev.chunks, ev.rejected, ev.truncated
        ev.episode_chunks_from = len(ev.chunk_confidence)  # the episode's chunks: from the hand-over on
    ev.frames = []
    ev.record_frames = record
    ev.forget_holds()
    ev.call("resume")
    monitor = EpisodeMonitor()
    t0 = time.monotonic()
    success_since = None
    outcome = None
    offset_s, handover_s = None, None
    while outcome is None:
        time.sleep(0.05)
        with ev.lock:
            states, ev.states = ev.states, []
        now = time.monotonic()
        for st in states:
            if st.get("seed") != seed:
                continue
            offset_s = clock_offset(st) if offset_s is None else offset_s
            handover_s = st.get("sim_time_s", 0.0) if handover_s is None else handover_s
            j = monitor.update(Judgement(st["state"], st["place_error_m"], st["cube_height_m"], st["held"]))
            if j.success:
                success_since = success_since if success_since is not None else now
            else:
                success_since = None
        if success_since is not None and now - success_since >= settings.success_hold_s:
            outcome = "success"
        elif now - t0 >= settings.time_limit_s or stop.is_set():
            with ev.lock:
                chunks, rejected = ev.chunks - chunks0, ev.rejected - rejected0
            outcome = monitor.outcome(limits_hit=chunks > 0 and rejected > 0.5 * chunks)
    ev.record_frames = False
    with ev.lock:
        chunks, rejected, truncated = ev.chunks - chunks0, ev.rejected - rejected0, ev.truncated - truncated0
    last = monitor.last
    held_at_s, hold_reason = ev.first_hold(offset_s, handover_s or 0.0)
    return EpisodeRow(
        k,
        seed,
        outcome,
        time.monotonic() - t0,
        last.place_error_m if last else float("nan"),
        monitor.max_lift_m,
        chunks,
        rejected,
        layout,
        truncated,
        wall_s=time.monotonic() - wall0,
        held_uncertain_at_s=held_at_s,
        hold_reason=hold_reason,
    )


def set_run_until(ev, run_until_s: float, timeout_s: float = 10.0) -> None:
    """Set ``lockstep_run_until_s`` on ``/sim_node`` (RuntimeError when refused)."""
    req = SetParameters.Request()
    req.parameters = [
        Parameter(
            name="lockstep_run_until_s",
            value=ParameterValue(type=ParameterType.PARAMETER_DOUBLE, double_value=float(run_until_s)),
        )
    ]
    res = ev.call("params", req, timeout_s)
    if not res.results[0].successful:
        raise RuntimeError(
            f"sim_node refused lockstep_run_until_s={run_until_s}: {res.results[0].reason} (is it "
            "running with lockstep:=true?)"
        )


def _next_states(ev, seed: int) -> list[dict]:
    with ev.lock:
        states, ev.states = ev.states, []
    return [st for st in states if st.get("seed") == seed]


def run_lockstep_episode(ev, settings, k: int, seed: int, stop, record: bool, timeout_s: float = 60.0):
    """Episode ``k`` (layout ``seed``) in lockstep; an :class:`EpisodeRow` whose
    ``duration_s`` is simulated time and ``wall_s`` the wall time the episode took. ``timeout_s``: the simulator's
    ``lockstep_timeout_s`` (a simulator silent for that plus a margin is a fault)."""
    wall0 = time.monotonic()
    ev.call("stop")
    set_run_until(ev, settings.settle_s)
    with ev.lock:
        ev.states.clear()
    layout = ev.reset_task(seed)
    silent_s = timeout_s + SILENT_MARGIN_S
    fault = ""
    # 2. run to the settle time, hand the arm over there
    last_heard = time.monotonic()
    held = False
    while not held and not fault:
        if stop.is_set():
            break
        time.sleep(0.02)
        for st in _next_states(ev, seed):
            last_heard = time.monotonic()
            fault = fault or st.get("lockstep_fault", "")
            held = held or (st.get("lockstep_held", False) and st["sim_time_s"] >= settings.settle_s - HALF_STEP_S)
        if time.monotonic() - last_heard > silent_s:
            fault = f"lockstep: the simulator published no task state for {silent_s:.0f} s of wall time"
    with ev.lock:
        chunks0, rejected0, truncated0 = ev.chunks, ev.rejected, ev.truncated
        ev.chunk_stamps_ns.clear()
        ev.episode_chunks_from = len(ev.chunk_confidence)  # the episode's chunks: from the hand-over on
    ev.frames = []
    ev.record_frames = record
    start_s = settings.settle_s
    end_s = settings.settle_s + settings.time_limit_s
    monitor = EpisodeMonitor()
    success_since = None
    outcome = None
    sim_now = start_s
    offset_s = None
    ev.forget_holds()
    if not fault and not stop.is_set():
        ev.call("resume")
        set_run_until(ev, end_s)
        last_heard = time.monotonic()
    while outcome is None and not fault:
        if stop.is_set():
            break
        time.sleep(0.02)
        for st in _next_states(ev, seed):
            last_heard = time.monotonic()
            if st.get("lockstep_fault"):
                fault = st["lockstep_fault"]
                break
            if st["sim_time_s"] < start_s - HALF_STEP_S:
                continue
            offset_s = clock_offset(st) if offset_s is None else offset_s
            sim_now = st["sim_time_s"]
            j = monitor.update(Judgement(st["state"], st["place_error_m"], st["cube_height_m"], st["held"]))
            if j.success:
                success_since = sim_now if success_since is None else success_since
            else:
                success_since = None
            if success_since is not None and sim_now - success_since >= settings.success_hold_s - HALF_STEP_S:
                outcome = "success"
                break
            if sim_now >= end_s - HALF_STEP_S:
                time.sleep(DIAGNOSTICS_WAIT_S)  # the executor's rejection count at the limit, for "limits"
                with ev.lock:
                    chunks, rejected = ev.chunks - chunks0, ev.rejected - rejected0
                outcome = monitor.outcome(limits_hit=chunks > 0 and rejected > 0.5 * chunks)
                break
        if outcome is None and not fault and time.monotonic() - last_heard > silent_s:
            fault = f"lockstep: the simulator published no task state for {silent_s:.0f} s of wall time"
    if stop.is_set() and outcome is None and not fault:
        outcome = monitor.outcome()
    ev.record_frames = False
    try:
        set_run_until(ev, 0.0)  # hold the simulator until the next episode
    except RuntimeError:
        pass
    with ev.lock:
        chunks, rejected, truncated = ev.chunks - chunks0, ev.rejected - rejected0, ev.truncated - truncated0
        if offset_s is not None:  # by stamp: which chunks had come by the time the count was taken is the machine's
            chunks = episode_chunks(ev.chunk_stamps_ns, offset_s, start_s, sim_now)
    last = monitor.last
    held_at_s, hold_reason = ev.first_hold(offset_s, start_s)
    return EpisodeRow(
        k,
        seed,
        "fault" if fault else outcome,
        max(0.0, sim_now - start_s),
        last.place_error_m if last else float("nan"),
        monitor.max_lift_m,
        chunks,
        rejected,
        layout,
        truncated,
        fault=fault,
        wall_s=time.monotonic() - wall0,
        held_uncertain_at_s=held_at_s,
        hold_reason=hold_reason,
    )


class TaskDriver(threading.Thread):
    """Pick-and-place episodes back to back against a graph someone else started (``para-deploy --robot sim``):
    the same episode procedure as ``para-sim eval``; ``rows`` holds the finished episodes."""

    def __init__(self, seed: int = 100000, time_limit_s: float = 30.0, settle_s: float = 1.5, lockstep: bool = False):
        super().__init__(name="para-task-driver", daemon=True)
        check_seed(seed)
        self.seed = seed
        self.settings = EpisodeLimits(time_limit_s=time_limit_s, settle_s=settle_s, lockstep=lockstep)
        from para_ros.sim.yam_scene import SimConfig  # mujoco: para-deploy on a real arm never loads the simulator

        self.T_cam = SimConfig().scene_cam_T_world_cam()
        self.stop_event = threading.Event()
        self.rows: list[EpisodeRow] = []
        self.error: str | None = None

    def run(self) -> None:
        ev = None
        try:
            ev = TaskClient(self.T_cam)
            wait_for_first_chunk(ev, None, self.stop_event, timeout_s=300.0)
            k = 0
            while not self.stop_event.is_set():
                row = run_episode(ev, self.settings, k, self.seed + k, self.stop_event, False)
                if cut_short(row, self.stop_event):
                    break
                self.rows.append(row)
                k += 1
        except Exception as exc:  # report in the summary, never take the launcher down
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            if ev is not None:
                ev.close()

    def summary_line(self) -> str:
        s = summarise(self.rows)
        causes = ", ".join(f"{o} {n}" for o, n in s["outcomes"].items() if n and o != "success")
        text = (
            f"  task (pick & place)   {s['episodes']} finished attempts, {s['successes']} successes"
            + (f" (failures: {causes})" if causes else "")
            + (f"; median time to success {s['median_success_time_s']:.1f} s" if s["median_success_time_s"] else "")
        )
        if self.error:
            text += f"; task driver stopped: {self.error}"
        return text


def withheld_chunks_problem(values: dict[str, str]) -> str:
    """The inference node's reason to withhold chunks in its /diagnostics values, named for a hold: a refused camera
    (``problem.camera.<view>``, the first by name) or an unfamiliar scene (``problem.familiarity``); "" when none."""
    cameras = sorted(v for k, v in values.items() if k.startswith("problem.camera."))
    if cameras:
        return f"camera: {cameras[0]}"
    familiarity = values.get("problem.familiarity", "")
    return f"familiarity: {familiarity}" if familiarity else ""
