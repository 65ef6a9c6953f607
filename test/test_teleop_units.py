"""``para-teleop``'s parts without DDS: the leader gate (sync, jump, loss, clamp; its table complete), the leader's
joints read from a JointState (names, count), the I2RT SDK's leader (no CAN bus here: "no leader found"; the SDK's
own simulated teaching-handle arm read through it; a leader of another joint count refused), the operator's commands
and the output folder (never overwritten without ``--continue``), and the command's refusals before anything starts.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from para_ros.teleop.episodes import EpisodeDesk, TeleopCommand, first_episode, parse_command
from para_ros.teleop.leader_gate import (
    TRANSITIONS,
    LeaderConfig,
    LeaderEvent,
    LeaderGate,
    LeaderReading,
    LeaderState,
)
from para_ros.teleop.leaders import LeaderMismatch, LeaderNotFound, SdkLeader, leader_joints

LIMITS = yaml.safe_load((Path(__file__).resolve().parent.parent / "config" / "yam.yaml").read_text())[
    "limits"
]  # read here with plain yaml, not through the code
LOWER, UPPER = np.array(LIMITS["joint_lower_rad"]), np.array(LIMITS["joint_upper_rad"])
HOME = np.array([0.0, 0.5, 0.5, 0.0, 0.0, 0.0])
NAMES = tuple(f"joint{i}" for i in range(1, 7))


def gate(**kw):
    return LeaderGate(LeaderConfig(**kw), LOWER, UPPER)


def test_every_state_meets_every_event_in_the_table():
    assert set(TRANSITIONS) == {(s, e) for s in LeaderState for e in LeaderEvent}


def test_the_leader_takes_the_follower_only_where_they_agree():
    g = gate(sync_tolerance_rad=0.15)
    d = g.update(None, HOME, 0.0)
    assert d.q_target_rad is None and d.state is LeaderState.NO_LEADER
    far = HOME + [0.0, 0.0, 0.3, 0.0, 0.0, 0.0]
    d = g.update(LeaderReading(far, 0.5, 1.0), HOME, 1.0)
    assert d.q_target_rad is None and d.state is LeaderState.SYNCING and "joint 3 differs by 0.30 rad" in d.reason
    d = g.update(LeaderReading(far, 0.5, 1.0), None, 1.0)  # no follower state: no agreement to judge
    assert d.q_target_rad is None and "follower" in d.reason
    near = HOME + [0.0, 0.0, 0.1, 0.0, 0.0, 0.0]
    d = g.update(LeaderReading(near, 0.5, 1.02), HOME, 1.02)
    assert d.state is LeaderState.FOLLOWING and np.allclose(d.q_target_rad, near) and d.gripper == 0.5
    # following: the leader leads, step by step, however far from the follower it gets
    q = near.copy()
    for i in range(1, 20):
        q = q + [0.0, 0.0, 0.02, 0.0, 0.0, 0.0]
        d = g.update(LeaderReading(q, 0.5, 1.02 + 0.02 * i), HOME, 1.02 + 0.02 * i)
        assert d.state is LeaderState.FOLLOWING and np.allclose(d.q_target_rad, q)


def test_a_jump_holds_until_the_leader_agrees_again():
    g = gate(jump_rad=0.5)
    g.update(LeaderReading(HOME, 1.0, 0.0), HOME, 0.0)
    assert g.state is LeaderState.FOLLOWING
    jumped = HOME + [1.0, 0, 0, 0, 0, 0]  # a 1 rad leader jump
    d = g.update(LeaderReading(jumped, 1.0, 0.02), HOME, 0.02)
    assert (
        d.q_target_rad is None
        and d.state is LeaderState.SYNCING
        and "joint 1 of the leader jumped 1.00 rad" in d.reason
    )
    d = g.update(LeaderReading(jumped, 1.0, 0.04), HOME, 0.04)  # staying there: still not the follower's pose
    assert d.q_target_rad is None and "joint 1 differs by 1.00 rad" in d.reason
    d = g.update(LeaderReading(HOME, 1.0, 0.5), HOME, 0.5)  # the operator brought it back (itself a jump of 1 rad)
    assert d.q_target_rad is None
    d = g.update(LeaderReading(HOME, 1.0, 0.52), HOME, 0.52)
    assert d.state is LeaderState.FOLLOWING and g.jumps == 2


def test_a_lost_leader_holds_and_syncs_again():
    g = gate(timeout_s=0.2)
    g.update(LeaderReading(HOME, 1.0, 0.0), HOME, 0.0)
    d = g.update(LeaderReading(HOME, 1.0, 0.0), HOME, 0.15)
    assert d.state is LeaderState.FOLLOWING  # 0.15 s old: still fresh
    d = g.update(LeaderReading(HOME, 1.0, 0.0), HOME, 0.25)
    assert d.q_target_rad is None and d.state is LeaderState.NO_LEADER and "0.25 s old" in d.reason
    moved = HOME + [0.0, 0.4, 0.0, 0.0, 0.0, 0.0]  # moved while lost: no following from there
    d = g.update(LeaderReading(moved, 1.0, 1.0), HOME, 1.0)
    assert d.q_target_rad is None and d.state is LeaderState.SYNCING


def test_a_leader_beyond_a_joint_limit_puts_the_follower_at_the_limit():
    g = gate()
    start = np.array([0.0, 0.05, 0.5, 0.0, 0.0, 0.0])
    g.update(LeaderReading(start, 1.0, 0.0), start, 0.0)
    q = start.copy()
    for i in range(1, 10):  # joint2 (lower limit 0) driven below it, 0.05 rad a state
        q = q - [0.0, 0.05, 0.0, 0.0, 0.0, 0.0]
        d = g.update(LeaderReading(q, 1.0, 0.02 * i), start, 0.02 * i)
        assert d.state is LeaderState.FOLLOWING
        assert np.all(d.q_target_rad >= LOWER) and np.all(d.q_target_rad <= UPPER)
    assert d.q_target_rad[1] == LOWER[1] and d.clamped and g.clamped_ticks == 8


@pytest.mark.parametrize("field, value", [("timeout_s", 0.0), ("sync_tolerance_rad", -1.0), ("jump_rad", float("nan"))])
def test_gate_thresholds_are_checked(field, value):
    with pytest.raises(ValueError, match=field):
        LeaderConfig(**{field: value})


def test_leader_joints_by_name_by_position_and_refused():
    q, g = leader_joints(["gripper", *reversed(NAMES)], [0.7, 6, 5, 4, 3, 2, 1], NAMES)
    assert q.tolist() == [1, 2, 3, 4, 5, 6] and g == pytest.approx(0.7)
    q, g = leader_joints([], [1, 2, 3, 4, 5, 6], NAMES)
    assert q.tolist() == [1, 2, 3, 4, 5, 6] and np.isnan(g)
    with pytest.raises(LeaderMismatch, match=r"the leader has 7 arm joints .* the follower 6"):
        leader_joints([*NAMES, "joint7"], [0] * 7, NAMES)
    with pytest.raises(LeaderMismatch, match="sends 5 positions and no names, the follower has 6 joints"):
        leader_joints([], [0] * 5, NAMES)
    with pytest.raises(LeaderMismatch, match="not finite"):
        leader_joints([], [0, 0, float("nan"), 0, 0, 0], NAMES)


def test_no_sdk_leader_on_a_missing_can_bus_is_named():
    with pytest.raises(LeaderNotFound) as err:
        SdkLeader("can7", "yam", 6)
    text = str(err.value)
    assert "no leader found on CAN interface 'can7'" in text and "the I2RT SDK said" in text
    assert "ip link show can7" in text and "--leader-channel" in text


def test_the_sdk_leader_reads_the_sdks_simulated_teaching_handle_and_refuses_another_joint_count():
    leader = SdkLeader("can1", "yam", 6, sim=True)  # the SDK's own MuJoCo arm with the teaching handle
    try:
        q, g = leader.read()
        assert q.shape == (6,) and np.all(np.isfinite(q)) and np.isnan(g)  # a simulated handle has no trigger
        assert np.allclose(q, leader.robot.get_joint_pos()[:6])
    finally:
        leader.close()
    from i2rt.robots.get_robot import get_yam_robot
    from i2rt.robots.utils import GripperType

    seven = get_yam_robot(gripper_type=GripperType.LINEAR_4310, sim=True)  # 6 joints + gripper: not a leader of 6
    with pytest.raises(LeaderMismatch, match="has 7 joints, the follower 6"):
        SdkLeader("can1", "yam", 6, robot=seven)


def test_operator_commands_and_what_the_desk_refuses():
    assert parse_command("") == TeleopCommand("start")
    assert parse_command("f dropped the cube") == TeleopCommand("failure", None, "dropped the cube")
    assert parse_command("3 success clean", "topic") == TeleopCommand("success", 3, "clean", "topic")
    for bad, message in [("failure", "needs a reason"), ("jump", "write start, stop"), ("stop now", "takes no text")]:
        with pytest.raises(ValueError, match=message):
            parse_command(bad)
    with pytest.raises(ValueError, match="name the episode first"):
        parse_command("success", "topic")
    desk = EpisodeDesk()
    desk.idle(4)
    ok, text = desk.offer(parse_command("4 success", "topic"))
    assert (
        not ok and text == "refused: success for episode 4: no episode is running (the next one is 4; start it first)"
    )
    assert desk.offer(parse_command("start"))[0]
    desk.recording(4)
    ok, text = desk.offer(parse_command("7 failure dropped", "topic"))
    assert not ok and text == "refused: failure for episode 7: it is not running (episode 4 is)"
    assert not desk.offer(parse_command("start"))[0]
    ok, text = desk.offer(parse_command("s"))
    assert ok and text == "episode 4 marked success"
    assert not desk.offer(parse_command("d"))[0]  # one ending per episode


def test_an_output_folder_with_recordings_needs_continue(tmp_path):
    assert first_episode(tmp_path / "new", append=False) == 0
    (tmp_path / "episode_000000").mkdir()
    (tmp_path / "episode_000003").mkdir()
    with pytest.raises(ValueError, match=r"holds 2 recording\(s\) already .* add --continue"):
        first_episode(tmp_path, append=False)
    assert first_episode(tmp_path, append=True) == 4


def test_the_command_refuses_bad_input_before_anything_starts(tmp_path, capsys):
    from para_ros.commands import teleop

    base = ["--task", "pick", "--robot", "sim"]
    out = tmp_path / "rec"
    assert teleop.main([*base, "--out", str(out), "--leader", "i2rt", "--leader-channel", "can7"]) == 2
    assert "no leader found on CAN interface 'can7'" in capsys.readouterr().err and not out.exists()
    (out / "episode_000000").mkdir(parents=True)
    (out / "episode_000000" / "teleop.json").write_text(json.dumps({"mark": "success"}))
    assert teleop.main([*base, "--out", str(out)]) == 2
    assert "holds 1 recording(s) already" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["episode_000000"]  # nothing written, nothing overwritten
    assert json.loads((out / "episode_000000" / "teleop.json").read_text()) == {"mark": "success"}
    for argv, message in [
        (["--task", " ", "--out", str(tmp_path / "x")], "--task is needed"),
        ([*base, "--out", str(tmp_path / "x"), "--scripted-leader", "0", "--leader", "i2rt"], "--scripted-leader"),
        ([*base, "--out", str(tmp_path / "x"), "--jump", "0"], "jump_rad"),
        ([*base, "--out", str(tmp_path / "x"), "--node-param", "chunk_executor:nope:=1"], "no parameter 'nope'"),
    ]:
        assert teleop.main(argv) == 2, argv
        assert message in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("robot", ["sim", "i2rt", "topic"])
def test_the_session_runs_the_deploy_graphs_robot_side_with_one_executor_parameter_changed(robot):
    from para_ros.deploy import graph
    from para_ros.teleop.session import TeleopSettings, plan_robot_side

    plan, _ = plan_robot_side(TeleopSettings(robot=robot, task="pick", out="unused"))
    deploy = {spec.name: overrides for spec, overrides in graph.plan(graph.DeploySettings(robot=robot))}
    names = [spec.name for spec, _ in plan]
    assert "inference_node" not in names and names == [n for n in deploy if n != "inference_node"]
    executor = next(o for s, o in plan if s.name == "chunk_executor")
    expected = {k: v for k, v in deploy["chunk_executor"].items() if k not in graph.UNTRAINED_EXECUTOR_OVERRIDES}
    assert executor == {**expected, "chunk_min_lead_s": 0.0}  # never the untrained model's relaxed checks
    assert executor.get("auto_engage", False) == (robot == "sim")  # a real arm starts disengaged


def test_a_kept_episode_carries_its_calibration_and_a_discarded_one_leaves_nothing(tmp_path):
    import hashlib

    from para_ros.teleop.episodes import discard_episode, episode_metadata, write_episode

    calibration = tmp_path / "rig.yaml"
    calibration.write_text(
        "para_calibration: 1\ndate: '2026-12-03T04:00:00Z'\n"
        "board: {squares_x: 5, squares_y: 7, square_m: 0.03, marker_m: 0.022, dictionary: DICT_5X5_100}\n"
        "cameras:\n  scene_cam:\n    method: eye_to_hand\n    parent_frame: base\n"
        "    frame_id: scene_cam_optical_frame\n    xyz_m: [0.35, -0.47, 0.61]\n    quat_xyzw: [1.0, 0.0, 0.0, 0.0]\n"
        "    board_on: gripper\n    board_xyz_m: [0.1, 0.0, 0.05]\n    board_quat_xyzw: [0.0, 0.0, 0.0, 1.0]\n"
    )
    out = tmp_path / "rec"
    kept, dropped, older = out / "episode_000001", out / "episode_000002", out / "episode_000000"
    for d in (kept, dropped, older):
        d.mkdir(parents=True)
        (d / "metadata.yaml").write_text("bag")
    cmd = parse_command("f dropped the cube")
    meta = episode_metadata(1, "pick", cmd, "i2rt", "topic", str(calibration), "t", 3.21, {"/tf": 3}, {})
    write_episode(out, kept, meta, str(calibration))
    saved = json.loads((kept / "teleop.json").read_text())
    assert (saved["task"], saved["mark"], saved["reason"], saved["marked_by"]) == (
        "pick",
        "failure",
        "dropped the cube",
        "keyboard",
    )
    assert saved["calibration"]["sha256"] == hashlib.sha256(calibration.read_bytes()).hexdigest()
    assert (kept / "calibration.yaml").read_bytes() == calibration.read_bytes()  # para-bag extract takes it from there
    discard_episode(out, dropped, 2, "pick")
    assert not dropped.exists() and (older / "metadata.yaml").is_file() and (kept / "metadata.yaml").is_file()
    index = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert [(r["episode"], r["mark"]) for r in index] == [(1, "failure"), (2, "discarded")]
    assert episode_metadata(3, "pick", None, "sim", "topic", "", "t", 1.0, {}, {})["mark"] == "unmarked"


def test_export_lerobot_takes_the_task_from_teleop_json_only_when_it_is_one(tmp_path):
    from para_ros.commands.bag_lerobot_export import recorded_task

    a, b = tmp_path / "a", tmp_path / "b"
    for d, task in ((a, "pick"), (b, "place")):
        d.mkdir()
        (d / "teleop.json").write_text(json.dumps({"task": task}))
    assert recorded_task([a]) == "pick"
    with pytest.raises(ValueError, match=r"--task is needed: .*\['pick', 'place'\]"):
        recorded_task([a, b])
    with pytest.raises(ValueError, match="has no teleop.json"):
        recorded_task([tmp_path])
