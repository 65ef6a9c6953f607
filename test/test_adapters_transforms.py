"""ROS pose messages <-> numpy 4x4 (para_ros.adapters.transforms), checked against scipy's Rotation."""

from __future__ import annotations

import numpy as np
import pytest
from geometry_msgs.msg import Pose, PoseStamped, Transform, TransformStamped
from scipy.spatial.transform import Rotation, Slerp

from para_ros.adapters import transforms as tr


def random_rotations(n, seed=0):
    rots = list(Rotation.random(n, random_state=seed))
    # Add the hard cases for matrix -> quaternion: identity and half turns about each axis and a diagonal.
    for rotvec in (
        [0, 0, 0],
        [np.pi, 0, 0],
        [0, np.pi, 0],
        [0, 0, np.pi],
        np.pi * np.array([1, 1, 0]) / np.sqrt(2),
        [np.pi - 1e-7, 0, 0],
    ):
        rots.append(Rotation.from_rotvec(rotvec))
    return rots


def test_quaternion_matrix_round_trip_matches_scipy():
    for rot in random_rotations(50):
        q = rot.as_quat()  # scipy: (x, y, z, w)
        np.testing.assert_allclose(tr.quaternion_to_matrix(q), rot.as_matrix(), atol=1e-12)
        q_back = tr.matrix_to_quaternion(rot.as_matrix())
        assert q_back[3] >= 0
        assert abs(np.linalg.norm(q_back) - 1) < 1e-12
        # Same rotation (q and -q are equal rotations).
        assert min(np.abs(q_back - q).max(), np.abs(q_back + q).max()) < 1e-7


def test_quaternion_multiply_matches_scipy_composition():
    a, b = Rotation.random(2, random_state=3)
    np.testing.assert_allclose(
        tr.quaternion_to_matrix(tr.quaternion_multiply(a.as_quat(), b.as_quat())), (a * b).as_matrix(), atol=1e-12
    )


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.5, 0.77, 1.0])
def test_slerp_matches_scipy(fraction):
    for seed in range(5):
        r0, r1 = Rotation.random(2, random_state=seed)
        expected = Slerp([0.0, 1.0], Rotation.concatenate([r0, r1]))([fraction])[0].as_matrix()
        q = tr.quaternion_slerp(r0.as_quat(), r1.as_quat(), fraction)
        np.testing.assert_allclose(tr.quaternion_to_matrix(q), expected, atol=1e-9)
        # Sign of an input quaternion does not change the result (shortest arc).
        q_flip = tr.quaternion_slerp(r0.as_quat(), -r1.as_quat(), fraction)
        np.testing.assert_allclose(tr.quaternion_to_matrix(q_flip), expected, atol=1e-9)


def test_transform_and_pose_messages_round_trip():
    for rot in random_rotations(10, seed=1):
        T = np.eye(4)
        T[:3, :3] = rot.as_matrix()
        T[:3, 3] = np.random.default_rng(0).normal(size=3)
        msg = tr.matrix_to_transform(T)
        assert isinstance(msg, Transform)
        np.testing.assert_allclose(tr.transform_to_matrix(msg), T, atol=1e-9)
        stamped = TransformStamped(transform=msg)
        np.testing.assert_allclose(tr.transform_to_matrix(stamped), T, atol=1e-9)
        pose = tr.matrix_to_pose(T)
        assert isinstance(pose, Pose)
        assert (pose.position.x, pose.position.y, pose.position.z) == tuple(T[:3, 3])
        np.testing.assert_allclose(tr.pose_to_matrix(pose), T, atol=1e-9)
        np.testing.assert_allclose(tr.pose_to_matrix(PoseStamped(pose=pose)), T, atol=1e-9)


def test_transform_to_matrix_maps_child_points_into_parent():
    # Hand example: child frame 90 deg about z, 1 m along x of the parent. Child x-axis point (1, 0, 0) -> (1, 1, 0).
    msg = Transform()
    msg.translation.x = 1.0
    msg.rotation.z, msg.rotation.w = np.sin(np.pi / 4), np.cos(np.pi / 4)
    T_parent_child = tr.transform_to_matrix(msg)
    np.testing.assert_allclose(T_parent_child @ [1, 0, 0, 1], [1, 1, 0, 1], atol=1e-12)


def test_invert_matrix():
    rot = Rotation.random(random_state=5)
    T = tr.make_matrix([0.3, -2, 1], rot.as_quat())
    np.testing.assert_allclose(tr.invert_matrix(T), np.linalg.inv(T), atol=1e-12)


@pytest.mark.parametrize(
    "bad, words",
    [
        (np.eye(3), "shape"),
        (np.diag([1.0, 1, 1, 2]), "last row"),
        (np.diag([2.0, 1, 1, 1]), "rotation"),
        (np.diag([-1.0, 1, 1, 1]), "det"),
        (np.full((4, 4), np.nan), "non-finite"),
    ],
)
def test_non_rigid_matrices_are_refused(bad, words):
    with pytest.raises(ValueError, match=words):
        tr.matrix_to_transform(bad)
    with pytest.raises(ValueError, match=words):
        tr.matrix_to_pose(bad)


def test_zero_quaternion_is_refused():
    with pytest.raises(ValueError, match="zero length"):
        tr.quaternion_to_matrix([0, 0, 0, 0])
