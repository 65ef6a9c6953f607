"""The chunk executor's safety state: one enum, the events that move it, and ONE table of its transitions.

The state says who has the arm and whether the executor may command it; what a tick does within a state (track a
chunk, hold because chunks went stale or a target is unreachable) is the tick's activity, reported next to it
(``ExecutorStatus.state``: ``tracking``, ``idle``, ``hold_stale``, ...). ``ExecutorCore`` (module docstring there)
performs each event's actions (clear the timeline, re-seed from the measured joints) and looks the next state up in
:data:`TRANSITIONS`; every change is counted and named on ``/diagnostics`` (``ExecutorStatus.last_transition``).

States, by who has the arm:

- not engaged yet (``auto_engage: false``): ``DISENGAGED`` sends nothing and ignores chunks;
  ``DISENGAGED_FEEDBACK_LOST`` is the same while a loss of the measured joint state is not over (a fresh state ends
  it);
- engaged: ``FOLLOWING`` follows chunks (or holds: stale chunks, unreachable targets); after a lost joint state
  (``joint_state_timeout_s``) ``WAITING_FOR_CHUNK`` sends nothing until a chunk is accepted after the loss or
  ``~/resume`` is called, which leads to ``RESUMING``: the first tick with a fresh state re-seeds the command from the
  measured joints and follows again (never towards an old target);
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

from enum import Enum


class ExecutorState(Enum):
    """Who has the arm and whether the executor may command it (module docstring)."""

    DISENGAGED = "disengaged"
    DISENGAGED_FEEDBACK_LOST = "disengaged_feedback_lost"
    FOLLOWING = "following"
    WAITING_FOR_CHUNK = "waiting_for_chunk"
    RESUMING = "resuming"
    STOPPED = "stopped"
    STOPPED_FEEDBACK_LOST = "stopped_feedback_lost"
    STOPPED_RESUMING = "stopped_resuming"


class ExecutorEvent(Enum):
    """What moves the state: a service call, a chunk, the watchdog at a tick, the clock."""

    ENGAGE = "engage"  # ~/engage or ~/resume
    DISENGAGE = "disengage"  # ~/disengage or ~/stop
    CHUNK_ACCEPTED = "chunk_accepted"
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
    (S.DISENGAGED_FEEDBACK_LOST, E.ENGAGE): S.RESUMING,
    (S.DISENGAGED_FEEDBACK_LOST, E.DISENGAGE): S.DISENGAGED_FEEDBACK_LOST,
    (S.DISENGAGED_FEEDBACK_LOST, E.CHUNK_ACCEPTED): S.DISENGAGED_FEEDBACK_LOST,  # never accepted
    (S.DISENGAGED_FEEDBACK_LOST, E.FEEDBACK_LOST): S.DISENGAGED_FEEDBACK_LOST,
    (S.DISENGAGED_FEEDBACK_LOST, E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND): S.DISENGAGED_FEEDBACK_LOST,
    (S.DISENGAGED_FEEDBACK_LOST, E.FEEDBACK_FRESH): S.DISENGAGED,
    (S.DISENGAGED_FEEDBACK_LOST, E.CLOCK_JUMPED_BACK): S.DISENGAGED_FEEDBACK_LOST,
    (S.FOLLOWING, E.ENGAGE): S.FOLLOWING,
    (S.FOLLOWING, E.DISENGAGE): S.STOPPED,
    (S.FOLLOWING, E.CHUNK_ACCEPTED): S.FOLLOWING,
    (S.FOLLOWING, E.FEEDBACK_LOST): S.WAITING_FOR_CHUNK,
    (S.FOLLOWING, E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND): S.RESUMING,
    (S.FOLLOWING, E.FEEDBACK_FRESH): S.FOLLOWING,
    (S.FOLLOWING, E.CLOCK_JUMPED_BACK): S.FOLLOWING,
    (S.WAITING_FOR_CHUNK, E.ENGAGE): S.RESUMING,
    (S.WAITING_FOR_CHUNK, E.DISENGAGE): S.STOPPED_FEEDBACK_LOST,
    (S.WAITING_FOR_CHUNK, E.CHUNK_ACCEPTED): S.RESUMING,
    (S.WAITING_FOR_CHUNK, E.FEEDBACK_LOST): S.WAITING_FOR_CHUNK,
    (S.WAITING_FOR_CHUNK, E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND): S.RESUMING,
    (S.WAITING_FOR_CHUNK, E.FEEDBACK_FRESH): S.WAITING_FOR_CHUNK,  # fresh, but no chunk since the loss
    (S.WAITING_FOR_CHUNK, E.CLOCK_JUMPED_BACK): S.WAITING_FOR_CHUNK,
    (S.RESUMING, E.ENGAGE): S.RESUMING,
    (S.RESUMING, E.DISENGAGE): S.STOPPED_FEEDBACK_LOST,
    (S.RESUMING, E.CHUNK_ACCEPTED): S.RESUMING,
    (S.RESUMING, E.FEEDBACK_LOST): S.WAITING_FOR_CHUNK,
    (S.RESUMING, E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND): S.RESUMING,
    (S.RESUMING, E.FEEDBACK_FRESH): S.FOLLOWING,  # re-seeded from the measured joints
    (S.RESUMING, E.CLOCK_JUMPED_BACK): S.RESUMING,
    (S.STOPPED, E.ENGAGE): S.FOLLOWING,
    (S.STOPPED, E.DISENGAGE): S.STOPPED,
    (S.STOPPED, E.CHUNK_ACCEPTED): S.STOPPED,  # never accepted: chunks are ignored
    (S.STOPPED, E.FEEDBACK_LOST): S.STOPPED_FEEDBACK_LOST,
    (S.STOPPED, E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND): S.STOPPED_RESUMING,
    (S.STOPPED, E.FEEDBACK_FRESH): S.STOPPED,
    (S.STOPPED, E.CLOCK_JUMPED_BACK): S.STOPPED,
    (S.STOPPED_FEEDBACK_LOST, E.ENGAGE): S.RESUMING,
    (S.STOPPED_FEEDBACK_LOST, E.DISENGAGE): S.STOPPED_FEEDBACK_LOST,
    (S.STOPPED_FEEDBACK_LOST, E.CHUNK_ACCEPTED): S.STOPPED_FEEDBACK_LOST,  # never accepted
    (S.STOPPED_FEEDBACK_LOST, E.FEEDBACK_LOST): S.STOPPED_FEEDBACK_LOST,
    (S.STOPPED_FEEDBACK_LOST, E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND): S.STOPPED_RESUMING,
    (S.STOPPED_FEEDBACK_LOST, E.FEEDBACK_FRESH): S.STOPPED_FEEDBACK_LOST,  # fresh, but stopped: ~/resume ends it
    (S.STOPPED_FEEDBACK_LOST, E.CLOCK_JUMPED_BACK): S.STOPPED_FEEDBACK_LOST,
    (S.STOPPED_RESUMING, E.ENGAGE): S.RESUMING,
    (S.STOPPED_RESUMING, E.DISENGAGE): S.STOPPED_FEEDBACK_LOST,
    (S.STOPPED_RESUMING, E.CHUNK_ACCEPTED): S.STOPPED_RESUMING,  # never accepted
    (S.STOPPED_RESUMING, E.FEEDBACK_LOST): S.STOPPED_FEEDBACK_LOST,
    (S.STOPPED_RESUMING, E.FEEDBACK_LOST_BEFORE_FIRST_COMMAND): S.STOPPED_RESUMING,
    (S.STOPPED_RESUMING, E.FEEDBACK_FRESH): S.STOPPED,  # re-seeded from the measured joints; holds there
    (S.STOPPED_RESUMING, E.CLOCK_JUMPED_BACK): S.STOPPED_RESUMING,
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
RESTART_GRANTED = frozenset(
    {ExecutorState.DISENGAGED_FEEDBACK_LOST, ExecutorState.RESUMING, ExecutorState.STOPPED_RESUMING}
)  # the next fresh state ends the loss


def next_state(state: ExecutorState, event: ExecutorEvent) -> ExecutorState:
    """The state after ``event`` in ``state`` (:data:`TRANSITIONS`)."""
    return TRANSITIONS[(state, event)]


def transition_text(before: ExecutorState, event: ExecutorEvent, after: ExecutorState) -> str:
    """How a transition is named on ``/diagnostics``: ``following --feedback_lost--> waiting_for_chunk``."""
    return f"{before.value} --{event.value}--> {after.value}"
