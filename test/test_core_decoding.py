"""Chunk decoding in voxel space (para_core.model.decoding): the joint decoder against a brute-force search over every
path, the speed limit, the fusion against a hand computation, refusal of NaN / all -inf distributions, and the
Policy end to end (argmax unchanged, bit for bit)."""

import itertools
import math

import numpy as np
import pytest
import torch

from para_core.data import synthetic as syn
from para_core.model.actions import decode_outputs
from para_core.model.config import V4Config
from para_core.model.decoding import ChunkFusion, DecodingConfig, best_path, check_distributions, decode_chunk
from para_core.model.policy import CameraObservation, Policy, RobotState
from para_core.model.registry import build_model

torch.set_num_threads(1)


def brute_force(log_probs, xyz, dt, vmax, cost, start=None):
    """Every path scored with plain loops: the (least excess, then highest score) one, its excess and score."""
    T, k = log_probs.shape
    best = None
    for path in itertools.product(range(k), repeat=T):
        if not all(math.isfinite(log_probs[t, j]) for t, j in enumerate(path)):
            continue
        points = [xyz[t, j] for t, j in enumerate(path)]
        if start is not None:
            points = [np.asarray(start)] + points
        excess = score = 0.0
        for a, b in itertools.pairwise(points):
            d = math.sqrt(sum((float(x) - float(y)) ** 2 for x, y in zip(a, b)))
            excess += max(0.0, d - vmax * dt)
            score -= cost * d
        score += sum(float(log_probs[t, j]) for t, j in enumerate(path))
        key = (round(excess, 9), -score)
        if best is None or key < best[0]:
            best = (key, path, excess, score)
    return best[1], best[2], best[3]


@pytest.mark.parametrize("seed", range(12))
def test_joint_decoder_finds_the_brute_force_best_path(seed):
    rng = np.random.default_rng(seed)
    T, k = 4, 4
    log_probs = np.log(rng.dirichlet(np.ones(k), size=T))  # (T, k)
    spread_m = [0.05, 0.3, 1.0][seed % 3]  # from every path within the limit to none
    xyz = rng.uniform(0.0, spread_m, size=(T, k, 3))  # (T, k, 3)
    start = rng.uniform(0.0, spread_m, size=3) if seed % 2 else None
    cost = [0.0, 5.0][seed % 2]
    got = best_path(log_probs, xyz, step_dt_s=0.2, max_speed_m_s=1.0, motion_cost_per_m=cost, start_xyz=start)
    path, excess, score = brute_force(log_probs, xyz, 0.2, 1.0, cost, start)
    assert tuple(got.index) == path
    assert got.score == pytest.approx(score, abs=1e-9)
    assert got.excess_m == pytest.approx(excess, abs=1e-9)


def test_joint_decoder_never_steps_faster_than_the_limit_when_a_slower_path_exists():
    """A two-mode distribution whose argmax alternates between the cube (x = 0.3) and the pad (x = 0.6) 0.3 m apart:
    0.2 s steps at 1 m/s allow 0.2 m per step, so the argmax path breaks the limit at every step; the joint decoder
    stays in one mode although each step alone prefers the other mode half of the time."""
    cube, pad = [0.3, 0.0, 0.05], [0.6, 0.0, 0.05]
    T = 6
    xyz = np.array([[cube, pad]] * T)  # (T, 2, 3)
    strong, weak = math.log(0.9), math.log(0.1)
    log_probs = np.array([[strong, weak] if t % 2 == 0 else [weak, strong] for t in range(T)])  # argmax alternates
    argmax = log_probs.argmax(1)
    assert np.linalg.norm(np.diff(xyz[np.arange(T), argmax], axis=0), axis=1).max() > 0.2  # the reference jumps
    for start in (None, np.array(cube), np.array(pad)):
        got = best_path(log_probs, xyz, step_dt_s=0.2, max_speed_m_s=1.0, start_xyz=start)
        steps = np.linalg.norm(np.diff(xyz[np.arange(T), got.index], axis=0), axis=1)
        assert steps.max() <= 0.2 and got.excess_m == 0.0
        if start is not None:  # it stays in the mode where the tool is
            assert np.allclose(xyz[0, got.index[0]], start)


def test_when_every_path_breaks_the_limit_the_least_excess_one_is_taken():
    """No path within the limit: the decoder is penalised, not refused; it takes the path of least excess distance,
    even against a much more probable one (the excess ranks first)."""
    xyz = np.array(
        [[[0.0, 0, 0], [0.0, 0, 0]], [[1.0, 0, 0], [2.0, 0, 0]]]
    )  # (2, 2, 3): step 1 is 1 m or 2 m away, limit 0.2 m
    log_probs = np.array([[0.0, -50.0], [math.log(0.01), math.log(0.99)]])
    got = best_path(log_probs, xyz, step_dt_s=0.2, max_speed_m_s=1.0)
    assert tuple(got.index) == (0, 0) and got.excess_m == pytest.approx(0.8)
    assert brute_force(log_probs, xyz, 0.2, 1.0, 0.0)[0] == (0, 0)


def test_a_candidate_of_minus_infinity_is_never_chosen():
    xyz = np.zeros((3, 3, 3))
    xyz[1, 0] = [5.0, 0, 0]  # the only finite candidate of step 1 is far: the -inf ones are near
    log_probs = np.array([[0.0, -1.0, -2.0], [-3.0, -np.inf, -np.inf], [0.0, -np.inf, -1.0]])
    got = best_path(log_probs, xyz, step_dt_s=0.2, max_speed_m_s=1.0)
    assert got.index[1] == 0 and np.isfinite(log_probs[np.arange(3), got.index]).all()


def test_fusion_against_a_hand_computation():
    """An earlier chunk stamped 1.0 s (dt 0.1 s, 3 steps, 2 stored voxels a step) and a new chunk at 1.1 s: new step 0
    (1.1 s) meets old step 1, new step 1 (1.2 s) old step 2, new step 2 (1.3 s) is past the old chunk."""
    fusion = ChunkFusion(tau_s=0.5, radius_m=0.02, store_k=2, max_chunks=4)
    old_xyz = np.array(
        [[[0.0, 0, 0], [0.1, 0, 0]], [[0.2, 0, 0], [0.3, 0, 0]], [[0.4, 0, 0], [0.5, 0, 0]]]
    )  # (3, 2, 3)
    old_p = np.array([[0.6, 0.3], [0.7, 0.2], [0.5, 0.4]])  # (3, 2)
    fusion.add(1.0, 0.1, old_xyz, old_p)
    new_xyz = np.array(
        [
            [[0.21, 0, 0], [0.30, 0.015, 0]],  # 1 cm from old (1, 0); 1.5 cm from old (1, 1)
            [[0.45, 0, 0], [0.5, 0, 0.019]],  # 5 cm from both (floor); 1.9 cm from old (2, 1)
            [[0.0, 0, 0], [1.0, 0, 0]],
        ]
    )  # no old step
    new_lp = np.log(np.array([[0.5, 0.5], [0.2, 0.8], [0.9, 0.1]]))
    got = fusion.fused_scores(new_lp, new_xyz, stamp_s=1.1, step_dt_s=0.1)
    w = math.exp(-0.1 / 0.5)
    expected = np.array(
        [
            [math.log(0.5) + w * math.log(0.7), math.log(0.5) + w * math.log(0.2)],
            [math.log(0.2) + w * math.log(0.4), math.log(0.8) + w * math.log(0.4)],
            [math.log(0.9), math.log(0.1)],
        ]
    )
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12)
    # the stored mass within the radius adds up: 5 cm from both voxels of old step 2 (1.2 s), radius 6 cm
    wide = ChunkFusion(tau_s=0.5, radius_m=0.06, store_k=2)
    wide.add(1.0, 0.1, old_xyz, old_p)
    both = wide.fused_scores(np.zeros((1, 1)), np.array([[[0.45, 0, 0]]]), stamp_s=1.2, step_dt_s=0.1)
    assert both[0, 0] == pytest.approx(math.exp(-0.2 / 0.5) * math.log(0.5 + 0.4), abs=1e-12)
    # a chunk from the future (the clock went back) is not in force
    assert fusion.in_force(0.5) == []
    # a chunk past its last step is dropped when the next one comes; clear() forgets everything
    fusion.add(2.0, 0.1, old_xyz, old_p)
    assert [c.stamp_s for c in fusion.chunks] == [2.0]
    fusion.clear()
    assert len(fusion.chunks) == 0


def test_decoding_config_refuses_bad_values_naming_the_field():
    with pytest.raises(ValueError, match="mode = 'viterbi'"):
        DecodingConfig(mode="viterbi")
    with pytest.raises(ValueError, match="top_k = 0"):
        DecodingConfig(top_k=0)
    with pytest.raises(ValueError, match="max_speed_m_s = -1"):
        DecodingConfig(max_speed_m_s=-1.0)
    with pytest.raises(ValueError, match="motion_cost_per_m"):
        DecodingConfig(motion_cost_per_m=float("nan"))
    with pytest.raises(ValueError, match="decoding='joint'"):
        regression = V4Config.tiny(model_kind="coord_regression")
        Policy(build_model(regression), regression, torch.device("cpu"), decoding="joint")


def _obs(cfg, seed=0):
    rng = np.random.default_rng(seed)
    ee = np.array([0.3, 0.0, 0.2])
    cams = [
        CameraObservation(
            syn.random_image(rng, 96, 128), syn.intrinsics_from_fovy(128, 96, 60.0), syn.scene_camera_pose()
        ),
        CameraObservation(
            syn.random_image(rng, 96, 128), syn.intrinsics_from_fovy(128, 96, 80.0), syn.wrist_camera_pose(ee)
        ),
    ][: cfg.n_views]
    T = np.eye(4)
    T[:3, :3] = syn.top_down_rotation()
    T[:3, 3] = ee
    return cams, RobotState(T, 1.0, np.tile(ee, (cfg.mv_past_n, 1)))


@pytest.fixture(scope="module")
def tiny_output():
    cfg = V4Config.tiny()
    pol = Policy.random_init(cfg, device="cpu", seed=4)
    cams, state = _obs(cfg)
    with torch.inference_mode():
        out = pol.model(pol.preprocess(cams, state))
    return cfg, out


@pytest.mark.parametrize("what", ["nan", "all -inf"])
def test_nan_or_all_minus_inf_distributions_are_refused(tiny_output, what):
    cfg, out = tiny_output
    logits = out.volume_logits.clone()
    if what == "nan":
        logits[0, 1, 7] = float("nan")
    else:
        logits[0, 2] = float("-inf")
    bad = type(out)(**{**out.__dict__, "volume_logits": logits, "volume_lse": None})
    with pytest.raises(ValueError, match="NaN" if what == "nan" else "no valid voxel"):
        check_distributions(bad)
    for mode in ("joint", "fused"):
        with pytest.raises(ValueError):
            decode_chunk(cfg, bad, DecodingConfig(mode=mode), fusion=ChunkFusion(), stamp_s=0.0)


def test_policy_argmax_is_the_reference_bit_for_bit_and_joint_with_one_candidate_agrees():
    cfg = V4Config.tiny()
    cams, state = _obs(cfg, seed=1)
    default = Policy.random_init(cfg, device="cpu", seed=5)
    ref = default.predict(cams, state)
    ref_chunk = decode_outputs(cfg, default.last_output, refine=True)[0]  # the argmax decode, called directly
    argmax = Policy.random_init(cfg, device="cpu", seed=5, decoding="argmax").predict(cams, state)
    # one candidate a step, no motion cost, no effective limit: the joint path is the argmax path
    one = DecodingConfig(mode="joint", top_k=1, motion_cost_per_m=0.0, max_speed_m_s=1e9)
    joint1 = Policy.random_init(cfg, device="cpu", seed=5, decoding=one).predict(cams, state)
    for name in ("positions_world", "quaternions_xyzw", "gripper", "confidence", "time_offsets_s"):
        np.testing.assert_array_equal(getattr(argmax, name), getattr(ref, name), err_msg=name)
        np.testing.assert_array_equal(getattr(joint1, name), getattr(ref, name), err_msg=name)
    np.testing.assert_array_equal(ref.positions_world, ref_chunk.positions_world)


def test_policy_joint_and_fused_end_to_end():
    """A tiny random model decoded jointly and fused: finite chunks, the fused policy's memory holding its chunks,
    ``fused`` without a stamp refused."""
    cfg = V4Config.tiny()
    cams, state = _obs(cfg, seed=2)
    for mode in ("joint", "fused"):
        pol = Policy.random_init(
            cfg, device="cpu", seed=6, decoding=DecodingConfig(mode=mode, top_k=16, max_speed_m_s=3.0)
        )
        for stamp_s in (10.0, 10.0 + cfg.step_dt_s):
            out = pol.predict(cams, state, stamp_s=stamp_s)
            assert np.isfinite(out.positions_world).all() and ((out.confidence >= 0) & (out.confidence <= 1)).all()
        assert len(pol.fusion.chunks) == (2 if mode == "fused" else 0)
    with pytest.raises(ValueError, match="stamp_s"):
        Policy.random_init(cfg, device="cpu", decoding="fused").predict(cams, state)


def test_auto_decoding_is_fused_for_a_voxel_model_and_argmax_for_the_regression_baseline():
    """``auto`` (the inference node's default) resolves by the model kind, keeping the other fields; a fused ``auto``
    policy decodes exactly as an explicitly fused one; the regression baseline under ``auto`` decodes its own way,
    while asking it for ``fused`` explicitly is still refused."""
    cfg = V4Config.tiny()
    cams, state = _obs(cfg, seed=3)
    auto = Policy.random_init(cfg, device="cpu", seed=7, decoding=DecodingConfig(mode="auto", top_k=5))
    assert (auto.decoding.mode, auto.decoding.top_k) == ("fused", 5)
    fused = Policy.random_init(cfg, device="cpu", seed=7, decoding=DecodingConfig(mode="fused", top_k=5))
    for stamp_s in (10.0, 10.0 + cfg.step_dt_s):
        a, f = auto.predict(cams, state, stamp_s=stamp_s), fused.predict(cams, state, stamp_s=stamp_s)
        np.testing.assert_array_equal(a.positions_world, f.positions_world)
    regression = V4Config.tiny(model_kind="coord_regression")
    baseline = Policy(build_model(regression), regression, torch.device("cpu"), decoding="auto")
    assert baseline.decoding.mode == "argmax"
    with pytest.raises(ValueError, match="decoding='fused'"):
        Policy(build_model(regression), regression, torch.device("cpu"), decoding="fused")
    with pytest.raises(ValueError, match="auto"):  # the refusal names the choices, auto among them
        DecodingConfig(mode="best")
