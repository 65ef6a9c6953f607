"""The command-backend registry (``para_ros.nodes.command_backends``) is the one place a backend is added.

A backend registered here, in the test, with a parameter of its own, appears in everything built from the registry:
the executor's ``--help``, its generated ``config/executor.yaml`` text (read back by a YAML parser), the parameter
reference ``docs/parameters.md`` and the shipped-files check (which then calls the shipped YAML stale); the executor
node constructs it by name with the parameter's value and reads the arm's joints through it. An unknown name is
refused with the registered ones listed. The robots of the launchers map onto the registered backends.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import yaml
from executor_helpers import REPO  # noqa: E402
from ros_helpers import private_domain_id  # noqa: E402

pytestmark = pytest.mark.ros

NAME = "test_echo"
PARAM = "test_echo_start_gripper"


class EchoBackend:
    """Built by the registry's constructor: keeps what it was given, echoes commands as the measured state."""

    name = NAME

    def __init__(self, context, params):
        self.context = context
        self.params = dict(params)
        self.q = np.zeros(context.arm.n_joints)
        self.reads = 0
        self.sent = []

    def read_joints(self):
        self.reads += 1
        return self.q.copy(), float(self.params[PARAM])

    def send(self, command):
        self.sent.append(command)

    def describe(self):
        return "test echo"

    def close(self):
        pass


@pytest.fixture
def echo_backend():
    import para_ros.nodes.chunk_executor  # noqa: F401 - imported first: the backend comes later, as a user's would
    from para_ros.nodes import command_backends as cb
    from para_ros.nodes.parameters import Param

    spec = cb.register(
        cb.CommandBackendSpec(
            NAME,
            "a backend registered by the registry test.",
            (
                Param(PARAM, 0.25, "Test backend: the gripper value it reports (0..1).", range=(0.0, 1.0)),
                cb.GRIPPER_JOINT_NAME,  # shared with the shipped topic backends: listed once in the table
            ),
            EchoBackend,
        )
    )
    try:
        yield spec
    finally:
        cb.unregister(NAME)


def _parameters_doc():
    spec = importlib.util.spec_from_file_location("parameters_doc", REPO / "scripts" / "parameters_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_registered_backend_appears_in_help_yaml_and_docs(echo_backend, capsys):
    from para_ros.nodes import chunk_executor, parameter_registry

    with pytest.raises(SystemExit) as exit_info:
        chunk_executor.main(["--help"])
    assert exit_info.value.code == 0
    help_text = capsys.readouterr().out
    assert f"  {PARAM} = 0.25  [a number within [0, 1]" in help_text
    assert f"'{NAME}'" in help_text.split("  backend = ")[1].split("\n  arm_joint_names")[0]  # a choice of backend

    table, file_name = parameter_registry.tables()["chunk_executor"]
    text = table.yaml_text()
    params = yaml.safe_load(text)["chunk_executor"]["ros__parameters"]
    assert params[PARAM] == 0.25
    assert f"# --- command backend {NAME}: a backend registered by the registry test" in text
    assert list(params).count("gripper_joint_name") == 1 and text.count("    gripper_joint_name:") == 1
    shipped = yaml.safe_load((REPO / "config" / file_name).read_text())["chunk_executor"]["ros__parameters"]
    assert set(params) - set(shipped) == {PARAM}  # nothing else changed in the generated file
    assert parameter_registry.main([]) == 1  # the shipped file is now stale: it lacks the new backend

    page = _parameters_doc().render()
    row = next(line for line in page.splitlines() if line.startswith(f"| `{PARAM}` |"))
    assert "| `0.25` |" in row and "the gripper value it reports" in row
    backend_row = next(line for line in page.splitlines() if line.startswith("| `backend` |"))
    assert f"'{NAME}'" in backend_row


def test_without_the_test_backend_the_shipped_files_are_current():
    from para_ros.nodes import command_backends as cb
    from para_ros.nodes import parameter_registry

    assert list(cb.COMMAND_BACKENDS) == ["joint_trajectory", "pose", "i2rt_sdk"]
    assert parameter_registry.main([]) == 0
    assert _parameters_doc().main([]) == 0


def test_the_node_constructs_a_registered_backend_by_name(echo_backend):
    import rclpy
    from rclpy.parameter import Parameter

    from para_ros.nodes.chunk_executor import ChunkExecutorNode

    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=private_domain_id())  # the executor's name: not in the run's domain
    node = None
    try:
        node = ChunkExecutorNode(
            context=ctx,
            parameter_overrides=[
                Parameter("backend", value=NAME),
                Parameter(PARAM, value=0.75),
                Parameter("control_thread_priority", value=0),
                Parameter("joint_states_topic", value="/registry_test/joint_states"),
            ],
        )
        backend = node.backend
        assert isinstance(backend, EchoBackend)
        assert backend.params == {PARAM: 0.75, "gripper_joint_name": "gripper"}
        assert backend.context.node is node and backend.context.joint_names == node.arm.model.joint_names
        assert backend.context.joint_states_topic == "/registry_test/joint_states"
        assert node.get_parameter(PARAM).value == 0.75
        # not reading the arm directly: the executor watches the JointState topic and publishes no arm state
        assert node.state_watch is not None and node.state_publisher is None
        reads = backend.reads
        node._tick(node.now_s())
        assert backend.reads > reads  # the control tick reads the arm through the registered backend
    finally:
        if node is not None:
            node.shutdown()
            node.destroy_node()
        ctx.try_shutdown()


def test_an_unknown_backend_is_refused_listing_the_registered_ones(echo_backend):
    import rclpy
    from rclpy.parameter import Parameter

    from para_ros.nodes import command_backends as cb
    from para_ros.nodes.chunk_executor import ChunkExecutorNode

    with pytest.raises(ValueError) as err:
        cb.command_backend("ros2_control_hw")
    for name in ("joint_trajectory", "pose", "i2rt_sdk", NAME):
        assert name in str(err.value)
    ctx = rclpy.Context()
    rclpy.init(context=ctx, domain_id=private_domain_id())  # the executor's name: not in the run's domain
    try:
        with pytest.raises(ValueError) as err:
            ChunkExecutorNode(context=ctx, parameter_overrides=[Parameter("backend", value="ros2_control_hw")])
        assert "backend='ros2_control_hw'" in str(err.value)
        assert all(name in str(err.value) for name in ("joint_trajectory", "pose", "i2rt_sdk", NAME))
    finally:
        ctx.try_shutdown()


def test_registration_refuses_a_taken_name_and_a_clashing_parameter():
    from para_ros.nodes import command_backends as cb
    from para_ros.nodes.parameters import Param

    with pytest.raises(ValueError, match="registered already"):
        cb.register(cb.CommandBackendSpec("pose", "another pose backend.", (), EchoBackend))
    clash = Param("gripper_joint_name", "finger", "another meaning")
    with pytest.raises(ValueError, match="gripper_joint_name differs"):
        cb.register(cb.CommandBackendSpec("clash", "clashes.", (clash,), EchoBackend))
    assert "clash" not in cb.COMMAND_BACKENDS
    with pytest.raises(ValueError, match="one-line description"):
        cb.CommandBackendSpec("two_lines", "first\nsecond", (), EchoBackend)
    spec = cb.command_backend("i2rt_sdk")
    assert spec.values({"sdk_channel": "can1"})["sdk_channel"] == "can1"
    with pytest.raises(ValueError, match="has no parameter joint_trajectory_topic"):
        spec.values({"joint_trajectory_topic": "/x"})


def test_each_robot_names_a_registered_backend_and_the_graph_follows_it():
    from para_ros.deploy import graph
    from para_ros.nodes import command_backends as cb

    # the launchers' robots -> the executor's command backend and parameters (written out: an independent table)
    expected = {
        "sim": ("joint_trajectory", {}),
        "i2rt": ("i2rt_sdk", {}),
        "topic": ("joint_trajectory", {"gripper_joint_name": ""}),
    }
    assert {name: (r.command_backend, dict(r.executor_parameters)) for name, r in cb.ROBOTS.items()} == expected
    for name, (backend, params) in expected.items():
        assert cb.robot(name).command_backend in cb.COMMAND_BACKENDS
        settings = graph.DeploySettings(robot=name, checkpoint="/some/ckpt")
        spec = next(s for s in graph.nodes_for(name) if s.name == "chunk_executor")
        overrides = graph.node_overrides(spec, settings)
        assert overrides["backend"] == backend
        assert {k: overrides[k] for k in params} == params
    with pytest.raises(ValueError, match="use one of sim, i2rt, topic"):
        cb.robot("ur5")


def test_the_robots_old_name_backend_still_works_and_warns(tmp_path):
    """``--backend`` / ``backend:=`` / ``backend=`` (the robot's old name) give the same graph as ``--robot`` with a
    FutureWarning; both names set differently are refused."""
    from para_ros.commands import calib, deploy
    from para_ros.deploy import graph
    from para_ros.deploy.calibration_capture import CaptureSettings

    for name in ("sim", "i2rt", "topic"):
        new = deploy.graph_commands(deploy._settings(deploy.build_parser().parse_args(["--robot", name])))
        with pytest.warns(FutureWarning, match="use robot="):
            old = deploy.graph_commands(deploy._settings(deploy.build_parser().parse_args(["--backend", name])))
        assert [c for _, c in old] == [c for _, c in new]
        with pytest.warns(FutureWarning):
            settings = graph.DeploySettings(backend=name, checkpoint="/x")
        assert settings.robot == name and settings.backend == ""
        assert settings == graph.DeploySettings(robot=name, checkpoint="/x")
    with pytest.raises(ValueError, match="deprecated name of robot"):
        graph.DeploySettings(robot="i2rt", backend="topic")
    with pytest.raises(ValueError, match="use one of sim, i2rt, topic"):
        graph.DeploySettings(robot="gazebo")

    args = calib.build_parser().parse_args(["capture", "--out", str(tmp_path / "bag"), "--backend", "topic"])
    with pytest.warns(FutureWarning):
        assert calib._capture_settings(args).robot == "topic"
    with pytest.warns(FutureWarning):
        assert CaptureSettings(out=tmp_path / "bag", backend="i2rt").robot == "i2rt"
    with pytest.raises(ValueError, match="--robot only"):
        CaptureSettings(out=tmp_path / "bag", robot="topic", backend="i2rt")


@pytest.mark.parametrize(("robot_name", "gripper"), [("sim", "gripper"), ("topic", "")])
def test_calibration_capture_builds_the_robots_backend_from_the_registry(tmp_path, robot_name, gripper):
    """``para-calib capture`` moves the arm through the robot's registered command backend, told its own topics: the
    simulated YAM takes the gripper inside the trajectory, a ros2_control controller the arm joints only."""
    import rclpy

    from para_ros.deploy.calibration_capture import CaptureSession, CaptureSettings
    from para_ros.nodes.command_backends import command_backend, robot
    from para_ros.ros_io.topic_backends import JointTrajectoryBackend

    names = ("a1", "a2", "a3", "a4", "a5", "a6")
    settings = CaptureSettings(
        out=tmp_path / "bag", robot=robot_name, joint_trajectory_topic="/arm/jt", arm_joint_names=names
    )
    ctx = rclpy.Context()
    rclpy.init(
        context=ctx, domain_id=private_domain_id()
    )  # its backend publishes arm commands: kept out of the run's domain
    node = rclpy.create_node("capture_backend_test", context=ctx)
    try:
        session = CaptureSession.__new__(CaptureSession)  # only what _make_backend reads: no bag, no spinning
        session.settings, session.node = settings, node
        session.backend_spec = command_backend(robot(robot_name).command_backend)  # as CaptureSession does
        session.own_state = False
        backend = session._make_backend()
        assert isinstance(backend, JointTrajectoryBackend)
        assert backend.topic == "/arm/jt" and backend.joint_names == names
        assert backend.gripper_joint_name == gripper and backend.gripper_pub is None  # the gripper is never sent
    finally:
        node.destroy_node()
        ctx.try_shutdown()
