"""The training path's fusion reads each voxel's OWN view without ``grid_sample`` (``ParaV4Model.fusion_inputs``,
``own_view_without_sampling``): the same fusion inputs, loss and gradients as sampling every view (the reference
arithmetic, ``own_view_without_sampling = False``) within float rounding, for whole and for ragged chunks."""

from __future__ import annotations

import pytest
import torch
from core_fixtures import make_inputs, make_trajectory

from para_core.model.actions import encode_targets
from para_core.model.config import V4Config
from para_core.model.registry import build_model
from para_core.model.voxels import build_voxel_grid


def _model_and_batch(cfg: V4Config, batch: int = 2):
    torch.manual_seed(0)
    model = build_model(cfg)
    inp = make_inputs(cfg, batch=batch, seed=1)
    grid = build_voxel_grid(cfg, inp.K_img, inp.T_world_cam)
    pos, rot, grip = make_trajectory(cfg, batch=batch, seed=1)
    return model, inp, encode_targets(cfg, grid, pos, rot, grip)


@pytest.mark.parametrize(
    ("start", "stop"),
    [
        (0, None),  # the whole grid: both views, whole bins
        (1000, 3000),  # inside view 0, not on bin boundaries: the pixel index path
        (1500, 2600),  # across the boundary of the two views (V / 2 = 2048 for tiny): other views on both sides
        (2048, 4096),  # exactly view 1
    ],
)
def test_fusion_inputs_equal_sampling_every_view(start, stop):
    cfg = V4Config.tiny()
    model, inp, _ = _model_and_batch(cfg)
    with torch.no_grad():
        fm, _ = model.image_features(inp.images)  # (B, N, F, P, P)
        grid = build_voxel_grid(cfg, inp.K_img, inp.T_world_cam)
        stop = grid.voxel_xyz.shape[1] if stop is None else stop
        ids = torch.arange(start, stop)
        xyz = grid.voxel_xyz[:, start:stop]
        reference = model.fusion_inputs(fm, grid, xyz, ids)  # every view sampled
        same_view = model.fusion_inputs(fm, grid, xyz, ids, first_voxel=start)
    assert same_view.shape == reference.shape
    torch.testing.assert_close(same_view, reference, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("chunk", [0, 1000])  # one chunk; ragged checkpointed chunks across the views
def test_loss_and_gradients_on_a_fixed_batch_equal_the_reference(chunk):
    cfg = V4Config.tiny(voxel_chunk_size=chunk)
    model, inp, targets = _model_and_batch(cfg)
    model.train()
    results = []
    for own in (False, True):
        model.own_view_without_sampling = own
        model.zero_grad(set_to_none=True)
        out = model(inp, targets)
        out.losses["loss"].backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        results.append(({k: float(v.detach()) for k, v in out.losses.items()}, grads))
    (loss_ref, grad_ref), (loss_new, grad_new) = results
    for key in loss_ref:
        assert loss_new[key] == pytest.approx(loss_ref[key], rel=1e-5, abs=1e-6), key
    assert grad_ref.keys() == grad_new.keys()
    for name in grad_ref:
        torch.testing.assert_close(grad_new[name], grad_ref[name], atol=1e-5, rtol=1e-4, msg=name)
