"""The fast v4 inference path (``para_core.model.v4_fast``) against the reference path, its oracle: the
same argmax voxels, logits within float tolerance, decoded poses within a tenth of a voxel, the same rviz voxels, for
the tiny config, the mid-size pick-and-place config and a learned height encoding, and with a chunked voxel MLP."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from para_core.data import synthetic as syn
from para_core.model.config import V4Config
from para_core.model.policy import CameraObservation, Policy, RobotState


def observation(cfg: V4Config, seed: int):
    """Two synthetic views of a scene (random images), the EE above the table: cameras, state."""
    rng = np.random.default_rng(seed)
    T_ee = np.eye(4)
    T_ee[:3, :3] = syn.top_down_rotation()
    T_ee[:3, 3] = [0.32 + 0.05 * rng.standard_normal(), 0.03 * rng.standard_normal(), 0.12]
    K = np.array([[300.0, 0, 160.0], [0, 300.0, 120.0], [0, 0, 1.0]])
    cams = [
        CameraObservation(
            image_rgb=rng.integers(0, 255, (240, 320, 3), dtype=np.uint8), K=K, T_world_cam=syn.scene_camera_pose()
        ),
        CameraObservation(
            image_rgb=rng.integers(0, 255, (240, 320, 3), dtype=np.uint8),
            K=K,
            T_world_cam=syn.wrist_camera_pose(T_ee[:3, 3]),
        ),
    ]
    past = T_ee[:3, 3] + 0.01 * rng.standard_normal((cfg.mv_past_n, 3))
    return cams, RobotState(T_world_ee=T_ee, gripper=0.7, past_positions_world=past)


CONFIGS = {
    "tiny": V4Config.tiny(),
    "tiny_learned_height_chunked": V4Config.tiny(height_encoding="learned", voxel_chunk_size=300),
    "pick_place": V4Config.pick_place(),
}


@pytest.mark.parametrize("name", list(CONFIGS))
def test_fast_path_gives_the_reference_outputs(name):
    cfg = CONFIGS[name]
    ref = Policy.random_init(cfg, device="cpu", seed=3)
    fast = Policy.random_init(cfg, device="cpu", seed=3, fast=True)
    assert fast.fast and not ref.fast
    for seed in range(3):
        cams, state = observation(cfg, seed)
        out_ref, out_fast = ref.predict(cams, state), fast.predict(cams, state)
        lr, lf = ref.last_output.volume_logits, fast.last_output.volume_logits  # (1, T, V)
        valid = ref.last_output.voxel_valid[0]  # (V,)
        assert torch.equal(valid, fast.last_output.voxel_valid[0])
        assert torch.isinf(lf[0][:, ~valid]).all()
        scale = lr[0][:, valid].abs().max().item()
        assert (lf[0][:, valid] - lr[0][:, valid]).abs().max().item() <= 1e-4 * max(scale, 1.0), name
        # The same argmax voxel in every step, unless two voxels tie within the logit tolerance (random weights make
        # neighbours nearly equal): then the fast choice must be a maximum of the reference logits too.
        c_ref, c_fast = ref.last_output.chosen_voxel[0], fast.last_output.chosen_voxel[0]  # (T,)
        same = (c_ref == c_fast).numpy()
        for t in np.flatnonzero(~same):
            gap = (lr[0, t, c_ref[t]] - lr[0, t, c_fast[t]]).item()
            assert 0 <= gap <= 1e-4 * max(scale, 1.0), (name, t, gap)
        assert same.sum() >= len(same) - 1, f"{name}: argmax differs in {np.flatnonzero(~same)}"
        voxel_m = (cfg.z_hi_m - cfg.z_lo_m) / cfg.n_height_bins
        np.testing.assert_allclose(out_fast.positions_world[same], out_ref.positions_world[same], atol=0.1 * voxel_m)
        np.testing.assert_allclose(out_fast.gripper[same], out_ref.gripper[same])
        np.testing.assert_allclose(out_fast.quaternions_xyzw[same], out_ref.quaternions_xyzw[same], atol=1e-9)
        np.testing.assert_allclose(out_fast.confidence[same], out_ref.confidence[same], atol=1e-5)
        lse_ref = torch.logsumexp(lr.float(), dim=-1)  # the normaliser the fast path accumulated chunk by chunk
        torch.testing.assert_close(fast.last_output.volume_lse, lse_ref, atol=1e-4, rtol=1e-5)
        # rviz voxels: the same probabilities; the same voxels except where near-equal probabilities swap places
        np.testing.assert_allclose(
            np.sort(out_fast.top_voxels_prob), np.sort(out_ref.top_voxels_prob), rtol=1e-4, atol=1e-7
        )
        kth = out_ref.top_voxels_prob.min()
        clear = out_ref.top_voxels_prob > kth * (1 + 1e-3)  # not tied with the last one in
        ref_set = {tuple(np.round(x, 9)) for x in out_ref.top_voxels_world[clear]}
        assert ref_set <= {tuple(np.round(x, 9)) for x in out_fast.top_voxels_world}


def _forward_parts(cfg: V4Config):
    """A random model's pieces of one forward on a synthetic observation: model, voxel grid, feature maps, queries."""
    from para_core.model.voxels import build_voxel_grid

    policy = Policy.random_init(cfg, device="cpu", seed=4)
    cams, state = observation(cfg, 0)
    inputs = policy.preprocess(cams, state)
    model = policy.model
    with torch.no_grad():
        grid = build_voxel_grid(cfg, inputs.K_img.float(), inputs.T_world_cam.float())
        feat_maps, cls = model.image_features(inputs.images)
        return model, grid, feat_maps, model.queries(cls, inputs)


def _reference_volume(model, feat_maps, grid, q):
    """The reference path's voxel features (B, V, F) and masked logits (B, T, V), written out as in the paper."""
    feat = model.voxel_features(feat_maps, grid)
    logits = (torch.einsum("btf,bvf->btv", q, feat) * model.logit_log_scale.exp()).masked_fill(
        ~grid.valid.unsqueeze(1), float("-inf")
    )
    return feat, logits


@pytest.mark.parametrize("skip_invalid", [True, False], ids=["valid_only", "dense"])
@pytest.mark.parametrize("bins_per_chunk", [1, 3, 1000])
def test_any_chunking_gives_the_reference_features_logits_and_normaliser(bins_per_chunk, skip_invalid):
    """Chunks of one bin, of a count that does not divide Z (a short last chunk), and one chunk for everything;
    only the valid voxels computed (CPU default) or every voxel (the GPU's sync-free default)."""
    from para_core.model.v4_fast import voxel_features_fast

    cfg = V4Config.tiny(n_height_bins=7)
    model, grid, feat_maps, q = _forward_parts(cfg)
    with torch.no_grad():
        ref_feat, ref_logits = _reference_volume(model, feat_maps, grid, q)  # (1, V, F), (1, T, V)
        fast = voxel_features_fast(
            model,
            feat_maps,
            grid,
            q,
            chunk_voxels=bins_per_chunk * cfg.pred_size**2,
            skip_invalid=skip_invalid,
            keep_voxel_feat=True,
        )
    assert 0 < int(grid.valid.sum()) < grid.valid.numel()  # the case has voxels to skip
    valid = grid.valid[0]
    torch.testing.assert_close(fast.voxel_feat[:, valid], ref_feat[:, valid], atol=1e-5, rtol=1e-4)
    assert torch.isinf(fast.logits[0][:, ~valid]).all()
    torch.testing.assert_close(fast.logits[0][:, valid], ref_logits[0][:, valid], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(fast.log_normaliser, torch.logsumexp(ref_logits, dim=-1), atol=1e-5, rtol=1e-5)
    assert torch.equal(fast.argmax, ref_logits.argmax(dim=-1))  # the running argmax keeps each chunk's offset
    at_argmax = torch.gather(ref_feat, 1, fast.argmax.unsqueeze(-1).expand(-1, -1, ref_feat.shape[-1]))  # (1, T, F)
    torch.testing.assert_close(fast.argmax_feat, at_argmax, atol=1e-5, rtol=1e-4)  # what the head reads


def _brute_force_cover(blocks, Z: int, P: int) -> np.ndarray:
    """How many blocks contain each voxel (Z, P, P), by looping over every voxel of every block."""
    count = np.zeros((Z, P, P), dtype=int)
    for blk in blocks:
        for i in range(blk.bin0, blk.bin1):
            for r in range(blk.row0, blk.row1):
                for c in range(blk.col0, blk.col1):
                    count[i, r, c] += 1
    return count


@pytest.mark.parametrize("kind", ["convex", "scattered", "empty_bins", "dense"])
@pytest.mark.parametrize("chunk_voxels", [1, 7, 40, 10_000])
def test_block_plan_covers_every_valid_voxel_once_in_voxel_order(kind, chunk_voxels):
    """Every valid voxel in exactly one box, the boxes in flat voxel order and within the size budget (at least one
    row of a box), for a workspace-like convex mask, a scattered one, bins with nothing valid, and the dense plan."""
    from para_core.model.v4_fast import plan_blocks

    Z, P = 9, 8
    rng = np.random.default_rng(len(kind) + chunk_voxels)
    if kind == "convex":  # a disc that shrinks with the bin, as a plane's footprint of the workspace box does
        r, c = np.mgrid[:P, :P]
        valid = np.stack([(r - 3.5) ** 2 + (c - 4.2) ** 2 <= (4.5 - 0.4 * i) ** 2 for i in range(Z)])
    else:
        valid = rng.random((Z, P, P)) < 0.2
        if kind == "empty_bins":
            valid[[0, 3, 4, 8]] = False
        if kind == "dense":
            valid = np.ones((Z, P, P), dtype=bool)
    blocks = plan_blocks(None if kind == "dense" else valid, Z, P, chunk_voxels)
    count = _brute_force_cover(blocks, Z, P)
    assert (count[valid] == 1).all() and (count <= 1).all()
    starts = [(b.bin0 * P + b.row0) * P + b.col0 for b in blocks]
    assert starts == sorted(starts)
    for b in blocks:
        assert b.n_voxels <= max(chunk_voxels, b.col1 - b.col0)
        assert valid[b.bin0 : b.bin1, b.row0 : b.row1, b.col0 : b.col1].any()  # no box without a valid voxel
    if kind == "dense":
        assert sum(b.n_voxels for b in blocks) == Z * P * P


def test_the_box_logsumexp_is_torchs_with_empty_and_nan_rows():
    from para_core.model.v4_fast import _logsumexp_given_max

    x = torch.randn(5, 300) * 30
    x[1] = float("-inf")  # a box with no valid voxel of a step
    x[2, :250] = float("-inf")
    x[3, 17] = float("nan")
    row_max = x.max(dim=-1).values
    torch.testing.assert_close(_logsumexp_given_max(x, row_max), torch.logsumexp(x, dim=-1), equal_nan=True)


def test_the_comparison_can_fail():
    """A fast path that dropped the other views' features (the only per-voxel sampling it keeps) differs."""
    import para_core.model.v4_fast as fast_mod

    cfg = V4Config.tiny()
    ref = Policy.random_init(cfg, device="cpu", seed=3)
    broken = Policy.random_init(cfg, device="cpu", seed=3, fast=True)
    cams, state = observation(cfg, 0)
    ref.predict(cams, state)
    original = fast_mod.first_layer_blocks

    def no_cross(model, k):
        W, w = original(model, k)
        return (torch.zeros_like(W), torch.zeros_like(w)) if k == 1 else (W, w)

    fast_mod.first_layer_blocks = no_cross
    try:
        broken.predict(cams, state)
    finally:
        fast_mod.first_layer_blocks = original
    valid = ref.last_output.voxel_valid[0]
    diff = (broken.last_output.volume_logits[0][:, valid] - ref.last_output.volume_logits[0][:, valid]).abs().max()
    assert diff.item() > 1e-3


def test_compile_mode_is_validated():
    with pytest.raises(ValueError, match="compile_mode"):
        Policy.random_init(V4Config.tiny(), device="cpu", compile_mode="fastest")


@pytest.mark.slow
def test_compiled_backbone_gives_the_eager_outputs():
    """``compile_mode``: the torch.compile'd backbone (inductor: a C++ compiler on CPU) predicts what eager does,
    and its state_dict keys are the eager ones (compiled in place, so checkpoints are unchanged)."""
    import shutil

    if not (shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")):
        pytest.skip("torch.compile on CPU needs a C++ compiler")
    cfg = V4Config.tiny()
    eager = Policy.random_init(cfg, device="cpu", seed=3, fast=True)
    compiled = Policy.random_init(cfg, device="cpu", seed=3, fast=True, compile_mode="default")
    assert list(compiled.model.state_dict()) == list(eager.model.state_dict())
    for seed in range(2):
        cams, state = observation(cfg, seed)
        a, b = eager.predict(cams, state), compiled.predict(cams, state)
        torch.testing.assert_close(
            compiled.last_output.volume_logits, eager.last_output.volume_logits, atol=1e-4, rtol=1e-4
        )
        # The same voxel at every step, unless two voxels' logits are within the compiled kernels' rounding (a tie):
        # then the compiled choice must be one of them.
        logits = eager.last_output.volume_logits[0].reshape(len(a.positions_world), -1)  # (T, V)
        for t in range(len(a.positions_world)):
            if np.abs(b.positions_world[t] - a.positions_world[t]).max() > 1e-6:
                top2 = torch.topk(logits[t], 2).values
                assert float(top2[0] - top2[1]) < 1e-4, f"step {t}: another voxel with no tie"


def test_a_nan_logit_is_chosen_as_torch_argmax_chooses_it():
    """A NaN in the volume (an fp16 overflow, a bad weight) is torch.argmax's pick; the running argmax must agree,
    not skip the chunk that holds it."""
    from para_core.model.v4_fast import voxel_features_fast

    cfg = V4Config.tiny()
    model, grid, feat_maps, q = _forward_parts(cfg)
    feat_maps[0, 1, :, 9, 7] = float("nan")  # one wrist pixel: its voxels, and scene voxels sampling it
    with torch.no_grad():
        _, ref = _reference_volume(model, feat_maps, grid, q)
        fast = voxel_features_fast(model, feat_maps, grid, q, chunk_voxels=cfg.pred_size**2)
    assert torch.isnan(ref).any()
    assert torch.equal(fast.argmax, ref.argmax(dim=-1))


@pytest.mark.parametrize("dtype, mantissa_bits", [("bf16", 7), ("fp16", 10)])
def test_fast_path_under_autocast_agrees_to_the_dtype_precision(dtype, mantissa_bits):
    """bf16 / fp16 autocast (on CPU here, as on a GPU): logits within 4 units in the last place of the dtype at the
    logits' scale, and where the argmax differs, the fast choice is a maximum of the reference within that tolerance
    (random weights make near-ties common at bf16 precision). A fast path that drops the other view's features
    differs by about 20 (bf16) and 150 (fp16) such units, so the tolerance is not what makes this pass."""
    cfg = V4Config.tiny()
    ref = Policy.random_init(cfg, device="cpu", seed=3, dtype=dtype)
    fast = Policy.random_init(cfg, device="cpu", seed=3, dtype=dtype, fast=True)
    for seed in range(3):
        cams, state = observation(cfg, seed)
        ref.predict(cams, state)
        fast.predict(cams, state)
        lr, lf = ref.last_output.volume_logits[0].float(), fast.last_output.volume_logits[0].float()  # (T, V)
        valid = ref.last_output.voxel_valid[0]
        tol = 4 * 2.0**-mantissa_bits * lr[:, valid].abs().max().item()
        assert (lf[:, valid] - lr[:, valid]).abs().max().item() <= tol, (dtype, seed)
        c_ref, c_fast = ref.last_output.chosen_voxel[0], fast.last_output.chosen_voxel[0]
        for t in torch.nonzero(c_ref != c_fast).flatten().tolist():
            assert 0 <= (lr[t, c_ref[t]] - lr[t, c_fast[t]]).item() <= tol, (dtype, seed, t)


def test_a_static_camera_reuses_its_voxels_and_a_moved_one_does_not():
    """``StaticViewCache``: the fast path's grid with a still scene camera and a moving wrist camera is the grid built
    from scratch, frame after frame; the scene view hits, the wrist view misses; moving the scene camera by 1 mm
    misses (a stale cache would keep the old voxels); an earlier output's voxels stay as they were (no aliasing)."""
    from para_core.model.voxels import build_voxel_grid

    cfg = V4Config.tiny()
    fast = Policy.random_init(cfg, device="cpu", seed=3, fast=True)
    cache = fast.model.grid_cache
    cams, state = observation(cfg, 0)
    fast.predict(cams, state)
    first = fast.last_output.grid
    first_xyz = first.voxel_xyz.clone()
    for i in range(1, 4):
        cams[1].T_world_cam = cams[1].T_world_cam.copy()
        cams[1].T_world_cam[:3, 3] += [0.004, -0.002, 0.001]  # the wrist moves every frame
        if i == 3:
            cams[0].T_world_cam = cams[0].T_world_cam.copy()
            cams[0].T_world_cam[0, 3] += 0.001  # the scene camera is bumped
        hits = cache.hits
        fast.predict(cams, state)
        inputs = fast.preprocess(cams, state)
        fresh = build_voxel_grid(cfg, inputs.K_img, inputs.T_world_cam)
        grid = fast.last_output.grid
        assert torch.equal(grid.voxel_xyz, fresh.voxel_xyz) and torch.equal(grid.valid, fresh.valid)
        assert cache.hits - hits == (1 if i < 3 else 0)
        brute = fresh.voxel_xyz[0][fresh.valid[0]]  # (n, 3) every valid voxel, by boolean indexing
        torch.testing.assert_close(grid.bounds(0), torch.stack([brute.min(0).values, brute.max(0).values]))
    assert torch.equal(first.voxel_xyz, first_xyz)


def _camera_image(rng, H: int, W: int, kind: str) -> np.ndarray:
    """uint8 RGB test images: ``smooth`` (gradients and a little noise, like a camera), ``edge`` (one sharp vertical
    step, where area weights matter most) and ``checker`` (2-pixel squares: every output pixel straddles edges)."""
    y, x = np.mgrid[:H, :W]
    if kind == "smooth":
        img = np.stack(
            [120 + 100 * np.sin(6 * x / max(H, W) + c) * np.cos(4 * y / max(H, W) - c) for c in range(3)], axis=-1
        ) + rng.normal(0, 4, (H, W, 3))
    elif kind == "edge":
        img = np.repeat(np.where(x >= W * 0.37, 230.0, 20.0)[..., None], 3, axis=-1)
    else:
        img = np.repeat(np.where((x // 2 + y // 2) % 2 == 0, 250.0, 5.0)[..., None], 3, axis=-1)
        img[..., 1] = 255 - img[..., 1]
    return np.clip(img, 0, 255).astype(np.uint8)


@pytest.mark.parametrize("kind", ["smooth", "edge", "checker"])
@pytest.mark.parametrize(
    "hw, size",
    [
        ((480, 640), 64),
        ((720, 1280), 512),
        ((600, 800), 448),
        ((240, 320), 224),
        ((128, 128), 64),
        ((40, 50), 64),
        ((100, 50), 64),
        ((64, 64), 64),
    ],
    ids=[
        "shrink_7.5",
        "shrink_1.4_2.5",
        "shrink_1.3_1.8",
        "shrink_1.07_1.4",
        "shrink_by_2",
        "enlarge",
        "mixed",
        "same_size",
    ],
)
def test_device_preprocessing_gives_the_host_pixels_to_a_grey_level(hw, size, kind):
    """``resize_on_device`` (uint8 up, area / bilinear on the device) against OpenCV on the host, the pixels training
    sees: identical at the model's size, else within one grey level (OpenCV's fixed-point weights round differently),
    for smooth images and for sharp edges, where a whole-pixel area average (``interpolate(mode="area")``) is off by
    up to 111 levels at non-integer factors. A swapped channel order is off by tens of levels everywhere."""
    from para_core.model.policy import resize_on_device, resize_to_model_input

    img = _camera_image(np.random.default_rng(1), *hw, kind)
    host, _ = resize_to_model_input(img, np.eye(3), size)  # (size, size, 3) uint8
    dev = resize_on_device(img, size, torch.device("cpu")).permute(1, 2, 0).numpy()  # (size, size, 3) float 0..255
    diff = np.abs(dev - host.astype(np.float32))
    if hw == (size, size):
        assert diff.max() == 0
    else:
        assert diff.max() <= 1 and diff.mean() < 0.2, (diff.mean(), diff.max())


def test_area_weights_by_hand():
    """5 -> 2 pixels: output 0 covers [0, 2.5): pixels 0, 1 whole and half of 2; output 1 the rest."""
    from para_core.model.policy import area_weights

    torch.testing.assert_close(area_weights(5, 2), torch.tensor([[0.4, 0.4, 0.2, 0.0, 0.0], [0.0, 0.0, 0.2, 0.4, 0.4]]))


def test_device_preprocessing_policy_predicts_what_the_host_path_does():
    """``Policy(device_preprocess=True)``: the same intrinsics, inputs within a grey level, the same chunk to a tenth
    of a voxel (on CPU here; the default is on only for the fast path on a GPU)."""
    cfg = V4Config.tiny()
    host = Policy.random_init(cfg, device="cpu", seed=3, fast=True)
    dev = Policy.random_init(cfg, device="cpu", seed=3, fast=True, device_preprocess=True)
    assert not host.device_preprocess and dev.device_preprocess
    cams, state = observation(cfg, 1)
    for cam in cams:
        cam.image_rgb = _camera_image(np.random.default_rng(2), 240, 320, "smooth")
    a, b = host.preprocess(cams, state), dev.preprocess(cams, state)
    torch.testing.assert_close(b.K_img, a.K_img, atol=0, rtol=0)
    assert (b.images - a.images).abs().max().item() <= 1.01 / 255 / min(0.229, 0.224, 0.225)
    out_a, out_b = host.predict(cams, state), dev.predict(cams, state)
    voxel_m = (cfg.z_hi_m - cfg.z_lo_m) / cfg.n_height_bins
    same = host.last_output.chosen_voxel[0] == dev.last_output.chosen_voxel[0]
    assert same.float().mean() >= 0.75
    np.testing.assert_allclose(
        out_b.positions_world[same.numpy()], out_a.positions_world[same.numpy()], atol=0.1 * voxel_m
    )
