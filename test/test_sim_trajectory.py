"""JointTrajectory following semantics (ROS-free): validation, clamping, timing, interpolation by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from para_ros.sim.joint_trajectory import TrajectoryFollower, TrajectoryRejected, plan_trajectory

NAMES = ("joint1", "joint2", "joint3", "joint4", "joint5", "joint6", "gripper")
LO = np.array([-2.6, 0.0, 0.0, -1.7, -1.57, -2.09, 0.0])
HI = np.array([3.14, 3.66, 3.14, 1.57, 1.57, 2.09, 1.0])
S = 1_000_000_000  # ns per second


def plan(names, times, positions, setpoint=None, now_ns=10 * S, start_ns=0):
    setpoint = np.zeros(7) + 0.5 if setpoint is None else np.asarray(setpoint, float)
    return plan_trajectory(
        names,
        times,
        positions,
        command_joint_names=NAMES,
        q_lower=LO,
        q_upper=HI,
        setpoint_now=setpoint,
        now_ns=now_ns,
        start_ns=start_ns,
    )


@pytest.mark.parametrize(
    "names, times, positions, match",
    [
        (["joint1", "elbow"], [1.0], [[0.0, 0.0]], "unknown joint"),
        ([], [1.0], [[]], "joint_names is empty"),
        (["joint1", "joint1"], [1.0], [[0.0, 0.0]], "duplicates"),
        (["joint1", "joint2"], [1.0], [[0.0]], "1 positions for 2"),
        (["joint1"], [1.0], [[math.nan]], "finite"),
        (["joint1"], [1.0], [[math.inf]], "finite"),
        (["joint1"], [1.0, 0.5], [[0.0], [0.1]], "strictly increasing"),
        (["joint1"], [-1.0], [[0.0]], ">= 0"),
        (["joint1"], [1.0, 2.0], [[0.0]], "2 times"),
    ],
)
def test_rejections(names, times, positions, match):
    with pytest.raises(TrajectoryRejected, match=match):
        plan(names, times, positions)


def test_clamped_with_warning_and_empty_is_hold():
    p, warnings = plan(["joint2", "gripper"], [1.0], [[-0.3, 1.7]])
    assert np.allclose(p.positions[-1], [0.0, 1.0])
    assert len(warnings) == 2 and "'joint2' position -0.3000 is outside" in warnings[0]
    assert plan(["joint1"], [], []) == (None, [])


def test_linear_interpolation_from_setpoint_and_partial_joints():
    setpoint = np.arange(7) * 0.1  # (7,)
    follower = TrajectoryFollower(setpoint)
    now = 10 * S
    p, _ = plan(["joint3", "joint1"], [1.0, 3.0], [[1.0, -1.0], [2.0, 1.0]], setpoint=setpoint, now_ns=now)
    follower.replace(p, now)
    # By hand: joint3 0.2 -> 1.0 over [10 s, 11 s], -> 2.0 over [11 s, 13 s]; joint1 0.0 -> -1.0 -> 1.0.
    q = follower.setpoint_at(now + S // 2)
    assert q[2] == pytest.approx(0.6) and q[0] == pytest.approx(-0.5)
    q = follower.setpoint_at(now + 2 * S)
    assert q[2] == pytest.approx(1.5) and q[0] == pytest.approx(0.0)
    assert np.allclose(np.delete(q, [0, 2]), np.delete(setpoint, [0, 2]))  # untouched joints hold
    q = follower.setpoint_at(now + 100 * S)
    assert q[2] == pytest.approx(2.0) and q[0] == pytest.approx(1.0) and follower.is_done(now + 100 * S)
    # A new plan starts from where the old one is now; an empty one holds there.
    follower.replace(None, now + 2 * S)
    assert np.allclose(follower.setpoint_at(now + 50 * S)[[0, 2]], [0.0, 1.5])


def test_future_start_holds_then_moves_and_past_points_dropped():
    now = 10 * S
    p, _ = plan(["joint1"], [1.0], [[1.0]], setpoint=np.zeros(7), now_ns=now, start_ns=now + 2 * S)
    f = TrajectoryFollower(np.zeros(7))
    f.replace(p, now)
    assert f.setpoint_at(now + S)[0] == 0.0  # before header.stamp: hold
    assert f.setpoint_at(now + 2 * S + S // 2)[0] == pytest.approx(0.5)
    # header.stamp 1.5 s ago: the point at +1 s is past, the one at +2 s (0.5 s from now) is kept.
    p, _ = plan(["joint1"], [1.0, 2.0], [[1.0], [2.0]], setpoint=np.zeros(7), now_ns=now, start_ns=now - 3 * S // 2)
    assert p.times_ns.tolist() == [now, now + S // 2] and p.positions[:, 0].tolist() == [0.0, 2.0]


def test_stamp_zero_starts_on_receipt_and_a_stamped_trajectory_ending_in_the_past_is_rejected():
    """As ros2_control's joint_trajectory_controller: stamp 0 = start now; a non-zero stamp whose last point is
    already past on receipt is refused whole (the arm keeps its plan), however short the delay."""
    now = 10 * S
    # The executor's command: stamp 0, one point 50 ms ahead. Received 0.3 s after its tick, it still moves the arm,
    # reaching the point 50 ms after receipt.
    p, warnings = plan(["joint1"], [0.05], [[1.0]], setpoint=np.zeros(7), now_ns=now, start_ns=0)
    assert warnings == [] and p.times_ns.tolist() == [now, now + S // 20]
    f = TrajectoryFollower(np.zeros(7))
    f.replace(p, now)
    assert f.setpoint_at(now + S // 40)[0] == pytest.approx(0.5)
    assert f.setpoint_at(now + S)[0] == 1.0
    # The same command stamped with its tick time (0.3 s ago): it ended 0.25 s ago -> rejected, naming the fix.
    with pytest.raises(TrajectoryRejected, match=r"ends in the past.*0\.250000 s before now.*stamp it 0"):
        plan(["joint1"], [0.05], [[1.0]], now_ns=now, start_ns=now - 3 * S // 10)
    # Ending 1 ns ago is already too late; ending exactly now is accepted (go there now).
    with pytest.raises(TrajectoryRejected, match="ends in the past"):
        plan(["joint1"], [0.05], [[1.0]], now_ns=now, start_ns=now - S // 20 - 1)
    p, _ = plan(["joint1"], [0.05], [[1.0]], setpoint=np.zeros(7), now_ns=now, start_ns=now - S // 20)
    assert p.times_ns.tolist() == [now, now] and p.positions[-1, 0] == 1.0


def test_point_due_now_is_go_now_without_warning():
    now = 10 * S
    p, warnings = plan(["joint1"], [0.0], [[1.0]], setpoint=np.zeros(7), now_ns=now)
    assert warnings == [] and p.times_ns.tolist() == [now, now]
    f = TrajectoryFollower(np.zeros(7))
    f.replace(p, now)
    assert f.setpoint_at(now)[0] == 1.0
