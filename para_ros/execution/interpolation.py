"""Interpolation of a chunk's poses in time: positions linearly, orientations by slerp, gripper linearly.

Quaternions are (x, y, z, w) everywhere (ROS and scipy order). The quaternion maths is :mod:`para_core.model.rotations`:
slerp takes the shorter arc (q and -q are the same rotation); the weighted mean of several orientations (temporal
ensembling, :mod:`para_ros.execution.timeline`) is Markley's, as ``scipy.spatial.transform.Rotation.mean``.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import numpy as np

from para_core.model.rotations import quaternion_slerp_many
from para_ros.execution.chunk import Chunk


@dataclass
class PoseTarget:
    """A tool target at one instant: position (3,) metres, orientation (4,) (x, y, z, w), gripper 0..1."""

    position_m: np.ndarray
    quat_xyzw: np.ndarray
    gripper: float


def sample_chunk(chunk: Chunk, t_s: float) -> PoseTarget | None:
    """The chunk's target at absolute time ``t_s``, or None if ``t_s`` is outside [first due, last due].

    Between steps i and i+1 (due times d_i <= t <= d_{i+1}) with s = (t - d_i) / (d_{i+1} - d_i): position and
    gripper are ``(1 - s) * a_i + s * a_{i+1}``, orientation is ``quaternion_slerp(q_i, q_{i+1}, s)``. A one-step chunk is
    defined only at its due time (to within 1 us). One chunk of :func:`sample_chunks`.
    """
    sampled = sample_chunks([chunk], t_s)
    if sampled is None:
        return None
    positions, quats, gripper, _ = sampled
    return PoseTarget(positions[0], quats[0], float(gripper[0]))


def sample_chunks(chunks, t_s: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]] | None:
    """:func:`sample_chunk` of several chunks at once: positions (n, 3), quaternions (n, 4), gripper (n,) of the n
    chunks that cover ``t_s``, and their indices in ``chunks`` (order kept); None when none covers it. The step search
    is a short loop over the chunks, the arithmetic and the slerps one vectorised pass (the executor samples every
    chunk in force, dozens with ensembling, at every tick)."""
    covering, lo, hi, frac = [], [], [], []
    for n, chunk in enumerate(chunks):
        due = chunk.due_s.tolist()  # (T,) as Python floats: the search below is scalar work
        if t_s < due[0] - 1e-6 or t_s > due[-1] + 1e-6:
            continue
        if len(due) == 1:
            i, j, s = 0, 0, 0.0
        else:
            i = min(max(bisect.bisect_right(due, t_s) - 1, 0), len(due) - 2)
            j = i + 1
            gap = due[j] - due[i]  # > 0 for valid offsets, but two due times can round to one float at large stamps
            s = 1.0 if gap <= 0.0 else min(max((t_s - due[i]) / gap, 0.0), 1.0)
        covering.append(n)
        lo.append(i)
        hi.append(j)
        frac.append(s)
    if not covering:
        return None
    picked = [chunks[n] for n in covering]
    s = np.asarray(frac)  # (n,)
    p0 = np.stack([c.positions_m[i] for c, i in zip(picked, lo)])  # (n, 3)
    p1 = np.stack([c.positions_m[j] for c, j in zip(picked, hi)])
    g0 = np.array([c.gripper[i] for c, i in zip(picked, lo)], dtype=np.float64)  # (n,)
    g1 = np.array([c.gripper[j] for c, j in zip(picked, hi)], dtype=np.float64)
    q0 = np.stack([c.quats_xyzw[i] for c, i in zip(picked, lo)]).astype(np.float64)  # (n, 4)
    q1 = np.stack([c.quats_xyzw[j] for c, j in zip(picked, hi)]).astype(np.float64)
    q0 /= np.linalg.norm(q0, axis=1, keepdims=True)
    q1 /= np.linalg.norm(q1, axis=1, keepdims=True)
    positions = (1.0 - s)[:, None] * p0 + s[:, None] * p1  # (n, 3)
    gripper = (1.0 - s) * g0 + s * g1  # (n,)
    return positions, quaternion_slerp_many(q0, q1, s), gripper, covering
