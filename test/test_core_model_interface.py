"""The model interface (``para_core.model.interface``): every registered kind implements it, and a kind written
here, registered from the test, runs through ``Policy.predict`` and the method figure with no change to either."""

from types import SimpleNamespace

import cv2
import numpy as np
import pytest
import torch
import torch.nn.functional as Fn
from core_fixtures import make_inputs, make_trajectory
from torch import nn

from para_core.data import synthetic as syn
from para_core.eval.method_figure import figure_numbers, method_figure_data, write_method_figure
from para_core.model.actions import decode_volume, encode_targets, top_voxels
from para_core.model.backbones import build_backbone
from para_core.model.config import V4Config
from para_core.model.interface import (
    ParaModel,
    ScoreExplanation,
    VoxelVolumeModel,
    missing_members,
)
from para_core.model.model_io import V4Inputs, V4Output
from para_core.model.policy import CameraObservation, Policy, RobotState
from para_core.model.registry import MODEL_REGISTRY, build_model
from para_core.model.voxels import build_voxel_grid

torch.set_num_threads(1)

# one tiny config per registered kind: a kind registered without one here fails test_every_kind_has_a_preset
PRESETS = {
    "para_v4": lambda: V4Config.tiny(),
    "para_dino_kv": lambda: V4Config.tiny_dino_kv(),
    "coord_regression": lambda: V4Config.tiny(model_kind="coord_regression", name="tiny_regression"),
}
SCENE_HW = (48, 64)  # (H, W) of the raw scene image: not the model's square input, so the resize is exercised


def _observation(cfg: V4Config, seed: int = 0):
    rng = np.random.default_rng(seed)
    ee = np.array([0.3, 0.0, 0.2])
    (H, W), cams = SCENE_HW, []
    for name in cfg.view_names:
        pose = syn.scene_camera_pose() if name == "scene" else syn.wrist_camera_pose(ee)
        cams.append(CameraObservation(syn.random_image(rng, H, W), syn.intrinsics_from_fovy(W, H, 60.0), pose))
    T = np.eye(4)
    T[:3, :3] = syn.top_down_rotation()
    T[:3, 3] = ee
    return cams, RobotState(T, 1.0, np.tile(ee, (cfg.mv_past_n, 1)))


def _box(cfg: V4Config) -> tuple[np.ndarray, np.ndarray]:
    lo = np.array([cfg.workspace_x_m[0], cfg.workspace_y_m[0], cfg.z_lo_m])
    hi = np.array([cfg.workspace_x_m[1], cfg.workspace_y_m[1], cfg.z_hi_m])
    return lo, hi


def test_every_kind_has_a_preset():
    assert sorted(PRESETS) == sorted(MODEL_REGISTRY)


@pytest.mark.parametrize("kind", sorted(MODEL_REGISTRY))
def test_every_registered_kind_implements_the_interface(kind):
    cfg = PRESETS[kind]()
    model = build_model(cfg)
    assert isinstance(model, ParaModel) and missing_members(model) == []
    assert model.kind == kind == cfg.model_kind and model.config is cfg
    assert model.has_voxel_volume == isinstance(model, VoxelVolumeModel)
    assert model.fast_inference is False  # off until Policy(fast=True) sets it, and only where there is a fast path


@pytest.mark.parametrize("kind", sorted(MODEL_REGISTRY))
def test_every_registered_kind_reports_the_loss_terms_the_trainer_reads(kind):
    cfg = PRESETS[kind]()
    torch.manual_seed(0)
    model = build_model(cfg)
    inputs = make_inputs(cfg, batch=2)
    grid = build_voxel_grid(cfg, inputs.K_img, inputs.T_world_cam)
    targets = encode_targets(cfg, grid, *make_trajectory(cfg, batch=2))
    out = model(inputs, targets)
    T, G, R = cfg.n_window, cfg.n_gripper_bins, cfg.n_rotation_bins
    assert out.gripper_logits.shape == (2, T, G) and out.rotation_logits.shape == (2, T, 3, R)
    terms = {"loss", "gripper_ce", "rotation_ce", model.position_loss_term}
    assert terms <= set(out.losses) and all(out.losses[k].ndim == 0 for k in terms)
    # the gripper term is the mean cross-entropy of the gripper logits against the bins (by hand: log-softmax)
    logp = torch.log_softmax(out.gripper_logits.float(), -1)  # (2, T, G)
    want = -logp.gather(-1, targets.gripper_bin.unsqueeze(-1)).mean()
    assert torch.allclose(out.losses["gripper_ce"], want, atol=1e-5)
    out.losses["loss"].backward()  # a training objective: gradients reach the backbone
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.backbone.parameters())


@pytest.mark.parametrize("kind", sorted(MODEL_REGISTRY))
def test_every_registered_kind_predicts_through_the_policy(kind):
    cfg = PRESETS[kind]()
    torch.manual_seed(0)
    policy = Policy(build_model(cfg), cfg, torch.device("cpu"), refine=False)
    cams, state = _observation(cfg)
    out = policy.predict(cams, state)
    T = cfg.n_window
    assert out.positions_world.shape == (T, 3) and np.all(np.isfinite(out.positions_world))
    lo, hi = _box(cfg)
    assert np.all(out.positions_world >= lo - 1e-9) and np.all(out.positions_world <= hi + 1e-9)
    assert np.allclose(np.linalg.norm(out.quaternions_xyzw, axis=-1), 1.0)
    raw = policy.last_output
    if policy.model.has_voxel_volume:  # unrefined decoding is the centre of each step's most probable voxel
        logits = raw.volume_logits[0].float().numpy()  # (T, V)
        best = logits.argmax(-1)  # (T,) numpy's argmax, not the decoder's
        assert np.allclose(out.positions_world, raw.voxel_xyz[0].double().numpy()[best], atol=1e-6)
        assert out.entropy.shape == (T,) and out.view_agreement.shape == (T,)
    else:  # the regression's positions, clipped to the box the voxels would span
        assert np.allclose(out.positions_world, np.clip(raw.positions_world[0].double().numpy(), lo, hi))
        assert out.entropy.shape == (0,)
        with pytest.raises(ValueError, match="no voxel"):
            Policy(build_model(cfg), cfg, torch.device("cpu"), decoding="joint")


@pytest.mark.parametrize("kind", sorted(k for k in MODEL_REGISTRY if PRESETS[k]().model_kind != "coord_regression"))
def test_the_bag_response_volume_figure_reads_any_volume_kind(kind, tmp_path):
    from para_ros.commands import bag as bag_tools

    cfg = PRESETS[kind]()
    policy = Policy(build_model(cfg), cfg, torch.device("cpu"))
    cams, state = _observation(cfg)
    policy.predict(cams, state)
    feats = policy.model.feature_maps(policy.preprocess(cams, state))
    assert feats.shape == (1, cfg.n_views, feats.shape[2], cfg.pred_size, cfg.pred_size)
    path = tmp_path / "rv.png"
    bag_tools._response_volume_figure(policy, SimpleNamespace(cameras=cams), state, path, step=-1)
    assert path.is_file() and path.stat().st_size > 0


# ------------------------------------------------------------------------------------------ a new model kind
class LookupVolumeModel(nn.Module):
    """A model kind that only this test knows: a learned logit table over the voxels (T, V) plus a per-pixel
    feature term, on the shared voxel grid. Scores: ``volume_logits[b, t, v] = table[t, v] + F(u, v) . w``."""

    kind = "test_lookup_volume"
    has_voxel_volume = True
    has_fast_path = False
    fast_inference = False
    position_loss_term = "voxel_ce"

    def __init__(self, config: V4Config):
        super().__init__()
        self.config = config
        N, Z, P, T, F = config.n_views, config.n_height_bins, config.pred_size, config.n_window, config.feat_dim
        self.backbone = build_backbone(config)
        self.proj = nn.Conv2d(self.backbone.hidden_size, F, kernel_size=1)
        self.table = nn.Parameter(torch.zeros(T, N * Z * P * P))  # (T, V)
        self.w = nn.Parameter(0.01 * torch.randn(F))  # (F,)
        self.head = nn.Linear(F, T * (config.n_gripper_bins + 3 * config.n_rotation_bins))

    def feature_maps(self, inputs: V4Inputs) -> torch.Tensor:
        B, N = inputs.images.shape[:2]
        P = self.config.pred_size
        out = self.backbone(inputs.images.flatten(0, 1))  # (B*N, C, h, w)
        feat = Fn.interpolate(self.proj(out.patch_grid), size=(P, P), mode="bilinear", align_corners=False)
        return feat.reshape(B, N, -1, P, P)  # (B, N, F, P, P)

    def forward(self, inputs: V4Inputs, targets=None) -> V4Output:
        if targets is not None:
            raise ValueError("LookupVolumeModel is an inference-only test kind")
        cfg = self.config
        B, N = inputs.images.shape[:2]
        Z, T, G, R = cfg.n_height_bins, cfg.n_window, cfg.n_gripper_bins, cfg.n_rotation_bins
        grid = build_voxel_grid(cfg, inputs.K_img.float(), inputs.T_world_cam.float())
        feat = self.feature_maps(inputs)  # (B, N, F, P, P)
        pixel_score = torch.einsum("bnfuv,f->bnuv", feat, self.w).flatten(2)  # (B, N, P*P)
        per_voxel = pixel_score.unsqueeze(2).expand(-1, -1, Z, -1).reshape(B, -1)  # (B, V)
        logits = (self.table.unsqueeze(0) + per_voxel.unsqueeze(1)).float()  # (B, T, V)
        logits = logits.masked_fill(~grid.valid.unsqueeze(1), float("-inf"))  # (B, T, V)
        head = self.head(feat.mean(dim=(1, 3, 4))).reshape(B, T, G + 3 * R)  # (B, T, G + 3R)
        argmax = logits.argmax(-1)  # (B, T)
        return V4Output(
            volume_logits=logits,
            voxel_xyz=grid.voxel_xyz,
            voxel_valid=grid.valid,
            voxel_feat=None,
            query=self.w.expand(B, T, -1),
            chosen_voxel=argmax,
            gripper_logits=head[..., :G],
            rotation_logits=head[..., G:].reshape(B, T, 3, R),
            grid=grid,
            cls=self.backbone(inputs.images.flatten(0, 1)).cls.reshape(B, N, -1),
        )

    def decode(self, out: V4Output, refine: bool = False) -> list:
        return decode_volume(self.config, out, refine=refine)

    def visualisation(self, out: V4Output, top_k: int):
        return top_voxels(out, top_k)

    def explain_score(self, inputs: V4Inputs, out: V4Output, step: int, voxel: int) -> ScoreExplanation:
        return ScoreExplanation(
            vectors=self.w.detach().numpy()[None],  # (1, F)
            labels=("w",),
            formula="volume_logits[t,v] = table[t,v] + F(u,v) . w (a test kind)",
            logit_scale=1.0,
        )

    def param_groups(self) -> list[dict]:
        return [{"params": list(self.parameters()), "lr": self.config.lr}]


def test_a_kind_registered_in_a_test_runs_through_the_policy_and_the_method_figure(monkeypatch, tmp_path):
    monkeypatch.setitem(MODEL_REGISTRY, LookupVolumeModel.kind, LookupVolumeModel)
    cfg = V4Config.tiny(model_kind=LookupVolumeModel.kind, name="tiny_lookup")
    P, T = cfg.pred_size, cfg.n_window
    cams, state = _observation(cfg)
    torch.manual_seed(0)
    model = build_model(cfg)
    assert isinstance(model, VoxelVolumeModel)
    policy = Policy(model, cfg, torch.device("cpu"), refine=False)
    # put each step's mass on a valid voxel of the scene view: bin 3, a different pixel per step
    valid = policy.model(policy.preprocess(cams, state)).voxel_valid[0]  # (V,)
    targets = []
    for t in range(T):
        zbin = 3
        cands = [(r, c) for r in range(2, P - 2) for c in range(2, P - 2) if valid[zbin * P * P + r * P + c]]
        r, c = cands[(t * 7) % len(cands)]
        targets.append((zbin, r, c))
        with torch.no_grad():
            model.table[t, zbin * P * P + r * P + c] = 50.0
    out = policy.predict(cams, state, stamp_s=0.0)

    # independent reference: each decoded point, projected by OpenCV into the raw scene image, lands on the centre
    # of its target pixel of the P x P grid (pixel centres at +0.5, scaled to the raw image)
    H, W = SCENE_HW
    scene = cams[0]
    T_cam_world = np.linalg.inv(scene.T_world_cam)
    rvec, _ = cv2.Rodrigues(T_cam_world[:3, :3])
    uv, _ = cv2.projectPoints(out.positions_world, rvec, T_cam_world[:3, 3], scene.K, None)
    expected = np.array([[(c + 0.5) * W / P, (r + 0.5) * H / P] for _, r, c in targets])
    assert np.allclose(uv[:, 0], expected, atol=1e-3)
    lo, hi = _box(cfg)
    assert np.all(out.positions_world >= lo - 1e-9) and np.all(out.positions_world <= hi + 1e-9)
    assert np.all(out.confidence > 0.99)  # a logit 50 above the rest holds nearly all the mass
    assert out.entropy.shape == (T,) and out.top_voxels_world.shape[1] == 3

    data = method_figure_data(policy.model, policy.preprocess(cams, state), [c.image_rgb for c in cams], step=-1)
    zbin, r, c = targets[-1]
    assert data["argmax"].tolist() == [0, zbin, r, c]
    assert np.allclose(data["pred_px"], expected[-1])
    assert np.allclose(data["argmax_xyz"], out.positions_world[-1], atol=1e-6)
    paths = write_method_figure(data, tmp_path)
    svg = paths["svg"].read_text()
    assert "table[t,v] + F(u,v) . w" in svg and f"logit scale = {figure_numbers(data)['logit_scale']}" in svg
    assert all(paths[k].is_file() for k in "abcdef")


class ForwardOnlyModel(nn.Module):
    """A kind with ParaModel's members but none of VoxelVolumeModel's own."""

    kind = "test_forward_only"
    has_fast_path = False
    fast_inference = False
    position_loss_term = "loss"

    def __init__(self, config: V4Config, has_voxel_volume: bool = True):
        super().__init__()
        self.config = config
        self.has_voxel_volume = has_voxel_volume
        self.backbone = build_backbone(config)

    def forward(self, inputs, targets=None):
        raise NotImplementedError

    def decode(self, out, refine=False):
        raise NotImplementedError

    def visualisation(self, out, top_k):
        raise NotImplementedError

    def param_groups(self):
        return []


def test_a_kind_missing_a_member_is_refused_by_name(monkeypatch):
    cfg = V4Config.tiny(model_kind=ForwardOnlyModel.kind)
    assert missing_members(ForwardOnlyModel(cfg, has_voxel_volume=False)) == []  # a complete ParaModel
    monkeypatch.setitem(MODEL_REGISTRY, ForwardOnlyModel.kind, ForwardOnlyModel)
    with pytest.raises(TypeError, match="VoxelVolumeModel: missing explain_score, feature_maps"):
        build_model(cfg)  # says it has a volume, but cannot explain it
    monkeypatch.setitem(MODEL_REGISTRY, ForwardOnlyModel.kind, lambda c: nn.Linear(1, 1))
    with pytest.raises(TypeError, match="missing backbone, config, decode"):
        build_model(cfg)
