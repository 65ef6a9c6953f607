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


SWALLOWING_PROBE = """
import sys, time, rclpy.node
from para_ros.nodes.runtime import run_node
class Probe:
    def __init__(self):
        self.node = rclpy.node.Node("swallowing_probe")
        self.node.create_timer(0.05, self.tick)
    def tick(self):  # a callback that blocks and swallows whatever interrupts it (an over-broad except)
        print("IN_CALLBACK", flush=True)
        try:
            while True:
                time.sleep(0.01)
        except BaseException:
            pass
    def shutdown(self):
        print("SHUTDOWN_RAN", flush=True)
        if HANG:
            time.sleep(600)  # a clean-up that never ends
sys.exit(run_node(Probe, prog="probe", description="probe", default_params_file="inference.yaml", argv=[],
                  stop_grace_s=2.0))
"""


@pytest.mark.ros
@pytest.mark.parametrize("hang", [False, True])
def test_a_stop_signal_ends_the_node_even_when_a_callback_swallows_it_or_the_clean_up_hangs(hang):
    """SIGTERM (what a node gets when its parent dies) lands inside a callback that swallows it, so the spin goes on;
    or the clean-up then hangs: either way the process exits by itself after its stop grace (status 128 + SIGTERM),
    saying so, instead of living on with its name in the domain."""
    import signal
    import time

    from ros_helpers import start_python, stop_process

    proc = start_python(f"HANG = {hang}\n" + SWALLOWING_PROBE)
    seen = []
    for line in proc.stdout:  # wait until the callback blocks
        seen.append(line)
        if line.startswith("IN_CALLBACK"):
            break
    else:
        pytest.fail("".join(seen))
    t0 = time.monotonic()
    rc, out = stop_process(proc, timeout_s=30, stop_signal=signal.SIGTERM)
    took_s = time.monotonic() - t0
    assert rc == 128 + signal.SIGTERM and "exiting without a clean shutdown" in out, (rc, out)
    assert 1.5 < took_s < 20, took_s


def test_the_guard_finds_a_process_orphaned_by_its_parent_and_only_that_one():
    """A child of this run starts a grandchild and exits: the grandchild (reparented, carrying the run's mark) is an
    orphan and is killed; a child still ours is not one."""
    import time

    from process_guard import kill_orphans, orphans_of_this_run
    from ros_helpers import start_python, stop_process

    ours = start_python("import time; time.sleep(60)")
    parent = start_python(
        "import subprocess, sys; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
        "print(p.pid, flush=True)"
    )
    grandchild = int(parent.stdout.readline())
    parent.wait(timeout=30)
    try:
        deadline = time.monotonic() + 10
        while grandchild not in orphans_of_this_run():
            assert time.monotonic() < deadline, "the orphaned grandchild was not found"
            time.sleep(0.1)
        assert ours.pid not in orphans_of_this_run()
        said = kill_orphans()
        assert any(s.startswith(f"pid {grandchild}:") and "time.sleep(60)" in s for s in said), said
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{grandchild}") and "Z" not in open(f"/proc/{grandchild}/stat").read().split()[2]:
            assert time.monotonic() < deadline, "the orphan is still running"
            time.sleep(0.1)
    finally:
        stop_process(ours)


def test_the_stop_handler_arms_no_exit_timer_outside_run_node():
    """Only a running node exits after its grace: the handler called elsewhere (this test process) starts no timer."""
    import signal
    import threading

    from para_ros.nodes import runtime

    before = threading.active_count()
    runtime._stop_signals.clear()
    try:
        with pytest.raises(KeyboardInterrupt):
            runtime._raise_keyboard_interrupt(signal.SIGTERM, None)
        assert threading.active_count() == before
    finally:
        runtime._stop_signals.clear()
