"""Closed-loop evaluation of a checkpoint on the pick-and-place task through the real nodes (``para-sim eval``).

The graph is the deploy graph of ``para_ros.deploy.graph`` (``sim_node``, ``inference_node`` with the checkpoint,
``chunk_executor`` on the sim robot), each node its own process on the loopback DDS environment, plus a small
evaluator node in this process. Per episode (seed ``S + k``):

1. ``/chunk_executor/stop`` (the arm holds; chunks are dropped),
2. ``task_seed`` set on ``/sim_node`` and ``/sim_node/reset_task`` called (arm home, cube + pad at the layout),
3. ``settle_s`` of waiting so that the inference node's end-effector history holds only the new scene,
4. ``/chunk_executor/resume``; the policy then has the arm until the cube rests released on the pad (``success``,
   held for ``success_hold_s``) or ``time_limit_s`` passes. ``~/task_state`` (what the simulator sees) is judged
   by :class:`para_ros.sim.pick_place.EpisodeMonitor`, which names the cause of a failure.

``--continue`` takes up the report already in the output folder: its episodes are kept, only the layouts it lacks run
(more ``--episodes``, an interrupted run, episodes that ended as a lockstep fault), and the settings must be the
same (named where they differ; the checkpoint may be named by another path if it holds the same bytes). In
lockstep the joined report equals one run of all the episodes.

The report (written after every episode, so an interrupted evaluation keeps what finished) holds per-episode rows,
the success rate with its 95 % Wilson interval, failure causes, ``report.md``, ``outcomes.png`` and short videos of
the scene camera with the predicted path drawn in (first success and first failure). ``confidence.jsonl`` holds, per
episode, its outcome and every chunk's confidence measures after the hand-over (``para-sim confidence-report`` fits
the confidence supervisor's thresholds from it, docs/confidence.md).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np

from para_core.model.config import V4Config
from para_ros.bag.recording import McapRecorder, ros_type_name
from para_ros.bag.view import recording_to_rerun
from para_ros.deploy import graph
from para_ros.deploy.episodes import (
    EpisodeRow,
    TaskClient,
    cut_short,
    run_episode,
    summarise,
    wait_for_first_chunk,
)
from para_ros.deploy.graph_run import GraphRun, SignalStop, run_exit_status
from para_ros.deploy.monitor import DeployMonitor, graph_topics, record_topics
from para_ros.nodes.parameter_registry import check_node_params
from para_ros.paths import effective_params, shipped_node_params
from para_ros.sim.camera_sampler import check_scene_camera_sees_workspace
from para_ros.sim.layout_region import CubeRegion, episode_seeds
from para_ros.sim.lockstep import DEFAULT_TIMEOUT_S
from para_ros.sim.pick_place import OUTCOMES, check_seed


def moved_camera_pose(T_world_cam: np.ndarray, shift_m, rotate_deg) -> np.ndarray:
    """``T_world_cam`` (4, 4) moved by ``shift_m`` (3,, world frame) and turned by ``rotate_deg`` (3,: a rotation
    vector in degrees, world axes) about the camera's own centre."""
    from scipy.spatial.transform import Rotation  # scipy: loaded on first use, not on import

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
    cube_region: str = ""
    rerun: str = ""  # .rrd to write (the run recorded, then converted by para_ros.bag.view); "" = none
    lockstep: bool = False  # simulated time (para_ros.sim.lockstep): --time-limit and --settle in simulated seconds
    compare: str = ""  # NODE:PARAM=V1,V2[,...]: an A/B evaluation (para_ros.deploy.ab_compare)
    resume: bool = False  # --continue: keep the episodes of the report in ``out``, run the layouts it lacks

    @property
    def lockstep_timeout_s(self) -> float:
        """The simulator's ``lockstep_timeout_s`` in this run (wall seconds it waits for any one answer)."""
        return float(self.node_params.get("sim_node", {}).get("lockstep_timeout_s", DEFAULT_TIMEOUT_S))

    def __post_init__(self):
        self.node_params = check_node_params(self.node_params)
        check_seed(self.seed)
        if not 1 <= int(self.episodes) <= 10000:
            raise ValueError(f"--episodes {self.episodes} is out of range: use 1..10000")
        check_seed(self.seed + self.episodes - 1)
        if self.cube_region:
            self.cube_region = CubeRegion.parse(self.cube_region).text
        for name in ("time_limit_s", "settle_s"):
            if not 0 < float(getattr(self, name)) <= 600:
                raise ValueError(f"--{name.replace('_', '-')[:-2]} {getattr(self, name)} must be within (0, 600] s")
        if len(self.camera_shift_m) != 3 or len(self.camera_rotate_deg) != 3:
            raise ValueError("--camera-shift and --camera-rotate take 3 numbers each")
        if self.cube_rgba and (len(self.cube_rgba) != 4 or not all(0 <= c <= 1 for c in self.cube_rgba)):
            raise ValueError(f"--cube-rgba {self.cube_rgba}: give 4 numbers within [0, 1]")
        if not 0 <= self.light_scale <= 3:
            raise ValueError(f"--light-scale {self.light_scale} must be within [0, 3]")
        if self.resume and not self.out:
            raise ValueError("--continue needs --out, the folder of the report to continue")
        if self.resume and self.compare:
            raise ValueError("--continue does not apply to --compare: run the A/B again")


# Settings a continued evaluation may change: how many episodes, where and what it writes besides the report.
CONTINUE_MAY_CHANGE = ("episodes", "out", "videos", "echo", "rerun", "resume")


def same_checkpoint(a: str, b: str) -> bool:
    """Whether two checkpoint folders hold the same model: the same folder, or the same bytes in
    ``model.safetensors`` and ``config.json`` (a checkpoint copied or named by another path)."""
    pa, pb = Path(a), Path(b)
    if pa.resolve() == pb.resolve():
        return True
    files = ("model.safetensors", "config.json")
    if not all((p / f).is_file() for p in (pa, pb) for f in files):
        return False
    return all((pa / f).read_bytes() == (pb / f).read_bytes() for f in files)


def kept_episodes(report: dict, settings: EvalSettings, seeds: list[int]) -> list[EpisodeRow]:
    """The episodes of an earlier ``report`` (``report.json``'s content) that a continued evaluation keeps: those
    of layouts in ``seeds`` that did not end as a lockstep fault (an answer that never came says nothing of the
    policy; that layout runs again). ValueError when the report was run with other settings, naming them."""
    # a setting the report lacks (written before it existed) had its default
    before = {**json.loads(json.dumps(asdict(EvalSettings(checkpoint="")))), **(report.get("settings") or {})}
    now = json.loads(json.dumps(asdict(settings)))  # tuples as lists, as in the file
    differ = [k for k in now if k not in CONTINUE_MAY_CHANGE and before.get(k) != now[k]]
    if "checkpoint" in differ and same_checkpoint(str(before["checkpoint"]), now["checkpoint"]):
        differ.remove("checkpoint")
    if differ:
        raise ValueError(
            "--continue: the report in the output folder was run with other settings ("
            + "; ".join(f"{k}: {before.get(k)!r} there, {now[k]!r} now" for k in differ)
            + "); use another --out or the same settings"
        )
    wanted = set(seeds)
    kept = {}
    for row in report.get("episodes") or []:
        r = EpisodeRow.from_report(row)
        if r.seed in wanted and r.outcome != "fault":
            kept[r.seed] = r
    return [kept[s] for s in seeds if s in kept]


def check_checkpoint_matches_sim(checkpoint: str | Path) -> dict:
    """The checkpoint's model config, after checking it can drive the simulator: the sim's two cameras as views and a
    ``recipe.json`` (when present) whose simulator settings equal the sim node's shipped ones. Raises ValueError
    naming the mismatch."""

    path = Path(checkpoint)
    cfg_path = path / "config.json"
    if not cfg_path.is_file():
        raise ValueError(
            f"{path} is not a checkpoint directory (no config.json): pass RUN/checkpoint of para-train "
            "or checkpoints/pick_place"
        )
    data = json.loads(cfg_path.read_text())
    model = V4Config.from_dict(data["config"])
    sim_views = ("scene", "wrist")
    if set(model.view_names) - set(sim_views):
        raise ValueError(
            f"checkpoint {path} expects views {list(model.view_names)}; the simulator has "
            f"{list(sim_views)}: train on simulator episodes (para-sim demos)"
        )
    recipe_path = path / "recipe.json"
    if recipe_path.is_file():
        recipe = json.loads(recipe_path.read_text())
        sim_params = shipped_node_params("config/sim.yaml", "sim_node")
        for key, want in (recipe.get("sim") or {}).items():
            have = sim_params.get(key)
            if have is not None and have != want:
                raise ValueError(
                    f"checkpoint {path} was trained with sim_node {key}={want}, the simulator has "
                    f"{key}={have} (config/sim.yaml): evaluate with the simulator it was trained on, "
                    "or retrain (scripts/train_pick_place)"
                )
    return model.to_dict()


CONFIDENCE_FILE = "confidence.jsonl"  # one line per episode: its outcome and its chunks' confidence measures


def append_confidence(path: Path, row: EpisodeRow, chunks: list[dict]) -> None:
    """Add one episode's line to ``confidence.jsonl``: episode, seed, outcome and each chunk's measures
    (``episodes.confidence_record``), what ``para-sim confidence-report`` fits the supervisor's thresholds from.
    A continued evaluation appends; the report keeps the last line of each seed."""
    line = {"episode": row.episode, "seed": row.seed, "outcome": row.outcome, "chunks": chunks}
    with path.open("a") as f:
        f.write(json.dumps(line) + "\n")


def write_video(frames: list[np.ndarray], path: Path, fps: float = 10.0) -> Path | None:
    """RGB frames -> an animated GIF (Pillow; plays everywhere, no codec needed). None when there are no frames."""
    if not frames:
        return None
    from PIL import Image  # PIL: loaded on first use, not on import

    images = [Image.fromarray(f) for f in frames]
    images[0].save(path, save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
    return path


def plot_outcomes(rows: list[EpisodeRow], summary: dict, path: Path, title: str) -> Path:
    import matplotlib  # matplotlib: loaded on first use, not on import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # matplotlib: loaded on first use, not on import

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.8))
    colours = {
        "success": "tab:green",
        "no_grasp": "tab:red",
        "dropped": "tab:orange",
        "misplaced": "tab:purple",
        "fallen": "tab:brown",
        "timeout": "tab:gray",
        "limits": "black",
        "fault": "tab:pink",
    }
    for o in OUTCOMES:
        sel = [r for r in rows if r.outcome == o]
        if sel:
            a.scatter(
                [r.episode for r in sel], [r.duration_s for r in sel], c=colours[o], label=f"{o} ({len(sel)})", s=18
            )
    a.set_xlabel("episode")
    a.set_ylabel("time to end, s")
    a.legend(fontsize=7)
    counts = summary["outcomes"]
    b.bar(range(len(OUTCOMES)), [counts[o] for o in OUTCOMES], color=[colours[o] for o in OUTCOMES])
    b.set_xticks(range(len(OUTCOMES)), OUTCOMES, rotation=30, fontsize=8)
    lo, hi = summary["wilson95"]
    fig.suptitle(
        f"{title}: {summary['successes']}/{summary['episodes']} successes "
        f"({100 * summary['success_rate']:.0f} %, 95 % CI {100 * lo:.0f}..{100 * hi:.0f} %)"
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(out: Path, settings: EvalSettings, rows: list[EpisodeRow], extra: dict) -> dict:
    summary = summarise(rows)
    report = {"settings": asdict(settings), "summary": summary, "episodes": [asdict(r) for r in rows], **extra}
    (out / "report.json").write_text(json.dumps(report, indent=2))
    lo, hi = summary["wilson95"]
    lines = [
        f"# para-sim eval: {Path(settings.checkpoint).name}",
        "",
        f"- episodes: {summary['episodes']} (seeds {rows[0].seed if rows else settings.seed}.."
        f"{rows[-1].seed if rows else settings.seed}"
        + (f", cube in {settings.cube_region}" if settings.cube_region else "")
        + (f"; {summary['faults']} lockstep fault(s) left out, run again by --continue)" if summary["faults"] else ")"),
        f"- successes: {summary['successes']} = {100 * summary['success_rate']:.1f} % "
        f"(95 % Wilson interval {100 * lo:.1f}..{100 * hi:.1f} %)",
        "- scene camera moved by {} m, turned by {} deg from config/sim.yaml's pose (--camera-shift / "
        "--camera-rotate and --node-param sim_node together)".format(*scene_camera_move(settings)),
        f"- inference path: {'fast (para_core.model.v4_fast)' if settings.fast_path else 'reference'}",
        "- clock: "
        + (
            "lockstep (simulated time; the simulator steps once the graph has answered; episode "
            "times are simulated seconds)"
            if settings.lockstep
            else "real time (wall clock)"
        ),
        "- node parameters beyond config/*.yaml: "
        + (
            "; ".join(
                f"{node} {name}={value!r}"
                for node, values in settings.node_params.items()
                for name, value in values.items()
            )
            or "none"
        ),
    ]
    walls = [r.wall_s for r in rows if math.isfinite(r.wall_s)]
    if walls:
        lines.append(f"- wall time per episode: median {np.median(walls):.1f} s, total {sum(walls):.0f} s")
    lines += ["", "| outcome | episodes |", "|---|---|"]
    lines += [f"| {o} | {n} |" for o, n in summary["outcomes"].items()]
    lines += [
        "",
        "| episode | seed | outcome | time s | place error cm | max lift cm | chunks | rejected | "
        "truncated | held uncertain at s | wall s | fault |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r.episode} | {r.seed} | {r.outcome} | {r.duration_s:.1f} | {100 * r.place_error_m:.1f} | "
        f"{100 * r.max_lift_m:.1f} | {r.chunks} | {r.chunks_rejected} | {r.chunks_truncated} | "
        f"{'' if r.held_uncertain_at_s is None else f'{r.held_uncertain_at_s:.2f}'} | {r.wall_s:.1f} | {r.fault} |"
        for r in rows
    ]
    (out / "report.md").write_text("\n".join(lines) + "\n")
    if rows:
        plot_outcomes(rows, summary, out / "outcomes.png", Path(settings.checkpoint).name)
    return summary


def deploy_settings(settings: EvalSettings):
    """The graph an evaluation runs (``graph.DeploySettings``): the sim robot with the checkpoint, device and
    inference path chosen."""

    return graph.DeploySettings(
        robot="sim",
        checkpoint=str(Path(settings.checkpoint).resolve()),
        device=settings.device,
        fast_path="true" if settings.fast_path else "false",
        lockstep=settings.lockstep,
    )


def scene_camera_pose(sim_params: dict | None = None) -> np.ndarray:
    """(4, 4) the scene camera pose ``T_world_cam`` the sim node takes from its parameters: ``config/sim.yaml`` with
    ``sim_params`` on top (``scene_cam_T_world_cam`` when set, else position + look-at + up hint), as the node does."""
    from para_ros.sim.yam_scene import SimConfig  # mujoco: loaded on first use, not on import

    p = effective_params("config/sim.yaml", "sim_node", sim_params or {})
    T = p.get("scene_cam_T_world_cam")
    return SimConfig(
        scene_cam_pos_m=p["scene_cam_position_m"],
        scene_cam_look_at_m=p["scene_cam_look_at_m"],
        scene_cam_up_hint=p["scene_cam_up_hint"],
        scene_T_world_cam=None if T is None or len(T) == 0 else np.asarray(T, dtype=np.float64).reshape(4, 4),
    ).scene_cam_T_world_cam()


def scene_camera_move(settings: EvalSettings) -> tuple[list[float], list[float]]:
    """How far the run's scene camera is from ``config/sim.yaml``'s: (shift of its centre in base, m; rotation vector
    in base axes, deg), from ``--camera-shift`` / ``--camera-rotate`` and ``--node-param sim_node ...`` together (the
    parameters the simulator is started with)."""
    from scipy.spatial.transform import Rotation  # scipy: loaded on first use, not on import

    _, sim_over = sim_overrides(settings)
    nominal = scene_camera_pose()
    used = scene_camera_pose({**sim_over, **settings.node_params.get("sim_node", {})})
    shift_m = used[:3, 3] - nominal[:3, 3]
    rotate_deg = Rotation.from_matrix(used[:3, :3] @ nominal[:3, :3].T).as_rotvec(degrees=True)
    return [round(float(v), 6) for v in shift_m], [round(float(v), 4) for v in rotate_deg]


def sim_overrides(settings: EvalSettings) -> tuple[np.ndarray, dict]:
    """The scene camera pose ``T_world_cam`` (4, 4) of ``settings`` and the simulator's parameters for them."""
    from para_ros.sim.yam_scene import SimConfig  # mujoco: loaded on first use, not on import

    T_cam = moved_camera_pose(SimConfig().scene_cam_T_world_cam(), settings.camera_shift_m, settings.camera_rotate_deg)
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


def start_graph(graph_run: GraphRun, ds, sim_over: dict, node_params: dict) -> list:
    """Start the evaluation graph of ``ds`` (``graph.DeploySettings``) in ``graph_run``: the simulator with
    ``sim_over`` on top of its overrides, then every node's ``node_params``; returns the plan started."""
    plan = graph.plan(ds)
    graph_run.start_plan(plan, {**node_params, "sim_node": {**sim_over, **node_params.get("sim_node", {})}})
    return plan


def finished_summary(report_path: Path, episodes: int | None) -> dict | None:
    """The summary of a finished ``para-sim eval`` report of at least ``episodes`` episodes (None: of any number),
    else None: a run with more episodes before counts as done; one with a lockstep fault does not (it is continued,
    which runs the faulted layouts again). What a sweep's cell or a suite's condition has left to run."""
    if not report_path.is_file():
        return None
    report = json.loads(report_path.read_text())
    s = report.get("summary") or {}
    if episodes is not None and (s.get("episodes", 0) < episodes or (s.get("outcomes") or {}).get("fault", 0)):
        return None
    if not report.get("interrupted") and "error" not in report and s.get("episodes"):
        return s
    return None


def eval_seeds(settings: EvalSettings) -> list[int]:
    """The layout seeds an evaluation runs, in order (``--cube-region`` keeps only the layouts inside it)."""
    region = CubeRegion.parse(settings.cube_region) if settings.cube_region else None
    return episode_seeds(settings.seed, settings.episodes, region)


def run_eval(settings: EvalSettings) -> int:
    try:
        check_checkpoint_matches_sim(settings.checkpoint)
        seeds = eval_seeds(settings)
        _, sim_over = sim_overrides(settings)
        T_cam = scene_camera_pose({**sim_over, **settings.node_params.get("sim_node", {})})  # what the sim renders
        check_scene_camera_sees_workspace(T_cam, settings.node_params.get("sim_node", {}))
        out = Path(settings.out or Path("runs") / datetime.now().strftime("eval-%Y%m%d-%H%M%S"))
        rows: list[EpisodeRow] = []
        if settings.resume and (out / "report.json").is_file():
            rows = kept_episodes(json.loads((out / "report.json").read_text()), settings, seeds)
    except ValueError as exc:
        print(f"para-sim eval: {exc}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    if not rows:  # a fresh evaluation: no confidence records of another run
        (out / CONFIDENCE_FILE).unlink(missing_ok=True)
    done = {r.seed for r in rows}
    todo = [(k, seed) for k, seed in enumerate(seeds) if seed not in done]
    if rows:
        print(f"para-sim eval: --continue: {len(rows)} episode(s) kept from {out / 'report.json'}, {len(todo)} to run")
    if not todo:
        write_report(out, settings, rows, {"interrupted": False})
        return 0
    ds = deploy_settings(settings)
    graph_run = GraphRun(out / "logs", echo=settings.echo)  # the evaluator node in this process joins its domain
    signals = SignalStop()
    stop = signals.event
    videos: dict[str, str] = {}
    ev = monitor = recorder = None
    extra: dict = {"interrupted": False}
    try:
        plan = start_graph(graph_run, ds, sim_over, settings.node_params)
        ev = TaskClient(T_cam, videos=settings.videos)
        if settings.rerun:  # record what a rerun view needs (the deploy monitor's recorder), convert at the end
            topics = graph_topics(plan)
            recorder = McapRecorder(out / "recording", {t: ros_type_name(c) for t, c in record_topics(topics).items()})
            monitor = DeployMonitor(recorder, topics=topics)
        print(
            f"para-sim eval: {len(todo)} episodes from seed {todo[0][1]}, ROS_DOMAIN_ID "
            f"{graph_run.domain_id}, report in {out}",
            flush=True,
        )
        # lockstep: the simulator waits for the model however long it loads; give a busy machine time
        wait_for_first_chunk(
            ev, graph_run, stop, timeout_s=600.0 if settings.lockstep else 120.0, lockstep=settings.lockstep
        )
        for k, seed in todo:
            if stop.is_set():
                extra["interrupted"] = True
                break
            dead = graph_run.first_dead()
            if dead is not None:
                raise RuntimeError(
                    f"{dead.spec.name} exited with status {dead.returncode}:\n{graph_run.log_tail(dead)}"
                )
            want_video = settings.videos and (("success" not in videos) or ("failure" not in videos))
            row = run_episode(ev, settings, k, seed, stop, want_video)
            if cut_short(row, stop):
                extra["interrupted"] = True
                break
            rows.append(row)
            rows.sort(key=lambda r: r.episode)
            append_confidence(out / CONFIDENCE_FILE, row, ev.take_episode_confidence())
            if want_video:
                key = "success" if row.outcome == "success" else "failure"
                if key not in videos and ev.frames:
                    path = write_video(ev.frames, out / f"episode_{k:03d}_{row.outcome}.gif")
                    if path is not None:
                        videos[key] = path.name
            ev.frames = []
            extra["videos"] = videos
            s = write_report(out, settings, rows, extra)
            print(
                f"  episode {k:3d} seed {row.seed}: {row.outcome:9s} {row.duration_s:5.1f} s  "
                f"(place error {100 * row.place_error_m:.1f} cm)  -> {s['successes']}/{s['episodes']}"
                + (f"  [wall {row.wall_s:.1f} s]" if settings.lockstep else "")
                + (f"  {row.fault}" if row.fault else ""),
                flush=True,
            )
    except RuntimeError as exc:
        print(f"para-sim eval: {exc}", file=sys.stderr)
        extra["error"] = str(exc)
    finally:
        extra["interrupted"] = extra["interrupted"] or stop.is_set()  # also a signal during the last episode
        if ev is not None:
            ev.close()
        graph_run.stop(timeout_s=5.0)
        signals.restore()
        if monitor is not None:
            monitor.stop()
            recorder.close()
    if recorder is not None:
        counts = recording_to_rerun(recorder.path, settings.rerun)
        extra["rerun"] = str(counts["path"])
        print(
            f"para-sim eval: wrote {counts['path']} ({counts['observations']} observations, {counts['chunks']} "
            f"chunks, {counts['clouds']} voxel clouds; open with: rerun {counts['path']})",
            flush=True,
        )
    summary = write_report(out, settings, rows, extra)
    lo, hi = summary["wilson95"]
    print(
        f"para-sim eval: {summary['successes']}/{summary['episodes']} successes "
        f"({100 * summary['success_rate']:.1f} %, 95 % Wilson interval {100 * lo:.1f}..{100 * hi:.1f} %); "
        f"outcomes {summary['outcomes']}; report {out / 'report.md'}"
    )
    return run_exit_status(extra)
