"""The confidence supervisor: judges each chunk by the policy's own confidence measures and names the event it is for
the executor's state table (docs/confidence.md).

PARA says, per step, how sure it is (``para_core.model.confidence``: peak mass, entropy, chunk agreement, view
agreement; carried in the chunk). The supervisor reduces each accepted chunk to its worst value of each measure over
its first ``steps_checked`` steps (``para_core.model.confidence.worst_step``) and compares it with two thresholds per
measure, a *slow* one and a stricter *hold* one ("below" for all measures but the entropy, where "above"):

- every measure within its slow threshold: a confident chunk (``CHUNK_ACCEPTED``); after uncertain chunks,
  ``resume_after_chunks`` confident chunks in a row end the spell (``CONFIDENT_AGAIN``): the arm follows at full
  speed again (hysteresis: one good chunk among bad ones does not);
- some measure beyond its slow threshold, none beyond its hold threshold for ``hold_after_s`` yet: ``CHUNK_UNCERTAIN``
  (the executor follows the chunk with its speed limits scaled by ``slow_speed_scale``);
- one measure beyond its hold threshold in every chunk for at least ``hold_after_s`` (a clock per measure):
  ``CHUNK_VERY_UNCERTAIN`` (the executor holds where it is and drops the chunk), with the reason (``policy uncertain:
  peak mass 0.03 at step 2 for 1.2 s``).

For ``grace_s`` after the arm is handed to the policy (:meth:`ConfidenceSupervisor.reset`: ``~/engage``,
``~/resume``), counted from the first chunk after it, the measures are not judged: every chunk is followed at full
speed and the clocks start after the grace. From a standstill the policy is often unsure in its first second (in real
time, 13 of 30 nominal episodes' first chunks were below the hold thresholds), and a hold there is absorbing: the arm
stands still, the images stay the same, and so does the policy's doubt.

A second sign, the policy contradicting the arm: a chunk the executor's checks refuse (its first step an implausible
jump from where the tool is, a chunk from the future, garbage) is not judged by its measures, but the supervisor
counts it: ``rejected_hold_count`` of the last ``rejected_window_chunks`` chunks refused is ``CHUNK_VERY_UNCERTAIN``
(``policy inconsistent: 8 of the last 10 chunks refused by the chunk checks (...)``). A policy that keeps predicting
the tool where it is not, chunk after chunk, is lost however sure each chunk looks.

What each event does in each state is the executor's table (``para_ros.execution.executor_state``); the supervisor
only decides which event a chunk is. It never commands anything: slowing tightens the safety filter's limits and
holding repeats the last command, so every command still passes the same filter and final check. A measure the chunk
does not carry (an empty array) is not judged. ``enabled: False`` (the default here) judges nothing: every chunk is
``CHUNK_ACCEPTED``.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from para_core.model.confidence_measures import HIGH_IS_BAD, MEASURE_TITLES, MEASURES, worst_step
from para_ros.execution.chunk import Chunk
from para_ros.execution.executor_state import ExecutorEvent

# Threshold fields of SupervisorConfig, per measure: (slow, hold). "below" thresholds off at 0, "above" ones at 1.
THRESHOLD_FIELDS = {
    "peak_mass": ("peak_mass_slow_below", "peak_mass_hold_below"),
    "entropy": ("entropy_slow_above", "entropy_hold_above"),
    "chunk_agreement": ("chunk_agreement_slow_below", "chunk_agreement_hold_below"),
    "view_agreement": ("view_agreement_slow_below", "view_agreement_hold_below"),
}


@dataclass
class SupervisorConfig:
    """When the executor slows and holds for an uncertain policy (ROS parameters ``confidence_*`` of the executor node).

    Args:
        enabled: judge chunks at all; False: every chunk is followed as it is.
        peak_mass_slow_below, peak_mass_hold_below: thresholds on the peak mass (0 = that threshold is off).
        entropy_slow_above, entropy_hold_above: thresholds on the normalised entropy (1 = off).
        chunk_agreement_slow_below, chunk_agreement_hold_below: thresholds on the chunk agreement (0 = off).
        view_agreement_slow_below, view_agreement_hold_below: thresholds on the view agreement (0 = off).
        steps_checked: judge the first this many steps of a chunk (the ones executed before the next chunk comes);
            0 = every step.
        hold_after_s: hold once one measure has been beyond its hold threshold in every chunk for this long (s; 0: at
            the first such chunk).
        grace_s: after a reset (the arm handed to the policy), chunks within this long of the first one are not
            judged by their measures (module docstring); 0: judge from the first chunk.
        resume_after_chunks: confident chunks in a row that end a spell of uncertain ones (follow at full speed).
        slow_speed_scale: while slowed, the joint and tool speed limits are this fraction of the YAM's (0, 1].
        rejected_hold_count: hold once this many of the last ``rejected_window_chunks`` chunks were refused by the
            executor's chunk checks (0 = off).
        rejected_window_chunks: how many of the latest chunks that count looks at (at least ``rejected_hold_count``).
    """

    enabled: bool = False
    peak_mass_slow_below: float = 0.0
    peak_mass_hold_below: float = 0.0
    entropy_slow_above: float = 1.0
    entropy_hold_above: float = 1.0
    chunk_agreement_slow_below: float = 0.0
    chunk_agreement_hold_below: float = 0.0
    view_agreement_slow_below: float = 0.0
    view_agreement_hold_below: float = 0.0
    steps_checked: int = 0
    hold_after_s: float = 0.5
    grace_s: float = 0.0
    resume_after_chunks: int = 3
    slow_speed_scale: float = 0.3
    rejected_hold_count: int = 0
    rejected_window_chunks: int = 10

    def __post_init__(self):
        for measure, (slow, hold) in THRESHOLD_FIELDS.items():
            for name in (slow, hold):
                value = getattr(self, name)
                if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                    raise ValueError(f"SupervisorConfig.{name}={value!r}: use a number in [0, 1]")
            s, h = getattr(self, slow), getattr(self, hold)
            if not (h >= s if measure in HIGH_IS_BAD else h <= s):
                raise ValueError(
                    f"SupervisorConfig {hold}={h!r} is less strict than {slow}={s!r}: the hold threshold must be "
                    f"{'at or above' if measure in HIGH_IS_BAD else 'at or below'} the slow one (it slows first)"
                )
        if isinstance(self.steps_checked, bool) or not isinstance(self.steps_checked, int) or self.steps_checked < 0:
            raise ValueError(f"SupervisorConfig.steps_checked={self.steps_checked!r}: use an integer >= 0 (0 = all)")
        for name in ("hold_after_s", "grace_s"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not (math.isfinite(value) and value >= 0)
            ):
                raise ValueError(f"SupervisorConfig.{name}={value!r}: use a time >= 0 s")
        if (
            isinstance(self.resume_after_chunks, bool)
            or not isinstance(self.resume_after_chunks, int)
            or self.resume_after_chunks < 1
        ):
            raise ValueError(f"SupervisorConfig.resume_after_chunks={self.resume_after_chunks!r}: use an integer >= 1")
        if not (math.isfinite(self.slow_speed_scale) and 0.0 < self.slow_speed_scale <= 1.0):
            raise ValueError(f"SupervisorConfig.slow_speed_scale={self.slow_speed_scale!r}: use a fraction in (0, 1]")
        for name, low in (("rejected_window_chunks", 1), ("rejected_hold_count", 0)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"SupervisorConfig.{name}={value!r}: use an integer >= {low}")
        if self.rejected_hold_count > self.rejected_window_chunks:
            raise ValueError(
                f"SupervisorConfig.rejected_hold_count={self.rejected_hold_count} is more than rejected_window_chunks="
                f"{self.rejected_window_chunks}: it could never be reached"
            )

    def thresholds(self, measure: str) -> tuple[float, float]:
        """(slow, hold) thresholds of ``measure``."""
        slow, hold = THRESHOLD_FIELDS[measure]
        return getattr(self, slow), getattr(self, hold)


def beyond(measure: str, value: float, threshold: float) -> bool:
    """True when ``value`` of ``measure`` is on the uncertain side of ``threshold`` (strictly)."""
    return value > threshold if measure in HIGH_IS_BAD else value < threshold


@dataclass
class Judgement:
    """What the supervisor made of one chunk: the event, the text for ``/diagnostics`` and a summary of the worst
    values (``peak mass 0.45 at step 3, entropy 0.20 at step 0``)."""

    event: ExecutorEvent
    reason: str
    summary: str


class ConfidenceSupervisor:
    """The per-chunk judge (module docstring). Keeps the spell of uncertain chunks: per measure since when its hold and
    its slow threshold have been crossed, and the confident chunks in a row since."""

    def __init__(self, config: SupervisorConfig):
        self.config = config
        self.reset()

    def reset(self) -> None:
        """Forget the spell (``~/resume``, ``~/engage``): the next chunk is judged as the first."""
        self.in_spell = False
        self.confident_run = 0
        self.hold_since_s: dict[str, float] = {}  # per measure: since when every chunk is beyond its hold threshold
        self.uncertain_since_s: dict[str, float] = {}  # per measure: ... beyond its slow threshold
        self.refused = deque(maxlen=self.config.rejected_window_chunks)  # the latest chunks: True = refused
        self.grace_ends_s: float | None = None  # set by the first chunk after the reset
        self.grace_over = False

    def forget_time(self) -> None:
        """The clock jumped back: times of the old clock mean nothing; the spell and its count stay (a grace under
        way starts again at the next chunk)."""
        self.hold_since_s, self.uncertain_since_s = {}, {}
        self.grace_ends_s = None

    def key(self) -> tuple:
        """What decides the next judgement besides the chunk (for tests that enumerate states)."""
        return self.in_spell, self.confident_run, tuple(sorted(self.hold_since_s))

    def judge(self, chunk: Chunk, now_s: float) -> Judgement:
        """The event of an accepted (validated) ``chunk`` received at ``now_s`` (module docstring). The hold clock runs
        per measure: a measure beyond its hold threshold in every chunk for ``hold_after_s`` holds."""
        cfg = self.config
        if not cfg.enabled:
            return Judgement(ExecutorEvent.CHUNK_ACCEPTED, "", "")
        self._count(refused=False)
        steps = cfg.steps_checked or None
        worsts = {measure: worst_step(measure, chunk.measure(measure), steps) for measure in MEASURES}
        summary = ", ".join(
            f"{MEASURE_TITLES[m]} {w.value:.2f} at step {w.step}" for m, w in worsts.items() if w is not None
        )
        if not self.grace_over:
            if self.grace_ends_s is None:
                self.grace_ends_s = now_s + cfg.grace_s
            if now_s < self.grace_ends_s:  # the grace after a hand-over: followed as it is, no clock runs
                return Judgement(ExecutorEvent.CHUNK_ACCEPTED, "", summary)
            self.grace_over = True
        beyond_slow, beyond_hold = [], []
        for measure, worst in worsts.items():
            slow, hold = cfg.thresholds(measure)
            if worst is not None and beyond(measure, worst.value, slow):
                self.uncertain_since_s.setdefault(measure, now_s)
                beyond_slow.append((worst, slow))
            else:
                self.uncertain_since_s.pop(measure, None)
            if worst is not None and beyond(measure, worst.value, hold):
                self.hold_since_s.setdefault(measure, now_s)
                beyond_hold.append((worst, hold))
            else:
                self.hold_since_s.pop(measure, None)
        if not beyond_slow and not beyond_hold:
            if not self.in_spell:
                return Judgement(ExecutorEvent.CHUNK_ACCEPTED, "", summary)
            self.confident_run += 1
            if self.confident_run < cfg.resume_after_chunks:
                return Judgement(
                    ExecutorEvent.CHUNK_ACCEPTED,
                    f"confident chunk {self.confident_run} of {cfg.resume_after_chunks} in a row",
                    summary,
                )
            self.in_spell, self.confident_run = False, 0
            return Judgement(
                ExecutorEvent.CONFIDENT_AGAIN, f"{cfg.resume_after_chunks} confident chunks in a row", summary
            )
        self.in_spell, self.confident_run = True, 0
        for worst, threshold in beyond_hold:
            if now_s - self.hold_since_s[worst.measure] >= cfg.hold_after_s:
                reason = self._text(worst, threshold, "hold", now_s - self.hold_since_s[worst.measure])
                return Judgement(ExecutorEvent.CHUNK_VERY_UNCERTAIN, reason, summary)
        if beyond_hold:
            worst, threshold = beyond_hold[0]
            reason = self._text(worst, threshold, "hold", now_s - self.hold_since_s[worst.measure])
        else:
            worst, threshold = beyond_slow[0]
            reason = self._text(worst, threshold, "slow", now_s - self.uncertain_since_s[worst.measure])
        return Judgement(ExecutorEvent.CHUNK_UNCERTAIN, reason, summary)

    def judge_refused(self, why: str) -> Judgement:
        """The event of a chunk the executor's checks refused (``why``: their message): ``CHUNK_VERY_UNCERTAIN`` once
        ``rejected_hold_count`` of the last ``rejected_window_chunks`` chunks were refused, else ``CHUNK_ACCEPTED``
        (no event: the chunk stays refused and the state does not change). A refused chunk ends a run of confident
        ones."""
        cfg = self.config
        if not cfg.enabled:
            return Judgement(ExecutorEvent.CHUNK_ACCEPTED, "", "")
        self._count(refused=True)
        self.confident_run = 0
        n_refused = sum(self.refused)
        if cfg.rejected_hold_count == 0 or n_refused < cfg.rejected_hold_count:
            return Judgement(ExecutorEvent.CHUNK_ACCEPTED, "", "")
        self.in_spell = True
        reason = (
            f"policy inconsistent: {n_refused} of the last {len(self.refused)} chunks refused by the chunk checks "
            f"(the hold count {cfg.rejected_hold_count}; last: {why})"
        )
        return Judgement(ExecutorEvent.CHUNK_VERY_UNCERTAIN, reason, "")

    def _count(self, refused: bool) -> None:
        if self.refused.maxlen != self.config.rejected_window_chunks:  # reconfigured: keep the newest that still fit
            self.refused = deque(self.refused, maxlen=self.config.rejected_window_chunks)
        self.refused.append(refused)

    def _text(self, worst, threshold: float, which: str, for_s: float) -> str:
        side = "above" if worst.measure in HIGH_IS_BAD else "below"
        return (
            f"policy uncertain: {MEASURE_TITLES[worst.measure]} {worst.value:.2f} at step {worst.step} for "
            f"{for_s:.1f} s ({side} the {which} threshold {threshold:g})"
        )
