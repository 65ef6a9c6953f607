"""The confidence supervisor: its judgements (hand-made measure arrays), what the executor does in its states (slow,
hold, resume after confident chunks, ~/resume, a stale chunk while holding), bad confidence arrays rejected, the
/diagnostics text, and the measures through an ActionChunk message."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation
from test_executor_units import make_chunk

from para_ros.execution.chunk import ChunkChecks, ChunkRejected, validate_chunk
from para_ros.execution.confidence_supervisor import ConfidenceSupervisor, SupervisorConfig
from para_ros.execution.executor_core import ExecutorConfig, ExecutorCore
from para_ros.execution.executor_state import TRANSITIONS, ExecutorEvent, ExecutorState
from para_ros.robot.yam import load_yam_config
from para_ros.robot.yam_ik import YamKinematics

S, E = ExecutorState, ExecutorEvent
TOP_DOWN_Q = Rotation.from_matrix(np.array([[-1.0, 0, 0], [0, 1.0, 0], [0, 0, -1.0]]).T).as_quat()
SUPERVISOR = SupervisorConfig(
    enabled=True,
    peak_mass_slow_below=0.5,
    peak_mass_hold_below=0.1,
    entropy_slow_above=0.8,
    entropy_hold_above=0.95,
    hold_after_s=0.5,
    resume_after_chunks=3,
    slow_speed_scale=0.2,
)


def chunk_with(stamp_s, peak_mass, entropy=None, n=10, speed_m_s=0.4, start=(0.3, -0.1, 0.15)):
    """A chunk moving +y at ``speed_m_s`` with these per-step measures (scalars are repeated)."""
    offsets = np.arange(n) * 0.1
    positions = np.array(start) + np.outer(offsets, [0.0, speed_m_s, 0.0])
    chunk = make_chunk(stamp_s, offsets, positions, np.tile(TOP_DOWN_Q, (n, 1)))
    chunk.confidence = np.broadcast_to(np.asarray(peak_mass, float), (n,)).copy()
    if entropy is not None:
        chunk.entropy = np.broadcast_to(np.asarray(entropy, float), (n,)).copy()
    return chunk


# ---- the judge alone ------------------------------------------------------------------------------------------------


def test_the_judge_slows_then_holds_after_hold_after_s_and_names_the_worst_step():
    sup = ConfidenceSupervisor(SUPERVISOR)
    conf = np.array([0.9, 0.8, 0.03, 0.6, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9])
    first = sup.judge(chunk_with(10.0, conf), 10.0)
    assert first.event is E.CHUNK_UNCERTAIN  # below the hold threshold, but not for 0.5 s yet: slowed
    assert sup.judge(chunk_with(10.3, conf), 10.3).event is E.CHUNK_UNCERTAIN
    late = sup.judge(chunk_with(10.6, conf), 10.6)
    assert late.event is E.CHUNK_VERY_UNCERTAIN
    assert late.reason.startswith("policy uncertain: peak mass 0.03 at step 2 for 0.6 s")
    assert "peak mass 0.03 at step 2" in late.summary


def test_the_judge_needs_every_chunk_below_for_hold_after_s():
    """A merely uncertain chunk in between restarts the hold clock: one bad chunk among others never holds."""
    sup = ConfidenceSupervisor(SUPERVISOR)
    assert sup.judge(chunk_with(10.0, 0.05), 10.0).event is E.CHUNK_UNCERTAIN
    assert sup.judge(chunk_with(10.3, 0.3), 10.3).event is E.CHUNK_UNCERTAIN  # above hold: its clock restarts
    assert sup.judge(chunk_with(10.6, 0.05), 10.6).event is E.CHUNK_UNCERTAIN  # 0 s below hold
    assert sup.judge(chunk_with(11.1, 0.05), 11.1).event is E.CHUNK_VERY_UNCERTAIN  # 0.5 s


def test_the_judge_ends_a_spell_after_resume_after_chunks_confident_chunks():
    sup = ConfidenceSupervisor(SUPERVISOR)
    assert sup.judge(chunk_with(10.0, 1.0), 10.0).event is E.CHUNK_ACCEPTED  # no spell: just confident
    assert sup.judge(chunk_with(10.1, 0.3), 10.1).event is E.CHUNK_UNCERTAIN
    events = [sup.judge(chunk_with(10.2 + 0.1 * i, 1.0), 10.2 + 0.1 * i).event for i in range(4)]
    assert events == [E.CHUNK_ACCEPTED, E.CHUNK_ACCEPTED, E.CONFIDENT_AGAIN, E.CHUNK_ACCEPTED]


def test_entropy_is_judged_above_and_steps_checked_limits_the_steps():
    sup = ConfidenceSupervisor(SUPERVISOR)
    late_fog = np.array([0.1] * 5 + [0.97] * 5)  # the last steps are a fog
    j = sup.judge(chunk_with(10.0, 1.0, entropy=late_fog), 10.0)
    assert j.event is E.CHUNK_UNCERTAIN and "entropy 0.97 at step 5" in j.reason
    only_first = ConfidenceSupervisor(SupervisorConfig(**{**SUPERVISOR.__dict__, "steps_checked": 5}))
    assert only_first.judge(chunk_with(10.0, 1.0, entropy=late_fog), 10.0).event is E.CHUNK_ACCEPTED


def test_an_unmeasured_measure_is_not_judged_and_off_judges_nothing():
    sup = ConfidenceSupervisor(SupervisorConfig(enabled=True, view_agreement_slow_below=0.9))
    assert sup.judge(chunk_with(10.0, 1.0), 10.0).event is E.CHUNK_ACCEPTED  # no view_agreement in the chunk
    off = ConfidenceSupervisor(SupervisorConfig(enabled=False, peak_mass_slow_below=0.9, peak_mass_hold_below=0.9))
    assert off.judge(chunk_with(10.0, 0.0), 10.0).event is E.CHUNK_ACCEPTED


@pytest.mark.parametrize(
    "fields, match",
    [
        ({"peak_mass_slow_below": 0.2, "peak_mass_hold_below": 0.3}, "peak_mass_hold_below=0.3 is less strict"),
        ({"entropy_slow_above": 0.9, "entropy_hold_above": 0.8}, "entropy_hold_above=0.8 is less strict"),
        ({"peak_mass_slow_below": 1.5}, r"peak_mass_slow_below=1.5: use a number in \[0, 1\]"),
        ({"resume_after_chunks": 0}, "resume_after_chunks=0"),
        ({"slow_speed_scale": 0.0}, "slow_speed_scale=0.0"),
        ({"hold_after_s": -1.0}, "hold_after_s=-1.0"),
        ({"grace_s": float("nan")}, r"grace_s=nan: use a time >= 0 s"),
        ({"rejected_hold_count": 11, "rejected_window_chunks": 10}, "rejected_hold_count=11 is more than"),
        ({"rejected_hold_count": -1}, r"rejected_hold_count=-1: use an integer >= 0"),
        ({"rejected_window_chunks": 0}, r"rejected_window_chunks=0: use an integer >= 1"),
    ],
)
def test_bad_supervisor_configs_are_refused_with_the_field_named(fields, match):
    with pytest.raises(ValueError, match=match):
        SupervisorConfig(**fields)


def test_the_grace_after_a_hand_over_judges_nothing_and_the_hold_clock_starts_after_it():
    """grace_s after a reset, counted from the first chunk: very uncertain chunks are followed as they are (and still
    summarised); the first chunk at or after the grace's end starts the hold clock, so the hold comes hold_after_s
    later, not at once; a reset (~/resume) grants a new grace, a clock jump back restarts one under way only."""
    cfg = SupervisorConfig(**{**SUPERVISOR.__dict__, "grace_s": 1.0})
    sup = ConfidenceSupervisor(cfg)
    for t in (5.0, 5.3, 5.6, 5.9):  # the grace: 5.0 .. 6.0
        j = sup.judge(chunk_with(t, 0.02), t)
        assert j.event is E.CHUNK_ACCEPTED and j.reason == "" and "peak mass 0.02 at step 0" in j.summary
        assert not sup.in_spell
    assert sup.judge(chunk_with(6.0, 0.02), 6.0).event is E.CHUNK_UNCERTAIN  # judged: slowed, clock from 6.0
    assert sup.judge(chunk_with(6.4, 0.02), 6.4).event is E.CHUNK_UNCERTAIN
    held = sup.judge(chunk_with(6.5, 0.02), 6.5)
    assert held.event is E.CHUNK_VERY_UNCERTAIN and "for 0.5 s" in held.reason
    sup.forget_time()  # the grace is over: a clock jump does not grant another
    assert sup.judge(chunk_with(1.0, 0.02), 1.0).event is E.CHUNK_UNCERTAIN
    sup.reset()  # the arm handed over again: a new grace from the next chunk
    assert sup.judge(chunk_with(9.0, 0.02), 9.0).event is E.CHUNK_ACCEPTED
    sup.forget_time()  # a jump back during the grace: it starts again at the next chunk
    assert sup.judge(chunk_with(0.5, 0.02), 0.5).event is E.CHUNK_ACCEPTED
    assert sup.judge(chunk_with(1.4, 0.02), 1.4).event is E.CHUNK_ACCEPTED
    assert sup.judge(chunk_with(1.5, 0.02), 1.5).event is E.CHUNK_UNCERTAIN
    # refused chunks count during the grace: the rule on them has no grace
    refusing = ConfidenceSupervisor(SupervisorConfig(**{**cfg.__dict__, "rejected_hold_count": 2}))
    refusing.judge(chunk_with(0.0, 0.9), 0.0)
    refusing.judge_refused("jump")
    assert refusing.judge_refused("jump").event is E.CHUNK_VERY_UNCERTAIN


def test_refused_chunks_hold_once_the_count_of_the_window_is_reached():
    """Against a brute-force count: a chunk sequence of refused (True) and confident accepted (False) chunks; a refused
    chunk is very uncertain exactly when at least ``rejected_hold_count`` of the last ``rejected_window_chunks``
    chunks, itself included, were refused."""
    cfg = SupervisorConfig(**{**SUPERVISOR.__dict__, "rejected_hold_count": 3, "rejected_window_chunks": 5})
    sup = ConfidenceSupervisor(cfg)
    rng = np.random.default_rng(7)
    sequence = list(rng.random(200) < 0.45)
    history, fired = [], 0
    for i, refused in enumerate(sequence):
        history.append(refused)
        if refused:
            j = sup.judge_refused("chunk too old")
            expect = sum(history[-5:]) >= 3
            assert (j.event is E.CHUNK_VERY_UNCERTAIN) == expect, i
            if expect:
                fired += 1
                assert j.reason.startswith(f"policy inconsistent: {sum(history[-5:])} of the last 5 chunks refused")
                assert j.reason.endswith("last: chunk too old)")
            else:
                assert j.event is E.CHUNK_ACCEPTED and j.reason == ""
        else:
            sup.judge(chunk_with(10.0 + 0.1 * i, 1.0), 10.0 + 0.1 * i)
    assert 10 < fired < sum(sequence)  # the sequence exercises both answers


def test_refused_chunks_count_nothing_when_the_rule_or_the_supervisor_is_off():
    off_rule = ConfidenceSupervisor(SupervisorConfig(**{**SUPERVISOR.__dict__, "rejected_hold_count": 0}))
    off = ConfidenceSupervisor(SupervisorConfig(enabled=False, rejected_hold_count=1))
    for _ in range(20):
        assert off_rule.judge_refused("x").event is E.CHUNK_ACCEPTED
        assert off.judge_refused("x").event is E.CHUNK_ACCEPTED


# ---- the executor in its states -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kin():
    return YamKinematics()


class Arm:
    """An executor with the supervisor on, on a virtual clock, the arm always at the last command."""

    def __init__(self, kin, supervisor=SUPERVISOR):
        yam = load_yam_config()
        self.yam = yam
        checks = ChunkChecks(workspace_min_m=yam.limits.workspace_min_m, workspace_max_m=yam.limits.workspace_max_m)
        self.core = ExecutorCore(
            ExecutorConfig(
                checks=checks,
                supervisor=supervisor,
                start_engaged=True,
                joint_state_timeout_s=None,
                chunk_min_lead_s=0.0,
            ),
            yam,
            kinematics=kin,
        )
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = Rotation.from_quat(TOP_DOWN_Q).as_matrix(), [0.3, -0.1, 0.15]
        self.q0 = kin.ik(T, np.array([0, 1.6, 1.3, -1.2, 0, 0])).q_rad
        self.kin = kin
        self.t = 100.0
        self.core.set_measured_joints(self.q0, 0.5)
        self.last = self.core.tick(self.t)

    def send(self, peak_mass, **kw):
        before = self.core.state
        ok, why = self.core.add_chunk(chunk_with(self.t, peak_mass, **kw), self.t)
        return before, ok, why

    def run(self, seconds):
        """Tick for ``seconds``; the tool's largest speed between ticks (m/s) and the commands."""
        speeds, commands = [], []
        for _ in range(round(seconds * 100)):
            self.t += 0.01
            cmd = self.core.tick(self.t)
            if self.last is not None:
                speeds.append(np.linalg.norm(cmd.T_base_tool[:3, 3] - self.last.T_base_tool[:3, 3]) / 0.01)
            self.core.set_measured_joints(cmd.q_rad, cmd.gripper)
            self.last = cmd
            commands.append(cmd)
        return max(speeds, default=0.0), commands


def _expect(before, event, after):
    assert TRANSITIONS[(before, event)] is after  # the table says so, and the core did it


def test_an_uncertain_chunk_slows_the_arm_to_the_scaled_speed_limit(kin):
    """The same fast chunk (0.4 m/s) at full confidence moves at the chunk's speed, uncertain at most
    slow_speed_scale times the YAM's tool speed limit (0.2 x 0.5 = 0.1 m/s)."""
    fast = Arm(kin)
    fast.send(1.0, speed_m_s=0.4)
    v_fast, _ = fast.run(0.3)
    slow = Arm(kin)
    before, ok, _ = slow.send(0.3, speed_m_s=0.4)
    assert ok and slow.core.state is S.FOLLOWING_SLOWLY
    _expect(before, E.CHUNK_UNCERTAIN, S.FOLLOWING_SLOWLY)
    v_slow, _ = slow.run(0.3)
    limit = SUPERVISOR.slow_speed_scale * slow.yam.limits.max_ee_speed_m_s
    assert v_fast > 0.3 and v_slow <= limit * (1 + 1e-6) and v_slow > 0.5 * limit
    status = slow.core.status_snapshot()
    assert (
        status.speed_scale == SUPERVISOR.slow_speed_scale
        and "slowed to 20% of the speed limits" in status.confidence_problem
    )


def test_a_very_uncertain_policy_holds_says_why_and_comes_back_after_confident_chunks(kin):
    arm = Arm(kin)
    arm.send(1.0)
    arm.run(0.1)
    for i in range(3):  # 0.03 for 0.6 s: slowed, slowed, then held
        before, ok, why = arm.send(0.03)
        arm.run(0.3 if i < 2 else 0.0)
    assert not ok and arm.core.state is S.HOLDING_UNCERTAIN and "holding" in why
    _expect(before, E.CHUNK_VERY_UNCERTAIN, S.HOLDING_UNCERTAIN)
    status = arm.core.status_snapshot()
    assert status.confidence_problem.startswith("policy uncertain: peak mass 0.03 at step 0 for 0.6 s")
    assert status.chunks_in_force == 0
    held = arm.last.q_rad.copy()
    _, commands = arm.run(0.3)
    assert all(np.array_equal(c.q_rad, held) for c in commands)  # holds where it is: the last command, repeated
    assert arm.core.status.activity == "hold_uncertain"
    for _i in range(2):  # confident, but too few in a row: still holding, the chunks not followed
        before, ok, _ = arm.send(1.0)
        assert not ok and arm.core.state is S.HOLDING_UNCERTAIN
        _expect(before, E.CHUNK_ACCEPTED, S.HOLDING_UNCERTAIN)
        _, commands = arm.run(0.1)
        assert all(np.array_equal(c.q_rad, held) for c in commands)
    before, ok, _ = arm.send(1.0)  # the third in a row
    assert ok and arm.core.state is S.FOLLOWING
    _expect(before, E.CONFIDENT_AGAIN, S.FOLLOWING)
    v, _ = arm.run(0.3)
    assert v > 0.3 and arm.core.status.confidence_problem == ""


def test_manual_resume_ends_a_hold(kin):
    arm = Arm(kin, SupervisorConfig(**{**SUPERVISOR.__dict__, "hold_after_s": 0.0}))
    arm.send(0.03)
    assert arm.core.state is S.HOLDING_UNCERTAIN
    arm.core.resume()
    assert arm.core.state is S.FOLLOWING and arm.core.status.confidence_problem == ""
    assert TRANSITIONS[(S.HOLDING_UNCERTAIN, E.ENGAGE)] is S.FOLLOWING
    _, ok, _ = arm.send(0.3)  # the spell was forgotten: an uncertain chunk slows, it does not hold
    assert ok and arm.core.state is S.FOLLOWING_SLOWLY


def test_a_stale_chunk_while_holding_is_rejected_and_does_not_count_as_confident(kin):
    arm = Arm(kin, SupervisorConfig(**{**SUPERVISOR.__dict__, "hold_after_s": 0.0, "resume_after_chunks": 1}))
    arm.send(0.03)
    assert arm.core.state is S.HOLDING_UNCERTAIN
    old = chunk_with(arm.t - 5.0, 1.0)  # confident, but 5 s old (max_age_s 1 s)
    ok, why = arm.core.add_chunk(old, arm.t)
    assert not ok and "old" in why and arm.core.state is S.HOLDING_UNCERTAIN
    assert arm.core.supervisor.confident_run == 0
    _, commands = arm.run(1.0)  # no chunk for longer than stale_timeout_s: still holding, same command
    assert arm.core.state is S.HOLDING_UNCERTAIN and len({c.q_rad.tobytes() for c in commands}) == 1
    _, ok, _ = arm.send(1.0)  # one fresh confident chunk ends it (resume_after_chunks 1)
    assert ok and arm.core.state is S.FOLLOWING


def test_a_policy_whose_chunks_keep_being_refused_is_held_and_named(kin):
    """Four of the last five chunks refused by the checks (here: too old) hold the arm where it is, with the reason on
    the status; confident chunks that pass the checks end the hold (resume_after_chunks in a row)."""
    cfg = SupervisorConfig(**{**SUPERVISOR.__dict__, "rejected_hold_count": 4, "rejected_window_chunks": 5})
    arm = Arm(kin, cfg)
    arm.send(1.0)
    arm.run(0.1)
    assert arm.core.state is S.FOLLOWING
    answers = []
    for _ in range(4):
        before = arm.core.state
        answers.append(arm.core.add_chunk(chunk_with(arm.t - 5.0, 1.0), arm.t))  # 5 s old: refused
        arm.run(0.1)
    assert [ok for ok, _ in answers] == [False] * 4
    assert "holding" not in answers[2][1] and "holding" in answers[3][1]  # the fourth refusal holds
    _expect(before, E.CHUNK_VERY_UNCERTAIN, S.HOLDING_UNCERTAIN)
    assert arm.core.state is S.HOLDING_UNCERTAIN
    status = arm.core.status_snapshot()
    assert status.confidence_problem.startswith("policy inconsistent: 4 of the last 5 chunks refused")
    assert status.chunks_rejected == 4 and status.chunks_in_force == 0
    held = arm.last.q_rad.copy()
    _, commands = arm.run(0.3)
    assert all(np.array_equal(c.q_rad, held) for c in commands)  # holds: the last command, repeated
    oks = [arm.send(1.0)[1] for _ in range(3)]  # three confident chunks the checks pass: the third resumes
    assert oks == [False, False, True] and arm.core.state is S.FOLLOWING


def test_switching_the_supervisor_off_while_holding_lets_the_next_chunk_through(kin):
    arm = Arm(kin, SupervisorConfig(**{**SUPERVISOR.__dict__, "hold_after_s": 0.0}))
    arm.send(0.03)
    cfg = arm.core.config
    arm.core.reconfigure(ExecutorConfig(**{**cfg.__dict__, "supervisor": SupervisorConfig(enabled=False)}))
    _, ok, _ = arm.send(0.03)
    assert ok and arm.core.state is S.FOLLOWING


# ---- bad confidence arrays ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["confidence", "entropy", "chunk_agreement", "view_agreement"])
@pytest.mark.parametrize(
    "values, match",
    [
        (np.ones(9), "mismatched array lengths"),
        (np.array([1.0] * 9 + [np.nan]), "non-finite value at step 9"),
        (np.array([1.0] * 3 + [1.2] + [1.0] * 6), r"\[3\]=1.2 outside \[0, 1\]"),
        (np.array([-0.01] + [1.0] * 9), r"\[0\]=-0.01 outside \[0, 1\]"),
    ],
)
def test_bad_confidence_arrays_are_rejected(field, values, match):
    chunk = chunk_with(100.0, 1.0, entropy=0.5)
    setattr(chunk, field, values)
    with pytest.raises(ChunkRejected, match=match):
        validate_chunk(chunk, 100.0, ChunkChecks())


def test_unmeasured_measures_may_be_empty_and_are_truncated_with_the_chunk():
    chunk = chunk_with(100.0, 0.9, entropy=np.linspace(0, 0.9, 10))
    clean, _ = validate_chunk(chunk, 100.0, ChunkChecks())
    assert clean.view_agreement.shape == (0,) and clean.entropy.shape == (10,)
    assert clean.subset(slice(2, 5)).entropy.tolist() == pytest.approx([0.2, 0.3, 0.4])
    positions = chunk.positions_m.copy()
    positions[4:] += [0.5, 0.0, 0.0]  # a jump after step 3: truncated to steps 0..3
    jumpy = chunk_with(100.0, 0.9, entropy=np.linspace(0, 0.9, 10))
    jumpy.positions_m = positions
    clean, warnings = validate_chunk(jumpy, 100.0, ChunkChecks(implausible_speed="truncate"))
    assert clean.n_steps == 4 and clean.entropy.tolist() == pytest.approx([0.0, 0.1, 0.2, 0.3]) and warnings


# ---- /diagnostics and the message ----------------------------------------------------------------------------------


def test_diagnostics_name_the_confidence_problem_at_warn(kin):
    from para_ros.execution.executor_diagnostics import WARN, diagnostic_summary

    arm = Arm(kin, SupervisorConfig(**{**SUPERVISOR.__dict__, "hold_after_s": 0.0}))
    arm.send(0.03)
    arm.run(0.05)
    level, problems, _ = diagnostic_summary(arm.core.status_snapshot(), None)
    assert level == WARN
    assert any(p.startswith("confidence: policy uncertain: peak mass 0.03 at step 0") for p in problems)


def test_the_measures_travel_in_an_action_chunk_message():
    from para_ros.ros_io.chunk_msg import chunk_from_msg, chunk_to_msg

    chunk = chunk_with(100.0, np.linspace(0.1, 1.0, 10), entropy=np.linspace(0.0, 0.45, 10))
    chunk.chunk_agreement = np.full(10, 0.25)
    back = chunk_from_msg(chunk_to_msg(chunk))
    np.testing.assert_allclose(back.entropy, chunk.entropy, atol=1e-7)  # float32 on the wire
    np.testing.assert_allclose(back.chunk_agreement, 0.25)
    assert back.view_agreement.shape == (0,)
