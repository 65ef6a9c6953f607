"""A LeRobot export's intrinsics are in OpenCV's / CameraInfo's convention (what a LeRobot user projects with
cv2.projectPoints), say so in meta/info.json, and come back to para_core's pixel-centre convention on import."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import cv2
import numpy as np
import pytest

pytest.importorskip("lerobot")
pytest.importorskip("av")

sys.path.insert(0, str(Path(__file__).parent))
from bag_fixtures import K_IMAGE, SyntheticBagSpec, write_synthetic_bag  # noqa: E402

from para_core.data.lerobot_compat import lerobot_dataset_classes, video_backend  # noqa: E402
from para_core.data.lerobot_dataset import LeRobotDataError, read_lerobot_episodes  # noqa: E402
from para_ros.commands.bag import main as bag_main  # noqa: E402

SPEC = SyntheticBagSpec(duration_s=0.5, image_wh=(48, 36))


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    root = tmp_path_factory.mktemp("lerobot_k")
    bag = write_synthetic_bag(root / "bag", SPEC)
    argv = ["export-lerobot", str(bag), "--out", str(root / "ds"), "--task", "pick", "--fps", "0", "--quiet"]
    assert bag_main(argv) == 0
    return root / "ds"


def exported_K(ds_root: Path, view: str) -> np.ndarray:
    """The K feature of frame 0 as stored in the dataset's table (LeRobot's reader, no para code)."""
    LeRobotDataset, _, _ = lerobot_dataset_classes()
    table = LeRobotDataset("local/para_export", root=ds_root, video_backend=video_backend()).hf_dataset
    return np.asarray(table.with_format(None)[0][f"observation.cameras.{view}.K"], dtype=np.float64).reshape(3, 3)


def test_exported_K_projects_pixel_centres_to_integers_with_opencv(export):
    info = json.loads((export / "meta" / "info.json").read_text())
    assert info["para"]["intrinsics_convention"] == "opencv"
    K_para = K_IMAGE(SPEC)  # the recording's intrinsics in para_core's convention (pixel centre at col + 0.5)
    w, h = SPEC.image_wh
    for view in ("scene", "wrist"):
        K_cv = exported_K(export, view)
        assert K_cv[0, 2] == pytest.approx((w - 1) / 2) and K_cv[1, 2] == pytest.approx((h - 1) / 2)
        # Rays through the centres of pixels (col, row), by para_core's convention; OpenCV must land on (col, row).
        cols, rows = np.meshgrid([0, 7, w - 1], [0, 11, h - 1])
        z = np.linspace(0.3, 1.2, cols.size)
        x = (cols.ravel() + 0.5 - K_para[0, 2]) / K_para[0, 0] * z
        y = (rows.ravel() + 0.5 - K_para[1, 2]) / K_para[1, 1] * z
        points = np.stack([x, y, z], axis=1)  # (n, 3) camera frame
        uv, _ = cv2.projectPoints(points, np.zeros(3), np.zeros(3), K_cv, np.zeros(5))
        np.testing.assert_allclose(uv.reshape(-1, 2), np.stack([cols.ravel(), rows.ravel()], 1), atol=1e-9)


def test_import_converts_back_to_the_pixel_centre_convention(export, tmp_path):
    (episode,) = read_lerobot_episodes(export)
    for view in ("scene", "wrist"):
        np.testing.assert_allclose(episode.K[view], np.broadcast_to(K_IMAGE(SPEC), episode.K[view].shape), atol=1e-12)
    # An export from before the field existed holds para_core's convention: read as it is.
    legacy = tmp_path / "legacy"
    shutil.copytree(export, legacy)
    info_path = legacy / "meta" / "info.json"
    info = json.loads(info_path.read_text())
    del info["para"]["intrinsics_convention"]
    info_path.write_text(json.dumps(info))
    (old,) = read_lerobot_episodes(legacy)
    np.testing.assert_array_equal(old.K["scene"][0], exported_K(export, "scene"))
    info["para"]["intrinsics_convention"] = "matlab"
    info_path.write_text(json.dumps(info))
    with pytest.raises(LeRobotDataError, match=r"intrinsics_convention = 'matlab'.*'opencv'"):
        read_lerobot_episodes(legacy)


def test_para_train_takes_the_camera_key_its_hint_names(export, tmp_path, capsys):
    from para_core.train.cli import main as train_main

    out = tmp_path / "run"
    argv = ["--data", str(export), "--preset", "tiny", "--out", str(out), "--print-config"]
    assert train_main([*argv, "--camera-key", "scene=observation.images.wrist"]) == 0
    printed = json.loads(capsys.readouterr().out)
    (episode_dir,) = [Path(p) for p in printed["episodes"]]
    converted = json.loads((episode_dir.parent / "converted.json").read_text())
    assert converted["camera_keys"] == {"scene": "observation.images.wrist"}  # another mapping converts afresh
    (ref,) = read_lerobot_episodes(export)
    from para_core.data.dataset import Episode

    got = Episode.load(episode_dir)
    assert np.array_equal(got.images["scene"], ref.images["wrist"])  # the scene view reads the wrist video


@pytest.mark.parametrize(
    "key, message",
    [
        ("scene=observation.state", r"scene -> observation.state \(float32\).*not a video feature.*video features are"),
        ("scene=observation.images.top", r"no camera feature for \['scene -> observation.images.top'\]"),
        ("scene", r"--camera-key 'scene': use VIEW=FEATURE"),
        ("front=observation.images.wrist", r"--camera-key names view\(s\) \['front'\]; the model's views are"),
    ],
)
def test_a_bad_camera_key_is_a_clear_message_not_a_traceback(export, tmp_path, capsys, key, message):
    from para_core.train.cli import main as train_main

    argv = ["--data", str(export), "--preset", "tiny", "--out", str(tmp_path / "run"), "--print-config"]
    with pytest.raises(SystemExit) as stop:
        train_main([*argv, "--camera-key", key])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert re.search(message, err) and "Traceback" not in err
