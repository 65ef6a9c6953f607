"""calibration.yaml: exact round trip, no overwrite without force, nothing written on error, clear load errors."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import yaml
from calibration_fixtures import DIST, HEIGHT, SPEC, WIDTH
from scipy.spatial.transform import Rotation

from para_core.calibration.calibration_file import (
    CalibrationFile,
    CameraCalibration,
    dump_calibration,
    load_calibration,
    save_calibration,
)
from para_core.calibration.errors import CalibrationError

# Intrinsics with digits a decimal print would round (1/3) and a cv2-shaped (1, 5) distortion array.
K_SCENE = np.array([[612.0 + 1 / 3, 0.0, 319.25], [0.0, 611.5, 241.0 - 1 / 7], [0.0, 0.0, 1.0]])


def _calibration() -> CalibrationFile:
    rng = np.random.default_rng(0)
    q1, q2 = Rotation.random(2, random_state=1).as_quat()
    scene = CameraCalibration(
        method="eye_to_hand",
        parent_frame="base",
        frame_id="scene_cam_optical_frame",
        xyz_m=tuple(rng.normal(size=3)),
        quat_xyzw=tuple(q1),
        board_on="gripper",
        board_xyz_m=(0.0123456789012345, -0.1, 1e-7),
        board_quat_xyzw=(0.0, 0.0, 0.0, 1.0),
        residuals={
            "samples": 12,
            "samples_skipped": 1,
            "reprojection_rms_px": 0.2134567,
            "reprojection_max_px": 0.6,
            "handeye_rotation_deg": 0.05,
            "handeye_translation_mm": 0.4,
            "rotation_coverage_deg": 48.0,
            "rotation_axis_spread_deg": 60.1,
            "per_sample_rms_px": [0.1, 1 / 3],
        },
        camera_matrix=K_SCENE,
        distortion=DIST[None],
        image_size=(WIDTH, HEIGHT),
    )
    wrist = CameraCalibration(
        method="eye_in_hand",
        parent_frame="gripper",
        frame_id="wrist_cam_optical_frame",
        xyz_m=(0.0, -0.06, 0.03),
        quat_xyzw=tuple(q2),
        board_on="base",
        board_xyz_m=(0.3, -0.1, 0.0),
        board_quat_xyzw=(1.0, 0.0, 0.0, 0.0),
    )
    return CalibrationFile(date="2026-12-03T04:00:00Z", board=SPEC, cameras={"scene_cam": scene, "wrist_cam": wrist})


def test_round_trip_is_exact(tmp_path):
    cal = _calibration()
    path = save_calibration(cal, tmp_path / "calibration.yaml")
    loaded = load_calibration(path)
    assert loaded == cal  # dataclass equality: every float bit-identical
    data = yaml.safe_load(path.read_text())
    assert data["para_calibration"] == 1 and list(data["cameras"]) == ["scene_cam", "wrist_cam"]
    assert data["cameras"]["scene_cam"]["parent_frame"] == "base"
    # T_parent_child is the pose written, by scipy's independent conversion.
    scene = loaded.camera("scene_cam")
    T = scene.T_parent_child()
    np.testing.assert_allclose(T[:3, :3], Rotation.from_quat(scene.quat_xyzw).as_matrix(), atol=1e-12)
    np.testing.assert_allclose(T[:3, 3], scene.xyz_m)
    with pytest.raises(CalibrationError, match="no camera 'top_cam'.*scene_cam"):
        loaded.camera("top_cam")


def test_intrinsics_round_trip_exactly_and_are_written_only_when_present(tmp_path):
    loaded = load_calibration(save_calibration(_calibration(), tmp_path / "calibration.yaml"))
    scene, wrist = loaded.camera("scene_cam"), loaded.camera("wrist_cam")
    assert scene.has_intrinsics and np.array_equal(scene.K(), K_SCENE)  # bit-identical, 1/3 included
    assert scene.distortion == tuple(DIST) and scene.image_size == (WIDTH, HEIGHT)
    # What OpenCV projects with the loaded intrinsics is what it projects with the ones saved.
    points = np.array([[0.1, -0.05, 0.8], [-0.2, 0.1, 1.3]])
    loaded_px, _ = cv2.projectPoints(points, np.zeros(3), np.zeros(3), scene.K(), np.asarray(scene.distortion))
    saved_px, _ = cv2.projectPoints(points, np.zeros(3), np.zeros(3), K_SCENE, DIST)
    assert np.array_equal(loaded_px, saved_px)
    data = yaml.safe_load((tmp_path / "calibration.yaml").read_text())
    assert data["cameras"]["scene_cam"]["camera_matrix"][0] == [612.0 + 1 / 3, 0.0, 319.25]
    assert data["cameras"]["scene_cam"]["image_size"] == [WIDTH, HEIGHT]
    assert not {"camera_matrix", "distortion", "image_size"} & set(data["cameras"]["wrist_cam"])
    assert not wrist.has_intrinsics and wrist.distortion is None and wrist.image_size is None
    with pytest.raises(CalibrationError, match="wrist_cam_optical_frame has no camera_matrix"):
        wrist.K()


def test_existing_file_is_not_overwritten_without_force(tmp_path):
    path = tmp_path / "calibration.yaml"
    path.write_text("keep me\n")
    with pytest.raises(CalibrationError, match="already exists.*--force"):
        save_calibration(_calibration(), path)
    assert path.read_text() == "keep me\n"
    save_calibration(_calibration(), path, force=True)
    assert load_calibration(path) == _calibration()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calibration.yaml"]  # no temporary file left


def test_invalid_calibration_writes_nothing(tmp_path):
    cal = _calibration()
    bad = CalibrationFile(
        date=cal.date,
        board=cal.board,
        cameras={
            "scene_cam": CameraCalibration(**{**cal.cameras["scene_cam"].__dict__, "quat_xyzw": (0.0, 0.0, 0.0, 2.0)})
        },
    )
    with pytest.raises(CalibrationError, match="cameras.scene_cam.quat_xyzw.*unit quaternion"):
        save_calibration(bad, tmp_path / "calibration.yaml")
    K_zero = K_SCENE.copy()
    K_zero[1, 1] = 0.0
    bad = CalibrationFile(
        date=cal.date,
        board=cal.board,
        cameras={"scene_cam": CameraCalibration(**{**cal.cameras["scene_cam"].__dict__, "camera_matrix": K_zero})},
    )
    with pytest.raises(CalibrationError, match="cameras.scene_cam.camera_matrix has focal length .*fy = 0.0"):
        save_calibration(bad, tmp_path / "calibration.yaml")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "edit,match",
    [
        (lambda d: d.pop("para_calibration"), "para_calibration = None"),
        (lambda d: d.update(para_calibration=2), "para_calibration = 2"),
        (lambda d: d["cameras"]["scene_cam"].pop("xyz_m"), "cameras.scene_cam lacks the keys \\['xyz_m'\\]"),
        (lambda d: d["cameras"]["scene_cam"].update(xyz_m=[1, 2]), "cameras.scene_cam.xyz_m = \\[1, 2\\]"),
        (lambda d: d["cameras"]["wrist_cam"].update(quat_xyzw=[0, 0, 0]), "cameras.wrist_cam.quat_xyzw"),
        (lambda d: d["cameras"]["wrist_cam"].update(method="eye_on_hand"), "cameras.wrist_cam.method"),
        (lambda d: d["cameras"].update(top_cam=d["cameras"]["scene_cam"]), "unknown names \\['top_cam'\\]"),
        (lambda d: d["cameras"]["scene_cam"]["residuals"].update(reprojection_rms_px=-1.0), "reprojection_rms_px"),
        (lambda d: d["board"].update(marker_m=0.5), "marker_m"),
        (lambda d: d.update(date="yesterday"), "date = 'yesterday'"),
        (lambda d: d.update(cameras={}), "at least one of"),
        (
            lambda d: d["cameras"]["scene_cam"]["camera_matrix"][0].__setitem__(0, 0.0),
            "cameras.scene_cam.camera_matrix has focal length fx = 0.0",
        ),
        (
            lambda d: d["cameras"]["scene_cam"]["camera_matrix"][1].__setitem__(1, -600.0),
            "cameras.scene_cam.camera_matrix has focal length .*fy = -600.0",
        ),
        (lambda d: d["cameras"]["scene_cam"]["camera_matrix"].pop(), "cameras.scene_cam.camera_matrix = "),
        (lambda d: d["cameras"]["scene_cam"]["camera_matrix"][2].__setitem__(2, 2.0), "row 3 be \\[0, 0, 1\\]"),
        (
            lambda d: d["cameras"]["scene_cam"]["camera_matrix"][1].__setitem__(2, "cy"),
            "cameras.scene_cam.camera_matrix\\[1\\]",
        ),
        (lambda d: d["cameras"]["scene_cam"].update(distortion=[0.1, 0.0, 0.0]), "cameras.scene_cam.distortion"),
        (lambda d: d["cameras"]["scene_cam"].update(image_size=[640.5, 480]), "cameras.scene_cam.image_size"),
        (lambda d: d["cameras"]["scene_cam"].update(image_size=[640, 0]), "cameras.scene_cam.image_size"),
        (
            lambda d: d["cameras"]["wrist_cam"].update(distortion=[0.0] * 5),
            "cameras.wrist_cam.distortion needs cameras.wrist_cam.camera_matrix",
        ),
        (
            lambda d: d["cameras"]["wrist_cam"].update(K=[[600, 0, 32], [0, 600, 24], [0, 0, 1]]),
            "unknown keys \\['K'\\].*camera_matrix, distortion and image_size",
        ),
    ],
)
def test_load_errors_name_the_key(tmp_path, edit, match):
    data = yaml.safe_load(dump_calibration(_calibration()))
    edit(data)
    path = tmp_path / "calibration.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(CalibrationError, match=match):
        load_calibration(path)


def test_missing_and_non_yaml_files(tmp_path):
    with pytest.raises(CalibrationError, match="does not exist.*para-calib solve"):
        load_calibration(tmp_path / "nope.yaml")
    (tmp_path / "bad.yaml").write_text("a: [1, 2\n")
    with pytest.raises(CalibrationError, match="not valid YAML"):
        load_calibration(tmp_path / "bad.yaml")


def test_one_camera_only_and_no_residuals(tmp_path):
    cal = _calibration()
    single = CalibrationFile(date=cal.date, board=cal.board, cameras={"wrist_cam": cal.cameras["wrist_cam"]})
    assert load_calibration(save_calibration(single, tmp_path / "c.yaml")) == single


@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_the_file_gets_the_mode_of_any_new_file(tmp_path, umask):
    """Not mkstemp's 0600: the mode open() gives a new file under the same umask (0644 under the usual 022)."""
    import os
    import stat

    old = os.umask(umask)
    try:
        path = save_calibration(_calibration(), tmp_path / "calibration.yaml")
        with open(tmp_path / "reference.txt", "w") as handle:
            handle.write("x")
    finally:
        os.umask(old)
    mode = stat.S_IMODE(path.stat().st_mode)
    assert mode == stat.S_IMODE((tmp_path / "reference.txt").stat().st_mode) == 0o666 & ~umask
