"""config/sim.yaml, launch/sim.launch.py and sim_node's command line agree with the node's declared parameters."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

from para_ros.nodes import sim_node
from para_ros.sim.yam_scene import SimConfig

REPO = Path(__file__).resolve().parent.parent


def test_sim_yaml_lists_every_parameter_with_the_declared_default_and_type():
    doc = yaml.safe_load((REPO / "config" / "sim.yaml").read_text())
    params = doc["sim_node"]["ros__parameters"]
    declared = {p.name: p.default for p in sim_node.PARAMETERS.params if not p.optional}
    assert set(params) == set(declared), set(params) ^ set(declared)
    for name, default in declared.items():
        value = params[name]
        # ROS refuses a params file whose type differs from the declared one (e.g. 10 for a double).
        assert type(value) is type(default), f"{name}: yaml {value!r} vs declared {default!r}"
        if isinstance(default, list):
            assert [type(v) for v in value] == [type(v) for v in default], name
        assert value == default, f"{name}: yaml {value!r} != declared default {default!r}"
    assert all(p.description for p in sim_node.PARAMETERS.params)


def test_yaml_scene_camera_matches_the_ros_free_default():
    params = yaml.safe_load((REPO / "config" / "sim.yaml").read_text())["sim_node"]["ros__parameters"]
    config = SimConfig()
    assert tuple(params["scene_cam_position_m"]) == config.scene_cam_pos_m
    assert tuple(params["scene_cam_look_at_m"]) == config.scene_cam_look_at_m
    assert tuple(params["initial_joint_positions"]) == config.home_q7
    assert params["scene_cam_fovy_deg"] == config.scene_cam_fovy_deg
    assert params["wrist_cam_fovy_deg"] == config.wrist_cam_fovy_deg


def test_launch_file_is_valid_python_starting_sim_node_with_sim_yaml():
    source = (REPO / "launch" / "sim.launch.py").read_text()
    tree = ast.parse(source)
    functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    assert "generate_launch_description" in functions
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "Node"]
    assert len(calls) == 1
    kwargs = {k.arg: k.value for k in calls[0].keywords}
    assert ast.literal_eval(kwargs["package"]) == "para_ros"
    assert ast.literal_eval(kwargs["executable"]) == "sim_node"
    assert ast.literal_eval(kwargs["name"]) == "sim_node"
    assert '"sim.yaml"' in source and "parameters" in kwargs


def test_help_needs_no_ros():
    with pytest.raises(SystemExit) as exc:
        sim_node.main(["--help"])
    assert exc.value.code == 0
