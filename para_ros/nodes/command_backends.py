"""The registry of command backends and robots: where the chunk executor's commands go, and which robot a launcher
drives. The executor node, the deploy graph (``para-deploy``, ``deploy.launch.py``) and ``para-calib capture`` look
both up here; a new backend registers here once, in one :func:`register` call.

Two words, two choices:

* a **command backend** (the executor's parameter ``backend``: ``joint_trajectory`` | ``i2rt_sdk`` | ``pose``) is
  how commands leave the executor and how it reads the arm's joints: a :class:`para_ros.execution.backends.CommandBackend`;
* a **robot** (the launchers' ``--robot`` / ``robot:=``: ``sim`` | ``i2rt`` | ``topic``) is the arm the graph drives:
  which command backend the executor gets and with which parameters.

Each :class:`CommandBackendSpec` carries its name, a one-line description, the node parameters it reads (the
:class:`Param` entries, which the executor's parameter table, ``config/executor.yaml``, ``--help`` and
``docs/parameters.md`` are built from) and its constructor. The constructors import their backend on first use, so
reading the registry loads neither rclpy's message types nor the I2RT SDK.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from para_ros.nodes.parameters import Param


@dataclass(frozen=True)
class BackendContext:
    """What a backend's constructor gets besides its parameters (the executor's or the capture's knowledge).

    Args:
        node: the rclpy node that owns publishers and subscriptions.
        arm: the arm description (:class:`para_ros.robot.arm.ArmDescription`).
        joint_names: the arm joints' names on the wire, one per joint of ``arm``, in its order.
        joint_states_topic: ``sensor_msgs/JointState`` topic (read by topic backends).
        world_frame: frame of the tool poses (the arm description's ``model.world_frame``).
    """

    node: object
    arm: object
    joint_names: tuple[str, ...]
    joint_states_topic: str = "/joint_states"
    world_frame: str = "base"


@dataclass(frozen=True)
class CommandBackendSpec:
    """One command backend of the registry.

    Args:
        name: the value of the executor's ``backend`` parameter that selects it.
        description: one line: where the commands go.
        parameters: the node parameters its constructor reads (its own and shared ones, e.g. the gripper's); they
            appear in the executor's parameter table under the backend's section.
        build: ``build(context, params) -> CommandBackend``; ``params`` holds a value for every name of
            ``parameters`` (:meth:`values` fills the defaults).
        reads_arm_directly: True when the backend reads the joints from the hardware (not from a ``JointState``
            topic): the executor (or the capture) then owns the arm's state and publishes ``/joint_states`` and TF.
    """

    name: str
    description: str
    parameters: tuple[Param, ...]
    build: Callable[[BackendContext, Mapping[str, object]], object]
    reads_arm_directly: bool = False

    def __post_init__(self):
        if not self.name or not self.name.replace("_", "").isalnum():
            raise ValueError(f"command backend name {self.name!r}: use letters, digits and '_'")
        if not self.description.strip() or "\n" in self.description.strip():
            raise ValueError(f"command backend {self.name}: give a one-line description")
        names = [p.name for p in self.parameters]
        if len(set(names)) != len(names):
            raise ValueError(f"command backend {self.name}: a parameter is listed twice in {names}")

    def values(self, given: Mapping[str, object] = ()) -> dict[str, object]:
        """Every parameter of this backend: ``given`` where set (coerced and checked), else its default.

        :raises ValueError: a value its :class:`Param` refuses, or a name this backend does not read."""
        given = dict(given)
        own = {p.name: p for p in self.parameters}
        unknown = sorted(set(given) - set(own))
        if unknown:
            raise ValueError(
                f"command backend {self.name} has no parameter {', '.join(unknown)} (it reads {sorted(own)})"
            )
        return {name: p.coerce(given.get(name, p.default)) for name, p in own.items()}


@dataclass(frozen=True)
class RobotSpec:
    """One robot a launcher drives (``--robot``): which command backend the executor gets, set how.

    Args:
        name: the launchers' ``--robot`` / ``robot:=`` value.
        description: one line: the arm and who publishes its state.
        command_backend: the registered command backend the executor uses for it.
        executor_parameters: executor parameters set for this robot on top of ``config/executor.yaml``.
        simulated: the arm is the embedded simulated YAM (``sim_node``, which the graph starts for it): the executor
            follows chunks from the start (``auto_engage``).
        launcher_settings: launcher settings only this robot takes (their names are executor parameters).
    """

    name: str
    description: str
    command_backend: str
    executor_parameters: Mapping[str, object] = field(default_factory=dict)
    simulated: bool = False
    launcher_settings: tuple[str, ...] = ()


COMMAND_BACKENDS: dict[str, CommandBackendSpec] = {}
ROBOTS: dict[str, RobotSpec] = {}


def register(spec: CommandBackendSpec) -> CommandBackendSpec:
    """Add a command backend; its parameters join the executor's table (a name another backend also lists must be
    the same :class:`Param`: one meaning, one default). :raises ValueError: a name taken, or a clashing parameter."""
    if spec.name in COMMAND_BACKENDS:
        raise ValueError(f"command backend {spec.name!r} is registered already")
    for other in COMMAND_BACKENDS.values():
        for p in spec.parameters:
            q = next((q for q in other.parameters if q.name == p.name), None)
            if q is not None and q != p:
                raise ValueError(
                    f"command backend {spec.name}: parameter {p.name} differs from backend {other.name}'s; share the "
                    "same Param object"
                )
    COMMAND_BACKENDS[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove a command backend (tests register their own and remove it after)."""
    COMMAND_BACKENDS.pop(name, None)


def command_backend(name: str) -> CommandBackendSpec:
    """The registered command backend ``name``. :raises ValueError: unknown, listing the registered ones."""
    try:
        return COMMAND_BACKENDS[name]
    except KeyError:
        raise ValueError(
            f"command backend {name!r} is not registered; use one of {', '.join(COMMAND_BACKENDS)} "
            "(para_ros.nodes.command_backends)"
        ) from None


def robot(name: str) -> RobotSpec:
    """The robot ``name``. :raises ValueError: unknown, listing the robots."""
    try:
        return ROBOTS[name]
    except KeyError:
        raise ValueError(f"robot {name!r} is not known; use one of {', '.join(ROBOTS)}") from None


def backend_parameters() -> list[Param]:
    """The executor's backend parameters: each registered backend's, in registration order, each name once; the
    first parameter of each backend's new ones opens a section naming the backend."""
    out: list[Param] = []
    seen: set[str] = set()
    for spec in COMMAND_BACKENDS.values():
        new = [p for p in spec.parameters if p.name not in seen]
        for i, p in enumerate(new):
            section = f"command backend {spec.name}: {spec.description.rstrip('.')}" if i == 0 else ""
            out.append(dataclasses.replace(p, section=section))
            seen.add(p.name)
    return out


# ---- the shipped command backends -------------------------------------------------------------------------------

GRIPPER_JOINT_NAME = Param(
    "gripper_joint_name",
    "gripper",
    "Name of the gripper (0 closed .. 1 open) in JointTrajectory and JointState (joint_trajectory, pose; the i2rt_sdk "
    "backend publishes it under this name); empty = the trajectory carries the arm joints only (a real "
    "joint_trajectory_controller rejects a trajectory that names a joint it does not own) and the gripper goes out as "
    "std_msgs/Float64 on gripper_command_topic.",
)
GRIPPER_COMMAND_TOPIC = Param(
    "gripper_command_topic",
    "/gripper_command",
    "std_msgs/Float64 gripper output topic, 0 closed .. 1 open "
    "(pose backend; joint_trajectory backend when gripper_joint_name is empty); empty = none.",
)


def _build_joint_trajectory(ctx: BackendContext, p: Mapping[str, object]):
    from para_ros.ros_io.topic_backends import JointTrajectoryBackend  # rclpy messages: loaded on first use

    return JointTrajectoryBackend(
        ctx.node,
        p["joint_trajectory_topic"],
        ctx.joint_states_topic,
        ctx.joint_names,
        p["gripper_joint_name"],
        p["gripper_command_topic"],
    )


def _build_pose(ctx: BackendContext, p: Mapping[str, object]):
    from para_ros.ros_io.topic_backends import PoseBackend  # rclpy messages: loaded on first use

    return PoseBackend(
        ctx.node,
        p["pose_command_topic"],
        p["gripper_command_topic"],
        ctx.joint_states_topic,
        ctx.joint_names,
        p["gripper_joint_name"],
        ctx.world_frame,
    )


def _build_i2rt_sdk(ctx: BackendContext, p: Mapping[str, object]):
    model = ctx.arm.model
    if not model.arm_type:
        raise ValueError(
            f"backend i2rt_sdk drives an i2rt arm, but the arm description {ctx.arm.name!r} has no "
            "model.arm_type: use a topic backend (joint_trajectory, pose) for this arm"
        )
    from para_ros.execution.backends import I2rtSdkBackend  # the I2RT SDK: loaded only for this backend

    return I2rtSdkBackend(
        channel=p["sdk_channel"],
        sim=p["sdk_sim"],
        zero_gravity_mode=p["sdk_zero_gravity_mode"],
        arm_type=model.arm_type,
        gripper_type=model.gripper_type,
        n_arm_joints=ctx.arm.n_joints,
    )


register(
    CommandBackendSpec(
        "joint_trajectory",
        "trajectory_msgs/JointTrajectory to a ros2_control joint_trajectory_controller or the simulated YAM.",
        (
            Param(
                "joint_trajectory_topic",
                "/joint_trajectory",
                "trajectory_msgs/JointTrajectory output topic (joint_trajectory backend), e.g. "
                "/<controller>/joint_trajectory for a ros2_control joint_trajectory_controller; the simulated YAM "
                "listens on /joint_trajectory.",
            ),
            GRIPPER_JOINT_NAME,
            GRIPPER_COMMAND_TOPIC,
        ),
        _build_joint_trajectory,
    )
)
register(
    CommandBackendSpec(
        "pose",
        "geometry_msgs/PoseStamped tool targets for a Cartesian controller, std_msgs/Float64 gripper.",
        (
            Param(
                "pose_command_topic",
                "/ee_target_pose",
                "geometry_msgs/PoseStamped tool target output topic (pose backend); stamped with the time the pose is "
                "meant for (tick + the lookahead in force).",
            ),
            GRIPPER_COMMAND_TOPIC,
            GRIPPER_JOINT_NAME,
        ),
        _build_pose,
    )
)
register(
    CommandBackendSpec(
        "i2rt_sdk",
        "the I2RT SDK: a YAM on CAN (or the SDK's MuJoCo SimRobot); the executor publishes the arm's state.",
        (
            Param("sdk_channel", "can0", "CAN interface of the real arm (i2rt_sdk backend), e.g. can0."),
            Param(
                "sdk_sim",
                False,
                "i2rt_sdk backend: use the SDK's MuJoCo SimRobot (no hardware) instead of the real arm.",
            ),
            Param(
                "sdk_zero_gravity_mode",
                False,
                "i2rt_sdk backend: start the real arm in gravity compensation (true) or holding its pose with PD "
                "gains (false).",
            ),
        ),
        _build_i2rt_sdk,
        reads_arm_directly=True,
    )
)

# ---- the robots the launchers drive ---------------------------------------------------------------------------

for _robot in (
    RobotSpec(
        "sim",
        "the embedded simulated YAM (sim_node, MuJoCo): it publishes the joint states, TF and cameras",
        "joint_trajectory",
        simulated=True,
    ),
    RobotSpec(
        "i2rt",
        "a real YAM on CAN through the I2RT SDK: the executor publishes its joint states and TF",
        "i2rt_sdk",
    ),
    RobotSpec(
        "topic",
        "an arm behind a ros2_control joint_trajectory_controller: its drivers publish joint states and TF",
        "joint_trajectory",
        # a real controller rejects a trajectory naming a joint it does not own: the gripper goes on its own topic
        executor_parameters={"gripper_joint_name": ""},
        launcher_settings=("joint_trajectory_topic", "arm_joint_names"),
    ),
):
    ROBOTS[_robot.name] = _robot
