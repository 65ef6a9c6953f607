"""Geometry against independent references: cv2.projectPoints, cv2.resize's pixel grid, hand-computed numbers."""

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from para_core.model.geometry import (
    adaptive_z_range,
    crop_intrinsics,
    look_at,
    pixel_centres,
    project,
    resize_intrinsics,
    scale_intrinsics,
    unproject_to_height,
)


def _cameras():
    """(name, K (3,3), T_world_cam (4,4)) float64: an oblique scene camera, a wrist camera 0.2 m above the table
    looking down, and random look-at cameras."""
    rng = np.random.default_rng(0)
    cams = []
    K = np.array([[600.0, 0, 320.0], [0, 610.0, 240.0], [0, 0, 1]])
    cams.append(("scene_oblique", K, look_at(torch.tensor([0.3, -0.6, 0.9]), torch.tensor([0.3, 0.0, 0.0]))))
    Kw = np.array([[420.0, 0, 212.3], [0, 420.0, 119.7], [0, 0, 1]])
    cams.append(
        (
            "wrist_down",
            Kw,
            look_at(torch.tensor([0.35, 0.05, 0.2]), torch.tensor([0.37, 0.04, 0.0]), up=torch.tensor([1.0, 0.0, 0.0])),
        )
    )
    for i in range(4):
        eye = torch.tensor([rng.uniform(-0.5, 0.8), rng.uniform(-0.8, 0.8), rng.uniform(0.3, 1.5)])
        tgt = torch.tensor([rng.uniform(0.1, 0.5), rng.uniform(-0.2, 0.2), 0.0])
        Kr = np.array(
            [
                [rng.uniform(200, 900), 0, rng.uniform(100, 400)],
                [0, rng.uniform(200, 900), rng.uniform(100, 300)],
                [0, 0, 1],
            ]
        )
        cams.append((f"random{i}", Kr, look_at(eye, tgt)))
    return [(n, torch.tensor(K, dtype=torch.float64), T.double()) for n, K, T in cams]


@pytest.mark.parametrize("name,K,T", _cameras(), ids=[c[0] for c in _cameras()])
def test_project_matches_cv2(name, K, T):
    rng = np.random.default_rng(1)
    pts = rng.uniform([-0.1, -0.4, 0.0], [0.7, 0.4, 0.4], size=(200, 3))
    uv, depth = project(torch.tensor(pts), K, T)
    R_wc, t_wc = T[:3, :3].numpy(), T[:3, 3].numpy()
    rvec, _ = cv2.Rodrigues(R_wc.T)
    tvec = -R_wc.T @ t_wc
    ref, _ = cv2.projectPoints(pts, rvec, tvec, K.numpy(), None)
    front = depth.numpy() > 0
    assert front.sum() > 50
    err = np.abs(uv.numpy()[front] - ref[:, 0][front]).max()
    assert err < 1e-6, err
    # depth is the z of the camera-frame point
    assert np.allclose(depth.numpy(), ((pts - t_wc) @ R_wc)[:, 2])


@pytest.mark.parametrize("name,K,T", _cameras(), ids=[c[0] for c in _cameras()])
def test_unproject_then_project_round_trip(name, K, T):
    rng = np.random.default_rng(2)
    W, H = 2 * K[0, 2].item(), 2 * K[1, 2].item()
    uv = torch.tensor(rng.uniform([0, 0], [W, H], size=(500, 2)))
    cam_z = T[2, 3].item()
    z = torch.tensor(rng.uniform(0.0, cam_z - 0.02, size=500))
    pts, valid = unproject_to_height(uv, z, K, T)
    assert valid.sum() > 100
    assert torch.allclose(pts[:, 2], z)
    uv2, depth = project(pts, K, T)
    assert (depth[valid] > 0).all()
    err = (uv2[valid] - uv[valid]).abs().max().item()
    assert err < 1e-4, err
    # cv2 as the independent check of the same round trip
    R_wc, t_wc = T[:3, :3].numpy(), T[:3, 3].numpy()
    ref, _ = cv2.projectPoints(pts[valid].numpy(), cv2.Rodrigues(R_wc.T)[0], -R_wc.T @ t_wc, K.numpy(), None)
    assert np.abs(ref[:, 0] - uv[valid].numpy()).max() < 1e-4


def test_unproject_marks_rays_meeting_plane_behind_camera():
    # Camera 0.5 m up, looking horizontally along +x: the upper half of the image looks up and never meets z = 0
    # in front; rays of the lower half do.
    K = torch.tensor([[100.0, 0, 50], [0, 100.0, 50], [0, 0, 1]], dtype=torch.float64)
    T = look_at(torch.tensor([0.0, 0.0, 0.5]), torch.tensor([1.0, 0.0, 0.5]))
    uv = torch.tensor([[50.0, 10.0], [50.0, 90.0], [50.0, 50.0]], dtype=torch.float64)
    pts, valid = unproject_to_height(uv, 0.0, K, T)
    assert valid.tolist() == [False, True, False]  # up: behind; down: in front; centre: parallel
    # Hand computation for the lower ray: direction (1, 0, -0.4) per unit depth -> hits z = 0 at x = 0.5 / 0.4.
    assert torch.allclose(pts[1], torch.tensor([1.25, 0.0, 0.0], dtype=torch.float64))
    # A plane above the camera is met by the upper ray in front.
    _, valid_up = unproject_to_height(uv, 1.0, K, T)
    assert valid_up.tolist() == [True, False, False]


def test_adaptive_z_range_hand_numbers():
    cam_z = torch.tensor([[1.0, 0.2]], dtype=torch.float64)
    z_hi, centres = adaptive_z_range(cam_z, 0.0, 0.4, 0.01, n_bins=4)
    assert torch.allclose(z_hi, torch.tensor([[0.4, 0.19]], dtype=torch.float64))
    assert torch.allclose(centres[0, 0], torch.tensor([0.05, 0.15, 0.25, 0.35], dtype=torch.float64))
    assert torch.allclose(centres[0, 1], torch.tensor([0.02375, 0.07125, 0.11875, 0.16625], dtype=torch.float64))
    z_hi_f, _ = adaptive_z_range(cam_z, 0.0, 0.4, 0.01, n_bins=4, mode="fixed")
    assert torch.allclose(z_hi_f, torch.tensor([[0.4, 0.4]], dtype=torch.float64))
    z_hi_low, _ = adaptive_z_range(torch.tensor([0.005]), 0.0, 0.4, 0.01, n_bins=4, min_span_m=0.01)
    assert torch.allclose(z_hi_low, torch.tensor([0.01]))


def test_resize_intrinsics_matches_cv2_resize_pixel_grid():
    """cv2.resize (INTER_LINEAR) samples output pixel centre c'+0.5 at input coordinate (c'+0.5)/s: an image that
    stores each pixel's own centre u shows, after resizing, the original u of every new pixel centre, which must equal
    new_u / s -- the K' = diag(s) K rule."""
    W, H, W2, H2 = 64, 48, 160, 120
    u_img = np.tile(np.arange(W, dtype=np.float32) + 0.5, (H, 1))
    v_img = np.tile((np.arange(H, dtype=np.float32) + 0.5)[:, None], (1, W))
    u2 = cv2.resize(u_img, (W2, H2), interpolation=cv2.INTER_LINEAR)
    v2 = cv2.resize(v_img, (W2, H2), interpolation=cv2.INTER_LINEAR)
    centres = pixel_centres(H2, W2, dtype=torch.float64).reshape(H2, W2, 2).numpy()
    sx, sy = W2 / W, H2 / H
    inner = (slice(4, -4), slice(4, -4))
    assert np.abs(u2[inner] - centres[..., 0][inner] / sx).max() < 1e-4
    assert np.abs(v2[inner] - centres[..., 1][inner] / sy).max() < 1e-4
    K = torch.tensor([[500.0, 0, 31.0], [0, 510.0, 23.0], [0, 0, 1]], dtype=torch.float64)
    K2 = resize_intrinsics(K, (H, W), (H2, W2))
    assert torch.allclose(
        K2, torch.tensor([[500 * sx, 0, 31 * sx], [0, 510 * sy, 23 * sy], [0, 0, 1]], dtype=torch.float64)
    )
    assert torch.allclose(scale_intrinsics(K, sx, sy), K2)
    Kc = crop_intrinsics(K, 10, 5)
    assert Kc[0, 2] == 21.0 and Kc[1, 2] == 18.0 and Kc[0, 0] == 500.0


def test_patch_grid_upsample_is_pixel_centre_aligned():
    """A 16-px ViT token (i, j) is centred at image u = 16 j + 8; bilinear upsampling (align_corners=False) of the
    token grid to P x P must put at pred pixel c the image coordinate of its centre, (c + 0.5) * S / P."""
    S, p, P = 512, 16, 64
    g = S // p
    u_tok = (torch.arange(g, dtype=torch.float64) * p + p / 2).view(1, 1, 1, g).expand(1, 1, g, g)
    up = F.interpolate(u_tok, size=(P, P), mode="bilinear", align_corners=False)[0, 0, 0]
    expect = (torch.arange(P, dtype=torch.float64) + 0.5) * S / P
    assert (up[2:-2] - expect[2:-2]).abs().max() < 1e-9
