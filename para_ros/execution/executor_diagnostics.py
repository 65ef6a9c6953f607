"""What the chunk executor says on ``/diagnostics``, from its core's status alone: the level, the headline, the
problems and the key/values of one report, when a change is reported at once, and how a reader takes the state back.

ROS-free (the node only wraps the result into a ``diagnostic_msgs/DiagnosticStatus``), so every rule is unit-testable.
The state vocabulary: ``state`` is the executor's state (:class:`~para_ros.execution.executor_state.ExecutorState`:
who has the arm), ``activity`` its detail (:class:`~para_ros.execution.executor_state.TickActivity`: what the latest
tick did); the headline is ``state (activity)``, or the state alone where the activity repeats it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from para_ros.execution.executor_state import IGNORES_CHUNKS, TickActivity

if TYPE_CHECKING:  # light to import (the readers of recorded reports need no kinematics)
    from para_ros.execution.executor_core import ExecutorConfig, ExecutorStatus

# Levels, numbered as diagnostic_msgs/DiagnosticStatus numbers them (the node turns them into its byte constants).
OK, WARN, ERROR = 0, 1, 2

# Executor problems that are events, counted in ExecutorStatus: (counter, ERROR rather than WARN, its message from the
# status). Each is reported in the first /diagnostics after it happened and is gone from the next one unless it
# happened again (its condition is the event itself), see diagnostic_summary.
EVENT_PROBLEMS = (
    ("check_failures", True, lambda s: f"command failed the final limit check (not sent): {s.last_check_failure}"),
    ("chunks_rejected", False, lambda s: f"chunk rejected: {s.last_rejection}"),
    ("ik_failures", False, lambda s: f"unreachable target: {s.last_ik_error}"),
    ("limit_events", False, lambda s: f"limits applied: {s.last_limit_event}"),
    ("chunks_modified", False, lambda s: f"chunk modified: {s.last_warning}"),
)
# Activities that are not normal operation: /diagnostics is at least WARN while the activity lasts.
WARN_ACTIVITIES = frozenset(
    {
        TickActivity.HOLD_STALE,
        TickActivity.HOLD_UNCERTAIN,
        TickActivity.HOLD_UNREACHABLE,
        TickActivity.STOPPED,
        TickActivity.WAITING_FOR_JOINT_STATE,
        TickActivity.JOINT_STATE_LOST,
        TickActivity.WAITING_FOR_CHUNK,
        TickActivity.DISENGAGED,
    }
)


def reported_at_once(previous: str, activity: str) -> bool:
    """True when the executor's activity went from ``previous`` to ``activity`` into or out of a WARN activity: that
    change goes on ``/diagnostics`` at the tick it happens, not at the next periodic report, so whoever watches the arm
    (an operator, the evaluator timing a hold) hears within a tick that the arm stopped following chunks, and why."""
    return previous != activity and (previous in WARN_ACTIVITIES or activity in WARN_ACTIVITIES)


def diagnostic_summary(status: ExecutorStatus, previous: dict | None) -> tuple[int, list[str], dict]:
    """Level, problem texts and the counters to keep, for one ``/diagnostics`` report of an ``ExecutorStatus``.

    An active problem of ``status.problems`` (``joint_state``: lost feedback) is reported, at ERROR, for as long as the
    core keeps it (it removes it when the condition is gone); the confidence supervisor's reason for slowing or
    holding (``status.confidence_problem``) at WARN while it lasts; an event problem (:data:`EVENT_PROBLEMS`) is
    reported when its counter grew since the ``previous`` report's counters (None: the first report, every non-zero
    counter) and is gone from the next report if it did not happen again; an activity of :data:`WARN_ACTIVITIES`
    raises the level to WARN while it lasts.

    :returns: (level: :data:`OK` / :data:`WARN` / :data:`ERROR`, problem texts, the counters to pass as ``previous``
        next)
    """

    counters = {name: getattr(status, name) for name, _, _ in EVENT_PROBLEMS}
    problems = [f"{key}: {message}" for key, message in status.problems.items()]
    level = ERROR if problems else OK
    if status.confidence_problem:
        problems.append(f"confidence: {status.confidence_problem}")
        level = max(level, WARN)
    for name, is_error, describe in EVENT_PROBLEMS:
        if counters[name] - (previous or {}).get(name, 0) > 0:
            problems.append(describe(status))
            level = max(level, ERROR if is_error else WARN)
    if status.activity in WARN_ACTIVITIES:
        level = max(level, WARN)
    return level, problems, counters


def headline(status: ExecutorStatus, problems: list[str]) -> str:
    """The report's message: ``state (activity)`` (the state alone where the activity repeats its name), then the
    problems: ``following (hold_stale); chunk rejected: ...``."""
    state, activity = status.state.value, str(status.activity)
    text = state if activity == state else f"{state} ({activity})"
    return text + (f"; {'; '.join(problems)}" if problems else "")


def status_values(status: ExecutorStatus, config: ExecutorConfig) -> dict:
    """The key/values of one report from the core's status and configuration: the state and its activity, counters,
    the latest problems and transitions, the confidence supervisor's figures, the watchdog's times and every active
    problem as ``problem.<key>``. Times on the node's clock, as ``repr`` (full precision)."""
    s = status
    values = {
        "state": s.state.value,
        "activity": str(s.activity),
        "engaged": s.state not in IGNORES_CHUNKS,
        "chunks_received": s.chunks_received,
        "chunks_accepted": s.chunks_accepted,
        "chunks_rejected": s.chunks_rejected,
        "chunks_ignored_stopped": s.chunks_ignored_stopped,
        "chunks_modified": s.chunks_modified,
        "chunks_truncated": s.chunks_truncated,
        "chunks_in_force": s.chunks_in_force,
        "last_rejection": s.last_rejection,
        "last_warning": s.last_warning,
        "ik_failures": s.ik_failures,
        "last_ik_error": s.last_ik_error,
        "limit_events": s.limit_events,
        "last_limit_event": s.last_limit_event,
        "check_failures": s.check_failures,
        "ticks": s.ticks,
        "commands": s.commands,
        "last_command_stamp_s": repr(s.last_command_stamp_s),
        "last_chunk_accepted_s": repr(s.last_chunk_accepted_s),
        "joint_state_timeout_s": config.joint_state_timeout_s,
        "joint_state_age_s": repr(s.joint_state_age_s),
        "last_joint_state_s": repr(s.last_joint_state_s),
        "joint_state_losses": s.joint_state_losses,
        "chunks_ignored_no_state": s.chunks_ignored_no_state,
        "time_jumps_back": s.time_jumps_back,
        "last_time_jump": s.last_time_jump,
        "transitions": s.transitions,
        "last_transition": s.last_transition,
        "recent_transitions": "; ".join(s.recent_transitions),
        "confidence_supervisor": config.supervisor.enabled,
        "confidence": s.confidence,
        "confidence_problem": s.confidence_problem,
        "chunks_uncertain": s.chunks_uncertain,
        "chunks_held_uncertain": s.chunks_held_uncertain,
        "speed_scale": s.speed_scale,
        "control_rate_hz": config.control_rate_hz,
    }
    values.update({f"problem.{key}": text for key, text in s.problems.items()})
    return values


def control_loop_values(stats: dict, control_scheduler: str, ros_thread_scheduler: str) -> dict:
    """The control loop's timing figures (``FixedRateLoop.stats()``, seconds) as reported: milliseconds, NaN before
    the first ticks, and the schedulers the control thread and the node's own thread got."""
    return {
        "tick_compute_median_ms": 1e3 * stats.get("compute_median_s", float("nan")),
        "tick_start_error_p99_ms": 1e3 * stats.get("start_error_p99_s", float("nan")),
        "tick_period_error_p99_ms": 1e3 * stats.get("period_error_p99_s", float("nan")),
        "control_scheduler": control_scheduler,
        "ros_thread_scheduler": ros_thread_scheduler,
        "overruns": int(stats.get("overruns", 0)),
    }


def state_and_activity(values: dict) -> tuple[str, str]:
    """(state, activity) from a chunk executor's ``/diagnostics`` values: ``state`` and ``activity``, or, in a report
    recorded before the activity had its own key (no ``activity``), ``mode`` (the state then) and ``state`` (the
    activity then). Empty where a report says nothing."""
    if "activity" in values:
        return values.get("state", ""), values["activity"]
    return values.get("mode", ""), values.get("state", "")


class ActivityChanges:
    """The log line and the at-once report a change of the tick's activity calls for (lost feedback and its end):
    fed every tick's activity, it says what to log when feedback came back or commands resumed after a loss, and
    whether the change goes on ``/diagnostics`` at once (:func:`reported_at_once`).

    :param state_source: where the arm's state comes from, for the log lines (the joint-states topic, or the backend's
        read).
    """

    LOST = (TickActivity.JOINT_STATE_LOST, TickActivity.WAITING_FOR_CHUNK)
    IDLE = (
        TickActivity.DISENGAGED,
        TickActivity.STOPPED,
    )  # not following chunks: nothing is sent whatever the feedback

    def __init__(self, state_source: str):
        self.state_source = state_source
        self._last: TickActivity | None = None

    def update(self, activity: TickActivity) -> tuple[str, bool]:
        """The activity of the tick just run -> (an info line to log, or ""; whether to report at once)."""
        previous, self._last = self._last, activity
        if previous is None or activity == previous:
            return "", False
        note = ""
        if previous == TickActivity.JOINT_STATE_LOST and activity in (TickActivity.WAITING_FOR_CHUNK, *self.IDLE):
            until = "~/engage or ~/resume" if activity in self.IDLE else "a new chunk is accepted"
            note = f"joint state from {self.state_source} is fresh again: sending nothing until {until}"
        elif previous in self.LOST and activity not in (*self.LOST, *self.IDLE):
            note = f"new chunk after the joint state loss: commanding again ({activity}) from the measured joints"
        return note, reported_at_once(previous, activity)
