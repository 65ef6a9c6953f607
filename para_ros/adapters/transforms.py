"""ROS pose messages <-> numpy 4x4 matrices, and the quaternion (x, y, z, w) helpers they need.

These are the only ROS <-> numpy pose conversions the nodes use (one concept, one place). Conventions
(docs/contracts.md): quaternions in (x, y, z, w) order, like ROS messages and scipy; a 4x4 float64 ``T_parent_child``
maps child coordinates to parent coordinates (``p_parent = T_parent_child @ p_child``), which is exactly what a
``TransformStamped`` with ``header.frame_id = parent`` and ``child_frame_id = child`` carries.
"""
from __future__ import annotations

import numpy as np
from geometry_msgs.msg import Pose, PoseStamped, Transform, TransformStamped

# How far a rotation matrix may be from orthonormal (max abs entry of R^T R - I) before it is refused.
RIGID_TOLERANCE = 1e-5


def quaternion_to_matrix(q_xyzw) -> np.ndarray:
    """Rotation matrix (3, 3) of a quaternion (x, y, z, w); the quaternion is normalised first.

    :raises ValueError: zero-length or non-finite quaternion.
    """
    q = np.asarray(q_xyzw, dtype=np.float64).reshape(4)  # (4,)
    norm = np.linalg.norm(q)
    if not np.isfinite(norm) or norm < 1e-12:
        raise ValueError(f"quaternion {q.tolist()} is not finite or has zero length; give a unit (x, y, z, w)")
    x, y, z, w = q / norm
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])  # (3, 3)


def matrix_to_quaternion(R) -> np.ndarray:
    """Unit quaternion (x, y, z, w) with w >= 0 of a rotation matrix (3, 3) (Shepperd's method, stable near 180 deg)."""
    R = np.asarray(R, dtype=np.float64).reshape(3, 3)  # (3, 3)
    trace = R[0, 0] + R[1, 1] + R[2, 2]
    diag = (R[0, 0], R[1, 1], R[2, 2])
    if trace >= max(diag):
        s = 2.0 * np.sqrt(max(1.0 + trace, 0.0))
        q = [(R[2, 1] - R[1, 2]) / s, (R[0, 2] - R[2, 0]) / s, (R[1, 0] - R[0, 1]) / s, 0.25 * s]
    elif diag[0] >= diag[1] and diag[0] >= diag[2]:
        s = 2.0 * np.sqrt(max(1.0 + R[0, 0] - R[1, 1] - R[2, 2], 0.0))
        q = [0.25 * s, (R[0, 1] + R[1, 0]) / s, (R[0, 2] + R[2, 0]) / s, (R[2, 1] - R[1, 2]) / s]
    elif diag[1] >= diag[2]:
        s = 2.0 * np.sqrt(max(1.0 - R[0, 0] + R[1, 1] - R[2, 2], 0.0))
        q = [(R[0, 1] + R[1, 0]) / s, 0.25 * s, (R[1, 2] + R[2, 1]) / s, (R[0, 2] - R[2, 0]) / s]
    else:
        s = 2.0 * np.sqrt(max(1.0 - R[0, 0] - R[1, 1] + R[2, 2], 0.0))
        q = [(R[0, 2] + R[2, 0]) / s, (R[1, 2] + R[2, 1]) / s, 0.25 * s, (R[1, 0] - R[0, 1]) / s]
    q = np.asarray(q)  # (4,)
    q /= np.linalg.norm(q)
    return -q if q[3] < 0 else q


def quaternion_multiply(q1_xyzw, q2_xyzw) -> np.ndarray:
    """Hamilton product ``q1 * q2`` (rotation q2 first, then q1), (x, y, z, w)."""
    x1, y1, z1, w1 = np.asarray(q1_xyzw, dtype=np.float64)
    x2, y2, z2, w2 = np.asarray(q2_xyzw, dtype=np.float64)
    return np.array([
        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
    ])  # (4,)


def quaternion_slerp(q0_xyzw, q1_xyzw, fraction: float) -> np.ndarray:
    """Spherical linear interpolation along the shorter arc; ``fraction`` 0 -> q0, 1 -> q1. Returns a unit (4,)."""
    q0 = np.asarray(q0_xyzw, dtype=np.float64) / np.linalg.norm(q0_xyzw)  # (4,)
    q1 = np.asarray(q1_xyzw, dtype=np.float64) / np.linalg.norm(q1_xyzw)  # (4,)
    dot = float(np.dot(q0, q1))
    if dot < 0.0:  # q and -q are the same rotation: take the short way round
        q1, dot = -q1, -dot
    if dot > 0.9995:  # nearly parallel: normalised lerp is exact to ~1e-8 and avoids 0/0
        q = q0 + fraction * (q1 - q0)
        return q / np.linalg.norm(q)
    theta = np.arccos(min(dot, 1.0))
    return (np.sin((1.0 - fraction) * theta) * q0 + np.sin(fraction * theta) * q1) / np.sin(theta)


def make_matrix(translation_xyz, q_xyzw) -> np.ndarray:
    """4x4 homogeneous matrix (float64) from a translation (3,) in metres and a quaternion (x, y, z, w)."""
    T = np.eye(4)  # (4, 4)
    T[:3, :3] = quaternion_to_matrix(q_xyzw)
    T[:3, 3] = np.asarray(translation_xyz, dtype=np.float64).reshape(3)
    return T


def check_rigid_matrix(T, name: str = "T") -> np.ndarray:
    """Return ``T`` as a (4, 4) float64 array after checking it is a finite rigid transform.

    :raises ValueError: wrong shape, non-finite entries, last row not (0, 0, 0, 1), or a rotation block that is not
        orthonormal with determinant +1 (within :data:`RIGID_TOLERANCE`).
    """
    T = np.asarray(T, dtype=np.float64)
    if T.shape != (4, 4):
        raise ValueError(f"{name} has shape {T.shape}; expected a (4, 4) homogeneous matrix")
    if not np.all(np.isfinite(T)):
        raise ValueError(f"{name} has non-finite entries:\n{T}")
    if np.max(np.abs(T[3] - (0.0, 0.0, 0.0, 1.0))) > RIGID_TOLERANCE:
        raise ValueError(f"{name} last row is {T[3].tolist()}; a rigid transform has (0, 0, 0, 1)")
    R = T[:3, :3]  # (3, 3)
    err = np.max(np.abs(R.T @ R - np.eye(3)))
    if err > RIGID_TOLERANCE or np.linalg.det(R) < 0:
        raise ValueError(f"{name} rotation block is not a proper rotation (|R^T R - I| = {err:.2e}, "
                         f"det = {np.linalg.det(R):.4f}); orthonormalise it (e.g. via a quaternion) first")
    return T


def transform_to_matrix(transform: Transform | TransformStamped) -> np.ndarray:
    """4x4 ``T_parent_child`` (float64) of a ``Transform`` or ``TransformStamped`` (``header.frame_id`` = parent)."""
    if isinstance(transform, TransformStamped):
        transform = transform.transform
    t, q = transform.translation, transform.rotation
    return make_matrix((t.x, t.y, t.z), (q.x, q.y, q.z, q.w))


def matrix_to_transform(T) -> Transform:
    """``geometry_msgs/Transform`` of a rigid 4x4 matrix (the quaternion has w >= 0).

    :raises ValueError: see :func:`check_rigid_matrix`.
    """
    T = check_rigid_matrix(T)
    msg = Transform()
    msg.translation.x, msg.translation.y, msg.translation.z = (float(v) for v in T[:3, 3])
    q = matrix_to_quaternion(T[:3, :3])
    msg.rotation.x, msg.rotation.y, msg.rotation.z, msg.rotation.w = (float(v) for v in q)
    return msg


def pose_to_matrix(pose: Pose | PoseStamped) -> np.ndarray:
    """4x4 ``T_frame_body`` (float64) of a ``Pose`` (or ``PoseStamped``) expressed in ``frame``."""
    if isinstance(pose, PoseStamped):
        pose = pose.pose
    p, q = pose.position, pose.orientation
    return make_matrix((p.x, p.y, p.z), (q.x, q.y, q.z, q.w))


def matrix_to_pose(T) -> Pose:
    """``geometry_msgs/Pose`` of a rigid 4x4 matrix (the quaternion has w >= 0).

    :raises ValueError: see :func:`check_rigid_matrix`.
    """
    T = check_rigid_matrix(T)
    msg = Pose()
    msg.position.x, msg.position.y, msg.position.z = (float(v) for v in T[:3, 3])
    q = matrix_to_quaternion(T[:3, :3])
    msg.orientation.x, msg.orientation.y, msg.orientation.z, msg.orientation.w = (float(v) for v in q)
    return msg


def invert_matrix(T) -> np.ndarray:
    """Inverse of a rigid 4x4 transform (R^T, -R^T t), exact for rigid matrices."""
    T = np.asarray(T, dtype=np.float64)
    inv = np.eye(4)  # (4, 4)
    inv[:3, :3] = T[:3, :3].T
    inv[:3, 3] = -T[:3, :3].T @ T[:3, 3]
    return inv
