"""``launch/deploy.launch.py`` and ``para-deploy`` start the same graph: nodes, executables, parameter files, overrides.

``launch``/``launch_ros`` are not installable here, so the real launch file is executed with tiny stand-ins of the
upstream classes it uses injected into ``sys.modules`` (same names and keyword arguments as upstream), its
``OpaqueFunction`` called with a launch context holding the argument values, and the ``Node`` actions it returns
compared with the command lines ``para-deploy`` builds. The executable <-> module link is checked against setup.py's
console_scripts (what ``ros2 run``/launch_ros would start).
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from para_ros.commands import deploy
from para_ros.deploy import graph, graph_run

REPO = Path(__file__).resolve().parent.parent
LAUNCH_FILE = REPO / "launch" / "deploy.launch.py"


# ----------------------------------------------------------------------------------- stand-ins for launch/launch_ros
class _Recorded:
    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs


class LaunchDescription(_Recorded):
    pass


class DeclareLaunchArgument(_Recorded):
    pass


class OpaqueFunction(_Recorded):
    pass


class Node(_Recorded):
    pass


class LaunchConfiguration:
    def __init__(self, name):
        self.name = name

    def perform(self, context):
        return context.launch_configurations[self.name]


class IfCondition:
    def __init__(self, predicate):
        self.predicate = predicate

    def evaluate(self, context):
        text = self.predicate.perform(context)
        if text.lower() not in ("true", "false", "1", "0"):
            raise ValueError(f"IfCondition: {text!r} is not a boolean")  # as upstream's evaluate_condition_expression
        return text.lower() in ("true", "1")


class Parameter:
    def __init__(self, name, value, *, value_type=None):
        self.name, self.value = name, value


def _fake_modules() -> dict[str, types.ModuleType]:
    mods = {}

    def mod(name, **attrs):
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        mods[name] = m
        return m

    mod("launch", LaunchDescription=LaunchDescription)
    mod("launch.actions", DeclareLaunchArgument=DeclareLaunchArgument, OpaqueFunction=OpaqueFunction)
    mod("launch.conditions", IfCondition=IfCondition)
    mod("launch.substitutions", LaunchConfiguration=LaunchConfiguration)
    mod("launch_ros", __path__=[])
    mod("launch_ros.actions", Node=Node)
    mod("launch_ros.parameter_descriptions", Parameter=Parameter)
    return mods


@pytest.fixture
def launch_module(monkeypatch):
    for name, module in _fake_modules().items():
        monkeypatch.setitem(sys.modules, name, module)
    spec = importlib.util.spec_from_file_location("deploy_launch_under_test", LAUNCH_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def launch_nodes(launch_module, **arguments) -> list[Node]:
    """Run generate_launch_description() and its OpaqueFunctions like ``ros2 launch ... name:=value`` would."""
    description = launch_module.generate_launch_description()
    entities = description.args[0]
    declared = {e.args[0]: e.kwargs["default_value"] for e in entities if isinstance(e, DeclareLaunchArgument)}
    unknown = set(arguments) - set(declared)
    assert not unknown, f"not declared in deploy.launch.py: {unknown}"
    context = types.SimpleNamespace(launch_configurations={**declared, **arguments})
    nodes = []
    for e in entities:
        if isinstance(e, OpaqueFunction):
            condition = e.kwargs.get("condition")
            if condition is None or condition.evaluate(context):
                nodes += e.kwargs["function"](context)
    return nodes


def describe_launch_node(node: Node) -> dict:
    params = node.kwargs["parameters"]
    files = [p for p in params if isinstance(p, str)]
    overrides = {p.name: p.value for p in params if isinstance(p, Parameter)}
    assert len(files) + len(overrides) == len(params), f"unexpected parameter entries {params}"
    return {
        "name": node.kwargs["name"],
        "executable": node.kwargs["executable"],
        "package": node.kwargs["package"],
        "params_files": [str(Path(f).resolve()) for f in files],
        "overrides": overrides,
    }


def describe_command(cmd: list[str], executable_of_module: dict[str, str]) -> dict:
    """Parse a para-deploy command line back into the same description (independently of graph.py)."""
    assert cmd[0] == sys.executable and cmd[1] == "-m"
    module = cmd[2]
    assert cmd[3] == "--ros-args", cmd
    ros = cmd[4:]
    name, files, overrides = None, [], {}
    i = 0
    while i < len(ros):
        flag, value = ros[i], ros[i + 1]
        if flag == "-r" and value.startswith("__node:="):
            name = value.split(":=", 1)[1]
        elif flag == "--params-file":
            files.append(str(Path(value).resolve()))
        elif flag == "-p":
            key, text = value.split(":=", 1)
            overrides[key] = yaml.safe_load(text)
        else:
            raise AssertionError(f"unexpected ROS argument {flag} {value} in {cmd}")
        i += 2
    return {
        "name": name,
        "executable": executable_of_module[module],
        "package": "para_ros",
        "params_files": files,
        "overrides": overrides,
    }


def console_scripts() -> dict[str, str]:
    """console_scripts of setup.py as {name: 'module:function'} (parsed with ast, setup() not run)."""
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values):
                if isinstance(key, ast.Constant) and key.value == "console_scripts":
                    entries = ast.literal_eval(value)
                    return {e.split("=")[0].strip(): e.split("=")[1].strip() for e in entries}
    return {}


SETTINGS = [
    {"robot": "sim"},
    {"robot": "i2rt"},
    {"robot": "topic"},
    {
        "robot": "sim",
        "checkpoint": "/data/ckpt/para-v4",
        "device": "cuda:0",
        "dtype": "bf16",
        "scene_image_topic": "/cam_a/image",
        "scene_info_topic": "/cam_a/info",
        "wrist_image_topic": "/cam_b/image",
        "wrist_info_topic": "/cam_b/info",
    },
    {"robot": "i2rt", "checkpoint": "123", "device": "cpu"},  # a numeric-looking path must stay a string
    {"robot": "sim", "fast_path": "true", "compile_mode": "reduce-overhead"},
    {"robot": "i2rt", "fast_path": "false"},
    {"robot": "sim", "fast_path": "true", "dtype": "auto"},  # the fastest precision of the device
    {
        "robot": "topic",
        "joint_trajectory_topic": "/arm_controller/joint_trajectory",
        "arm_joint_names": "shoulder_pan, shoulder_lift,elbow,wrist_1,wrist_2,wrist_3",
        "checkpoint": "/ckpt",
    },
    {"robot": "topic", "arm_joint_names": "1,2,3,4,5,6"},  # numeric-looking names must stay one string
]


@pytest.mark.parametrize("chosen", SETTINGS, ids=lambda s: "-".join(f"{k}={v}" for k, v in s.items())[:60])
def test_launch_file_and_para_deploy_start_the_same_graph(launch_module, chosen):
    launch_side = sorted(
        (describe_launch_node(n) for n in launch_nodes(launch_module, **chosen)), key=lambda d: d["name"]
    )
    # what the launcher's own argparse makes of the same choice
    argv = []
    for key, value in chosen.items():
        argv += [f"--{key.replace('_', '-')}", value]
    args = deploy.build_parser().parse_args(argv)
    executable_of_module = {s.module: s.executable for s in graph.NODES}
    deploy_side = sorted(
        (describe_command(cmd, executable_of_module) for _, cmd in deploy.graph_commands(deploy._settings(args))),
        key=lambda d: d["name"],
    )
    assert launch_side == deploy_side
    names = {d["name"] for d in launch_side}
    assert {"inference_node", "chunk_executor"} <= names
    assert ("sim_node" in names) == (chosen["robot"] == "sim")
    for d in deploy_side:
        for f in d["params_files"]:
            assert Path(f).is_file(), f
        ros_name = yaml.safe_load(Path(d["params_files"][0]).read_text())
        assert d["name"] in ros_name, f"{d['params_files'][0]} has no section for node {d['name']}"
    if "checkpoint" in chosen:
        inference = next(d for d in deploy_side if d["name"] == "inference_node")
        assert inference["overrides"]["checkpoint"] == chosen["checkpoint"]
        executor = next(d for d in deploy_side if d["name"] == "chunk_executor")
        # relaxed only for the untrained model
        assert set(executor["overrides"]) - {"gripper_joint_name", *graph.TOPIC_EXECUTOR_SETTINGS} == (
            {"backend", "auto_engage"} if chosen["robot"] == "sim" else {"backend"}
        )  # the sim engages at once
    inference = next(d for d in deploy_side if d["name"] == "inference_node")
    if "fast_path" in chosen:  # a bool parameter, not the string typed
        assert inference["overrides"]["fast_path"] is (chosen["fast_path"] == "true")
    else:
        assert "fast_path" not in inference["overrides"]
    assert inference["overrides"].get("compile_mode") == chosen.get("compile_mode")
    expected_backend = {"sim": "joint_trajectory", "i2rt": "i2rt_sdk", "topic": "joint_trajectory"}[chosen["robot"]]
    executor = next(d for d in deploy_side if d["name"] == "chunk_executor")
    assert executor["overrides"]["backend"] == expected_backend
    # topic backend (a real joint_trajectory_controller): no gripper inside the trajectory, the user's topic and
    # arm joint names reach the executor (names without the spaces typed around the commas); other backends: none
    if chosen["robot"] == "topic":
        assert executor["overrides"]["gripper_joint_name"] == ""
        for name in graph.TOPIC_EXECUTOR_SETTINGS:
            if name in chosen:
                assert executor["overrides"][name] == chosen[name].replace(" ", "")
            else:
                assert name not in executor["overrides"]
    else:
        assert not {"gripper_joint_name", *graph.TOPIC_EXECUTOR_SETTINGS} & set(executor["overrides"])


def test_launch_arguments_match_the_launcher_options(launch_module):
    description = launch_module.generate_launch_description()
    declared = {e.args[0] for e in description.args[0] if isinstance(e, DeclareLaunchArgument)}
    dests = {a.dest for a in deploy.build_parser()._actions}
    graph_fields = set(graph.DeploySettings.__dataclass_fields__)
    assert declared - {"rviz", *launch_module.LAUNCH_ONLY} == graph_fields
    assert graph_fields <= dests
    assert set(launch_module.LAUNCH_ONLY) - {"rviz"} <= dests  # respawn options: both launchers


def test_rviz_only_when_asked(launch_module):
    off = [n.kwargs["executable"] for n in launch_nodes(launch_module)]
    assert "rviz2" not in off
    rviz_config = REPO / graph.RVIZ_CONFIG
    if not rviz_config.is_file():
        pytest.skip(f"{graph.RVIZ_CONFIG} not written yet (the lead's)")
    on = [n for n in launch_nodes(launch_module, rviz="true") if n.kwargs["executable"] == "rviz2"]
    assert len(on) == 1 and on[0].kwargs["arguments"] == ["-d", str(rviz_config)]


def test_bad_backend_is_refused_naming_the_choices(launch_module):
    with pytest.raises(ValueError, match="sim, i2rt, topic"):
        launch_nodes(launch_module, robot="gazebo")


def test_every_executable_is_a_console_script_of_its_module():
    scripts = console_scripts()
    missing = [
        f"{s.executable} = {s.module}:main" for s in graph.NODES if scripts.get(s.executable) != f"{s.module}:main"
    ]
    if scripts.get("para-deploy") != "para_ros.commands.deploy:main":
        missing.append("para-deploy = para_ros.commands.deploy:main")
    assert not missing, f"register in setup.py console_scripts: {missing}"


def test_untrained_model_relaxes_only_chunk_plausibility_and_unreachable_mode():
    untrained = dict((s.name, o) for s, o in graph.plan(graph.DeploySettings(checkpoint=graph.UNTRAINED)))
    trained = dict((s.name, o) for s, o in graph.plan(graph.DeploySettings(checkpoint="/x")))
    assert untrained["chunk_executor"] == {
        "backend": "joint_trajectory",
        "max_implied_speed_m_s": 100.0,
        "unreachable": "best_effort",
        "auto_engage": True,
    }
    assert trained["chunk_executor"] == {"backend": "joint_trajectory", "auto_engage": True}
    assert untrained["sim_node"] == {} and untrained["inference_node"] == {"checkpoint": ""}
    topic = dict((s.name, o) for s, o in graph.plan(graph.DeploySettings(robot="topic", checkpoint="/x")))
    assert topic["chunk_executor"] == {"backend": "joint_trajectory", "gripper_joint_name": ""}  # not engaged
    engaged = dict(
        (s.name, o) for s, o in graph.plan(graph.DeploySettings(robot="i2rt", checkpoint="/x", engage="true"))
    )
    assert engaged["chunk_executor"]["auto_engage"] is True


def test_sim_backend_defaults_to_the_shipped_checkpoint_and_a_robot_never_does():
    shipped = graph.shipped_checkpoint()
    sim = dict((s.name, o) for s, o in graph.plan(graph.DeploySettings()))
    if shipped:
        assert sim["inference_node"]["checkpoint"] == shipped
        assert not graph.uses_untrained_model(graph.DeploySettings())
        assert "max_implied_speed_m_s" not in sim["chunk_executor"]  # a trained model: nothing relaxed
    robot = dict((s.name, o) for s, o in graph.plan(graph.DeploySettings(robot="i2rt")))
    assert "checkpoint" not in robot["inference_node"]  # the sim-trained policy never reaches a real arm by default
    assert graph.uses_untrained_model(graph.DeploySettings(robot="i2rt"))
    assert graph.uses_untrained_model(graph.DeploySettings(checkpoint=graph.UNTRAINED))


@pytest.mark.parametrize(
    "kwargs, fix",
    [
        ({"robot": "real"}, "sim, i2rt, topic"),
        ({"dtype": "fp64"}, "fp32"),
        ({"fast_path": "yes"}, "true or false"),
        ({"compile_mode": "fastest"}, "off, default, reduce-overhead"),
        ({"scene_image_topic": "cam/image"}, "/cam/image"),
        (
            {"robot": "topic", "joint_trajectory_topic": "arm_controller/joint_trajectory"},
            "'/arm_controller/joint_trajectory'",
        ),
        ({"robot": "topic", "arm_joint_names": "j1,j2,j3,j4,j5"}, "6 distinct arm joint names"),
        ({"robot": "topic", "arm_joint_names": "j1,j2,j3,j4,j5,j5"}, "6 distinct arm joint names"),
        ({"robot": "sim", "joint_trajectory_topic": "/arm_controller/joint_trajectory"}, "robot topic only"),
        ({"robot": "i2rt", "arm_joint_names": "a,b,c,d,e,f"}, "robot topic only"),
    ],
)
def test_bad_settings_name_the_value_and_the_fix(kwargs, fix):
    with pytest.raises(ValueError, match=fix):
        graph.DeploySettings(**kwargs)


def test_para_deploy_help_and_bad_argument():
    out = subprocess.run(
        [sys.executable, "-m", "para_ros.commands.deploy", "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and "--duration" in out.stdout and "--robot" in out.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "para_ros.commands.deploy", "--robot", "gazebo"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "gazebo" in bad.stderr


def test_yaml_value_keeps_strings_strings():
    for value in ["123", "true", "runs/x", "cuda:0", "", 100.0, 3, True]:
        assert yaml.safe_load(graph_run.yaml_value(value) or "''") == value


def test_monitor_watches_the_topics_the_nodes_will_use():
    """The summary and the recording follow the graph: a custom trajectory topic (topic backend) and camera topics."""
    from para_ros.deploy.monitor import graph_topics, record_topics

    settings = graph.DeploySettings(
        robot="topic",
        joint_trajectory_topic="/arm_controller/joint_trajectory",
        scene_image_topic="/cam_a/image_rect",
    )
    topics = graph_topics(graph.plan(settings))
    assert topics.joint_trajectory == "/arm_controller/joint_trajectory"
    assert topics.scene_image == "/cam_a/image_rect" and topics.wrist_image == "/wrist_cam/image_raw"
    recorded = record_topics(topics)
    assert "/arm_controller/joint_trajectory" in recorded and "/joint_trajectory" not in recorded
    assert graph_topics(graph.plan(graph.DeploySettings(robot="sim"))).joint_trajectory == "/joint_trajectory"


@pytest.mark.parametrize("backend", ["sim", "i2rt"])
def test_calibration_monitor_only_when_asked_and_the_same_from_both_launchers(launch_module, backend):
    """``calibration_monitor:=true`` / ``--calibration-monitor`` add the node (and, backend sim, the simulator's
    marker); without it the graph is the one it was."""
    executable_of_module = {s.module: s.executable for s in graph.NODES}

    def deploy_side(argv):
        args = deploy.build_parser().parse_args(argv)
        return sorted(
            (describe_command(cmd, executable_of_module) for _, cmd in deploy.graph_commands(deploy._settings(args))),
            key=lambda d: d["name"],
        )

    def launch_side(**chosen):
        return sorted((describe_launch_node(n) for n in launch_nodes(launch_module, **chosen)), key=lambda d: d["name"])

    off = deploy_side(["--robot", backend])
    on = deploy_side(["--robot", backend, "--calibration-monitor"])
    assert "calibration_monitor" not in {d["name"] for d in off}
    assert {d["name"] for d in on} == {d["name"] for d in off} | {"calibration_monitor"}
    assert on == launch_side(robot=backend, calibration_monitor="true")
    assert off == launch_side(robot=backend)
    sim = [d for d in on if d["name"] == "sim_node"]
    assert [d["overrides"].get("calibration_marker") for d in sim] == (["flange"] if backend == "sim" else [])
    assert all("calibration_marker" not in d["overrides"] for d in off)
