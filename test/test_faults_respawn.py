"""Respawn: para-deploy's ProcessGroup restarts a node that died (not one stopped at the shutdown), after the delay,
counts it and never reports it dead; without respawn the same death is reported (and ends a run). The launch file's
``respawn`` / ``respawn_executor`` / ``respawn_delay`` arguments reach launch_ros' ``Node`` actions by the same rule
as para-deploy's options (the executor only with ``respawn_executor``).

No ROS needed for the ProcessGroup part: the "nodes" are tiny ``python -c`` children that exit after a second.
"""

from __future__ import annotations

import json
import sys
import time

import pytest
from test_deploy_graph import launch_module, launch_nodes  # noqa: F401 (the fixture, with the stand-in launch modules)
from test_deploy_launcher import POLITE, pid_gone, stand_in_graph

from para_ros.commands import deploy
from para_ros.dds_env import loopback_dds_env
from para_ros.deploy import graph, graph_run

# Exits on its own after a second; prints its pid first, so each life of it shows in its log.
SHORT_LIVED = "import os, sys, time; print('pid', os.getpid(), flush=True); time.sleep(1.0); sys.exit(7)"


def _spec(name: str) -> graph.NodeSpec:
    return graph.NodeSpec(name, name, name, "x")


def _wait(condition, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(0.02)


def test_a_respawned_node_is_restarted_after_the_delay_and_never_reported_dead(tmp_path):
    group = graph_run.ProcessGroup(tmp_path / "logs", loopback_dds_env(), respawn_delay_s=0.5)
    node = group.start(_spec("short"), [sys.executable, "-c", SHORT_LIVED], respawn=True)
    first_pid = node.proc.pid
    try:
        t0 = time.monotonic()
        while node.restarts < 2:
            assert time.monotonic() - t0 < 30, "not restarted twice within 30 s"
            assert group.first_dead() is None, "a respawned node was reported dead"
            time.sleep(0.02)
        # each life lasts ~1 s, then the delay: two restarts need at least 2 x (1 + 0.5) s minus scheduling
        assert time.monotonic() - t0 >= 2.5
        assert node.proc.pid != first_pid and node.exit_statuses == [7, 7]
        assert group.restarts() == 2 and group.pids() == [node.proc.pid]
        _wait(
            lambda: node.proc.poll() is None and "pid" in node.log_path.read_text().split("restart 2")[-1],
            10,
            "the second restart to be up",
        )
    finally:
        group.stop(timeout_s=2.0)
    log = node.log_path.read_text()
    assert log.count("pid ") >= 3, log  # three lives, one log, appended
    assert "exited with status 7; restarting it in 0.5 s" in log and "restarted (restart 2" in log
    # stopped at the shutdown: not restarted again, and this last life was not an early exit
    assert node.restarts == 2 and not node.exited_early and node.returncode is not None
    time.sleep(1.0)
    assert node.restarts == 2 and pid_gone(node.proc.pid)


def test_without_respawn_the_same_death_is_reported(tmp_path):
    group = graph_run.ProcessGroup(tmp_path / "logs", loopback_dds_env(), respawn_delay_s=0.1)
    keeps = group.start(_spec("keeps"), [sys.executable, "-c", SHORT_LIVED], respawn=True)
    dies = group.start(_spec("dies"), [sys.executable, "-c", SHORT_LIVED])
    try:
        _wait(lambda: group.first_dead() is not None, 30, "the node without respawn to be reported dead")
        dead = group.first_dead()
        assert dead is dies and dies.exited_early and dies.returncode == 7 and dies.restarts == 0
        time.sleep(0.5)
        assert group.first_dead() is dies  # still the only one: the respawned one is never reported
    finally:
        group.stop(timeout_s=2.0)
    assert keeps.restarts >= 1


def test_a_node_dead_at_the_shutdown_waiting_for_its_restart_counts_as_exited_early(tmp_path):
    group = graph_run.ProcessGroup(tmp_path / "logs", loopback_dds_env(), respawn_delay_s=60.0)
    node = group.start(_spec("short"), [sys.executable, "-c", SHORT_LIVED], respawn=True)
    _wait(lambda: node.down_since is not None, 30, "the death to be seen")
    group.stop(timeout_s=2.0)
    assert node.exited_early and node.restarts == 0 and node.exit_statuses == [7] and node.returncode == 7


def test_the_existing_api_still_works_without_respawn(tmp_path):
    """``ProcessGroup(log_dir, env, echo=...)``, ``start(spec, cmd)`` without respawn: no watcher."""
    group = graph_run.ProcessGroup(tmp_path / "logs", loopback_dds_env(), echo=False)
    node = group.start(_spec("polite"), [sys.executable, "-c", POLITE])
    assert group._watcher is None and not node.respawn
    _wait(lambda: "up" in node.log_path.read_text(), 30, "the node to be up")
    assert group.first_dead() is None
    group.stop(timeout_s=3.0)
    assert node.returncode == 0 and "up" in group.log_tail(node)


@pytest.mark.ros
def test_para_deploy_respawns_and_reports_the_restarts(tmp_path, monkeypatch):
    monkeypatch.setattr(
        deploy, "graph_commands", stand_in_graph({"inference_node": [SHORT_LIVED], "chunk_executor": [POLITE]})
    )
    out = tmp_path / "run"
    status = deploy.main(
        [
            "--duration",
            "4",
            "--out",
            str(out),
            "--no-record",
            "--respawn",
            "--respawn-delay",
            "0.3",
            "--shutdown-timeout",
            "3",
        ]
    )
    summary = json.loads((out / "summary.json").read_text())
    inference = summary["nodes"]["inference_node"]
    assert summary["stop_reason"] == "duration reached"  # the death did not end the run
    assert inference["respawn"] and inference["restarts"] >= 1 and set(inference["exit_statuses"]) == {7}
    assert not summary["nodes"]["chunk_executor"]["respawn"] and summary["restarts"] == inference["restarts"]
    assert json.loads((out / "pids.json").read_text())["inference_node"] == inference["pid"]  # the current one
    text = (out / "summary.txt").read_text()
    assert f"restarted {inference['restarts']} time" in text and "exit statuses 7" in text
    assert status == (1 if inference["exited_early"] else 0)  # dead at the shutdown only if it was between lives


@pytest.mark.ros
def test_para_deploy_without_respawn_the_executor_death_ends_the_run(tmp_path, monkeypatch):
    """``--respawn`` alone does not bring the executor back."""
    monkeypatch.setattr(
        deploy, "graph_commands", stand_in_graph({"inference_node": [POLITE], "chunk_executor": [SHORT_LIVED]})
    )
    out = tmp_path / "run"
    assert deploy.main(["--duration", "30", "--out", str(out), "--no-record", "--respawn"]) == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stop_reason"] == "chunk_executor exited early with status 7"
    assert summary["restarts"] == 0


def test_bad_respawn_delay_is_refused():
    assert deploy.main(["--respawn", "--respawn-delay", "-1"]) == 2


@pytest.mark.parametrize(
    "respawn, respawn_executor", [("false", "false"), ("true", "false"), ("false", "true"), ("true", "true")]
)
def test_launch_respawn_arguments_reach_the_node_actions(launch_module, respawn, respawn_executor):  # noqa: F811
    nodes = launch_nodes(launch_module, respawn=respawn, respawn_executor=respawn_executor, respawn_delay="1.5")
    by_name = {n.kwargs["name"]: n.kwargs for n in nodes}
    assert set(by_name) == {"sim_node", "inference_node", "chunk_executor"}
    for name, kwargs in by_name.items():
        want = graph_run.respawns(name, respawn == "true", respawn_executor == "true")  # para-deploy's rule
        assert kwargs["respawn"] is want, name
        assert kwargs["respawn_delay"] == (1.5 if want else None), name
    assert by_name["chunk_executor"]["respawn"] is (respawn_executor == "true")
    assert by_name["inference_node"]["respawn"] is by_name["sim_node"]["respawn"] is (respawn == "true")


def test_launch_respawn_defaults_off_and_bad_values_name_the_fix(launch_module):  # noqa: F811
    assert not any(n.kwargs["respawn"] for n in launch_nodes(launch_module))
    with pytest.raises(ValueError, match="use true or false"):
        launch_nodes(launch_module, respawn="yes please")
    with pytest.raises(ValueError, match="respawn_delay:=2.0"):
        launch_nodes(launch_module, respawn="true", respawn_delay="soon")
