"""One action chunk as plain numpy arrays, and the checks a chunk must pass before it may drive the arm.

A chunk holds T future end-effector targets predicted from one observation. Step ``i`` is due at
``stamp_s + time_from_stamp_s[i]`` (the project's time-base rule, see ``msg/ActionChunk.msg``), on the clock the
executor uses (the ROS clock; ``use_sim_time`` honoured by the node).

:func:`validate_chunk` is the single gate between a received message and the timeline: it either returns a clean
:class:`Chunk` (quaternions normalised, grippers clipped into [0, 1], positions possibly clamped into the workspace,
possibly cut before an implausibly fast step) plus a list of warnings, or raises :class:`ChunkRejected` naming the
problem. A rejected chunk is dropped as a whole: the executor never sends a command derived from invalid data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

OUT_OF_WORKSPACE_MODES = ("clamp", "reject")
CONFIDENCE_TOL = 1e-6  # a confidence value may stray outside [0, 1] by float rounding only
# The per-step confidence measures besides ``confidence`` (para_core.model.confidence): empty or one per step
MEASURE_FIELDS = ("entropy", "chunk_agreement", "view_agreement")
IMPLAUSIBLE_SPEED_MODES = ("truncate_when_idle", "truncate", "reject")


class ChunkRejected(ValueError):
    """A chunk failed validation; ``str(err)`` names the field, the bad value and what to fix."""


@dataclass
class Chunk:
    """An action chunk in numpy form (units: seconds, metres; quaternions (x, y, z, w); frames from the message).

    Args:
        stamp_s: observation time (seconds on the executor's clock) the chunk was predicted from.
        time_from_stamp_s: (T,) offsets of the steps after ``stamp_s``, non-negative, strictly increasing.
        positions_m: (T, 3) tool positions in ``frame_id``.
        quats_xyzw: (T, 4) tool orientations in ``frame_id``.
        gripper: (T,) opening, 0 closed .. 1 open.
        confidence: (T,) per-step confidence in [0, 1]: the peak mass (docs/confidence.md).
        frame_id: world frame the poses are expressed in.
        tool_frame_id: tool frame the poses place.
        model_id: identity of the producing model.
        received_s: when the executor received it (its clock); set by the executor, used for staleness.
        entropy, chunk_agreement, view_agreement: (T,) the other confidence measures in [0, 1], or (0,) when the
            producer does not measure them (docs/confidence.md).
    """

    stamp_s: float
    time_from_stamp_s: np.ndarray
    positions_m: np.ndarray
    quats_xyzw: np.ndarray
    gripper: np.ndarray
    confidence: np.ndarray
    frame_id: str = "base"
    tool_frame_id: str = ""
    model_id: str = ""
    received_s: float = float("nan")
    entropy: np.ndarray = field(default_factory=lambda: np.zeros(0))
    chunk_agreement: np.ndarray = field(default_factory=lambda: np.zeros(0))
    view_agreement: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def measure(self, name: str) -> np.ndarray:
        """(T,) or (0,) values of one confidence measure: ``peak_mass`` (``confidence``) or a :data:`MEASURE_FIELDS`
        name."""
        return self.confidence if name == "peak_mass" else getattr(self, name)

    @property
    def n_steps(self) -> int:
        return int(len(self.time_from_stamp_s))

    @property
    def due_s(self) -> np.ndarray:
        """(T,) absolute due time of each step: ``stamp_s + time_from_stamp_s``."""
        return self.stamp_s + self.time_from_stamp_s

    def subset(self, index: np.ndarray | slice) -> Chunk:
        """A chunk with only the selected steps (same stamp and metadata)."""
        return Chunk(
            self.stamp_s,
            self.time_from_stamp_s[index],
            self.positions_m[index],
            self.quats_xyzw[index],
            self.gripper[index],
            self.confidence[index],
            self.frame_id,
            self.tool_frame_id,
            self.model_id,
            self.received_s,
            **{name: _subset_measure(getattr(self, name), index) for name in MEASURE_FIELDS},
        )


def _subset_measure(values, index) -> np.ndarray:
    values = np.asarray(values, dtype=float).reshape(-1)
    return values if values.size == 0 else values[index]


@dataclass
class ChunkChecks:
    """What a chunk must satisfy to be accepted.

    Args:
        world_frame: required ``header.frame_id`` (no TF lookup happens in the executor).
        tool_frames: accepted ``tool_frame_id`` values; an empty ``tool_frame_id`` means the configured tool.
        max_age_s: reject chunks whose stamp is older than ``now - max_age_s`` (observation too old to act on).
        max_future_s: reject chunks stamped more than this ahead of ``now`` (clock mismatch between machines).
        max_steps: reject longer chunks (bounds the per-tick blending cost).
        max_implied_speed_m_s: the fastest tool motion two consecutive steps may imply (a 50 cm jump in 0.2 s is not a
            motion the policy meant, but its argmax switching between two places).
        implausible_speed: what happens to a chunk with such a step: "reject" drops it (the arm goes on with the
            chunk it follows, if any); "truncate" keeps the steps before it when there are at least two (each passed
            every check; the arm moves and the next observation differs); "truncate_when_idle" rejects it while the
            arm still follows an accepted chunk and truncates it when the arm would otherwise hold (the executor core
            decides; :func:`validate_chunk` truncates). A policy that keeps predicting the same jump from the same
            state holds the arm for ever under "reject".
        quat_norm_tol: reject quaternions whose norm differs from 1 by more than this (garbage, not rounding).
        gripper_tol: reject gripper values outside [-gripper_tol, 1 + gripper_tol]; smaller excursions are clipped.
        out_of_workspace: "clamp" (clip positions into the workspace box, warn) or "reject" (drop the chunk).
        workspace_min_m, workspace_max_m: (3,) the tool workspace box in ``world_frame``.
    """

    world_frame: str = "base"
    tool_frames: tuple[str, ...] = ("grasp_site",)
    max_age_s: float = 1.0
    max_future_s: float = 0.5
    max_steps: int = 1024
    max_implied_speed_m_s: float = 1.0
    implausible_speed: str = "truncate_when_idle"
    quat_norm_tol: float = 0.05
    gripper_tol: float = 0.05
    out_of_workspace: str = "clamp"
    workspace_min_m: np.ndarray = field(default_factory=lambda: np.array([-1.0, -1.0, -1.0]))
    workspace_max_m: np.ndarray = field(default_factory=lambda: np.array([1.0, 1.0, 1.0]))

    def __post_init__(self):
        self.tool_frames = tuple(self.tool_frames)
        self.workspace_min_m = np.asarray(self.workspace_min_m, dtype=float).reshape(3)
        self.workspace_max_m = np.asarray(self.workspace_max_m, dtype=float).reshape(3)
        for name in ("max_age_s", "max_future_s", "max_implied_speed_m_s", "quat_norm_tol"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value > 0):
                raise ValueError(f"ChunkChecks.{name}={value!r}: must be a finite number > 0")
        if self.max_steps < 1:
            raise ValueError(f"ChunkChecks.max_steps={self.max_steps!r}: must be >= 1")
        if self.out_of_workspace not in OUT_OF_WORKSPACE_MODES:
            raise ValueError(
                f"ChunkChecks.out_of_workspace={self.out_of_workspace!r}: use one of {OUT_OF_WORKSPACE_MODES}"
            )
        if self.implausible_speed not in IMPLAUSIBLE_SPEED_MODES:
            raise ValueError(
                f"ChunkChecks.implausible_speed={self.implausible_speed!r}: use one of {IMPLAUSIBLE_SPEED_MODES}"
            )
        if not np.all(self.workspace_min_m < self.workspace_max_m):
            raise ValueError(
                f"ChunkChecks workspace_min_m={self.workspace_min_m} must be < workspace_max_m="
                f"{self.workspace_max_m} on every axis"
            )


def _as_array(name: str, value, shape_tail: tuple[int, ...]) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as err:
        raise ChunkRejected(f"{name}: not numeric ({err})") from None
    if arr.ndim != 1 + len(shape_tail) or arr.shape[1:] != shape_tail:
        raise ChunkRejected(
            f"{name}: shape {arr.shape}, expected (T, {', '.join(map(str, shape_tail))})"
            if shape_tail
            else f"{name}: shape {arr.shape}, expected (T,)"
        )
    return arr


def validate_chunk(chunk: Chunk, now_s: float, checks: ChunkChecks) -> tuple[Chunk, list[str]]:
    """Check ``chunk`` against ``checks`` at time ``now_s``; return a cleaned copy and warnings.

    Rejected (raises :class:`ChunkRejected`): empty chunk; arrays of different lengths (a confidence measure of
    :data:`MEASURE_FIELDS` may also be empty: not measured); NaN/inf anywhere; a confidence value outside [0, 1]
    (beyond :data:`CONFIDENCE_TOL`); negative or
    non-increasing step times; wrong frame; zero/garbage quaternions; gripper far outside [0, 1]; stamp older than
    ``max_age_s`` or more than ``max_future_s`` ahead; steps implying a tool speed above ``max_implied_speed_m_s``
    when ``implausible_speed == "reject"`` (otherwise the chunk ends at the step before the first such jump);
    every (kept) step already in the past; poses outside the workspace when ``out_of_workspace == "reject"``.
    Garbage anywhere (non-finite values, bad quaternions or grippers) rejects the whole chunk, truncation or not.
    """
    warnings: list[str] = []
    if not np.isfinite(chunk.stamp_s):
        raise ChunkRejected(f"header.stamp is {chunk.stamp_s!r}: must be a finite time")
    t = _as_array("time_from_stamp", chunk.time_from_stamp_s, ())
    n = len(t)
    if n == 0:
        raise ChunkRejected("empty chunk (0 steps): the publisher must send at least one step")
    if n > checks.max_steps:
        raise ChunkRejected(f"chunk has {n} steps, more than max_steps={checks.max_steps}")
    arrays = {
        "poses.position": _as_array("poses.position", chunk.positions_m, (3,)),
        "poses.orientation": _as_array("poses.orientation", chunk.quats_xyzw, (4,)),
        "gripper": _as_array("gripper", chunk.gripper, ()),
        "confidence": _as_array("confidence", chunk.confidence, ()),
    }
    measures = {name: _as_array(name, getattr(chunk, name), ()) for name in MEASURE_FIELDS}
    arrays.update({name: values for name, values in measures.items() if len(values)})  # empty: not measured
    lengths = {"time_from_stamp": n, **{k: len(v) for k, v in arrays.items()}}
    if len(set(lengths.values())) != 1:
        raise ChunkRejected(f"mismatched array lengths {lengths}: every array must have one entry per step")
    for name, arr in {"time_from_stamp": t, **arrays}.items():
        bad = ~np.isfinite(arr)
        if bad.any():
            step = int(np.argwhere(bad)[0][0])
            raise ChunkRejected(f"{name} has a non-finite value at step {step} ({arr[step]}): NaN/inf not allowed")
    for name in ("confidence", *MEASURE_FIELDS):
        values = arrays.get(name)
        outside = (
            np.flatnonzero((values < -CONFIDENCE_TOL) | (values > 1 + CONFIDENCE_TOL)) if values is not None else []
        )
        if len(outside):
            step = int(outside[0])
            raise ChunkRejected(f"{name}[{step}]={values[step]:.6g} outside [0, 1]: a confidence measure is a fraction")
    if checks.world_frame and chunk.frame_id != checks.world_frame:
        raise ChunkRejected(
            f"header.frame_id={chunk.frame_id!r}: the executor only accepts poses in "
            f"{checks.world_frame!r} (transform the chunk before publishing)"
        )
    if chunk.tool_frame_id and checks.tool_frames and chunk.tool_frame_id not in checks.tool_frames:
        raise ChunkRejected(f"tool_frame_id={chunk.tool_frame_id!r}: the executor places {checks.tool_frames}")
    if t[0] < 0:
        raise ChunkRejected(f"time_from_stamp[0]={t[0]:.6f} s is negative: offsets must be >= 0")
    if n > 1 and not np.all(np.diff(t) > 0):
        i = int(np.argwhere(np.diff(t) <= 0)[0][0])
        raise ChunkRejected(f"time_from_stamp not strictly increasing at step {i + 1} ({t[i]:.6f} -> {t[i + 1]:.6f} s)")
    age_s = now_s - chunk.stamp_s
    if age_s > checks.max_age_s:
        raise ChunkRejected(
            f"stamp is {age_s:.3f} s old (> max_age_s={checks.max_age_s}): latency too high or clocks out of sync"
        )
    if -age_s > checks.max_future_s:
        raise ChunkRejected(
            f"stamp is {-age_s:.3f} s in the future (> max_future_s={checks.max_future_s}): clocks "
            f"out of sync (use_sim_time?)"
        )
    quats = arrays["poses.orientation"]
    norms = np.linalg.norm(quats, axis=1)
    bad_q = np.abs(norms - 1.0) > checks.quat_norm_tol
    if bad_q.any():
        i = int(np.argwhere(bad_q)[0][0])
        raise ChunkRejected(f"poses[{i}].orientation has norm {norms[i]:.4f}: must be a unit quaternion")
    quats = quats / norms[:, None]
    grip = arrays["gripper"]
    tol = checks.gripper_tol
    if np.any((grip < -tol) | (grip > 1 + tol)):
        i = int(np.argwhere((grip < -tol) | (grip > 1 + tol))[0][0])
        raise ChunkRejected(f"gripper[{i}]={grip[i]:.3f} outside [0, 1] (0 closed .. 1 open)")
    grip = np.clip(grip, 0.0, 1.0)
    pos = arrays["poses.position"]
    conf = arrays["confidence"]
    keep = _steps_before_implausible_speed(t, pos, checks)
    if keep < n:
        warnings.append(f"truncated to steps 0..{keep - 1} of {n}: {_implausible_step_text(t, pos, keep - 1, checks)}")
        t, pos, quats, grip, conf = t[:keep], pos[:keep], quats[:keep], grip[:keep], conf[:keep]
        measures = {name: values[:keep] for name, values in measures.items()}
    if chunk.stamp_s + t[-1] < now_s:
        raise ChunkRejected(
            f"every {'kept ' if keep < n else ''}step is already in the past (last step due "
            f"{now_s - chunk.stamp_s - t[-1]:.3f} s ago)" + (f"; {warnings[-1]}" if keep < n else "")
        )
    outside = np.any((pos < checks.workspace_min_m) | (pos > checks.workspace_max_m), axis=1)
    if outside.any():
        i = int(np.argwhere(outside)[0][0])
        msg = (
            f"{int(outside.sum())} of {len(pos)} poses outside the workspace box "
            f"{checks.workspace_min_m.tolist()} .. {checks.workspace_max_m.tolist()} "
            f"(first: step {i} at {np.round(pos[i], 4).tolist()})"
        )
        if checks.out_of_workspace == "reject":
            raise ChunkRejected(msg)
        warnings.append(msg + ": clamped into the box")
        pos = np.clip(pos, checks.workspace_min_m, checks.workspace_max_m)
    clean = Chunk(
        float(chunk.stamp_s),
        t.copy(),
        pos.copy(),
        quats,
        grip,
        np.clip(conf, 0.0, 1.0),
        chunk.frame_id,
        chunk.tool_frame_id,
        chunk.model_id,
        chunk.received_s,
        **{name: np.clip(values, 0.0, 1.0) for name, values in measures.items()},
    )
    return clean, warnings


def _implausible_step_text(t: np.ndarray, pos: np.ndarray, i: int, checks: ChunkChecks) -> str:
    """What is wrong with step ``i`` -> ``i + 1``: distance, time and the implied speed against the limit."""
    step_m = float(np.linalg.norm(pos[i + 1] - pos[i]))
    dt_s = float(t[i + 1] - t[i])
    return (
        f"steps {i}->{i + 1} move {step_m:.3f} m in {dt_s:.3f} s = {step_m / dt_s:.2f} m/s > "
        f"max_implied_speed_m_s={checks.max_implied_speed_m_s}"
    )


def _steps_before_implausible_speed(t: np.ndarray, pos: np.ndarray, checks: ChunkChecks) -> int:
    """How many leading steps imply no tool speed above the limit: ``len(t)`` when none does, else at least 2.

    Raises :class:`ChunkRejected` instead with ``implausible_speed == "reject"``, and when the first jump follows step
    0: truncation keeps a motion whose steps agree with each other, and one step is no such evidence.
    Args: t (T,) step times, s; pos (T, 3) positions, m.
    """
    if len(t) < 2:
        return len(t)
    speeds_m_s = np.linalg.norm(np.diff(pos, axis=0), axis=1) / np.diff(t)  # (T - 1,)
    fast = np.flatnonzero(speeds_m_s > checks.max_implied_speed_m_s)
    if fast.size == 0:
        return len(t)
    if checks.implausible_speed == "reject":
        raise ChunkRejected(_implausible_step_text(t, pos, int(fast[0]), checks))
    if fast[0] == 0:  # one step is no motion that checks out (random garbage jumps at every step): reject
        raise ChunkRejected(_implausible_step_text(t, pos, 0, checks) + " (right after step 0: nothing to truncate to)")
    return int(fast[0]) + 1


def trim_past_steps(chunk: Chunk, now_s: float) -> Chunk | None:
    """Drop the steps already in the past, keeping the last past step as the left anchor of interpolation.

    The step due just before ``now_s`` is kept so the chunk still defines the target at ``now_s`` (between that step
    and the next); every older step is gone. Returns None when every step is in the past.
    """
    due = chunk.due_s
    future = np.flatnonzero(due >= now_s)
    if len(future) == 0:
        return None
    first = max(int(future[0]) - 1, 0)
    return chunk if first == 0 else chunk.subset(slice(first, None))
