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
import json
import sys
import time
from datetime import datetime
from pathlib import Path

from para_core.model.config import COMPILE_MODES, INFERENCE_DTYPES
from para_ros.bag.recording import McapRecorder, ros_type_name
from para_ros.deploy import graph
from para_ros.deploy.episodes import TaskDriver, summarise
from para_ros.deploy.graph_run import GraphRun, SignalStop, graph_commands
from para_ros.deploy.monitor import DeployMonitor, graph_topics, record_topics
from para_ros.deploy.summary import format_summary, summary_dict
from para_ros.sim.pick_place import check_seed


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="para-deploy",
        description=__doc__.split("\n\n")[0],
        epilog="Same graph as `ros2 launch para_ros deploy.launch.py` (nodes, executables and parameter files from "
        "para_ros/deploy/graph.py). Empty values keep config/*.yaml.",
    )
    parser.add_argument(
        "--robot",
        choices=graph.BACKENDS,
        default="sim",
        help="the robot: sim (simulated YAM, default) | i2rt (real YAM, I2RT SDK on CAN) | "
        "topic (an arm behind a ros2_control joint_trajectory_controller: see --joint-trajectory-topic); it "
        "picks the executor's command backend (para_ros/nodes/command_backends.py)",
    )
    parser.add_argument(
        "--backend",
        choices=graph.BACKENDS,
        default="",
        help="deprecated name of --robot (still accepted, with a warning)",
    )
    parser.add_argument(
        "--checkpoint",
        default="",
        help="policy checkpoint directory (model.safetensors + "
        "config.json); default: robot sim: the shipped robust pick-and-place checkpoint "
        "(checkpoints/pick_place_robust; checkpoints/pick_place is the fixed-camera one); a robot: config/inference.yaml's (an UNTRAINED random model "
        "unless set there); 'none': the UNTRAINED random model",
    )
    parser.add_argument(
        "--engage",
        action="store_true",
        help="hand the arm to the policy at start (always so for robot sim); without it the "
        "executor of a real arm waits, disengaged, for `ros2 service call /chunk_executor/engage "
        "std_srvs/srv/Trigger`",
    )
    parser.add_argument(
        "--lockstep",
        action="store_true",
        help="robot sim: lockstep evaluation: the simulator runs on /clock and steps only once the "
        "graph has answered (each frame's chunk, each executor tick), so the episodes' outcomes "
        "depend on the seeds, not on the machine's load (para_ros.sim.lockstep)",
    )
    parser.add_argument(
        "--no-task",
        action="store_true",
        help="robot sim: do not run pick-and-place episodes (by default the launcher resets the "
        "task after each success or --episode-time-limit and counts attempts and successes)",
    )
    parser.add_argument(
        "--episode-time-limit",
        type=float,
        default=30.0,
        help="robot sim: seconds per pick-and-place attempt (default 30)",
    )
    parser.add_argument(
        "--task-seed",
        type=int,
        default=100000,
        help="robot sim: layout seed of the first attempt (default 100000, held out from training)",
    )
    parser.add_argument("--device", default="", help="torch device: auto | cpu | cuda | cuda:N (default: file's)")
    parser.add_argument(
        "--dtype",
        default="",
        choices=["", *INFERENCE_DTYPES],
        help="inference precision (auto: the fastest the device computes natively)",
    )
    parser.add_argument(
        "--fast-path",
        dest="fast_path",
        nargs="?",
        const="true",
        default="",
        choices=["", "true", "false"],
        help="the inference node's fast path (para_core.model.v4_fast: the reference path's argmax "
        "voxels, tested; faster: docs/benchmarks.md); default: the file's (off)",
    )
    parser.add_argument(
        "--compile-mode",
        default="",
        choices=["", *COMPILE_MODES],
        help="torch.compile the backbone (the first inference compiles: tens of seconds); default: the file's (off)",
    )
    for view in ("scene", "wrist"):
        parser.add_argument(f"--{view}-image-topic", default="", help=f"{view} camera image topic")
        parser.add_argument(f"--{view}-info-topic", default="", help=f"{view} camera CameraInfo topic")
    parser.add_argument(
        "--joint-trajectory-topic",
        default="",
        help="robot topic only: the joint_trajectory_controller's topic, e.g. "
        "/arm_controller/joint_trajectory (default: config/executor.yaml, /joint_trajectory)",
    )
    parser.add_argument(
        "--arm-joint-names",
        default="",
        help="robot topic only: the controller's 6 arm joint names, comma-separated, YAM order "
        "joint1..joint6 (default: the YAM's joint1..joint6). The gripper is not in the "
        "trajectory: it goes out as std_msgs/Float64 0..1 on /gripper_command",
    )
    parser.add_argument(
        "--calibration",
        default="",
        help="calibration.yaml (para-calib solve): the scene camera's "
        "static transform and the wrist mount come from it (see para_ros/deploy/graph.py)",
    )
    parser.add_argument(
        "--calibration-monitor",
        action="store_true",
        help="start calibration_monitor: the scene camera's told pose checked against an ArUco marker on the "
        "gripper, on /diagnostics (robot sim: the simulator renders the marker); see docs/calibration.md",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=60.0,
        help="seconds to run, from the start of the nodes (default 60; 0 = until Ctrl-C)",
    )
    parser.add_argument("--out", default=None, help="output directory (default: runs/<timestamp>)")
    parser.add_argument("--no-record", action="store_true", help="do not write the rosbag2 (MCAP) recording")
    parser.add_argument(
        "--record-image-period",
        type=float,
        default=0.5,
        help="record camera images of both cameras at most once per this many seconds of image stamp "
        "(default 0.5: 2 Hz; 0 = every frame). Both cameras are recorded, so the recording "
        "replays through `para-bag eval` / `para-bag extract`",
    )
    parser.add_argument(
        "--shutdown-timeout",
        type=float,
        default=5.0,
        help="seconds the nodes get to stop after SIGINT before they are killed (default 5)",
    )
    parser.add_argument("--echo", action="store_true", help="show the nodes' output here instead of in logs/")
    parser.add_argument(
        "--respawn",
        action="store_true",
        help="restart inference_node and sim_node when they die (after --respawn-delay; counted in "
        "the summary); without it a dead node ends the run",
    )
    parser.add_argument(
        "--respawn-executor",
        action="store_true",
        help="also restart chunk_executor when it dies (off by default: it commands the arm, so a "
        "person should look at why it died before it comes back)",
    )
    parser.add_argument(
        "--respawn-delay", type=float, default=2.0, help="seconds between a node's death and its restart (default 2)"
    )
    return parser


def _settings(args) -> graph.DeploySettings:
    return graph.DeploySettings(
        robot=args.robot,
        backend=args.backend,
        checkpoint=args.checkpoint,
        device=args.device,
        dtype=args.dtype,
        fast_path=args.fast_path,
        compile_mode=args.compile_mode,
        scene_image_topic=args.scene_image_topic,
        scene_info_topic=args.scene_info_topic,
        wrist_image_topic=args.wrist_image_topic,
        wrist_info_topic=args.wrist_info_topic,
        joint_trajectory_topic=args.joint_trajectory_topic,
        arm_joint_names=args.arm_joint_names,
        engage=args.engage,
        calibration=args.calibration,
        lockstep=args.lockstep,
        calibration_monitor=args.calibration_monitor,
    )


def _argument_problem(args) -> str | None:
    """Why ``args`` cannot run (a bad value, an existing recording), or None."""
    if args.duration < 0 or args.shutdown_timeout <= 0 or args.record_image_period < 0:
        return "--duration must be >= 0, --shutdown-timeout > 0, --record-image-period >= 0"
    if not 0.0 <= args.respawn_delay <= 600.0:
        return f"--respawn-delay {args.respawn_delay} must be within 0..600 s"
    if not 1.0 <= args.episode_time_limit <= 600.0:
        return f"--episode-time-limit {args.episode_time_limit} must be within 1..600 s"
    try:
        check_seed(args.task_seed)
    except ValueError as exc:
        return f"--task-seed: {exc}"
    return None


def _output_dir(args) -> Path:
    return Path(args.out or Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S"))


def _start_graph(args, settings, run: GraphRun, out: Path, topics):
    """Start the nodes, the monitor (and its recorder) and, against the simulator, the task driver."""
    graph_start_ns = time.time_ns()
    for node in run.start_commands(graph_commands(settings), args.respawn, args.respawn_executor):
        spec, cmd = node.spec, node.cmd
        print(
            f"  started {spec.name} (pid {node.proc.pid}{', respawned when it dies' if node.respawn else ''})"
            f": {' '.join(cmd[1:])}",
            flush=True,
        )
    recorder = driver = None
    if not args.no_record:
        recorder = McapRecorder(out / "recording", {t: ros_type_name(c) for t, c in record_topics(topics).items()})
    monitor = DeployMonitor(recorder, image_period_s=args.record_image_period, topics=topics)
    monitor.data.graph_start_ns = graph_start_ns
    if settings.robot == "sim" and not args.no_task:
        driver = TaskDriver(seed=args.task_seed, time_limit_s=args.episode_time_limit, lockstep=settings.lockstep)
        driver.start()
    return monitor, recorder, driver


def _watch(args, run: GraphRun, monitor, stop: SignalStop, t_start: float) -> int:
    """Until the duration, a signal or a node's death (not respawned): report restarts and progress. -> status."""
    restarts_seen, last_report = 0, time.monotonic()
    while not stop.event.is_set():
        elapsed = time.monotonic() - t_start
        if args.duration > 0 and elapsed >= args.duration:
            return 0
        dead = run.first_dead()
        if dead is not None:
            stop.why = f"{dead.spec.name} exited early with status {dead.returncode}"
            return 1
        if run.restarts() != restarts_seen:
            restarts_seen = run.restarts()
            print(
                "  restarts: "
                + ", ".join(
                    f"{n.spec.name} {n.restarts} (pid {n.proc.pid}, exit statuses {n.exit_statuses})"
                    for n in run.nodes
                    if n.restarts
                ),
                flush=True,
            )
        if time.monotonic() - last_report >= 10.0:
            last_report = time.monotonic()
            frames, chunks, commands = monitor.counts()
            print(f"  t={elapsed:5.1f} s: {frames} scene frames, {chunks} chunks, {commands} commands", flush=True)
        stop.event.wait(0.2)
    return 0


def _report(
    out: Path, settings, run: GraphRun, monitor, recorder, driver, stop_reason: str, duration_s: float, status: int
) -> int:
    """The summary (printed, summary.txt, summary.json), the snapshot and the recording's line. -> exit status."""
    record = monitor.record()
    record.duration_s = duration_s
    record.untrained = graph.uses_untrained_model(settings)
    lines = [driver.summary_line()] if driver is not None else []
    snapshot = monitor.save_snapshot(
        out / "snapshot.png",
        lines=[
            f"PARA {record.model_id}{' (UNTRAINED)' if record.untrained else ''}",
            "path: EE -> steps (green early, blue late); squares: argmax voxels; dots: top voxels",
        ],
    )
    lines.append(f"  snapshot              {snapshot if snapshot else 'none (no chunk with a matching scene image)'}")
    if recorder is not None:
        total = sum(recorder.counts.values())
        lines.append(
            f"  recording             {recorder.path} (rosbag2, MCAP, {total} messages: "
            + ", ".join(f"{t} {n}" for t, n in recorder.counts.items())
            + ")"
        )
    lines += run.node_lines()
    if run.failed():
        status = 1
    text = format_summary(record, lines)
    print(text, flush=True)
    (out / "summary.txt").write_text(text + "\n")
    summary = summary_dict(record)
    if driver is not None:
        summary["task"] = {**summarise(driver.rows), "attempts": [vars(r) for r in driver.rows], "error": driver.error}
    summary.update(
        {
            "snapshot": str(snapshot) if snapshot else None,
            "recording": str(recorder.path) if recorder else None,
            "nodes": run.node_summaries(),
            "restarts": run.restarts(),
            "stop_reason": stop_reason,
        }
    )
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str))
    for tail in run.failed_log_tails():
        print(tail, file=sys.stderr)
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
    topics = graph_topics(graph.plan(settings))
    stop = SignalStop()
    # the monitor in this process joins the run's domain
    graph_run = GraphRun(out / "logs", echo=args.echo, respawn_delay_s=args.respawn_delay, pids_path=out / "pids.json")
    monitor = recorder = driver = None
    t_start = time.monotonic()
    status = 0
    try:
        print(f"para-deploy: robot {settings.robot}, ROS_DOMAIN_ID {graph_run.domain_id}, output {out}", flush=True)
        try:
            monitor, recorder, driver = _start_graph(args, settings, graph_run, out, topics)
        except RuntimeError as exc:  # the domain is taken (para_ros.deploy.domain_check)
            print(f"para-deploy: {exc}", file=sys.stderr)
            return 2
        t_start = time.monotonic()  # the duration counts from the graph's start, not from the domain check's wait
        limit = f"for {args.duration:.0f} s" if args.duration > 0 else "until Ctrl-C"
        print(f"para-deploy: running {limit} (logs in {out / 'logs'})", flush=True)
        status = _watch(args, graph_run, monitor, stop, t_start)
    finally:
        duration_s = time.monotonic() - t_start
        print(f"para-deploy: stopping ({stop.why})", flush=True)
        if driver is not None:
            driver.stop_event.set()
            driver.join(timeout=5.0)
        graph_run.stop(timeout_s=args.shutdown_timeout)
        stop.restore()
        if monitor is not None:
            time.sleep(0.2)  # the last diagnostics the nodes sent on shutdown
            monitor.stop()
    if recorder is not None:
        recorder.close()
    return _report(out, settings, graph_run, monitor, recorder, driver, stop.why, duration_s, status)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
