"""``para-teleop``'s running part: the robot side of the deploy graph, the leader bridge, the operator's commands and
one rosbag2 recording per episode (:func:`run_teleop`).

The graph is the deploy graph of :mod:`para_ros.deploy.graph` for the robot without the inference node: with robot
``sim`` the simulator (which publishes the joint states, TF and both cameras) and the chunk executor; with ``i2rt``
the executor on the I2RT SDK (which publishes ``/joint_states`` and the arm's TF with the wrist camera) and, with a
calibration file, ``calibration_tf`` (the scene camera's pose); the cameras come from their drivers. The executor
runs as in deployment (its ``config/executor.yaml``, the robot's backend, ``auto_engage`` only for the simulator or
``--engage``), with one difference, :data:`TELEOP_EXECUTOR_OVERRIDES`. The leader reaches it only as action chunks
(:mod:`para_ros.teleop.bridge`).

Recording: the deploy monitor's recorder (:class:`para_ros.deploy.monitor.DeployMonitor`, every camera frame kept)
writes into the open episode's bag only: the cameras and their ``camera_info``, ``/tf``, ``/tf_static`` (the latched
messages written at the start of every bag), ``/joint_states``, the leader's chunks on ``/para/action_chunk``, the
executor's commands and ``/diagnostics``: what ``para-bag extract`` and ``para-bag export-lerobot`` read.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from para_ros.deploy import graph
from para_ros.deploy.graph_run import GraphRun, SignalStop
from para_ros.teleop.episodes import (
    EpisodeDesk,
    discard_episode,
    episode_dir,
    episode_metadata,
    first_episode,
    write_episode,
)
from para_ros.teleop.leader_gate import LeaderConfig
from para_ros.teleop.leaders import LEADER_TOPIC, LeaderNotFound, SdkLeader, leader_kind

COMMAND_TOPIC = "/para_teleop/command"
# The executor's parameters under teleoperation: the chunk's pose is the leader's now, not a prediction from a camera
# frame taken a latency ago, so no lead is added to the lookahead (chunk_min_lead_s, docs/parameters.md).
TELEOP_EXECUTOR_OVERRIDES = {"chunk_min_lead_s": 0.0}


@dataclass
class TeleopSettings:
    """What ``para-teleop`` runs; every field is checked here, with an error naming it and the fix.

    Args:
        robot: the follower (``sim``, ``i2rt``, ``topic``: as ``para-deploy --robot``).
        leader: ``topic`` (``/leader/joint_states``) or ``i2rt`` (the SDK's leader arm).
        leader_topic: the topic leader's ``sensor_msgs/JointState`` topic.
        leader_channel: the SDK leader's CAN interface (not the follower's).
        leader_joint_names: the names the topic leader gives the follower's joints, comma-separated ("" = the
            follower's own, ``config/yam.yaml``).
        task: the task string written into every episode's metadata (and ``para-bag export-lerobot --task``).
        out: the folder of the recordings (``episode_NNNNNN/``).
        append: ``--continue``: add episodes after the recordings already in ``out``.
        episodes: end the session after this many kept episodes (0: run until Ctrl-C).
        max_episode_s: end an episode (kept, unmarked) after this long (0: no limit).
        calibration: a ``calibration.yaml`` (``para-calib solve``), as ``para-deploy --calibration``; copied into
            every episode.
        engage: a real arm: hand it to the leader at start (else call ``/chunk_executor/engage``).
        node_params: parameters of the graph's nodes ({node: {name: value}}).
        scripted_leader_seed: robot ``sim`` only: start the scripted leader (:mod:`para_ros.teleop.scripted_leader`)
            with layouts from this seed (episode k: seed + k); None: a person (or another process) leads.
        rate_hz, leader_timeout_s, sync_tolerance_rad, jump_rad: the bridge's rate and the leader gate's thresholds
            (:class:`para_ros.teleop.leader_gate.LeaderConfig`).
    """

    robot: str = "sim"
    leader: str = "topic"
    leader_topic: str = LEADER_TOPIC
    leader_channel: str = "can1"
    leader_joint_names: str = ""
    task: str = ""
    out: str = ""
    append: bool = False
    episodes: int = 0
    max_episode_s: float = 0.0
    calibration: str = ""
    engage: bool = False
    node_params: dict = field(default_factory=dict)
    scripted_leader_seed: int | None = None
    rate_hz: float = 50.0
    leader_timeout_s: float = 0.5
    sync_tolerance_rad: float = 0.15
    jump_rad: float = 0.5

    def __post_init__(self):
        from para_ros.nodes.parameter_registry import check_node_params

        self.robot = graph.resolve_robot(self.robot)
        leader_kind(self.leader)
        if not self.task.strip():
            raise ValueError(
                '--task is needed: the task of the episodes, e.g. --task "pick the cube, place it on the pad"'
            )
        if not self.out:
            raise ValueError("--out is needed: the folder of the recordings")
        if not self.leader_topic.startswith("/"):
            raise ValueError(f"--leader-topic {self.leader_topic!r}: give an absolute topic, e.g. /{self.leader_topic}")
        if not 0 <= int(self.episodes) <= 100000:
            raise ValueError(f"--episodes {self.episodes}: use 0 (until Ctrl-C) .. 100000")
        if not 0.0 <= float(self.max_episode_s) <= 3600.0:
            raise ValueError(f"--max-episode-s {self.max_episode_s}: use 0 (no limit) .. 3600")
        if self.scripted_leader_seed is not None:
            from para_ros.sim.pick_place import check_seed

            check_seed(int(self.scripted_leader_seed))
            if self.robot != "sim" or self.leader != "topic":
                raise ValueError(
                    "--scripted-leader drives the simulator through the topic leader: use --robot sim --leader topic"
                )
        if self.calibration:
            if not Path(self.calibration).is_file():
                raise ValueError(f"--calibration {self.calibration!r}: no such file (para-calib solve writes one)")
            self.calibration = str(Path(self.calibration).resolve())
        self.node_params = check_node_params(self.node_params)
        LeaderConfig(self.leader_timeout_s, self.sync_tolerance_rad, self.jump_rad)  # ValueError naming a bad one


def plan_robot_side(settings: TeleopSettings):
    """(the graph's nodes without the inference node, with their overrides; the deploy graph's topics)."""
    from para_ros.deploy.monitor import graph_topics

    full = graph.plan(
        graph.DeploySettings(robot=settings.robot, calibration=settings.calibration, engage=settings.engage)
    )
    topics = graph_topics(full)
    plan = []
    for spec, overrides in full:
        if spec.name in ("inference_node", "calibration_monitor"):
            continue
        if spec.name == "chunk_executor":  # the untrained model's relaxations never apply: no model runs here
            overrides = {k: v for k, v in overrides.items() if k not in graph.UNTRAINED_EXECUTOR_OVERRIDES}
            overrides.update(TELEOP_EXECUTOR_OVERRIDES)
        plan.append((spec, overrides))
    return plan, topics


def _follower_gripper(plan) -> str:
    """The gripper's name in the follower's ``/joint_states``: the executor's ``gripper_joint_name`` as it runs
    ("" for robot ``topic``: the gripper has its own controller)."""
    from para_ros.paths import effective_params

    spec, overrides = next((s, o) for s, o in plan if s.name == "chunk_executor")
    return str(effective_params(spec.params_file, spec.name, overrides).get("gripper_joint_name", "gripper"))


def _keyboard(node, stream) -> threading.Thread:
    """A daemon thread feeding the lines typed on ``stream`` to the session; it ends at end of input."""

    def read() -> None:
        for line in stream:
            node.on_text(line, "keyboard")

    thread = threading.Thread(target=read, name="para_teleop_keyboard", daemon=True)
    thread.start()
    return thread


def _robot_dead(run: GraphRun) -> None:
    dead = run.first_dead()
    if dead is not None:
        raise RuntimeError(f"{dead.spec.name} exited with status {dead.returncode}:\n{run.log_tail(dead)}")


def _wait(desk: EpisodeDesk, timeout_s: float | None, stop: threading.Event, run: GraphRun):
    """The accepted command, waiting up to ``timeout_s`` (None: until one comes) in slices of a second, raising
    RuntimeError as soon as a node of the robot side has died."""
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        left = 1.0 if deadline is None else min(1.0, deadline - time.monotonic())
        cmd = desk.take(max(0.0, left), stop)
        if cmd is not None or stop.is_set() or (deadline is not None and time.monotonic() >= deadline):
            return cmd
        _robot_dead(run)


def run_teleop(settings: TeleopSettings, echo: bool = False, keyboard=None) -> int:
    """Run the session of ``settings`` (module docstring); the exit status: 0 done, 1 after an error, 2 for bad
    input (nothing started, nothing written), 130 when stopped by a signal. ``keyboard``: the operator's text stream
    (default stdin)."""
    from para_ros.robot.yam import load_yam_config  # the follower's description (its joints, limits, model)

    out = Path(settings.out)
    leader = "topic"
    try:
        k = first_episode(out, settings.append)
        arm = load_yam_config(settings.node_params.get("chunk_executor", {}).get("yam_config") or None)
        if settings.leader == "i2rt":  # opened first: no leader, nothing started
            leader = SdkLeader(settings.leader_channel, arm.model.arm_type or "yam", arm.n_joints)
    except (ValueError, LeaderNotFound) as exc:
        print(f"para-teleop: {exc}", file=sys.stderr)
        return 2
    names = tuple(n.strip() for n in settings.leader_joint_names.split(",") if n.strip())
    if names and len(names) != arm.n_joints:
        print(f"para-teleop: --leader-joint-names: give {arm.n_joints} names, one per follower joint", file=sys.stderr)
        return 2
    from para_ros.bag.recording import ros_type_name
    from para_ros.deploy.monitor import DeployMonitor, record_topics
    from para_ros.deploy.robot_eval_run import EpisodeRecordings
    from para_ros.teleop.bridge import TeleopNode

    out.mkdir(parents=True, exist_ok=True)
    plan, topics = plan_robot_side(settings)
    logs = out / "logs" / datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    run = GraphRun(logs, echo=echo)
    signals = SignalStop("stopped by a signal")
    stop = signals.event
    desk = EpisodeDesk()
    node = monitor = recordings = scripted = None
    kept, status = 0, 0
    try:
        run.start_plan(plan, settings.node_params)
        node = TeleopNode(
            desk,
            arm,
            leader,
            settings.leader_topic,
            names,
            LeaderConfig(settings.leader_timeout_s, settings.sync_tolerance_rad, settings.jump_rad),
            settings.rate_hz,
            domain_id=int(run.domain_id),
            follower_gripper_name=_follower_gripper(plan),
        )
        recordings = EpisodeRecordings({t: ros_type_name(c) for t, c in record_topics(topics).items()})
        monitor = DeployMonitor(recordings, image_period_s=0.0, topics=topics)
        _keyboard(node, keyboard if keyboard is not None else sys.stdin)
        if settings.scripted_leader_seed is not None:
            logs.mkdir(parents=True, exist_ok=True)
            with open(logs / "scripted_leader.log", "wb") as log:
                scripted = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "para_ros.teleop.scripted_leader",
                        "--seed",
                        str(settings.scripted_leader_seed),
                    ],
                    env=run.env,
                    stdin=subprocess.DEVNULL,
                    stdout=None if echo else log,
                    stderr=subprocess.STDOUT,
                )
        print(
            f"para-teleop: robot {settings.robot}, leader {settings.leader}"
            + (f" ({settings.leader_topic})" if settings.leader == "topic" else f" ({settings.leader_channel})")
            + f", ROS_DOMAIN_ID {run.domain_id}, recordings in {out}; commands on the keyboard or {COMMAND_TOPIC}"
            + (
                ""
                if settings.robot == "sim" or settings.engage
                else "; the arm is disengaged: call /chunk_executor/engage"
            ),
            flush=True,
        )
        while not stop.is_set() and (settings.episodes == 0 or kept < settings.episodes):
            _robot_dead(run)
            desk.idle(k)
            node.prompt("idle", k, task=settings.task)
            print(
                f"  episode {k}: bring the leader to the follower, then start (Enter, or 'start' on {COMMAND_TOPIC})",
                flush=True,
            )
            if _wait(desk, None, stop, run) is None:
                break
            bag = episode_dir(out, k)
            recordings.open(bag)
            started_at = datetime.now(UTC).isoformat(timespec="seconds")
            t0 = time.monotonic()
            desk.recording(k)
            node.feedback(f"episode {k} recording")
            node.prompt("recording", k, task=settings.task)
            cmd = _wait(desk, settings.max_episode_s or None, stop, run)
            duration_s = time.monotonic() - t0
            counts = recordings.close()
            if cmd is not None and cmd.kind == "discard":
                discard_episode(out, bag, k, settings.task)
                print(f"  episode {k}: discarded (its recording deleted)", flush=True)
            else:
                meta = episode_metadata(
                    k,
                    settings.task,
                    cmd,
                    settings.robot,
                    settings.leader,
                    settings.calibration,
                    started_at,
                    duration_s,
                    counts,
                    node.leader_stats(),
                )
                if cmd is None and not stop.is_set():
                    meta["reason"] = f"time limit {settings.max_episode_s:g} s"
                write_episode(out, bag, meta, settings.calibration)
                kept += 1
                print(
                    f"  episode {k}: kept, {meta['mark']}"
                    + (f" ({meta['reason']})" if meta["reason"] else "")
                    + f", {duration_s:.1f} s, {counts.get('/joint_states', 0)} joint states, "
                    f"{counts.get(topics.scene_image, 0)} scene frames -> {bag}",
                    flush=True,
                )
            k += 1
    except RuntimeError as exc:
        print(f"para-teleop: {exc}", file=sys.stderr)
        status = 1
    finally:
        if recordings is not None:
            recordings.close()
        if scripted is not None and scripted.poll() is None:
            scripted.terminate()
            try:
                scripted.wait(timeout=5.0)
            except subprocess.TimeoutExpired:
                scripted.kill()
        if node is not None:
            node.close()
        if leader != "topic":
            leader.close()
        run.stop(timeout_s=5.0)
        if monitor is not None:
            monitor.stop()
        signals.restore()
    print(f"para-teleop: {kept} episode(s) kept in {out}", flush=True)
    if status == 0 and stop.is_set():
        return 130
    return status
