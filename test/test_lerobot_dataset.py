"""LeRobotDataset v3 export/import with LeRobot's own classes, joint-space YAM datasets through a calibration file and
the YAM's kinematics (checked against the MuJoCo simulator), and the bad-input messages."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

pytest.importorskip("lerobot")
pytest.importorskip("av")

sys.path.insert(0, str(Path(__file__).parent))
from bag_fixtures import SyntheticBagSpec, write_synthetic_bag  # noqa: E402

from para_core.calibration.board import CharucoBoardSpec  # noqa: E402
from para_core.calibration.calibration_file import (  # noqa: E402
    CalibrationFile,
    CameraCalibration,
    load_calibration,
    save_calibration,
)
from para_core.data.dataset import Episode, EpisodeDataset  # noqa: E402
from para_core.data.lerobot_compat import lerobot_dataset_classes, video_backend  # noqa: E402
from para_core.data.lerobot_dataset import (  # noqa: E402
    YAM_GRIPPER_NAME,
    YAM_JOINT_NAMES,
    LeRobotDataError,
    LeRobotImportOptions,
    convert_for_training,
    image_error_stats,
    read_lerobot_episodes,
)
from para_ros.commands.bag import main as bag_main  # noqa: E402
from para_ros.observation.camera_model import para_K_to_ros  # noqa: E402

# Video codec tolerance of the round trip (libsvtav1 at LeRobot's settings, crf 30, on the fixture's 48x36 images).
MAX_MEAN_ABS_ERROR = 3.0  # grey levels, mean over all pixels
MIN_PSNR_DB = 30.0
BOARD = CharucoBoardSpec(squares_x=5, squares_y=7, square_m=0.03, marker_m=0.022, dictionary="DICT_5X5_100")


@pytest.fixture(scope="module")
def recording(tmp_path_factory):
    root = tmp_path_factory.mktemp("lerobot")
    bag = write_synthetic_bag(root / "bag", SyntheticBagSpec(duration_s=1.0, image_wh=(48, 36)))
    assert bag_main(["extract", str(bag), "--out", str(root / "extracted"), "--fps", "0", "--quiet"]) == 0
    assert (
        bag_main(
            [
                "export-lerobot",
                str(bag),
                "--out",
                str(root / "ds"),
                "--task",
                "pick up the cube",
                "--fps",
                "0",
                "--quiet",
            ]
        )
        == 0
    )
    return root


def test_export_is_a_lerobot_v3_dataset_that_lerobot_opens(recording):
    LeRobotDataset, LeRobotDatasetMetadata, version = lerobot_dataset_classes()
    ref = Episode.load(recording / "extracted")
    meta = LeRobotDatasetMetadata("local/para_export", root=recording / "ds")
    assert meta.info["codebase_version"] == version == "v3.0"
    assert meta.total_episodes == 1 and meta.total_frames == len(ref) and meta.fps == round(ref.fps)
    assert set(meta.video_keys) == {"observation.images.scene", "observation.images.wrist"}
    for key in (
        "observation.state",
        "action",
        "observation.tool_pose",
        "observation.cameras.scene.K",
        "observation.cameras.wrist.T_base_cam",
        "para.stamp",
    ):
        assert key in meta.features, key
    assert meta.info["para"]["view_names"] == ["scene", "wrist"]
    scene = meta.info["para"]["calibration"]["cameras"]["scene"]
    assert scene["static"] and np.allclose(scene["T_parent_cam"], ref.T_world_cam["scene"][0])
    ds = LeRobotDataset("local/para_export", root=recording / "ds", video_backend=video_backend())
    assert len(ds) == len(ref)
    item = ds[3]
    assert item["task"] == "pick up the cube"
    assert float(item["timestamp"]) == pytest.approx(3 / meta.fps)
    assert tuple(item["observation.images.wrist"].shape) == (3, 36, 48)
    # observation.state: tool pose (xyz + quaternion) + gripper; action: the next frame's state
    state = item["observation.state"].numpy()
    assert np.allclose(state[:3], ref.T_world_ee[3][:3, 3], atol=1e-6) and state[7] == pytest.approx(ref.gripper[3])
    assert np.allclose(item["action"].numpy()[:3], ref.T_world_ee[4][:3, 3], atol=1e-6)
    # the import decodes each episode in one pass: the same frames LeRobot's reader gives one by one
    lerobot_rgb = (item["observation.images.wrist"].permute(1, 2, 0).numpy() * 255.0).round().astype(int)
    assert np.abs(read_lerobot_episodes(recording / "ds")[0].images["wrist"][3] - lerobot_rgb).max() <= 2
    # LeRobot's item access hands out float32 tensors; the table keeps float64 (the import reads it, exact below)
    assert np.allclose(
        item["observation.cameras.wrist.T_base_cam"].numpy().reshape(4, 4), ref.T_world_cam["wrist"][3], atol=1e-6
    )
    table = ds.hf_dataset.with_format(None)
    assert np.array_equal(
        np.asarray(table[3]["observation.cameras.wrist.T_base_cam"]).reshape(4, 4), ref.T_world_cam["wrist"][3]
    )


def test_training_sees_the_same_episodes_as_extract(recording, tmp_path):
    ref = Episode.load(recording / "extracted")
    dirs = convert_for_training([recording / "ds"], tmp_path / "conv")
    (ep_dir,) = [p for p in sorted(dirs[0].iterdir()) if p.is_dir()]
    got = Episode.load(ep_dir)
    assert np.array_equal(got.stamps_ns, ref.stamps_ns)
    assert np.array_equal(got.T_world_ee, ref.T_world_ee) and np.array_equal(got.gripper, ref.gripper)
    for v in ref.view_names:
        assert np.array_equal(got.K[v], ref.K[v]) and np.array_equal(got.T_world_cam[v], ref.T_world_cam[v])
        err = image_error_stats(got.images[v], ref.images[v])
        assert err["mean_abs"] <= MAX_MEAN_ABS_ERROR and err["psnr_db"] >= MIN_PSNR_DB, (v, err)
    from para_core.model.config import V4Config

    cfg = V4Config.preset("tiny")
    a, b = EpisodeDataset([ep_dir], cfg), EpisodeDataset([recording / "extracted"], cfg)
    assert len(a) == len(b)
    for i in (0, len(a) // 2, len(a) - 1):
        sa, sb = a[i], b[i]
        for key in ("T_world_ee", "T_world_cam", "K_img", "target_positions_world", "target_gripper"):
            assert np.array_equal(sa[key].numpy(), sb[key].numpy()), key


def test_para_train_recognises_a_lerobot_dataset(recording, tmp_path, capsys):
    from para_core.train.cli import main as train_main

    out = tmp_path / "run"
    assert train_main(["--data", str(recording / "ds"), "--preset", "tiny", "--out", str(out), "--print-config"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert len(printed["episodes"]) == 1 and "lerobot_episodes" in printed["episodes"][0]


def test_export_refuses_to_overwrite_without_force(recording):
    stamp = (recording / "ds" / "meta" / "info.json").stat().st_mtime_ns
    assert (
        bag_main(
            ["export-lerobot", str(recording / "extracted"), "--out", str(recording / "ds"), "--task", "x", "--quiet"]
        )
        == 2
    )
    assert (recording / "ds" / "meta" / "info.json").stat().st_mtime_ns == stamp


def _copy(recording, tmp_path) -> Path:
    dst = tmp_path / "ds"
    shutil.copytree(recording / "ds", dst)
    return dst


def test_another_version_is_named(recording, tmp_path):
    ds = _copy(recording, tmp_path)
    info = json.loads((ds / "meta" / "info.json").read_text())
    info["codebase_version"] = "v2.1"
    (ds / "meta" / "info.json").write_text(json.dumps(info))
    with pytest.raises(LeRobotDataError, match=r"version 'v2.1'.*v3.0"):
        read_lerobot_episodes(ds)


def test_a_missing_camera_key_is_named(recording):
    options = LeRobotImportOptions(camera_keys={"scene": "observation.images.top"})
    with pytest.raises(LeRobotDataError, match=r"scene -> observation.images.top.*observation.images.wrist"):
        read_lerobot_episodes(recording / "ds", options)


def test_video_and_table_frame_count_mismatch_is_named(recording, tmp_path):
    import av

    ds = _copy(recording, tmp_path)
    (video,) = list((ds / "videos" / "observation.images.wrist").rglob("*.mp4"))
    with av.open(str(video), "w") as out:  # the same stream, three frames short
        stream = out.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt = 48, 36, "yuv420p"
        n = json.loads((ds / "meta" / "info.json").read_text())["total_frames"] - 3
        for _ in range(n):
            out.mux(stream.encode(av.VideoFrame.from_ndarray(np.zeros((36, 48, 3), np.uint8), format="rgb24")))
        out.mux(stream.encode(None))
    with pytest.raises(LeRobotDataError, match=rf"holds {n} frames but the table gives its episodes {n + 3}"):
        read_lerobot_episodes(ds)


# ----------------------------------------------------------------------------------- LeRobot YAM plugin layout
YAM_STATE_NAMES = [*YAM_JOINT_NAMES, YAM_GRIPPER_NAME]


@pytest.fixture(scope="module")
def yam_dataset(tmp_path_factory):
    """A dataset written by LeRobot's own writer in the YAM plugins' layout (joint positions in degrees, gripper
    0..100, two cameras, no geometry), from MuJoCo renders of the simulated YAM at known joint positions, plus the
    calibration file and the simulator's truth."""
    from para_ros.robot.yam import load_yam_config
    from para_ros.sim.yam_scene import YamSim

    root = tmp_path_factory.mktemp("yam")
    LeRobotDataset, _, _ = lerobot_dataset_classes()
    sim = YamSim()
    w, h = 64, 48
    rng = np.random.default_rng(3)
    home = np.asarray(sim.config.home_q7, dtype=float)
    n_frames, fps = 8, 10
    features = {
        f"observation.images.{v}": {"dtype": "video", "shape": (h, w, 3), "names": ["height", "width", "channels"]}
        for v in ("scene", "wrist")
    }
    features["observation.state"] = {"dtype": "float32", "shape": (7,), "names": YAM_STATE_NAMES}
    features["action"] = {"dtype": "float32", "shape": (7,), "names": YAM_STATE_NAMES}
    ds = LeRobotDataset.create(
        repo_id="local/yam", fps=fps, features=features, root=root / "ds", robot_type="yam_follower", use_videos=True
    )
    truth = {"T_tool": [], "T_wrist": [], "gripper": []}
    for _e in range(2):
        for _t in range(n_frames):
            q7 = home + np.concatenate([rng.uniform(-0.3, 0.3, 6), [0.0]])
            q7[6] = rng.uniform(0.0, 1.0)
            sim.reset(q7)
            q = sim.joint_positions()
            state = np.concatenate([np.rad2deg(q[:6]), [100.0 * q[6]]]).astype(np.float32)
            ds.add_frame(
                {
                    "observation.images.scene": sim.render("scene", w, h),
                    "observation.images.wrist": sim.render("wrist", w, h),
                    "observation.state": state,
                    "action": state,
                    "task": "pick",
                }
            )
            truth["T_tool"].append(sim.site_pose())
            truth["T_wrist"].append(sim.T_world_cam("wrist"))
            truth["gripper"].append(q[6])
        ds.save_episode()
    ds.finalize()
    # The calibration file as para-calib solve writes it: the simulator's scene camera pose and the wrist mount, with
    # the renders' intrinsics in the file's OpenCV convention (the simulator's K is in para_core's).
    T_scene = sim.T_world_cam("scene")
    truth["K"] = {v: sim.intrinsics(v, w, h) for v in ("scene", "wrist")}
    scene, wrist = _yam_calibration_cameras(
        T_scene, load_yam_config().wrist_camera, {v: para_K_to_ros(K) for v, K in truth["K"].items()}, (w, h)
    )
    save_calibration(
        CalibrationFile(date="2026-12-03T04:00:00Z", board=BOARD, cameras={"scene_cam": scene, "wrist_cam": wrist}),
        root / "calibration.yaml",
    )
    truth["T_scene"] = T_scene
    return root, {k: (v if isinstance(v, dict) else np.asarray(v)) for k, v in truth.items()}


def _yam_calibration_cameras(T_base_scene, mount, K_ros=None, image_wh=None):
    """(scene_cam, wrist_cam) entries: the scene camera's pose in base and the wrist mount; ``K_ros``: view -> (3, 3)
    OpenCV-convention camera matrix to store (None: no intrinsics in the file)."""
    from para_core.model.rotations import matrix_to_pose

    xyz, quat = matrix_to_pose(T_base_scene)
    K_ros = K_ros or {}
    size = image_wh if K_ros else None
    scene = CameraCalibration(
        method="eye_to_hand",
        parent_frame="base",
        frame_id="scene_cam_optical_frame",
        xyz_m=tuple(xyz),
        quat_xyzw=tuple(quat),
        board_on="gripper",
        board_xyz_m=(0.0, 0.0, 0.02),
        board_quat_xyzw=(0.0, 0.0, 0.0, 1.0),
        camera_matrix=K_ros.get("scene"),
        distortion=(0.0,) * 5 if K_ros else None,
        image_size=size,
    )
    wrist = CameraCalibration(
        method="eye_in_hand",
        parent_frame="gripper",
        frame_id=mount.frame_id,
        xyz_m=tuple(mount.xyz_m),
        quat_xyzw=tuple(mount.quat_xyzw),
        board_on="base",
        board_xyz_m=(0.3, 0.0, 0.0),
        board_quat_xyzw=(1.0, 0.0, 0.0, 0.0),
        camera_matrix=K_ros.get("wrist"),
        image_size=size,
    )
    return scene, wrist


def test_yam_joint_space_dataset_gives_the_simulators_poses(yam_dataset, tmp_path):
    root, truth = yam_dataset
    out = tmp_path / "episodes"
    assert (
        bag_main(
            ["import-lerobot", str(root / "ds"), "--out", str(out), "--calibration", str(root / "calibration.yaml")]
        )
        == 0
    )
    eps = [Episode.load(p) for p in sorted(out.iterdir())]
    assert [len(e) for e in eps] == [8, 8]
    T_tool = np.concatenate([e.T_world_ee for e in eps])
    T_wrist = np.concatenate([e.T_world_cam["wrist"] for e in eps])
    assert np.abs(T_tool[:, :3, 3] - truth["T_tool"][:, :3, 3]).max() < 1e-3  # metres
    assert np.abs(T_tool[:, :3, :3] - truth["T_tool"][:, :3, :3]).max() < 1e-3
    assert np.abs(T_wrist[:, :3, 3] - truth["T_wrist"][:, :3, 3]).max() < 1e-3
    assert np.abs(T_wrist[:, :3, :3] - truth["T_wrist"][:, :3, :3]).max() < 1e-3
    assert np.allclose(np.concatenate([e.gripper for e in eps]), truth["gripper"], atol=1e-5)
    # The file's OpenCV-convention camera_matrix comes back as the renders' para_core K (cx, cy + 0.5 exactly).
    for view in ("scene", "wrist"):
        K = np.concatenate([e.K[view] for e in eps])  # (16, 3, 3)
        assert np.abs(K - truth["K"][view]).max() < 1e-12, view
    T_scene = np.concatenate([e.T_world_cam["scene"] for e in eps])
    assert np.abs(T_scene - truth["T_scene"]).max() < 1e-12  # CameraCalibration.T_parent_child of the saved pose


def test_yam_import_without_intrinsics_in_the_file_takes_them_from_the_command_line(yam_dataset, tmp_path, capsys):
    from para_ros.robot.yam import load_yam_config

    root, truth = yam_dataset
    cal = load_calibration(root / "calibration.yaml")
    scene, wrist = _yam_calibration_cameras(cal.camera("scene_cam").T_parent_child(), load_yam_config().wrist_camera)
    path = save_calibration(
        CalibrationFile(date=cal.date, board=cal.board, cameras={"scene_cam": scene, "wrist_cam": wrist}),
        tmp_path / "c.yaml",
    )
    assert (
        bag_main(["import-lerobot", str(root / "ds"), "--out", str(tmp_path / "none"), "--calibration", str(path)]) == 2
    )
    assert "no intrinsics for views ['scene', 'wrist']" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()
    K_ros = {v: para_K_to_ros(truth["K"][v]) for v in ("scene", "wrist")}
    flags = [
        f"--intrinsics={v}=" + ",".join(repr(float(K[i, j])) for i, j in ((0, 0), (1, 1), (0, 2), (1, 2)))
        for v, K in K_ros.items()
    ]
    assert (
        bag_main(["import-lerobot", str(root / "ds"), "--out", str(tmp_path / "e"), "--calibration", str(path), *flags])
        == 0
    )
    ep = Episode.load(sorted((tmp_path / "e").iterdir())[0])
    for view in ("scene", "wrist"):
        assert np.abs(ep.K[view] - truth["K"][view]).max() < 1e-12, view


def test_yam_import_refuses_intrinsics_of_another_image_size(yam_dataset, tmp_path, capsys):
    root, _ = yam_dataset
    cal = load_calibration(root / "calibration.yaml")
    scene = CameraCalibration(**{**cal.camera("scene_cam").__dict__, "image_size": (128, 96)})
    path = save_calibration(
        CalibrationFile(date=cal.date, board=cal.board, cameras={**cal.cameras, "scene_cam": scene}),
        tmp_path / "c.yaml",
    )
    assert bag_main(["import-lerobot", str(root / "ds"), "--out", str(tmp_path / "e"), "--calibration", str(path)]) == 2
    err = capsys.readouterr().err
    assert "cameras.scene_cam.image_size is 128x96 but the dataset's scene images are 64x48" in err
    assert "--intrinsics scene=" in err and not (tmp_path / "e").exists()
    # --intrinsics for that view replaces the file's matrix, so its size no longer matters.
    assert (
        bag_main(
            [
                "import-lerobot",
                str(root / "ds"),
                "--out",
                str(tmp_path / "e"),
                "--calibration",
                str(path),
                "--intrinsics",
                "scene=50,50,31.5,23.5",
            ]
        )
        == 0
    )
    ep = Episode.load(sorted((tmp_path / "e").iterdir())[0])
    np.testing.assert_array_equal(ep.K["scene"][0], [[50.0, 0.0, 32.0], [0.0, 50.0, 24.0], [0.0, 0.0, 1.0]])


def test_yam_import_names_a_calibration_file_that_does_not_load(yam_dataset, tmp_path, capsys):
    root, _ = yam_dataset
    data = yaml.safe_load((root / "calibration.yaml").read_text())
    data["cameras"]["scene_cam"]["camera_matrix"][0][0] = 0.0
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(data))
    assert (
        bag_main(
            [
                "import-lerobot",
                str(root / "ds"),
                "--out",
                str(tmp_path / "e"),
                "--calibration",
                str(tmp_path / "c.yaml"),
            ]
        )
        == 2
    )
    assert "cameras.scene_cam.camera_matrix has focal length fx = 0.0" in capsys.readouterr().err
    assert not (tmp_path / "e").exists()


@pytest.mark.slow  # ~25 s on 2 cores: two training iterations of the tiny preset
def test_yam_joint_space_dataset_trains_the_tiny_preset(yam_dataset, tmp_path):
    from para_core.train.cli import main as train_main

    root, _ = yam_dataset
    episodes = tmp_path / "episodes"
    assert (
        bag_main(
            [
                "import-lerobot",
                str(root / "ds"),
                "--out",
                str(episodes),
                "--calibration",
                str(root / "calibration.yaml"),
            ]
        )
        == 0
    )
    (tmp_path / "model.yaml").write_text("feat_dim: 8\ntrain:\n  num_workers: 0\n  val_fraction: 0.0\n")
    assert (
        train_main(
            [
                "--data",
                str(episodes),
                "--preset",
                "tiny",
                "--config",
                str(tmp_path / "model.yaml"),
                "--out",
                str(tmp_path / "run"),
                "--max-iters",
                "2",
                "--batch-size",
                "2",
                "--device",
                "cpu",
                "--no-progress",
                "--no-tensorboard",
            ]
        )
        == 0
    )
    assert (tmp_path / "run" / "checkpoint").is_dir()


def test_joint_space_dataset_without_a_calibration_source_is_named(yam_dataset, tmp_path, capsys):
    root, _ = yam_dataset
    with pytest.raises(LeRobotDataError, match=r"no calibration features.*calibration file"):
        read_lerobot_episodes(root / "ds")
    from para_core.train.cli import main as train_main

    with pytest.raises(SystemExit):
        train_main(["--data", str(root / "ds"), "--preset", "tiny", "--out", str(tmp_path / "run")])
    assert "--calibration calibration.yaml" in capsys.readouterr().err


def test_joint_space_names_are_checked(yam_dataset, tmp_path):
    root, _ = yam_dataset
    code = bag_main(
        [
            "import-lerobot",
            str(root / "ds"),
            "--out",
            str(tmp_path / "e"),
            "--calibration",
            str(root / "calibration.yaml"),
            "--joint-names",
            "j1,j2,j3,j4,j5,j6",
        ]
    )
    assert code == 2 and not (tmp_path / "e").exists()
