"""Run PARA on a robot: ``ros2 launch para_ros deploy.launch.py [checkpoint:=DIR] [robot:=sim|i2rt|topic] ...``.

Starts the inference node and the chunk executor, plus the simulated YAM (``sim_node``) when ``robot:=sim``, and
rviz2 with ``config/para.rviz`` when ``rviz:=true``. Which nodes run, their executables, parameter files and the
parameters set from the arguments all come from :mod:`para_ros.deploy.graph`, the description ``para-deploy`` uses too.

Arguments (``ros2 launch para_ros deploy.launch.py --show-args``): ``checkpoint``, ``robot`` (``backend``: its deprecated name), ``device``, ``dtype``,
``fast_path``, ``compile_mode``, ``scene_image_topic``, ``scene_info_topic``, ``wrist_image_topic``,
``wrist_info_topic``, ``joint_trajectory_topic``, ``arm_joint_names``, ``engage``, ``calibration``, ``lockstep``,
``calibration_monitor``, ``rviz``, ``respawn``, ``respawn_executor``, ``respawn_delay``. An empty value keeps the
node's parameter file value (``config/*.yaml``). Respawn, as ``para-deploy --respawn / --respawn-executor / --respawn-delay``
(rule: :func:`para_ros.deploy.graph_run.respawns`):
``respawn:=true`` gives inference_node and sim_node launch_ros' ``respawn=True`` with ``respawn_delay``
(``respawn_delay`` seconds, default 2): a node that dies is started again. The executor commands the arm, so it comes
back by itself only with ``respawn_executor:=true`` (default false: a person should look at why it died first).
With ``robot:=topic`` (a ros2_control joint_trajectory_controller) the trajectory carries the arm joints only and
the gripper goes out as ``std_msgs/Float64`` 0..1 on the executor's ``gripper_command_topic`` (see
:mod:`para_ros.deploy.graph`), e.g. ``robot:=topic joint_trajectory_topic:=/arm_controller/joint_trajectory``.
"""

from launch.actions import DeclareLaunchArgument, OpaqueFunction
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node
from launch_ros.parameter_descriptions import Parameter

from launch import LaunchDescription
from para_ros.deploy import graph
from para_ros.paths import share_file

ARGUMENTS = [
    (
        "robot",
        "sim",
        "the robot: sim (simulated YAM) | i2rt (real YAM on CAN via the I2RT SDK) | "
        "topic (an arm behind a JointTrajectory topic, e.g. ros2_control); it picks the executor's command backend",
    ),
    ("backend", "", "deprecated name of robot (still accepted, with a warning)"),
    (
        "checkpoint",
        "",
        "policy checkpoint directory (model.safetensors + config.json); empty = robot sim: the "
        "shipped robust pick-and-place checkpoint (checkpoints/pick_place_robust), a robot: config/inference.yaml "
        "(an UNTRAINED random model unless set there); none = the UNTRAINED random model",
    ),
    ("device", "", "torch device: auto | cpu | cuda | cuda:N; empty = config/inference.yaml"),
    ("dtype", "", "inference precision: auto | fp32 | bf16 | fp16; empty = config/inference.yaml"),
    ("fast_path", "", "the inference node's fast path: true | false; empty = config/inference.yaml (false)"),
    (
        "compile_mode",
        "",
        "torch.compile the backbone: off | default | reduce-overhead | max-autotune; empty = "
        "config/inference.yaml (off)",
    ),
    ("scene_image_topic", "", "scene camera images (sensor_msgs/Image); empty = config/inference.yaml"),
    ("scene_info_topic", "", "scene camera CameraInfo; empty = config/inference.yaml"),
    ("wrist_image_topic", "", "wrist camera images (sensor_msgs/Image); empty = config/inference.yaml"),
    ("wrist_info_topic", "", "wrist camera CameraInfo; empty = config/inference.yaml"),
    (
        "joint_trajectory_topic",
        "",
        "robot topic only: the joint_trajectory_controller's topic, e.g. "
        "/arm_controller/joint_trajectory; empty = config/executor.yaml (/joint_trajectory)",
    ),
    (
        "arm_joint_names",
        "",
        "robot topic only: the controller's 6 arm joint names, comma-separated, YAM order "
        "joint1..joint6; empty = the YAM's joint1..joint6 (config/yam.yaml)",
    ),
    (
        "engage",
        "false",
        "hand the arm to the policy at start: true | false (always true for robot sim; else the "
        "executor waits for /chunk_executor/engage)",
    ),
    (
        "calibration",
        "",
        "calibration.yaml (para-calib solve): the scene camera's static transform and the wrist "
        "mount come from it; empty = none (sim: its own truth; a robot: the camera drivers' TF and "
        "config/yam.yaml's wrist mount)",
    ),
    (
        "lockstep",
        "false",
        "robot sim only: lockstep evaluation: every node on the simulator's /clock, the simulator "
        "stepping only once the graph has answered (para_ros.sim.lockstep): true | false",
    ),
    (
        "calibration_monitor",
        "false",
        "start calibration_monitor (the scene camera's told pose checked against an ArUco marker on the "
        "gripper, on /diagnostics; robot sim: the simulator renders the marker): true | false",
    ),
    ("rviz", "false", "start rviz2 with config/para.rviz: true | false"),
    ("respawn", "false", "restart inference_node and sim_node when they die (after respawn_delay): true | false"),
    (
        "respawn_executor",
        "false",
        "also restart chunk_executor when it dies: true | false (default false: it "
        "commands the arm, so a person should look at why it died first)",
    ),
    ("respawn_delay", "2.0", "seconds between a node's death and its restart (respawn, respawn_executor)"),
]
# Arguments of this launch file alone, not of the graph (para_ros.deploy.graph.DeploySettings).
LAUNCH_ONLY = ("rviz", "respawn", "respawn_executor", "respawn_delay")
EXECUTOR_NODE = "chunk_executor"  # respawned only with respawn_executor (para_ros.deploy.graph_run.respawns: same rule)


def _flag(name: str, text: str) -> bool:
    """A true/false launch argument as a bool; ValueError naming the value and the choices otherwise."""
    value = text.strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"{name}:={text!r}: use true or false")
    return value == "true"


def _respawn_delay(text: str) -> float:
    try:
        delay = float(text)
    except ValueError:
        delay = float("nan")
    if not 0.0 <= delay <= 600.0:
        raise ValueError(f"respawn_delay:={text!r}: give seconds within 0..600, e.g. respawn_delay:=2.0")
    return delay


def _graph_nodes(context, *args, **kwargs):
    """Resolve the arguments and build one launch_ros ``Node`` per node of :func:`para_ros.deploy.graph.plan`."""
    values = {name: LaunchConfiguration(name).perform(context) for name, _, _ in ARGUMENTS}
    settings = graph.DeploySettings(**{k: v for k, v in values.items() if k not in LAUNCH_ONLY})
    respawn = _flag("respawn", values["respawn"])
    respawn_executor = _flag("respawn_executor", values["respawn_executor"])
    delay = _respawn_delay(values["respawn_delay"])
    actions = []
    for spec, overrides in graph.plan(settings):
        again = respawn_executor if spec.name == EXECUTOR_NODE else respawn
        actions.append(
            Node(
                package=graph.PACKAGE,
                executable=spec.executable,
                name=spec.name,
                output="screen",
                emulate_tty=True,
                # The node's file first, then only what was set here (-p name:=value wins over the file).
                parameters=[
                    str(share_file(spec.params_file)),
                    *[Parameter(name, value) for name, value in overrides.items()],
                ],
                respawn=again,
                respawn_delay=delay if again else None,
            )
        )
    return actions


def _rviz(context, *args, **kwargs):
    # rviz2 is not ours, so it does not apply para_ros.dds_env itself: give it the same DDS environment as the nodes
    # (loopback discovery + the Fast DDS profile), or it might not discover them.
    from para_ros.dds_env import dds_env_vars

    return [
        Node(
            package="rviz2",
            executable="rviz2",
            name="rviz2",
            output="screen",
            arguments=["-d", str(share_file(graph.RVIZ_CONFIG))],
            additional_env=dds_env_vars(),
        )
    ]


def generate_launch_description():
    declared = [
        DeclareLaunchArgument(name, default_value=default, description=description)
        for name, default, description in ARGUMENTS
    ]
    return LaunchDescription(
        [
            *declared,
            OpaqueFunction(function=_graph_nodes),
            OpaqueFunction(function=_rviz, condition=IfCondition(LaunchConfiguration("rviz"))),
        ]
    )
