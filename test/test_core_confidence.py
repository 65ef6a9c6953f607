"""The confidence measures (para_core.model.confidence) against distributions whose values are known by hand: a delta,
a uniform, two modes, and two views that disagree."""

import math

import numpy as np
import pytest
import torch
from core_fixtures import make_inputs
from test_core_actions import _fake_output

from para_core.model.actions import ball_confidence
from para_core.model.confidence import (
    ChunkInForce,
    chunk_agreement,
    normalised_entropy,
    step_confidence,
    view_agreement,
    worst_step,
)
from para_core.model.config import V4Config
from para_core.model.voxels import build_voxel_grid

CFG = V4Config.tiny(confidence_radius_m=0.03)


@pytest.fixture(scope="module")
def grid():
    inp = make_inputs(CFG, batch=1)
    return build_voxel_grid(CFG, inp.K_img.float(), inp.T_world_cam.float())


def _out(grid, logits_tv):
    """A V4Output of batch 1 with these (T, V) logits."""
    T = logits_tv.shape[0]
    z = torch.zeros(1, T, dtype=torch.long)
    return _fake_output(CFG, grid, logits_tv.unsqueeze(0).float(), z, torch.zeros(1, T, 3, dtype=torch.long))


def _valid_index(grid, view: int) -> np.ndarray:
    """The valid voxels of one view (indices into V)."""
    V = grid.voxel_xyz.shape[1]
    per_view = V // grid.n_views
    valid = grid.valid[0].numpy()
    return np.flatnonzero(valid[view * per_view : (view + 1) * per_view]) + view * per_view


def _far_apart(grid, view_a: int, view_b: int, min_m: float) -> tuple[int, int]:
    """A valid voxel of view_a and one of view_b at least ``min_m`` apart."""
    xyz = grid.voxel_xyz[0].double().numpy()
    a = int(_valid_index(grid, view_a)[len(_valid_index(grid, view_a)) // 2])
    cands = _valid_index(grid, view_b)
    d = np.linalg.norm(xyz[cands] - xyz[a], axis=1)
    return a, int(cands[np.argmax(d >= min_m)])


def _seen_by_both(grid) -> tuple[int, int]:
    """A valid scene voxel with a valid wrist voxel within half the radius, and that wrist voxel."""
    xyz = grid.voxel_xyz[0].double().numpy()
    view1 = _valid_index(grid, 1)
    for cand in _valid_index(grid, 0)[::7]:
        d = np.linalg.norm(xyz[view1] - xyz[cand], axis=1)
        if d.min() <= 0.5 * CFG.confidence_radius_m:
            return int(cand), int(view1[np.argmin(d)])
    raise AssertionError("the fixture's views do not overlap")


def test_a_delta_is_certain(grid):
    """All the probability on one voxel: peak mass 1, entropy 0, the other view (which sees the point but holds a
    flat, negligible share) disagrees: its share within the radius is its count there over its valid voxels."""
    V, T = grid.voxel_xyz.shape[1], CFG.n_window
    j, _ = _seen_by_both(grid)
    logits = torch.full((T, V), -1e4)
    logits[:, j] = 0.0
    logits[:, ~grid.valid[0]] = float("-inf")
    out = _out(grid, logits)
    pos = grid.voxel_xyz[0, j].double().expand(T, 3).numpy()
    peak = ball_confidence(CFG, out, torch.as_tensor(pos).unsqueeze(0))[0].numpy()
    np.testing.assert_allclose(peak, 1.0, atol=1e-6)
    ent = normalised_entropy(out)
    assert ent.max() < 1e-3  # exp(-1e4) terms are 0 in float32: the entropy of a delta
    xyz = grid.voxel_xyz[0].double().numpy()
    view1 = _valid_index(grid, 1)
    n_near = int((np.linalg.norm(xyz[view1] - xyz[j], axis=1) <= CFG.confidence_radius_m).sum())
    assert n_near > 0
    expected = n_near / len(view1)  # the wrist view's flat share near the point
    np.testing.assert_allclose(view_agreement(CFG, out, pos), expected, rtol=1e-3)  # float32 logits of -1e4


def test_a_uniform_distribution_has_entropy_one(grid):
    """Uniform over the valid voxels: entropy 1, peak mass = voxels in the ball / valid voxels (a brute-force count),
    view agreement = the smallest per-view share of voxels in the ball."""
    V, T = grid.voxel_xyz.shape[1], CFG.n_window
    logits = torch.zeros(T, V)
    logits[:, ~grid.valid[0]] = float("-inf")
    out = _out(grid, logits)
    np.testing.assert_allclose(normalised_entropy(out), 1.0, atol=1e-5)
    xyz = grid.voxel_xyz[0].double().numpy()
    valid = grid.valid[0].numpy()
    point = xyz[_seen_by_both(grid)[0]]
    in_ball = (np.linalg.norm(xyz - point, axis=1) <= CFG.confidence_radius_m) & valid
    pos = np.tile(point, (T, 1))
    peak = ball_confidence(CFG, out, torch.as_tensor(pos).unsqueeze(0))[0].numpy()
    np.testing.assert_allclose(peak, in_ball.sum() / valid.sum(), rtol=1e-4)
    shares = []
    per_view = V // grid.n_views
    for k in range(grid.n_views):
        sl = slice(k * per_view, (k + 1) * per_view)
        if in_ball[sl].sum():
            shares.append(in_ball[sl].sum() / valid[sl].sum())
    assert len(shares) == 2
    expected = min(shares)
    np.testing.assert_allclose(view_agreement(CFG, out, pos), expected, rtol=1e-4)


def _two_modes(grid):
    """0.7 at voxel a (scene view), 0.3 at voxel b (wrist view, far from a); nothing else valid."""
    V, T = grid.voxel_xyz.shape[1], CFG.n_window
    a, b = _far_apart(grid, 0, 1, 4 * CFG.confidence_radius_m)
    logits = torch.full((T, V), float("-inf"))
    logits[:, a], logits[:, b] = math.log(0.7), math.log(0.3)
    return _out(grid, logits), grid.voxel_xyz[0, a].double().numpy(), grid.voxel_xyz[0, b].double().numpy()


def test_two_modes(grid):
    """Entropy H(0.7, 0.3) / log 2 (two valid voxels); peak mass 0.7 at a; each view sees only its own mode, so the
    views cannot disagree (1); a chunk in force at b agrees 0.3, at a 0.7."""
    out, a_xyz, b_xyz = _two_modes(grid)
    T = CFG.n_window
    h = -(0.7 * math.log(0.7) + 0.3 * math.log(0.3)) / math.log(2)
    np.testing.assert_allclose(normalised_entropy(out), h, rtol=1e-5)
    pos = np.tile(a_xyz, (T, 1))
    np.testing.assert_allclose(ball_confidence(CFG, out, torch.as_tensor(pos).unsqueeze(0))[0], 0.7, rtol=1e-5)
    np.testing.assert_allclose(view_agreement(CFG, out, pos), 1.0)
    for where, expected in ((b_xyz, 0.3), (a_xyz, 0.7)):
        in_force = ChunkInForce()
        in_force.remember(10.0, CFG.step_dt_s, np.tile(where, (T, 1)))
        got = chunk_agreement(CFG, out, in_force, 10.0)
        np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_chunk_agreement_uses_the_chunk_in_force_at_the_same_times(grid):
    """A chunk in force from half a chunk ago: the new steps it still covers agree 0.3 (its position is b there), the
    later ones are not covered (1); from a clock that went back, it is forgotten (all 1)."""
    out, a_xyz, b_xyz = _two_modes(grid)
    T, dt = CFG.n_window, CFG.step_dt_s
    in_force = ChunkInForce()
    in_force.remember(10.0, dt, np.tile(b_xyz, (T, 1)))
    shift = 2  # the new chunk starts 2 steps later: its steps 0 .. T-3 are covered
    got = chunk_agreement(CFG, out, in_force, 10.0 + shift * dt)
    expected = np.where(np.arange(T) <= T - 1 - shift, 0.3, 1.0)
    np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert chunk_agreement(CFG, out, in_force, 5.0).tolist() == [1.0] * T
    assert in_force.stamp_s is None


def test_chunk_agreement_interpolates_between_the_steps_in_force(grid):
    """Halfway between a step at a and a step at b the chunk in force is at their midpoint, which holds neither mode
    (they are more than two radii apart): agreement 0 there."""
    out, a_xyz, b_xyz = _two_modes(grid)
    T, dt = CFG.n_window, CFG.step_dt_s
    positions = np.array([a_xyz if i % 2 == 0 else b_xyz for i in range(T)])
    in_force = ChunkInForce()
    in_force.remember(10.0, dt, positions)
    got = chunk_agreement(CFG, out, in_force, 10.0 + 0.5 * dt)
    np.testing.assert_allclose(got[: T - 1], 0.0, atol=1e-9)
    assert got[T - 1] == 1.0  # past the chunk in force


def test_views_that_disagree(grid):
    """Scene view: 0.5 at a. Wrist view: 0.25 at its voxel next to a, 0.25 far away. At a: peak mass 0.75; the
    scene view's share there is 1, the wrist view's 0.5: view agreement 0.5."""
    V, T = grid.voxel_xyz.shape[1], CFG.n_window
    xyz = grid.voxel_xyz[0].double().numpy()
    view1 = _valid_index(grid, 1)
    a, a_near = _seen_by_both(grid)
    far = int(view1[np.argmax(np.linalg.norm(xyz[view1] - xyz[a], axis=1))])
    logits = torch.full((T, V), float("-inf"))
    logits[:, a], logits[:, a_near], logits[:, far] = math.log(0.5), math.log(0.25), math.log(0.25)
    out = _out(grid, logits)
    pos = np.tile(xyz[a], (T, 1))
    np.testing.assert_allclose(ball_confidence(CFG, out, torch.as_tensor(pos).unsqueeze(0))[0], 0.75, rtol=1e-5)
    np.testing.assert_allclose(view_agreement(CFG, out, pos), 0.5, rtol=1e-5)
    measures = step_confidence(CFG, out, pos, np.full(T, 0.75))
    np.testing.assert_allclose(measures.view_agreement, 0.5, rtol=1e-5)
    assert measures.chunk_agreement.tolist() == [1.0] * T  # no chunk in force


def test_worst_step_is_the_minimum_or_for_entropy_the_maximum():
    values = np.array([0.9, 0.2, 0.5, 0.05])
    w = worst_step("peak_mass", values, steps=3)
    assert (w.value, w.step) == (0.2, 1)  # step 3 is beyond the steps checked
    w = worst_step("entropy", values)
    assert (w.value, w.step) == (0.9, 0)
    assert worst_step("view_agreement", np.zeros(0)) is None
    with pytest.raises(ValueError, match="unknown"):
        worst_step("peak", values)


def test_the_policy_fills_every_measure():
    """A random tiny policy: four (T,) arrays in [0, 1]; the second prediction's chunk agreement is measured against
    the first chunk (its positions one step later), and a stamp from before it forgets it."""
    from test_core_policy import _obs

    from para_core.model.policy import Policy

    cfg = V4Config.tiny()
    policy = Policy.random_init(cfg, device="cpu")
    cams, state = _obs(cfg)
    first = policy.predict(cams, state, stamp_s=1.0)
    T = cfg.n_window
    for name in ("confidence", "entropy", "chunk_agreement", "view_agreement"):
        arr = getattr(first, name)
        assert arr.shape == (T,) and np.all((arr >= 0) & (arr <= 1)), name
    assert first.chunk_agreement.tolist() == [1.0] * T  # nothing in force yet
    assert policy.chunk_in_force.stamp_s == 1.0
    second = policy.predict(cams, state, stamp_s=1.0 + cfg.step_dt_s)
    in_force = ChunkInForce()
    in_force.remember(1.0, cfg.step_dt_s, first.positions_world)
    expected = chunk_agreement(cfg, policy.last_output, in_force, 1.0 + cfg.step_dt_s)
    np.testing.assert_allclose(second.chunk_agreement, expected)
    assert second.chunk_agreement[-1] == 1.0  # the first chunk ended before the second's last step
    third = policy.predict(cams, state, stamp_s=0.5)  # the clock went back
    assert third.chunk_agreement.tolist() == [1.0] * T
