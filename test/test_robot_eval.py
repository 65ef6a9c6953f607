"""``para-eval-robot``'s rules without ROS: the balanced order, the operator's commands and when they are taken, the
report's figures against hand calculations, and the refusals that keep an evaluation's folder intact. (The whole
procedure through the real nodes and a scripted operator: ``test/test_robot_eval_sim.py``.)"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from para_ros.commands import eval_robot
from para_ros.deploy.robot_eval import (
    MarkRow,
    OperatorCommand,
    OperatorDesk,
    RobotEvalSettings,
    Variant,
    balanced_order,
    check_new_or_continued,
    parse_operator_text,
    parse_variant,
    write_report,
)

REPO = Path(__file__).resolve().parent.parent
A, B = str(REPO / "checkpoints/pick_place"), str(REPO / "checkpoints/pick_place_fewshot5")


def _settings(out, **kw) -> RobotEvalSettings:
    return RobotEvalSettings(variants=[Variant("A", A), Variant("B", B)], out=str(out), **kw)


def _row(k: int, variant: str, outcome: str, reason: str = "", duration_s: float = 5.0) -> MarkRow:
    return MarkRow(k, k // 2, variant, outcome, reason, duration_s, False, duration_s + 3.0, "topic")


# ------------------------------------------------------------------------------------------------- order
def test_abba_order_alternates_rounds_and_a_longer_run_extends_a_shorter_one():
    assert balanced_order(2, 8) == [0, 1, 1, 0, 0, 1, 1, 0]  # A B B A A B B A
    assert balanced_order(3, 7) == [0, 1, 2, 2, 1, 0, 0]
    assert balanced_order(2, 20)[:7] == balanced_order(2, 7)


def test_random_order_shuffles_each_round_reproducibly():
    order = balanced_order(3, 30, "random", order_seed=7)
    rounds = [order[i : i + 3] for i in range(0, 30, 3)]
    assert all(sorted(r) == [0, 1, 2] for r in rounds)  # every variant once per round
    assert len({tuple(r) for r in rounds}) > 1  # not one fixed permutation
    assert order == balanced_order(3, 30, "random", order_seed=7)
    assert order != balanced_order(3, 30, "random", order_seed=8)
    assert balanced_order(3, 12, "random", order_seed=7) == order[:12]


# ---------------------------------------------------------------------------------------- operator commands
def test_operator_text_forms():
    assert parse_operator_text("") == OperatorCommand("start")
    assert parse_operator_text("f dropped the cube") == OperatorCommand("mark", None, "failure", "dropped the cube")
    assert parse_operator_text("s") == OperatorCommand("mark", None, "success", "")
    assert parse_operator_text("4 void cable caught", "topic", "mark") == OperatorCommand(
        "mark", 4, "void", "cable caught", "topic"
    )
    assert parse_operator_text("4", "topic", "start") == OperatorCommand("start", 4, source="topic")
    with pytest.raises(ValueError, match="a failure needs a reason"):
        parse_operator_text("failure")
    with pytest.raises(ValueError, match="EPISODE success"):
        parse_operator_text("success", "topic", "mark")  # a topic mark names its episode
    with pytest.raises(ValueError, match="mark with success"):
        parse_operator_text("great")


def test_the_desk_takes_a_mark_only_for_the_running_episode():
    desk = OperatorDesk()
    ok, why = desk.offer(OperatorCommand("mark", 0, "success", source="topic"))
    assert not ok and why == "refused: episode 0 is not running (no episode is open)"
    desk.open("reset", 3)
    ok, why = desk.offer(OperatorCommand("mark", 3, "success", source="topic"))
    assert not ok and "mark while episode 3 is reset" in why  # no mark before the start
    assert desk.offer(OperatorCommand("start", 3, source="topic"))[0]
    desk.open("running", 3)
    ok, why = desk.offer(OperatorCommand("mark", 7, "success", source="topic"))
    assert not ok and why == "refused: episode 7 is not running (episode 3 is running)"
    assert desk.offer(OperatorCommand("mark", None, "failure", "dropped"))  # the keyboard: the running one
    ok, why = desk.offer(OperatorCommand("mark", 3, "success", source="topic"))
    assert not ok and "has its mark already" in why
    taken = desk.wait(0.1, threading.Event())
    assert (taken.outcome, taken.reason) == ("failure", "dropped")


def test_the_desk_waits_for_the_time_limit_when_nobody_marks():
    desk = OperatorDesk()
    desk.open("running", 0)
    assert desk.wait(0.2, threading.Event()) is None


# ------------------------------------------------------------------------------------------------- report
def _wilson_by_hand(k: int, n: int) -> tuple[float, float]:
    """The Wilson score interval written out from its textbook formula, z = 1.96."""
    z = 1.96
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


def test_report_rates_intervals_and_paired_test_match_hand_figures(tmp_path):
    # rounds 0..4; A: S S S F S, B: F F S F void (round 4 unpaired)
    marks = {
        "A": [("success", ""), ("success", ""), ("success", ""), ("failure", "dropped"), ("success", "")],
        "B": [
            ("failure", "no grasp"),
            ("failure", "no grasp"),
            ("success", ""),
            ("failure", "dropped"),
            ("void", "bump"),
        ],
    }
    rows = []
    for r in range(5):
        for lab in ("A", "B"):
            outcome, reason = marks[lab][r]
            rows.append(MarkRow(len(rows), r, lab, outcome, reason, 4.0 + r, False, 10.0, "keyboard"))
    settings = _settings(tmp_path, episodes=10)
    write_report(tmp_path, settings, rows, {"interrupted": False})
    report = json.loads((tmp_path / "report.json").read_text())
    a, b = report["summaries"]["A"], report["summaries"]["B"]
    assert (a["successes"], a["episodes"], a["voids"]) == (4, 5, 0)
    assert (b["successes"], b["episodes"], b["voids"]) == (1, 4, 1)  # the void is no attempt
    assert a["wilson95"] == pytest.approx(_wilson_by_hand(4, 5), abs=2e-4)
    assert b["wilson95"] == pytest.approx(_wilson_by_hand(1, 4), abs=2e-4)
    assert a["wilson95"] == pytest.approx([0.3755, 0.9638], abs=1e-4)  # 4/5, from a table
    assert b["failure_reasons"] == {"no grasp": 2, "dropped": 1}
    assert a["median_success_time_s"] == pytest.approx(5.5)  # 4, 5, 6, 8
    (pair,) = report["pairs"]
    # rounds 0-3 paired (B's round 4 is void): A only in 0 and 1, both in 2, neither in 3
    assert (pair["seeds"], pair["both"], pair["a_only"], pair["b_only"], pair["neither"]) == (4, 1, 2, 0, 1)
    assert pair["mcnemar_p"] == pytest.approx(2 * 0.5**2)  # 2 discordant, both one way: 2 * P[X <= 0], X ~ B(2, 1/2)
    assert report["order"] == ["A", "B", "B", "A", "A", "B", "B", "A", "A", "B"]
    md = (tmp_path / "report.md").read_text()
    assert "| A | 5 | 4 | 80.0 % | 37.6..96.4 % |" in md
    assert "| A | B | 4 | 1 | 2 | 0 | 1 | +50.0 pts | 0.5 |" in md


# --------------------------------------------------------------------------------------- folder and input
def test_a_second_evaluation_into_the_same_folder_is_refused_and_nothing_changes(tmp_path):
    settings = _settings(tmp_path, episodes=4)
    write_report(tmp_path, settings, [_row(0, "A", "success")], {"interrupted": True})
    before = (tmp_path / "report.json").read_bytes()
    with pytest.raises(ValueError, match="holds an evaluation already.*--continue"):
        check_new_or_continued(tmp_path, _settings(tmp_path, episodes=4))
    rc = eval_robot.main(["--variant", f"A={A}", "--variant", f"B={B}", "--episodes", "4", "--out", str(tmp_path)])
    assert rc == 2
    assert (tmp_path / "report.json").read_bytes() == before
    assert not (tmp_path / "logs").exists()  # nothing was started


def test_continue_keeps_the_rows_and_refuses_other_settings(tmp_path):
    settings = _settings(tmp_path, episodes=4, time_limit_s=30.0)
    rows = [_row(0, "A", "success"), _row(1, "B", "failure", "dropped")]
    write_report(tmp_path, settings, rows, {"interrupted": True})
    kept = check_new_or_continued(tmp_path, _settings(tmp_path, episodes=6, time_limit_s=30.0, resume=True))
    assert kept == rows
    with pytest.raises(ValueError, match="time_limit_s: 30.0 there, 45.0 now"):
        check_new_or_continued(tmp_path, _settings(tmp_path, episodes=6, time_limit_s=45.0, resume=True))
    with pytest.raises(ValueError, match="give --episodes 2 or more"):  # a report never loses rows
        check_new_or_continued(tmp_path, _settings(tmp_path, episodes=1, time_limit_s=30.0, resume=True))
    with pytest.raises(ValueError, match="does not exist: nothing to continue"):
        check_new_or_continued(tmp_path / "other", _settings(tmp_path / "other", resume=True))


def test_an_unknown_checkpoint_is_named_and_nothing_is_written(tmp_path, capsys):
    out = tmp_path / "run"
    rc = eval_robot.main(["--variant", f"A={A}", "--variant", "B=checkpoints/no_such", "--out", str(out)])
    assert rc == 2
    assert "checkpoint 'checkpoints/no_such': no such directory" in capsys.readouterr().err
    assert not out.exists()
    with pytest.raises(ValueError, match="config.json is missing"):
        parse_variant(f"A={tmp_path}")


def test_variant_parameters_are_checked_against_the_inference_node():
    v = parse_variant(f"F={A},inference_node:decoding:=fused")
    assert (v.label, v.inference_params) == ("F", {"decoding": "fused"})
    with pytest.raises(ValueError, match="inference_node parameters only"):
        parse_variant(f"F={A},chunk_executor:blend_mode:=latest")
    with pytest.raises(ValueError, match="decoding"):
        parse_variant(f"F={A},inference_node:decoding:=median")
    with pytest.raises(ValueError, match="--calibration 'nowhere.yaml': no such file"):
        RobotEvalSettings(variants=[Variant("A", A)], out="x", calibration="nowhere.yaml")
    with pytest.raises(ValueError, match="labels repeat"):
        RobotEvalSettings(variants=[Variant("A", A), Variant("A", B)], out="x")


def test_help_names_the_operator_commands():
    out = subprocess.run(
        [sys.executable, "-m", "para_ros.commands.eval_robot", "--help"], capture_output=True, text=True, check=True
    ).stdout
    for words in ("--variant", "--continue", "--time-limit", "/para_eval_robot/mark", "--order"):
        assert words in out


def test_episode_recordings_start_each_bag_with_tf_static_and_keep_a_stopped_episodes_bag(tmp_path):
    from geometry_msgs.msg import TransformStamped
    from rclpy.serialization import serialize_message
    from rosbags.highlevel import AnyReader
    from tf2_msgs.msg import TFMessage

    from para_ros.deploy.robot_eval_run import EpisodeRecordings

    static = TFMessage(transforms=[TransformStamped()])
    static.transforms[0].child_frame_id = "scene_cam_optical_frame"
    rec = EpisodeRecordings({"/tf_static": "tf2_msgs/msg/TFMessage", "/tf": "tf2_msgs/msg/TFMessage"})
    rec.write("/tf_static", 1, serialize_message(static))  # sent once, before any episode
    rec.write("/tf", 2, serialize_message(TFMessage()))  # between episodes: written nowhere
    path = tmp_path / "episodes" / "003"
    path.parent.mkdir()
    assert rec.open(path) is None
    rec.write("/tf", 3, serialize_message(TFMessage()))
    rec.close()
    assert rec.open(path) == path.with_name("003.stopped-1")  # the stopped run's bag kept, not overwritten
    rec.close()
    for bag in (path, path.with_name("003.stopped-1")):
        with AnyReader([bag]) as reader:
            topics = [c.topic for c, _, _ in reader.messages()]
            frames = [
                reader.deserialize(raw, c.msgtype).transforms[0].child_frame_id
                for c, _, raw in reader.messages()
                if c.topic == "/tf_static"
            ]
        assert frames == ["scene_cam_optical_frame"]
        assert topics.count("/tf") == (1 if bag.name == "003.stopped-1" else 0)


def test_keyboard_lines_reach_the_desk_and_every_answer_is_said():
    import io

    from para_ros.deploy.robot_eval_run import keyboard_reader

    said: list[str] = []

    class Terminal:
        def feedback(self, message: str) -> None:
            said.append(message)

    desk = OperatorDesk()
    desk.open("running", 2)
    keyboard_reader(desk, Terminal(), io.StringIO("f\nf dropped it\ns\n")).join(timeout=5)
    assert said[0].startswith("refused: 'f': a failure needs a reason")
    assert said[1:] == ["episode 2 marked failure (dropped it)", "refused: episode 2 has its mark already"]
    taken = desk.wait(0.0, threading.Event())
    assert (taken.outcome, taken.reason, taken.source) == ("failure", "dropped it", "keyboard")
