"""ROS-free unit tests of the chunk executor's pieces against hand-computed numbers and scipy."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from arm_rigs import ARM_NAMES, TOP_DOWN_R, load_rig
from scipy.spatial.transform import Rotation

from para_ros.execution.chunk import Chunk, ChunkChecks, ChunkRejected, trim_past_steps, validate_chunk
from para_ros.execution.control_loop import FixedRateLoop
from para_ros.execution.interpolation import sample_chunk
from para_ros.execution.safety import SafetyFilter, check_command
from para_ros.execution.timeline import BlendConfig, Timeline, ensemble_weights
from para_ros.robot.yam import YamLimits, load_yam_config

QI = np.array([0.0, 0.0, 0.0, 1.0])


def make_chunk(stamp, t, pos, quats=None, grip=None):
    t = np.asarray(t, float)
    n = len(t)
    pos = np.asarray(pos, float).reshape(n, 3)
    quats = np.tile(QI, (n, 1)) if quats is None else np.asarray(quats, float)
    grip = np.full(n, 0.5) if grip is None else np.asarray(grip, float)
    return Chunk(stamp, t, pos, quats, grip, np.ones(n), "base", "grasp_site", "m")


# ---- interpolation ---------------------------------------------------------------------------------------------------


def test_sample_chunk_by_hand():
    # steps due at 10.0, 10.1, 10.2 s; at 10.15 s we are halfway between steps 1 and 2.
    qz90 = Rotation.from_euler("z", 90, degrees=True).as_quat()
    c = make_chunk(10.0, [0.0, 0.1, 0.2], [[0, 0, 0], [0.1, 0, 0], [0.1, 0.2, 0]], [QI, QI, qz90], [1.0, 0.0, 0.5])
    s = sample_chunk(c, 10.15)
    np.testing.assert_allclose(s.position_m, [0.1, 0.1, 0.0], atol=1e-12)
    assert math.isclose(s.gripper, 0.25, abs_tol=1e-12)
    assert math.isclose(Rotation.from_quat(s.quat_xyzw).as_euler("zyx", degrees=True)[0], 45.0, abs_tol=1e-9)
    assert sample_chunk(c, 9.99) is None and sample_chunk(c, 10.21) is None
    np.testing.assert_allclose(sample_chunk(c, 10.2).position_m, [0.1, 0.2, 0.0])


def test_trim_past_steps_keeps_one_anchor():
    c = make_chunk(0.0, [0.0, 0.1, 0.2, 0.3], np.arange(12).reshape(4, 3))
    trimmed = trim_past_steps(c, 0.15)  # steps 0 and 1 are past; step 1 is kept as the anchor
    np.testing.assert_allclose(trimmed.time_from_stamp_s, [0.1, 0.2, 0.3])
    assert trim_past_steps(c, 0.31) is None
    assert trim_past_steps(c, -1.0) is c


# ---- timeline and blending -------------------------------------------------------------------------------------------


def test_ensemble_weights_by_hand():
    w = ensemble_weights(3, 0.5)
    raw = np.array([1.0, math.exp(-0.5), math.exp(-1.0)])
    np.testing.assert_allclose(w, raw / raw.sum(), rtol=1e-12)
    np.testing.assert_allclose(ensemble_weights(4, 0.0), 0.25)


def test_timeline_latest_and_ensemble_by_hand():
    a = make_chunk(0.0, [0.0, 1.0], [[0.0, 0, 0], [0.0, 0, 0]], grip=[0.0, 0.0])
    b = make_chunk(0.2, [0.0, 1.0], [[1.0, 0, 0], [1.0, 0, 0]], grip=[1.0, 1.0])
    qb = Rotation.from_euler("x", 40, degrees=True).as_quat()
    b.quats_xyzw[:] = qb
    latest = Timeline(BlendConfig("latest"))
    latest.add(b, 0.0)
    latest.add(a, 0.0)  # arrives later but is older: b still wins where both cover
    s, n = latest.sample(0.5)
    assert n == 2 and math.isclose(s.position_m[0], 1.0)
    s, n = latest.sample(0.1)  # only a covers 0.1 (b starts at 0.2)
    assert n == 1 and math.isclose(s.position_m[0], 0.0)

    k = 0.7
    ens = Timeline(BlendConfig("ensemble", ensemble_k=k))
    ens.add(a, 0.0)
    ens.add(b, 0.0)
    s, n = ens.sample(0.5)
    w_a, w_b = 1.0, math.exp(-k)  # a is the oldest (j = 0)
    assert n == 2
    assert math.isclose(s.position_m[0], w_b / (w_a + w_b), rel_tol=1e-12)
    assert math.isclose(s.gripper, w_b / (w_a + w_b), rel_tol=1e-12)
    ref = Rotation.concatenate([Rotation.identity(), Rotation.from_quat(qb)]).mean(weights=[w_a, w_b])
    assert (Rotation.from_quat(s.quat_xyzw).inv() * ref).magnitude() < 1e-9


def test_timeline_prune_and_cap():
    tl = Timeline(BlendConfig("latest", max_chunks=2))
    for i in range(4):
        tl.add(make_chunk(float(i), [0.0, 0.5], np.zeros((2, 3))), 0.0)
    assert len(tl) == 2 and [c.stamp_s for c in tl.chunks] == [2.0, 3.0]
    tl.prune(2.6)  # chunk 2 ends at 2.5
    assert [c.stamp_s for c in tl.chunks] == [3.0]


def test_timeline_newest_latency_follows_the_newest_stamp_not_the_last_arrival():
    tl = Timeline(BlendConfig("latest"))
    assert tl.newest_latency_s() is None
    tl.add(make_chunk(1.0, [0.0, 0.5], np.zeros((2, 3))), 1.05)
    assert tl.newest_latency_s() == pytest.approx(0.05)
    tl.add(make_chunk(0.9, [0.0, 0.5], np.zeros((2, 3))), 1.2)  # an older frame's chunk, late: not the newest
    assert tl.newest_latency_s() == pytest.approx(0.05)
    tl.add(make_chunk(1.1, [0.0, 0.5], np.zeros((2, 3))), 1.4)
    assert tl.newest_latency_s() == pytest.approx(0.3)
    tl.clear()
    assert tl.newest_latency_s() is None


# ---- chunk validation ------------------------------------------------------------------------------------------------

CHECKS = ChunkChecks(workspace_min_m=[0.1, -0.4, 0.01], workspace_max_m=[0.6, 0.4, 0.5])


def good(stamp=100.0):
    return make_chunk(stamp, [0.0, 0.1, 0.2], [[0.3, 0, 0.1], [0.31, 0, 0.1], [0.32, 0, 0.1]])


@pytest.mark.parametrize(
    "mutate, words",
    [
        (lambda c: setattr(c, "positions_m", np.array([[0.3, 0, 0.1], [np.nan, 0, 0.1], [0.3, 0, 0.1]])), "non-finite"),
        (lambda c: c.quats_xyzw.__setitem__((1, 0), np.inf), "non-finite"),
        (lambda c: setattr(c, "gripper", np.array([0.5, 0.5])), "mismatched array lengths"),
        (lambda c: setattr(c, "time_from_stamp_s", np.array([0.0, 0.2, 0.1])), "strictly increasing"),
        (lambda c: setattr(c, "time_from_stamp_s", np.array([-0.1, 0.1, 0.2])), "negative"),
        (lambda c: setattr(c, "quats_xyzw", np.zeros((3, 4))), "unit quaternion"),
        (lambda c: setattr(c, "frame_id", "world"), "frame_id"),
        (lambda c: setattr(c, "tool_frame_id", "tcp_site"), "tool_frame_id"),
        (lambda c: setattr(c, "gripper", np.array([0.5, 2.0, 0.5])), "gripper[1]"),
        (lambda c: setattr(c, "stamp_s", 95.0), "old"),
        (lambda c: setattr(c, "stamp_s", 105.0), "future"),
    ],
)
def test_validate_rejects_bad_chunks(mutate, words):
    c = good()
    mutate(c)
    with pytest.raises(ChunkRejected, match=words.replace("[", r"\[")):
        validate_chunk(c, 100.05, CHECKS)


def test_validate_empty_past_and_workspace_modes():
    empty = make_chunk(100.0, [], np.zeros((0, 3)))
    with pytest.raises(ChunkRejected, match="empty"):
        validate_chunk(empty, 100.0, CHECKS)
    with pytest.raises(ChunkRejected, match="past"):
        validate_chunk(good(99.5), 100.0, CHECKS)
    out = good()
    out.positions_m[:, 2] = -0.05
    clean, warnings = validate_chunk(out, 100.0, CHECKS)
    assert np.all(clean.positions_m[:, 2] == 0.01) and "outside the workspace" in warnings[0]
    with pytest.raises(ChunkRejected, match="outside the workspace"):
        validate_chunk(
            out,
            100.0,
            ChunkChecks(out_of_workspace="reject", workspace_min_m=[0.1, -0.4, 0.01], workspace_max_m=[0.6, 0.4, 0.5]),
        )
    q = good()
    q.quats_xyzw[:] = [0, 0, 0, 1.01]  # within tolerance: normalised
    clean, _ = validate_chunk(q, 100.0, CHECKS)
    np.testing.assert_allclose(clean.quats_xyzw, np.tile(QI, (3, 1)))


def test_validate_truncates_before_the_first_implausibly_fast_step_or_rejects():
    # 0.01 m per 0.1 s (0.1 m/s), then 0.58 m in 0.1 s (5.8 m/s > 1.0) at step 2 -> 3, then slow again.
    t = [0.0, 0.1, 0.2, 0.3, 0.4]
    pos = [[0.3, 0, 0.1], [0.31, 0, 0.1], [0.32, 0, 0.1], [0.9, 0, 0.1], [0.5, 0, 0.1]]
    grip = [0.1, 0.2, 0.3, 0.4, 0.5]
    clean, warnings = validate_chunk(make_chunk(100.0, t, pos, grip=grip), 100.05, CHECKS)
    np.testing.assert_array_equal(clean.time_from_stamp_s, t[:3])
    np.testing.assert_array_equal(clean.positions_m, pos[:3])
    np.testing.assert_array_equal(clean.gripper, grip[:3])
    assert clean.quats_xyzw.shape == (3, 4) and clean.confidence.shape == (3,)
    assert warnings == [
        "truncated to steps 0..2 of 5: steps 2->3 move 0.580 m in 0.100 s = 5.80 m/s > max_implied_speed_m_s=1.0"
    ]
    reject = ChunkChecks(
        implausible_speed="reject", workspace_min_m=CHECKS.workspace_min_m, workspace_max_m=CHECKS.workspace_max_m
    )
    with pytest.raises(ChunkRejected, match=r"steps 2->3 move 0.580 m"):
        validate_chunk(make_chunk(100.0, t, pos), 100.05, reject)
    # A jump right after step 0 would leave one step, no motion that checks out (random garbage jumps at every
    # step): rejected. The limit itself is not a jump (1.0 m/s exactly passes).
    with pytest.raises(ChunkRejected, match=r"steps 0->1 .* \(right after step 0"):
        validate_chunk(
            make_chunk(100.0, [0.0, 0.1, 0.2], [[0.3, 0, 0.1], [0.5, 0, 0.1], [0.51, 0, 0.1]]), 100.0, CHECKS
        )
    at_limit, warnings = validate_chunk(
        make_chunk(100.0, [0.0, 0.5], [[0.3, -0.2, 0.1], [0.3, 0.3, 0.1]]), 100.0, CHECKS
    )
    assert at_limit.n_steps == 2 and warnings == []
    # What is kept is in the past (steps due 100.0 .. 100.2, now 100.25) while the jumped steps are not: rejected.
    with pytest.raises(ChunkRejected, match="every kept step is already in the past"):
        validate_chunk(make_chunk(100.0, t, pos), 100.25, CHECKS)
    # Garbage beyond the jump still rejects the whole chunk: the publisher is broken, not just the argmax.
    quats = np.tile(QI, (5, 1))
    quats[4] = 0.0
    with pytest.raises(ChunkRejected, match=r"poses\[4\].orientation"):
        validate_chunk(make_chunk(100.0, t, pos, quats=quats), 100.05, CHECKS)
    with pytest.raises(ValueError, match="implausible_speed"):
        ChunkChecks(implausible_speed="clip")


# ---- limits -----------------------------------------------------------------------------------------------------------


JOINT_COUNTS = (5, 6, 7)  # the filter is arm-generic: a 5-joint arm, the YAM's 6, a 7-joint arm


def linear_limits(n=6, **kw):
    base = dict(
        joint_lower_rad=[-1] * n,
        joint_upper_rad=[1] * n,
        max_joint_speed_rad_s=[1, 2] + [1] * (n - 2),
        max_ee_speed_m_s=10.0,
        workspace_min_m=[-1, -1, -1],
        workspace_max_m=[1, 1, 0.5],
        gripper_min=0.0,
        gripper_max=1.0,
        max_gripper_speed_per_s=2.0,
    )
    base.update(kw)
    return YamLimits(**base)


def fk_first3(q):  # a stand-in FK with easy numbers: the tool is at (q0, q1, q2) metres
    return np.asarray(q, float)[:3].copy()


def joints(n, *first):
    """(n,) joints: ``first`` then zeros."""
    return np.array(list(first) + [0.0] * (n - len(first)))


@pytest.mark.parametrize("n", JOINT_COUNTS)
def test_safety_filter_joint_speed_scaling_by_hand(n):
    f = SafetyFilter(linear_limits(n), fk_first3)
    q, g, rep = f.apply(joints(n, 0.5, 0.05), 0.5, np.zeros(n), 0.5, 0.01)
    # joint 0 wants 0.5 rad in 0.01 s at 1 rad/s max -> 0.01; the whole step is scaled by 0.02 (direction kept)
    np.testing.assert_allclose(q, joints(n, 0.01, 0.001), atol=1e-15)
    assert rep.joint_speed_limited and not rep.joint_clipped


@pytest.mark.parametrize("n", JOINT_COUNTS)
def test_safety_filter_joint_clip_workspace_and_gripper(n):
    f = SafetyFilter(linear_limits(n, max_joint_speed_rad_s=100.0), fk_first3, bisection_steps=30)
    q, _, rep = f.apply(joints(n, 2.0), 0.5, joints(n, 0.9), 0.5, 0.01)
    assert q[0] == 1.0 and rep.joint_clipped
    # tool z limited to 0.5 m: from z = 0.4 towards 0.9 stops at the box face
    q, _, rep = f.apply(joints(n, 0, 0, 0.9), 0.5, joints(n, 0, 0, 0.4), 0.5, 0.01)
    assert rep.ee_limited and 0.5 - 1e-6 <= q[2] <= 0.5
    _, g, rep = f.apply(np.zeros(n), 1.5, np.zeros(n), 0.5, 0.01)
    assert math.isclose(g, 0.52) and rep.gripper_limited  # 2 /s * 0.01 s


@pytest.mark.parametrize("n", JOINT_COUNTS)
def test_safety_filter_ee_speed_by_hand(n):
    f = SafetyFilter(linear_limits(n, max_joint_speed_rad_s=100.0, max_ee_speed_m_s=0.5), fk_first3, bisection_steps=40)
    q, _, rep = f.apply(joints(n, 0.03, 0.04), 0.5, np.zeros(n), 0.5, 0.01)
    # 5 cm wanted, 0.5 m/s * 0.01 s = 5 mm allowed: 1/10 of the step
    np.testing.assert_allclose(q[:2], [0.003, 0.004], atol=1e-9)
    assert np.linalg.norm(q[:3]) <= 0.005


@pytest.mark.parametrize("n", JOINT_COUNTS)
def test_check_command_names_every_violation(n):
    lim = linear_limits(n, max_ee_speed_m_s=0.5)
    assert check_command(lim, np.zeros(n), 0.5, np.zeros(n), 0.5, 0.01, fk_first3) == []
    problems = check_command(lim, joints(n, 1.5, 0, 0.8), 1.2, np.zeros(n), 0.5, 0.01, fk_first3)
    text = " ".join(problems)
    for words in (
        "joint position",
        "joint speed",
        "outside the workspace",
        "tool speed",
        "gripper 1.2",
        "gripper speed",
    ):
        assert words in text
    assert "non-finite" in check_command(lim, np.full(n, np.nan), 0.5, np.zeros(n), 0.5, 0.01, fk_first3)[0]
    # a command of another arm's joint count is refused, not truncated or padded
    assert "mis-shaped" in check_command(lim, np.zeros(n + 1), 0.5, np.zeros(n), 0.5, 0.01, fk_first3)[0]
    with pytest.raises(ValueError, match=f"an arm of {n} joints"):
        SafetyFilter(lim, fk_first3).apply(np.zeros(n - 1), 0.5, np.zeros(n), 0.5, 0.01)


def test_yam_config_loads_and_validates(tmp_path):
    cfg = load_yam_config()
    assert cfg.model.joint_names == tuple(f"joint{i}" for i in range(1, 7))
    assert cfg.limits.in_workspace(np.array([0.3, 0.0, 0.1]))
    with pytest.raises(ValueError, match="joint_lower_rad"):
        linear_limits(joint_lower_rad=[2] * 6)
    with pytest.raises(ValueError, match="max_ee_speed_m_s"):
        linear_limits(max_ee_speed_m_s=-1)
    bad = tmp_path / "yam.yaml"
    bad.write_text("limits:\n  joint_lower_rad: [0]\n")
    with pytest.raises(ValueError, match=str(bad.name)):
        load_yam_config(bad)


# ---- IK, smoother, loop, core -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kin():
    from para_ros.robot.yam_ik import YamKinematics

    return YamKinematics()


def test_ik_round_trip_against_sdk_fk(kin):
    import os

    from i2rt.robots.kinematics import Kinematics
    from i2rt.robots.utils import ArmType, GripperType, combine_arm_and_gripper_xml

    xml = combine_arm_and_gripper_xml(ArmType.YAM, GripperType.LINEAR_4310)
    ref = Kinematics(xml, "grasp_site")
    os.remove(xml)
    rng = np.random.default_rng(3)
    q_seed = np.array([0.0, 1.6, 1.3, -1.2, 0.0, 0.0])
    for _ in range(10):
        q_true = q_seed + rng.uniform(-0.1, 0.1, 6)
        T = ref.fk(np.r_[q_true, 0, 0])
        res = kin.ik(T, q_seed)
        assert res.ok
        T_ik = ref.fk(np.r_[res.q_rad, 0, 0])
        assert np.linalg.norm(T_ik[:3, 3] - T[:3, 3]) < 5e-4
    far = np.eye(4)
    far[:3, 3] = [1.5, 0, 0.1]
    assert not kin.ik(far, q_seed).ok


@pytest.mark.parametrize("n", JOINT_COUNTS)
def test_ruckig_smoother_respects_jerk_and_converges(n):
    from para_ros.execution.smoothing import JerkLimitedSmoother, JerkLimits

    dt = 0.01
    lim = JerkLimits(1.0, 5.0, 50.0)
    sm = JerkLimitedSmoother(lim, dt, n_joints=n)
    sm.reset(np.zeros(n))
    target = np.array([0.3, -0.2, 0.1, 0, 0, 0.05, -0.1])[:n]
    xs = np.array([sm.step(target) for _ in range(300)])
    np.testing.assert_allclose(xs[-1], target, atol=1e-6)
    v = np.diff(xs, axis=0) / dt
    a = np.diff(v, axis=0) / dt
    j = np.diff(a, axis=0) / dt
    assert np.abs(v).max() <= 1.0 * 1.01 and np.abs(a).max() <= 5.0 * 1.01 and np.abs(j).max() <= 50.0 * 1.01
    assert xs.shape == (300, n)
    with pytest.raises(ValueError, match=f"JerkLimits.max_velocity has 2 values for an arm of {n} joints"):
        JerkLimitedSmoother(JerkLimits([1.0, 1.0], 5.0, 50.0), dt, n_joints=n)


def test_fixed_rate_loop_runs_ticks_and_survives_errors():
    calls = []

    def tick():
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("boom")

    errors = []
    loop = FixedRateLoop(200.0, tick, on_error=errors.append)
    loop.start()
    deadline = time.monotonic() + 5.0
    while len(calls) < 10 and time.monotonic() < deadline:
        time.sleep(0.01)
    loop.stop()
    assert len(calls) >= 10 and loop.errors == 1 and isinstance(errors[0], RuntimeError)
    stats = loop.stats()
    assert {"start_error_median_s", "compute_p99_s", "overruns"} <= set(stats)
    with pytest.raises(ValueError, match="rate_hz"):
        FixedRateLoop(0.0, tick)


def test_fixed_rate_loop_ticks_on_the_period_grid_in_simulated_time():
    """The control rate without wall-clock scheduling: on a simulated clock every tick starts at t0 + k * period;
    a tick that overruns makes the loop skip (and count) the deadlines it missed instead of bursting to catch up."""
    clock = {"t": 100.0}
    starts = []
    compute_s = {3: 0.025}  # tick 3 takes 2.5 periods; the others 2 ms

    def tick():
        starts.append(clock["t"])
        clock["t"] += compute_s.get(len(starts) - 1, 0.002)

    def wait(timeout_s):
        clock["t"] += timeout_s

    loop = FixedRateLoop(100.0, tick, clock=lambda: clock["t"], wait=wait)
    loop.run(max_ticks=8)
    # By hand: 100.00 .01 .02 .03 (ends at .055: the deadlines .04 and .05 are missed) .06 .07 .08 .09
    np.testing.assert_allclose(starts, [100.0, 100.01, 100.02, 100.03, 100.06, 100.07, 100.08, 100.09], atol=1e-9)
    assert loop.ticks == 8 and loop.overruns == 2


OFFLINE = dict(start_engaged=True, joint_state_timeout_s=None, chunk_min_lead_s=0.0)  # measured once, ticked on


@pytest.fixture(scope="module", params=ARM_NAMES)
def rig(request):
    """Each arm the core tests run on (test/arm_rigs.py): the YAM and a 5-joint arm."""
    return load_rig(request.param)


def _core(rig, **kw):
    from para_ros.execution.executor_core import ExecutorConfig, ExecutorCore

    arm = rig.arm
    checks = ChunkChecks(
        tool_frames=(arm.model.tool_site,),
        workspace_min_m=arm.limits.workspace_min_m,
        workspace_max_m=arm.limits.workspace_max_m,
    )
    return ExecutorCore(ExecutorConfig(**{**OFFLINE, "checks": checks, **kw}), arm, kinematics=rig.kin)


def _top_down_chunk(rig, stamp, p_start, v, n=20, step=0.1):
    t = np.arange(n) * step
    pos = np.asarray(p_start) + np.outer(t, v)
    c = make_chunk(stamp, t, pos, np.tile(Rotation.from_matrix(TOP_DOWN_R).as_quat(), (n, 1)))
    c.tool_frame_id = rig.arm.model.tool_site
    return c


def test_core_waits_for_state_tracks_stops_and_goes_stale(rig):
    core = _core(rig, stale_timeout_s=0.3)
    assert core.tick(0.0) is None  # no joint state yet
    q0 = rig.top_down_q([0.3, 0, 0.1])
    core.set_measured_joints(q0, 0.5)
    cmd = core.tick(0.0)
    np.testing.assert_array_equal(cmd.q_rad, q0)
    ok, _ = core.add_chunk(_top_down_chunk(rig, 0.0, [0.3, 0, 0.1], [0.05, 0, 0]), 0.0)
    assert ok
    for k in range(1, 20):
        cmd = core.tick(k * 0.01)
    assert core.status.activity == "tracking"
    p_ref = np.array([0.3, 0, 0.1]) + (19 * 0.01 + core.config.command_lookahead_s) * np.array([0.05, 0, 0])
    assert np.linalg.norm(cmd.T_base_tool[:3, 3] - p_ref) < 1e-3
    core.stop()
    held = core.tick(0.2)
    np.testing.assert_array_equal(held.q_rad, cmd.q_rad)
    assert core.add_chunk(_top_down_chunk(rig, 0.2, [0.3, 0, 0.1], [0.05, 0, 0]), 0.2)[0] is False
    core.resume()
    core.add_chunk(_top_down_chunk(rig, 0.25, held.T_base_tool[:3, 3], [0, 0.05, 0]), 0.25)
    moving = core.tick(0.3)
    assert np.any(moving.q_rad != held.q_rad)
    # stale: last chunk accepted at 0.25 s, timeout 0.3 s -> from the first tick after 0.55 s, hold
    last = None
    for k in range(31, 60):
        c = core.tick(k * 0.01)
        if k * 0.01 > 0.55 + 1e-9:
            if last is None:
                last = c.q_rad
            np.testing.assert_array_equal(c.q_rad, last)
    assert core.status.activity == "hold_stale"


def test_core_first_command_from_a_measured_state_past_a_limit_is_inside_the_range(rig):
    """The arm measured 1.2e-4 rad past joint 4's lower limit (a simulator under load let it drift there): the first
    command is the measured joints clamped into the range, not the measured joints."""
    core = _core(rig)
    lo = core.limits.joint_lower_rad
    q = rig.top_down_q([0.3, 0, 0.1])
    q[3] = lo[3] - 1.2e-4
    core.set_measured_joints(q, 0.5)
    cmd = core.tick(0.0)
    assert cmd.q_rad[3] == lo[3] and np.all(cmd.q_rad >= lo) and np.all(cmd.q_rad <= core.limits.joint_upper_rad)
    np.testing.assert_array_equal(np.delete(cmd.q_rad, 3), np.delete(q, 3))


def test_core_chunk_min_lead_grows_the_lookahead_by_what_the_newest_chunk_came_early(rig):
    """A chunk moving +x at 0.05 m/s from (0.3, 0, 0.1), stamped 10.0 s, accepted at 10.05 s (latency 0.05 s),
    lookahead 0.05 s. Without a lead a tick at t targets the pose due at t + 0.05; with chunk_min_lead_s 0.25 at
    t + max(0.05, 0.25 - 0.05) = t + 0.20, at every tick while that chunk is the newest (time runs on, no stop-and-go).
    A chunk that came 0.3 s after its frame leaves the lookahead at 0.05. Catches a lead counted from the tick, from
    the oldest chunk, or pinned to stamp + lead."""
    q0 = rig.top_down_q([0.3, 0, 0.1])

    def sample_times(lead, accepted_s):
        core = _core(rig, chunk_min_lead_s=lead)
        core.set_measured_joints(q0, 0.5)
        core.tick(9.0)
        old = _top_down_chunk(rig, 8.5, [0.3, 0.05, 0.1], [0.0, 0.0, 0.0], n=40, step=0.2)  # older, came 0.5 s late
        assert core.add_chunk(old, 9.0)[0]
        new = _top_down_chunk(rig, 10.0, [0.3, 0, 0.1], [0.05, 0, 0], n=20, step=0.2)
        assert core.add_chunk(new, accepted_s)[0]
        with core._lock:
            times = [core._sample_time_s(t) for t in (accepted_s, accepted_s + 0.05, 10.5)]
            sampled = core.timeline.sample(times[0])[0].position_m
        np.testing.assert_allclose(sampled, [0.3 + (times[0] - 10.0) * 0.05, 0, 0.1], atol=1e-12)
        # the command goes out to be reached at the time it was taken for (a JointTrajectory's time_from_start)
        assert core.tick(accepted_s).target_time_s == pytest.approx(times[0])
        return times

    assert sample_times(0.0, 10.05) == pytest.approx([10.10, 10.15, 10.55])
    assert sample_times(0.25, 10.05) == pytest.approx([10.25, 10.30, 10.70])
    assert sample_times(0.25, 10.30) == pytest.approx([10.35, 10.40, 10.55])
    with pytest.raises(ValueError, match="chunk_min_lead_s"):
        _core(rig, chunk_min_lead_s=-0.1)


@pytest.mark.parametrize(
    "mode, taken_while_following, taken_when_idle",
    [("truncate_when_idle", False, True), ("truncate", True, True), ("reject", False, False)],
)
def test_core_implausibly_fast_chunks_by_mode(rig, mode, taken_while_following, taken_when_idle):
    q0 = rig.top_down_q([0.3, 0, 0.1])

    def jumping(stamp, p_start):  # 0.05 m/s in x over 1 s, but 0.25 m sideways in 0.1 s at steps 5 -> 6
        c = _top_down_chunk(rig, stamp, p_start, [0.05, 0, 0], n=11)
        c.positions_m[6:, 1] += 0.25
        return c

    core = _core(rig, stale_timeout_s=5.0)
    core.config.checks.implausible_speed = mode
    core.set_measured_joints(q0, 0.0)
    # While the arm follows a good chunk (0.3 -> 0.35 m in x over 1 s), a jumping chunk arrives.
    assert core.add_chunk(_top_down_chunk(rig, 0.0, [0.3, 0, 0.1], [0.05, 0, 0], n=11), 0.0)[0]
    for k in range(30):
        core.tick(k * 0.01)
    ok, text = core.add_chunk(jumping(0.3, [0.325, 0, 0.1]), 0.3)  # 1 cm ahead of the good chunk's x(0.3)
    assert ok is taken_while_following and "steps 5->6" in text
    assert ("still follows an earlier chunk" in text) is (mode == "truncate_when_idle")
    tool = np.array([core.tick(k * 0.01).T_base_tool[:3, 3] for k in range(30, 200)])
    assert np.abs(tool[:, 1]).max() < 1e-3  # never towards the jumped-to steps
    # At t = 0.6 s (index 30) the arm follows the truncated chunk (kept steps due 0.3 .. 0.8 s) or the good one.
    t_target = 0.6 + core.config.command_lookahead_s
    x_expected = 0.325 + 0.05 * (t_target - 0.3) if taken_while_following else 0.3 + 0.05 * t_target
    assert tool[30, 0] == pytest.approx(x_expected, abs=1e-3)
    assert tool[-1, 0] == pytest.approx(0.35, abs=1e-3)  # then the good chunk's end (it outlasts the truncated one)
    # Now the arm holds (nothing left to follow): the same kind of chunk again.
    ok, text = core.add_chunk(jumping(2.0, tool[-1]), 2.0)
    assert ok is taken_when_idle
    end = np.array([core.tick(2.0 + k * 0.01).T_base_tool[:3, 3] for k in range(0, 150)])
    assert np.abs(end[:, 1]).max() < 1e-3
    assert end[-1, 0] == pytest.approx(tool[-1, 0] + (0.025 if taken_when_idle else 0.0), abs=1e-3)
    assert core.status.chunks_truncated == taken_while_following + taken_when_idle
    assert core.status.chunks_rejected == 2 - core.status.chunks_truncated


def test_core_a_stale_state_before_the_first_command_needs_no_new_chunk(rig):
    # use_sim_time start-up: the first joint state was measured before /clock arrived (t = 0), the first tick runs at
    # t = 1000 s. Nothing was ever commanded, so a fresh state alone restarts, holding at the measured joints.
    q0 = rig.seed_q_rad.copy()
    core = _core(rig, joint_state_timeout_s=0.2)
    core.set_measured_joints(q0, 0.5, measured_s=0.0)
    assert core.tick(1000.0) is None and core.status.joint_state_losses == 1
    q1 = q0 + 0.01
    core.set_measured_joints(q1, 0.5, measured_s=1000.01)
    cmd = core.tick(1000.02)
    assert cmd is not None
    np.testing.assert_allclose(cmd.q_rad, q1, atol=1e-12)
    # Once commands went out, a loss still needs a fresh state AND a new chunk (never resume an old plan).
    assert core.tick(1000.5) is None
    core.set_measured_joints(q1, 0.5, measured_s=1000.51)
    assert core.tick(1000.52) is None and core.status.activity == "waiting_for_chunk"


def test_core_unreachable_hold_vs_best_effort(rig):
    q0 = rig.top_down_q([0.3, 0, 0.1])
    for mode, moves in (("hold", False), ("best_effort", True)):
        core = _core(rig, unreachable=mode)
        core.set_measured_joints(q0, 0.5)
        core.tick(0.0)
        core.add_chunk(_top_down_chunk(rig, 0.0, [0.59, 0.39, 0.02], [0, 0, 0]), 0.0)
        c = core.tick(0.01)
        assert core.status.ik_failures == 1
        assert bool(np.any(c.q_rad != q0)) is moves


def test_core_sends_nothing_once_the_joint_state_is_stale_and_resumes_only_with_fresh_state_and_a_new_chunk(rig):
    """Lost feedback on injected times: commands stop at the first tick more than joint_state_timeout_s after the
    last measurement, the timeline is dropped, chunks are ignored meanwhile; a fresh state alone sends nothing, a new
    chunk after it restarts from the freshly measured joints (not from the old target)."""
    core = _core(rig, stale_timeout_s=5.0, joint_state_timeout_s=0.2)
    q0 = rig.top_down_q([0.3, 0, 0.1])
    core.set_measured_joints(q0, 0.5, measured_s=0.0)
    assert core.add_chunk(_top_down_chunk(rig, 0.0, [0.3, 0, 0.1], [0.05, 0, 0], n=40), 0.0)[0]
    sent = {}
    for k in range(0, 101):  # 0 .. 1.0 s; the arm reports its state until 0.5 s, then nothing
        t = round(k * 0.01, 10)
        if t <= 0.5:
            core.set_measured_joints(core.last_command[0], 0.5, measured_s=t)  # a perfect arm
        sent[t] = core.tick(t)
    assert all(sent[t] is not None for t in sent if t <= 0.7 + 1e-9)  # age <= 0.2 s: still commanding
    assert all(sent[t] is None for t in sent if t > 0.7 + 1e-9), "a command with a stale joint state"
    last_before_loss = sent[0.7].q_rad
    assert np.any(last_before_loss != q0), "the arm was not moving before the loss"
    s = core.status_snapshot()
    assert s.activity == "joint_state_lost" and s.joint_state_losses == 1 and len(core.timeline) == 0
    assert "no fresh joint state within joint_state_timeout_s 0.2 s (the last one measured at t=0.500 s)" in s.problems[
        "joint_state"
    ] and s.joint_state_age_s == pytest.approx(0.5)
    # A chunk while the state is stale is ignored (counted), not kept for later.
    ok, why = core.add_chunk(_top_down_chunk(rig, 1.0, [0.35, 0, 0.1], [0.05, 0, 0]), 1.0)
    assert not ok and "joint_state_timeout_s" in why and core.status.chunks_ignored_no_state == 1
    # Fresh state (the arm sagged meanwhile): still nothing, the problem is gone, waiting for a chunk.
    q_sagged = last_before_loss + (-0.02 * rig.unit(1) + 0.01 * rig.unit(2))
    core.set_measured_joints(q_sagged, 0.5, measured_s=1.1)
    assert core.tick(1.1) is None and core.status.activity == "waiting_for_chunk" and core.status.problems == {}
    assert core.tick(1.2) is None  # ... for as long as no chunk comes (the state is still fresh: 0.1 s old)
    # A new chunk: the first command starts at the measured joints (one limited step from them), not at the target
    # the old timeline would have reached.
    core.set_measured_joints(q_sagged, 0.5, measured_s=1.25)
    p_sagged = rig.kin.fk(q_sagged)[:3, 3]
    assert core.add_chunk(_top_down_chunk(rig, 1.25, p_sagged, [0.05, 0, 0]), 1.25)[0]
    first = core.tick(1.26)
    assert first is not None and core.status.activity == "tracking"
    step = np.abs(first.q_rad - q_sagged)
    assert np.all(step <= np.asarray(core.limits.max_joint_speed_rad_s) * core.config.period_s + 1e-9)
    assert np.linalg.norm(first.T_base_tool[:3, 3] - p_sagged) < 0.005


def test_core_started_disengaged_sends_nothing_until_engaged_then_starts_at_the_measured_joints(rig):
    core = _core(rig, start_engaged=False)
    q0 = rig.top_down_q([0.3, 0, 0.1])
    assert not core.engaged and core.tick(0.0) is None  # no state yet
    core.set_measured_joints(q0, 0.5)
    assert core.tick(0.01) is None and core.status.activity == "disengaged"  # a state, still nothing: not ours
    ok, why = core.add_chunk(_top_down_chunk(rig, 0.02, [0.3, 0, 0.1], [0.05, 0, 0]), 0.02)
    assert not ok and "~/engage" in why and core.status.chunks_ignored_stopped == 1
    q_moved = q0 + 0.05 * rig.unit(0)  # moved by hand meanwhile
    core.set_measured_joints(q_moved, 0.6)
    core.engage()
    first = core.tick(0.03)
    assert core.engaged and core.status.activity == "idle"
    np.testing.assert_array_equal(first.q_rad, q_moved)  # from the measured joints: no jump
    assert first.gripper == 0.6
    p_moved = rig.kin.fk(q_moved)[:3, 3]
    assert core.add_chunk(_top_down_chunk(rig, 0.03, p_moved, [0.05, 0, 0]), 0.03)[0]
    for k in range(4, 20):
        cmd = core.tick(k * 0.01)
    assert core.status.activity == "tracking" and np.any(cmd.q_rad != q_moved)
    # Disengage holds at once: the next tick repeats the last command; chunks are ignored.
    core.disengage()
    assert not core.engaged
    held = [core.tick(0.2 + k * 0.01) for k in range(5)]
    assert all(np.array_equal(h.q_rad, cmd.q_rad) for h in held) and core.status.activity == "stopped"
    assert not core.add_chunk(_top_down_chunk(rig, 0.25, p_moved, [0.05, 0, 0]), 0.25)[0]
    core.set_measured_joints(q0, 0.5)
    core.engage()  # engaged again: from the measured joints once more
    np.testing.assert_array_equal(core.tick(0.3).q_rad, q0)


def test_core_feedback_lost_while_disengaged_then_engage_starts_at_the_fresh_measured_joints(rig):
    """The sequence CI met: a loaded machine delays the first joint states past the timeout while the executor waits
    disengaged; once the state is fresh, ~/engage alone (no chunk yet) must start commanding from the measured joints,
    while a stale state still blocks it."""
    core = _core(rig, start_engaged=False, joint_state_timeout_s=0.2)
    q0 = rig.seed_q_rad.copy()
    core.set_measured_joints(q0, 0.5, measured_s=0.0)
    assert core.tick(0.01) is None and core.status.activity == "disengaged"
    assert core.tick(0.3) is None and core.status.activity == "joint_state_lost"  # 0.3 s old: lost
    q1 = q0 + 0.01 * rig.unit(0)
    core.set_measured_joints(q1, 0.5, measured_s=0.35)
    assert core.tick(0.36) is None and core.status.activity == "disengaged"  # fresh again, still not ours
    core.engage()
    first = core.tick(0.37)
    assert first is not None, "engage after a feedback loss must start commanding once the state is fresh"
    np.testing.assert_array_equal(first.q_rad, q1)
    assert core.tick(0.38) is not None and core.status.problems == {}
    # A stale state at engage time still blocks: the watchdog comes first.
    core.disengage()
    assert core.tick(0.9) is None and core.status.activity == "joint_state_lost"
    core.engage()
    assert core.tick(0.91) is None and core.status.activity == "joint_state_lost"
    core.set_measured_joints(q0, 0.5, measured_s=0.95)
    np.testing.assert_array_equal(core.tick(0.96).q_rad, q0)


def test_core_watchdog_needs_measurement_times_and_a_positive_timeout(rig):
    from para_ros.execution.executor_core import ExecutorConfig

    core = _core(rig, joint_state_timeout_s=0.2)
    with pytest.raises(ValueError, match="measured_s"):
        core.set_measured_joints(np.zeros(rig.n), 0.5)
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="joint_state_timeout_s"):
            ExecutorConfig(joint_state_timeout_s=bad)
    # Without a watchdog (None) a state measured once keeps commanding, as benches and offline tools expect.
    free = _core(rig)
    free.set_measured_joints(rig.seed_q_rad, 0.5)
    assert free.tick(100.0) is not None


def test_joint_state_watch_dates_the_oldest_needed_joint():
    """Joints merged by name over several messages (one per controller), as the backends read them: the state is
    as old as its least recently heard joint; NaN and malformed messages do not count."""
    from sensor_msgs.msg import JointState

    from para_ros.execution.joint_state_watch import JointStateWatch

    clock = {"t": 0.0}
    watch = JointStateWatch(("j1", "j2", "gripper"), lambda: clock["t"])
    assert watch.last_complete_s() is None
    watch.on_joint_state(JointState(name=["j1", "j2"], position=[0.0, 0.1]))
    assert watch.last_complete_s() is None  # the gripper was never heard
    clock["t"] = 1.0
    watch.on_joint_state(JointState(name=["gripper"], position=[0.5]))
    assert watch.last_complete_s() == 0.0
    clock["t"] = 2.0
    watch.on_joint_state(JointState(name=["j1", "j2", "other"], position=[0.0, float("nan"), 1.0]))
    watch.on_joint_state(JointState(name=["j2"], position=[]))  # malformed: ignored
    assert watch.last_complete_s() == 0.0  # j2 only ever came finite at 0.0
    watch.on_joint_state(JointState(name=["j2"], position=[0.2]))
    assert watch.last_complete_s() == 1.0  # now the gripper (1.0) is the oldest


# ---- node configuration (no middleware needed) -----------------------------------------------------------------------


def test_executor_defaults_build_a_valid_config_and_bad_values_are_refused():
    from para_ros.execution.config_from_parameters import build_executor_config
    from para_ros.nodes.executor_parameters import PARAMETERS

    defaults = PARAMETERS.defaults()
    cfg = build_executor_config(defaults, load_yam_config())
    assert cfg.control_rate_hz == 100.0 and cfg.blend.mode == "latest"
    with pytest.raises(ValueError, match="average.*latest"):
        build_executor_config({**defaults, "blend_mode": "average"}, load_yam_config())
    with pytest.raises(ValueError, match="control_rate_hz"):
        build_executor_config({**defaults, "control_rate_hz": 0.0}, load_yam_config())
    # the table refuses the same before the node is built: names the parameter and the allowed values
    with pytest.raises(ValueError, match=r"blend_mode='average': use one of \['latest', 'ensemble'\]"):
        PARAMETERS.coerce_all({"blend_mode": "average"})
    with pytest.raises(ValueError, match=r"control_rate_hz=0.0: must be within \[1, 2000\]"):
        PARAMETERS.coerce_all({"control_rate_hz": 0.0})
    assert PARAMETERS.coerce_all({"control_rate_hz": 500})["control_rate_hz"] == 500.0  # an int for a double


def test_help_runs_without_middleware():
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "para_ros.nodes.chunk_executor", "--help"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0 and "control_rate_hz" in out.stdout
    out = subprocess.run(
        [sys.executable, "bench/bench_executor.py", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(__import__("pathlib").Path(__file__).resolve().parent.parent),
    )
    assert out.returncode == 0 and "--rates" in out.stdout


def test_ros_thread_priority_is_one_below_the_control_thread_or_reported():
    """With control_thread_priority, the thread that spins the executor node (the likely GIL holder) asks for SCHED_FIFO
    one level below the control thread (priority inversion otherwise), only when the control thread did get its level
    and there is a level below it. Run in helper threads, so this test's own thread keeps the normal scheduler."""
    import os
    import threading

    from para_ros.execution.control_loop import raise_ros_thread_priority

    seen = {}

    def in_thread(key, priority, control_scheduler):
        seen[key] = (
            raise_ros_thread_priority(priority, control_scheduler),
            os.sched_getscheduler(0),
            os.sched_getparam(0).sched_priority,
        )

    cases = {
        "granted": (50, "SCHED_FIFO 50"),
        "refused": (50, "normal (SCHED_FIFO 50 refused: EPERM)"),
        "lowest": (1, "SCHED_FIFO 1"),
        "off": (0, "normal"),
    }
    for key, (priority, control) in cases.items():
        worker = threading.Thread(target=in_thread, args=(key, priority, control))
        worker.start()
        worker.join(10)
    text, policy, level = seen["granted"]
    if text == "SCHED_FIFO 49":
        assert policy == os.SCHED_FIFO and level == 49
    else:  # not allowed on this machine: said so, scheduler untouched
        assert text.startswith("normal (SCHED_FIFO 49 refused") and policy == os.SCHED_OTHER
    for key in ("refused", "lowest", "off"):  # never real-time when the control thread is not above it
        assert seen[key][1] == os.SCHED_OTHER and seen[key][0].startswith("normal"), (key, seen[key])
    assert "not real-time" in seen["refused"][0] and "no real-time level below" in seen["lowest"][0]
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


def test_control_loop_priority_is_applied_in_its_thread_or_reported():
    """priority 1..99 asks for SCHED_FIFO in the loop's own thread; what it got is in ``scheduler`` either way."""
    import os

    from para_ros.execution.control_loop import FixedRateLoop

    for bad in (-1, 100):
        with pytest.raises(ValueError, match="priority"):
            FixedRateLoop(100.0, lambda: None, priority=bad)
    seen = {}

    def tick():
        seen["policy"] = os.sched_getscheduler(0)  # the calling thread's scheduler

    loop = FixedRateLoop(100.0, tick, priority=10)
    loop.start()
    import time as _time

    deadline = _time.monotonic() + 5.0
    while "policy" not in seen and _time.monotonic() < deadline:
        _time.sleep(0.01)
    loop.stop()
    if loop.scheduler == "SCHED_FIFO 10":
        assert seen["policy"] == os.SCHED_FIFO
    else:  # not allowed here: the loop still ran, on the normal scheduler, and says why
        assert loop.scheduler.startswith("normal (SCHED_FIFO 10 refused") and seen["policy"] == os.SCHED_OTHER
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the test's own thread is untouched
    plain = FixedRateLoop(100.0, lambda: None)
    plain.run(max_ticks=2)
    assert plain.scheduler == "normal"


def test_sampling_survives_due_times_that_round_to_one_float():
    """Strictly increasing offsets can still give equal due times at a wall-clock stamp (float spacing 2.4e-7 s at
    1.7e9 s): the interpolation takes the later step there instead of dividing by zero."""
    from para_ros.execution.chunk import Chunk
    from para_ros.execution.interpolation import sample_chunk

    stamp = 1.7e9
    offsets = np.array([0.0, 0.5, 0.5 + 1e-8])
    assert stamp + offsets[1] == stamp + offsets[2]  # the case: one float for two steps
    positions = np.array([[0.3, 0.0, 0.1], [0.3, 0.1, 0.1], [0.3, 0.2, 0.1]])
    chunk = Chunk(stamp, offsets, positions, np.tile([0.0, 1.0, 0.0, 0.0], (3, 1)), np.ones(3), np.ones(3))
    target = sample_chunk(chunk, stamp + 0.5 + 1e-7)
    assert target is not None and np.allclose(target.position_m, positions[2])
