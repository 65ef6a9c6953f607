"""Small helpers for tests that talk real DDS: child processes with the loopback env, waiting on conditions."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence

from para_ros.dds_env import loopback_dds_env
from para_ros.ros_io.spin import spin_until
from para_ros.ros_io.synthetic_rig import wait_for  # noqa: F401 (re-exported for the tests)

# Every child process the tests start, so the test run can make sure none outlives it (see conftest.py).
STARTED: list[subprocess.Popen] = []


def start_python(
    code_or_args: str | Sequence[str], *, module: bool = False, env_extra: dict | None = None, stdout=subprocess.PIPE
) -> subprocess.Popen:
    """Start ``python -c CODE`` (or ``python -m MODULE ARGS...`` when ``module``) with this run's loopback DDS env."""
    env = loopback_dds_env()
    env.update(env_extra or {})
    if module:
        args = [sys.executable, "-m", *code_or_args]
    else:
        args = [sys.executable, "-c", code_or_args]
    proc = subprocess.Popen(args, env=env, stdout=stdout, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    STARTED.append(proc)
    return proc


def spinner_thread(executor, context) -> threading.Thread:
    """A daemon thread (not started) that spins ``executor`` until ``context`` is shut down."""

    return threading.Thread(
        target=spin_until, args=(executor, lambda: not context.ok()), kwargs={"on_error": "stop"}, daemon=True
    )


def kill_leftovers() -> list[str]:
    """Kill (process group) every started child still running; return their command lines."""
    left = []
    for proc in STARTED:
        if proc.poll() is None:
            left.append(" ".join(proc.args if isinstance(proc.args, list) else [str(proc.args)])[:200])
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(5)
    return left


def stop_process(
    proc: subprocess.Popen, timeout_s: float = 5.0, stop_signal: int = signal.SIGINT
) -> tuple[int | None, str]:
    """Send ``stop_signal`` once (SIGINT as Ctrl-C / ros2 launch would), wait, kill the group if it hangs; return
    (rc, output). One signal only: a second one that lands while the first is being handled would kill the process
    after rclpy has put the default handler back."""
    if proc.poll() is None:
        proc.send_signal(stop_signal)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out or ""
    return proc.returncode, out or ""


def private_domain_id() -> int:
    """A ROS domain other than the run's, for a node built in the test process under one of the graph's names
    (``sim_node``, ``chunk_executor``): the run's domain must not list it for the evaluations of later tests, nor
    its ghost in another participant's graph cache."""
    from para_ros.dds_env import other_domain_ids

    return other_domain_ids(1)[0]


def in_process_inference_node(name: str, **params):
    """An ``InferenceNode`` in this process with its inference thread stopped (the test runs the steps itself):
    a generator for a pytest fixture (yields the node, destroys it and rclpy's default context after)."""
    import rclpy
    from rclpy.parameter import Parameter

    from para_ros.nodes.inference_node import InferenceNode

    owns_init = not rclpy.ok()
    if owns_init:
        rclpy.init()
    node = InferenceNode(name, parameter_overrides=[Parameter(k, value=v) for k, v in params.items()])
    node.shutdown()
    try:
        yield node
    finally:
        node.destroy_node()
        if owns_init:
            rclpy.shutdown()
