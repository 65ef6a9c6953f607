"""The deploy graph, described once: which nodes run for which robot, and what each one is told.

Both launchers read this module and nothing else for that: ``launch/deploy.launch.py`` (``ros2 launch`` on a robot
PC) and ``para-deploy`` (:mod:`para_ros.commands.deploy`, the same graph as plain processes where ``ros2 launch`` is not
installed). A test runs both against each other, so they cannot drift.

Robots (``--robot`` / ``robot:=``; ``--backend`` / ``backend:=`` are their deprecated names), each with the
executor's command backend (its parameter ``backend``) from :mod:`para_ros.nodes.command_backends`:

* ``sim``: the embedded simulated YAM (``sim_node``) + inference + executor sending ``JointTrajectory`` to the sim.
* ``i2rt``: a real YAM on CAN through the I2RT SDK: inference + executor (``backend: i2rt_sdk``). The executor owns
  the CAN bus, so it also publishes ``/joint_states`` and the arm's TF (``base`` .. ``gripper``, ``grasp_site``, the
  wrist camera's optical frame at the mount of ``config/yam.yaml``); the cameras (and the scene camera's static TF)
  come from their drivers.
* ``topic``: an arm behind a ros2_control ``joint_trajectory_controller``: inference + executor (``backend:
  joint_trajectory``) with ``gripper_joint_name: ""`` (:data:`TOPIC_EXECUTOR_OVERRIDES`): a real controller rejects
  the whole trajectory when it names a joint it does not own, so the trajectory carries the 6 arm joints only
  (``arm_joint_names``, on ``joint_trajectory_topic``, e.g. ``/arm_controller/joint_trajectory``) and the gripper goes
  out as ``std_msgs/Float64`` 0 closed .. 1 open on the executor's ``gripper_command_topic`` (``config/executor.yaml``,
  default ``/gripper_command``), for the gripper controller's adapter. Cameras, TF and joint states come from the
  robot's drivers. ``joint_trajectory_topic`` and ``arm_joint_names`` apply to this robot only (the simulated arm
  and the SDK have fixed joint names and no trajectory topic to choose).

Overrides: only what the user set on the command line is passed as ``-p name:=value`` after the node's parameter
file (an empty setting keeps the file's value), so ``config/*.yaml`` stay the single place of every default.
One deliberate exception, for the untrained random model (no checkpoint on the command line nor in
``config/inference.yaml``): its chunks jump tens of centimetres between steps, which the executor's chunk plausibility
check (``max_implied_speed_m_s``) would reject whole, and their orientation is arbitrary, so IK finds no exact
solution and ``unreachable: hold`` would keep the arm still: the demo would show nothing of the executor. The executor
is then given :data:`UNTRAINED_EXECUTOR_OVERRIDES` (accept such chunks; move to the closest IK solution) so the chunks
reach the safety filter, which still clamps every pose into the workspace and checks every command against the joint
range, joint speed, tool speed and workspace of ``config/yam.yaml`` (unchanged). With a checkpoint nothing is relaxed.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field

import yaml

from para_core.model.config import COMPILE_MODES, INFERENCE_DTYPES
from para_ros.nodes.command_backends import ROBOTS, robot
from para_ros.paths import share_file
from para_ros.sim.lockstep import ACK_TOPIC

PACKAGE = "para_ros"
# The robots and the executor's command backend for each: para_ros.nodes.command_backends (ROBOTS), one registry.
BACKENDS = tuple(ROBOTS)
RVIZ_CONFIG = "config/para.rviz"

# Executor command backend (parameter ``backend`` of chunk_executor) per robot.
EXECUTOR_BACKEND = {name: r.command_backend for name, r in ROBOTS.items()}

# Executor parameters of the topic robot (a real joint_trajectory_controller): gripper not in the trajectory.
TOPIC_EXECUTOR_OVERRIDES = dict(ROBOTS["topic"].executor_parameters)
# Launcher settings that only the topic robot takes -> chunk_executor parameter names.
TOPIC_EXECUTOR_SETTINGS = ROBOTS["topic"].launcher_settings
# Every launcher setting that some robot alone takes (each is refused with the other robots).
LAUNCHER_SETTINGS = tuple(dict.fromkeys(name for r in ROBOTS.values() for name in r.launcher_settings))

# Executor parameters while the untrained random model runs (see the module docstring); limits stay untouched.
UNTRAINED_EXECUTOR_OVERRIDES = {"max_implied_speed_m_s": 100.0, "unreachable": "best_effort"}
INFERENCE_PARAMS_FILE = "config/inference.yaml"

# Lockstep evaluation (robot sim): the parameters that put each node on the simulator's clock. One more: the inference
# node's TF wait (wall time). The simulator publishes an instant's TF before its frames, so in lockstep the TF of a
# frame always comes, but on a loaded machine sometimes later than the real-time 0.1 s; a frame given up for that would
# never be answered (the simulator holds for it: a fault), while a longer wait costs no simulated time at all.
LOCKSTEP_TF_TIMEOUT_S = 5.0
LOCKSTEP_OVERRIDES = {
    "sim_node": {"publish_clock": True, "lockstep": True},
    "inference_node": {
        "use_sim_time": True,
        "tf_timeout_s": LOCKSTEP_TF_TIMEOUT_S,
        "lockstep_ack_topic": ACK_TOPIC,  # refused frames answered (the simulator's default topic)
    },
    "chunk_executor": {"use_sim_time": True, "lockstep": True},
    "calibration_monitor": {"use_sim_time": True},
}

# Camera-topic settings of the launchers -> inference_node parameter names.
CAMERA_TOPIC_PARAMETERS = ("scene_image_topic", "scene_info_topic", "wrist_image_topic", "wrist_info_topic")


@dataclass(frozen=True)
class NodeSpec:
    """One node of the deploy graph.

    Args:
        name: ROS node name (``__node:=``); also the key of its parameter file (``<name>: ros__parameters:``).
        executable: console script of package ``para_ros`` (what ``ros2 run`` / launch_ros ``Node`` start).
        module: Python module with ``main()`` (what ``python -m`` starts, same code as ``executable``).
        params_file: the node's parameter file, relative to the package share directory (``config/...``).
        backends: the robots whose graph includes this node.
    """

    name: str
    executable: str
    module: str
    params_file: str
    backends: tuple[str, ...] = field(default=BACKENDS)


NODES: tuple[NodeSpec, ...] = (
    NodeSpec("sim_node", "sim_node", "para_ros.nodes.sim_node", "config/sim.yaml", ("sim",)),
    NodeSpec("inference_node", "inference_node", "para_ros.nodes.inference_node", INFERENCE_PARAMS_FILE),
    NodeSpec("chunk_executor", "chunk_executor", "para_ros.nodes.chunk_executor", "config/executor.yaml"),
    # Only with a calibration file (see plan): its scene camera (and, robot topic, wrist mount) on /tf_static.
    NodeSpec(
        "calibration_tf",
        "calibration_tf",
        "para_ros.nodes.calibration_tf",
        "config/calibration_tf.yaml",
        ("i2rt", "topic"),
    ),
    # Only when asked (calibration_monitor): the scene camera's told pose checked against the gripper's marker.
    NodeSpec(
        "calibration_monitor",
        "calibration_monitor",
        "para_ros.nodes.calibration_monitor",
        "config/calibration_monitor.yaml",
    ),
)


# The checkpoint the sim robot runs by default: the robust pick-and-place policy (trained on demonstrations with the
# scene camera, the wrist mount, the light and clutter drawn per episode and calibration errors told to it:
# scripts/generalise robust), as good as the fixed-camera one at the nominal rig on the same layouts and better where
# the rig differs (README, Results). checkpoints/pick_place (one camera pose, one exact rig) stays shipped as a named
# alternative. The sim robot's default only: its images are the simulator's, never a real camera's.
SIM_CHECKPOINT = "checkpoints/pick_place_robust"
UNTRAINED = "none"


def shipped_checkpoint(relative: str = SIM_CHECKPOINT) -> str:
    """Absolute path of a shipped checkpoint directory, or "" when this installation has none."""

    try:
        return str(share_file(f"{relative}/config.json").parent)
    except FileNotFoundError:
        return ""


def effective_checkpoint(settings: DeploySettings) -> str:
    """The checkpoint the inference node gets from the launcher: "" = none set (its file's value applies)."""
    if settings.checkpoint == UNTRAINED:
        return ""
    if settings.checkpoint:
        return settings.checkpoint
    return shipped_checkpoint() if settings.robot == "sim" else ""


def _true_false(name: str, value, hint: str = "") -> str:
    """A true/false setting given as a bool or as text (a launch argument, a CLI option): "true", "false" or ""
    (not given). ValueError naming the value otherwise."""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value).strip().lower()
    if text not in ("", "true", "false"):
        raise ValueError(f"{name}={value!r}: use true or false{hint}")
    return text


@dataclass(frozen=True)
class DeploySettings:
    """What a user chooses when starting the graph (both launchers take exactly these).

    Args:
        robot: the robot the graph drives, one of :data:`BACKENDS` (:data:`para_ros.nodes.command_backends.ROBOTS`:
            sim, i2rt, topic); it picks the executor's command backend.
        checkpoint: policy checkpoint directory; "" = the default: for robot ``sim`` the shipped pick-and-place
            checkpoint (:data:`SIM_CHECKPOINT`, trained on this simulator), for a real robot
            ``config/inference.yaml``'s (untrained random model unless set there); :data:`UNTRAINED` ("none") =
            the untrained random model on any robot.
        device: torch device (``auto``, ``cpu``, ``cuda``, ``cuda:N``); "" = keep the file's value.
        dtype: ``fp32`` | ``bf16`` | ``fp16``; "" = keep the file's value.
        fast_path: the inference node's fast path (``para_core.model.v4_fast``: the reference's argmax voxels, tested),
            "true" | "false"; "" = keep the file's value (false).
        compile_mode: ``torch.compile`` the backbone (``para_core.model.config.COMPILE_MODES``); "" = keep (off).
        scene_image_topic, scene_info_topic, wrist_image_topic, wrist_info_topic: camera topics; "" = keep.
        joint_trajectory_topic: robot ``topic`` only: the controller's trajectory topic (absolute, e.g.
            ``/arm_controller/joint_trajectory``); "" = keep ``config/executor.yaml`` (``/joint_trajectory``).
        arm_joint_names: robot ``topic`` only: the controller's 6 arm joint names, comma-separated, in YAM order
            joint1..joint6; "" = the YAM's (``config/yam.yaml``: joint1..joint6).
        calibration: a ``calibration.yaml`` (``para-calib solve``), made absolute; "" = none. The scene camera's static
            transform and the wrist mount then come from it: ``sim_node`` publishes them instead of its truth,
            the ``i2rt`` executor's TF takes the wrist mount, and on a real rig the ``calibration_tf`` node publishes
            the scene camera (robot ``topic``: and the wrist mount).
        engage: hand the arm to the policy at start (the executor's ``auto_engage``). The executor otherwise starts
            disengaged (``config/executor.yaml``) until ``/chunk_executor/engage`` is called. Always on for robot
            ``sim``; for a real arm only when asked (``--engage`` / ``engage:=true``). Takes a bool or "true"/"false".
        backend: deprecated name of ``robot`` (``--backend``, ``backend:=``): still accepted, with a warning.
        calibration_monitor: start the ``calibration_monitor`` node (the scene camera's told pose checked against
            an ArUco marker on the gripper, on ``/diagnostics``); with robot ``sim`` the simulator then renders
            the marker (``calibration_marker: flange``). Takes a bool or "true"/"false".
        lockstep: robot ``sim`` only: lockstep evaluation (:mod:`para_ros.sim.lockstep`): every node on the
            simulator's ``/clock`` (:data:`LOCKSTEP_OVERRIDES`), the simulator stepping only once the graph answered.
    """

    robot: str = "sim"
    checkpoint: str = ""
    device: str = ""
    dtype: str = ""
    fast_path: str = ""
    compile_mode: str = ""
    scene_image_topic: str = ""
    scene_info_topic: str = ""
    wrist_image_topic: str = ""
    wrist_info_topic: str = ""
    joint_trajectory_topic: str = ""
    arm_joint_names: str = ""
    engage: bool = False
    calibration: str = ""
    lockstep: bool = False
    calibration_monitor: bool = False
    backend: str = ""  # deprecated: the old name of ``robot`` (empty once resolved into ``robot``)

    def __post_init__(self):
        object.__setattr__(self, "robot", resolve_robot(self.robot, self.backend))
        object.__setattr__(self, "backend", "")  # resolved: the robot is in ``robot`` alone
        object.__setattr__(self, "engage", _true_false("engage", self.engage) == "true")
        object.__setattr__(
            self, "calibration_monitor", _true_false("calibration_monitor", self.calibration_monitor) == "true"
        )
        object.__setattr__(self, "lockstep", _true_false("lockstep", self.lockstep) == "true")
        if self.lockstep and self.robot != "sim":
            raise ValueError(
                f"lockstep applies to robot sim only (robot is {self.robot!r}): a real arm runs on the wall clock"
            )
        if self.calibration:
            # OpenCV (the file's board): loaded only when a calibration file is given
            from para_ros.calibration.consumers import load

            path = os.path.abspath(os.path.expanduser(self.calibration))
            try:
                load(path)
            except ValueError as exc:
                raise ValueError(f"calibration={self.calibration!r}: {exc}") from None
            object.__setattr__(self, "calibration", path)
        if self.dtype not in ("", *INFERENCE_DTYPES):
            raise ValueError(
                f"dtype={self.dtype!r}: use one of {', '.join(INFERENCE_DTYPES)} (or leave empty for the file's value)"
            )
        object.__setattr__(
            self, "fast_path", _true_false("fast_path", self.fast_path, " (or leave empty for the file's value)")
        )
        if self.compile_mode not in ("", *COMPILE_MODES):
            raise ValueError(
                f"compile_mode={self.compile_mode!r}: use one of {', '.join(COMPILE_MODES)} (or leave "
                "empty for the file's value)"
            )
        for name in CAMERA_TOPIC_PARAMETERS:
            topic = getattr(self, name)
            if topic and not topic.startswith("/"):
                raise ValueError(f"{name}={topic!r}: give an absolute topic name, e.g. '/{topic}'")
        for name in LAUNCHER_SETTINGS:
            takers = [r.name for r in ROBOTS.values() if name in r.launcher_settings]
            if getattr(self, name) and self.robot not in takers:
                raise ValueError(
                    f"{name}={getattr(self, name)!r} applies to robot {' or '.join(takers)} only (robot is "
                    f"{self.robot!r}: its joint names and command path are fixed); drop it or use "
                    f"robot {' or '.join(takers)}"
                )
        topic = self.joint_trajectory_topic
        if topic and (not topic.startswith("/") or " " in topic):
            raise ValueError(
                f"joint_trajectory_topic={topic!r}: give an absolute topic name without spaces, e.g. "
                f"'/{topic.strip().lstrip('/')}' (a joint_trajectory_controller named arm_controller "
                "listens on '/arm_controller/joint_trajectory')"
            )
        if self.arm_joint_names:
            names = [n.strip() for n in self.arm_joint_names.split(",")]
            from para_ros.robot.yam import load_yam_config  # the graph's arm: its joint count and order

            yam_names = load_yam_config().joint_names
            n = len(yam_names)
            if len(names) != n or not all(names) or len(set(names)) != n or any(" " in name for name in names):
                raise ValueError(
                    f"arm_joint_names={self.arm_joint_names!r}: give the controller's {n} "
                    f"distinct arm joint names, comma-separated, in the order of config/yam.yaml's "
                    f"model.joint_names, e.g. '{','.join(yam_names)}'"
                )
            # normalised (no spaces) so both launchers pass exactly the same value
            object.__setattr__(self, "arm_joint_names", ",".join(names))


def nodes_for(robot_name: str) -> list[NodeSpec]:
    """The nodes of the graph for the robot ``robot_name``, in start order."""
    robot(robot_name)  # ValueError listing the robots
    return [spec for spec in NODES if robot_name in spec.backends]


def resolve_robot(robot_name: str, backend: str = "") -> str:
    """The robot chosen, from ``robot`` and its deprecated name ``backend`` (which warns, and wins over the default
    ``robot`` "sim"). :raises ValueError: an unknown robot (listing them), or the two names set differently."""
    if backend:
        if robot_name not in ("", "sim", backend):
            raise ValueError(
                f"robot={robot_name!r} and backend={backend!r}: backend is the deprecated name of robot; give robot only"
            )
        warnings.warn(
            f"backend={backend!r} (--backend, backend:=) is deprecated for the robot: use robot={backend!r} "
            "(--robot, robot:=); the executor's own parameter `backend` is its command backend",
            FutureWarning,
            stacklevel=3,
        )
        robot_name = backend
    if robot_name not in ROBOTS:
        raise ValueError(f"robot={robot_name!r} is not a robot: use one of {', '.join(ROBOTS)}")
    return robot_name


def node_overrides(spec: NodeSpec, settings: DeploySettings) -> dict[str, object]:
    """Parameters set on top of ``spec.params_file`` for ``settings`` (only what the user chose, plus the robot's command backend)."""
    out: dict[str, object] = {}
    if spec.name == "inference_node":
        checkpoint = effective_checkpoint(settings)
        if checkpoint or settings.checkpoint == UNTRAINED:
            out["checkpoint"] = checkpoint
        for name in ("device", "dtype", "compile_mode", *CAMERA_TOPIC_PARAMETERS):
            value = getattr(settings, name)
            if value:
                out[name] = value
        if settings.fast_path:
            out["fast_path"] = settings.fast_path == "true"
    elif spec.name == "chunk_executor":
        arm = robot(settings.robot)
        out["backend"] = arm.command_backend
        if settings.calibration:
            out["calibration_file"] = settings.calibration
        if arm.simulated or settings.engage:
            out["auto_engage"] = True
        out.update(arm.executor_parameters)
        for name in arm.launcher_settings:
            value = getattr(settings, name)
            if value:
                out[name] = value
        if uses_untrained_model(settings):
            out.update(UNTRAINED_EXECUTOR_OVERRIDES)
    elif settings.calibration:
        out.update(calibration_overrides(spec.name, settings))
    if spec.name == "sim_node" and settings.calibration_monitor:
        out["calibration_marker"] = "flange"  # the monitor's default mount (para_ros.sim.calibration_marker)
    if settings.lockstep:
        out.update(LOCKSTEP_OVERRIDES.get(spec.name, {}))
    return out


def calibration_overrides(node: str, settings: DeploySettings) -> dict[str, object]:
    """Parameters of ``sim_node`` / ``calibration_tf`` for a calibration file: the sim publishes the file's cameras
    instead of its truth; on a real rig ``calibration_tf`` publishes the scene camera (and, robot ``topic``, the
    wrist mount, which the ``i2rt`` executor publishes itself)."""
    # OpenCV (the file's board): loaded only when a calibration file is given
    from para_ros.calibration.consumers import load

    cameras = load(settings.calibration).cameras
    if node == "sim_node":
        out: dict[str, object] = {"calibration_file": settings.calibration}
        for name in ("scene_cam", "wrist_cam"):
            if name in cameras:
                out[f"{name}_tf"] = "calibration"
        return out
    if node == "calibration_tf":
        return {"calibration_file": settings.calibration, "publish_wrist": settings.robot == "topic"}
    return {}


def uses_untrained_model(settings: DeploySettings) -> bool:
    """True when the inference node will run the random-weights model: no checkpoint given here nor in its file."""
    if settings.checkpoint == UNTRAINED:
        return True
    if effective_checkpoint(settings):
        return False

    params = yaml.safe_load(share_file(INFERENCE_PARAMS_FILE).read_text())["inference_node"]["ros__parameters"]
    return not params.get("checkpoint")


def tie_lockstep_latency(plan_params: list[tuple[NodeSpec, dict[str, object]]]) -> None:
    """In a lockstep graph, set the simulator's ``lockstep_chunk_latency_s`` to the executor's ``lockstep_latency_s``
    as it will run (its override, else its shipped file's value), in place, unless the simulator's is set already:
    the simulator then steps on while the model computes, and never expects a chunk later than the executor takes
    it (:mod:`para_ros.sim.lockstep`, rule 4)."""
    from para_ros.paths import effective_params  # yaml files: read on first use, not on import

    params = {spec.name: (spec, overrides) for spec, overrides in plan_params}
    if "sim_node" not in params or "chunk_executor" not in params:
        return
    sim = params["sim_node"][1]
    spec, executor = params["chunk_executor"]
    if not sim.get("lockstep") or not executor.get("lockstep") or "lockstep_chunk_latency_s" in sim:
        return
    latency = effective_params(spec.params_file, spec.name, executor).get("lockstep_latency_s", 0.0)
    sim["lockstep_chunk_latency_s"] = float(latency)


def tie_lockstep(plan_params: list[tuple[NodeSpec, dict[str, object]]]) -> None:
    """A lockstep graph's parameters that follow from other nodes' (:func:`tie_lockstep_latency`,
    :func:`tie_lockstep_tf_period`), in place; nothing outside lockstep."""
    tie_lockstep_latency(plan_params)
    tie_lockstep_tf_period(plan_params)


def tie_lockstep_tf_period(plan_params: list[tuple[NodeSpec, dict[str, object]]]) -> None:
    """In a lockstep graph in batches, set the simulator's ``lockstep_tf_period_s`` to rule 7's ``/tf`` grid
    (:func:`para_ros.sim.lockstep.tf_grid_steps`) for the graph as it will run: its camera periods and the step period
    of the inference node's checkpoint, whose past steps the node looks up. Unless the simulator's is set already,
    and left at every instant where the checkpoint is not known here (none: the random model) or cannot be read (the
    inference node says why when it loads it)."""
    # para_core's config reader and the shipped files: read on first use, not on import (no torch either way)
    from para_core.model.checkpoint_files import CheckpointError, read_checkpoint_config
    from para_ros.paths import effective_params
    from para_ros.sim.lockstep import tf_grid_steps

    params = {spec.name: (spec, overrides) for spec, overrides in plan_params}
    if "sim_node" not in params or "inference_node" not in params:
        return
    sim_spec, sim = params["sim_node"]
    if not sim.get("lockstep") or "lockstep_tf_period_s" in sim:
        return
    sim_params = effective_params(sim_spec.params_file, sim_spec.name, sim)
    infer_spec, infer = params["inference_node"]
    checkpoint = effective_params(infer_spec.params_file, infer_spec.name, infer).get("checkpoint")
    if not sim_params.get("lockstep_batch") or not checkpoint:
        return
    try:
        step_dt_s = read_checkpoint_config(str(checkpoint)).step_dt_s
    except CheckpointError:
        return
    step_s = float(sim_params["lockstep_step_s"])
    periods_s = [1.0 / float(sim_params[f"{cam}_rate_hz"]) for cam in ("scene_cam", "wrist_cam")] + [step_dt_s]
    sim["lockstep_tf_period_s"] = tf_grid_steps(step_s, periods_s) * step_s


def plan(settings: DeploySettings) -> list[tuple[NodeSpec, dict[str, object]]]:
    """The graph for ``settings``: every node with its parameter overrides, in start order."""
    return [
        (spec, node_overrides(spec, settings))
        for spec in nodes_for(settings.robot)
        if (spec.name != "calibration_tf" or settings.calibration)
        and (spec.name != "calibration_monitor" or settings.calibration_monitor)
    ]


def parse_node_params(rules: list[str]) -> dict[str, dict[str, object]]:
    """``NODE:NAME:=VALUE`` rules (``--node-param``) -> {node: {name: value}}, each value read as YAML.

    :raises ValueError: a rule not of that form. Names and values are checked against the nodes' parameter tables by
        ``para_ros.nodes.parameter_registry.check_node_params``.
    """

    out: dict[str, dict[str, object]] = {}
    for rule in rules:
        head, sep, value = rule.partition(":=")
        node, _, name = head.partition(":")
        if not (sep and node and name):
            raise ValueError(f"--node-param {rule!r}: write NODE:NAME:=VALUE, e.g. chunk_executor:control_rate_hz:=100")
        out.setdefault(node, {})[name] = yaml.safe_load(value)
    return out
