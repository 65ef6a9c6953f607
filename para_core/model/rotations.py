"""Rotation and rigid-transform maths in numpy: the one place the project converts, multiplies and interpolates them.

ROS-free (``para_core`` never imports rclpy); ``para_ros.adapters.transforms`` converts ROS messages to and from the
arrays used here, the chunk executor and the simulated rig import from here.

Conventions (docs/contracts.md):

* Quaternions are (x, y, z, w), scalar LAST, like ROS messages and ``scipy.spatial.transform.Rotation``. (MuJoCo's
  (w, x, y, z) order appears only at the MuJoCo boundary, ``para_ros.sim.cameras``.) Functions returning one give a
  unit quaternion with w >= 0 where the sign is free (``q`` and ``-q`` are the same rotation).
* A 4x4 float64 ``T_parent_child`` maps child coordinates to parent coordinates: ``p_parent = T_parent_child @ p_child``.
* Angles in radians, translations in metres.
"""

from __future__ import annotations

import math

import numpy as np

# How far a rotation matrix may be from orthonormal (max abs entry of R^T R - I) before it is refused.
RIGID_TOLERANCE = 1e-5
# Slerp of nearly parallel quaternions (|q0 . q1| above this) is the normalised lerp: exact to ~1e-8, and no 0 / 0.
SLERP_LERP_DOT = 0.9995


def _unit_xyzw(q_xyzw, name: str = "quaternion") -> tuple[float, float, float, float]:
    """The unit quaternion (x, y, z, w) of ``q_xyzw`` as four Python floats; ValueError naming the value for a wrong
    size, zero length or non-finite one. Plain floats because the callers handle ONE quaternion (a TF look-up, a
    pose): numpy's per-call overhead is most of the cost at that size."""
    values = np.asarray(q_xyzw, dtype=np.float64).reshape(-1).tolist()
    if len(values) != 4:
        raise ValueError(f"{name} {values} has {len(values)} values; give 4 in (x, y, z, w) order")
    x, y, z, w = values
    norm = math.sqrt(x * x + y * y + z * z + w * w)
    if not math.isfinite(norm) or norm < 1e-12:
        raise ValueError(f"{name} {values} is not finite or has zero length; give a unit (x, y, z, w)")
    return x / norm, y / norm, z / norm, w / norm


def _as_quaternion(q_xyzw, name: str = "quaternion") -> np.ndarray:
    """(4,) float64 unit quaternion; ValueError naming the value for a wrong size, zero length or non-finite one."""
    return np.array(_unit_xyzw(q_xyzw, name))  # (4,)


def _rotation_rows(x: float, y: float, z: float, w: float) -> list[list[float]]:
    """The rotation matrix of a UNIT quaternion as three row lists (the formula, once)."""
    return [
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ]


def quaternion_to_matrix(q_xyzw) -> np.ndarray:
    """Rotation matrix (3, 3) of a quaternion (x, y, z, w); the quaternion is normalised first.

    :raises ValueError: not 4 values, zero length or non-finite.
    """
    return np.array(_rotation_rows(*_unit_xyzw(q_xyzw)))  # (3, 3)


def matrix_to_quaternion(R) -> np.ndarray:
    """Unit quaternion (x, y, z, w) with w >= 0 of a rotation matrix (3, 3).

    Shepperd's method: the largest of w, x, y, z is computed from the diagonal first, so it is stable everywhere,
    including near 180 degrees.
    """
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


def unit_quaternions(q_xyzw) -> np.ndarray:
    """(N, 4) quaternions (x, y, z, w) -> the same rotations as unit quaternions with w >= 0, what
    ``matrix_to_quaternion(quaternion_to_matrix(q))`` gives (to rounding; at w = 0 the sign is left as given), for a
    whole array at once. :raises ValueError: a zero-length or non-finite quaternion."""
    q = np.asarray(q_xyzw, dtype=np.float64).reshape(-1, 4)
    norm = np.linalg.norm(q, axis=1, keepdims=True)  # (N, 1)
    if not (np.all(np.isfinite(q)) and np.all(norm > 1e-12)):
        raise ValueError(f"quaternions must be finite and non-zero, got {q.tolist()}")
    return np.where(q[:, 3:] < 0, -q, q) / norm  # (N, 4)


def quaternion_multiply(q1_xyzw, q2_xyzw) -> np.ndarray:
    """Hamilton product ``q1 * q2`` (rotation q2 first, then q1), (x, y, z, w); not normalised."""
    x1, y1, z1, w1 = np.asarray(q1_xyzw, dtype=np.float64).reshape(4)
    x2, y2, z2, w2 = np.asarray(q2_xyzw, dtype=np.float64).reshape(4)
    return np.array(
        [
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
        ]
    )  # (4,)


def quaternion_slerp(q0_xyzw, q1_xyzw, fraction: float) -> np.ndarray:
    """Spherical linear interpolation along the shorter arc; ``fraction`` 0 -> q0, 1 -> q1. Returns a unit (4,).

    The inputs are normalised first; q1 is flipped when it is on the far side of q0 (q and -q are the same rotation),
    so the rotation turns the short way round. The same rule as :func:`quaternion_slerp_many` (tested against it), on
    plain floats: a TF look-up between two stamps is one pair.
    """
    x0, y0, z0, w0 = _unit_xyzw(q0_xyzw, "q0")
    x1, y1, z1, w1 = _unit_xyzw(q1_xyzw, "q1")
    f = float(fraction)
    dot = x0 * x1 + y0 * y1 + z0 * z1 + w0 * w1
    if dot < 0.0:
        x1, y1, z1, w1, dot = -x1, -y1, -z1, -w1, -dot
    if dot > SLERP_LERP_DOT:
        q = (x0 + f * (x1 - x0), y0 + f * (y1 - y0), z0 + f * (z1 - z0), w0 + f * (w1 - w0))
        norm = math.sqrt(sum(v * v for v in q))
        return np.array([v / norm for v in q])  # (4,)
    theta = math.acos(min(dot, 1.0))  # half the rotation angle between them
    a, b = math.sin((1.0 - f) * theta) / math.sin(theta), math.sin(f * theta) / math.sin(theta)
    return np.array([a * x0 + b * x1, a * y0 + b * y1, a * z0 + b * z1, a * w0 + b * w1])  # (4,)


def quaternion_slerp_many(q0_xyzw: np.ndarray, q1_xyzw: np.ndarray, fractions: np.ndarray) -> np.ndarray:
    """(n, 4) slerps of n pairs of UNIT quaternions (x, y, z, w) at (n,) fractions, in one vectorised pass: the
    executor interpolates every chunk in force at every tick. Shorter arc (q1 flipped where q0 . q1 < 0); nearly
    parallel pairs (dot > 0.9995) use the normalised lerp, exact to ~1e-8, which avoids 0 / 0."""
    q0 = np.asarray(q0_xyzw, dtype=np.float64)  # (n, 4)
    q1 = np.asarray(q1_xyzw, dtype=np.float64)  # (n, 4)
    f = np.asarray(fractions, dtype=np.float64)[:, None]  # (n, 1)
    dot = np.einsum("nd,nd->n", q0, q1)[:, None]  # (n, 1)
    q1 = np.where(dot < 0.0, -q1, q1)
    dot = np.abs(dot)
    near = dot > SLERP_LERP_DOT  # (n, 1)
    lerp = q0 + f * (q1 - q0)
    lerp = lerp / np.linalg.norm(lerp, axis=1, keepdims=True)
    theta = np.arccos(np.minimum(dot, 1.0))  # (n, 1) half the rotation angle between them
    sin_theta = np.where(near, 1.0, np.sin(theta))  # no 0 / 0 where the lerp is used
    arc = (np.sin((1.0 - f) * theta) * q0 + np.sin(f * theta) * q1) / sin_theta
    return np.where(near, lerp, arc)  # (n, 4)


def quaternion_weighted_mean(quats_xyzw, weights) -> np.ndarray:
    """Markley's weighted average of (N, 4) unit quaternions with (N,) non-negative weights; unit (4,) output.

    The eigenvector of ``sum_i w_i q_i q_i^T`` with the largest eigenvalue (the definition
    ``scipy.spatial.transform.Rotation.mean`` uses): well defined for any spread and independent of the inputs'
    signs. The output's sign agrees with the heaviest input (so successive means stay continuous).
    """
    q = np.asarray(quats_xyzw, dtype=np.float64).reshape(-1, 4)  # (N, 4)
    w = np.asarray(weights, dtype=np.float64).reshape(-1)  # (N,)
    if len(q) == 1:
        return q[0] / np.linalg.norm(q[0])
    M = (q * w[:, None]).T @ q  # (4, 4) sum_i w_i q_i q_i^T
    _, vecs = np.linalg.eigh(M)
    mean = vecs[:, -1]  # (4,) eigenvector of the largest eigenvalue
    if np.dot(mean, q[int(np.argmax(w))]) < 0:
        mean = -mean
    return mean / np.linalg.norm(mean)


def rotation_angles_between(R_a, R_b) -> np.ndarray:
    """(..., 3, 3), (..., 3, 3) -> (...) geodesic angle (rad, in [0, pi]) of the rotation taking ``R_a`` to ``R_b``:
    ``arccos((trace(R_a^T R_b) - 1) / 2)``."""
    trace = np.einsum("...ji,...ji->...", np.asarray(R_a, dtype=np.float64), np.asarray(R_b, dtype=np.float64))
    return np.arccos(np.clip((trace - 1.0) / 2.0, -1.0, 1.0))


def rotation_angle_between(R_a, R_b) -> float:
    """Angle (rad, in [0, pi]) of the rotation taking ``R_a`` to ``R_b`` (both (3, 3))."""
    return float(rotation_angles_between(R_a, R_b))


def slerp_rotations(times, rotations, query_times) -> np.ndarray:
    """Rotation matrices (M, 3, 3) at ``query_times`` (M,), slerped between ``rotations`` (N, 3, 3) at increasing
    ``times`` (N,); every query must lie within [times[0], times[-1]] (callers clamp or mask). One sample: itself."""
    from scipy.spatial.transform import Rotation, Slerp  # scipy: loaded on first use, not on import

    rots = np.asarray(rotations, dtype=np.float64).reshape(-1, 3, 3)
    q = np.asarray(query_times, dtype=np.float64).reshape(-1)
    if rots.shape[0] == 1:
        return np.repeat(rots, q.size, axis=0)
    return Slerp(np.asarray(times, dtype=np.float64), Rotation.from_matrix(rots))(q).as_matrix()


def quaternion_to_matrix_torch(q_xyzw):
    """A torch (4,) quaternion (x, y, z, w; normalised here) -> (3, 3) rotation matrix, differentiable, on its device
    and dtype (the model's reference rotation)."""
    import torch  # torch: loaded on first use, not on import

    x, y, z, w = (q_xyzw / q_xyzw.norm()).unbind(-1)
    return torch.stack(
        [
            torch.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)]),
            torch.stack([2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)]),
            torch.stack([2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]),
        ]
    )


def make_matrix(translation_xyz, q_xyzw) -> np.ndarray:
    """4x4 homogeneous matrix (float64) from a translation (3,) in metres and a quaternion (x, y, z, w)."""
    tx, ty, tz = np.asarray(translation_xyz, dtype=np.float64).reshape(3).tolist()
    r0, r1, r2 = _rotation_rows(*_unit_xyzw(q_xyzw))
    return np.array([[*r0, tx], [*r1, ty], [*r2, tz], [0.0, 0.0, 0.0, 1.0]])  # (4, 4)


def matrix_to_pose(T) -> tuple[np.ndarray, np.ndarray]:
    """(translation (3,) metres, quaternion (4,) (x, y, z, w) with w >= 0) of a 4x4 transform; inverse of
    :func:`make_matrix`."""
    T = np.asarray(T, dtype=np.float64).reshape(4, 4)
    return T[:3, 3].copy(), matrix_to_quaternion(T[:3, :3])


def check_rigid(
    T, name: str = "T", rotation_tolerance: float = RIGID_TOLERANCE, last_row_tolerance: float = RIGID_TOLERANCE
) -> np.ndarray:
    """Return ``T`` as a (4, 4) float64 array after checking it is a finite rigid transform.

    :param rotation_tolerance: allowed max |R^T R - I| (poses that went through float32 need a looser one).
    :param last_row_tolerance: allowed max deviation of the last row from (0, 0, 0, 1).
    :raises ValueError: wrong shape, non-finite entries, last row not (0, 0, 0, 1), or a rotation block that is not
        orthonormal with determinant +1.
    """
    T = np.asarray(T, dtype=np.float64)
    if T.shape != (4, 4):
        raise ValueError(f"{name} has shape {T.shape}; expected a (4, 4) homogeneous matrix")
    if not np.all(np.isfinite(T)):
        raise ValueError(f"{name} has non-finite entries:\n{T}")
    if np.max(np.abs(T[3] - (0.0, 0.0, 0.0, 1.0))) > last_row_tolerance:
        raise ValueError(f"{name} is not a rigid transform: its last row is {T[3].tolist()}, not (0, 0, 0, 1)")
    R = T[:3, :3]  # (3, 3)
    err = np.max(np.abs(R.T @ R - np.eye(3)))
    det = np.linalg.det(R)
    if err > rotation_tolerance or abs(det - 1.0) > rotation_tolerance:
        raise ValueError(
            f"{name} is not a rigid transform: its rotation block is not a proper rotation (|R^T R - I| = {err:.2e}, "
            f"det = {det:.4f}); orthonormalise it (e.g. via a quaternion) first"
        )
    return T


def invert_rigid(T) -> np.ndarray:
    """Inverse of a rigid 4x4 transform, (R^T, -R^T t): exact for rigid matrices (no general matrix inverse)."""
    T = np.asarray(T, dtype=np.float64).reshape(4, 4)
    inv = np.eye(4)  # (4, 4)
    inv[:3, :3] = T[:3, :3].T
    inv[:3, 3] = -T[:3, :3].T @ T[:3, 3]
    return inv
