"""run_node: shipped params first and overridable, ROS args passed through, the caller's domain kept, --help."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from para_ros.dds_env import loopback_dds_env
from para_ros.nodes.runtime import split_ros_args

PROBE = """
import os, sys, rclpy.node
from para_ros.nodes.runtime import run_node
def build():
    node = rclpy.node.Node("inference_node")  # the node name used in config/inference.yaml
    node.declare_parameter("max_rate_hz", 0.0)
    print("VALUE", node.get_parameter("max_rate_hz").value, "DOMAIN", os.environ.get("ROS_DOMAIN_ID"), flush=True)
    raise KeyboardInterrupt  # stop at once, through the same path as Ctrl-C
sys.exit(run_node(build, prog="probe", description="probe", default_params_file="inference.yaml",
                  argv=sys.argv[1:]))
"""


def run_probe(*args, env=None):
    env = env or loopback_dds_env()
    out = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    line = next(line for line in out.stdout.splitlines() if line.startswith("VALUE"))
    _, value, _, domain = line.split()
    return float(value), domain


def test_split_ros_args():
    assert split_ros_args(["--params-file", "a", "--ros-args", "-p", "x:=1"]) == (
        ["--params-file", "a"],
        ["--ros-args", "-p", "x:=1"],
    )
    assert split_ros_args(["--help"]) == (["--help"], [])


@pytest.mark.ros
def test_shipped_params_load_first_and_caller_overrides_win(tmp_path):
    assert run_probe()[0] == 30.0  # config/inference.yaml
    assert run_probe("--ros-args", "-p", "max_rate_hz:=7.0")[0] == 7.0
    override = tmp_path / "mine.yaml"
    override.write_text("inference_node:\n  ros__parameters:\n    max_rate_hz: 9.0\n")
    # launch_ros passes its own --params-file after --ros-args: it must win over the shipped file
    assert run_probe("--ros-args", "--params-file", str(override))[0] == 9.0
    assert run_probe("--params-file", "none")[0] == 0.0  # no file: the declared default


@pytest.mark.ros
def test_node_keeps_the_callers_domain_and_never_picks_a_random_one():
    env = loopback_dds_env()
    assert run_probe(env=env)[1] == env["ROS_DOMAIN_ID"]
    env.pop("ROS_DOMAIN_ID")
    # started separately (ros2 run / ros2 launch), nodes must all land in the user's (default) domain
    assert run_probe(env=env)[1] == "None"
    assert "ROS_DOMAIN_ID" not in loopback_dds_env({}, pick_domain=False)
    assert loopback_dds_env({}, pick_domain=False)["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"


@pytest.mark.parametrize(
    "module", ["para_ros.nodes.inference_node", "para_ros.nodes.chunk_executor", "para_ros.nodes.sim_node"]
)
def test_every_node_has_help(module):
    out = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "MUJOCO_GL": "egl"},
    )
    assert out.returncode == 0 and "--params-file" in out.stdout and "--ros-args" in out.stdout
    assert "ROS parameters" in out.stdout  # the parameters and their defaults are listed


def test_an_exception_out_of_spin_is_a_clean_stop_only_after_a_stop_signal():
    """SIGINT's KeyboardInterrupt can land inside a conversion rclpy's C++ layer is making (taking a message runs
    Python code), which hands it on as a RuntimeError: after a stop signal that is a clean stop, before one it is a
    real error that must propagate."""
    import signal

    import pytest

    from para_ros.nodes import runtime

    runtime._stop_signals.clear()
    disguised = RuntimeError("Unable to convert call argument '0' to Python object")
    assert not runtime.stopped_by_signal(disguised)
    assert runtime.stopped_by_signal(KeyboardInterrupt())
    try:
        with pytest.raises(KeyboardInterrupt):
            runtime._raise_keyboard_interrupt(signal.SIGINT, None)
        assert runtime.stopped_by_signal(disguised)
    finally:
        runtime._stop_signals.clear()
