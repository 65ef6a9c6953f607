"""The deploy graph, described once: which nodes run for which robot backend, and what each one is told.

Both launchers read this module and nothing else for that: ``launch/deploy.launch.py`` (``ros2 launch`` on a robot
PC) and ``para-deploy`` (:mod:`para_ros.deploy`, the same graph as plain processes where ``ros2 launch`` is not
installed). A test runs both against each other, so they cannot drift.

Robot backends (``--backend`` / ``backend:=``):

* ``sim``: the embedded simulated YAM (``sim_node``) + inference + executor sending ``JointTrajectory`` to the sim.
* ``i2rt``: a real YAM on CAN through the I2RT SDK: inference + executor (``backend: i2rt_sdk``); the cameras, TF and
  ``/joint_states`` come from the robot's own drivers.
* ``topic``: an arm behind a ``JointTrajectory`` topic (e.g. a ros2_control joint trajectory controller):
  inference + executor (``backend: joint_trajectory``); cameras, TF and joint states from the robot's drivers.

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

from dataclasses import dataclass, field

PACKAGE = "para_ros"
BACKENDS = ("sim", "i2rt", "topic")
RVIZ_CONFIG = "config/para.rviz"

# Executor output backend (parameter ``backend`` of chunk_executor) per robot backend.
EXECUTOR_BACKEND = {"sim": "joint_trajectory", "i2rt": "i2rt_sdk", "topic": "joint_trajectory"}

# Executor parameters while the untrained random model runs (see the module docstring); limits stay untouched.
UNTRAINED_EXECUTOR_OVERRIDES = {"max_implied_speed_m_s": 100.0, "unreachable": "best_effort"}
INFERENCE_PARAMS_FILE = "config/inference.yaml"

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
        backends: the robot backends whose graph includes this node.
    """

    name: str
    executable: str
    module: str
    params_file: str
    backends: tuple[str, ...] = field(default=BACKENDS)


NODES: tuple[NodeSpec, ...] = (
    NodeSpec("sim_node", "sim_node", "para_ros.sim_node", "config/sim.yaml", ("sim",)),
    NodeSpec("inference_node", "inference_node", "para_ros.inference_node", INFERENCE_PARAMS_FILE),
    NodeSpec("chunk_executor", "chunk_executor", "para_ros.chunk_executor", "config/executor.yaml"),
)


@dataclass(frozen=True)
class DeploySettings:
    """What a user chooses when starting the graph (both launchers take exactly these).

    Args:
        backend: robot backend, one of :data:`BACKENDS`.
        checkpoint: policy checkpoint directory; "" = keep ``config/inference.yaml`` (default: untrained random model).
        device: torch device (``auto``, ``cpu``, ``cuda``, ``cuda:N``); "" = keep the file's value.
        dtype: ``fp32`` | ``bf16`` | ``fp16``; "" = keep the file's value.
        scene_image_topic, scene_info_topic, wrist_image_topic, wrist_info_topic: camera topics; "" = keep.
    """

    backend: str = "sim"
    checkpoint: str = ""
    device: str = ""
    dtype: str = ""
    scene_image_topic: str = ""
    scene_info_topic: str = ""
    wrist_image_topic: str = ""
    wrist_info_topic: str = ""

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"backend={self.backend!r} is not a robot backend: use one of {', '.join(BACKENDS)}")
        if self.dtype not in ("", "fp32", "bf16", "fp16"):
            raise ValueError(f"dtype={self.dtype!r}: use fp32, bf16 or fp16 (or leave empty for the file's value)")
        for name in CAMERA_TOPIC_PARAMETERS:
            topic = getattr(self, name)
            if topic and not topic.startswith("/"):
                raise ValueError(f"{name}={topic!r}: give an absolute topic name, e.g. '/{topic}'")


def nodes_for(backend: str) -> list[NodeSpec]:
    """The nodes of the graph for ``backend``, in start order."""
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r} is not a robot backend: use one of {', '.join(BACKENDS)}")
    return [spec for spec in NODES if backend in spec.backends]


def node_overrides(spec: NodeSpec, settings: DeploySettings) -> dict[str, object]:
    """Parameters set on top of ``spec.params_file`` for ``settings`` (only what the user chose, plus the backend)."""
    out: dict[str, object] = {}
    if spec.name == "inference_node":
        for name in ("checkpoint", "device", "dtype", *CAMERA_TOPIC_PARAMETERS):
            value = getattr(settings, name)
            if value:
                out[name] = value
    elif spec.name == "chunk_executor":
        out["backend"] = EXECUTOR_BACKEND[settings.backend]
        if uses_untrained_model(settings):
            out.update(UNTRAINED_EXECUTOR_OVERRIDES)
    return out


def uses_untrained_model(settings: DeploySettings) -> bool:
    """True when the inference node will run the random-weights model: no checkpoint given here nor in its file."""
    if settings.checkpoint:
        return False
    import yaml

    from para_ros.paths import share_file

    params = yaml.safe_load(share_file(INFERENCE_PARAMS_FILE).read_text())["inference_node"]["ros__parameters"]
    return not params.get("checkpoint")


def plan(settings: DeploySettings) -> list[tuple[NodeSpec, dict[str, object]]]:
    """The graph for ``settings``: every node with its parameter overrides, in start order."""
    return [(spec, node_overrides(spec, settings)) for spec in nodes_for(settings.backend)]
