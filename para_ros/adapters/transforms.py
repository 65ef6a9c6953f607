"""ROS pose messages <-> numpy 4x4 matrices: the only ROS <-> numpy pose conversions the nodes use.

The maths (quaternions, rotation matrices, rigid transforms) lives in :mod:`para_core.model.rotations`; this module only
converts messages and re-exports those functions under the names the nodes already import
(``quaternion_to_matrix``, ``matrix_to_quaternion``, ``quaternion_multiply``, ``quaternion_slerp``, ``make_matrix``,
``check_rigid_matrix``, ``invert_matrix``). Conventions (docs/contracts.md): quaternions in (x, y, z, w) order, like ROS
messages and scipy; a 4x4 float64 ``T_parent_child`` maps child coordinates to parent coordinates
(``p_parent = T_parent_child @ p_child``), which is exactly what a ``TransformStamped`` with
``header.frame_id = parent`` and ``child_frame_id = child`` carries.
"""

from __future__ import annotations

import numpy as np
from geometry_msgs.msg import Pose, PoseStamped, Transform, TransformStamped

from para_core.model.rotations import (  # noqa: F401 - re-exported: the nodes import these names from here
    RIGID_TOLERANCE,
    make_matrix,
    matrix_to_quaternion,
    quaternion_multiply,
    quaternion_slerp,
    quaternion_to_matrix,
)
from para_core.model.rotations import check_rigid as check_rigid_matrix
from para_core.model.rotations import invert_rigid as invert_matrix

__all__ = [
    "RIGID_TOLERANCE",
    "check_rigid_matrix",
    "invert_matrix",
    "make_matrix",
    "matrix_to_pose",
    "matrix_to_quaternion",
    "matrix_to_transform",
    "pose_to_matrix",
    "quaternion_multiply",
    "quaternion_slerp",
    "quaternion_to_matrix",
    "transform_to_matrix",
]


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
