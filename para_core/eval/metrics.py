"""Offline evaluation metrics of predicted action chunks against the recorded end-effector trajectory (ROS-free).

A chunk predicted at observation time ``t`` has T steps; step i is meant for ``t + time_offsets_s[i]``. Its ground
truth is the recorded trajectory at exactly that time, interpolated between the recorded samples (linear in position,
slerp in rotation, the same interpolation tf2 uses); a step whose time lies outside the recording has no ground truth
(NaN) and is left out of every statistic (``count`` says how many steps entered).

Metrics:

* position error: Euclidean distance in metres, per step index (mean / median / p90 over chunks, plus all steps);
* rotation error: geodesic angle ``arccos((trace(R_pred^T R_gt) - 1) / 2)`` in degrees (the angle of the relative
  rotation, in [0, 180]);
* gripper accuracy: fraction of steps whose predicted state (open if >= ``threshold``) matches the recorded one; the
  mean absolute gripper error is reported as well.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from para_core.model.rotations import rotation_angles_between, slerp_rotations


def interpolate_positions(stamps_ns: np.ndarray, positions: np.ndarray, query_ns: np.ndarray) -> np.ndarray:
    """Positions at ``query_ns`` by linear interpolation between samples; NaN outside [first, last] stamp.

    :param stamps_ns: (M,) int64, strictly increasing. :param positions: (M, 3). :param query_ns: (...) int64.
    :return: (..., 3) float64.
    """
    stamps = np.asarray(stamps_ns, dtype=np.int64)
    pos = np.asarray(positions, dtype=np.float64).reshape(-1, 3)  # (M, 3)
    _check_stamps(stamps, pos.shape[0])
    q = np.asarray(query_ns, dtype=np.int64)
    flat = q.reshape(-1)  # (Q,)
    t = (flat - stamps[0]).astype(np.float64)  # relative ns: exact in float64 for spans below ~104 days
    ts = (stamps - stamps[0]).astype(np.float64)  # (M,)
    out = np.stack([np.interp(t, ts, pos[:, k]) for k in range(3)], axis=-1)  # (Q, 3)
    out[(flat < stamps[0]) | (flat > stamps[-1])] = np.nan
    return out.reshape(*q.shape, 3)


def interpolate_rotations(stamps_ns: np.ndarray, rotations: np.ndarray, query_ns: np.ndarray) -> np.ndarray:
    """Rotation matrices at ``query_ns`` by slerp between samples; NaN outside the recorded span.

    :param rotations: (M, 3, 3). :return: (..., 3, 3).
    """
    stamps = np.asarray(stamps_ns, dtype=np.int64)
    rots = np.asarray(rotations, dtype=np.float64).reshape(-1, 3, 3)
    _check_stamps(stamps, rots.shape[0])
    q = np.asarray(query_ns, dtype=np.int64)
    flat = q.reshape(-1)
    inside = (flat >= stamps[0]) & (flat <= stamps[-1])
    out = np.full((flat.size, 3, 3), np.nan)
    if stamps.size == 1:
        out[inside] = rots[0]
    elif inside.any():
        ts = (stamps - stamps[0]).astype(np.float64)
        out[inside] = slerp_rotations(ts, rots, (flat[inside] - stamps[0]).astype(np.float64))
    return out.reshape(*q.shape, 3, 3)


def _check_stamps(stamps: np.ndarray, n: int) -> None:
    if stamps.ndim != 1 or stamps.size != n or n < 1:
        raise ValueError(f"stamps_ns has shape {stamps.shape} for {n} samples; pass one int64 stamp per sample")
    if np.any(np.diff(stamps) <= 0):
        raise ValueError("stamps_ns is not strictly increasing; sort the samples by time and drop duplicates")


def position_errors_m(pred_positions: np.ndarray, gt_positions: np.ndarray) -> np.ndarray:
    """(..., 3), (..., 3) -> (...) Euclidean distance in metres (NaN where the ground truth is NaN)."""
    pred = np.asarray(pred_positions, dtype=np.float64)
    gt = np.asarray(gt_positions, dtype=np.float64)
    if pred.shape != gt.shape or pred.shape[-1] != 3:
        raise ValueError(f"position arrays must have the same (..., 3) shape; got {pred.shape} and {gt.shape}")
    return np.linalg.norm(pred - gt, axis=-1)


def rotation_errors_deg(pred_rotations: np.ndarray, gt_rotations: np.ndarray) -> np.ndarray:
    """(..., 3, 3), (..., 3, 3) -> (...) geodesic angle of ``R_pred^T R_gt`` in degrees, in [0, 180]."""
    Rp = np.asarray(pred_rotations, dtype=np.float64)
    Rg = np.asarray(gt_rotations, dtype=np.float64)
    if Rp.shape != Rg.shape or Rp.shape[-2:] != (3, 3):
        raise ValueError(f"rotation arrays must have the same (..., 3, 3) shape; got {Rp.shape} and {Rg.shape}")
    return np.degrees(rotation_angles_between(Rp, Rg))


def gripper_accuracy(pred_gripper: np.ndarray, gt_gripper: np.ndarray, threshold: float = 0.5) -> float:
    """Fraction of finite pairs whose open/closed state (``>= threshold`` is open) agrees; NaN if there is none."""
    p = np.asarray(pred_gripper, dtype=np.float64).reshape(-1)
    g = np.asarray(gt_gripper, dtype=np.float64).reshape(-1)
    if p.shape != g.shape:
        raise ValueError(f"gripper arrays differ in size: {p.shape} vs {g.shape}")
    ok = np.isfinite(p) & np.isfinite(g)
    if not ok.any():
        return float("nan")
    return float(np.mean((p[ok] >= threshold) == (g[ok] >= threshold)))


def summarize(values: np.ndarray) -> dict:
    """mean / median / p90 / max / count of the finite entries (None for the statistics of an empty set)."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return {"mean": None, "median": None, "p90": None, "max": None, "count": 0}
    return {
        "mean": float(v.mean()),
        "median": float(np.median(v)),
        "p90": float(np.percentile(v, 90)),
        "max": float(v.max()),
        "count": int(v.size),
    }


def per_step_summary(errors: np.ndarray) -> list[dict]:
    """(C, T) errors of C chunks -> one :func:`summarize` dict per step index (NaN entries left out)."""
    e = np.asarray(errors, dtype=np.float64)
    if e.ndim != 2:
        raise ValueError(f"errors must be (chunks, steps); got shape {e.shape}")
    return [summarize(e[:, i]) for i in range(e.shape[1])]


@dataclass
class ChunkErrors:
    """Errors of C chunks of T steps (NaN where a step has no ground truth)."""

    position_m: np.ndarray  # (C, T)
    rotation_deg: np.ndarray  # (C, T)
    gripper_abs: np.ndarray  # (C, T) |pred - gt|
    gripper_correct: np.ndarray  # (C, T) 1.0 / 0.0 / NaN


def chunk_errors(
    pred_positions, pred_rotations, pred_gripper, gt_positions, gt_rotations, gt_gripper, gripper_threshold: float = 0.5
) -> ChunkErrors:
    """Per-step errors of predicted chunks against ground truth sampled at the same times.

    :param pred_positions: (C, T, 3) metres; ``pred_rotations``: (C, T, 3, 3); ``pred_gripper``: (C, T).
    :param gt_positions: (C, T, 3), NaN where there is no ground truth; ``gt_rotations``: (C, T, 3, 3);
        ``gt_gripper``: (C, T) (NaN where unknown).
    """
    pos = position_errors_m(pred_positions, gt_positions)  # (C, T)
    rot = rotation_errors_deg(pred_rotations, gt_rotations)  # (C, T)
    pg = np.asarray(pred_gripper, dtype=np.float64)
    gg = np.asarray(gt_gripper, dtype=np.float64)
    if pg.shape != pos.shape or gg.shape != pos.shape:
        raise ValueError(f"gripper arrays must be (C, T) = {pos.shape}; got {pg.shape} and {gg.shape}")
    correct = np.where(
        np.isfinite(gg) & np.isfinite(pg),
        ((pg >= gripper_threshold) == (gg >= gripper_threshold)).astype(np.float64),
        np.nan,
    )
    return ChunkErrors(position_m=pos, rotation_deg=rot, gripper_abs=np.abs(pg - gg), gripper_correct=correct)


def metrics_dict(
    errors: ChunkErrors, time_offsets_s: Sequence[float], model_id: str = "", extra: dict | None = None
) -> dict:
    """The JSON-able metrics report of :class:`ChunkErrors` (what ``para-bag eval`` writes as metrics.json)."""
    offsets = [float(t) for t in time_offsets_s]
    C, T = errors.position_m.shape
    if len(offsets) != T:
        raise ValueError(f"time_offsets_s has {len(offsets)} entries for {T} steps")
    has_gt = np.isfinite(errors.position_m)
    report = {
        "model_id": model_id,
        "chunks_evaluated": int(has_gt.any(axis=1).sum()),
        "chunks_total": int(C),
        "steps": T,
        "time_offsets_s": offsets,
        "position_error_m": {"per_step": per_step_summary(errors.position_m), "all": summarize(errors.position_m)},
        "rotation_error_deg": {
            "per_step": per_step_summary(errors.rotation_deg),
            "all": summarize(errors.rotation_deg),
        },
        "gripper_accuracy": {
            "per_step": [_nan_mean(errors.gripper_correct[:, i]) for i in range(T)],
            "all": _nan_mean(errors.gripper_correct),
        },
        "gripper_abs_error": {"all": summarize(errors.gripper_abs)},
    }
    if extra:
        report.update(extra)
    return report


def _nan_mean(values: np.ndarray) -> float | None:
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    v = v[np.isfinite(v)]
    return float(v.mean()) if v.size else None
