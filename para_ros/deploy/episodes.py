"""One pick-and-place episode through the running graph, as ``para-sim eval`` and ``para-deploy --backend sim`` run
it, and the bookkeeping of its outcomes.

Per episode (seed ``S + k``): ``/chunk_executor/stop`` (the arm holds; chunks are dropped), ``task_seed`` set on
``/sim_node`` and ``/sim_node/reset_task`` called (arm home, cube + pad at the layout), ``settle_s`` of waiting so that
the inference node's end-effector history holds only the new scene, then ``/chunk_executor/resume``: the policy has
the arm until the cube rests released on the pad (``success``, held for ``success_hold_s``) or ``time_limit_s``
passes. ``~/task_state`` (what the simulator sees) is judged by :class:`para_ros.sim.pick_place.EpisodeMonitor`,
which names the cause of a failure. :class:`TaskClient` is the ROS side (service clients and subscriptions, in its own
rclpy context), :func:`run_episode` the procedure, :class:`TaskDriver` runs episodes back to back in a thread.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field

import cv2
import numpy as np
import rclpy
from diagnostic_msgs.msg import DiagnosticArray
from para_msgs.msg import ActionChunk
from rcl_interfaces.srv import SetParameters
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import QoSProfile
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import CameraInfo, Image
from std_msgs.msg import String
from std_srvs.srv import Trigger

from para_ros.observation.camera_model import intrinsics_from_camera_info
from para_ros.ros_io.task_services import call_service, reset_task
from para_ros.sim.pick_place import OUTCOMES, EpisodeMonitor, Judgement, check_seed, wilson_interval


@dataclass
class EpisodeLimits:
    """How long an episode waits and lasts, seconds (each within (0, 600])."""

    time_limit_s: float = 30.0
    settle_s: float = 1.5
    success_hold_s: float = 0.5

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


def summarise(rows: list[EpisodeRow]) -> dict:
    n = len(rows)
    ok = sum(r.outcome == "success" for r in rows)
    lo, hi = wilson_interval(ok, n)
    causes = {o: sum(r.outcome == o for r in rows) for o in OUTCOMES}
    times = [r.duration_s for r in rows if r.outcome == "success"]
    return {"episodes": n, "successes": ok, "success_rate": ok / n if n else 0.0, "wilson95": [lo, hi],
            "outcomes": causes, "median_success_time_s": float(np.median(times)) if times else None}


class TaskClient:
    """The episode procedure's ROS side: service clients, task-state, chunk, image and diagnostics subscriptions."""

    def __init__(self, scene_T_world_cam: np.ndarray):
        # Its own context, no signal handlers: the command that owns this evaluator owns Ctrl-C (para-deploy runs
        # one next to its monitor, which has its own context too).
        self.context = rclpy.Context()
        rclpy.init(context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.rclpy = rclpy
        self.node = Node("para_sim_eval", context=self.context)
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
        self.last_path_world: np.ndarray | None = None
        self.rejected = 0
        self.truncated = 0
        self.record_frames = False
        self.frames: list[np.ndarray] = []
        self.K: np.ndarray | None = None
        self.T_world_cam = scene_T_world_cam
        n.create_subscription(String, "/sim_node/task_state", self._on_state, QoSProfile(depth=50))
        n.create_subscription(ActionChunk, "/para/action_chunk", self._on_chunk, QoSProfile(depth=10))
        n.create_subscription(DiagnosticArray, "/diagnostics", self._on_diag, QoSProfile(depth=20))
        n.create_subscription(Image, "/scene_cam/image_raw", self._on_image, QoSProfile(depth=2))
        n.create_subscription(CameraInfo, "/scene_cam/camera_info", self._on_info, QoSProfile(depth=2))
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(n)
        self._spin = threading.Thread(target=self._spin_forever, daemon=True)
        self._running = True
        self._spin.start()

    def _spin_forever(self):
        while self._running:
            try:
                self.executor.spin_once(timeout_sec=0.05)
            except Exception:  # shutting down
                if not self._running:
                    return

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
        with self.lock:
            self.chunks += 1
            self.last_path_world = path

    def _on_diag(self, msg):
        for st in msg.status:
            if "chunk_executor" not in st.name:
                continue
            for kv in st.values:
                if kv.key in ("chunks_rejected", "chunks_truncated"):
                    try:
                        count = int(kv.value)
                    except ValueError:
                        continue
                    with self.lock:
                        setattr(self, "rejected" if kv.key == "chunks_rejected" else "truncated", count)

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

    # ---- calls
    def call(self, name: str, request=None, timeout_s: float = 10.0):
        return call_service(self.clients[name], request, timeout_s)

    def reset_task(self, seed: int) -> dict:
        return reset_task(self.clients["params"], self.clients["reset"], seed)


def draw_path(rgb: np.ndarray, path_world: np.ndarray | None, K: np.ndarray | None, T_world_cam: np.ndarray
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
    for i, (a, b) in enumerate(zip(pts[:-1], pts[1:])):
        cv2.line(out, a, b, (255, 255, 0), 1, cv2.LINE_AA)
    for i, p in enumerate(pts):
        f = i / max(1, len(pts) - 1)
        cv2.circle(out, p, 2, (int(255 * (1 - f)), 255, int(255 * f)), -1, cv2.LINE_AA)
    return out


def wait_for_first_chunk(ev: TaskClient, graph_run, stop: threading.Event, timeout_s: float) -> None:
    """Until the first action chunk: raise RuntimeError when a node of ``graph_run`` (a ``GraphRun``, or None: a graph
    someone else runs) died, ``stop`` is set or ``timeout_s`` passed."""
    deadline = time.monotonic() + timeout_s
    while ev.chunks == 0:
        dead = graph_run.first_dead() if graph_run is not None else None
        if dead is not None:
            raise RuntimeError(f"{dead.spec.name} exited with status {dead.returncode}:\n{graph_run.log_tail(dead)}")
        if stop.is_set() or time.monotonic() > deadline:
            raise RuntimeError(f"no action chunk within {timeout_s:.0f} s of starting the graph (see the logs)")
        time.sleep(0.1)


def run_episode(ev: TaskClient, settings: EpisodeLimits, k: int, seed: int, stop: threading.Event,
                 record: bool) -> EpisodeRow:
    ev.call("stop")
    layout = ev.reset_task(seed)
    time.sleep(settings.settle_s)
    with ev.lock:
        ev.states.clear()
        chunks0, rejected0, truncated0 = ev.chunks, ev.rejected, ev.truncated
    ev.frames = []
    ev.record_frames = record
    ev.call("resume")
    monitor = EpisodeMonitor()
    t0 = time.monotonic()
    success_since = None
    outcome = None
    while outcome is None:
        time.sleep(0.05)
        with ev.lock:
            states, ev.states = ev.states, []
        now = time.monotonic()
        for st in states:
            if st.get("seed") != seed:
                continue
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
    return EpisodeRow(k, seed, outcome, time.monotonic() - t0, last.place_error_m if last else float("nan"),
                      monitor.max_lift_m, chunks, rejected, layout, truncated)


class TaskDriver(threading.Thread):
    """Pick-and-place episodes back to back against a graph someone else started (``para-deploy --backend sim``):
    the same episode procedure as ``para-sim eval``; ``rows`` holds the finished episodes."""

    def __init__(self, seed: int = 100000, time_limit_s: float = 30.0, settle_s: float = 1.5):
        super().__init__(name="para-task-driver", daemon=True)
        check_seed(seed)
        self.seed = seed
        self.settings = EpisodeLimits(time_limit_s=time_limit_s, settle_s=settle_s)
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
                if self.stop_event.is_set() and row.outcome != "success":
                    break  # cut short by the end of the run: not an attempt
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
        text = (f"  task (pick & place)   {s['episodes']} finished attempts, {s['successes']} successes"
                + (f" (failures: {causes})" if causes else "")
                + (f"; median time to success {s['median_success_time_s']:.1f} s" if s["median_success_time_s"]
                   else ""))
        if self.error:
            text += f"; task driver stopped: {self.error}"
        return text
