"""The chunk executor's safety state: one enum, the events that move it, and ONE table of its transitions.

The state (:class:`ExecutorState`) is THE executor's state: who has the arm and whether the executor may command it
(``ExecutorStatus.state``, ``state`` on ``/diagnostics``). What a tick does within it (track a chunk, hold because chunks
went stale or a target is unreachable, send nothing for want of a joint state) is the state's detail, the tick's
activity (:class:`TickActivity`; ``ExecutorStatus.activity``, ``activity`` on ``/diagnostics``). ``ExecutorCore``
(module docstring there) performs each event's actions (clear the timeline, re-seed from the measured joints) and looks
the next state up in :data:`TRANSITIONS`; every change is counted and named on ``/diagnostics``
(``ExecutorStatus.last_transition``).

States, by who has the arm:

- not engaged yet (``auto_engage: false``): ``DISENGAGED`` sends nothing and ignores chunks;
  ``DISENGAGED_FEEDBACK_LOST`` is the same while a loss of the measured joint state is not over (a fresh state ends
  it);
- engaged: ``FOLLOWING`` follows chunks (or holds: stale chunks, unreachable targets); after a lost joint state
  (``joint_state_timeout_s``) ``WAITING_FOR_CHUNK`` sends nothing until a chunk is accepted after the loss or
  ``~/resume`` is called, which leads to ``RESUMING``: the first tick with a fresh state re-seeds the command from the
  measured joints and follows again (never towards an old target);
- engaged, and the policy unsure of itself (the confidence supervisor, ``para_ros.execution.confidence_supervisor``,
  judges each accepted chunk as one of the chunk events): ``FOLLOWING_SLOWLY`` follows chunks with the speed limits
  scaled down (``CHUNK_UNCERTAIN``); ``HOLDING_UNCERTAIN`` holds the last command and follows no chunk
  (``CHUNK_VERY_UNCERTAIN``: a hold threshold crossed for ``hold_after_s``); both end with ``CONFIDENT_AGAIN``
  (``resume_after_chunks`` confident chunks in a row) or ``~/resume``. Slowing is never holding's way out: a hold
  ends only at full confidence. In the feedback-loss states a chunk's confidence decides only whether it is followed
  (a very uncertain chunk grants no restart); once following again, the next uncertain chunk slows or holds again;
- stopped (``~/stop`` / ``~/disengage`` after an engage): ``STOPPED`` holds the last command; ``STOPPED_FEEDBACK_LOST``
  sends nothing (the loss happened while stopped, or the stop came during one) until ``~/resume``;
  ``STOPPED_RESUMING`` is a loss before the first command was ever sent: a fresh state alone ends it.

A loss of the measured state before the first command was ever sent (with ``use_sim_time`` the first state can predate
``/clock``) leads to the ``*_RESUMING`` state of the same side (``FEEDBACK_LOST_BEFORE_FIRST_COMMAND``): there is no
plan to protect yet. A clock jump back (``CLOCK_JUMPED_BACK``) keeps the state: the executor drops everything timed on
the old clock and needs a state measured after the jump to seed its command again (until then every tick sends nothing
and reports ``waiting_for_joint_state``, as before the first state), then goes on as the state says.

One simplification of the rules before this table: ``~/disengage`` while disengaged during a loss keeps the restart
granted (the first fresh state ends the loss; ``~/engage`` then starts from the measured joints, as it always does).
"""

from __future__ import annotations

from enum import Enum, StrEnum


class ExecutorState(Enum):
    """Who has the arm and whether the executor may command it (module docstring)."""

    DISENGAGED = "disengaged"
    DISENGAGED_FEEDBACK_LOST = "disengaged_feedback_lost"
    FOLLOWING = "following"
    FOLLOWING_SLOWLY = "following_slowly"
    HOLDING_UNCERTAIN = "holding_uncertain"
    WAITING_FOR_CHUNK = "waiting_for_chunk"
    RESUMING = "resuming"
    STOPPED = "stopped"
    STOPPED_FEEDBACK_LOST = "stopped_feedback_lost"
    STOPPED_RESUMING = "stopped_resuming"


class TickActivity(StrEnum):
    """What the latest tick did within the state, or waits for: the state's detail (module docstring).

    A ``StrEnum``: readers of ``/diagnostics`` compare its text (``activity``) with these members directly. Three
    activities repeat the name of the state they belong to (``stopped``, ``disengaged``, ``waiting_for_chunk``): there
    the state says it all, and the tick holds (stopped) or sends nothing (the other two)."""

    WAITING_FOR_JOINT_STATE = (
        "waiting_for_joint_state"  # no measured state yet (or none since a clock jump): nothing sent
    )
    IDLE = "idle"  # holds: no chunk gives a target now
    TRACKING = "tracking"  # follows the timeline's target
    HOLD_STALE = "hold_stale"  # holds: no chunk accepted for stale_timeout_s
    HOLD_UNREACHABLE = "hold_unreachable"  # holds: IK cannot reach the target (unreachable: hold)
    HOLD_UNCERTAIN = "hold_uncertain"  # holds: the confidence supervisor (state HOLDING_UNCERTAIN)
    STOPPED = "stopped"  # a stopped state: holds the last command (nothing sent while a feedback loss is not over)
    DISENGAGED = "disengaged"  # not engaged yet (auto_engage false): nothing sent
    JOINT_STATE_LOST = "joint_state_lost"  # the measured state is older than joint_state_timeout_s: nothing sent
    WAITING_FOR_CHUNK = "waiting_for_chunk"  # fresh state after a loss, no chunk since: nothing sent


class ExecutorEvent(Enum):
    """What moves the state: a service call, a chunk, the watchdog at a tick, the clock."""

    ENGAGE = "engage"  # ~/engage or ~/resume
    DISENGAGE = "disengage"  # ~/disengage or ~/stop
    CHUNK_ACCEPTED = "chunk_accepted"  # confident (or the supervisor off); while slowed or holding: too few in a row
    CHUNK_UNCERTAIN = "chunk_uncertain"  # a slow threshold crossed (or a hold one, for less than hold_after_s)
    CHUNK_VERY_UNCERTAIN = "chunk_very_uncertain"  # a hold threshold crossed for hold_after_s: not followed
    CONFIDENT_AGAIN = "confident_again"  # resume_after_chunks confident chunks in a row after uncertain ones
    FEEDBACK_LOST = "feedback_lost"  # a tick found the measured state older than joint_state_timeout_s
    FEEDBACK_LOST_BEFORE_FIRST_COMMAND = "feedback_lost_before_first_command"  # ... before any command was sent
    FEEDBACK_FRESH = "feedback_fresh"  # a tick found a fresh state again after a loss
    CLOCK_JUMPED_BACK = "clock_jumped_back"


S, E = ExecutorState, ExecutorEvent

# (state, event) -> next state. Every state appears with every event; a pair that leaves the state as it is says so.
TRANSITIONS: dict[tuple[ExecutorState, ExecutorEvent], ExecutorState] = {
    # state                          event                                      next state
    (S.DISENGAGED, E.ENGAGE): S.FOLLOWING,
    (S.DISENGAGED, E.DISENGAGE): S.DISENGAGED,
    (S.DISENGAGED, E.CHUNK_ACCEPTED): S.DISENGAGED,  # never accepted: chunks are ignored
    (S.DISENGAGED, E.FEEDBACK_LOST): S.DISENGAGED_FEEDBACK_LOST,  # (not reached: nothing was ever sent)
    (S.DISENGAGED, E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND): S.DISENGAGED_FEEDBACK_LOST,
    (S.DISENGAGED, E.FEEDBACK_FRESH): S.DISENGAGED,
    (S.DISENGAGED, E.CLOCK_JUMPED_BACK): S.DISENGAGED,
    (S.DISENGAGED, E.CHUNK_UNCERTAIN): S.DISENGAGED,  # never judged: chunks are ignored
    (S.DISENGAGED, E.CHUNK_VERY_UNCERTAIN): S.DISENGAGED,  # never judged: chunks are ignored
    (S.DISENGAGED, E.CONFIDENT_AGAIN): S.DISENGAGED,  # never judged: chunks are ignored
    (S.DISENGAGED_FEEDBACK_LOST, E.ENGAGE): S.RESUMING,
    (S.DISENGAGED_FEEDBACK_LOST, E.DISENGAGE): S.DISENGAGED_FEEDBACK_LOST,
    (S.DISENGAGED_FEEDBACK_LOST, E.CHUNK_ACCEPTED): S.DISENGAGED_FEEDBACK_LOST,  # never accepted
    (S.DISENGAGED_FEEDBACK_LOST, E.FEEDBACK_LOST): S.DISENGAGED_FEEDBACK_LOST,
    (S.DISENGAGED_FEEDBACK_LOST, E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND): S.DISENGAGED_FEEDBACK_LOST,
    (S.DISENGAGED_FEEDBACK_LOST, E.FEEDBACK_FRESH): S.DISENGAGED,
    (S.DISENGAGED_FEEDBACK_LOST, E.CLOCK_JUMPED_BACK): S.DISENGAGED_FEEDBACK_LOST,
    (S.DISENGAGED_FEEDBACK_LOST, E.CHUNK_UNCERTAIN): S.DISENGAGED_FEEDBACK_LOST,  # never judged
    (S.DISENGAGED_FEEDBACK_LOST, E.CHUNK_VERY_UNCERTAIN): S.DISENGAGED_FEEDBACK_LOST,  # never judged
    (S.DISENGAGED_FEEDBACK_LOST, E.CONFIDENT_AGAIN): S.DISENGAGED_FEEDBACK_LOST,  # never judged
    (S.FOLLOWING, E.ENGAGE): S.FOLLOWING,
    (S.FOLLOWING, E.DISENGAGE): S.STOPPED,
    (S.FOLLOWING, E.CHUNK_ACCEPTED): S.FOLLOWING,
    (S.FOLLOWING, E.FEEDBACK_LOST): S.WAITING_FOR_CHUNK,
    (S.FOLLOWING, E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND): S.RESUMING,
    (S.FOLLOWING, E.FEEDBACK_FRESH): S.FOLLOWING,
    (S.FOLLOWING, E.CLOCK_JUMPED_BACK): S.FOLLOWING,
    (S.FOLLOWING, E.CHUNK_UNCERTAIN): S.FOLLOWING_SLOWLY,
    (S.FOLLOWING, E.CHUNK_VERY_UNCERTAIN): S.HOLDING_UNCERTAIN,
    (S.FOLLOWING, E.CONFIDENT_AGAIN): S.FOLLOWING,
    (S.FOLLOWING_SLOWLY, E.ENGAGE): S.FOLLOWING,  # ~/resume: full speed (the supervisor's spell forgotten)
    (S.FOLLOWING_SLOWLY, E.DISENGAGE): S.STOPPED,
    (S.FOLLOWING_SLOWLY, E.CHUNK_ACCEPTED): S.FOLLOWING_SLOWLY,  # confident, but too few in a row yet
    (S.FOLLOWING_SLOWLY, E.FEEDBACK_LOST): S.WAITING_FOR_CHUNK,
    (S.FOLLOWING_SLOWLY, E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND): S.RESUMING,
    (S.FOLLOWING_SLOWLY, E.FEEDBACK_FRESH): S.FOLLOWING_SLOWLY,
    (S.FOLLOWING_SLOWLY, E.CLOCK_JUMPED_BACK): S.FOLLOWING_SLOWLY,
    (S.FOLLOWING_SLOWLY, E.CHUNK_UNCERTAIN): S.FOLLOWING_SLOWLY,
    (S.FOLLOWING_SLOWLY, E.CHUNK_VERY_UNCERTAIN): S.HOLDING_UNCERTAIN,
    (S.FOLLOWING_SLOWLY, E.CONFIDENT_AGAIN): S.FOLLOWING,
    (S.HOLDING_UNCERTAIN, E.ENGAGE): S.FOLLOWING,  # ~/resume: the operator takes over the judgement
    (S.HOLDING_UNCERTAIN, E.DISENGAGE): S.STOPPED,
    (S.HOLDING_UNCERTAIN, E.CHUNK_ACCEPTED): S.HOLDING_UNCERTAIN,  # confident, but too few in a row: not followed
    (S.HOLDING_UNCERTAIN, E.FEEDBACK_LOST): S.WAITING_FOR_CHUNK,
    (S.HOLDING_UNCERTAIN, E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND): S.RESUMING,
    (S.HOLDING_UNCERTAIN, E.FEEDBACK_FRESH): S.HOLDING_UNCERTAIN,
    (S.HOLDING_UNCERTAIN, E.CLOCK_JUMPED_BACK): S.HOLDING_UNCERTAIN,
    (S.HOLDING_UNCERTAIN, E.CHUNK_UNCERTAIN): S.HOLDING_UNCERTAIN,  # no way out through slowing
    (S.HOLDING_UNCERTAIN, E.CHUNK_VERY_UNCERTAIN): S.HOLDING_UNCERTAIN,
    (S.HOLDING_UNCERTAIN, E.CONFIDENT_AGAIN): S.FOLLOWING,
    (S.WAITING_FOR_CHUNK, E.ENGAGE): S.RESUMING,
    (S.WAITING_FOR_CHUNK, E.DISENGAGE): S.STOPPED_FEEDBACK_LOST,
    (S.WAITING_FOR_CHUNK, E.CHUNK_ACCEPTED): S.RESUMING,
    (S.WAITING_FOR_CHUNK, E.FEEDBACK_LOST): S.WAITING_FOR_CHUNK,
    (S.WAITING_FOR_CHUNK, E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND): S.RESUMING,
    (S.WAITING_FOR_CHUNK, E.FEEDBACK_FRESH): S.WAITING_FOR_CHUNK,  # fresh, but no chunk since the loss
    (S.WAITING_FOR_CHUNK, E.CLOCK_JUMPED_BACK): S.WAITING_FOR_CHUNK,
    (S.WAITING_FOR_CHUNK, E.CHUNK_UNCERTAIN): S.RESUMING,
    (S.WAITING_FOR_CHUNK, E.CHUNK_VERY_UNCERTAIN): S.WAITING_FOR_CHUNK,  # a very uncertain chunk grants no restart
    (S.WAITING_FOR_CHUNK, E.CONFIDENT_AGAIN): S.RESUMING,
    (S.RESUMING, E.ENGAGE): S.RESUMING,
    (S.RESUMING, E.DISENGAGE): S.STOPPED_FEEDBACK_LOST,
    (S.RESUMING, E.CHUNK_ACCEPTED): S.RESUMING,
    (S.RESUMING, E.FEEDBACK_LOST): S.WAITING_FOR_CHUNK,
    (S.RESUMING, E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND): S.RESUMING,
    (S.RESUMING, E.FEEDBACK_FRESH): S.FOLLOWING,  # re-seeded from the measured joints
    (S.RESUMING, E.CLOCK_JUMPED_BACK): S.RESUMING,
    (S.RESUMING, E.CHUNK_UNCERTAIN): S.RESUMING,
    (S.RESUMING, E.CHUNK_VERY_UNCERTAIN): S.RESUMING,
    (S.RESUMING, E.CONFIDENT_AGAIN): S.RESUMING,
    (S.STOPPED, E.ENGAGE): S.FOLLOWING,
    (S.STOPPED, E.DISENGAGE): S.STOPPED,
    (S.STOPPED, E.CHUNK_ACCEPTED): S.STOPPED,  # never accepted: chunks are ignored
    (S.STOPPED, E.FEEDBACK_LOST): S.STOPPED_FEEDBACK_LOST,
    (S.STOPPED, E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND): S.STOPPED_RESUMING,
    (S.STOPPED, E.FEEDBACK_FRESH): S.STOPPED,
    (S.STOPPED, E.CLOCK_JUMPED_BACK): S.STOPPED,
    (S.STOPPED, E.CHUNK_UNCERTAIN): S.STOPPED,  # never judged: chunks are ignored
    (S.STOPPED, E.CHUNK_VERY_UNCERTAIN): S.STOPPED,  # never judged: chunks are ignored
    (S.STOPPED, E.CONFIDENT_AGAIN): S.STOPPED,  # never judged: chunks are ignored
    (S.STOPPED_FEEDBACK_LOST, E.ENGAGE): S.RESUMING,
    (S.STOPPED_FEEDBACK_LOST, E.DISENGAGE): S.STOPPED_FEEDBACK_LOST,
    (S.STOPPED_FEEDBACK_LOST, E.CHUNK_ACCEPTED): S.STOPPED_FEEDBACK_LOST,  # never accepted
    (S.STOPPED_FEEDBACK_LOST, E.FEEDBACK_LOST): S.STOPPED_FEEDBACK_LOST,
    (S.STOPPED_FEEDBACK_LOST, E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND): S.STOPPED_RESUMING,
    (S.STOPPED_FEEDBACK_LOST, E.FEEDBACK_FRESH): S.STOPPED_FEEDBACK_LOST,  # fresh, but stopped: ~/resume ends it
    (S.STOPPED_FEEDBACK_LOST, E.CLOCK_JUMPED_BACK): S.STOPPED_FEEDBACK_LOST,
    (S.STOPPED_FEEDBACK_LOST, E.CHUNK_UNCERTAIN): S.STOPPED_FEEDBACK_LOST,  # never judged
    (S.STOPPED_FEEDBACK_LOST, E.CHUNK_VERY_UNCERTAIN): S.STOPPED_FEEDBACK_LOST,  # never judged
    (S.STOPPED_FEEDBACK_LOST, E.CONFIDENT_AGAIN): S.STOPPED_FEEDBACK_LOST,  # never judged
    (S.STOPPED_RESUMING, E.ENGAGE): S.RESUMING,
    (S.STOPPED_RESUMING, E.DISENGAGE): S.STOPPED_FEEDBACK_LOST,
    (S.STOPPED_RESUMING, E.CHUNK_ACCEPTED): S.STOPPED_RESUMING,  # never accepted
    (S.STOPPED_RESUMING, E.FEEDBACK_LOST): S.STOPPED_FEEDBACK_LOST,
    (S.STOPPED_RESUMING, E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND): S.STOPPED_RESUMING,
    (S.STOPPED_RESUMING, E.FEEDBACK_FRESH): S.STOPPED,  # re-seeded from the measured joints; holds there
    (S.STOPPED_RESUMING, E.CLOCK_JUMPED_BACK): S.STOPPED_RESUMING,
    (S.STOPPED_RESUMING, E.CHUNK_UNCERTAIN): S.STOPPED_RESUMING,  # never judged
    (S.STOPPED_RESUMING, E.CHUNK_VERY_UNCERTAIN): S.STOPPED_RESUMING,  # never judged
    (S.STOPPED_RESUMING, E.CONFIDENT_AGAIN): S.STOPPED_RESUMING,  # never judged
}
del S, E

# Groups of states the executor's rules read (each a property of the state, derived from the table's states).
NOT_ENGAGED_YET = frozenset({ExecutorState.DISENGAGED, ExecutorState.DISENGAGED_FEEDBACK_LOST})  # sends nothing
IGNORES_CHUNKS = NOT_ENGAGED_YET | {
    ExecutorState.STOPPED,
    ExecutorState.STOPPED_FEEDBACK_LOST,
    ExecutorState.STOPPED_RESUMING,
}  # stopped or never engaged: holds, no chunks
FEEDBACK_LOST = frozenset(
    {
        ExecutorState.DISENGAGED_FEEDBACK_LOST,
        ExecutorState.WAITING_FOR_CHUNK,
        ExecutorState.RESUMING,
        ExecutorState.STOPPED_FEEDBACK_LOST,
        ExecutorState.STOPPED_RESUMING,
    }
)  # a loss is not over: the command needs a re-seed
SLOWED = frozenset({ExecutorState.FOLLOWING_SLOWLY})  # follows chunks with the speed limits scaled down
HOLDS_UNCERTAIN = frozenset({ExecutorState.HOLDING_UNCERTAIN})  # holds the last command, follows no chunk
RESTART_GRANTED = frozenset(
    {ExecutorState.DISENGAGED_FEEDBACK_LOST, ExecutorState.RESUMING, ExecutorState.STOPPED_RESUMING}
)  # the next fresh state ends the loss


def next_state(state: ExecutorState, event: ExecutorEvent) -> ExecutorState:
    """The state after ``event`` in ``state`` (:data:`TRANSITIONS`)."""
    return TRANSITIONS[(state, event)]


def transition_text(before: ExecutorState, event: ExecutorEvent, after: ExecutorState) -> str:
    """How a transition is named on ``/diagnostics``: ``following --feedback_lost--> waiting_for_chunk``."""
    return f"{before.value} --{event.value}--> {after.value}"
