"""The confidence supervisor judged on closed-loop runs (para_ros.deploy.supervisor_table) and the evaluator's record of
its holds (para_ros.deploy.episodes): synthetic reports with hand-counted figures, real diagnostics messages, and the
experiment script's commands parsed by the command's own parser."""

from __future__ import annotations

import importlib
import json
import math
import shlex
import subprocess
import threading
from pathlib import Path

import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue

from para_ros.commands.sim_confidence import parse_pairs
from para_ros.deploy import supervisor_table as st
from para_ros.deploy.episodes import TaskClient, clock_offset, withheld_chunks_problem

REPO = Path(__file__).resolve().parents[1]
NAN = float("nan")


def _report(folder: Path, supervisor: bool, episodes, sim_params=None, settle_s=1.5) -> Path:
    """A report.json as para-sim eval writes it: ``episodes`` = [(seed, outcome, held_at_s)]."""
    folder.mkdir(parents=True)
    node_params = {"chunk_executor": {"confidence_supervisor": supervisor}}
    if sim_params:
        node_params["sim_node"] = sim_params
    rows = [
        {
            "episode": i,
            "seed": s,
            "outcome": o,
            "held_uncertain_at_s": None if math.isnan(h) else h,  # as EpisodeRow writes "never held"
            "hold_reason": ""
            if math.isnan(h)
            else f"confidence: policy uncertain: peak mass 0.1 at step {i} for 0.6 s",
        }
        for i, (s, o, h) in enumerate(episodes)
    ]
    (folder / "report.json").write_text(
        json.dumps({"settings": {"node_params": node_params, "settle_s": settle_s}, "episodes": rows})
    )
    return folder


def test_a_condition_row_counts_holds_against_the_condition_start(tmp_path):
    knock = {"ood_knock_at_s": 3.0}
    off = _report(
        tmp_path / "off",
        False,
        [(1, "success", NAN), (2, "success", NAN), (3, "no_grasp", NAN), (4, "no_grasp", NAN), (5, "fault", NAN)],
        knock,
    )
    # on: seed 1 succeeds without a hold; seed 2 fails, held 1.5 s after the knock (in time); seed 3 fails, held
    # 2.5 s after (late); seed 4 fails, never held; seed 6 succeeds but was held (a false hold)
    on = _report(
        tmp_path / "on",
        True,
        [(1, "success", NAN), (2, "no_grasp", 4.5), (3, "no_grasp", 5.5), (4, "timeout", NAN), (6, "success", 3.2)],
        knock,
    )
    row = st.judge_condition("knocked", off, on, within_s=2.0)
    assert row["condition_start_s"] == 3.0
    assert row["off"]["successes"] == 2 and row["off"]["episodes"] == 4  # the fault is no attempt
    assert row["on"]["successes"] == 2 and row["on"]["episodes"] == 5
    assert row["failing_on"] == 3 and row["failing_held"] == 2 and row["failing_held_in_time"] == 1
    assert row["held_in_time_rate"] == pytest.approx(1 / 3)
    assert row["successful_held"] == 1 and row["false_hold_rate"] == pytest.approx(1 / 5)
    assert row["hold_delay_median_s"] == pytest.approx(2.5)  # delays 1.5 and 2.5: the upper middle
    # paired on the shared seeds 1-4 (a: on, b: off): seed 2 succeeded off only
    assert row["paired"]["seeds"] == 4 and row["paired"]["a_only"] == 0 and row["paired"]["b_only"] == 1
    assert row["reasons"] == ["confidence: policy uncertain: peak mass 0.1"]
    # a wider window takes the late hold in
    assert st.judge_condition("knocked", off, on, within_s=2.6)["failing_held_in_time"] == 2


def test_condition_start_is_the_run_time_condition_or_the_hand_over():
    assert st.condition_start_s({"settle_s": 1.5}) == 1.5
    assert st.condition_start_s({"settle_s": 2.0, "node_params": {"sim_node": {"ood_occluder_at_s": "4.0"}}}) == 4.0
    assert st.condition_start_s({"node_params": {"sim_node": {"ood_knock_at_s": -1.0}}}) == 1.5  # never knocked
    fault = {"ood_camera_fault": "none", "ood_camera_fault_at_s": 0.0}
    assert st.condition_start_s({"settle_s": 1.5, "node_params": {"sim_node": fault}}) == 1.5
    fault["ood_camera_fault"] = "frozen"
    assert st.condition_start_s({"settle_s": 1.5, "node_params": {"sim_node": fault}}) == 0.0


def test_runs_that_are_not_off_then_on_are_refused(tmp_path):
    a = _report(tmp_path / "a", True, [(1, "success", NAN)])
    b = _report(tmp_path / "b", True, [(1, "success", NAN)])
    with pytest.raises(ValueError, match="supervisor off"):
        st.judge_condition("x", a, b)
    with pytest.raises(ValueError, match="no report.json"):
        st.judge_condition("x", tmp_path / "missing", b)
    with pytest.raises(ValueError, match="two folders"):
        parse_pairs(["x=a"])
    with pytest.raises(ValueError, match="NAME=FOLDER"):
        parse_pairs(["a"])
    assert parse_pairs(["x=a", "y=c", "x=b", "y=d"]) == [("x", "a", "b"), ("y", "c", "d")]


def test_the_command_writes_the_table_and_refuses_bad_input(tmp_path):
    from para_ros.commands.sim import main

    off = _report(tmp_path / "off", False, [(1, "success", NAN), (2, "no_grasp", NAN)])
    on = _report(tmp_path / "on", True, [(1, "success", NAN), (2, "no_grasp", 2.0)])
    assert main(["supervisor-table", f"blue={off}", f"blue={on}", "--out", str(tmp_path / "t")]) == 0
    text = (tmp_path / "t.md").read_text()
    assert "| blue | 1/2 (50 %) | 1/2 (50 %) |" in text and "| 1/1 (100 %) |" in text
    assert json.loads((tmp_path / "t.json").read_text())[0]["failing_held_in_time"] == 1
    assert main(["supervisor-table", f"blue={on}", f"blue={off}", "--out", str(tmp_path / "u")]) == 2
    assert not (tmp_path / "u.md").exists()


def _diag(
    stamp_s: float,
    state: str,
    problem: str = "",
    name: str = "chunk_executor: status",
    activity: str = "tracking",
    recorded_before_activity_key: bool = False,
) -> DiagnosticArray:
    """A chunk executor's report; ``recorded_before_activity_key``: with the keys of a recording made before the
    activity had its own key (``mode`` the state, ``state`` the activity)."""
    msg = DiagnosticArray()
    msg.header.stamp.sec, msg.header.stamp.nanosec = int(stamp_s), int(round((stamp_s % 1) * 1e9))
    if recorded_before_activity_key:
        values = [KeyValue(key="mode", value=state), KeyValue(key="state", value=activity)]
    else:
        values = [KeyValue(key="state", value=state), KeyValue(key="activity", value=activity)]
    values += [
        KeyValue(key="confidence_problem", value=problem),
        KeyValue(key="chunks_rejected", value="4"),
    ]
    msg.status = [DiagnosticStatus(name=name, values=values)]
    return msg


def _client() -> TaskClient:
    """The evaluator's bookkeeping without its ROS node (only the callbacks under test run)."""
    ev = object.__new__(TaskClient)
    ev.lock, ev.holds, ev.rejected, ev.truncated = threading.Lock(), [], 0, 0
    ev.camera_problem = ev.executor_activity = ""
    return ev


def _inference_diag(stamp_s: float, camera_problem: str = "") -> DiagnosticArray:
    msg = DiagnosticArray()
    msg.header.stamp.sec, msg.header.stamp.nanosec = int(stamp_s), int(round((stamp_s % 1) * 1e9))
    values = [KeyValue(key="dropped.camera", value="3")]
    if camera_problem:
        values.append(KeyValue(key="problem.camera.scene", value=camera_problem))
    msg.status = [DiagnosticStatus(name="para: inference_node", values=values)]
    return msg


def test_a_hold_for_want_of_chunks_counts_once_the_inference_node_names_a_refused_camera():
    """The executor holding for want of chunks (``hold_stale``) is a hold with a reason only while the inference
    node reports a refused camera; it is recorded at the later of the two reports, in either order."""
    offset = 1000.0
    for camera_first in (True, False):
        ev = _client()
        ev._on_diag(_diag(1002.0, "following"))
        ev._on_diag(_inference_diag(1002.5))
        first, second = (
            (_inference_diag(1004.0, "the scene camera froze"), _diag(1004.5, "following", activity="hold_stale"))
            if camera_first
            else (_diag(1004.0, "following", activity="hold_stale"), _inference_diag(1004.5, "the scene camera froze"))
        )  # fmt: skip
        ev._on_diag(first)
        if not camera_first:  # holding for want of chunks, no camera named (yet): no hold with a reason
            assert ev.first_hold(offset, since_s=1.5) == (None, "")
        ev._on_diag(second)
        held, reason = ev.first_hold(offset, since_s=1.5)
        assert held == pytest.approx(4.5) and reason == "camera: the scene camera froze"


def test_an_unfamiliar_scene_names_the_hold_for_want_of_chunks_and_a_camera_comes_first():
    """The inference node's ``problem.familiarity`` makes a stale hold a hold with a reason, like a refused camera;
    with both reported, the camera (the plainer cause) names it."""
    ev = _client()
    ev._on_diag(_diag(1004.0, "following", activity="hold_stale"))
    diag = _inference_diag(1004.5)
    diag.status[0].values.append(KeyValue(key="problem.familiarity", value="the wrist camera sees what ..."))
    ev._on_diag(diag)
    assert ev.first_hold(1000.0, since_s=1.5) == (pytest.approx(4.5), "familiarity: the wrist camera sees what ...")
    assert (
        withheld_chunks_problem({"problem.familiarity": "f", "problem.camera.wrist": "w", "problem.camera.scene": "s"})
        == "camera: s"
    )
    assert withheld_chunks_problem({"problem.tf": "x"}) == ""


@pytest.mark.parametrize("recorded_before_activity_key", [False, True])
def test_the_evaluator_keeps_the_first_hold_after_the_hand_over_in_episode_time(recorded_before_activity_key):
    """Also from a recording whose reports carry the older keys (``mode`` the state, ``state`` the activity)."""
    ev = _client()
    offset = clock_offset({"stamp_ns": 1_000_000_000_000 + 2_000_000_000, "sim_time_s": 2.0})
    assert offset == pytest.approx(1000.0)
    assert clock_offset({"sim_time_s": 1.0}) is None

    def diag(stamp_s, state, problem="", **kw):
        return _diag(stamp_s, state, problem, recorded_before_activity_key=recorded_before_activity_key, **kw)

    ev._on_diag(diag(1001.2, "holding_uncertain", "late news of the last episode"))  # before the hand-over at 1.5
    ev._on_diag(diag(1003.0, "following"))
    ev._on_diag(diag(1004.25, "holding_uncertain", "policy uncertain: peak mass 0.03", activity="hold_uncertain"))
    ev._on_diag(diag(1004.75, "holding_uncertain", "policy uncertain: peak mass 0.02", activity="hold_uncertain"))
    ev._on_diag(diag(1003.5, "holding_uncertain", "other node", name="inference_node: status"))
    assert ev.rejected == 4
    held, reason = ev.first_hold(offset, since_s=1.5)
    assert held == pytest.approx(4.25) and reason == "policy uncertain: peak mass 0.03"
    assert ev.first_hold(None, 1.5) == (None, "")
    ev.forget_holds()
    held, reason = ev.first_hold(offset, 1.5)
    assert held is None and reason == ""


def test_a_recorded_report_gives_its_state_and_activity_under_either_keys():
    """The executor's reports name the state ``state`` and its activity ``activity``; a recording made before the
    activity had its own key named them ``mode`` and ``state``: both read the same."""
    from para_ros.execution.executor_diagnostics import state_and_activity

    now = {"state": "following", "activity": "hold_stale"}
    before = {"mode": "following", "state": "hold_stale"}
    assert state_and_activity(now) == state_and_activity(before) == ("following", "hold_stale")
    assert state_and_activity({}) == ("", "")


def test_every_command_of_the_confidence_experiment_parses(tmp_path):
    res = subprocess.run(
        ["bash", str(REPO / "scripts" / "confidence"), "all", "--dry-run", "--episodes", "7", "--runs", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 0, res.stderr
    commands = [shlex.split(line[2:]) for line in res.stdout.splitlines() if line.startswith("+ ")]
    parser = importlib.import_module("para_ros.commands.sim").build_parser()
    seen, fit_seeds, evaluated_seeds = set(), set(), set()
    for words in commands:
        assert words[:3] == ["python", "-m", "para_ros.commands.sim"], words
        args = parser.parse_args(words[3:])
        seen.add(args.command)
        if args.command == "eval":
            assert args.lockstep and args.episodes in (7, 10, 20)
            supervisor = [p for p in args.node_param if "confidence_supervisor" in p]
            assert len(supervisor) == 1 and ("/on/" in args.out) == supervisor[0].endswith("true")
            assert "inference_node:decoding:=argmax" in args.node_param  # the documented figures' decoding
            seeds = set(range(args.seed, args.seed + args.episodes))
            (fit_seeds if "/fit_data/" in args.out else evaluated_seeds).update(seeds)
    assert seen == {"eval", "confidence-report", "supervisor-table"}
    assert fit_seeds and evaluated_seeds and not fit_seeds & evaluated_seeds  # the thresholds are judged held out
    bad = subprocess.run(
        ["bash", str(REPO / "scripts" / "confidence"), "off", "--bogus"], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "unknown option" in bad.stderr


@pytest.mark.parametrize("decoding", ["fused", "auto"])
def test_the_confidence_experiment_takes_the_decoding_asked(decoding):
    res = subprocess.run(
        ["bash", str(REPO / "scripts" / "confidence"), "on", "--dry-run", "--decoding", decoding],
        capture_output=True,
        text=True,
        timeout=60,
    )
    evals = [line for line in res.stdout.splitlines() if line.startswith("+ ") and " eval " in line]
    assert res.returncode == 0 and len(evals) == 6  # the nominal rig and the five conditions
    assert all(f"inference_node:decoding:={decoding}" in line and "argmax" not in line for line in evals)


@pytest.mark.parametrize(
    "argv, why",
    [(["--decoding"], "--decoding needs a value"), (["--decoding", "best"], "use argmax, fused, joint or auto")],
)
def test_the_confidence_experiment_refuses_a_missing_or_unknown_decoding(argv, why):
    res = subprocess.run(
        ["bash", str(REPO / "scripts" / "confidence"), "on", *argv, "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert res.returncode == 2 and why in res.stderr and "+ " not in res.stdout
