"""Camera geometry of the simulated rig: look-at poses, MuJoCo <-> OpenCV optical frames, pinhole intrinsics.

ROS-free and MuJoCo-free (numpy only), so the scene builder, the node and the tests share one definition.

Conventions (docs/contracts.md): the OpenCV optical frame has x right, y down, z forward; ``T_world_cam`` is a 4x4
float64 matrix mapping camera coordinates to world coordinates. A MuJoCo camera looks along its -Z with +Y up, i.e.
it is the optical frame turned 180 degrees about X: ``R_world_optical = R_world_mjcam @ diag(1, -1, -1)``.

MuJoCo renders with square pixels, a vertical field of view ``fovy`` and the principal point at the image centre:
``f = (H / 2) / tan(fovy / 2)``, ``cx = W / 2``, ``cy = H / 2`` (pixel (col, row) covers [col, col + 1), so the
image centre is at W / 2; a point on the optical axis projects there).
"""

from __future__ import annotations

import math

import numpy as np

from para_core.model.rotations import matrix_to_quaternion

# Optical frame <-> MuJoCo camera frame: a 180-degree turn about X (its own inverse).
R_MJCAM_OPTICAL = np.diag([1.0, -1.0, -1.0])  # (3, 3)
# The same turn as a MuJoCo quaternion (w, x, y, z).
QUAT_WXYZ_MJCAM_OPTICAL = (0.0, 1.0, 0.0, 0.0)


def look_at_T_world_cam(position_m, look_at_m, up_hint=(0.0, 0.0, 1.0)) -> np.ndarray:
    """OpenCV optical camera pose at ``position_m`` whose optical axis (+z) points at ``look_at_m``.

    The image's "up" (-y) is ``up_hint`` projected onto the image plane; if the view is (nearly) parallel to
    ``up_hint``, world +X is used instead so a straight-down camera is still well defined (image up = +X).

    :param position_m: camera centre in world, metres, 3 values.
    :param look_at_m: a world point on the optical axis, metres, 3 values.
    :param up_hint: world direction that should appear upwards in the image.
    :returns: (4, 4) float64 ``T_world_cam``.
    :raises ValueError: if the two points coincide.
    """
    pos = np.asarray(position_m, dtype=np.float64).reshape(3)
    target = np.asarray(look_at_m, dtype=np.float64).reshape(3)
    forward = target - pos  # (3,)
    norm = np.linalg.norm(forward)
    if not np.isfinite(norm) or norm < 1e-9:
        raise ValueError(
            f"camera position {pos.tolist()} and look-at point {target.tolist()} must differ; "
            "give a look-at point in front of the camera"
        )
    z = forward / norm
    up = np.asarray(up_hint, dtype=np.float64).reshape(3)
    up_perp = up - (up @ z) * z
    if np.linalg.norm(up_perp) < 1e-6:
        up = np.array([1.0, 0.0, 0.0])
        up_perp = up - (up @ z) * z
        if np.linalg.norm(up_perp) < 1e-6:  # view along X with up hint X: fall back to Y
            up = np.array([0.0, 1.0, 0.0])
            up_perp = up - (up @ z) * z
    y = -up_perp / np.linalg.norm(up_perp)  # image y points down
    x = np.cross(y, z)  # right-handed: x = y cross z
    T = np.eye(4)
    T[:3, :3] = np.stack([x, y, z], axis=1)
    T[:3, 3] = pos
    return T


def intrinsics_from_fovy(fovy_deg: float, width: int, height: int) -> np.ndarray:
    """Pinhole K of a MuJoCo camera rendered at ``width`` x ``height`` (square pixels, centred principal point).

    :param fovy_deg: vertical field of view in degrees (MuJoCo's ``fovy``), in (0, 180).
    :returns: (3, 3) float64 K.
    """
    if not 0.0 < float(fovy_deg) < 180.0:
        raise ValueError(f"fovy_deg={fovy_deg!r} must be in (0, 180) degrees")
    if int(width) <= 0 or int(height) <= 0:
        raise ValueError(f"image size {width}x{height} must be positive")
    f = (height / 2.0) / math.tan(math.radians(fovy_deg) / 2.0)
    return np.array([[f, 0.0, width / 2.0], [0.0, f, height / 2.0], [0.0, 0.0, 1.0]])


def mjcam_to_T_world_optical(cam_xpos, cam_xmat) -> np.ndarray:
    """World pose of the OpenCV optical frame from a MuJoCo camera's ``cam_xpos`` (3,) and ``cam_xmat`` (9,)."""
    T = np.eye(4)
    T[:3, :3] = np.asarray(cam_xmat, dtype=np.float64).reshape(3, 3) @ R_MJCAM_OPTICAL
    T[:3, 3] = np.asarray(cam_xpos, dtype=np.float64).reshape(3)
    return T


def rotation_matrix_to_quat_wxyz(R) -> np.ndarray:
    """MuJoCo's quaternion (w, x, y, z), w >= 0, of a 3x3 rotation matrix.

    MuJoCo orders quaternions scalar FIRST; everywhere else in the project (ROS, scipy, :mod:`para_core.model.rotations`)
    the order is (x, y, z, w). This is the one conversion to MuJoCo's order: the maths is
    :func:`para_core.model.rotations.matrix_to_quaternion`, reordered.
    """
    x, y, z, w = matrix_to_quaternion(R)
    return np.array([w, x, y, z])
