"""LeRobot YAM layouts (``--layout``): datasets written with LeRobot's own writer in each recorder's units come back as
the tool poses the package's FK gives for the true joints; a dataset read in the wrong unit, with joints it lacks or
with a camera key that is not a video is refused (nothing written); the calibration travels into the episodes, the
training recipe and the export's metadata, and the export's printed open-line runs in this venv."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("lerobot")
pytest.importorskip("av")

from para_core.calibration.board import CharucoBoardSpec  # noqa: E402
from para_core.calibration.calibration_file import (  # noqa: E402
    CalibrationFile,
    CameraCalibration,
    load_calibration,
    save_calibration,
)
from para_core.data.dataset import Episode  # noqa: E402
from para_core.data.lerobot_compat import lerobot_dataset_classes  # noqa: E402
from para_core.data.lerobot_dataset import LeRobotDataError, convert_for_training  # noqa: E402
from para_core.model.rotations import make_matrix  # noqa: E402
from para_core.train.calibration_record import episode_calibrations, write_recipe_calibrations  # noqa: E402
from para_ros.commands.bag import main as bag_main  # noqa: E402
from para_ros.robot.lerobot_yam import yam_joints_to_poses  # noqa: E402
from para_ros.robot.lerobot_yam_layouts import (  # noqa: E402
    LAYOUTS,
    ArmRange,
    StateColumns,
    check_layout,
    layout_named,
)

W, H = 48, 36
FPS = 10
BOARD = CharucoBoardSpec(squares_x=5, squares_y=7, square_m=0.03, marker_m=0.022, dictionary="DICT_5X5_100")
# True joints (radians) near the simulator's home pose (0, 1.7, 1.55, -1.4, 0, 0), inside every recorder's range; the
# first frame has shoulder_lift at 1.40 rad, where a [-100, 100] value (-21.5) read as degrees lies below the arm's
# range (-0.16 rad), so that misreading cannot pass.
Q_TRUE = np.array(
    [
        [0.00, 1.40, 1.55, -1.40, 0.00, 0.00],
        [0.25, 1.55, 1.30, -1.20, 0.30, -0.40],
        [-0.30, 1.85, 1.70, -1.55, -0.25, 0.60],
        [0.10, 2.00, 1.90, -1.00, 0.10, 1.20],
        [-0.15, 1.70, 1.45, -1.35, 0.50, -1.00],
        [0.40, 1.60, 1.60, -0.90, -0.40, 0.20],
    ]
)
GRIP_TRUE = np.array([1.0, 0.8, 0.5, 0.2, 0.0, 0.65])
CAMERA_KEYS = {"scene": "observation.images.front", "wrist": "observation.images.wrist_cam"}
CAMERA_FLAGS = [f"--camera-key={v}={k}" for v, k in CAMERA_KEYS.items()]


def _calibration(path: Path) -> Path:
    """A calibration.yaml as para-calib solve writes it: both cameras with intrinsics and residuals."""
    K = {
        "scene": ((40.0, 0.0, 23.5), (0.0, 40.0, 17.5), (0.0, 0.0, 1.0)),
        "wrist": ((30.0, 0.0, 23.5), (0.0, 31.0, 17.5), (0.0, 0.0, 1.0)),
    }
    residuals = {"samples": 12, "reprojection_rms_px": 0.21, "handeye_translation_mm": 0.8, "handeye_rotation_deg": 0.1}
    scene = CameraCalibration(
        method="eye_to_hand",
        parent_frame="base",
        frame_id="scene_cam_optical_frame",
        xyz_m=(0.9, 0.1, 0.6),
        quat_xyzw=(0.6532815, 0.6532815, -0.2705981, -0.2705981),
        board_on="gripper",
        board_xyz_m=(0.0, 0.0, 0.02),
        board_quat_xyzw=(0.0, 0.0, 0.0, 1.0),
        residuals=residuals,
        camera_matrix=K["scene"],
        distortion=(0.0,) * 5,
        image_size=(W, H),
    )
    wrist = CameraCalibration(
        method="eye_in_hand",
        parent_frame="gripper",
        frame_id="wrist_cam_optical_frame",
        xyz_m=(0.001, -0.071, 0.078),  # a few mm off config/yam.yaml's mount: the file's mount must win
        quat_xyzw=(0.2164447, 0.0, 0.0, -0.9762949),
        board_on="base",
        board_xyz_m=(0.3, 0.0, 0.0),
        board_quat_xyzw=(1.0, 0.0, 0.0, 0.0),
        residuals={**residuals, "samples": 15},
        camera_matrix=K["wrist"],
        image_size=(W, H),
    )
    return save_calibration(
        CalibrationFile(date="2026-12-04T10:00:00Z", board=BOARD, cameras={"scene_cam": scene, "wrist_cam": wrist}),
        path,
    )


def write_layout_dataset(root: Path, names: list[str], values: np.ndarray, robot_type: str = "yam_follower") -> Path:
    """A LeRobotDataset v3 written by LeRobot's own writer as a YAM recorder does: two cameras (keys CAMERA_KEYS), the
    state and action ``names`` with ``values`` (N, len(names)) float32, two episodes."""
    LeRobotDataset, _, _ = lerobot_dataset_classes()
    features = {
        key: {"dtype": "video", "shape": (H, W, 3), "names": ["height", "width", "channels"]}
        for key in CAMERA_KEYS.values()
    }
    for key in ("observation.state", "action"):
        features[key] = {"dtype": "float32", "shape": (len(names),), "names": list(names)}
    ds = LeRobotDataset.create(
        repo_id="local/yam", fps=FPS, features=features, root=root, robot_type=robot_type, use_videos=True
    )
    rng = np.random.default_rng(0)
    half = len(values) // 2
    for episode in (values[:half], values[half:]):
        for row in episode:
            frame = {key: rng.integers(0, 255, (H, W, 3), dtype=np.uint8) for key in CAMERA_KEYS.values()}
            frame.update(
                {"observation.state": row.astype(np.float32), "action": row.astype(np.float32), "task": "pick"}
            )
            ds.add_frame(frame)
        ds.save_episode()
    ds.finalize()
    return root


def _recorded(layout_name: str) -> tuple[list[str], np.ndarray]:
    """(names, values) as the layout's recorder writes Q_TRUE and GRIP_TRUE."""
    layout = layout_named(layout_name)
    values = np.concatenate([layout.radians_to_joints(Q_TRUE), GRIP_TRUE[:, None] * layout.gripper_scale], axis=1)
    return [*layout.joint_names, layout.gripper_name], values


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    root = tmp_path_factory.mktemp("layouts")
    cal = _calibration(root / "calibration.yaml")
    out = {name: write_layout_dataset(root / name, *_recorded(name)) for name in LAYOUTS}
    T_tool, T_cam = yam_joints_to_poses(load_calibration(cal))(Q_TRUE)  # the truth: the package's FK, true joints
    return root, cal, out, {"T_tool": T_tool, "T_wrist": T_cam["wrist"], "T_scene": T_cam["scene"]}


def _import(dataset, out, cal, *flags) -> int:
    return bag_main(
        ["import-lerobot", str(dataset), "--out", str(out), "--calibration", str(cal), *CAMERA_FLAGS, *flags]
    )


def _episodes(out: Path) -> list[Episode]:
    return [Episode.load(p) for p in sorted(out.iterdir())]


def _rotation_error_deg(Ra: np.ndarray, Rb: np.ndarray) -> np.ndarray:
    cos = (np.einsum("nij,nij->n", Ra, Rb) - 1.0) / 2.0  # trace(Ra^T Rb) = sum of elementwise products
    return np.degrees(np.arccos(np.clip(cos, -1.0, 1.0)))


def test_the_pypi_plugins_range_scale_by_hand():
    """[-100, 100] over yam_common 0.1.2's DEFAULT_JOINT_LIMITS, by hand: -100 is the lower limit, 100 the upper, 0 the
    middle; the gripper's 0..100 is the 0 closed .. 1 open command times 100."""
    layout = layout_named("yam-follower-pypi")
    lo = np.array([-2.767, -0.15, -0.15, -1.72, -1.72, -2.24])
    hi = np.array([3.28, 3.8, 3.28, 1.72, 1.72, 2.24])
    got = layout.joints_to_radians(np.array([[-100.0] * 6, [100.0] * 6, [0.0] * 6]))
    np.testing.assert_allclose(got, [lo, hi, (lo + hi) / 2], atol=1e-12)
    # shoulder_lift at 1.7 rad: t = (1.7 + 0.15) / 3.95, value = 200 t - 100
    assert layout.radians_to_joints(np.array([[0.0, 1.7, 1.6, 0, 0, 0]]))[0, 1] == pytest.approx(
        200 * 1.85 / 3.95 - 100
    )
    assert layout.joint_names[-1] == "wrist_yaw.pos" and layout.gripper_scale == 100.0
    assert layout_named("yam-degrees").joint_names[-1] == "wrist_rotate.pos"


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_each_layout_round_trips_within_a_millimetre(datasets, tmp_path, name, capsys):
    root, cal, ds, truth = datasets
    out = tmp_path / "e"
    assert _import(ds[name], out, cal, "--layout", name) == 0, capsys.readouterr().err
    eps = _episodes(out)
    T_tool = np.concatenate([e.T_world_ee for e in eps])
    err_mm = np.linalg.norm(T_tool[:, :3, 3] - truth["T_tool"][:, :3, 3], axis=1) * 1e3
    err_deg = _rotation_error_deg(T_tool[:, :3, :3], truth["T_tool"][:, :3, :3])
    print(f"{name}: tool position error max {err_mm.max():.2e} mm, rotation {err_deg.max():.2e} deg")
    assert err_mm.max() < 1.0 and err_deg.max() < 0.05
    T_wrist = np.concatenate([e.T_world_cam["wrist"] for e in eps])
    assert np.linalg.norm(T_wrist[:, :3, 3] - truth["T_wrist"][:, :3, 3], axis=1).max() < 1e-3
    np.testing.assert_allclose(np.concatenate([e.gripper for e in eps]), GRIP_TRUE, atol=1e-6)
    assert eps[0].meta["lerobot_layout"]["name"] == name


def test_a_range_dataset_is_refused_without_its_layout_and_correct_with_it(datasets, tmp_path, capsys):
    """The issue's case: a [-100, 100] dataset read with the degree defaults (names given by hand) is refused, the
    message naming the layout that fits; nothing is written. With that layout it is right."""
    root, cal, ds, truth = datasets
    pypi = layout_named("yam-follower-pypi")
    names = ",".join(pypi.joint_names)
    assert _import(ds["yam-follower-pypi"], tmp_path / "deg", cal, "--joint-names", names) == 2
    err = capsys.readouterr().err
    assert "outside the YAM's range" in err and "shoulder_lift.pos spans" in err
    assert "pass --layout yam-follower-pypi" in err and "pass --joint-unit range" in err
    assert not (tmp_path / "deg").exists()
    # the same dataset with the defaults' names: the names are refused, naming the layout that has them
    assert _import(ds["yam-follower-pypi"], tmp_path / "names", cal) == 2
    err = capsys.readouterr().err
    assert "missing ['wrist_rotate.pos']" in err
    assert "fit layout(s) ['yam-follower-pypi']" in err and not (tmp_path / "names").exists()
    # the wrist_rotate-named [-100, 100] dataset under the default layout (yam-degrees)
    assert _import(ds["yam-range"], tmp_path / "range", cal) == 2
    err = capsys.readouterr().err
    assert "read as layout 'yam-degrees' (degrees)" in err and "pass --layout yam-range" in err
    assert not (tmp_path / "range").exists()
    # read wrongly the tool would be far off (the issue measured 33 cm): with the layout it is right
    assert _import(ds["yam-range"], tmp_path / "ok", cal, "--layout", "yam-range") == 0
    T_tool = np.concatenate([e.T_world_ee for e in _episodes(tmp_path / "ok")])
    assert np.abs(T_tool[:, :3, 3] - truth["T_tool"][:, :3, 3]).max() < 1e-3
    wrong = yam_joints_to_poses(load_calibration(cal))(np.deg2rad(layout_named("yam-range").radians_to_joints(Q_TRUE)))
    print(
        "tool error if read as degrees: %.1f cm" % (np.abs(wrong[0][:, :3, 3] - truth["T_tool"][:, :3, 3]).max() * 100)
    )


def test_a_dataset_that_fits_no_layout_is_refused(datasets, tmp_path, capsys):
    root, cal, _, _ = datasets
    names, values = _recorded("yam-degrees")
    values = values.copy()
    values[:, :6] *= 1000.0  # millidegrees: no known unit
    ds = write_layout_dataset(tmp_path / "mdeg", names, values)
    assert _import(ds, tmp_path / "e", cal) == 2
    err = capsys.readouterr().err
    assert "fit no known layout" in err and "yam-follower-pypi: [-100, 100]" in err and "joints-radians: radians" in err
    assert not (tmp_path / "e").exists()


def test_a_layout_naming_joints_the_dataset_lacks_is_refused(datasets, tmp_path, capsys):
    root, cal, ds, _ = datasets
    assert _import(ds["yam-follower-pypi"], tmp_path / "e", cal, "--layout", "joints-radians") == 2
    err = capsys.readouterr().err
    assert "layout 'joints-radians' expects observation.state names ['joint_1.pos'" in err
    assert "the dataset (robot_type 'yam_follower') has ['shoulder_pan.pos'" in err and not (tmp_path / "e").exists()


def test_a_camera_key_naming_a_non_video_feature_is_refused(datasets, tmp_path, capsys):
    root, cal, ds, _ = datasets
    code = bag_main(
        [
            "import-lerobot",
            str(ds["yam-degrees"]),
            "--out",
            str(tmp_path / "e"),
            "--calibration",
            str(cal),
            "--camera-key",
            "scene=observation.state",
            "--camera-key",
            f"wrist={CAMERA_KEYS['wrist']}",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "the scene camera key 'observation.state' is a float32 feature [7]" in err
    assert "video features are ['observation.images.front', 'observation.images.wrist_cam']" in err
    assert not (tmp_path / "e").exists()


def test_imported_episodes_carry_the_calibration_and_the_recipe_records_it(datasets, tmp_path, capsys):
    root, cal, ds, _ = datasets
    out = tmp_path / "e"
    assert _import(ds["yam-follower-pypi"], out, cal, "--layout", "yam-follower-pypi") == 0
    content = load_calibration(cal).to_dict()
    dirs = sorted(out.iterdir())
    for d in dirs:
        record = Episode.load(d).meta["calibration"]
        assert record["content"] == json.loads(json.dumps(content))  # both cameras, mount, intrinsics, residuals
        assert record["content"]["cameras"]["wrist_cam"]["residuals"]["samples"] == 15
        assert record["content"]["cameras"]["scene_cam"]["camera_matrix"][0][0] == 40.0
    (entry,) = episode_calibrations(dirs)  # what para-train writes into RUN/checkpoint/recipe.json
    assert entry["episodes"] == [d.name for d in dirs] and entry["file"] == "calibration.yaml"
    (tmp_path / "checkpoint").mkdir()
    recipe = json.loads(write_recipe_calibrations(tmp_path / "checkpoint", [entry]).read_text())
    assert recipe["calibrations"][0]["content"]["cameras"]["wrist_cam"]["xyz_m"] == [0.001, -0.071, 0.078]


def test_the_export_holds_the_wrist_mount_and_prints_a_line_that_opens_it(datasets, tmp_path, capsys):
    """Imported episodes (their wrist pose from the file's mount) exported without --calibration: the metadata's
    wrist mount, found in the data, is the file's mount; the printed open-line runs in this venv (no torchvision)."""
    root, cal, ds, _ = datasets
    episodes = tmp_path / "e"
    assert _import(ds["yam-degrees"], episodes, cal) == 0
    out = tmp_path / "export"
    capsys.readouterr()
    assert bag_main(["export-lerobot", str(episodes), "--out", str(out), "--task", "pick", "--quiet"]) == 0
    printed = capsys.readouterr().out
    mount = json.loads((out / "meta" / "info.json").read_text())["para"]["wrist_mount"]
    wrist = load_calibration(cal).camera("wrist_cam")
    assert mount["parent_frame"] == "gripper" and mount["static"]
    np.testing.assert_allclose(mount["T_parent_cam"], make_matrix(wrist.xyz_m, wrist.quat_xyzw), atol=1e-9)
    (line,) = [ln.split(": ", 1)[1] for ln in printed.splitlines() if ln.startswith("open it in Python")]
    run = subprocess.run(
        [sys.executable, "-c", line + "; print(len(ds), ds.meta.total_episodes)"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-2:] == [str(len(Q_TRUE)), "2"]
    # re-imported, the export's calibration (the poses found in the data and the mount) is carried into the episodes
    assert bag_main(["import-lerobot", str(out), "--out", str(tmp_path / "again")]) == 0
    record = Episode.load(sorted((tmp_path / "again").iterdir())[0]).meta["calibration"]
    assert record["content"]["cameras"]["scene"]["static"] and len(record["sha256"]) == 64
    np.testing.assert_allclose(record["wrist_mount"]["T_parent_cam"], mount["T_parent_cam"], atol=0)
    # para-train --data on the export converts it (meta.calibration "features"); the recipe still gets its record
    dirs = [p for d in convert_for_training([out], tmp_path / "conv") for p in sorted(d.iterdir()) if p.is_dir()]
    (entry,) = episode_calibrations(dirs)
    assert entry["sha256"] == record["sha256"] and entry["episodes"] == [d.name for d in dirs]


@pytest.mark.slow  # ~25 s on 2 cores: two training iterations of the tiny preset
def test_a_training_run_records_the_imported_calibration_in_its_checkpoint(datasets, tmp_path):
    from para_core.train.cli import main as train_main

    root, cal, ds, _ = datasets
    episodes = tmp_path / "episodes"
    assert _import(ds["yam-follower-pypi"], episodes, cal, "--layout", "yam-follower-pypi") == 0
    (tmp_path / "model.yaml").write_text("feat_dim: 8\ntrain:\n  num_workers: 0\n  val_fraction: 0.0\n")
    args = ["--data", str(episodes), "--preset", "tiny", "--config", str(tmp_path / "model.yaml")]
    args += ["--out", str(tmp_path / "run"), "--max-iters", "2", "--batch-size", "2", "--device", "cpu"]
    assert train_main([*args, "--no-progress", "--no-tensorboard"]) == 0
    recipe = json.loads((tmp_path / "run" / "checkpoint" / "recipe.json").read_text())
    (entry,) = recipe["calibrations"]
    assert entry["content"] == json.loads(json.dumps(load_calibration(cal).to_dict()))
    assert entry["content"]["cameras"]["wrist_cam"]["residuals"]["samples"] == 15


def test_an_export_with_a_calibration_file_records_its_wrist_cam(datasets, tmp_path):
    root, cal, ds, _ = datasets
    episodes = tmp_path / "e"
    assert _import(ds["yam-degrees"], episodes, cal) == 0
    out = tmp_path / "export"
    args = ["export-lerobot", str(episodes), "--out", str(out), "--task", "pick", "--quiet", "--calibration", str(cal)]
    assert bag_main(args) == 0
    para = json.loads((out / "meta" / "info.json").read_text())["para"]
    assert para["wrist_mount"]["source"] == "calibration file cameras.wrist_cam"
    assert para["calibration"]["cameras"]["wrist_cam"]["residuals"]["samples"] == 15


def test_values_that_fit_two_units_are_imported_with_a_warning():
    """Degrees that all lie inside [-100, 100] fit the [-100, 100] layout too: the import cannot tell, and says so."""
    layout = layout_named("yam-degrees")
    q = np.array([[0.0, 1.2, 1.0, -0.5, 0.2, 0.1], [0.3, 1.5, 1.6, 0.5, -0.2, -0.4]])  # all below 100 degrees
    values = np.concatenate([layout.radians_to_joints(q), [[50.0], [20.0]]], axis=1)
    columns = StateColumns([*layout.joint_names, layout.gripper_name], values, features={})
    (warning,) = check_layout(columns, layout, {}, ArmRange.from_yam_config())
    assert "also fit layout(s) ['yam-range']" in warning and "use_degrees" in warning
    # one value beyond 100 degrees (shoulder_lift at 1.9 rad = 109 deg) and only degrees fit: no warning
    values[1, 1] = np.rad2deg(1.9)
    assert check_layout(columns, layout, {}, ArmRange.from_yam_config()) == []


def test_unknown_layout_lists_the_known_ones():
    with pytest.raises(LeRobotDataError, match=r"--layout 'yam' is not a known layout; use one of \['joints-radians'"):
        layout_named("yam")
