"""Interpolation of a chunk's poses in time: positions linearly, orientations by slerp, gripper linearly.

Quaternions are (x, y, z, w) everywhere (ROS and scipy order). Slerp takes the shorter arc (q and -q are the same
rotation). The weighted mean of several orientations (for temporal ensembling) is Markley's: the eigenvector of
``sum_i w_i q_i q_i^T`` with the largest eigenvalue, the same definition ``scipy.spatial.transform.Rotation.mean``
uses, so it is well defined for any spread of the inputs and independent of their signs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from para_ros.execution.chunk import Chunk


@dataclass
class PoseTarget:
    """A tool target at one instant: position (3,) metres, orientation (4,) (x, y, z, w), gripper 0..1."""

    position_m: np.ndarray
    quat_xyzw: np.ndarray
    gripper: float


def slerp(q0: np.ndarray, q1: np.ndarray, s: float) -> np.ndarray:
    """Spherical linear interpolation from ``q0`` (s=0) to ``q1`` (s=1) along the shorter arc; unit (4,) output."""
    q0 = np.asarray(q0, dtype=float) / np.linalg.norm(q0)
    q1 = np.asarray(q1, dtype=float) / np.linalg.norm(q1)
    dot = float(np.dot(q0, q1))
    if dot < 0.0:  # same rotation, shorter way round
        q1, dot = -q1, -dot
    dot = min(dot, 1.0)
    if dot > 0.9995:  # nearly parallel: normalised lerp is exact to ~1e-7 and avoids 0/0
        q = q0 + s * (q1 - q0)
        return q / np.linalg.norm(q)
    theta = np.arccos(dot)  # angle between the quaternions (half the rotation angle)
    sin_theta = np.sin(theta)
    return (np.sin((1.0 - s) * theta) * q0 + np.sin(s * theta) * q1) / sin_theta


def weighted_quat_mean(quats_xyzw: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Markley's weighted average of (N, 4) unit quaternions with (N,) non-negative weights; unit (4,) output.

    The sign of the output is chosen to agree with the heaviest input (the result is a rotation; the sign only
    keeps successive outputs continuous).
    """
    q = np.asarray(quats_xyzw, dtype=float)  # (N, 4)
    w = np.asarray(weights, dtype=float)  # (N,)
    if len(q) == 1:
        return q[0] / np.linalg.norm(q[0])
    M = (q * w[:, None]).T @ q  # (4, 4) sum_i w_i q_i q_i^T
    _, vecs = np.linalg.eigh(M)
    mean = vecs[:, -1]  # eigenvector of the largest eigenvalue
    if np.dot(mean, q[int(np.argmax(w))]) < 0:
        mean = -mean
    return mean / np.linalg.norm(mean)


def sample_chunk(chunk: Chunk, t_s: float) -> PoseTarget | None:
    """The chunk's target at absolute time ``t_s``, or None if ``t_s`` is outside [first due, last due].

    Between steps i and i+1 (due times d_i <= t <= d_{i+1}) with s = (t - d_i) / (d_{i+1} - d_i): position and
    gripper are ``(1 - s) * a_i + s * a_{i+1}``, orientation is ``slerp(q_i, q_{i+1}, s)``. A one-step chunk is
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
    quat = slerp(chunk.quats_xyzw[i], chunk.quats_xyzw[i + 1], s)  # (4,)
    return PoseTarget(pos, quat, float(grip))
