"""Episodes on disk and the training dataset: exact round trip, clear errors on bad episodes (never unpickling),
chunk targets at hand-computed frame indices / times, the same preprocessing and target encoding as inference."""

import json
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import default_collate

from para_core.data import synthetic as syn
from para_core.data.dataset import (
    Episode,
    EpisodeDataset,
    find_episode_dirs,
    future_frame_indices,
    make_batch,
    past_frame_indices,
)
from para_core.model.actions import encode_targets
from para_core.model.config import V4Config
from para_core.model.policy import CameraObservation, Policy, RobotState
from para_core.model.voxels import build_voxel_grid

VIEWS = ("scene", "wrist")


def ramp_episode(n=20, fps=30.0, hw=(12, 16), views=VIEWS, seed=0) -> Episode:
    """An episode whose EE x position is 0.3 + 0.01 * frame (and y = 0.001 * frame), so a target's frame can be read
    back from its value; the gripper is frame / (n - 1)."""
    rng = np.random.default_rng(seed)
    H, W = hw
    T_ee = np.tile(np.eye(4), (n, 1, 1))
    T_ee[:, :3, :3] = syn.top_down_rotation()
    T_ee[:, 0, 3] = 0.3 + 0.01 * np.arange(n)
    T_ee[:, 1, 3] = 0.001 * np.arange(n)
    T_ee[:, 2, 3] = 0.1
    K = syn.intrinsics_from_fovy(W, H, 60.0)
    return Episode(
        view_names=views,
        stamps_ns=(10**18 + np.rint(np.arange(n) * 1e9 / fps)).astype(np.int64),
        images={v: rng.integers(0, 256, size=(n, H, W, 3), dtype=np.uint8) for v in views},
        K={v: np.repeat(K[None], n, axis=0) for v in views},
        T_world_cam={
            views[0]: np.repeat(syn.scene_camera_pose()[None], n, axis=0),
            **{v: np.stack([syn.wrist_camera_pose(p) for p in T_ee[:, :3, 3]]) for v in views[1:]},
        },
        T_world_ee=T_ee,
        gripper=np.arange(n) / (n - 1),
        fps=fps,
        meta={"task": "ramp", "n": n},
    )


def _kwargs(ep: Episode) -> dict:
    return dict(
        view_names=ep.view_names,
        stamps_ns=ep.stamps_ns.copy(),
        images=dict(ep.images),
        K=dict(ep.K),
        T_world_cam=dict(ep.T_world_cam),
        T_world_ee=ep.T_world_ee.copy(),
        gripper=ep.gripper.copy(),
        fps=ep.fps,
        meta=dict(ep.meta),
    )


# ----------------------------------------------------------------------------------------------------- Episode
def test_episode_save_load_round_trip_is_exact(tmp_path):
    ep = ramp_episode()
    out = ep.save(tmp_path / "ep0")
    assert sorted(p.name for p in out.iterdir()) == ["arrays.npz", "meta.json"]
    back = Episode.load(out)
    assert back.view_names == ep.view_names and back.fps == ep.fps and back.meta == ep.meta and len(back) == 20
    assert back.stamps_ns.dtype == np.int64 and np.array_equal(back.stamps_ns, ep.stamps_ns)
    assert np.array_equal(back.T_world_ee, ep.T_world_ee) and np.array_equal(back.gripper, ep.gripper)
    for v in VIEWS:
        assert back.images[v].dtype == np.uint8 and np.array_equal(back.images[v], ep.images[v])
        assert np.array_equal(back.K[v], ep.K[v]) and np.array_equal(back.T_world_cam[v], ep.T_world_cam[v])
    header = json.loads((out / "meta.json").read_text())
    assert header["format"] == "para_episode" and header["n_frames"] == 20
    assert header["image_sizes"] == {"scene": [12, 16], "wrist": [12, 16]}


@pytest.mark.parametrize(
    "change, field",
    [
        (lambda k: k.update(stamps_ns=k["stamps_ns"][[0, 2, 1] + list(range(3, 20))]), "stamps_ns"),
        (lambda k: k.update(stamps_ns=np.concatenate([k["stamps_ns"][:1], k["stamps_ns"][:19]])), "stamps_ns"),
        (lambda k: k.update(stamps_ns=k["stamps_ns"].astype(np.float64)), "stamps_ns"),
        (lambda k: k["T_world_ee"].__setitem__((5, 0, 3), np.nan), "T_world_ee"),
        (lambda k: k["T_world_ee"].__setitem__((5, 0, 0), 2.0), "T_world_ee"),
        (lambda k: k.update(T_world_ee=k["T_world_ee"][:19]), "T_world_ee"),
        (lambda k: k["K"].update(wrist=k["K"]["wrist"][:, :2]), "K['wrist']"),
        (lambda k: k["T_world_cam"].update(scene=np.full((20, 4, 4), np.inf)), "T_world_cam['scene']"),
        (lambda k: k["images"].update(scene=k["images"]["scene"].astype(np.float32)), "images['scene']"),
        (lambda k: k["images"].update(scene=k["images"]["scene"][:18]), "images['scene']"),
        (lambda k: k["images"].pop("wrist"), "images"),
        (lambda k: k.update(gripper=k["gripper"] * 100), "gripper"),
        (lambda k: k.update(fps=0.0), "fps"),
        (lambda k: k.update(meta={"obj": object()}), "meta"),
        (lambda k: k.update(view_names=("scene", "wrist/left")), "view_names"),
    ],
)
def test_bad_episodes_raise_value_errors_naming_the_field(change, field):
    kwargs = _kwargs(ramp_episode())
    kwargs["images"] = {v: a.copy() for v, a in kwargs["images"].items()}
    kwargs["K"] = {v: a.copy() for v, a in kwargs["K"].items()}
    kwargs["T_world_cam"] = {v: a.copy() for v, a in kwargs["T_world_cam"].items()}
    change(kwargs)
    with pytest.raises(ValueError, match=re.escape(f"Episode.{field}")):
        Episode(**kwargs)


class _Boom:
    """Unpickling this writes a marker file: proof that the loader never unpickles."""

    marker: Path = Path("/nonexistent")

    def __reduce__(self):
        return (Path.write_text, (self.marker, "unpickled!"))


def test_pickled_object_arrays_are_refused_without_unpickling(tmp_path):
    ep_dir = ramp_episode().save(tmp_path / "ep")
    marker = tmp_path / "marker.txt"
    _Boom.marker = marker
    with np.load(ep_dir / "arrays.npz") as npz:
        arrays = {k: npz[k] for k in npz.files}
    arrays["gripper"] = np.array([_Boom()] * 20, dtype=object)
    np.savez_compressed(ep_dir / "arrays.npz", **arrays)
    with zipfile.ZipFile(ep_dir / "arrays.npz") as zf:  # the file really holds a pickle
        assert b"write_text" in zf.read("gripper.npy")
    with pytest.raises(ValueError, match="pickled object arrays"):
        Episode.load(ep_dir)
    assert not marker.exists()
    rebuild, args = _Boom().__reduce__()  # what unpickling the stored payload would call: the check above can fail
    rebuild(*args)
    assert marker.read_text() == "unpickled!"


def test_load_errors_name_the_problem(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a PARA episode directory"):
        Episode.load(tmp_path)
    ep_dir = ramp_episode().save(tmp_path / "ep")
    header = json.loads((ep_dir / "meta.json").read_text())
    (ep_dir / "meta.json").write_text(json.dumps({**header, "version": 99}))
    with pytest.raises(ValueError, match="version 99"):
        Episode.load(ep_dir)
    (ep_dir / "meta.json").write_text(json.dumps({**header, "view_names": ["scene", "left"]}))
    with pytest.raises(ValueError, match=r"missing array\(s\) \['K.left'"):
        Episode.load(ep_dir)


def test_find_episode_dirs_expands_parents(tmp_path):
    a = ramp_episode(n=3).save(tmp_path / "day1" / "ep_a")
    b = ramp_episode(n=3).save(tmp_path / "day2" / "deep" / "ep_b")
    (tmp_path / "day2" / "notes").mkdir()
    assert find_episode_dirs([tmp_path]) == [a.resolve(), b.resolve()]
    assert find_episode_dirs([a, tmp_path / "day2"]) == [a.resolve(), b.resolve()]
    with pytest.raises(FileNotFoundError, match="holds no PARA episode"):
        find_episode_dirs([tmp_path / "day2" / "notes"])


# ----------------------------------------------------------------------------------------------------- dataset
def test_frame_index_rules_by_hand():
    # n_window 4, stride 4, 20 frames: from frame 13 the chunk is 13, 17, then 21 and 25 repeat the last frame 19.
    assert future_frame_indices(13, 20, 4, 4).tolist() == [13, 17, 19, 19]
    assert future_frame_indices(0, 20, 4, 4).tolist() == [0, 4, 8, 12]
    assert past_frame_indices(13, 2, 4).tolist() == [5, 9]
    assert past_frame_indices(5, 3, 4).tolist() == [0, 0, 1]


def test_dataset_targets_at_hand_computed_frames(tmp_path):
    cfg = V4Config.tiny()  # n_window 4, frame_stride 4, mv_past_n 2, dataset_fps 30
    ds = EpisodeDataset([ramp_episode().save(tmp_path / "ep")], cfg)
    assert len(ds) == 20
    s = ds[13]
    assert s["frame_index"].item() == 13 and s["episode_index"].item() == 0
    frames = (s["target_positions_world"][:, 0].double() - 0.3) / 0.01  # x = 0.3 + 0.01 * frame
    assert np.allclose(frames.numpy(), [13, 17, 19, 19], atol=1e-4)
    assert np.allclose(s["target_gripper"].numpy(), np.array([13, 17, 19, 19]) / 19, atol=1e-6)
    past = (s["past_positions_world"][:, 0].double() - 0.3) / 0.01
    assert np.allclose(past.numpy(), [5, 9], atol=1e-4)
    assert np.allclose(((ds[1]["past_positions_world"][:, 0].double() - 0.3) / 0.01).numpy(), [0, 0], atol=1e-4)
    assert s["images"].shape == (2, 3, 64, 64) and s["images"].dtype == torch.uint8
    assert np.allclose(s["T_world_ee"][:3, 3].numpy(), [0.43, 0.013, 0.1], atol=1e-6)


def test_dataset_preprocessing_and_targets_match_policy_and_actions(tmp_path):
    """The batch a trainer sees equals what Policy.preprocess makes of the same raw frame, and its targets equal
    para_core.model.actions.encode_targets of the hand-picked future frames."""
    cfg = V4Config.tiny()
    ep = syn.synthetic_episode(cfg, np.random.default_rng(3), n_frames=24)
    ds = EpisodeDataset([ep.save(tmp_path / "ep")], cfg)
    ts = [0, 11, 22]
    inputs, targets = make_batch(default_collate([ds[t] for t in ts]), cfg, "cpu")
    policy = Policy.random_init(cfg, device="cpu")
    for b, t in enumerate(ts):
        cams = [CameraObservation(ep.images[v][t], ep.K[v][t], ep.T_world_cam[v][t]) for v in cfg.view_names]
        past = ep.T_world_ee[[max(t - 8, 0), max(t - 4, 0)], :3, 3]
        ref = policy.preprocess(cams, RobotState(ep.T_world_ee[t], float(ep.gripper[t]), past))
        assert torch.allclose(inputs.images[b], ref.images[0], atol=1e-6)
        assert torch.allclose(inputs.K_img[b], ref.K_img[0]) and torch.allclose(
            inputs.T_world_cam[b], ref.T_world_cam[0]
        )
        assert torch.allclose(inputs.past_positions_world[b], ref.past_positions_world[0])
        assert torch.allclose(inputs.T_world_ee[b], ref.T_world_ee[0]) and inputs.gripper[b] == ref.gripper[0]
    fut = np.stack([[min(t + 4 * i, 23) for i in range(4)] for t in ts])  # (3, 4) frames by hand
    grid = build_voxel_grid(cfg, inputs.K_img, inputs.T_world_cam)
    ref_t = encode_targets(
        cfg,
        grid,
        torch.tensor(ep.T_world_ee[fut, :3, 3], dtype=torch.float32),
        ep.T_world_ee[fut, :3, :3],
        ep.gripper[fut],
    )
    for name in ("voxel_index", "voxel_weight", "teacher_voxel", "gripper_bin", "rotation_bins"):
        assert torch.equal(getattr(targets, name), getattr(ref_t, name)), name
    assert (targets.voxel_weight.sum(-1) > 0).all(), "synthetic targets must be visible in some view"


def test_resized_intrinsics_track_the_drawn_point(tmp_path):
    """Independent check of resize + K rescale: the green disc drawn at the tool's projection in the raw image
    lands, after the dataset's resize, at the projection through the rescaled K (cv2.projectPoints)."""
    import cv2

    cfg = V4Config.tiny(img_size=128)
    ep = syn.synthetic_episode(cfg, np.random.default_rng(5), n_frames=4, image_hw=(240, 400))
    ds = EpisodeDataset([ep.save(tmp_path / "ep")], cfg)
    s = ds[0]
    img = s["images"][0].permute(1, 2, 0).numpy().astype(np.int32)  # scene view (S, S, 3)
    green = (img[..., 1] > 150) & (img[..., 0] < 120)
    rows, cols = np.nonzero(green)
    assert rows.size > 3
    K = s["K_img"][0].double().numpy()
    assert np.allclose(K, np.diag([128 / 400, 128 / 240, 1.0]) @ ep.K["scene"][0])
    T_cam_world = np.linalg.inv(ep.T_world_cam["scene"][0])
    rvec, _ = cv2.Rodrigues(T_cam_world[:3, :3])
    uv, _ = cv2.projectPoints(ep.T_world_ee[0, :3, 3][None], rvec, T_cam_world[:3, 3], K, None)
    centroid = np.array([cols.mean() + 0.5, rows.mean() + 0.5])  # pixel centres at +0.5
    assert np.abs(centroid - uv.reshape(2)).max() < 0.5, (centroid, uv)


def test_stamp_resampling_when_episode_fps_differs(tmp_path):
    cfg = V4Config.tiny()  # step = 4 / 30 s
    # 15 fps: one chunk step is exactly 2 frames; positions are linear in time so interpolation is exact.
    ds = EpisodeDataset([ramp_episode(fps=15.0).save(tmp_path / "e15")], cfg)
    assert ds.episodes[0].time_base == "stamps"
    s = ds[7]
    assert np.allclose(((s["target_positions_world"][:, 0].double() - 0.3) / 0.01).numpy(), [7, 9, 11, 13], atol=1e-4)
    assert np.allclose(((s["past_positions_world"][:, 0].double() - 0.3) / 0.01).numpy(), [3, 5], atol=1e-4)
    # 20 fps: a step is 8/3 frames; frame of step i = 16 + 8i/3, clamped to the last frame 19.
    ds = EpisodeDataset([ramp_episode(fps=20.0).save(tmp_path / "e20")], cfg)
    s = ds[16]
    want = np.minimum(16 + np.arange(4) * 8 / 3, 19)
    assert np.allclose(((s["target_positions_world"][:, 0].double() - 0.3) / 0.01).numpy(), want, atol=1e-3)
    assert np.allclose(s["target_gripper"].numpy(), want / 19, atol=1e-5)
    # forcing frame indexing ignores the rate mismatch (with a warning)
    with pytest.warns(UserWarning, match="20 Hz"):
        ds = EpisodeDataset([tmp_path / "e20"], cfg, time_base="index")
    assert np.allclose(
        ((ds[16]["target_positions_world"][:, 0].double() - 0.3) / 0.01).numpy(), [16, 19, 19, 19], atol=1e-4
    )


def timed_episode(times_s, fps_label=30.0, hw=(8, 8), views=VIEWS) -> Episode:
    """Frames at the given times (seconds after 10**18 ns), labelled ``fps_label`` (what the old extractor wrote
    whatever the real rate). Motion is linear in time, so any resampling in time is exact: x = 0.3 + 0.2 * tau,
    y = 0.05 * tau, z = 0.1, rotation = top_down @ Rz(0.5 * tau), gripper = tau / 2 (tau = the given time, s)."""
    tau = np.asarray(times_s, dtype=np.float64)
    n = tau.size
    H, W = hw
    T_ee = np.tile(np.eye(4), (n, 1, 1))
    T_ee[:, 0, 3] = 0.3 + 0.2 * tau
    T_ee[:, 1, 3] = 0.05 * tau
    T_ee[:, 2, 3] = 0.1
    T_ee[:, :3, :3] = syn.top_down_rotation() @ np.stack([_rot_z(0.5 * a) for a in tau])
    K = syn.intrinsics_from_fovy(W, H, 60.0)
    return Episode(
        view_names=views,
        stamps_ns=(10**18 + np.rint(tau * 1e9)).astype(np.int64),
        images={v: np.zeros((n, H, W, 3), np.uint8) for v in views},
        K={v: np.repeat(K[None], n, axis=0) for v in views},
        T_world_cam={v: np.repeat(syn.scene_camera_pose()[None], n, axis=0) for v in views},
        T_world_ee=T_ee,
        gripper=tau / 2.0,
        fps=fps_label,
    )


def _rot_z(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _assert_targets_at_times(sample, tau_targets, tau_past):
    """Targets of one sample equal the motion of ``timed_episode`` at the given times (s)."""
    tau_targets, tau_past = np.asarray(tau_targets), np.asarray(tau_past)
    pos = sample["target_positions_world"].double().numpy()
    np.testing.assert_allclose(pos[:, 0], 0.3 + 0.2 * tau_targets, atol=1e-6)
    np.testing.assert_allclose(pos[:, 1], 0.05 * tau_targets, atol=1e-6)
    np.testing.assert_allclose(sample["target_gripper"].double().numpy(), tau_targets / 2.0, atol=1e-6)
    want_rot = np.stack([syn.top_down_rotation() @ _rot_z(0.5 * a) for a in tau_targets])
    np.testing.assert_allclose(sample["target_rotations_world"].double().numpy(), want_rot, atol=1e-5)
    np.testing.assert_allclose(sample["past_positions_world"][:, 0].double().numpy(), 0.3 + 0.2 * tau_past, atol=1e-6)


def test_10hz_episode_labelled_30fps_gets_targets_4_30_s_apart(tmp_path):
    """A 10 Hz recording that says fps=30 (the old extractor's label): frame indexing would put step i at 0.4 * i s;
    the targets must be at i * 4 / 30 s after the frame (hand-computed), i.e. resampled by stamps."""
    cfg = V4Config.tiny()  # n_window 4, frame_stride 4, dataset_fps 30, mv_past_n 2
    ds = EpisodeDataset([timed_episode(np.arange(20) * 0.1).save(tmp_path / "e10")], cfg)
    assert ds.episodes[0].time_base == "stamps"
    # frame 5 (tau 0.5 s): steps at 0.5, 0.5 + 4/30, 0.5 + 8/30, 0.5 + 12/30 s; past at 0.5 - 8/30, 0.5 - 4/30 s
    _assert_targets_at_times(ds[5], [0.5, 0.63333333, 0.76666667, 0.9], [0.23333333, 0.36666667])
    # frame 18 (tau 1.8 s): 1.9333 s and later are past the last frame (1.9 s) -> the last pose repeats
    _assert_targets_at_times(ds[18], [1.8, 1.9, 1.9, 1.9], [1.53333333, 1.66666667])


def test_30hz_episode_with_dropped_frames_is_resampled_by_stamps(tmp_path):
    """30 Hz frames with 7, 8 and 15 dropped: frame index 9 is k = 11 and index 13 is k = 16, so frame indexing would
    shift the targets; they must land at exactly i * 4 / 30 s after the frame."""
    cfg = V4Config.tiny()
    ks = np.array([k for k in range(30) if k not in (7, 8, 15)])
    ds = EpisodeDataset([timed_episode(ks / 30.0).save(tmp_path / "e30")], cfg)
    assert ds.episodes[0].time_base == "stamps"
    # frame index 5 is k = 5: steps at k = 5, 9, 13, 17 (in units of 1/30 s), past at k = -3 -> clamped 0, and 1
    _assert_targets_at_times(ds[5], np.array([5, 9, 13, 17]) / 30.0, np.array([0, 1]) / 30.0)
    # frame index 7 is k = 9: steps at k = 9, 13, 17, 21; past at k = 1, 5
    _assert_targets_at_times(ds[7], np.array([9, 13, 17, 21]) / 30.0, np.array([1, 5]) / 30.0)


def test_auto_time_base_rule_by_hand(tmp_path):
    from para_core.data.dataset import frame_indexing_matches_stamps

    cfg = V4Config.tiny()
    rng = np.random.default_rng(0)
    jitter = np.arange(20) / 30.0 + rng.uniform(-0.05, 0.05, 20) / 30.0  # spacings within +-10 %, mean within 1 %
    assert frame_indexing_matches_stamps((jitter * 1e9).astype(np.int64), 30.0)[0]
    ds = EpisodeDataset([timed_episode(jitter).save(tmp_path / "jit")], cfg)
    assert ds.episodes[0].time_base == "index"  # jitter only: step i is frame t + 4 i
    _assert_targets_at_times(ds[2], jitter[[2, 6, 10, 14]], jitter[[0, 0]])  # past: frames -6, -2 -> clamped 0
    # 25 Hz: every spacing is +20 % (within +-25 %) but the mean rate is off -> stamps
    ok, why = frame_indexing_matches_stamps((np.arange(20) * 4e7).astype(np.int64), 30.0)
    assert not ok and "25 Hz" in why
    ds = EpisodeDataset([timed_episode(np.arange(20) / 25.0).save(tmp_path / "e25")], cfg)
    assert ds.episodes[0].time_base == "stamps"
    # frame 3 (0.12 s): steps at 0.12 + 4 i / 30 s; past at 0.12 - 8/30 and 0.12 - 4/30 s, both before 0 -> 0
    _assert_targets_at_times(ds[3], 0.12 + np.arange(4) * 4 / 30, [0.0, 0.0])
    # one spacing of 1.3 periods -> stamps; labelled fps is irrelevant either way
    times = np.arange(20) / 30.0
    times[10:] += 0.3 / 30.0
    ok, why = frame_indexing_matches_stamps((times * 1e9).astype(np.int64), 30.0)
    assert not ok and "after frame 9" in why
    assert frame_indexing_matches_stamps(np.array([5], np.int64), 30.0)[0]  # one frame: nothing to disagree
    # forcing frame indexing on a mismatching episode warns and names the problem
    with pytest.warns(UserWarning, match="dropped frame or a pause"):
        EpisodeDataset([timed_episode(times).save(tmp_path / "gap")], cfg, time_base="index")


def test_dataset_errors_and_options(tmp_path):
    cfg = V4Config.tiny()
    ep_dir = ramp_episode(views=("scene", "left")).save(tmp_path / "ep")
    with pytest.raises(ValueError, match=r"missing \['wrist'\]"):
        EpisodeDataset([ep_dir], cfg)
    with pytest.raises(ValueError, match="time_base"):
        EpisodeDataset([ep_dir], cfg, time_base="frames")
    # a single-view model can train on a two-view episode (views picked by name)
    ds = EpisodeDataset([ep_dir], cfg.replace(view_names=("left",)))
    assert ds[0]["images"].shape[0] == 1


def test_memory_mapped_cache_and_colour_jitter(tmp_path):
    cfg = V4Config.tiny()
    ep_dir = ramp_episode().save(tmp_path / "ep")
    plain = EpisodeDataset([ep_dir], cfg)
    cached = EpisodeDataset([ep_dir], cfg, cache_dir=tmp_path / "cache")
    again = EpisodeDataset([ep_dir], cfg, cache_dir=tmp_path / "cache")
    assert isinstance(again.episodes[0].images[0], np.memmap)
    assert len(list((tmp_path / "cache").rglob("*.npy"))) == 2
    for i in (0, 19):
        assert torch.equal(plain[i]["images"], cached[i]["images"])
        assert torch.equal(plain[i]["images"], again[i]["images"])
    torch.manual_seed(0)
    jit = EpisodeDataset([ep_dir], cfg, augment=True, jitter_strength=0.3)
    a, b = plain[3], jit[3]
    assert b["images"].dtype == torch.uint8 and b["images"].shape == a["images"].shape
    assert not torch.equal(a["images"], b["images"])
    assert torch.equal(a["target_positions_world"], b["target_positions_world"])  # geometry is never augmented
    assert torch.equal(a["K_img"], b["K_img"])
