"""para_core.eval.projection, the one NumPy projection every overlay and figure draws with: against
cv2.projectPoints (an independent implementation) with non-square pixels and an off-centre principal point; depth along the optical axis; points
behind the camera not projected; and the same pixels as the model's torch projection (para_core.model.geometry)."""

import cv2
import numpy as np
import torch

from para_core.data import synthetic as syn
from para_core.eval.projection import MIN_DEPTH_M, project_points
from para_core.model.geometry import project

T_WORLD_CAM = syn.scene_camera_pose()
K = syn.intrinsics_from_fovy(640, 480, 55.0)
K[0, 1] = 0.0  # OpenCV's model has no skew
K[1, 1] *= 1.03  # non-square pixels and an off-centre principal point: a transposed K or swapped u/v would show
K[0, 2] += 7.25


def _workspace_points(n: int = 200, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.column_stack([rng.uniform(-0.1, 0.7, n), rng.uniform(-0.4, 0.4, n), rng.uniform(0.0, 0.4, n)])


def test_matches_cv2_project_points_and_gives_the_depth():
    pts = _workspace_points()
    uv, depth = project_points(pts, K, T_WORLD_CAM)
    T_cam_world = np.linalg.inv(T_WORLD_CAM)
    rvec, _ = cv2.Rodrigues(T_cam_world[:3, :3])
    ref, _ = cv2.projectPoints(pts, rvec, T_cam_world[:3, 3], K, np.zeros(5))
    np.testing.assert_allclose(uv, ref.reshape(-1, 2), atol=1e-7)
    np.testing.assert_allclose(depth, (pts @ T_cam_world[:3, :3].T + T_cam_world[:3, 3])[:, 2], atol=1e-12)


def test_points_behind_or_on_the_camera_plane_are_not_projected():
    centre, axis = T_WORLD_CAM[:3, 3], T_WORLD_CAM[:3, 2]
    pts = np.stack([centre - 0.5 * axis, centre + 0.5 * MIN_DEPTH_M * axis, centre + 0.5 * axis])
    uv, depth = project_points(pts, K, T_WORLD_CAM)
    assert np.isnan(uv[:2]).all() and depth[0] < 0
    np.testing.assert_allclose(uv[2], K[:2, 2])  # on the optical axis: the principal point


def test_same_pixels_as_the_models_projection():
    pts = _workspace_points(seed=5)
    uv, depth = project_points(pts, K, T_WORLD_CAM)
    uv_t, depth_t = project(torch.as_tensor(pts), torch.as_tensor(K), torch.as_tensor(T_WORLD_CAM))
    np.testing.assert_allclose(uv, uv_t.numpy(), atol=1e-9)
    np.testing.assert_allclose(depth, depth_t.numpy(), atol=1e-12)
