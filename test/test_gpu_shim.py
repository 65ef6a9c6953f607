"""bench/gpu_shim's NumPy ``Rotation`` (for a GPU machine without SciPy) against SciPy's own."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from scipy.spatial.transform import Rotation as ScipyRotation

SHIM = Path(__file__).resolve().parent.parent / "bench" / "gpu_shim" / "scipy" / "spatial" / "transform.py"


@pytest.fixture(scope="module")
def shim():
    spec = importlib.util.spec_from_file_location("gpu_shim_transform", SHIM)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def Rotation(shim):
    return shim.Rotation


def _rotations(n=200, seed=0):
    rng = np.random.default_rng(seed)
    rotvec = rng.normal(size=(n, 3))
    rotvec *= (rng.uniform(0, np.pi, n) / np.linalg.norm(rotvec, axis=1))[:, None]
    rotvec[:3] = [[0, 0, 0], [1e-5, 0, 0], [0, 0, np.pi - 1e-9]]  # identity, tiny, half turn
    return rotvec


def test_matches_scipy_on_stacks_and_single_rotations(Rotation):
    rotvec = _rotations()
    ours, theirs = Rotation.from_rotvec(rotvec), ScipyRotation.from_rotvec(rotvec)
    np.testing.assert_allclose(ours.as_matrix(), theirs.as_matrix(), atol=1e-12)
    mats = theirs.as_matrix()
    np.testing.assert_allclose(Rotation.from_matrix(mats).as_matrix(), mats, atol=1e-12)
    np.testing.assert_allclose(Rotation.from_matrix(mats[3:]).as_rotvec(), rotvec[3:], atol=1e-9)
    quats = theirs.as_quat()
    np.testing.assert_allclose(Rotation.from_quat(quats).as_matrix(), mats, atol=1e-12)
    q_ours = Rotation.from_matrix(mats).as_quat()
    np.testing.assert_allclose(np.abs(np.sum(q_ours * quats, axis=1)), 1.0, atol=1e-12)  # same up to sign
    single = Rotation.from_rotvec(rotvec[5])
    assert single.as_matrix().shape == (3, 3) and single.as_quat().shape == (4,) and single.as_rotvec().shape == (3,)
    np.testing.assert_allclose(single.as_rotvec(), rotvec[5], atol=1e-12)


def test_euler_and_slerp_match_scipy(shim):
    from scipy.spatial.transform import Slerp as ScipySlerp

    yaw = np.linspace(-0.5, 0.5, 7)
    np.testing.assert_allclose(
        shim.Rotation.from_euler("z", yaw[:, None]).as_matrix(),
        ScipyRotation.from_euler("z", yaw[:, None]).as_matrix(),
        atol=1e-12,
    )
    assert shim.Rotation.from_euler("z", 0.3).as_matrix().shape == (3, 3)
    keys = ScipyRotation.from_rotvec(_rotations(5, seed=1))
    times, query = np.array([0.0, 0.5, 1.5, 2.0, 3.0]), np.linspace(0.0, 3.0, 31)
    ours = shim.Slerp(times, shim.Rotation.from_quat(keys.as_quat()))(query).as_matrix()
    np.testing.assert_allclose(ours, ScipySlerp(times, keys)(query).as_matrix(), atol=1e-9)
