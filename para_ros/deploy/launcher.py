"""``para-deploy``: run the PARA deploy graph as separate processes, headless, then print a summary.

The same graph as ``ros2 launch para_ros deploy.launch.py`` (both read :mod:`para_ros.deploy.graph`), for machines without
``ros2 launch``: each node is ``python -m <module> --ros-args -r __node:=<name> --params-file <file> -p ...`` with the
loopback DDS environment, its output in ``<out>/logs/<node>.log``. A small monitor node in this process records the
run (rosbag2, MCAP storage) and collects the figures of the summary. After ``--duration`` seconds (or on Ctrl-C /
SIGTERM) every node gets SIGINT, is waited for, and a node still running after ``--shutdown-timeout`` is killed with
its whole process group: nothing is left behind. Then the summary is printed and saved with a snapshot image (the
scene camera image with the predicted path and argmax voxels drawn in).

Respawn (``--respawn``, ``--respawn-executor``; ``respawn:=true`` / ``respawn_executor:=true`` of the launch file):
a node that dies on its own (not at the shutdown) is started again with the same command line after
``--respawn-delay`` seconds, its output appended to the same log, and counted; the summary reports every restart and
the exit status of each death. ``--respawn`` covers the nodes that only compute or simulate (inference_node,
sim_node); the executor is separate (``--respawn-executor``, off by default): it commands the arm, so after it died a
person should look first. (A respawned executor starts disengaged on a real arm anyway, ``auto_engage: false``.)
Without respawn a dead node ends the run, as before.

Exit status: 0 when every node ran to the end and stopped on SIGINT (a node that died and was respawned counts as
running to the end: the run went on, as asked; its restarts are in the summary); 1 when a node died early (and was
not respawned, or was dead at the shutdown, waiting for its restart) or had to be killed; 2 on bad arguments.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import yaml

from para_core.model.config import COMPILE_MODES, INFERENCE_DTYPES
from para_ros.deploy import graph
from para_ros.dds_env import apply_loopback_dds_env, loopback_dds_env
from para_ros.paths import share_file

PR_SET_PDEATHSIG = 1
try:  # loaded here, not in the forked child
    _LIBC = ctypes.CDLL(None, use_errno=True)
except OSError:  # pragma: no cover
    _LIBC = None


def yaml_value(value) -> str:
    """``value`` as the YAML text of a ``-p name:=value`` rule (strings quoted when YAML would read another type)."""
    text = yaml.safe_dump(value, default_flow_style=True)
    return text.removesuffix("\n...\n").strip()


def node_command(spec: graph.NodeSpec, overrides: dict[str, object], python: str = sys.executable) -> list[str]:
    """The command line of one node: its module, name, parameter file, then ``-p`` for every override."""
    cmd = [python, "-m", spec.module, "--ros-args", "-r", f"__node:={spec.name}",
           "--params-file", str(share_file(spec.params_file))]
    for name, value in overrides.items():
        cmd += ["-p", f"{name}:={yaml_value(value)}"]
    return cmd


def graph_commands(settings: graph.DeploySettings) -> list[tuple[graph.NodeSpec, list[str]]]:
    """Every node of the graph for ``settings`` with its command line, in start order."""
    return [(spec, node_command(spec, overrides)) for spec, overrides in graph.plan(settings)]


def graph_env() -> dict[str, str]:
    """The environment of the graph's node processes (a fresh loopback DDS domain, EGL rendering, unbuffered
    output), also applied to this process, so that a monitor or evaluator node here joins the same domain."""
    env = loopback_dds_env()
    env.setdefault("MUJOCO_GL", "egl")
    env.setdefault("PYTHONUNBUFFERED", "1")
    apply_loopback_dds_env(domain_id=int(env["ROS_DOMAIN_ID"]))
    return env


def _die_with_parent() -> None:
    """In the child before exec: its own process group (Ctrl-C reaches it only through us) and SIGTERM when we die."""
    os.setpgid(0, 0)
    prctl = getattr(_LIBC, "prctl", None) if sys.platform.startswith("linux") else None
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class NodeProcess:
    """One started node: its spec, process and log file; ``returncode`` / ``killed`` once stopped.

    With ``respawn``, ``proc`` is the node's current process: ``restarts`` counts the restarts and ``exit_statuses``
    holds the exit status of every death that was followed by a restart (or is waiting for one, ``down_since`` set).
    """

    spec: graph.NodeSpec
    cmd: list[str]
    proc: subprocess.Popen
    log_path: Path
    returncode: int | None = None
    killed: bool = False
    exited_early: bool = False
    respawn: bool = False
    restarts: int = 0
    exit_statuses: list[int] = field(default_factory=list)
    down_since: float | None = None  # monotonic time its death was seen, while it waits for the restart


EXECUTOR_NODE = "chunk_executor"


class SignalStop:
    """While alive: SIGINT and SIGTERM set :attr:`event` and say which signal in :attr:`why` (the run's stop
    reason, ``why`` until then); :meth:`restore` puts the previous handlers back."""

    def __init__(self, why: str = "duration reached"):
        self.event = threading.Event()
        self.why = why
        self._previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}

    def _on_signal(self, signum, frame) -> None:  # noqa: ARG002 - signal handler signature
        self.why = f"{signal.Signals(signum).name} received"
        self.event.set()

    def restore(self) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)


def respawns(spec_name: str, respawn: bool, respawn_executor: bool) -> bool:
    """Whether the launchers restart node ``spec_name`` when it dies: the executor with ``respawn_executor`` only
    (it commands the arm: off by default, see the module docstring), every other node with ``respawn``."""
    return respawn_executor if spec_name == EXECUTOR_NODE else respawn


@dataclass
class ProcessGroup:
    """Start, watch and stop the nodes of one run (see the module docstring for the shutdown and respawn rules).

    A node started with ``respawn=True`` is watched by a thread of this group (every ``poll_s``): when it dies before
    :meth:`stop`, it is started again ``respawn_delay_s`` later, and :meth:`first_dead` never reports it.
    ``pids_path``: a JSON file of each node's current pid, rewritten at every start and restart (by whoever starts
    the process, so it never lags a restart).
    """

    log_dir: Path
    env: dict[str, str]
    echo: bool = False
    nodes: list[NodeProcess] = field(default_factory=list)
    respawn_delay_s: float = 2.0
    poll_s: float = 0.05
    pids_path: Path | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _stopping: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _watcher: threading.Thread | None = field(default=None, init=False, repr=False)

    def __post_init__(self):
        if not (self.respawn_delay_s >= 0.0 and self.poll_s > 0.0):
            raise ValueError(f"respawn_delay_s={self.respawn_delay_s!r} must be >= 0 and poll_s={self.poll_s!r} > 0")

    def _popen(self, cmd: list[str], log_path: Path, append: bool) -> subprocess.Popen:
        log = open(log_path, "ab" if append else "wb")  # noqa: SIM115  (kept open for the child's lifetime)
        try:
            return subprocess.Popen(cmd, env=self.env, stdin=subprocess.DEVNULL, stdout=None if self.echo else log,
                                    stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        finally:
            log.close()

    def start(self, spec: graph.NodeSpec, cmd: list[str], respawn: bool = False) -> NodeProcess:
        """Start one node (its output in ``<log_dir>/<name>.log``); ``respawn``: restart it whenever it dies."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{spec.name}.log"
        node = NodeProcess(spec, cmd, self._popen(cmd, log_path, append=False), log_path, respawn=respawn)
        with self._lock:
            self.nodes.append(node)
            self._write_pids()
            if respawn and self._watcher is None:
                self._watcher = threading.Thread(target=self._watch, name="para_deploy_respawn", daemon=True)
                self._watcher.start()
        return node

    def _log_line(self, node: NodeProcess, text: str) -> None:
        line = f"[para-deploy] {datetime.now().strftime('%H:%M:%S')} {text}"
        if self.echo:
            print(line, flush=True)
            return
        try:
            with open(node.log_path, "a") as log:
                log.write(line + "\n")
        except OSError:
            pass

    def _watch(self) -> None:
        """Respawn thread: note each death of a respawned node, start it again ``respawn_delay_s`` later."""
        while not self._stopping.wait(self.poll_s):
            with self._lock:
                if self._stopping.is_set():
                    return
                now = time.monotonic()
                for n in self.nodes:
                    if not n.respawn:
                        continue
                    if n.down_since is None and n.proc.poll() is not None:
                        n.down_since = now
                        n.exit_statuses.append(n.proc.returncode)
                        self._log_line(n, f"{n.spec.name} (pid {n.proc.pid}) exited with status {n.proc.returncode};"
                                          f" restarting it in {self.respawn_delay_s:g} s")
                    if n.down_since is not None and now - n.down_since >= self.respawn_delay_s:
                        n.proc = self._popen(n.cmd, n.log_path, append=True)
                        n.restarts += 1
                        n.down_since = None
                        self._write_pids()
                        self._log_line(n, f"{n.spec.name} restarted (restart {n.restarts}, pid {n.proc.pid})")

    def _write_pids(self) -> None:
        """Under the lock: ``pids_path`` gets ``{node name: current pid}``."""
        if self.pids_path is not None:
            self.pids_path.write_text(json.dumps({n.spec.name: n.proc.pid for n in self.nodes}))

    def restarts(self) -> int:
        """Restarts of all nodes so far."""
        with self._lock:
            return sum(n.restarts for n in self.nodes)

    def pids(self) -> list[int]:
        with self._lock:
            return [n.proc.pid for n in self.nodes]

    def first_dead(self) -> NodeProcess | None:
        """A node that has exited on its own (before the shutdown) and is not respawned, or None."""
        with self._lock:
            for n in self.nodes:
                if not n.respawn and n.proc.poll() is not None:
                    n.exited_early = True
                    n.returncode = n.proc.returncode
                    return n
        return None

    def stop(self, timeout_s: float = 5.0) -> None:
        """End respawning, SIGINT every node, wait up to ``timeout_s`` in all, SIGKILL the process group of any
        still running. A respawned node that is dead at this moment (waiting for its restart) counts as exited
        early."""
        with self._lock:
            self._stopping.set()
            watcher = self._watcher
        if watcher is not None:
            watcher.join(timeout=5.0)
        for n in self.nodes:
            if n.respawn and (n.down_since is not None or n.proc.poll() is not None):
                n.exited_early = True
                if n.down_since is None:  # died since the watcher last looked
                    n.exit_statuses.append(n.proc.returncode)
            elif n.proc.poll() is None:
                try:
                    os.killpg(n.proc.pid, signal.SIGINT)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + timeout_s
        for n in self.nodes:
            try:
                n.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                n.killed = True
                try:
                    os.killpg(n.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                n.proc.wait()
            if n.returncode is None:
                n.returncode = n.proc.returncode
        for n in self.nodes:  # grandchildren a node left in its group
            try:
                os.killpg(n.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def log_tail(self, node: NodeProcess, n_lines: int = 25) -> str:
        try:
            lines = node.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n_lines:])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="para-deploy", description=__doc__.split("\n\n")[0],
        epilog="Same graph as `ros2 launch para_ros deploy.launch.py` (nodes, executables and parameter files from "
               "para_ros/deploy/graph.py). Empty values keep config/*.yaml.")
    parser.add_argument("--backend", choices=graph.BACKENDS, default="sim",
                        help="robot: sim (simulated YAM, default) | i2rt (real YAM, I2RT SDK on CAN) | "
                             "topic (an arm behind a ros2_control joint_trajectory_controller: see "
                             "--joint-trajectory-topic)")
    parser.add_argument("--checkpoint", default="", help="policy checkpoint directory (model.safetensors + "
                        "config.json); default: backend sim: the shipped pick-and-place checkpoint "
                        "(checkpoints/pick_place); a robot: config/inference.yaml's (an UNTRAINED random model "
                        "unless set there); 'none': the UNTRAINED random model")
    parser.add_argument("--engage", action="store_true",
                        help="hand the arm to the policy at start (always so for backend sim); without it the "
                             "executor of a real arm waits, disengaged, for `ros2 service call /chunk_executor/engage "
                             "std_srvs/srv/Trigger`")
    parser.add_argument("--lockstep", action="store_true",
                        help="backend sim: lockstep evaluation: the simulator runs on /clock and steps only once the "
                             "graph has answered (each frame's chunk, each executor tick), so the episodes' outcomes "
                             "depend on the seeds, not on the machine's load (para_ros.sim.lockstep)")
    parser.add_argument("--no-task", action="store_true",
                        help="backend sim: do not run pick-and-place episodes (by default the launcher resets the "
                             "task after each success or --episode-time-limit and counts attempts and successes)")
    parser.add_argument("--episode-time-limit", type=float, default=30.0,
                        help="backend sim: seconds per pick-and-place attempt (default 30)")
    parser.add_argument("--task-seed", type=int, default=100000,
                        help="backend sim: layout seed of the first attempt (default 100000, held out from training)")
    parser.add_argument("--device", default="", help="torch device: auto | cpu | cuda | cuda:N (default: file's)")
    parser.add_argument("--dtype", default="", choices=["", *INFERENCE_DTYPES],
                        help="inference precision (auto: the fastest the device computes natively)")
    parser.add_argument("--fast-path", dest="fast_path", nargs="?", const="true", default="",
                        choices=["", "true", "false"],
                        help="the inference node's fast path (para_core.model.v4_fast: the reference path's argmax "
                             "voxels, tested; pick_place 1.4x faster on 2 CPU cores); default: the file's (off)")
    parser.add_argument("--compile-mode", default="", choices=["", *COMPILE_MODES],
                        help="torch.compile the backbone (the first inference compiles: tens of seconds); default: "
                             "the file's (off)")
    for view in ("scene", "wrist"):
        parser.add_argument(f"--{view}-image-topic", default="", help=f"{view} camera image topic")
        parser.add_argument(f"--{view}-info-topic", default="", help=f"{view} camera CameraInfo topic")
    parser.add_argument("--joint-trajectory-topic", default="",
                        help="backend topic only: the joint_trajectory_controller's topic, e.g. "
                             "/arm_controller/joint_trajectory (default: config/executor.yaml, /joint_trajectory)")
    parser.add_argument("--arm-joint-names", default="",
                        help="backend topic only: the controller's 6 arm joint names, comma-separated, YAM order "
                             "joint1..joint6 (default: the YAM's joint1..joint6). The gripper is not in the "
                             "trajectory: it goes out as std_msgs/Float64 0..1 on /gripper_command")
    parser.add_argument("--duration", type=float, default=60.0,
                        help="seconds to run, from the start of the nodes (default 60; 0 = until Ctrl-C)")
    parser.add_argument("--out", default=None, help="output directory (default: runs/<timestamp>)")
    parser.add_argument("--no-record", action="store_true", help="do not write the rosbag2 (MCAP) recording")
    parser.add_argument("--record-image-period", type=float, default=0.5,
                        help="record camera images of both cameras at most once per this many seconds of image stamp "
                             "(default 0.5: 2 Hz; 0 = every frame). Both cameras are recorded, so the recording "
                             "replays through `para-bag eval` / `para-bag extract`")
    parser.add_argument("--shutdown-timeout", type=float, default=5.0,
                        help="seconds the nodes get to stop after SIGINT before they are killed (default 5)")
    parser.add_argument("--echo", action="store_true", help="show the nodes' output here instead of in logs/")
    parser.add_argument("--respawn", action="store_true",
                        help="restart inference_node and sim_node when they die (after --respawn-delay; counted in "
                             "the summary); without it a dead node ends the run")
    parser.add_argument("--respawn-executor", action="store_true",
                        help="also restart chunk_executor when it dies (off by default: it commands the arm, so a "
                             "person should look at why it died before it comes back)")
    parser.add_argument("--respawn-delay", type=float, default=2.0,
                        help="seconds between a node's death and its restart (default 2)")
    return parser


def _settings(args) -> graph.DeploySettings:
    return graph.DeploySettings(
        backend=args.backend, checkpoint=args.checkpoint, device=args.device, dtype=args.dtype,
        fast_path=args.fast_path, compile_mode=args.compile_mode,
        scene_image_topic=args.scene_image_topic, scene_info_topic=args.scene_info_topic,
        wrist_image_topic=args.wrist_image_topic, wrist_info_topic=args.wrist_info_topic,
        joint_trajectory_topic=args.joint_trajectory_topic, arm_joint_names=args.arm_joint_names,
        engage=args.engage, lockstep=args.lockstep)


def _effective_params(params_file: str, node: str, overrides: dict) -> dict:
    """A node's parameters as it will run: its shipped file, then the launcher's overrides."""
    params = dict(yaml.safe_load(share_file(params_file).read_text())[node]["ros__parameters"])
    params.update(overrides)
    return params


def graph_topics(plan):
    """The ``GraphTopics`` the monitor watches, from the effective parameters of the planned nodes."""
    from para_ros.deploy.monitor import GraphTopics

    specs = {spec.name: (spec, overrides) for spec, overrides in plan}
    inference = _effective_params(specs["inference_node"][0].params_file, "inference_node",
                                  specs["inference_node"][1])
    executor = _effective_params(specs["chunk_executor"][0].params_file, "chunk_executor",
                                 specs["chunk_executor"][1]) if "chunk_executor" in specs else {}
    default = GraphTopics()
    return GraphTopics(
        scene_image=inference.get("scene_image_topic", default.scene_image),
        scene_info=inference.get("scene_info_topic", default.scene_info),
        wrist_image=inference.get("wrist_image_topic", default.wrist_image),
        wrist_info=inference.get("wrist_info_topic", default.wrist_info),
        joint_trajectory=executor.get("joint_trajectory_topic", default.joint_trajectory),
        world_frame=inference.get("world_frame", default.world_frame))


def _argument_problem(args) -> str | None:
    """Why ``args`` cannot run (a bad value, an existing recording), or None."""
    if args.duration < 0 or args.shutdown_timeout <= 0 or args.record_image_period < 0:
        return "--duration must be >= 0, --shutdown-timeout > 0, --record-image-period >= 0"
    if not 0.0 <= args.respawn_delay <= 600.0:
        return f"--respawn-delay {args.respawn_delay} must be within 0..600 s"
    if not 1.0 <= args.episode_time_limit <= 600.0:
        return f"--episode-time-limit {args.episode_time_limit} must be within 1..600 s"
    from para_ros.sim.pick_place import check_seed
    try:
        check_seed(args.task_seed)
    except ValueError as exc:
        return f"--task-seed: {exc}"
    return None


def _output_dir(args) -> Path:
    return Path(args.out or Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S"))


def _start_graph(args, settings, group: ProcessGroup, out: Path, topics):
    """Start the nodes, the monitor (and its recorder) and, against the simulator, the task driver."""
    from para_ros.bag.recording import McapRecorder, ros_type_name
    from para_ros.deploy.monitor import DeployMonitor, record_topics

    graph_start_ns = time.time_ns()
    for spec, cmd in graph_commands(settings):
        node = group.start(spec, cmd, respawn=respawns(spec.name, args.respawn, args.respawn_executor))
        print(f"  started {spec.name} (pid {node.proc.pid}{', respawned when it dies' if node.respawn else ''})"
              f": {' '.join(cmd[1:])}", flush=True)
    recorder = driver = None
    if not args.no_record:
        recorder = McapRecorder(out / "recording",
                                {t: ros_type_name(c) for t, c in record_topics(topics).items()})
    monitor = DeployMonitor(recorder, image_period_s=args.record_image_period, topics=topics)
    monitor.data.graph_start_ns = graph_start_ns
    if settings.backend == "sim" and not args.no_task:
        from para_ros.deploy.closed_loop import TaskDriver

        driver = TaskDriver(seed=args.task_seed, time_limit_s=args.episode_time_limit, lockstep=settings.lockstep)
        driver.start()
    return monitor, recorder, driver


def _watch(args, group: ProcessGroup, monitor, stop: SignalStop, t_start: float) -> int:
    """Until the duration, a signal or a node's death (not respawned): report restarts and progress. -> status."""
    restarts_seen, last_report = 0, time.monotonic()
    while not stop.event.is_set():
        elapsed = time.monotonic() - t_start
        if args.duration > 0 and elapsed >= args.duration:
            return 0
        dead = group.first_dead()
        if dead is not None:
            stop.why = f"{dead.spec.name} exited early with status {dead.returncode}"
            return 1
        if group.restarts() != restarts_seen:
            restarts_seen = group.restarts()
            print("  restarts: " + ", ".join(f"{n.spec.name} {n.restarts} (pid {n.proc.pid}, exit statuses "
                                             f"{n.exit_statuses})" for n in group.nodes if n.restarts), flush=True)
        if time.monotonic() - last_report >= 10.0:
            last_report = time.monotonic()
            frames, chunks, commands = monitor.counts()
            print(f"  t={elapsed:5.1f} s: {frames} scene frames, {chunks} chunks, {commands} commands", flush=True)
        stop.event.wait(0.2)
    return 0


def _report(out: Path, settings, group: ProcessGroup, monitor, recorder, driver, stop_reason: str,
            duration_s: float, status: int) -> int:
    """The summary (printed, summary.txt, summary.json), the snapshot and the recording's line. -> exit status."""
    from para_ros.deploy.summary import format_summary, summary_dict

    record = monitor.record()
    record.duration_s = duration_s
    record.untrained = graph.uses_untrained_model(settings)
    lines = [driver.summary_line()] if driver is not None else []
    snapshot = monitor.save_snapshot(out / "snapshot.png", lines=[
        f"PARA {record.model_id}{' (UNTRAINED)' if record.untrained else ''}",
        "path: EE -> steps (green early, blue late); squares: argmax voxels; dots: top voxels"])
    lines.append(f"  snapshot              {snapshot if snapshot else 'none (no chunk with a matching scene image)'}")
    if recorder is not None:
        total = sum(recorder.counts.values())
        lines.append(f"  recording             {recorder.path} (rosbag2, MCAP, {total} messages: "
                     + ", ".join(f"{t} {n}" for t, n in recorder.counts.items()) + ")")
    for n in group.nodes:
        how = "killed after the shutdown timeout" if n.killed else (
            f"exited early, status {n.returncode}" if n.exited_early else f"stopped on SIGINT, status {n.returncode}")
        if n.restarts or n.exit_statuses:
            how += (f"; restarted {n.restarts} time{'s' if n.restarts != 1 else ''} (exit statuses "
                    f"{', '.join(str(c) for c in n.exit_statuses)})")
        lines.append(f"  node {n.spec.name:<16} {how}  (log {n.log_path})")
        if n.killed or n.exited_early:
            status = 1
    text = format_summary(record, lines)
    print(text, flush=True)
    (out / "summary.txt").write_text(text + "\n")
    summary = summary_dict(record)
    if driver is not None:
        from para_ros.deploy.closed_loop import summarise

        summary["task"] = {**summarise(driver.rows), "attempts": [vars(r) for r in driver.rows],
                           "error": driver.error}
    summary.update({"snapshot": str(snapshot) if snapshot else None,
                    "recording": str(recorder.path) if recorder else None,
                    "nodes": {n.spec.name: {"pid": n.proc.pid, "returncode": n.returncode, "killed": n.killed,
                                            "exited_early": n.exited_early, "respawn": n.respawn,
                                            "restarts": n.restarts, "exit_statuses": list(n.exit_statuses)}
                              for n in group.nodes},
                    "restarts": sum(n.restarts for n in group.nodes),
                    "stop_reason": stop_reason})
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    for n in group.nodes:
        if n.exited_early or n.killed:
            print(f"--- last lines of {n.log_path}:\n{group.log_tail(n)}", file=sys.stderr)
    return status


def run(args) -> int:
    """Run the graph for ``args`` (parsed :func:`build_parser` arguments); return the exit status.

    Steps: check the arguments, start the graph (:func:`_start_graph`), watch it (:func:`_watch`), stop it (task
    driver, nodes, monitor, recording), report (:func:`_report`)."""
    try:
        settings = _settings(args)
    except ValueError as exc:
        print(f"para-deploy: {exc}", file=sys.stderr)
        return 2
    out = _output_dir(args)
    problem = _argument_problem(args)
    if problem is None and not args.no_record and (out / "recording").exists():
        problem = f"{out / 'recording'} exists already: choose another --out (or --no-record)"
    if problem is not None:
        print(f"para-deploy: {problem}", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    env = graph_env()  # the monitor joins the same domain
    topics = graph_topics(graph.plan(settings))
    stop = SignalStop()
    group = ProcessGroup(out / "logs", env, echo=args.echo, respawn_delay_s=args.respawn_delay,
                         pids_path=out / "pids.json")
    monitor = recorder = driver = None
    t_start = time.monotonic()
    status = 0
    try:
        print(f"para-deploy: backend {settings.backend}, ROS_DOMAIN_ID {env['ROS_DOMAIN_ID']}, output {out}",
              flush=True)
        monitor, recorder, driver = _start_graph(args, settings, group, out, topics)
        limit = f"for {args.duration:.0f} s" if args.duration > 0 else "until Ctrl-C"
        print(f"para-deploy: running {limit} (logs in {out / 'logs'})", flush=True)
        status = _watch(args, group, monitor, stop, t_start)
    finally:
        duration_s = time.monotonic() - t_start
        print(f"para-deploy: stopping ({stop.why})", flush=True)
        if driver is not None:
            driver.stop_event.set()
            driver.join(timeout=5.0)
        group.stop(timeout_s=args.shutdown_timeout)
        stop.restore()
        if monitor is not None:
            time.sleep(0.2)  # the last diagnostics the nodes sent on shutdown
            monitor.stop()
    if recorder is not None:
        recorder.close()
    return _report(out, settings, group, monitor, recorder, driver, stop.why, duration_s, status)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
