"""The chunk executor's safety state machine: the table is complete, and the real ``ExecutorCore`` follows it.

The walk drives a real core (real IK, real chunks, the watchdog on) through every sequence of the events a user or
the world can cause (engage, disengage, a chunk, an uncertain and a very uncertain chunk judged by the confidence
supervisor, the joint state lost and back, chunks going stale, a clock jump),
breadth first from both starts (``auto_engage`` true and false), and checks after each step that the core's state is
the one the table names for (state before, event), that a change is counted and named, and what the tick sent. It
ends by checking that every pair of the table was walked, except the pairs the rules make unreachable (named)."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from scipy.spatial.transform import Rotation
from test_executor_units import make_chunk

from para_ros.execution.chunk import ChunkChecks
from para_ros.execution.confidence_supervisor import SupervisorConfig
from para_ros.execution.executor_core import ExecutorConfig, ExecutorCore
from para_ros.execution.executor_state import (
    FEEDBACK_LOST,
    HOLDS_UNCERTAIN,
    IGNORES_CHUNKS,
    NOT_ENGAGED_YET,
    RESTART_GRANTED,
    SLOWED,
    TRANSITIONS,
    ExecutorEvent,
    ExecutorState,
    transition_text,
)
from para_ros.robot.yam import load_yam_config
from para_ros.robot.yam_ik import YamKinematics

S, E = ExecutorState, ExecutorEvent
TOP_DOWN_R = np.array([[-1.0, 0, 0], [0, 1.0, 0], [0, 0, -1.0]]).T
TIMEOUT_S = 0.2  # joint_state_timeout_s
STALE_S = 0.1  # stale_timeout_s
# The supervisor of the walk: peak mass below 0.5 slows, below 0.2 holds at once; 2 confident chunks end a spell
SUPERVISOR = SupervisorConfig(
    enabled=True, peak_mass_slow_below=0.5, peak_mass_hold_below=0.2, hold_after_s=0.0, resume_after_chunks=2
)
UNCERTAIN, VERY_UNCERTAIN = 0.3, 0.1  # the peak mass of the walk's uncertain and very uncertain chunks

# Pairs no sequence reaches (the walk checks that it reaches every other pair, and not these):
UNREACHABLE = {
    # no command was ever sent in these states, so a loss in them is one "before the first command"
    (S.DISENGAGED, E.FEEDBACK_LOST),
    (S.DISENGAGED_FEEDBACK_LOST, E.FEEDBACK_LOST),
    (S.STOPPED_RESUMING, E.FEEDBACK_LOST),
    # entered only by a loss after a command was sent
    (S.WAITING_FOR_CHUNK, E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND),
    # the first fresh state ends these, so a second loss cannot begin in them
    (S.DISENGAGED_FEEDBACK_LOST, E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND),
    (S.STOPPED_RESUMING, E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND),
    # chunks are ignored here before the supervisor judges them: no spell of uncertain chunks can end
    *((state, E.CONFIDENT_AGAIN) for state in IGNORES_CHUNKS),
}


@pytest.fixture(scope="module")
def kin():
    return YamKinematics()


class Rig:
    """A core on a virtual clock, an arm that stays at ``q0``, and the actions of the walk."""

    def __init__(self, kin, start_engaged: bool):
        yam = load_yam_config()
        checks = ChunkChecks(workspace_min_m=yam.limits.workspace_min_m, workspace_max_m=yam.limits.workspace_max_m)
        self.core = ExecutorCore(
            ExecutorConfig(
                checks=checks,
                stale_timeout_s=STALE_S,
                joint_state_timeout_s=TIMEOUT_S,
                start_engaged=start_engaged,
                chunk_min_lead_s=0.0,
                supervisor=SUPERVISOR,
            ),
            yam,
            kinematics=kin,
        )
        T = np.eye(4)
        T[:3, :3], T[:3, 3] = TOP_DOWN_R, [0.3, 0.0, 0.1]
        self.q0 = kin.ik(T, np.array([0, 1.6, 1.3, -1.2, 0, 0])).q_rad
        self.t = 100.0
        self.sent = None

    def _chunk(self, peak_mass: float = 1.0):
        n = 20
        offsets = np.arange(n) * 0.1
        positions = np.array([0.3, 0.0, 0.1]) + np.outer(offsets, [0.05, 0.0, 0.0])
        chunk = make_chunk(self.t, offsets, positions, np.tile(Rotation.from_matrix(TOP_DOWN_R).as_quat(), (n, 1)))
        chunk.confidence = np.full(n, peak_mass)
        return chunk

    # ---- actions: each returns the event the table should see (None: none happens)
    def engage(self):
        self.core.engage()
        return E.ENGAGE

    def disengage(self):
        self.core.disengage()
        return E.DISENGAGE

    def resume(self):  # ~/resume: the same event as ~/engage
        self.core.resume()
        return E.ENGAGE

    def stop(self):  # ~/stop: the same event as ~/disengage
        self.core.stop()
        return E.DISENGAGE

    def chunk(self):
        """A confident chunk: accepted, or the end of a spell after SUPERVISOR.resume_after_chunks of them (the
        supervisor's rule, restated: in a spell, the run so far + this one; a slowed or holding state with no spell
        to end ends at once)."""
        sup = self.core.supervisor
        before = self.core.state
        ends_spell = (sup.in_spell and sup.confident_run + 1 >= SUPERVISOR.resume_after_chunks) or (
            not sup.in_spell and before in SLOWED | HOLDS_UNCERTAIN
        )
        event = E.CONFIDENT_AGAIN if ends_spell and before not in IGNORES_CHUNKS else E.CHUNK_ACCEPTED
        return self._send(1.0, event)

    def uncertain_chunk(self):
        return self._send(UNCERTAIN, E.CHUNK_UNCERTAIN)

    def very_uncertain_chunk(self):
        return self._send(VERY_UNCERTAIN, E.CHUNK_VERY_UNCERTAIN)

    def _send(self, peak_mass: float, event):
        self.t += 0.01
        self.core.set_measured_joints(self.q0, 0.5, measured_s=self.t)  # fresh: the chunk is judged on its own
        before = self.core.state
        accepted, why = self.core.add_chunk(self._chunk(peak_mass), self.t)
        followed = before not in IGNORES_CHUNKS and event is not E.CHUNK_VERY_UNCERTAIN
        followed = followed and (before not in HOLDS_UNCERTAIN or event is E.CONFIDENT_AGAIN)
        assert accepted == followed, why
        return event  # refused where the state ignores chunks: the table keeps those states

    def lose_feedback(self):
        seeded = self.core.last_command is not None
        active = "joint_state" in self.core.status.problems
        event = None
        if seeded and not active:
            event = E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND if self.core.status.commands == 0 else E.FEEDBACK_LOST
        self.t += TIMEOUT_S + 0.1
        self.sent = self.core.tick(self.t)
        assert self.sent is None, "a command from a stale joint state"
        return event

    def feedback_back(self):
        self.t += 0.01
        self.core.set_measured_joints(self.q0, 0.5, measured_s=self.t)
        self.sent = self.core.tick(self.t)
        return E.FEEDBACK_FRESH  # (an unseeded command is seeded by this state first)

    def chunks_go_stale(self):
        self.t += STALE_S + 0.05
        self.core.set_measured_joints(self.q0, 0.5, measured_s=self.t)
        # staleness runs from the latest accepted chunk, which a clock jump or ~/resume forgets
        before, had_chunk = self.core.state, self.core._last_accept_s is not None
        self.sent = self.core.tick(self.t)
        if before in (S.FOLLOWING, S.FOLLOWING_SLOWLY) and had_chunk:
            assert self.core.status.activity == "hold_stale" and self.sent is not None
        return E.FEEDBACK_FRESH

    def clock_jump(self):
        self.t -= 50.0
        self.core.clock_jumped_back("test jump")
        assert self.core.last_command is None, "the command must wait for a state measured after the jump"
        assert self.core.tick(self.t) is None and self.core.status.activity == "waiting_for_joint_state"
        return E.CLOCK_JUMPED_BACK


ACTIONS = (
    "engage",
    "disengage",
    "resume",
    "stop",
    "chunk",
    "uncertain_chunk",
    "very_uncertain_chunk",
    "lose_feedback",
    "feedback_back",
    "chunks_go_stale",
    "clock_jump",
)


def key(rig: Rig):
    core = rig.core
    return (
        core.state,
        core.last_command is not None,
        core.status.commands > 0,
        "joint_state" in core.status.problems,
        core.supervisor.key(),
    )


def replay(kin, start_engaged: bool, path: tuple[str, ...], covered: set) -> Rig:
    """Run ``path`` on a fresh rig (after its first state and tick), checking each step against the table."""
    rig = Rig(kin, start_engaged)
    rig.core.set_measured_joints(rig.q0, 0.5, measured_s=rig.t)
    rig.core.tick(rig.t)
    for action in path:
        before = rig.core.state
        count = rig.core.status.transitions
        event = getattr(rig, action)()
        after = rig.core.state
        expected = TRANSITIONS[(before, event)] if event is not None else before
        assert after is expected, f"{' -> '.join(path)}: {before} + {event} gave {after}, the table says {expected}"
        if event is not None:
            covered.add((before, event))
        status = rig.core.status_snapshot()
        assert status.state is after
        if after is not before:
            assert status.transitions == count + 1
            assert status.last_transition == transition_text(before, event, after)
            assert status.recent_transitions[-1] == status.last_transition
        else:
            assert status.transitions == count
        if after in NOT_ENGAGED_YET or after in FEEDBACK_LOST - RESTART_GRANTED:
            assert rig.sent is None or action in (
                "engage",
                "disengage",
                "resume",
                "stop",
                "chunk",
                "uncertain_chunk",
                "very_uncertain_chunk",
                "clock_jump",
            )
    return rig


def test_the_table_names_a_next_state_for_every_state_and_event():
    assert set(TRANSITIONS) == {(s, e) for s in ExecutorState for e in ExecutorEvent}
    assert (
        transition_text(S.FOLLOWING, E.FEEDBACK_LOST, S.WAITING_FOR_CHUNK)
        == "following --feedback_lost--> waiting_for_chunk"
    )


def test_the_core_follows_the_table_for_every_reachable_transition(kin):
    covered: set = set()
    for start_engaged in (True, False):
        seen = set()
        queue = deque([()])
        while queue:
            path = queue.popleft()
            rig = replay(kin, start_engaged, path, covered)
            k = key(rig)
            if k in seen or len(path) >= 7:
                continue
            seen.add(k)
            queue.extend(path + (a,) for a in ACTIONS)
    missing = set(TRANSITIONS) - covered
    assert missing == UNREACHABLE, f"not walked: {sorted((s.value, e.value) for s, e in missing ^ UNREACHABLE)}"


def test_the_walk_catches_a_core_that_leaves_the_table(kin, monkeypatch):
    """The walk fails when the core and the table disagree: a table entry the core does not follow, and a core that
    never moves its state."""
    real = TRANSITIONS
    wrong = dict(real)
    wrong[(S.FOLLOWING, E.DISENGAGE)] = S.FOLLOWING  # what the walk expects; the core still stops
    monkeypatch.setitem(globals(), "TRANSITIONS", wrong)
    with pytest.raises(AssertionError, match="the table says"):
        replay(kin, True, ("disengage",), set())
    monkeypatch.setitem(globals(), "TRANSITIONS", real)
    monkeypatch.setattr(ExecutorCore, "_apply", lambda self, event: None)
    with pytest.raises(AssertionError, match="the table says"):
        replay(kin, True, ("lose_feedback",), set())


def test_a_stop_holds_and_a_loss_while_stopped_sends_nothing_until_resume(kin):
    """What the states mean for the arm: STOPPED repeats the last command; STOPPED_FEEDBACK_LOST sends nothing even
    with a fresh state; ~/resume then starts from the measured joints."""
    rig = replay(kin, True, ("chunk", "feedback_back", "feedback_back"), set())
    last = rig.sent.q_rad
    rig.disengage()
    rig.feedback_back()
    assert rig.core.state is S.STOPPED and np.array_equal(rig.sent.q_rad, last)
    rig.lose_feedback()
    rig.feedback_back()
    assert rig.core.state is S.STOPPED_FEEDBACK_LOST and rig.sent is None
    rig.engage()
    assert rig.core.state is S.RESUMING
    rig.feedback_back()
    assert rig.core.state is S.FOLLOWING and np.array_equal(rig.sent.q_rad, rig.q0)
