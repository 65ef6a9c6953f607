"""One way to declare a node's parameters: each node's typed table is the source of its shipped
``config/*.yaml`` and of ``--help``; the type rules are the same in every node; and over real DDS every parameter set
request (``ros2 param set`` sends the same SetParameters service call) is applied or refused with a reason, never
acknowledged and ignored."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from para_ros.nodes.parameter_registry import tables
from para_ros.nodes.parameters import Param, ParameterTable
from para_ros.paths import REPO_ROOT


def test_shipped_config_files_are_generated_from_the_tables():
    from para_ros.nodes.parameter_registry import main

    assert main([]) == 0, "config/*.yaml differ from the tables: python -m para_ros.nodes.parameter_registry --write"
    for node, (table, file_name) in tables().items():
        shipped = yaml.safe_load((REPO_ROOT / "config" / file_name).read_text())[node]["ros__parameters"]
        declared = {p.name: p.default for p in table.params if not p.optional}
        assert shipped == declared
        for name, value in shipped.items():  # a params file whose type differs from the declared one is refused
            assert type(value) is type(declared[name]), name


def test_the_check_catches_an_edited_file(tmp_path, monkeypatch):
    import para_ros.nodes.parameter_registry as params
    import para_ros.paths as paths

    for _, (table, file_name) in tables().items():
        (tmp_path / "config").mkdir(exist_ok=True)
        (tmp_path / "config" / file_name).write_text(table.yaml_text())
    monkeypatch.setattr(paths, "REPO_ROOT", tmp_path)
    assert params.main([]) == 0
    f = tmp_path / "config" / "executor.yaml"
    f.write_text(f.read_text().replace("control_rate_hz: 100.0", "control_rate_hz: 50.0"))
    assert params.main([]) == 1


@pytest.mark.parametrize("node", ["chunk_executor", "inference_node", "sim_node", "calibration_monitor"])
def test_help_lists_every_parameter_of_the_table(node):
    out = subprocess.run(
        [sys.executable, "-m", f"para_ros.nodes.{node}", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO_ROOT,
    )
    assert out.returncode == 0, out.stderr
    table, _ = tables()[node]
    missing = [p.name for p in table.params if f"  {p.name} = " not in out.stdout]
    assert not missing, missing


def test_node_param_rules_are_parsed_then_checked_against_the_tables():
    from para_ros.deploy.graph import parse_node_params
    from para_ros.nodes.parameter_registry import check_node_params

    rules = [
        "chunk_executor:implausible_speed:=reject",
        "chunk_executor:control_rate_hz:=200",
        "sim_node:scene_cam_rate_hz:=15.5",
        "inference_node:fast_path:=true",
    ]
    parsed = parse_node_params(rules)
    assert parsed == {
        "chunk_executor": {"implausible_speed": "reject", "control_rate_hz": 200},
        "sim_node": {"scene_cam_rate_hz": 15.5},
        "inference_node": {"fast_path": True},
    }
    checked = check_node_params(parsed)
    assert checked["chunk_executor"] == {"implausible_speed": "reject", "control_rate_hz": 200.0}
    assert type(checked["chunk_executor"]["control_rate_hz"]) is float  # coerced like a params file's value
    for bad in (["chunk_executor=implausible_speed"], ["implausible_speed:=reject"], [":x:=1"]):
        with pytest.raises(ValueError, match="NODE:NAME:=VALUE"):
            parse_node_params(bad)
    for rules, words in (
        (["planner:x:=1"], "no node 'planner'"),
        (["chunk_executor:max_speed:=1"], "no parameter 'max_speed'"),
        (["chunk_executor:implausible_speed:=clip"], "implausible_speed"),
        (["chunk_executor:control_rate_hz:=0.5"], "control_rate_hz"),
    ):
        with pytest.raises(ValueError, match=words):
            check_node_params(parse_node_params(rules))
    assert check_node_params({}) == {}


def test_the_type_rules_are_the_same_in_every_node():
    for node, (table, _) in tables().items():
        for p in table.params:
            if p.optional:
                continue
            if p.kind == "float":  # an integer for a double: accepted as the double
                whole = int(round(p.default))
                if p.range is None or p.range[0] <= whole <= p.range[1]:
                    assert p.coerce(whole) == float(whole) and isinstance(p.coerce(whole), float), (node, p.name)
                with pytest.raises(ValueError, match=p.name):
                    p.coerce("fast")
            elif p.kind == "bool":
                assert p.coerce("true") is True and p.coerce("False") is False
                with pytest.raises(ValueError, match=p.name):
                    p.coerce(2.5)
            elif p.kind == "int":
                assert p.coerce(float(p.default)) == p.default
                with pytest.raises(ValueError, match=p.name):
                    p.coerce(p.default + 0.5)
            elif p.choices:
                with pytest.raises(ValueError, match=f"{p.name}.*use one of"):
                    p.coerce("no-such-choice")


def test_param_rules_by_hand():
    rate = Param("rate_hz", 10.0, "a rate", range=(1.0, 100.0))
    assert rate.coerce(30) == 30.0
    with pytest.raises(ValueError, match=r"rate_hz=0.5: must be within \[1, 100\]"):
        rate.coerce(0.5)
    with pytest.raises(ValueError, match="finite"):
        rate.coerce(float("nan"))
    names = Param("names", "", "comma-separated")
    assert names.coerce(["a", "b"]) == "a,b"
    xyz = Param("xyz", [0.0, 0.0, 1.0], "a point", length=3)
    assert xyz.coerce([1, 2, 3]) == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="exactly 3"):
        xyz.coerce([1.0, 2.0])
    with pytest.raises(ValueError, match="duplicate"):
        ParameterTable("n", [rate, rate])
    with pytest.raises(ValueError, match="rate_hz"):  # a table whose own default breaks its rule
        ParameterTable("n", [Param("rate_hz", 0.0, "a rate", range=(1.0, 100.0))])


def test_a_choice_word_that_yaml_read_as_a_bool_is_the_word():
    """``-p compile_mode:=off`` reaches the node as False (YAML 1.1 reads off / on / yes / no as bools): a string
    parameter whose choices hold such a word takes it; one whose choices do not still refuses the bool."""
    import yaml as pyyaml

    mode = Param("compile_mode", "off", "torch.compile", choices=("off", "default", "reduce-overhead"))
    typed = pyyaml.safe_load("off")
    assert typed is False and mode.coerce(typed) == "off"
    answer = Param("answer", "no", "y/n", choices=("yes", "no"))
    assert answer.coerce(True) == "yes" and answer.coerce(False) == "no"
    dtype = Param("dtype", "fp32", "precision", choices=("fp32", "bf16"))
    with pytest.raises(ValueError, match="dtype=True: expected a string"):
        dtype.coerce(True)


# ---- over DDS: applied or refused, never ignored ---------------------------------------------------------------------


def _set(client_node, executor, node_name: str, name: str, value):
    """One SetParameters request, as ``ros2 param set`` sends it; returns the SetParametersResult."""
    from rcl_interfaces.srv import SetParameters
    from rclpy.parameter import Parameter
    from ros_helpers import wait_for

    client = client_node.create_client(SetParameters, f"/{node_name}/set_parameters")
    assert client.wait_for_service(timeout_sec=60.0), f"/{node_name}/set_parameters not available"
    future = client.call_async(SetParameters.Request(parameters=[Parameter(name, value=value).to_parameter_msg()]))
    # The service is there from the node's first moments, but answered only once it spins: a node still loading its
    # model on a busy machine can take a minute.
    wait_for(future.done, 120.0, spin=lambda: executor.spin_once(timeout_sec=0.05), what=f"set {name}")
    client_node.destroy_client(client)
    return future.result().results[0]


def _get(client_node, executor, node_name: str, name: str):
    from rcl_interfaces.srv import GetParameters
    from rclpy.parameter import parameter_value_to_python
    from ros_helpers import wait_for

    client = client_node.create_client(GetParameters, f"/{node_name}/get_parameters")
    assert client.wait_for_service(timeout_sec=60.0)
    future = client.call_async(GetParameters.Request(names=[name]))
    wait_for(future.done, 30.0, spin=lambda: executor.spin_once(timeout_sec=0.05), what=f"get {name}")
    client_node.destroy_client(client)
    return parameter_value_to_python(future.result().values[0])


@pytest.mark.ros
def test_every_parameter_set_over_dds_is_applied_or_refused_with_a_reason():
    """Each node in its own process; for every parameter of its table a set request with its current value: a dynamic
    one succeeds, a read-only one is refused with a reason that says so. Then bad values are refused naming the rule,
    an integer for a double is accepted, and an applied value takes effect (the executor refuses a chunk longer than
    the new max_chunk_steps)."""
    import rclpy
    from executor_helpers import TOP_DOWN_R, ExecutorDriver, ReferenceKinematics
    from rclpy.executors import SingleThreadedExecutor
    from ros_helpers import start_python, stop_process, wait_for

    kin = ReferenceKinematics()
    drv = ExecutorDriver("/params_exec", kin.ik([0.31, 0.02, 0.14], TOP_DOWN_R))
    procs = []
    ctx = rclpy.Context()
    rclpy.init(context=ctx)
    client = rclpy.create_node("parameter_test_client", context=ctx)
    executor = SingleThreadedExecutor(context=ctx)
    executor.add_node(client)
    try:
        # joint_state_timeout_s 5 s: this test is about parameters; on a loaded machine the driver's joint states can
        # pause past the default 0.2 s, after which the executor (rightly) waits for a new chunk to command again
        drv.start_executor("params_executor", joint_state_timeout_s=5.0)
        procs.append(
            start_python(
                [
                    "para_ros.nodes.inference_node",
                    "--ros-args",
                    "-r",
                    "__node:=params_inference",
                    "-p",
                    "publish_pointcloud:=false",
                ],
                module=True,
            )
        )
        procs.append(
            start_python(
                [
                    "para_ros.nodes.sim_node",
                    "--ros-args",
                    "-r",
                    "__node:=params_sim",
                    "-p",
                    "scene_cam_rate_hz:=1.0",
                    "-p",
                    "wrist_cam_rate_hz:=1.0",
                    "-p",
                    "image_width:=32",
                    "-p",
                    "image_height:=32",
                    "-p",
                    "joint_states_topic:=/params_sim/joint_states",
                    "-p",
                    "joint_trajectory_topic:=/params_sim/joint_trajectory",
                ],
                module=True,
            )
        )
        calibration = Path(tempfile.mkdtemp()) / "calibration.yaml"
        calibration.write_text(
            "para_calibration: 1\ndate: '2026-12-03T04:00:00Z'\nboard: {squares_x: 5, squares_y: 7, square_m: 0.03, "
            "marker_m: 0.022, dictionary: DICT_5X5_100}\ncameras:\n  scene_cam: {method: eye_to_hand, parent_frame: "
            "base, frame_id: scene_cam_optical_frame, xyz_m: [0.3, -0.5, 0.6], quat_xyzw: [1.0, 0.0, 0.0, 0.0], "
            "board_on: gripper, board_xyz_m: [0.1, 0.0, 0.0], board_quat_xyzw: [0.0, 0.0, 0.0, 1.0]}\n"
        )
        procs.append(
            start_python(
                [
                    "para_ros.nodes.calibration_tf",
                    "--ros-args",
                    "-r",
                    "__node:=params_calib_tf",
                    "-p",
                    f"calibration_file:={calibration}",
                ],
                module=True,
            )
        )
        procs.append(
            start_python(
                ["para_ros.nodes.calibration_monitor", "--ros-args", "-r", "__node:=params_calib_monitor"],
                module=True,
            )
        )
        names = {
            "chunk_executor": "params_executor",
            "inference_node": "params_inference",
            "sim_node": "params_sim",
            "calibration_tf": "params_calib_tf",
            "calibration_monitor": "params_calib_monitor",
        }
        for node, (table, _) in tables().items():
            for p in table.params:
                if p.optional:
                    continue
                result = _set(client, executor, names[node], p.name, p.default)
                if p.dynamic:
                    assert result.successful, (node, p.name, result.reason)
                else:
                    assert not result.successful and "read-only" in result.reason.lower(), (node, p.name, result)
        # bad values of dynamic parameters: refused with the rule
        result = _set(client, executor, "params_executor", "out_of_workspace", "bogus")
        assert not result.successful and "use one of ['clamp', 'reject']" in result.reason
        result = _set(client, executor, "params_inference", "max_rate_hz", 0.0)
        assert not result.successful and "within [0.1, 1000]" in result.reason
        result = _set(client, executor, "params_sim", "task_seed", -3)
        assert not result.successful and "task_seed" in result.reason
        # an integer for a double, like -p stale_timeout_s:=2
        assert _set(client, executor, "params_executor", "stale_timeout_s", 2).successful
        # applied: the next chunk longer than max_chunk_steps is rejected for it
        assert _set(client, executor, "params_executor", "max_chunk_steps", 3).successful
        assert _get(client, executor, "params_executor", "max_chunk_steps") == 3
        drv.wait_for_commands(3)
        p_now = kin.fk(drv.q_arm)[:3, 3]
        t = np.linspace(0.0, 0.5, 6)
        drv.publish_chunk(
            time.time(), t, np.tile(p_now, (6, 1)), np.tile([1.0, 0.0, 0.0, 0.0], (6, 1)), np.full(6, 0.5)
        )

        def rejected_for_steps():
            for d in drv.snapshot()[2]:
                for kv in d.values:
                    if kv.key == "last_rejection" and "more than max_steps=3" in kv.value:
                        return True
            return False

        wait_for(rejected_for_steps, 30.0, what="the executor rejecting a 6-step chunk for max_steps=3")
        for proc in procs:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
    finally:
        for proc in procs:
            stop_process(proc, timeout_s=10.0)
        executor.shutdown()
        client.destroy_node()
        ctx.try_shutdown()
        print(drv.close()[-2000:])
