"""para_core.model.rotations against scipy's Rotation / Slerp / mean and numpy's general inverse; and that the ROS adapters,
the executor and the simulated rig use this one implementation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.transform import Rotation, Slerp

from para_core.model import rotations as rot


def hard_and_random_rotations(n, seed=0):
    rots = list(Rotation.random(n, random_state=seed))
    # The hard cases for matrix -> quaternion: identity, half turns about each axis and a diagonal, almost half.
    for rotvec in (
        [0, 0, 0],
        [np.pi, 0, 0],
        [0, np.pi, 0],
        [0, 0, np.pi],
        np.pi * np.array([1, 1, 0]) / np.sqrt(2),
        [np.pi - 1e-7, 0, 0],
        [0, 0, -np.pi + 1e-9],
    ):
        rots.append(Rotation.from_rotvec(rotvec))
    return rots


def test_quaternion_matrix_round_trip_matches_scipy():
    for r in hard_and_random_rotations(100):
        q = r.as_quat()  # scipy: (x, y, z, w)
        np.testing.assert_allclose(rot.quaternion_to_matrix(q), r.as_matrix(), atol=1e-12)
        np.testing.assert_allclose(rot.quaternion_to_matrix(-3.0 * q), r.as_matrix(), atol=1e-12)  # normalised
        q_back = rot.matrix_to_quaternion(r.as_matrix())
        assert q_back[3] >= 0 and abs(np.linalg.norm(q_back) - 1) < 1e-12
        assert min(np.abs(q_back - q).max(), np.abs(q_back + q).max()) < 1e-7  # q and -q: the same rotation


def test_quaternion_order_is_xyzw_by_hand():
    # 90 degrees about z: (x, y, z, w) = (0, 0, sin 45, cos 45); it maps x onto y.
    q = [0.0, 0.0, math.sin(math.pi / 4), math.cos(math.pi / 4)]
    np.testing.assert_allclose(rot.quaternion_to_matrix(q) @ [1, 0, 0], [0, 1, 0], atol=1e-12)
    np.testing.assert_allclose(rot.matrix_to_quaternion([[0, -1, 0], [1, 0, 0], [0, 0, 1]]), q, atol=1e-12)


def test_quaternion_multiply_matches_scipy_composition():
    for a, b in zip(Rotation.random(10, random_state=3), Rotation.random(10, random_state=4)):
        q = rot.quaternion_multiply(a.as_quat(), b.as_quat())
        np.testing.assert_allclose(rot.quaternion_to_matrix(q), (a * b).as_matrix(), atol=1e-12)


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.5, 0.77, 1.0])
def test_slerp_matches_scipy_either_sign(fraction):
    for seed in range(10):
        r0, r1 = Rotation.random(2, random_state=seed)
        expected = Slerp([0.0, 1.0], Rotation.concatenate([r0, r1]))([fraction])[0]
        for q1 in (r1.as_quat(), -r1.as_quat()):  # the sign of an input does not change the result (short arc)
            q = rot.quaternion_slerp(r0.as_quat(), q1, fraction)
            assert abs(np.linalg.norm(q) - 1) < 1e-12
            assert (Rotation.from_quat(q).inv() * expected).magnitude() < 1e-9


def test_slerp_short_way_nearly_parallel_and_endpoints_by_hand():
    q0 = Rotation.from_euler("z", 10, degrees=True).as_quat()
    q1 = -Rotation.from_euler("z", 30, degrees=True).as_quat()  # same rotation, other sign
    mid = Rotation.from_quat(rot.quaternion_slerp(q0, q1, 0.5))
    assert math.isclose(mid.as_euler("zyx", degrees=True)[0], 20.0, abs_tol=1e-9)
    np.testing.assert_allclose(np.abs(rot.quaternion_slerp(q0, q1, 1.0)), np.abs(q1), atol=1e-12)
    # 0.01 degree apart (the normalised-lerp branch): a quarter of the way is 0.0025 degree.
    a, b = Rotation.from_euler("x", 0.0, degrees=True), Rotation.from_euler("x", 0.01, degrees=True)
    q = rot.quaternion_slerp(a.as_quat(), b.as_quat(), 0.25)
    assert math.isclose(Rotation.from_quat(q).as_euler("xyz", degrees=True)[0], 0.0025, abs_tol=1e-9)


def test_one_pair_slerp_is_the_batched_slerp():
    """quaternion_slerp (plain floats, for one pair) and quaternion_slerp_many (arrays) are one rule: same numbers for
    random pairs of either sign, nearly parallel pairs (the lerp branch, on both sides of its threshold) and nearly
    opposite ones."""
    rng = np.random.default_rng(7)
    q0 = Rotation.random(60, random_state=8).as_quat()
    q1 = Rotation.random(60, random_state=9).as_quat()
    q1[:20] *= -1.0
    for i, angle_deg in enumerate(np.geomspace(1e-4, 10.0, 20)):  # small angles around the branch threshold
        axis = rng.normal(size=3)
        q1[20 + i] = (
            Rotation.from_rotvec(np.radians(angle_deg) * axis / np.linalg.norm(axis)) * Rotation.from_quat(q0[20 + i])
        ).as_quat()
    q1[40:] = -(Rotation.from_rotvec(rng.normal(scale=1e-3, size=(20, 3))) * Rotation.from_quat(q0[40:])).as_quat()
    fractions = rng.uniform(0.0, 1.0, size=60)
    batched = rot.quaternion_slerp_many(q0, q1, fractions)  # (60, 4)
    one_by_one = np.array([rot.quaternion_slerp(a, b, f) for a, b, f in zip(q0, q1, fractions)])
    np.testing.assert_allclose(one_by_one, batched, atol=1e-12)


def test_make_matrix_by_hand_and_against_scipy():
    q = Rotation.from_euler("z", 90, degrees=True).as_quat()
    np.testing.assert_allclose(
        rot.make_matrix([1.0, 2.0, 3.0], q), [[0, -1, 0, 1], [1, 0, 0, 2], [0, 0, 1, 3], [0, 0, 0, 1]], atol=1e-12
    )
    for r in Rotation.random(10, random_state=5):
        T = rot.make_matrix(np.array([[0.1, -0.2, 0.3]]), 2.0 * r.as_quat())  # any shape of 3; a non-unit quaternion
        np.testing.assert_allclose(T[:3, :3], r.as_matrix(), atol=1e-12)
        np.testing.assert_allclose(T[:3, 3], [0.1, -0.2, 0.3])
        np.testing.assert_array_equal(T[3], [0, 0, 0, 1])


def test_weighted_mean_matches_scipy_mean():
    rng = np.random.default_rng(2)
    base = Rotation.random(random_state=rng)
    rots = Rotation.from_rotvec(rng.normal(0, 0.3, (5, 3))) * base
    w = rng.uniform(0.1, 1.0, 5)
    quats = rots.as_quat() * rng.choice([-1, 1], (5, 1))  # random signs must not matter
    mean = rot.quaternion_weighted_mean(quats, w)
    assert (Rotation.from_quat(mean).inv() * rots.mean(weights=w)).magnitude() < 1e-9
    assert np.dot(mean, quats[np.argmax(w)]) > 0  # sign follows the heaviest input


def test_rotation_angle_between_matches_scipy_magnitude():
    for a, b in zip(hard_and_random_rotations(20, seed=5), hard_and_random_rotations(20, seed=6)[::-1]):
        expected = (a.inv() * b).magnitude()
        assert rot.rotation_angle_between(a.as_matrix(), b.as_matrix()) == pytest.approx(expected, abs=1e-6)


def test_make_matrix_matrix_to_pose_and_invert_rigid():
    rng = np.random.default_rng(7)
    for r in Rotation.random(10, random_state=8):
        t = rng.normal(size=3)
        T = rot.make_matrix(t, r.as_quat())
        expected = np.eye(4)
        expected[:3, :3], expected[:3, 3] = r.as_matrix(), t
        np.testing.assert_allclose(T, expected, atol=1e-12)
        t_back, q_back = rot.matrix_to_pose(T)
        np.testing.assert_allclose(t_back, t, atol=1e-12)
        assert (Rotation.from_quat(q_back).inv() * r).magnitude() < 1e-9
        np.testing.assert_allclose(rot.invert_rigid(T), np.linalg.inv(T), atol=1e-12)
        assert rot.check_rigid(T) is not None


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
        rot.check_rigid(bad, "T_world_cam")


@pytest.mark.parametrize(
    "bad, words", [([0, 0, 0, 0], "zero length"), ([np.nan, 0, 0, 1], "not finite"), ([0, 0, 1], "3 values")]
)
def test_bad_quaternions_are_refused_naming_the_value(bad, words):
    with pytest.raises(ValueError, match=words):
        rot.quaternion_to_matrix(bad)
    with pytest.raises(ValueError, match=words):
        rot.quaternion_slerp(bad, [0, 0, 0, 1], 0.5)


def test_one_implementation_everywhere():
    """The adapters re-export these functions (their public names keep working), the executor and the simulated rig
    call them; the rig's MuJoCo (w, x, y, z) quaternion is this module's (x, y, z, w) reordered."""
    from para_ros.adapters import transforms
    from para_ros.execution import executor_core, interpolation, timeline
    from para_ros.robot import arm_kinematics
    from para_ros.sim import cameras

    assert transforms.quaternion_to_matrix is rot.quaternion_to_matrix
    assert transforms.matrix_to_quaternion is rot.matrix_to_quaternion
    assert transforms.quaternion_multiply is rot.quaternion_multiply
    assert transforms.quaternion_slerp is rot.quaternion_slerp
    assert transforms.make_matrix is rot.make_matrix
    assert transforms.invert_matrix is rot.invert_rigid
    assert transforms.check_rigid_matrix is rot.check_rigid
    assert interpolation.quaternion_slerp_many is rot.quaternion_slerp_many
    assert timeline.quaternion_weighted_mean is rot.quaternion_weighted_mean
    assert executor_core.make_matrix is rot.make_matrix
    assert arm_kinematics.rotation_angle_between is rot.rotation_angle_between
    for r in hard_and_random_rotations(20, seed=9):
        x, y, z, w = rot.matrix_to_quaternion(r.as_matrix())
        np.testing.assert_array_equal(cameras.rotation_matrix_to_quat_wxyz(r.as_matrix()), [w, x, y, z])


def test_slerp_of_many_pairs_equals_scipy_pair_by_pair():
    """The vectorised slerp (the executor's per-tick interpolation of every chunk in force) against scipy's Slerp
    for each pair: random pairs, pairs on opposite hemispheres (shorter arc), nearly equal pairs (the lerp branch)."""
    from scipy.spatial.transform import Rotation, Slerp

    rng = np.random.default_rng(4)
    q0 = Rotation.random(60, random_state=1).as_quat()
    q1 = Rotation.random(60, random_state=2).as_quat()
    q1[:20] = -q1[:20]  # far side: must still take the short way
    q1[40:] = (Rotation.from_quat(q0[40:]) * Rotation.from_rotvec(rng.normal(size=(20, 3)) * 1e-3)).as_quat()
    f = rng.uniform(0, 1, 60)
    got = rot.quaternion_slerp_many(q0, q1, f)
    for i in range(60):
        ref = Slerp([0.0, 1.0], Rotation.from_quat([q0[i], q1[i]]))([f[i]]).as_quat()[0]
        assert min(np.abs(got[i] - ref).max(), np.abs(got[i] + ref).max()) < 1e-7, i
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-12)


def test_unit_quaternions_are_the_matrix_round_trip_of_each_row():
    """The vectorised normalisation (the chunk message's quaternions) against the per-row round trip through the
    rotation matrix: non-unit lengths, negative w, near-identity; a zero or NaN quaternion is refused."""
    rng = np.random.default_rng(7)
    q = rng.standard_normal((200, 4)) * rng.uniform(0.1, 10.0, (200, 1))
    q[:5] = [[0, 0, 0, 1], [0, 0, 0, -3], [1e-9, 0, 0, -1], [0.3, -0.2, 0.1, -0.9], [1, 2, 3, 4]]
    got = rot.unit_quaternions(q)
    want = np.stack([rot.matrix_to_quaternion(rot.quaternion_to_matrix(row)) for row in q])
    np.testing.assert_allclose(got, want, atol=1e-12)
    for bad in ([[0, 0, 0, 0]], [[np.nan, 0, 0, 1]]):
        with pytest.raises(ValueError, match="finite and non-zero"):
            rot.unit_quaternions(bad)
