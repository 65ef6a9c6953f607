"""Interpolation of a chunk's poses in time: positions linearly, orientations by slerp, gripper linearly.

Quaternions are (x, y, z, w) everywhere (ROS and scipy order). The quaternion maths is :mod:`para_core.model.rotations`:
slerp takes the shorter arc (q and -q are the same rotation); the weighted mean of several orientations (temporal
ensembling, :mod:`para_ros.execution.timeline`) is Markley's, as ``scipy.spatial.transform.Rotation.mean``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from para_core.model.rotations import quaternion_slerp
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
    defined only at its due time (to within 1 us).
    """
    due = chunk.due_s  # (T,)
    if t_s < due[0] - 1e-6 or t_s > due[-1] + 1e-6:
        return None
    if len(due) == 1:
        return PoseTarget(chunk.positions_m[0].copy(), chunk.quats_xyzw[0].copy(), float(chunk.gripper[0]))
    i = int(np.clip(np.searchsorted(due, t_s, side="right") - 1, 0, len(due) - 2))
    s = float(np.clip((t_s - due[i]) / (due[i + 1] - due[i]), 0.0, 1.0))
    pos = (1.0 - s) * chunk.positions_m[i] + s * chunk.positions_m[i + 1]  # (3,)
    grip = (1.0 - s) * chunk.gripper[i] + s * chunk.gripper[i + 1]
    quat = quaternion_slerp(chunk.quats_xyzw[i], chunk.quats_xyzw[i + 1], s)  # (4,)
    return PoseTarget(pos, quat, float(grip))
