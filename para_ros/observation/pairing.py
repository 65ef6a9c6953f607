"""Pairing the scene and wrist camera streams into observations: newest matched pair, never a queue.

Pure Python on integer nanosecond stamps (no ROS types), so the timing rules are unit-testable:

* each camera keeps only its last few frames (``history``); a frame older than that camera's newest frame is an
  out-of-order frame and is dropped (counted), never paired;
* a frame stamped more than ``max_future_ns`` after the receiver's clock is refused (a camera with a wrong clock would
  otherwise block every correct frame after it as "out of order");
* a pair is two frames, one per camera, whose stamps differ by at most ``slop_ns`` and that are each other's
  NEAREST frame among the frames held (:func:`nearest_pair`); the newest such pair wins. So the newest frame is paired
  with the partner nearest to it in time, and a partner that is nearer to another frame of the newest frame's camera
  is not taken (that older frame is its pair; the newest frame waits for its own partner). Ties go to the newer frame:
  a frame exactly midway between two partners pairs with the newer one, and of two pairs with the same newest stamp
  the one with the smaller time difference wins (then the one whose older frame is newer). With two cameras at one
  rate this is the pair a look at the whole recording would choose; the pair's time difference is
  :attr:`PairResult.gap_ns`;
* a pair is used once: a pair not newer than the last one handed out is not returned again, unless it is given back
  (:meth:`ObservationPairer.release`: its observation could not be built, e.g. TF for its instant had not come yet);
* frames of one camera newer than every usable pair are reported (the other camera lags or stopped) once their
  partner is overdue (``slop + partner_grace``), not only when the last pair turns stale, and not while the partner
  of a frame is normally still on its way;
* a pair older than ``max_age_ns`` at the time of asking is stale (a silent camera) and is not returned.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class Frame:
    stamp_ns: int
    message: Any  # the camera message, untouched (decoding happens only for the chosen pair)


@dataclass
class PairResult:
    """What :meth:`ObservationPairer.newest_pair` found: ``frames`` (one per camera) or ``problem`` saying why not."""

    frames: tuple[Frame, ...] | None = None
    problem: str | None = None

    @property
    def stamp_ns(self) -> int:
        """Observation time: the newest stamp of the pair (the moment the observation was complete)."""
        assert self.frames is not None
        return max(f.stamp_ns for f in self.frames)

    @property
    def gap_ns(self) -> int:
        """The pair's time difference: newest minus oldest image stamp, nanoseconds (0 for one camera)."""
        assert self.frames is not None
        return max(f.stamp_ns for f in self.frames) - min(f.stamp_ns for f in self.frames)


def _nearest(stamp_ns: int, frames: Sequence[Frame]) -> Frame | None:
    """The frame nearest in time to ``stamp_ns``; of two equally near frames, the newer."""
    best = None
    for f in frames:
        if best is None or (abs(f.stamp_ns - stamp_ns), -f.stamp_ns) < (abs(best.stamp_ns - stamp_ns), -best.stamp_ns):
            best = f
    return best


def nearest_pair(frames_a: Sequence[Frame], frames_b: Sequence[Frame], slop_ns: int) -> tuple[Frame, Frame] | None:
    """The pairing rule of two cameras (the live node and every bag tool use this one function).

    A candidate is a frame of each camera, each the other's nearest frame (:func:`_nearest`: ties to the newer frame),
    at most ``slop_ns`` apart. Of the candidates, the newest wins (largest newest stamp); equal newest stamps: the
    smaller time difference, then the newer older frame. Returns ``(frame_a, frame_b)`` or None when there is none.
    """
    best_key, best = None, None
    for a in frames_a:
        b = _nearest(a.stamp_ns, frames_b)
        if b is None or abs(a.stamp_ns - b.stamp_ns) > slop_ns or _nearest(b.stamp_ns, frames_a) is not a:
            continue
        newest, oldest = max(a.stamp_ns, b.stamp_ns), min(a.stamp_ns, b.stamp_ns)
        key = (newest, -(newest - oldest), oldest)
        if best_key is None or key > best_key:
            best_key, best = key, (a, b)
    return best


@dataclass
class ObservationPairer:
    camera_names: Sequence[str]
    slop_ns: int
    max_age_ns: int
    history: int = 4
    max_future_ns: int = 200_000_000
    partner_grace_ns: int = 100_000_000
    _frames: dict[str, deque] = field(default_factory=dict, init=False)
    _last_used_ns: int = field(default=-1, init=False)
    _used_before_ns: int = field(default=-1, init=False)
    out_of_order_drops: int = field(default=0, init=False)
    future_drops: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.slop_ns < 0 or self.max_age_ns <= 0 or self.history < 1:
            raise ValueError(
                f"pairing needs slop >= 0, max_age > 0, history >= 1 (got slop_ns={self.slop_ns}, "
                f"max_age_ns={self.max_age_ns}, history={self.history})"
            )
        self._frames = {name: deque(maxlen=self.history) for name in self.camera_names}

    def add(self, camera: str, stamp_ns: int, message: Any, now_ns: int | None = None) -> str | None:
        """Store a frame; return None, or why it was dropped (not newer than that camera's newest; from the future)."""
        frames = self._frames[camera]
        if now_ns is not None and stamp_ns > now_ns + self.max_future_ns:
            self.future_drops += 1
            return (
                f"{camera} image stamped {(stamp_ns - now_ns) / 1e9:.3f} s in the future (> "
                f"{self.max_future_ns / 1e9:.3f} s): dropped; check the camera's clock"
            )
        if frames and stamp_ns <= frames[-1].stamp_ns:
            self.out_of_order_drops += 1
            return (
                f"{camera} image at t={stamp_ns / 1e9:.3f} s is not newer than the last {camera} image: dropped "
                "(clock jump or reordering)"
            )
        frames.append(Frame(stamp_ns, message))
        return None

    def newest_stamp_ns(self, camera: str) -> int | None:
        frames = self._frames[camera]
        return frames[-1].stamp_ns if frames else None

    def newest_pair(self, now_ns: int) -> PairResult:
        """The newest unused pair of nearest frames within the slop (:func:`nearest_pair`) that is not stale, or a
        problem description."""
        for name in self.camera_names:
            if not self._frames[name]:
                return PairResult(problem=f"no image yet: the {name} camera lags or is silent")
        best: tuple[Frame, ...] | None = None
        if len(self.camera_names) == 2:
            a_name, b_name = self.camera_names
            best = nearest_pair(self._frames[a_name], self._frames[b_name], self.slop_ns)
        else:  # one camera (or the newest of each, checked against the slop)
            newest = tuple(self._frames[n][-1] for n in self.camera_names)
            stamps = [f.stamp_ns for f in newest]
            if max(stamps) - min(stamps) <= self.slop_ns:
                best = newest
        newest = {n: self._frames[n][-1].stamp_ns for n in self.camera_names}
        newest_any = max(newest.values())
        unpaired_new = best is None or newest_any > max(f.stamp_ns for f in best) + self.slop_ns
        overdue = now_ns - newest_any > self.slop_ns + self.partner_grace_ns  # its partner should be here by now
        if unpaired_new and overdue and (best is None or max(f.stamp_ns for f in best) <= self._last_used_ns):
            # A camera sent frames newer than every usable pair: the other one lags or stopped.
            gap = (max(newest.values()) - min(newest.values())) / 1e9
            silent = min(newest, key=newest.get)
            return PairResult(
                problem=f"no matching pair: newest frames differ by {gap:.3f} s (> slop "
                f"{self.slop_ns / 1e9:.3f} s); the {silent} camera lags or is silent"
            )
        if best is None:
            return PairResult(problem=None)  # a partner is still on its way
        pair = PairResult(frames=best)
        age_s = (now_ns - pair.stamp_ns) / 1e9
        if now_ns - pair.stamp_ns > self.max_age_ns:
            fresh = [n for n, t in newest.items() if now_ns - t <= self.max_age_ns]
            who = (
                f"the {min(newest, key=newest.get)} camera lags or is silent"
                if fresh
                else "all cameras are silent (or the clocks differ)"
            )
            return PairResult(
                problem=f"stale pair: the newest matched pair is {age_s:.3f} s old (> max_age "
                f"{self.max_age_ns / 1e9:.3f} s); {who}"
            )
        if pair.stamp_ns <= self._last_used_ns:
            return PairResult(problem=None)  # nothing new: not an error
        return pair

    def mark_used(self, pair: PairResult) -> None:
        self._used_before_ns = self._last_used_ns
        self._last_used_ns = pair.stamp_ns

    def release(self, pair: PairResult) -> None:
        """Give back the pair last marked used (nothing came of it): the next :meth:`newest_pair` may return it again
        while it is still the newest and not stale. Ignored for any other pair (a newer one was handed out since)."""
        if self._last_used_ns == pair.stamp_ns:
            self._last_used_ns = self._used_before_ns


def past_positions(ee_xyz_at, stamp_ns: int, n: int, step_dt_s: float, current_xyz) -> np.ndarray:
    """(n, 3) EE positions at ``stamp - k * step_dt_s`` for k = n..1, oldest first (the policy's history input).

    :param ee_xyz_at: ``t_ns -> (3,) position or None`` (None: no pose known at that time, e.g. before the TF cache).
    Times with no pose take the oldest known one after them (or the current position when none is known), so a fresh
    start looks like an arm that stood still. The live node and the offline bag reader both use this rule.
    """
    known = [ee_xyz_at(max(stamp_ns - int(round(k * step_dt_s * 1e9)), 0)) for k in range(n, 0, -1)]
    filled = [p for p in known if p is not None]
    last = filled[0] if filled else np.asarray(current_xyz, dtype=np.float64)
    out = []
    for p in known:
        last = p if p is not None else last
        out.append(last)
    return np.asarray(out, dtype=np.float64).reshape(n, 3)


def sample_and_hold(stamps_ns, values, stamp_ns: int):
    """The value of the newest sample at or before ``stamp_ns`` (the first sample when all are newer); None when there
    are none. ``stamps_ns`` ascending. One rule for the live node and the bag tools (the gripper at an image stamp)."""

    if len(stamps_ns) == 0:
        return None
    i = bisect.bisect_right(stamps_ns, int(stamp_ns)) - 1
    return values[max(i, 0)]
