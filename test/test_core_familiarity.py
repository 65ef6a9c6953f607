"""The familiarity memory (para_core.model.familiarity): distances against a brute-force loop, the k-centre selection
against an exhaustive search, novelty and limits against hand-computed figures, files, and the policy's novelty ratio
against the model's own patch features."""

import itertools
import json

import numpy as np
import pytest
import torch

from para_core.data import synthetic as syn
from para_core.model.config import V4Config
from para_core.model.familiarity import (
    FAMILIARITY_JSON,
    Familiarity,
    FamiliaritySettings,
    build_familiarity,
    has_familiarity,
    k_centre_selection,
    nearest_distances,
    windowed_median,
)
from para_core.model.policy import CameraObservation, Policy, RobotState
from para_ros.ros_io.synthetic_rig import synthetic_images

torch.set_num_threads(1)


def test_nearest_distances_match_a_brute_force_loop():
    rng = np.random.default_rng(0)
    q, m = rng.normal(size=(37, 5)), rng.normal(size=(23, 5))
    want = [min(np.linalg.norm(a - b) for b in m) for a in q]
    got = nearest_distances(torch.tensor(q), torch.tensor(m)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_k_centre_selection_is_within_twice_the_best_covering_radius():
    """Gonzalez's greedy selection covers every point within twice the radius of the best choice (found here by
    trying every subset); and it keeps everything when asked for more than there is."""
    rng = np.random.default_rng(1)
    pts = torch.tensor(rng.normal(size=(10, 2)))

    def radius(idx):
        return float(torch.cdist(pts, pts[list(idx)]).min(dim=1).values.max())

    for m in (2, 3, 4):
        best = min(radius(c) for c in itertools.combinations(range(10), m))
        chosen = k_centre_selection(pts, m, seed=0)
        assert len(set(chosen.tolist())) == m
        assert radius(chosen.tolist()) <= 2 * best + 1e-9
    assert k_centre_selection(pts, 20).tolist() == list(range(10))


def test_windowed_median_by_hand():
    np.testing.assert_allclose(windowed_median([1, 5, 2, 8, 3], 3), [1, 3, 2, 5, 3])


def memory_of(vectors, views=("scene", "wrist"), limits=(1.0, 1.0), top=2, window=1):
    return Familiarity(
        views,
        {v: torch.tensor(vectors, dtype=torch.float32) for v in views},
        dict(zip(views, limits)),
        FamiliaritySettings(memory_size=16, candidates=16, top_patches=top, window_frames=window),
    )


def test_a_views_novelty_is_the_mean_of_its_most_novel_patches():
    """Memory {0, (3, 4)}: patches at distances 0, 1, 2 and 5 from it; the two most novel average (5 + 2) / 2."""
    fam = memory_of([[0.0, 0.0], [3.0, 4.0]], limits=(2.0, 0.5))
    patches = torch.tensor([[0.0, 0.0], [1.0, 0.0], [3.0, 6.0], [-3.0, -4.0]]).T.reshape(2, 2, 2)  # (F, h, w)
    feats = torch.stack([patches, torch.zeros(2, 2, 2)])  # (N, F, h, w): the wrist view all at a memory row
    novelty = fam.novelty(feats)
    np.testing.assert_allclose(novelty, [3.5, 0.0], atol=1e-6)
    np.testing.assert_allclose(fam.ratios(novelty), [1.75, 0.0], atol=1e-6)
    with pytest.raises(ValueError, match="expected"):
        fam.novelty(feats[:1])
    with pytest.raises(ValueError, match="width 3"):
        fam.novelty(torch.zeros(2, 3, 2, 2))


def test_the_limits_are_the_quantile_of_the_held_out_windowed_novelty_times_the_margin():
    """One-patch frames on a line: the memory is the training frames' values; the held-out episodes' novelty is their
    distance to the nearest of them, medianed over 2 frames within each episode, and the limit its quantile x 1.1."""
    views = ("scene", "wrist")
    train = [torch.full((2, 1, 1, 1), float(x)) for x in (0.0, 1.0, 2.0)]
    heldout = [
        [torch.full((2, 1, 1, 1), x) for x in (2.5, 4.0, 1.0)],
        [torch.full((2, 1, 1, 1), x) for x in (6.0, 0.2)],
    ]
    settings = FamiliaritySettings(memory_size=16, candidates=16, top_patches=1, window_frames=2, limit_margin=1.1)
    fam = build_familiarity(iter(train), iter(heldout), views, settings, model_id="m")
    novelty = [[0.5, 2.0, 0.0], [4.0, 0.2]]  # distance to {0, 1, 2}
    windowed = np.concatenate([windowed_median(n, 2) for n in novelty])  # 0.5 1.25 1.0 | 4.0 2.1
    want = float(np.quantile(windowed, settings.limit_quantile) * 1.1)
    assert fam.limits == pytest.approx({"scene": want, "wrist": want})
    assert fam.source["heldout_frames"] == 5 and fam.source["memory_frames"] == 3
    with pytest.raises(ValueError, match="no held-out"):
        build_familiarity(iter(train), iter([]), views, settings)


def test_files_round_trip_and_bad_files_are_named(tmp_path):
    fam = memory_of([[0.0, 1.0], [2.0, 3.0]], limits=(0.7, 1.3))
    fam.model_id = "para_v4:x"
    fam.save(tmp_path)
    assert has_familiarity(tmp_path)
    back = Familiarity.load(tmp_path)
    assert back.limits == fam.limits and back.model_id == "para_v4:x" and back.settings == fam.settings
    assert torch.equal(back.memory["wrist"], fam.memory["wrist"])
    meta = json.loads((tmp_path / FAMILIARITY_JSON).read_text())
    (tmp_path / FAMILIARITY_JSON).write_text(json.dumps({**meta, "format": "other"}))
    with pytest.raises(ValueError, match="format 'other'"):
        Familiarity.load(tmp_path)
    (tmp_path / FAMILIARITY_JSON).write_text("{")
    with pytest.raises(ValueError, match="not JSON"):
        Familiarity.load(tmp_path)
    with pytest.raises(ValueError, match="missing"):
        Familiarity.load(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="positive"):
        memory_of([[0.0]], limits=(0.0, 1.0))


def observation(policy, images):
    ee = np.array([0.3, 0.0, 0.2])
    T_ee = np.eye(4)
    T_ee[:3, :3] = syn.top_down_rotation()
    T_ee[:3, 3] = ee
    K = syn.intrinsics_from_fovy(64, 64, 60.0)
    poses = {"scene": syn.scene_camera_pose(), "wrist": syn.wrist_camera_pose(ee)}
    cams = [CameraObservation(images[v], K, poses[v]) for v in policy.view_names]
    return cams, RobotState(T_ee, 0.8, np.repeat(ee[None], policy.config.mv_past_n, 0))


def test_the_policy_measures_novelty_with_its_own_patch_features_and_an_unseen_patch_stands_out():
    """A tiny policy remembers the patches of one synthetic observation: the same observation is novelty 0 in both
    views; a green square painted into the wrist image moves only the wrist view, by exactly the distance of its
    patch features (recomputed here from the model) to the memory. The patch features interpolate to the model's
    feature maps, so the forward's output is the one it was."""
    policy = Policy.random_init(V4Config.tiny(), device="cpu", seed=2)
    images = synthetic_images(3, 64)
    cams, state = observation(policy, images)
    inputs = policy.preprocess(cams, state)
    with torch.no_grad():
        patches, _ = policy.model.patch_features(inputs.images)  # (1, N, F, h, w)
        maps, _ = policy.model.image_features(inputs.images)
    torch.testing.assert_close(policy.model.interpolate_to_prediction_grid(patches), maps)
    memory = {v: patches[0, i].flatten(1).T.contiguous() for i, v in enumerate(policy.view_names)}
    settings = FamiliaritySettings(memory_size=16, candidates=16, top_patches=2, window_frames=1)
    policy.set_familiarity(
        Familiarity(policy.view_names, memory, {"scene": 1.0, "wrist": 1.0}, settings, policy.model_id)
    )
    out = policy.predict(cams, state)
    np.testing.assert_allclose(out.novelty_ratio, [0.0, 0.0], atol=1e-4)
    odd = {**images, "wrist": images["wrist"].copy()}
    odd["wrist"][8:40, 8:40] = (0, 255, 0)
    cams2, _ = observation(policy, odd)
    out2 = policy.predict(cams2, state)
    with torch.no_grad():
        p2, _ = policy.model.patch_features(policy.preprocess(cams2, state).images)
    d = nearest_distances(p2[0, 1].flatten(1).T, memory["wrist"])
    assert out2.novelty_ratio[0] == pytest.approx(0.0, abs=1e-4)
    assert out2.novelty_ratio[1] == pytest.approx(float(d.topk(2).values.mean()), rel=1e-4)
    assert out2.novelty_ratio[1] > 0.1
    with pytest.raises(ValueError, match="another model"):
        policy.set_familiarity(Familiarity(policy.view_names, memory, {"scene": 1.0, "wrist": 1.0}, settings, "other"))
    with pytest.raises(ValueError, match="views"):
        policy.set_familiarity(Familiarity(("wrist", "scene"), memory, {"scene": 1.0, "wrist": 1.0}, settings))


def test_para_train_familiarity_builds_the_memory_the_policy_then_loads_and_refuses_to_overwrite(tmp_path, capsys):
    """``para-train familiarity`` on six synthetic episodes of a tiny checkpoint: the memory holds the training
    frames' patches (the held-out two fit the limits), ``Policy.from_checkpoint`` loads it and measures a training
    frame as familiar; run again it refuses to overwrite, with --force it rebuilds; a folder without episodes and an
    out-of-range fraction are refused by name."""
    from core_fixtures import tiny_checkpoint

    from para_core.data.synthetic import synthetic_episode
    from para_core.model.familiarity import FAMILIARITY_WEIGHTS
    from para_core.train.cli import main

    ckpt = tiny_checkpoint(tmp_path / "ckpt")
    cfg = V4Config.tiny(view_names=("scene", "wrist"))
    rng = np.random.default_rng(0)
    for i in range(6):
        synthetic_episode(cfg, rng, n_frames=8).save(tmp_path / "eps" / f"episode_{i:06d}")
    args = ["familiarity", "--checkpoint", str(ckpt), "--data", str(tmp_path / "eps"), "--heldout-fraction", "0.34"]
    args += ["--memory-size", "64", "--candidates", "256", "--threads", "1", "--no-progress"]
    assert main(args) == 0
    assert "32 frames in the memory, 2 held-out episodes (16 frames)" in capsys.readouterr().out
    policy = Policy.from_checkpoint(ckpt, device="cpu")
    fam = policy.familiarity
    assert fam is not None and fam.source["memory_frames"] == 4 * 8 and fam.source["heldout_episodes"] == 2
    assert all(fam.memory[v].shape == (64, cfg.feat_dim) for v in policy.view_names)
    with pytest.raises(SystemExit):
        main(args)
    assert "already holds a familiarity memory" in capsys.readouterr().err
    mtime = (ckpt / FAMILIARITY_WEIGHTS).stat().st_mtime_ns
    assert main([*args, "--force"]) == 0 and (ckpt / FAMILIARITY_WEIGHTS).stat().st_mtime_ns >= mtime
    with pytest.raises(SystemExit):
        main(["familiarity", "--checkpoint", str(ckpt), "--data", str(tmp_path / "nothing"), "--force"])
    assert "nothing does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit):
        main(["familiarity", "--checkpoint", str(ckpt), "--data", str(tmp_path / "empty"), "--force"])
    assert "episode" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main([*args, "--force", "--heldout-fraction", "1.5"])
    assert "--heldout-fraction 1.5" in capsys.readouterr().err
    # limits from other episodes (a rig's own recordings): all of --data in the memory
    for i in range(2):
        synthetic_episode(cfg, rng, n_frames=8).save(tmp_path / "rig" / f"episode_{i:06d}")
    assert main([*args, "--force", "--heldout", str(tmp_path / "rig")]) == 0
    back = Familiarity.load(ckpt)
    assert back.source["memory_frames"] == 6 * 8 and back.source["heldout_frames"] == 2 * 8
    with pytest.raises(SystemExit):
        main([*args, "--force", "--heldout", str(tmp_path / "eps" / "episode_000001")])
    assert "also in --data" in capsys.readouterr().err


def test_the_inference_nodes_policy_choice_takes_a_memory_from_elsewhere_and_refuses_a_foreign_one(tmp_path):
    """``familiarity_memory``: a memory in its own folder is used (the checkpoint has none); one built for another
    checkpoint, a missing one, and one without a checkpoint are refused by name."""
    from core_fixtures import tiny_checkpoint

    from para_ros.inference.policy_choice import PolicyChoice
    from para_ros.nodes.inference_node import PARAMETERS

    ckpt = tiny_checkpoint(tmp_path / "ckpt")
    p = {param.name: param.default for param in PARAMETERS.params}
    plain = PolicyChoice.from_parameters({**p, "checkpoint": str(ckpt), "device": "cpu"}).load(warn=print)
    assert plain.familiarity is None
    memory = {v: torch.zeros(4, plain.config.feat_dim) for v in plain.view_names}
    settings = FamiliaritySettings(memory_size=16, candidates=16)
    Familiarity(plain.view_names, memory, {"scene": 1.0, "wrist": 2.0}, settings, plain.model_id).save(tmp_path / "m")
    Familiarity(plain.view_names, memory, {"scene": 1.0, "wrist": 2.0}, settings, "other:x").save(tmp_path / "o")
    choice = {**p, "checkpoint": str(ckpt), "device": "cpu"}
    policy = PolicyChoice.from_parameters({**choice, "familiarity_memory": str(tmp_path / "m")}).load(warn=print)
    assert policy.familiarity is not None and policy.familiarity.limits["wrist"] == 2.0
    with pytest.raises(ValueError, match="built for checkpoint 'other:x'"):
        PolicyChoice.from_parameters({**choice, "familiarity_memory": str(tmp_path / "o")}).load(warn=print)
    with pytest.raises(ValueError, match="is missing"):
        PolicyChoice.from_parameters({**choice, "familiarity_memory": str(tmp_path / "none")}).load(warn=print)
    with pytest.raises(ValueError, match="needs a checkpoint"):
        PolicyChoice.from_parameters({**p, "device": "cpu", "familiarity_memory": str(tmp_path / "m")}).load(warn=print)
