"""Suite-wide set-up: loopback-only DDS in a per-run domain, and the ``slow`` marker gate.

The DDS environment is applied here, at import, before any test module can import rclpy, so every in-process node
and every child process the tests start (they inherit ``os.environ``) stays on loopback.
"""

from __future__ import annotations

import os
import warnings

import pytest
from process_guard import kill_orphans, mark_this_run

from para_ros.dds_env import apply_loopback_dds_env

# One fresh domain per pytest run unless the caller (e.g. .ci/run) pinned one.
apply_loopback_dds_env()
os.environ.setdefault("MUJOCO_GL", "egl")
mark_this_run()


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="also run tests marked slow (CI does)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow") or os.environ.get("PARA_RUNSLOW") == "1":
        return
    skip_slow = pytest.mark.skip(reason="slow: run with --runslow (CI does)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)


@pytest.fixture(autouse=True)
def _no_orphaned_processes(request):
    """After each test: a process of this run whose parent ended without stopping it (a node orphaned by a killed
    evaluation) is killed and named, so that it neither holds its node name in the run's domain for the tests after
    it nor hides which test left it."""
    yield
    left = kill_orphans()
    if left:
        killed = "\n  ".join(left)
        text = f"{request.node.nodeid} left processes running after their parent ended (killed):\n  {killed}"
        print(f"\n[conftest] {text}")
        warnings.warn(text, stacklevel=1)


def pytest_sessionfinish(session, exitstatus):
    """No child process outlives the test run, even when a test failed before its own clean-up."""
    try:
        from ros_helpers import kill_leftovers
    except ImportError:
        return
    left = kill_leftovers()
    if left:
        print("\n[conftest] killed child processes left running by tests:\n  " + "\n  ".join(left))
