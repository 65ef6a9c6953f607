"""The v4 model: fused voxel features vs a plain Python loop, paper-config facts, loss baselines, gradients, overfit,
fp32 sampling under bf16 autocast, the head's voxel in training and inference, the MLP structure of PARA v4 and the
query's inputs (these last tests each fail for a one-line mutation of the model that the others let through)."""

import dataclasses
import math

import numpy as np
import pytest
import torch
from core_fixtures import make_inputs, make_trajectory

from para_core.model.actions import encode_targets
from para_core.model.backbones import DINOv3Backbone, count_parameters
from para_core.model.config import V4Config
from para_core.model.registry import build_model
from para_core.model.v4 import seed_joint_baseline, uniform_voxel_ce_baseline, volume_ce

torch.set_num_threads(1)


def _gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _mlp_by_hand(seq, x):
    linears = [m for m in seq if isinstance(m, torch.nn.Linear)]
    for i, lin in enumerate(linears):
        x = lin.weight.detach().double().numpy() @ x + lin.bias.detach().double().numpy()
        if i < len(linears) - 1:
            x = _gelu(x)
    return x


def _bilinear_by_hand(fmap, u, v):
    """fmap (F, P, P) numpy; (u, v) continuous pixel coords, pixel centres at +0.5, border clamp."""
    P = fmap.shape[-1]
    x, y = u - 0.5, v - 0.5
    x0, y0 = math.floor(x), math.floor(y)
    ax, ay = x - x0, y - y0
    out = 0.0
    for dy, wy in ((0, 1 - ay), (1, ay)):
        for dx, wx in ((0, 1 - ax), (1, ax)):
            r = min(max(y0 + dy, 0), P - 1)
            c = min(max(x0 + dx, 0), P - 1)
            out = out + wy * wx * fmap[:, r, c]
    return out


@pytest.mark.parametrize("height_encoding", ["sincos", "learned"])
def test_fused_voxel_feature_matches_python_loop(height_encoding):
    torch.manual_seed(0)
    cfg = V4Config.tiny(height_encoding=height_encoding, voxel_chunk_size=1000)
    model = build_model(cfg).eval()
    inp = make_inputs(cfg)
    with torch.no_grad():
        out = model(inp)
        feat_maps, _ = model.image_features(inp.images)
    fm = feat_maps[0].double().numpy()  # (N, F, P, P)
    N, Z, P = cfg.n_views, cfg.n_height_bins, cfg.pred_size
    K_pred = inp.K_img[0].double().numpy() * np.array([[P / cfg.img_size]] * 2 + [[1.0]])  # (N, 3, 3)
    Ts = inp.T_world_cam[0].double().numpy()
    valid = out.voxel_valid[0].numpy()
    rng = np.random.default_rng(0)
    seen_single = seen_both = 0
    checked = 0
    for v in rng.permutation(np.flatnonzero(valid)):
        k, i, r, c = v // (Z * P * P), (v // (P * P)) % Z, (v // P) % P, v % P
        # voxel centre by hand: ray through pixel centre (c+.5, r+.5) of view k, plane at bin centre i
        z_hi_k = min(cfg.z_hi_m, Ts[k][2, 3] - cfg.cam_margin_m)
        z = cfg.z_lo_m + (i + 0.5) * (z_hi_k - cfg.z_lo_m) / Z
        d = Ts[k][:3, :3] @ np.linalg.solve(K_pred[k], [c + 0.5, r + 0.5, 1.0])
        xyz = Ts[k][:3, 3] + (z - Ts[k][2, 3]) / d[2] * d
        assert np.abs(xyz - out.voxel_xyz[0, v].double().numpy()).max() < 1e-5
        parts = []
        n_vis = 0
        for kk in range(N):
            pc = Ts[kk][:3, :3].T @ (xyz - Ts[kk][:3, 3])
            u, vv = (K_pred[kk] @ (pc / pc[2]))[:2]
            vis = pc[2] > 0 and 0 <= u < P and 0 <= vv < P
            n_vis += vis
            parts.append(_bilinear_by_hand(fm[kk], u, vv) * vis if vis else np.zeros(cfg.feat_dim))
            parts.append([1.0 if vis else 0.0])
        if height_encoding == "sincos":
            zn = (z - cfg.z_lo_m) / (cfg.z_hi_m - cfg.z_lo_m)
            octs = range(cfg.height_enc_dim // 2)
            parts.append([math.sin(2**o * math.pi * zn) for o in octs] + [math.cos(2**o * math.pi * zn) for o in octs])
        else:
            parts.append(model.height_emb.weight[k * Z + i].detach().double().numpy())
        ref = _mlp_by_hand(model.voxel_mlp, np.concatenate([np.asarray(p, dtype=np.float64) for p in parts]))
        assert np.abs(ref - out.voxel_feat[0, v].double().numpy()).max() < 1e-4
        seen_single += n_vis == 1
        seen_both += n_vis == 2
        checked += 1
        if checked >= 12 and seen_single >= 2 and seen_both >= 2:
            break
    assert seen_single >= 2 and seen_both >= 2, (seen_single, seen_both)
    # logits: scale * q . f, -inf at invalid voxels
    q = out.query[0]
    assert torch.allclose(
        out.volume_logits[0][:, valid], (q @ out.voxel_feat[0].T)[:, valid] * model.logit_log_scale.exp(), atol=1e-5
    )
    assert torch.isinf(out.volume_logits[0][:, ~valid]).all()


def test_chunked_voxel_mlp_equals_unchunked():
    torch.manual_seed(0)
    cfg = V4Config.tiny()
    model = build_model(cfg).eval()
    inp = make_inputs(cfg, batch=2)
    with torch.no_grad():
        a = model(inp).volume_logits
        model.config = cfg.replace(voxel_chunk_size=777)
        b = model(inp).volume_logits
    assert torch.equal(torch.isinf(a), torch.isinf(b))
    assert torch.allclose(a[~torch.isinf(a)], b[~torch.isinf(b)], atol=1e-5)


def test_paper_config_facts():
    cfg = V4Config.paper()
    assert cfg.n_voxels == 1_048_576
    backbone = DINOv3Backbone(cfg)  # the backbone alone; the full paper model is never run in the default suite
    n = count_parameters(backbone)
    assert 28.0e6 < n < 30.0e6, n  # DINOv3 ViT-S/16+ ~29 M
    assert backbone.vit.config.use_gated_mlp and backbone.vit.config.num_register_tokens == 4


def test_uniform_logits_give_documented_baseline():
    V, T = V4Config.paper().n_voxels, 2
    logits = torch.zeros(1, T, V)
    idx = torch.tensor([[[5, 900_000], [17, 0]]])
    w = torch.tensor([[[0.5, 0.5], [1.0, 0.0]]])
    mean, per_step = volume_ce(logits, idx, w)
    assert abs(mean.item() - math.log(V)) < 1e-4
    assert abs(uniform_voxel_ce_baseline(V) - 13.8629) < 1e-4
    assert abs(seed_joint_baseline(V, 32) - 17.3287) < 1e-4
    # masked voxels: uniform over the valid ones only
    logits[:, :, V // 2 :] = float("-inf")
    mean, _ = volume_ce(logits, torch.tensor([[[5, 0], [17, 0]]]), w)
    assert abs(mean.item() - math.log(V // 2)) < 1e-4


def test_soft_target_ce_by_hand():
    logits = torch.tensor([[[0.0, 1.0, 2.0, float("-inf")]]])
    idx = torch.tensor([[[1, 2]]])
    w = torch.tensor([[[0.5, 0.5]]])
    mean, _ = volume_ce(logits, idx, w)
    lse = math.log(1 + math.e + math.e**2)
    assert abs(mean.item() - (lse - 0.5 * 1.0 - 0.5 * 2.0)) < 1e-6
    # steps with no visible target are skipped
    mean, per = volume_ce(
        logits.expand(1, 2, 4), torch.tensor([[[1, 2], [0, 0]]]), torch.tensor([[[0.5, 0.5], [0.0, 0.0]]])
    )
    assert per[0, 1] == 0 and abs(mean.item() - (lse - 1.5)) < 1e-6


def _sample(cfg, seed=0):
    inp = make_inputs(cfg, batch=1, seed=seed)
    from para_core.model.voxels import build_voxel_grid

    grid = build_voxel_grid(cfg, inp.K_img, inp.T_world_cam)
    pos, rot, grip = make_trajectory(cfg, batch=1, seed=seed)
    return inp, encode_targets(cfg, grid, pos, rot, grip)


def test_gradients_reach_every_parameter_and_lr_groups():
    torch.manual_seed(0)
    cfg = V4Config.tiny(height_encoding="learned")
    model = build_model(cfg).train()
    inp, tgt = _sample(cfg)
    assert (tgt.teacher_voxel >= 0).all()
    out = model(inp, tgt)
    out.losses["loss"].backward()
    no_grad = [
        n for n, p in model.named_parameters() if p.requires_grad and (p.grad is None or p.grad.abs().sum() == 0)
    ]
    assert no_grad == []
    groups = {g["name"]: g for g in model.param_groups()}
    assert groups["backbone"]["lr"] == pytest.approx(cfg.lr * cfg.backbone_lr_mult)
    n_bb = sum(p.numel() for p in groups["backbone"]["params"])
    n_trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert n_bb > 0.9 * count_parameters(model.backbone)
    assert n_bb + sum(p.numel() for p in groups["head"]["params"]) == n_trainable
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    assert frozen == ["backbone.vit.embeddings.mask_token"]  # only the unused masked-modelling token


def test_tiny_model_overfits_one_sample():
    torch.manual_seed(0)
    cfg = V4Config.tiny()
    model = build_model(cfg).train()
    inp, tgt = _sample(cfg)
    opt = torch.optim.Adam(model.param_groups(), lr=cfg.lr)
    for g in opt.param_groups:  # 10x both rates for a quick overfit; backbone keeps its backbone_lr_mult ratio
        g["lr"] *= 10
    bb_before = [p.detach().clone() for p in model.backbone.parameters()]
    losses = []
    for _ in range(300):  # 200 left the last step's argmax one voxel off once the rotation bins were re-centred
        out = model(inp, tgt)
        opt.zero_grad()
        out.losses["loss"].backward()
        opt.step()
        losses.append(out.losses["loss"].item())
    assert losses[-1] < 0.1 * losses[0], (losses[0], losses[-1])
    moved = [
        not torch.equal(a, b)
        for a, b, p in zip(bb_before, model.backbone.parameters(), model.backbone.parameters())
        if p.requires_grad
    ]
    assert all(moved)
    model.eval()
    with torch.no_grad():
        out = model(inp)
    am = out.volume_logits.argmax(-1)[0]  # (T,) must be one of each step's soft-target voxels
    for t in range(cfg.n_window):
        assert am[t].item() in tgt.voxel_index[0, t][tgt.voxel_weight[0, t] > 0].tolist()


def test_projection_in_fusion_stays_fp32_under_autocast():
    """Under bf16 autocast the network runs in bf16 but voxel projection must not: the visibility flags and the
    sampling positions must equal the fp32 ones."""
    torch.manual_seed(0)
    cfg = V4Config.tiny()
    model = build_model(cfg).eval()
    inp = make_inputs(cfg)
    with torch.no_grad():
        out = model(inp)
        fm, _ = model.image_features(inp.images)
        ids = torch.arange(out.voxel_xyz.shape[1])
        ref = model.fusion_inputs(fm, out.grid, out.voxel_xyz, ids)
        with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
            amp = model.fusion_inputs(fm, out.grid, out.voxel_xyz, ids)
    F = cfg.feat_dim
    for k in range(cfg.n_views):
        col = k * (F + 1) + F
        assert torch.equal(ref[..., col], amp[..., col].float())
    assert torch.allclose(ref, amp.float(), atol=1e-5)


def test_chunked_checkpointed_training_gives_same_gradients():
    torch.manual_seed(0)
    cfg = V4Config.tiny()
    model = build_model(cfg).train()
    inp, tgt = _sample(cfg)
    grads = []
    for chunk in (0, 1000):
        model.config = cfg.replace(voxel_chunk_size=chunk)
        model.zero_grad()
        model(inp, tgt).losses["loss"].backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for n in grads[0]:
        assert torch.allclose(grads[0][n], grads[1][n], atol=1e-5, rtol=1e-4), n


def test_sampling_positions_stay_fp32_under_bf16_autocast():
    """Under bf16 autocast the feature maps are bf16, but the positions they are sampled at must not be: bf16 keeps 8
    significant bits, so grid_sample coordinates cast to bf16 move by up to 1/16 pixel at P = 64. At hand-picked
    non-grid positions the fused features must equal an fp32 sample of the same (bf16) map at the exact positions, to
    bf16 output rounding, and the test checks that quantised positions would be told apart from it."""
    import torch.nn.functional as Fn

    from para_core.model.geometry import unproject_to_height, uv_to_grid_sample
    from para_core.model.voxels import build_voxel_grid

    torch.manual_seed(0)
    cfg = V4Config.tiny(pred_size=64)
    model = build_model(cfg).eval()
    inp = make_inputs(cfg)
    grid = build_voxel_grid(cfg, inp.K_img, inp.T_world_cam)
    P, F = cfg.pred_size, cfg.feat_dim
    # Scene-view pixel positions whose grid coordinates 2u/P - 1 are not bf16 numbers (|x| in [0.25, 1): steps of
    # 1/32 .. 1/16 of a unit, i.e. 1/16 .. 1/8 pixel).
    uv = torch.tensor(
        [[40.3, 50.7], [12.345, 21.9], [58.91, 5.43], [33.33, 44.44], [7.77, 60.06], [47.123, 29.87]],
        dtype=torch.float64,
    )
    xyz, front = unproject_to_height(uv, 0.05, grid.K_pred[0, 0].double(), grid.T_world_cam[0, 0].double())
    assert front.all()
    xyz = xyz.float().unsqueeze(0)  # (1, n, 3)
    fm = torch.randn(1, cfg.n_views, F, P, P).bfloat16()  # what the upsampled projection gives under autocast
    with torch.no_grad(), torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        amp = model.fusion_inputs(fm, grid, xyz, torch.zeros(len(uv), dtype=torch.long))
    assert (amp[0, :, F] == 1).all()  # visible in the scene view
    got = amp[0, :, :F].float()  # (n, F) scene-view features
    g = uv_to_grid_sample(uv, P, P).float().view(1, -1, 1, 2)  # (1, n, 1, 2) exact positions, fp32
    ref = Fn.grid_sample(fm[:, 0].float(), g, mode="bilinear", padding_mode="border", align_corners=False)[
        0, :, :, 0
    ].T  # (n, F)
    tol = ref.abs() * 2.0**-8 + 1e-4  # bf16 rounding of the sampled value (+ the uv -> xyz -> uv round trip)
    assert ((got - ref).abs() <= tol).all(), (got - ref).abs().max()
    # the quantised positions the old code sampled at would fail the same tolerance at every point
    quant = Fn.grid_sample(
        fm[:, 0].float(), g.bfloat16().float(), mode="bilinear", padding_mode="border", align_corners=False
    )[0, :, :, 0].T  # (n, F)
    assert ((quant - ref).abs() > tol).any(dim=-1).all()


def test_training_head_voxel_rule_by_hand():
    """Of the GT voxels (one per view that sees the point) the head trains at the one with the highest logit; unseen
    views never count, even with a higher logit; ties go to the earlier view; no view sees it: the argmax voxel."""
    from para_core.model.model_io import V4Targets
    from para_core.model.v4 import training_head_voxel

    ninf = float("-inf")
    V = 10
    logits = torch.zeros(1, 6, V)
    index = torch.tensor([[[2, 7], [2, 7], [0, 7], [0, 0], [2, 7], [4, 6]]])  # (1, 6, N = 2)
    weight = torch.tensor([[[0.5, 0.5], [0.5, 0.5], [0.0, 1.0], [0.0, 0.0], [0.5, 0.5], [0.0, 1.0]]])
    logits[0, 0, 2], logits[0, 0, 7] = 1.0, 3.0  # both views see it, the second view's voxel scores higher
    logits[0, 1, 2], logits[0, 1, 7] = 5.0, 3.0  # the first view's voxel scores higher
    logits[0, 2, 0], logits[0, 2, 7] = 100.0, 1.0  # only the second view sees it; voxel 0 is no GT voxel
    logits[0, 3, 9] = 4.0  # no view sees it: the argmax voxel
    logits[0, 4, 2] = logits[0, 4, 7] = 2.0  # tie: the earlier view
    logits[0, 5, 4], logits[0, 5, 6] = 1.0, ninf  # the only GT voxel is masked in the model's grid: still it
    zeros = torch.zeros(1, 6, dtype=torch.long)
    tgt = V4Targets(
        voxel_index=index,
        voxel_weight=weight,
        teacher_voxel=zeros,
        gripper_bin=zeros,
        rotation_bins=zeros.unsqueeze(-1).expand(-1, -1, 3),
        positions_world=torch.zeros(1, 6, 3),
    )
    chosen = training_head_voxel(logits, tgt, logits.argmax(-1))
    assert chosen.tolist() == [[7, 2, 7, 9, 2, 6]]


def test_training_head_reads_the_gt_voxel_the_model_scores_highest():
    """In a forward with targets the head reads, per step, the GT voxel with the highest logit, and its logits are the
    head's MLP at that voxel, by hand. Over a few random models this includes steps where that is the second (wrist)
    view's voxel, where the first-visible rule (``teacher_voxel``) would read the scene view's."""
    cfg = V4Config.tiny()
    n_other_view = 0
    for seed in range(8):
        torch.manual_seed(seed)
        model = build_model(cfg).eval()
        inp, tgt = _sample(cfg, seed=seed)
        with torch.no_grad():
            out = model(inp, tgt)
        for t in range(cfg.n_window):
            seen = tgt.voxel_weight[0, t] > 0
            gt = tgt.voxel_index[0, t][seen]
            best = gt[out.volume_logits[0, t, gt].argmax()]
            assert out.chosen_voxel[0, t] == best, (seed, t)
            n_other_view += int(best != tgt.teacher_voxel[0, t])
            x = torch.cat([out.voxel_feat[0, best], out.query[0, t]]).double().numpy()
            ref = _mlp_by_hand(model.grip_rot_head, x)
            got = torch.cat([out.gripper_logits[0, t], out.rotation_logits[0, t].reshape(-1)]).double().numpy()
            assert np.abs(got - ref).max() < 1e-5, (seed, t)
        if n_other_view >= 2 and seed >= 1:
            break
    assert n_other_view >= 2  # the case that tells the two rules apart occurs


# ------------------------------------------------------------------------------ structure and inputs (mutation tests)
def test_inference_head_reads_the_argmax_voxel():
    """Without targets the gripper/rotation head reads the argmax voxel of each step: its logits are the head's MLP
    on [voxel_feat[argmax], q_t] by hand, and differ from what it would give at another voxel (e.g. voxel 0)."""
    torch.manual_seed(0)
    cfg = V4Config.tiny()
    model = build_model(cfg).eval()
    inp = make_inputs(cfg, batch=2)
    with torch.no_grad():
        out = model(inp)
    argmax = out.volume_logits.argmax(-1)  # (B, T)
    assert torch.equal(out.chosen_voxel, argmax)
    assert (argmax != 0).all()
    for b in range(2):
        for t in range(cfg.n_window):
            got = torch.cat([out.gripper_logits[b, t], out.rotation_logits[b, t].reshape(-1)]).double().numpy()
            for v, same in ((argmax[b, t], True), (0, False)):
                x = torch.cat([out.voxel_feat[b, v], out.query[b, t]]).double().numpy()
                ref = _mlp_by_hand(model.grip_rot_head, x)
                assert (np.abs(got - ref).max() < 1e-5) == same, (b, t, v)


def test_mlp_structure_matches_the_seed_spec():
    """Seed 001: a 3-layer voxel MLP [N (F + 1) + h -> H -> H -> F], a 2-layer global MLP [state + N C -> G -> G] + GELU
    then q_head [G -> T F], and a 4-layer gripper/rotation head [2 F -> Hh -> Hh -> Hh -> G + 3 R]; GELU between the
    layers of each MLP and none after its last layer."""
    cfg = V4Config.tiny()
    model = build_model(cfg)
    N, F, h, H = cfg.n_views, cfg.feat_dim, cfg.height_enc_dim, cfg.voxel_mlp_hidden
    C, G, Hh, T = model.backbone.hidden_size, cfg.global_mlp_hidden, cfg.head_hidden, cfg.n_window
    state = 10 + 3 * cfg.mv_past_n

    def layers(seq):
        kinds = [type(m) for m in seq]
        assert kinds == [torch.nn.Linear, torch.nn.GELU] * (len(seq) // 2) + [torch.nn.Linear], kinds
        return [(m.in_features, m.out_features) for m in seq if isinstance(m, torch.nn.Linear)]

    assert layers(model.voxel_mlp) == [(N * (F + 1) + h, H), (H, H), (H, F)]
    assert layers(model.global_mlp) == [(state + N * C, G), (G, G)]
    assert isinstance(model.global_act, torch.nn.GELU)
    assert (model.q_head.in_features, model.q_head.out_features) == (G, T * F)
    R = cfg.n_rotation_bins
    assert layers(model.grip_rot_head) == [(2 * F, Hh), (Hh, Hh), (Hh, Hh), (Hh, cfg.n_gripper_bins + 3 * R)]


def _inputs_with_state(cfg, seed=0):
    """make_inputs with a non-trivial EE state: a tilted, yawed tool, a half-open gripper and past positions that
    are not the current one (make_inputs repeats it, which makes their features 0)."""
    from scipy.spatial.transform import Rotation

    inp = make_inputs(cfg, seed=seed)
    rng = np.random.default_rng(seed)
    R = inp.T_world_ee[0, :3, :3].double().numpy() @ Rotation.from_rotvec([0.2, -0.1, 0.7]).as_matrix()
    inp.T_world_ee[0, :3, :3] = torch.tensor(R, dtype=torch.float32)
    inp.gripper[:] = 0.3
    inp.past_positions_world[0] += torch.tensor(rng.normal(scale=0.03, size=(cfg.mv_past_n, 3)), dtype=torch.float32)
    return inp


def test_queries_by_hand():
    """q = q_head(GELU(global_mlp([EE state, CLS of every view]))), with the EE state of the module docstring (step 5)
    computed by hand: position normalised to the workspace box, first two columns of R_ref^T R, 2 g - 1, past
    positions relative to the current one / 0.1 m."""
    from scipy.spatial.transform import Rotation

    torch.manual_seed(0)
    cfg = V4Config.tiny()
    model = build_model(cfg).eval()
    inp = _inputs_with_state(cfg)
    cls = torch.randn(1, cfg.n_views, model.backbone.hidden_size)
    with torch.no_grad():
        q = model.queries(cls, inp)[0].double().numpy()  # (T, F)
    T_ee = inp.T_world_ee[0].double().numpy()
    pos = T_ee[:3, 3]
    lo = np.array([cfg.workspace_x_m[0], cfg.workspace_y_m[0], cfg.z_lo_m])
    hi = np.array([cfg.workspace_x_m[1], cfg.workspace_y_m[1], cfg.z_hi_m])
    R_rel = Rotation.from_quat(cfg.rotation_ref_quat_xyzw).as_matrix().T @ T_ee[:3, :3]
    past = (inp.past_positions_world[0].double().numpy() - pos) / 0.1  # (mv_past_n, 3)
    state = np.concatenate([2 * (pos - lo) / (hi - lo) - 1, R_rel[:, 0], R_rel[:, 1], [2 * 0.3 - 1], past.reshape(-1)])
    assert np.abs(past).max() > 0.1  # non-trivial past features
    x = np.concatenate([state, cls[0].double().numpy().reshape(-1)])
    g = _gelu(_mlp_by_hand(model.global_mlp, x))
    ref = model.q_head.weight.detach().double().numpy() @ g + model.q_head.bias.detach().double().numpy()
    assert np.abs(q - ref.reshape(cfg.n_window, cfg.feat_dim)).max() < 1e-5


def test_every_query_input_moves_the_queries():
    """Each view's CLS token, the EE position, orientation and gripper, and each past position changes the queries
    (a query that ignored one of them would still train and decode)."""
    torch.manual_seed(0)
    cfg = V4Config.tiny()
    model = build_model(cfg).eval()
    inp = _inputs_with_state(cfg)
    cls = torch.randn(1, cfg.n_views, model.backbone.hidden_size)
    with torch.no_grad():
        out = model(inp)
        assert torch.allclose(out.query, model.queries(out.cls, inp))  # forward's query is this function's
        q0 = model.queries(cls, inp)

        def moved(cls_=cls, **changes):
            changed = dataclasses.replace(inp, **changes)
            return (model.queries(cls_, changed) - q0).abs().max().item() > 1e-4

        for k in range(cfg.n_views):
            other = cls.clone()
            other[0, k] += torch.randn(other.shape[-1])
            assert moved(other), f"CLS of view {k}"
        T_ee = inp.T_world_ee.clone()
        T_ee[0, :3, 3] += torch.tensor([0.02, -0.01, 0.03])
        assert moved(T_world_ee=T_ee), "EE position"
        from scipy.spatial.transform import Rotation

        T_ee = inp.T_world_ee.clone()
        T_ee[0, :3, :3] = T_ee[0, :3, :3] @ torch.tensor(
            Rotation.from_rotvec([0, 0, 0.3]).as_matrix(), dtype=torch.float32
        )
        assert moved(T_world_ee=T_ee), "EE orientation"
        assert moved(gripper=torch.full_like(inp.gripper, 0.9)), "gripper"
        for i in range(cfg.mv_past_n):
            past = inp.past_positions_world.clone()
            past[0, i] += torch.tensor([0.0, 0.02, 0.0])
            assert moved(past_positions_world=past), f"past position {i}"
