"""Closed-loop evaluation of a checkpoint on the pick-and-place task through the real nodes (``para-sim eval``).

The graph is the deploy graph of ``para_ros.deploy.graph`` (``sim_node``, ``inference_node`` with the checkpoint,
``chunk_executor`` on the sim backend), each node its own process on the loopback DDS environment, plus a small
evaluator node in this process. Per episode (seed ``S + k``):

1. ``/chunk_executor/stop`` (the arm holds; chunks are dropped),
2. ``task_seed`` set on ``/sim_node`` and ``/sim_node/reset_task`` called (arm home, cube + pad at the layout),
3. ``settle_s`` of waiting so that the inference node's end-effector history holds only the new scene,
4. ``/chunk_executor/resume``; the policy then has the arm until the cube rests released on the pad (``success``,
   held for ``success_hold_s``) or ``time_limit_s`` passes. ``~/task_state`` (what the simulator sees) is judged
   by :class:`para_ros.sim.pick_place.EpisodeMonitor`, which names the cause of a failure.

The report (written after every episode, so an interrupted evaluation keeps what finished) holds per-episode rows,
the success rate with its 95 % Wilson interval, failure causes, ``report.md``, ``outcomes.png`` and short videos of
the scene camera with the predicted path drawn in (first success and first failure).
"""
from __future__ import annotations

import json
import math
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from para_ros.sim.pick_place import OUTCOMES, EpisodeMonitor, Judgement, check_seed


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """95 % Wilson score interval of a success rate (``z`` = the normal quantile)."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def moved_camera_pose(T_world_cam: np.ndarray, shift_m, rotate_deg) -> np.ndarray:
    """``T_world_cam`` (4, 4) moved by ``shift_m`` (3,, world frame) and turned by ``rotate_deg`` (3,: a rotation
    vector in degrees, world axes) about the camera's own centre."""
    from scipy.spatial.transform import Rotation

    T = np.array(T_world_cam, dtype=np.float64)
    R_delta = Rotation.from_rotvec(np.radians(np.asarray(rotate_deg, dtype=np.float64))).as_matrix()
    out = np.eye(4)
    out[:3, :3] = R_delta @ T[:3, :3]
    out[:3, 3] = T[:3, 3] + np.asarray(shift_m, dtype=np.float64)
    return out


@dataclass
class EvalSettings:
    """What ``para-sim eval`` runs (see :func:`add_eval_arguments` for the meaning of each)."""

    checkpoint: str
    episodes: int = 50
    seed: int = 100000
    out: str = ""
    time_limit_s: float = 30.0
    settle_s: float = 1.5
    success_hold_s: float = 0.5
    camera_shift_m: tuple = (0.0, 0.0, 0.0)
    camera_rotate_deg: tuple = (0.0, 0.0, 0.0)
    cube_rgba: tuple = ()
    light_scale: float = 1.0
    device: str = ""
    fast_path: bool = False
    videos: bool = True
    echo: bool = False
    node_params: dict = field(default_factory=dict)
    lockstep: bool = False
    compare: str = ""

    def __post_init__(self):
        from para_ros.nodes.parameters import check_node_params

        self.node_params = check_node_params(self.node_params)
        check_seed(self.seed)
        if not 1 <= int(self.episodes) <= 10000:
            raise ValueError(f"--episodes {self.episodes} is out of range: use 1..10000")
        check_seed(self.seed + self.episodes - 1)
        for name in ("time_limit_s", "settle_s"):
            if not 0 < float(getattr(self, name)) <= 600:
                raise ValueError(f"--{name.replace('_', '-')[:-2]} {getattr(self, name)} must be within (0, 600] s")
        if len(self.camera_shift_m) != 3 or len(self.camera_rotate_deg) != 3:
            raise ValueError("--camera-shift and --camera-rotate take 3 numbers each")
        if self.cube_rgba and (len(self.cube_rgba) != 4 or not all(0 <= c <= 1 for c in self.cube_rgba)):
            raise ValueError(f"--cube-rgba {self.cube_rgba}: give 4 numbers within [0, 1]")
        if not 0 <= self.light_scale <= 3:
            raise ValueError(f"--light-scale {self.light_scale} must be within [0, 3]")


def check_checkpoint_matches_sim(checkpoint: str | Path) -> dict:
    """The checkpoint's model config, after checking it can drive the simulator: the sim's two cameras as views and a
    ``recipe.json`` (when present) whose simulator settings equal the sim node's shipped ones. Raises ValueError
    naming the mismatch."""
    from para_core.model.config import V4Config

    path = Path(checkpoint)
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        raise ValueError(f"{path} is not a checkpoint directory (no config.json): pass RUN/checkpoint of para-train "
                         "or checkpoints/pick_place")
    data = json.loads(cfg_path.read_text())
    model = V4Config.from_dict(data["config"])
    sim_views = ("scene", "wrist")
    if set(model.view_names) - set(sim_views):
        raise ValueError(f"checkpoint {path} expects views {list(model.view_names)}; the simulator has "
                         f"{list(sim_views)}: train on simulator episodes (para-sim demos)")
    recipe_path = path / "recipe.json"
    if recipe_path.is_file():
        recipe = json.loads(recipe_path.read_text())
        from para_ros.deploy.launcher import _effective_params

        sim_params = _effective_params("config/sim.yaml", "sim_node", {})
        for key, want in (recipe.get("sim") or {}).items():
            have = sim_params.get(key)
            if have is not None and have != want:
                raise ValueError(f"checkpoint {path} was trained with sim_node {key}={want}, the simulator has "
                                 f"{key}={have} (config/sim.yaml): evaluate with the simulator it was trained on, "
                                 "or retrain (scripts/train_pick_place)")
    return model.to_dict()


def add_eval_arguments(p) -> None:
    from para_ros.sim.pick_place import MAX_SEED

    p.add_argument("--checkpoint", required=True, help="checkpoint directory (model.safetensors + config.json)")
    p.add_argument("--episodes", type=int, default=50, help="episodes to run (1..10000, default 50)")
    p.add_argument("--seed", type=int, default=100000,
                   help=f"layout seed of the first episode (0..{MAX_SEED}; default 100000, outside the training seeds)")
    p.add_argument("--out", default="", help="report folder (default runs/eval-<time>)")
    p.add_argument("--time-limit", type=float, default=30.0, dest="time_limit_s",
                   help="seconds per episode before it counts as a timeout (default 30)")
    p.add_argument("--settle", type=float, default=1.5, dest="settle_s",
                   help="seconds between the scene reset and handing the arm to the policy (default 1.5)")
    p.add_argument("--camera-shift", type=float, nargs=3, default=(0.0, 0.0, 0.0), metavar=("DX", "DY", "DZ"),
                   dest="camera_shift_m", help="move the scene camera by this world translation, metres (the "
                   "viewpoint test: the policy gets the new pose through TF, nothing is retrained)")
    p.add_argument("--camera-rotate", type=float, nargs=3, default=(0.0, 0.0, 0.0), metavar=("RX", "RY", "RZ"),
                   dest="camera_rotate_deg", help="turn the scene camera about its centre by this rotation vector "
                   "(world axes), degrees")
    p.add_argument("--cube-rgba", type=float, nargs=4, default=(), metavar=("R", "G", "B", "A"),
                   help="another cube colour (0..1 each)")
    p.add_argument("--light-scale", type=float, default=1.0, help="scale of the lamps' light (default 1)")
    p.add_argument("--device", default="", help="inference device (default: config/inference.yaml's)")
    p.add_argument("--fast-path", action="store_true",
                   help="the inference node's fast path (para_core.model.v4_fast; default: the reference path)")
    p.add_argument("--node-param", action="append", default=[], metavar="NODE:NAME:=VALUE",
                   help="a parameter for one node of the graph on top of its config/*.yaml, e.g. "
                   "chunk_executor:implausible_speed:=reject (repeatable; written into the report)")
    p.add_argument("--lockstep", action="store_true",
                   help="lockstep evaluation: the simulator runs on /clock and steps only once the graph has answered "
                   "(each frame's chunk, each executor tick), chunks take effect after a fixed simulated latency "
                   "(chunk_executor lockstep_latency_s, default 0.05 s, a GPU's; checkpoints/pick_place needs the "
                   "CPU latency it was tuned with: --node-param chunk_executor:lockstep_latency_s:=0.2); outcomes then "
                   "depend on the seeds, not on the machine's load; --time-limit, --settle are simulated seconds "
                   "(para_ros.sim.lockstep)")
    p.add_argument("--compare", default="", metavar="NODE:PARAM=V1,V2[,...]",
                   help="A/B evaluation: one graph per value of one node parameter, the same seeds interleaved (seed "
                   "s with V1, then V2, ...); the report adds each variant's success rate with its Wilson interval "
                   "and paired exact McNemar tests on the per-seed outcomes (use with --lockstep: in real time the "
                   "idle graphs keep running and load the machine)")
    p.add_argument("--no-videos", action="store_false", dest="videos", help="skip the videos")
    p.add_argument("--echo", action="store_true", help="show the nodes' output instead of logging it")


# ----------------------------------------------------------------------------------------------- the evaluator
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


def summarise(rows: list[EpisodeRow]) -> dict:
    n = len(rows)
    ok = sum(r.outcome == "success" for r in rows)
    lo, hi = wilson_interval(ok, n)
    causes = {o: sum(r.outcome == o for r in rows) for o in OUTCOMES}
    times = [r.duration_s for r in rows if r.outcome == "success"]
    return {"episodes": n, "successes": ok, "success_rate": ok / n if n else 0.0, "wilson95": [lo, hi],
            "outcomes": causes, "median_success_time_s": float(np.median(times)) if times else None}


class _Evaluator:
    """The evaluator's ROS side: service clients, task-state, chunk, image and diagnostics subscriptions."""

    def __init__(self, scene_T_world_cam: np.ndarray, domain_id: int | None = None):
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from para_msgs.msg import ActionChunk
        from rcl_interfaces.srv import SetParameters
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.node import Node
        from rclpy.qos import QoSProfile
        from sensor_msgs.msg import CameraInfo, Image
        from std_msgs.msg import String
        from std_srvs.srv import Trigger

        from rclpy.signals import SignalHandlerOptions

        # Its own context, no signal handlers: the command that owns this evaluator owns Ctrl-C (para-deploy runs
        # one next to its monitor, which has its own context too).
        self.context = rclpy.Context()
        rclpy.init(context=self.context, signal_handler_options=SignalHandlerOptions.NO,
                   **({} if domain_id is None else {"domain_id": int(domain_id)}))
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
        n.create_subscription(String, "/sim_node/task_state", self._on_state, QoSProfile(depth=500))
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
        from para_ros.observation.camera_model import intrinsics_from_camera_info

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
        from para_ros.ros_io.task_services import call_service

        return call_service(self.clients[name], request, timeout_s)

    def reset_task(self, seed: int) -> dict:
        from para_ros.ros_io.task_services import reset_task

        return reset_task(self.clients["params"], self.clients["reset"], seed)


def draw_path(rgb: np.ndarray, path_world: np.ndarray | None, K: np.ndarray | None, T_world_cam: np.ndarray
              ) -> np.ndarray:
    """The scene image with the predicted path (world points, para_core pixel convention K) drawn in."""
    import cv2

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


def write_video(frames: list[np.ndarray], path: Path, fps: float = 10.0) -> Path | None:
    """RGB frames -> an animated GIF (Pillow; plays everywhere, no codec needed). None when there are no frames."""
    if not frames:
        return None
    from PIL import Image

    images = [Image.fromarray(f) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
    return path


def plot_outcomes(rows: list[EpisodeRow], summary: dict, path: Path, title: str) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    colours = {"success": "tab:green", "no_grasp": "tab:red", "dropped": "tab:orange", "misplaced": "tab:purple",
               "fallen": "tab:brown", "timeout": "tab:gray", "limits": "black", "fault": "tab:pink"}
    for o in OUTCOMES:
        sel = [r for r in rows if r.outcome == o]
        if sel:
            a.scatter([r.episode for r in sel], [r.duration_s for r in sel], c=colours[o], label=f"{o} ({len(sel)})",
                      s=18)
    a.set_xlabel("episode")
    a.set_ylabel("time to end, s")
    a.legend(fontsize=7)
    counts = summary["outcomes"]
    b.bar(range(len(OUTCOMES)), [counts[o] for o in OUTCOMES], color=[colours[o] for o in OUTCOMES])
    b.set_xticks(range(len(OUTCOMES)), OUTCOMES, rotation=30, fontsize=8)
    lo, hi = summary["wilson95"]
    fig.suptitle(f"{title}: {summary['successes']}/{summary['episodes']} successes "
                 f"({100 * summary['success_rate']:.0f} %, 95 % CI {100 * lo:.0f}..{100 * hi:.0f} %)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(out: Path, settings: EvalSettings, rows: list[EpisodeRow], extra: dict) -> dict:
    summary = summarise(rows)
    report = {"settings": asdict(settings), "summary": summary, "episodes": [asdict(r) for r in rows], **extra}
    (out / "report.json").write_text(json.dumps(report, indent=2))
    lo, hi = summary["wilson95"]
    lines = [f"# para-sim eval: {Path(settings.checkpoint).name}", "",
             f"- episodes: {summary['episodes']} (seeds {settings.seed}..{settings.seed + len(rows) - 1})",
             f"- successes: {summary['successes']} = {100 * summary['success_rate']:.1f} % "
             f"(95 % Wilson interval {100 * lo:.1f}..{100 * hi:.1f} %)",
             f"- scene camera moved by {list(settings.camera_shift_m)} m, turned by {list(settings.camera_rotate_deg)}"
             " deg",
             f"- inference path: {'fast (para_core.model.v4_fast)' if settings.fast_path else 'reference'}",
             "- clock: " + ("lockstep (simulated time; the simulator steps once the graph has answered; episode "
                            "times are simulated seconds)" if settings.lockstep else "real time (wall clock)"),
             "- node parameters beyond config/*.yaml: " + ("; ".join(
                 f"{node} {name}={value!r}" for node, values in settings.node_params.items()
                 for name, value in values.items()) or "none")]
    walls = [r.wall_s for r in rows if math.isfinite(r.wall_s)]
    if walls:
        lines.append(f"- wall time per episode: median {np.median(walls):.1f} s, total {sum(walls):.0f} s")
    lines += ["", "| outcome | episodes |", "|---|---|"]
    lines += [f"| {o} | {n} |" for o, n in summary["outcomes"].items()]
    lines += ["", "| episode | seed | outcome | time s | place error cm | max lift cm | chunks | rejected | "
              "truncated | wall s | fault |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r.episode} | {r.seed} | {r.outcome} | {r.duration_s:.1f} | {100 * r.place_error_m:.1f} | "
              f"{100 * r.max_lift_m:.1f} | {r.chunks} | {r.chunks_rejected} | {r.chunks_truncated} | "
              f"{r.wall_s:.1f} | {r.fault} |" for r in rows]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    if rows:
        plot_outcomes(rows, summary, out / "outcomes.png", Path(settings.checkpoint).name)
    return summary


def deploy_settings(settings: EvalSettings):
    """The graph an evaluation runs (``graph.DeploySettings``): the simulator backend with the checkpoint, device and
    inference path chosen."""
    from para_ros.deploy import graph

    return graph.DeploySettings(backend="sim", checkpoint=str(Path(settings.checkpoint).resolve()),
                                device=settings.device, fast_path="true" if settings.fast_path else "false",
                                lockstep=settings.lockstep)


def sim_overrides(settings: EvalSettings) -> tuple[np.ndarray, dict]:
    """The scene camera pose ``T_world_cam`` (4, 4) of ``settings`` and the simulator's parameters for them."""
    from para_ros.sim.yam_scene import SimConfig

    T_cam = moved_camera_pose(SimConfig().scene_cam_T_world_cam(), settings.camera_shift_m,
                              settings.camera_rotate_deg)
    sim_over: dict = {}
    if any(settings.camera_shift_m) or any(settings.camera_rotate_deg):
        sim_over["scene_cam_T_world_cam"] = [float(v) for v in T_cam.reshape(-1)]
    if settings.cube_rgba:
        sim_over["cube_rgba"] = [float(v) for v in settings.cube_rgba]
    if settings.light_scale != 1.0:
        sim_over["light_scale"] = float(settings.light_scale)
    if settings.lockstep:
        sim_over["lockstep_run_until_s"] = 0.0  # hold at the first instant until the first episode
    return T_cam, sim_over


def start_graph(group, ds, sim_over: dict, node_params: dict) -> None:
    """Start the evaluation graph of ``ds`` in ``group``: the simulator with ``sim_over`` on top of its overrides,
    then every node's ``node_params``."""
    from para_ros.deploy import graph
    from para_ros.deploy import launcher as deploy

    for spec, overrides in graph.plan(ds):
        if spec.name == "sim_node":
            overrides = {**overrides, **sim_over}
        overrides = {**overrides, **node_params.get(spec.name, {})}
        group.start(spec, deploy.node_command(spec, overrides))


def run_eval(settings: EvalSettings) -> int:
    from datetime import datetime

    from para_ros.deploy import launcher as deploy

    try:
        check_checkpoint_matches_sim(settings.checkpoint)
    except ValueError as exc:
        print(f"para-sim eval: {exc}", file=sys.stderr)
        return 2
    out = Path(settings.out or Path("runs") / datetime.now().strftime("eval-%Y%m%d-%H%M%S"))
    out.mkdir(parents=True, exist_ok=True)
    T_cam, sim_over = sim_overrides(settings)
    ds = deploy_settings(settings)
    env = deploy.graph_env()
    group = deploy.ProcessGroup(out / "logs", env, echo=settings.echo)
    signals = deploy.SignalStop()
    stop = signals.event
    rows: list[EpisodeRow] = []
    videos: dict[str, str] = {}
    ev = None
    extra: dict = {"interrupted": False}
    try:
        start_graph(group, ds, sim_over, settings.node_params)
        ev = _Evaluator(T_cam)
        print(f"para-sim eval: {settings.episodes} episodes from seed {settings.seed}, ROS_DOMAIN_ID "
              f"{env['ROS_DOMAIN_ID']}, report in {out}", flush=True)
        # lockstep: the simulator waits for the model however long it loads; give a busy machine time
        _wait_for_first_chunk(ev, group, stop, timeout_s=600.0 if settings.lockstep else 120.0)
        for k in range(settings.episodes):
            if stop.is_set():
                extra["interrupted"] = True
                break
            dead = group.first_dead()
            if dead is not None:
                raise RuntimeError(f"{dead.spec.name} exited with status {dead.returncode}:\n"
                                   f"{group.log_tail(dead)}")
            want_video = settings.videos and (("success" not in videos) or ("failure" not in videos))
            row = _run_episode(ev, settings, k, settings.seed + k, stop, want_video)
            rows.append(row)
            if want_video:
                key = "success" if row.outcome == "success" else "failure"
                if key not in videos and ev.frames:
                    path = write_video(ev.frames, out / f"episode_{k:03d}_{row.outcome}.gif")
                    if path is not None:
                        videos[key] = path.name
            ev.frames = []
            extra["videos"] = videos
            s = write_report(out, settings, rows, extra)
            print(f"  episode {k:3d} seed {row.seed}: {row.outcome:9s} {row.duration_s:5.1f} s  "
                  f"(place error {100 * row.place_error_m:.1f} cm)  -> {s['successes']}/{s['episodes']}"
                  + (f"  [wall {row.wall_s:.1f} s]" if settings.lockstep else "")
                  + (f"  {row.fault}" if row.fault else ""), flush=True)
    except RuntimeError as exc:
        print(f"para-sim eval: {exc}", file=sys.stderr)
        extra["error"] = str(exc)
    finally:
        if ev is not None:
            ev.close()
        group.stop(timeout_s=5.0)
        signals.restore()
    summary = write_report(out, settings, rows, extra)
    lo, hi = summary["wilson95"]
    print(f"para-sim eval: {summary['successes']}/{summary['episodes']} successes "
          f"({100 * summary['success_rate']:.1f} %, 95 % Wilson interval {100 * lo:.1f}..{100 * hi:.1f} %); "
          f"outcomes {summary['outcomes']}; report {out / 'report.md'}")
    return 0 if "error" not in extra else 1


def _wait_for_first_chunk(ev: _Evaluator, group, stop: threading.Event, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while ev.chunks == 0:
        dead = group.first_dead() if group is not None else None
        if dead is not None:
            raise RuntimeError(f"{dead.spec.name} exited with status {dead.returncode}:\n{group.log_tail(dead)}")
        if stop.is_set() or time.monotonic() > deadline:
            raise RuntimeError(f"no action chunk within {timeout_s:.0f} s of starting the graph (see the logs)")
        time.sleep(0.1)


def _run_episode(ev: _Evaluator, settings: EvalSettings, k: int, seed: int, stop: threading.Event,
                 record: bool) -> EpisodeRow:
    if settings.lockstep:
        from para_ros.deploy.lockstep_episode import run_lockstep_episode
        from para_ros.sim.lockstep import DEFAULT_TIMEOUT_S

        timeout_s = float(settings.node_params.get("sim_node", {}).get("lockstep_timeout_s", DEFAULT_TIMEOUT_S))
        return run_lockstep_episode(ev, settings, k, seed, stop, record, timeout_s)
    wall0 = time.monotonic()
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
                      monitor.max_lift_m, chunks, rejected, layout, truncated, wall_s=time.monotonic() - wall0)


class TaskDriver(threading.Thread):
    """Pick-and-place episodes back to back against a graph someone else started (``para-deploy --backend sim``):
    the same episode procedure as ``para-sim eval``; ``rows`` holds the finished episodes."""

    def __init__(self, seed: int = 100000, time_limit_s: float = 30.0, settle_s: float = 1.5,
                 lockstep: bool = False):
        super().__init__(name="para-task-driver", daemon=True)
        from para_ros.sim.yam_scene import SimConfig

        self.settings = EvalSettings(checkpoint="", episodes=1, seed=seed, time_limit_s=time_limit_s,
                                     settle_s=settle_s, videos=False, lockstep=lockstep)
        self.T_cam = SimConfig().scene_cam_T_world_cam()
        self.stop_event = threading.Event()
        self.rows: list[EpisodeRow] = []
        self.error: str | None = None

    def run(self) -> None:
        ev = None
        try:
            ev = _Evaluator(self.T_cam)
            _wait_for_first_chunk(ev, None, self.stop_event, timeout_s=300.0)
            k = 0
            while not self.stop_event.is_set():
                row = _run_episode(ev, self.settings, k, self.settings.seed + k, self.stop_event, False)
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


def cmd_eval(args) -> int:
    from para_ros.deploy import graph

    try:
        settings = EvalSettings(
            checkpoint=args.checkpoint, episodes=args.episodes, seed=args.seed, out=args.out,
            time_limit_s=args.time_limit_s, settle_s=args.settle_s, camera_shift_m=tuple(args.camera_shift_m),
            camera_rotate_deg=tuple(args.camera_rotate_deg), cube_rgba=tuple(args.cube_rgba),
            light_scale=args.light_scale, device=args.device, fast_path=args.fast_path, videos=args.videos,
            echo=args.echo, node_params=graph.parse_node_params(args.node_param), lockstep=args.lockstep,
            compare=args.compare)
    except ValueError as exc:
        print(f"para-sim eval: {exc}", file=sys.stderr)
        return 2
    if settings.compare:
        from para_ros.deploy.ab_compare import run_compare

        return run_compare(settings)
    return run_eval(settings)
