"""Training-time augmentations (para_core.data.augmentation via EpisodeDataset): ranges, seeds, what each one changes
(and what it must leave alone), checked against numpy / OpenCV / scipy references."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from training_helpers import one_torch_thread, quick  # noqa: F401  (autouse fixture)

from para_core.data import augmentation as aug_mod
from para_core.data import synthetic as syn
from para_core.data.augmentation import AugmentationDraw, Augmentations, apply_appearance, draw
from para_core.data.dataset import EpisodeDataset
from para_core.model.config import V4Config
from para_core.train.trainer import TrainConfig, train

VIEWS = ("scene", "wrist")
LABEL_KEYS = (
    "T_world_ee",
    "gripper",
    "past_positions_world",
    "target_positions_world",
    "target_rotations_world",
    "target_gripper",
    "episode_index",
    "frame_index",
)


def _angle_deg(R: np.ndarray) -> float:
    """Rotation angle of a 3x3 rotation matrix, degrees (trace formula, independent of the Rodrigues code)."""
    return float(np.degrees(np.arccos(np.clip((np.trace(R) - 1.0) / 2.0, -1.0, 1.0))))


def _episode_dir(tmp_path, cfg, seed=0, n_frames=6, name="ep"):
    ep = syn.synthetic_episode(cfg, np.random.default_rng(seed), n_frames=n_frames)
    return ep, ep.save(tmp_path / name)


# ------------------------------------------------------------------------------------------------ the draws
def test_each_draw_stays_within_its_range_and_repeats_from_the_seed():
    aug = Augmentations(
        told_extrinsics_error_m=0.01,
        told_extrinsics_error_deg=1.0,
        told_wrist_mount_error_m=0.003,
        told_wrist_mount_error_deg=3.0,
        told_focal_error_frac=0.05,
        told_principal_point_error_frac=0.02,
        zoom_range=(0.9, 1.2),
        exposure_range_stops=(-0.5, 0.25),
        gamma_range=(0.8, 1.25),
        blur_sigma_range_px=(0.2, 1.5),
        noise_sigma_range_levels=(1.0, 6.0),
    )
    S = 64
    torch.manual_seed(11)
    draws = [draw(aug, VIEWS, S) for _ in range(400)]
    t_scene = np.array([np.linalg.norm(d.T_cam_told[0, :3, 3]) for d in draws])
    r_scene = np.array([_angle_deg(d.T_cam_told[0, :3, :3]) for d in draws])
    t_wrist = np.array([np.linalg.norm(d.T_cam_told[1, :3, 3]) for d in draws])
    r_wrist = np.array([_angle_deg(d.T_cam_told[1, :3, :3]) for d in draws])
    for values, bound in ((t_scene, 0.01), (r_scene, 1.0), (t_wrist, 0.003), (r_wrist, 3.0)):
        assert values.max() <= bound * (1 + 1e-9) and values.max() > 0.95 * bound and values.min() < 0.05 * bound
    for d in draws:
        R = d.T_cam_told[:, :3, :3]
        assert np.allclose(np.einsum("nij,nkj->nik", R, R), np.eye(3), atol=1e-12)  # proper rotations
        assert np.allclose(np.linalg.det(R), 1.0)
    directions = np.stack([d.T_cam_told[0, :3, 3] for d in draws])  # (400, 3): both signs on every axis
    assert (directions.max(axis=0) > 0.005).all() and (directions.min(axis=0) < -0.005).all()
    focal = np.stack([d.focal_scale for d in draws])  # (400, 2)
    shift = np.stack([d.principal_shift_px for d in draws])  # (400, 2, 2)
    assert np.all(focal[:, 1] == 1.0) and np.all(shift[:, 1] == 0.0)  # told_intrinsics_views: scene only
    assert np.all(np.abs(focal[:, 0] - 1) <= 0.05) and np.abs(focal[:, 0] - 1).max() > 0.045
    assert np.all(np.abs(shift[:, 0]) <= 0.02 * S) and np.abs(shift[:, 0]).max() > 0.018 * S
    zoom = np.stack([d.zoom for d in draws])
    origin = np.stack([d.crop_origin_px for d in draws])  # (400, 2, 2)
    assert zoom.min() >= 0.9 and zoom.max() <= 1.2 and zoom.min() < 0.91 and zoom.max() > 1.19
    span = (S - S / zoom)[..., None]  # the crop stays inside a zoomed-in image; zoomed out, the image in the crop
    assert np.all(origin >= np.minimum(0, span) - 1e-12) and np.all(origin <= np.maximum(0, span) + 1e-12)
    for name, lo, hi in (
        ("exposure_gain", 2**-0.5, 2**0.25),
        ("gamma", 0.8, 1.25),
        ("blur_sigma_px", 0.2, 1.5),
        ("noise_sigma_levels", 1.0, 6.0),
    ):
        v = np.stack([getattr(d, name) for d in draws])
        assert v.min() >= lo - 1e-12 and v.max() <= hi + 1e-12, name
        assert v.min() < lo + 0.05 * (hi - lo) and v.max() > hi - 0.05 * (hi - lo), name
        assert np.std(v[:, 0] - v[:, 1]) > 0, name  # drawn per view
    torch.manual_seed(11)
    again = [draw(aug, VIEWS, S) for _ in range(400)]
    for a, b in zip(draws, again):
        for f in AugmentationDraw.__dataclass_fields__:
            assert np.array_equal(getattr(a, f), getattr(b, f)), f


def test_rigid_errors_match_the_rotation_they_claim():
    """The Rodrigues rotation against scipy's rotation vector: same angle, same axis."""
    from scipy.spatial.transform import Rotation

    axis = np.array([0.3, -0.4, 0.866])
    axis /= np.linalg.norm(axis)
    R = aug_mod.axis_angle_matrix(axis, np.radians(2.5))
    assert np.allclose(R, Rotation.from_rotvec(axis * np.radians(2.5)).as_matrix(), atol=1e-12)


# ------------------------------------------------------------------------------------------- in the dataset
def test_off_by_default_draws_nothing_and_changes_nothing(tmp_path):
    cfg = V4Config.tiny()
    _, ep_dir = _episode_dir(tmp_path, cfg)
    plain = EpisodeDataset([ep_dir], cfg)
    explicit = EpisodeDataset([ep_dir], cfg, augmentations=Augmentations())
    assert not Augmentations().active and Augmentations().record() == {}
    state = torch.get_rng_state()
    a, b = plain[2], explicit[2]
    assert torch.equal(torch.get_rng_state(), state)  # no RNG draw: existing runs keep their random streams
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_told_extrinsics_change_only_the_pose_the_model_is_given(tmp_path):
    cfg = V4Config.tiny()
    _, ep_dir = _episode_dir(tmp_path, cfg, n_frames=8)
    plain = EpisodeDataset([ep_dir], cfg)
    aug = Augmentations(
        told_extrinsics_error_m=0.02,
        told_extrinsics_error_deg=2.0,
        told_wrist_mount_error_m=0.004,
        told_wrist_mount_error_deg=3.0,
    )
    told = EpisodeDataset([ep_dir], cfg, augmentations=aug)
    torch.manual_seed(0)
    errors = {"scene": [], "wrist": []}
    for rep in range(40):
        i = rep % len(plain)
        a, b = plain[i], told[i]
        assert torch.equal(a["images"], b["images"]) and torch.equal(a["K_img"], b["K_img"])
        for k in LABEL_KEYS:  # the action targets and the robot state stay the truth
            assert torch.equal(a[k], b[k]), k
        for v, view in enumerate(VIEWS):
            T_true = a["T_world_cam"][v].double().numpy()
            T_told = b["T_world_cam"][v].double().numpy()
            assert not np.allclose(T_true, T_told)
            E = np.linalg.inv(T_true) @ T_told  # the error in the camera's own frame
            centre_moved_m = np.linalg.norm(T_told[:3, 3] - T_true[:3, 3])
            assert abs(centre_moved_m - np.linalg.norm(E[:3, 3])) < 1e-5  # composed in the camera frame
            errors[view].append((np.linalg.norm(E[:3, 3]), _angle_deg(E[:3, :3])))
    for view, (bound_m, bound_deg) in (("scene", (0.02, 2.0)), ("wrist", (0.004, 3.0))):
        t, r = np.array(errors[view]).T
        assert t.max() <= bound_m + 1e-5 and r.max() <= bound_deg + 1e-3, view  # float32 samples
        assert t.max() > 0.7 * bound_m and r.max() > 0.7 * bound_deg, view  # and not much smaller


def test_told_intrinsics_error_changes_only_K(tmp_path):
    cfg = V4Config.tiny()
    _, ep_dir = _episode_dir(tmp_path, cfg)
    plain = EpisodeDataset([ep_dir], cfg)
    aug = Augmentations(told_focal_error_frac=0.05, told_principal_point_error_frac=0.02, told_intrinsics_views=VIEWS)
    told = EpisodeDataset([ep_dir], cfg, augmentations=aug)
    S = cfg.img_size
    torch.manual_seed(1)
    scales = []
    for rep in range(30):
        a, b = plain[rep % len(plain)], told[rep % len(plain)]
        assert torch.equal(a["images"], b["images"]) and torch.equal(a["T_world_cam"], b["T_world_cam"])
        for k in LABEL_KEYS:
            assert torch.equal(a[k], b[k]), k
        K0, K1 = a["K_img"].double().numpy(), b["K_img"].double().numpy()  # (2, 3, 3)
        sx, sy = K1[:, 0, 0] / K0[:, 0, 0], K1[:, 1, 1] / K0[:, 1, 1]
        assert np.allclose(sx, sy, rtol=1e-6)  # one focal-length error per view
        assert np.all(np.abs(sx - 1) <= 0.05 + 1e-6)
        assert np.all(np.abs(K1[:, :2, 2] - K0[:, :2, 2]) <= 0.02 * S + 1e-4)
        assert np.array_equal(K1[:, 2], K0[:, 2]) and np.all(K1[:, 0, 1] == 0)
        scales.extend(sx.tolist())
    assert max(abs(s - 1) for s in scales) > 0.04


def test_consistent_zoom_moves_the_drawn_point_where_opencv_projects_it(tmp_path):
    """The green disc drawn at the tool's projection lands, after the zoom / crop, at the projection through the new
    K (cv2.projectPoints), within 0.5 px: zooming in and out."""
    import cv2

    cfg = V4Config.tiny(img_size=128)
    ep, ep_dir = _episode_dir(tmp_path, cfg, seed=5, n_frames=4)
    T_cam_world = np.linalg.inv(ep.T_world_cam["scene"][0])
    rvec, _ = cv2.Rodrigues(T_cam_world[:3, :3])
    checked = 0
    for zoom_range in ((1.15, 1.4), (0.7, 0.85)):
        ds = EpisodeDataset([ep_dir], cfg, augmentations=Augmentations(zoom_range=zoom_range))
        plain_K = EpisodeDataset([ep_dir], cfg)[0]["K_img"][0].double().numpy()
        torch.manual_seed(3)
        for _ in range(12):
            s = ds[0]
            K = s["K_img"][0].double().numpy()
            z = K[0, 0] / plain_K[0, 0]
            assert zoom_range[0] - 1e-6 <= z <= zoom_range[1] + 1e-6 and abs(K[1, 1] / plain_K[1, 1] - z) < 1e-6
            uv, _ = cv2.projectPoints(ep.T_world_ee[0, :3, 3][None], rvec, T_cam_world[:3, 3], K, None)
            uv = uv.reshape(2)
            if not (12 <= uv[0] <= 116 and 12 <= uv[1] <= 116):
                continue  # the disc is cut by the crop's edge: its centroid is not its centre
            img = s["images"][0].permute(1, 2, 0).numpy().astype(np.int32)  # (S, S, 3)
            green = (img[..., 1] > 150) & (img[..., 0] < 120)
            rows, cols = np.nonzero(green)
            assert rows.size > 3
            centroid = np.array([cols.mean() + 0.5, rows.mean() + 0.5])  # pixel centres at +0.5
            assert np.abs(centroid - uv).max() < 0.5, (zoom_range, centroid, uv)
            checked += 1
    assert checked >= 8


def test_zoom_resamples_at_the_pixel_centre_convention():
    """A linear ramp (value 8 * (u - 0.5) + 10 at pixel centres u = col + 0.5) is reproduced by bilinear resampling:
    the zoomed image at u' holds the ramp at u = u' / z + x0. A half-pixel slip (cv2's integer centres taken for
    PARA's) would shift it by 0.5 (z - 1) / z px, 1.3 levels at z = 1.5."""
    import cv2

    S = 30
    cols = np.arange(S, dtype=np.float64)
    img = np.repeat((8.0 * cols + 10.0).astype(np.uint8)[None, :, None], S, axis=0).repeat(3, axis=2)  # (S, S, 3)
    for zoom, x0 in ((1.5, 4.0), (1.25, 2.7), (2.0, 7.5)):
        out = aug_mod.zoom_image(img, zoom, (x0, 3.0)).astype(np.float64)
        u = (cols + 0.5) / zoom + x0  # (S,) source position of each output column's centre
        expected = 8.0 * (u - 0.5) + 10.0
        inside = (u > 1.0) & (u < S - 1.0)
        err = out[S // 2, inside, 0] - expected[inside]
        assert np.abs(err).mean() < 0.4 and np.abs(err).max() < 1.0, (zoom, x0, err)
    # OpenCV's bilinear warp as the reference (its pixel centres at integers: u'_cv = z u_cv + z (0.5 - x0) - 0.5),
    # zooming in and out, on a smooth random image: within OpenCV's 1/32 px fixed-point rounding
    coarse = np.random.default_rng(2).integers(0, 256, size=(8, 8, 3), dtype=np.uint8)
    rnd = cv2.resize(coarse, (40, 40), interpolation=cv2.INTER_CUBIC)  # (40, 40, 3)
    for zoom, (x0, y0) in ((1.3, (5.2, 1.7)), (0.8, (-4.0, -6.5))):
        M = np.array([[zoom, 0.0, zoom * (0.5 - x0) - 0.5], [0.0, zoom, zoom * (0.5 - y0) - 0.5]])
        ref = cv2.warpAffine(rnd, M, (40, 40), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0)
        diff = np.abs(aug_mod.zoom_image(rnd, zoom, (x0, y0)).astype(int) - ref.astype(int))
        assert diff.max() <= 2 and diff.mean() < 0.4, (zoom, diff.max(), diff.mean())
    A = aug_mod.zoom_matrix(1.5, (4.0, 3.0))  # K' = A @ K: u' = 1.5 (u - 4)
    assert np.allclose(A @ np.array([10.0, 7.0, 1.0]), [9.0, 6.0, 1.0])


def test_zoomed_out_border_is_black_and_zoom_one_is_the_identity():
    rng = np.random.default_rng(0)
    img = rng.integers(1, 256, size=(32, 32, 3), dtype=np.uint8)
    assert np.array_equal(aug_mod.zoom_image(img, 1.0, (0.0, 0.0)), img)
    out = aug_mod.zoom_image(img, 0.5, (-16.0, -16.0))  # the image shrunk into the middle half
    assert np.all(out[:7] == 0) and np.all(out[:, -7:] == 0) and out[10:22, 10:22].min() > 0


def test_appearance_against_independent_references():
    from scipy.ndimage import gaussian_filter

    S = 48
    rng = np.random.default_rng(1)
    base = torch.from_numpy(rng.integers(40, 216, size=(2, 3, S, S), dtype=np.uint8))  # (N, 3, S, S)

    def one(**per_view) -> AugmentationDraw:
        d = draw(Augmentations(), VIEWS, S)  # the identity
        for k, v in per_view.items():
            setattr(d, k, np.asarray(v, dtype=np.float64))
        return d

    const = torch.full((2, 3, S, S), 64, dtype=torch.uint8)
    out = apply_appearance(const, one(exposure_gain=[2.0, 0.5])).numpy()
    assert np.all(out[0] == 128) and np.all(out[1] == 32)
    out = apply_appearance(const, one(gamma=[0.5, 2.0])).numpy()
    assert np.all(out[0] == round(255 * (64 / 255) ** 0.5)) and np.all(out[1] == round(255 * (64 / 255) ** 2))
    sigma = 1.3
    out = apply_appearance(base, one(blur_sigma_px=[sigma, 0.0])).numpy().astype(np.float64)
    r = int(np.ceil(3 * sigma))
    ref = np.stack(
        [gaussian_filter(base[0, c].double().numpy(), sigma, mode="mirror", truncate=r / sigma) for c in range(3)]
    )
    assert np.abs(out[0] - ref).max() <= 0.5 + 1e-3  # rounding only
    assert np.array_equal(out[1], base[1].numpy())  # sigma 0: untouched
    torch.manual_seed(0)
    noisy = apply_appearance(const.repeat(1, 1, 2, 2), one(noise_sigma_levels=[8.0, 2.0])).numpy().astype(float)
    resid = noisy - 64  # (2, 3, 2S, 2S)
    assert abs(resid[0].std() - 8.0) < 0.3 and abs(resid[0].mean()) < 0.2
    assert abs(resid[1].std() - np.sqrt(2.0**2 + 1 / 12)) < 0.15  # sigma 2 plus the rounding's uniform error


def _hue_reference(rgb: np.ndarray, degrees: float) -> np.ndarray:
    """(H, W, 3) levels -> hue turned by ``degrees``, one pixel at a time through the standard library's HSV."""
    import colorsys

    out = np.empty(rgb.shape, dtype=np.float64)
    for idx in np.ndindex(rgb.shape[:2]):
        h, s_, v = colorsys.rgb_to_hsv(*(rgb[idx] / 255.0))
        out[idx] = np.array(colorsys.hsv_to_rgb((h + degrees / 360.0) % 1.0, s_, v)) * 255.0
    return out


def test_hue_rotation_and_greyscale_against_the_standard_library_and_opencv():
    import cv2

    rng = np.random.default_rng(3)
    img = rng.integers(0, 256, size=(12, 10, 3)).astype(np.uint8)
    img[0, :3] = [[200, 0, 0], [90, 90, 90], [0, 0, 0]]  # pure red, a grey, black
    for degrees in (-170.0, -35.0, 0.0, 60.0, 123.4, 180.0):
        ours = aug_mod.rotate_hue(img.astype(np.float32), degrees)
        assert np.abs(ours - _hue_reference(img.astype(np.float64), degrees)).max() < 1e-3, degrees
    red, grey, black = aug_mod.rotate_hue(img[:1, :3].astype(np.float32), 120.0)[0]
    assert np.allclose(red, [0, 200, 0]) and np.allclose(grey, [90, 90, 90]) and np.allclose(black, 0)

    n = 3
    d = AugmentationDraw.identity(n)
    d.hue_shift_deg, d.grey = np.array([0.0, 90.0, 90.0]), np.array([False, False, True])
    images = torch.from_numpy(np.stack([img] * n)).permute(0, 3, 1, 2).contiguous()  # (3, 3, H, W) uint8
    out = apply_appearance(images, d).permute(0, 2, 3, 1).numpy().astype(np.int64)  # (3, H, W, 3)
    assert np.array_equal(out[0], img)  # identity: unchanged
    turned = np.rint(np.clip(_hue_reference(img.astype(np.float64), 90.0), 0, 255))
    assert np.abs(out[1] - turned).max() <= 1
    grey_ref = cv2.cvtColor(np.rint(np.clip(turned, 0, 255)).astype(np.uint8), cv2.COLOR_RGB2GRAY).astype(np.int64)
    assert np.array_equal(out[2][..., 0], out[2][..., 1]) and np.array_equal(out[2][..., 0], out[2][..., 2])
    assert np.abs(out[2][..., 0] - grey_ref).max() <= 1  # greyscale after the hue (the module's order)


def test_colour_draws_stay_in_range_and_leave_the_other_draws_as_they_were():
    base = dict(exposure_range_stops=(-0.5, 0.5), noise_sigma_range_levels=(0.0, 4.0))
    torch.manual_seed(5)
    plain = [draw(Augmentations(**base), VIEWS, 64) for _ in range(300)]
    torch.manual_seed(5)
    coloured = [draw(Augmentations(**base, hue_shift_range_deg=(-90.0, 45.0), grey_probability=0.25), VIEWS, 64)]
    # the colour draws come after the others: the first sample's exposure and noise are those of a recipe without them
    assert np.array_equal(coloured[0].exposure_gain, plain[0].exposure_gain)
    assert np.array_equal(coloured[0].noise_sigma_levels, plain[0].noise_sigma_levels)
    assert np.all(plain[0].hue_shift_deg == 0) and not plain[0].grey.any()
    torch.manual_seed(6)
    aug = Augmentations(hue_shift_range_deg=(-90.0, 45.0), grey_probability=0.25)
    draws = [draw(aug, VIEWS, 64) for _ in range(400)]
    hue = np.concatenate([d.hue_shift_deg for d in draws])
    grey = np.concatenate([d.grey for d in draws])
    assert hue.min() >= -90.0 and hue.max() <= 45.0 and hue.min() < -85.0 and hue.max() > 40.0
    assert 0.2 < grey.mean() < 0.3
    torch.manual_seed(6)
    again = draw(aug, VIEWS, 64)
    assert np.array_equal(again.hue_shift_deg, draws[0].hue_shift_deg) and np.array_equal(again.grey, draws[0].grey)
    assert aug.record() == {"hue_shift_range_deg": [-90.0, 45.0], "grey_probability": 0.25}


def test_dataset_noise_stays_within_its_sigma_range_and_repeats_from_the_seed(tmp_path):
    cfg = V4Config.tiny()
    _, ep_dir = _episode_dir(tmp_path, cfg)
    plain = EpisodeDataset([ep_dir], cfg)
    ds = EpisodeDataset([ep_dir], cfg, augmentations=Augmentations(noise_sigma_range_levels=(3.0, 9.0)))
    torch.manual_seed(5)
    sigmas = []
    for rep in range(40):
        a = plain[rep % len(plain)]["images"].double()
        b = ds[rep % len(plain)]["images"].double()
        for v in range(a.shape[0]):
            inside = (a[v] > 40) & (a[v] < 215)  # away from the clipping at 0 and 255
            sigmas.append(float((b[v] - a[v])[inside].std()))
    sigmas = np.array(sigmas)
    assert sigmas.min() > 3.0 - 0.5 and sigmas.max() < 9.0 + 0.5 and sigmas.max() - sigmas.min() > 3.0
    torch.manual_seed(9)
    first = [ds[i] for i in range(3)]
    torch.manual_seed(9)
    second = [ds[i] for i in range(3)]
    torch.manual_seed(10)
    other = ds[0]
    for x, y in zip(first, second):
        for k in x:
            assert torch.equal(x[k], y[k]), k
    assert not torch.equal(first[0]["images"], other["images"])
    for k in LABEL_KEYS + ("K_img", "T_world_cam"):
        assert torch.equal(first[0][k], plain[0][k]), k  # appearance only


# ----------------------------------------------------------------------------------------------- bad values
@pytest.mark.parametrize(
    "field, value, rule",
    [
        ("told_extrinsics_error_m", -0.01, r"within \[0, 0.2\]"),
        ("told_extrinsics_error_deg", float("nan"), "within"),
        ("told_wrist_mount_error_deg", 45.0, "within"),
        ("told_focal_error_frac", True, "within"),
        ("told_principal_point_error_frac", -1, "within"),
        ("zoom_range", (1.2, 1.1), "inverted"),
        ("zoom_range", (0.1, 1.0), r"within \[0.5, 2\]"),
        ("exposure_range_stops", (0.5,), "pair"),
        ("gamma_range", (0.0, 1.0), "within"),
        ("blur_sigma_range_px", (-1.0, 1.0), "within"),
        ("noise_sigma_range_levels", (5.0, 2.0), "inverted"),
        ("noise_sigma_range_levels", "0 5", "pair"),
        ("told_extrinsics_views", "scene", "list of view names"),
        ("told_intrinsics_views", ("",), "non-empty"),
        ("hue_shift_range_deg", (30.0, -30.0), "inverted"),
        ("hue_shift_range_deg", (-200.0, 0.0), r"within \[-180, 180\]"),
        ("grey_probability", 1.5, r"within \[0, 1\]"),
    ],
)
def test_bad_augmentation_values_are_refused_naming_the_option(field, value, rule):
    with pytest.raises(ValueError, match=rf"TrainConfig\.{field} = .* is invalid: .*{rule}"):
        TrainConfig(**{field: value})
    with pytest.raises(ValueError, match=rf"augmentation {field} = .* is invalid"):
        Augmentations(**{field: value})


def test_views_the_model_lacks_or_named_twice_are_refused(tmp_path):
    cfg = V4Config.tiny()
    _, ep_dir = _episode_dir(tmp_path, cfg, n_frames=2)
    with pytest.raises(ValueError, match=r"told_extrinsics_views = \['front'\] is invalid: \['front'\] are not"):
        EpisodeDataset(
            [ep_dir], cfg, augmentations=Augmentations(told_extrinsics_views=("front",), told_extrinsics_error_m=0.01)
        )
    both = Augmentations(told_extrinsics_error_m=0.01, told_wrist_mount_error_m=0.01, told_wrist_mount_views=VIEWS)
    with pytest.raises(ValueError, match="told_wrist_mount_views .* also in told_extrinsics_views"):
        EpisodeDataset([ep_dir], cfg, augmentations=both)
    # an option that is off does not check its views
    EpisodeDataset([ep_dir], cfg, augmentations=Augmentations(told_intrinsics_views=("front",)))


def test_para_train_refuses_a_bad_range_before_anything_runs(tmp_path, capsys):
    from para_core.train.cli import main

    cfg = V4Config.tiny()
    _, ep_dir = _episode_dir(tmp_path, cfg, n_frames=2)
    out = tmp_path / "run"
    with pytest.raises(SystemExit):
        main(["--data", str(ep_dir), "--preset", "tiny", "--out", str(out), "--blur-sigma-range-px", "2", "1"])
    assert "TrainConfig.blur_sigma_range_px = [2.0, 1.0] is invalid: the range is inverted" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--data", str(ep_dir), "--preset", "tiny", "--out", str(out), "--told-focal-error-frac", "0.05",
              "--told-intrinsics-views", "left"])  # fmt: skip
    assert "told_intrinsics_views = ['left'] is invalid" in capsys.readouterr().err
    assert not out.exists()


# ------------------------------------------------------------------------------------------------- recorded
def test_a_run_records_its_augmentations_in_run_json_and_the_checkpoint(tmp_path):
    cfg = V4Config.tiny(max_iters=2, batch_size=2, lr_warmup=1)
    dirs = [_episode_dir(tmp_path, cfg, seed=s, n_frames=4, name=f"ep{s}")[1] for s in range(2)]
    tc = quick(
        tensorboard=False,
        told_extrinsics_error_m=0.01,
        told_extrinsics_error_deg=1.0,
        zoom_range=[0.95, 1.1],  # a YAML list
        noise_sigma_range_levels=(0.0, 4.0),
    )
    assert tc.zoom_range == (0.95, 1.1)
    result = train(cfg, tc, dirs, tmp_path / "run")
    run = json.loads((result.run_dir / "run.json").read_text())
    assert run["train_config"]["told_extrinsics_error_m"] == 0.01 and run["train_config"]["zoom_range"] == [0.95, 1.1]
    assert TrainConfig.from_dict(run["train_config"]).augmentations == tc.augmentations  # resume reads them back
    extra = json.loads((result.checkpoint_dir / "config.json").read_text())["extra"]
    assert extra["augmentations"] == {
        "told_extrinsics_error_m": 0.01,
        "told_extrinsics_error_deg": 1.0,
        "told_extrinsics_views": ["scene"],
        "zoom_range": [0.95, 1.1],
        "noise_sigma_range_levels": [0.0, 4.0],
    }


def test_resume_keeps_the_runs_augmentations_and_refuses_to_change_them(tmp_path):
    from para_core.train.cli import build_parser, resolve_configs

    saved = TrainConfig(told_extrinsics_error_m=0.01, zoom_range=(0.95, 1.05))
    run = {"model_config": V4Config.tiny().to_dict(), "train_config": saved.to_dict()}
    (tmp_path / "run.json").write_text(json.dumps({**run, "train_episodes": [], "val_episodes": []}))
    _, resumed, _ = resolve_configs(build_parser().parse_args(["--out", str(tmp_path), "--resume"]))
    assert resumed.augmentations == saved.augmentations
    args = build_parser().parse_args(["--out", str(tmp_path), "--resume", "--zoom-range", "1", "1.1"])
    with pytest.raises(ValueError, match=r"--resume cannot change \['zoom_range'\]"):
        resolve_configs(args)


def test_train_config_spells_every_augmentation_with_its_default():
    """TrainConfig repeats the augmentation fields flat (for the YAML recipes): the same names, the same defaults."""
    import dataclasses

    from para_core.data.augmentation import Augmentations, field_names
    from para_core.train.trainer import TrainConfig

    aug = {f.name: f.default for f in dataclasses.fields(Augmentations)}
    train = {f.name: f.default for f in dataclasses.fields(TrainConfig)}
    assert set(field_names()) == set(aug)
    for name in aug:
        assert name in train and train[name] == aug[name], name


def test_the_colour_recipe_fine_tunes_the_robust_checkpoint_and_records_its_colour_augmentations(tmp_path):
    """config/train_pick_place_robust_colour.yaml, cut to 2 iterations: it loads on top of the robust checkpoint
    (schedule fields only) and its checkpoint says it was trained with the hue rotation and greyscale."""
    from pathlib import Path

    from para_core.train.cli import main as train_main

    repo = Path(__file__).resolve().parents[1]
    cfg = V4Config.tiny()
    for s in range(2):
        _episode_dir(tmp_path / "data", cfg, seed=s, n_frames=12, name=f"ep{s}")
    args = ["--data", str(tmp_path / "data"), "--preset", "pick_place", "--out", str(tmp_path / "run"),
            "--config", str(repo / "config" / "train_pick_place_robust_colour.yaml"),
            "--init-from", str(repo / "checkpoints" / "pick_place_robust"), "--max-iters", "2", "--batch-size", "2",
            "--num-workers", "0", "--val-fraction", "0", "--device", "cpu", "--no-progress", "--no-tensorboard"]  # fmt: skip
    assert train_main(args) == 0
    extra = json.loads((tmp_path / "run" / "checkpoint" / "config.json").read_text())["extra"]
    assert extra["augmentations"]["hue_shift_range_deg"] == [-180.0, 180.0]
    assert extra["augmentations"]["grey_probability"] == 0.33
