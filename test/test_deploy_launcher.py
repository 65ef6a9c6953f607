"""para-deploy's process handling, fast: the real launcher (signals, monitor node, summary files) driving small
stand-in node processes, so start-up, the SIGINT/kill shutdown rule and "no process left behind" are checked in
seconds. The real graph runs in test_deploy_e2e.py (slow).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from para_ros.commands import deploy
from para_ros.dds_env import loopback_dds_env
from para_ros.deploy import graph, graph_run

# Stand-in nodes: print their pid, then wait; what they do on SIGINT is the point of each.
POLITE = (
    "import signal, sys, time; signal.signal(signal.SIGINT, lambda *a: sys.exit(0)); print('up', flush=True); "
    "time.sleep(300)"
)
STUBBORN = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); print('up', flush=True); time.sleep(300)"
# Starts a grandchild (in its process group) and leaves it running when it exits on SIGINT.
LEAVES_GRANDCHILD = textwrap.dedent("""
    import signal, subprocess, sys, time
    g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    open(sys.argv[1], "w").write(str(g.pid))
    signal.signal(signal.SIGINT, lambda *a: sys.exit(0))
    time.sleep(300)
""")
CRASHES = "import sys, time; time.sleep(0.5); print('boom', flush=True); sys.exit(3)"


def pid_gone(pid: int, timeout_s: float = 5.0) -> bool:
    """True once ``pid`` no longer exists (or is a zombie about to be reaped by init)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def stand_in_graph(scripts: dict[str, list[str]]):
    def graph_commands(settings):
        return [
            (graph.NodeSpec(name, name, f"stand_in.{name}", "config/inference.yaml"), [sys.executable, "-c", *args])
            for name, args in scripts.items()
        ]

    return graph_commands


def test_process_group_sigint_then_kill_then_group_sweep(tmp_path):
    group = graph_run.ProcessGroup(tmp_path / "logs", loopback_dds_env())
    grandchild_file = tmp_path / "grandchild.pid"
    specs = {name: graph.NodeSpec(name, name, name, "x") for name in ("polite", "stubborn", "parent")}
    group.start(specs["polite"], [sys.executable, "-c", POLITE])
    group.start(specs["stubborn"], [sys.executable, "-c", STUBBORN])
    group.start(specs["parent"], [sys.executable, "-c", LEAVES_GRANDCHILD, str(grandchild_file)])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (
        grandchild_file.exists()
        and grandchild_file.read_text()
        and all("up" in (tmp_path / "logs" / f"{n}.log").read_text() for n in ("polite", "stubborn"))
    ):
        time.sleep(0.05)
    grandchild = int(grandchild_file.read_text())
    assert group.first_dead() is None
    group.stop(timeout_s=1.0)
    by_name = {n.spec.name: n for n in group.nodes}
    assert (by_name["polite"].returncode, by_name["polite"].killed) == (0, False)
    assert by_name["stubborn"].killed and by_name["stubborn"].returncode == -signal.SIGKILL
    assert (by_name["parent"].returncode, by_name["parent"].killed) == (0, False)
    for pid in [*group.pids(), grandchild]:
        assert pid_gone(pid), f"process {pid} left behind"


@pytest.mark.ros
def test_launcher_runs_stops_and_reports(tmp_path, monkeypatch):
    monkeypatch.setattr(deploy, "graph_commands", stand_in_graph({"a": [POLITE], "b": [POLITE]}))
    out = tmp_path / "run"
    # stand-in nodes: the untrained-model path, no pick-and-place driver (it would wait for chunks)
    status = deploy.main(
        ["--duration", "1.5", "--out", str(out), "--shutdown-timeout", "3", "--checkpoint", "none", "--no-task"]
    )
    assert status == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stop_reason"] == "duration reached"
    assert {n: (v["returncode"], v["killed"]) for n, v in summary["nodes"].items()} == {
        "a": (0, False),
        "b": (0, False),
    }
    assert summary["untrained_model"] is True and summary["snapshot"] is None
    assert (out / "recording" / "metadata.yaml").is_file()
    assert "UNTRAINED" in (out / "summary.txt").read_text()
    for v in summary["nodes"].values():
        assert pid_gone(v["pid"])
    assert deploy.main(["--duration", "1", "--out", str(out)]) == 2  # would overwrite the recording: refused


@pytest.mark.ros
def test_launcher_stops_everything_when_a_node_dies(tmp_path, monkeypatch):
    monkeypatch.setattr(deploy, "graph_commands", stand_in_graph({"ok": [POLITE], "bad": [CRASHES]}))
    out = tmp_path / "run"
    status = deploy.main(["--duration", "60", "--out", str(out), "--no-record", "--no-task"])
    assert status == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stop_reason"] == "bad exited early with status 3"
    assert summary["nodes"]["bad"]["exited_early"] and summary["nodes"]["ok"]["returncode"] == 0
    assert summary["recording"] is None
    assert pid_gone(summary["nodes"]["ok"]["pid"])


@pytest.mark.ros
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_of_the_launcher_stops_every_node(tmp_path, sig):
    """The launcher as its own process (as a user runs it): a signal to it stops all nodes, none is left."""
    out = tmp_path / "run"
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from para_ros.commands import deploy
        from test_deploy_launcher import stand_in_graph, POLITE, STUBBORN
        deploy.graph_commands = stand_in_graph({{"a": [POLITE], "b": [STUBBORN]}})
        raise SystemExit(deploy.main(["--duration", "0", "--out", {str(out)!r}, "--no-record",
                                      "--shutdown-timeout", "1"]))
    """)
    launcher = subprocess.Popen(
        [sys.executable, "-c", code],
        env=loopback_dds_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines = []
    for line in launcher.stdout:
        lines.append(line)
        if "running until Ctrl-C" in line:
            break
    pids = json.loads((out / "pids.json").read_text())
    time.sleep(0.5)  # let the stand-ins install their handlers
    launcher.send_signal(sig)
    rest, _ = launcher.communicate(timeout=60)
    text = "".join(lines) + rest
    assert f"stopping ({signal.Signals(sig).name} received)" in text, text
    assert launcher.returncode == 1, text  # b had to be killed: reported as a failure
    summary = json.loads((out / "summary.json").read_text())
    assert summary["nodes"]["a"]["returncode"] == 0 and summary["nodes"]["b"]["killed"]
    for name, pid in pids.items():
        assert pid_gone(pid), f"{name} (pid {pid}) left behind"


@pytest.mark.ros
def test_children_die_with_a_killed_launcher(tmp_path):
    """Even a SIGKILLed launcher (no chance to clean up) leaves no node behind: the kernel sends them SIGTERM."""
    out = tmp_path / "run"
    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from para_ros.commands import deploy
        from test_deploy_launcher import stand_in_graph
        deploy.graph_commands = stand_in_graph({{"a": ["import time; print('up', flush=True); time.sleep(300)"]}})
        raise SystemExit(deploy.main(["--duration", "0", "--out", {str(out)!r}, "--no-record"]))
    """)
    launcher = subprocess.Popen(
        [sys.executable, "-c", code],
        env=loopback_dds_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    for line in launcher.stdout:
        if "running until Ctrl-C" in line:
            break
    pid = json.loads((out / "pids.json").read_text())["a"]
    os.kill(launcher.pid, signal.SIGKILL)
    launcher.communicate(timeout=30)
    assert pid_gone(pid), "node outlived its SIGKILLed launcher"
