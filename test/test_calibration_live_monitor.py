"""The live calibration monitor and ``para-calib refine``'s solver on a synthetic rig with a known camera offset.

References are independent of the code under test: a pinhole projection written out by hand (no OpenCV) for the
errors, and the rig's true pose for the refinement.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from para_core.calibration.errors import CalibrationError
from para_core.calibration.live_monitor import (
    ERROR,
    OK,
    UNKNOWN,
    WARN,
    CalibrationMonitor,
    MarkerCheck,
    MonitorConfig,
    check_marker,
)
from para_core.calibration.marker import ArucoMarkerSpec
from para_core.calibration.marker_refine import MarkerSample, RefineConfig, refine_scene_camera
from para_core.model.rotations import rotation_angle_between

K = np.array([[400.0, 0.0, 160.0], [0.0, 400.0, 120.0], [0.0, 0.0, 1.0]])
SPEC = ArucoMarkerSpec(side_m=0.05)


def _rot(axis: str, deg: float) -> np.ndarray:
    c, s = math.cos(math.radians(deg)), math.sin(math.radians(deg))
    return {
        "x": np.array([[1, 0, 0], [0, c, -s], [0, s, c]]),
        "y": np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]]),
        "z": np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]]),
    }[axis]


def _T(R=None, t=(0.0, 0.0, 0.0)) -> np.ndarray:
    T = np.eye(4)
    T[:3, :3] = np.eye(3) if R is None else R
    T[:3, 3] = t
    return T


# The told scene camera: 0.5 m to the side (-y), 0.6 m up, looking at (0.33, 0, 0.03) (OpenCV optical frame).
def _look_at(pos, target) -> np.ndarray:
    pos, target = np.asarray(pos, float), np.asarray(target, float)
    z = (target - pos) / np.linalg.norm(target - pos)
    y = -(np.array([0, 0, 1.0]) - z[2] * z)
    y /= np.linalg.norm(y)
    return _T(np.stack([np.cross(y, z), y, z], axis=1), pos)


T_BASE_CAM_TOLD = _look_at((0.33, -0.5, 0.6), (0.33, 0.0, 0.03))
KNOCK = _T(_rot("y", 1.0), (0.01, 0.0, 0.0))  # 1 cm along the optical x, 1 deg about its y
T_BASE_CAM_TRUE = T_BASE_CAM_TOLD @ KNOCK
# The marker on the flange, its face turned towards the camera (-y of base) when the gripper points down (flange z
# = base -z) with yaw 0.
T_FLANGE_MARKER = _T(_rot("x", -120.0), (-0.025, 0.04, 0.03))


def _flange(x, y, z, yaw_deg) -> np.ndarray:
    down = np.diag([1.0, -1.0, -1.0])  # flange z along base -z
    return _T(_rot("z", yaw_deg) @ down, (x, y, z))


def _hand_project(T_base_cam, T_base_flange) -> tuple[np.ndarray, np.ndarray]:
    """(4, 2) pixels and (4,) depths of the marker corners, pinhole maths written out."""
    corners = np.array([[0, 0, 0], [0.05, 0, 0], [0.05, 0.05, 0], [0, 0.05, 0]], dtype=float)
    p = (np.linalg.inv(T_base_cam) @ T_base_flange @ T_FLANGE_MARKER @ np.c_[corners, np.ones(4)].T).T[:, :3]
    u = K[0, 0] * p[:, 0] / p[:, 2] + K[0, 2]
    v = K[1, 1] * p[:, 1] / p[:, 2] + K[1, 2]
    return np.stack([u, v], axis=1), p[:, 2]


def _workspace_flanges(n: int = 40, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [
        _flange(rng.uniform(0.22, 0.42), rng.uniform(-0.12, 0.12), rng.uniform(0.08, 0.25), rng.uniform(-40, 40))
        for _ in range(n)
    ]


def test_check_marker_error_matches_the_hand_computed_offset():
    T_bf = _flange(0.33, 0.0, 0.15, 10.0)
    seen, _ = _hand_project(T_BASE_CAM_TRUE, T_bf)  # what the knocked camera sees
    predicted, depth = _hand_project(T_BASE_CAM_TOLD, T_bf)  # where the told calibration puts it
    err = np.linalg.norm(seen - predicted, axis=1)  # (4,)
    check = check_marker(seen, T_bf, T_FLANGE_MARKER, T_BASE_CAM_TOLD, K, SPEC, stamp_s=1.0)
    assert check.error_px == pytest.approx(float(np.sqrt(np.mean(err**2))), rel=1e-6)
    assert check.error_mm == pytest.approx(float(np.sqrt(np.mean((1000 * err * depth / 400.0) ** 2))), rel=1e-6)
    assert 5.0 < check.error_px < 20.0  # 1 cm + 1 deg at ~0.6 m is several pixels
    exact = check_marker(predicted, T_bf, T_FLANGE_MARKER, T_BASE_CAM_TOLD, K, SPEC)
    assert exact.error_px < 1e-6


def test_monitor_levels_over_the_window():
    config = MonitorConfig(window_s=2.0, warn_px=2.5, error_px=5.0, min_detections=3)
    mon = CalibrationMonitor(config)
    for i, e in enumerate((1.0, 1.2, 0.8, 40.0)):  # one outlier does not move the median
        mon.add_check(MarkerCheck(0.1 * i, e, e, 0.6))
    status = mon.status()
    assert status.level == OK and status.error_px == pytest.approx(1.1)
    for i in range(10):  # knocked: 3 px from t = 1 s on; after the window only those remain
        mon.add_check(MarkerCheck(1.0 + 0.3 * i, 3.0, 4.0, 0.6))
    assert mon.status().level == WARN and mon.status().error_mm == pytest.approx(4.0)
    for i in range(10):
        mon.add_check(MarkerCheck(5.0 + 0.3 * i, 7.0, 9.0, 0.6))
    status = mon.status()
    assert status.level == ERROR and "para-calib refine" in status.message


def test_marker_never_seen_is_unknown_not_ok():
    mon = CalibrationMonitor(MonitorConfig())
    assert mon.status().level == UNKNOWN
    for i in range(50):
        mon.add_unseen(0.1 * i)
    status = mon.status()
    assert status.level == UNKNOWN and "never seen in 50" in status.message and math.isnan(status.error_px)
    for i in range(5):
        mon.add_check(MarkerCheck(5.0 + 0.1 * i, 0.5, 0.5, 0.6))
    assert mon.status().level == OK
    for i in range(30):  # seen, then covered for longer than the window
        mon.add_unseen(6.0 + 0.1 * i)
    status = mon.status()
    assert status.level == UNKNOWN and "seen in 0 of" in status.message


def test_time_going_back_clears_the_window():
    mon = CalibrationMonitor(MonitorConfig(min_detections=1))
    mon.add_check(MarkerCheck(10.0, 9.0, 9.0, 0.6))
    mon.add_check(MarkerCheck(0.5, 0.5, 0.5, 0.6))  # simulator reset
    assert mon.status().level == OK and mon.status().n_checked == 1


def test_bad_input_is_refused_with_the_reason():
    with pytest.raises(CalibrationError, match="error_px"):
        MonitorConfig(warn_px=5.0, error_px=2.0)
    with pytest.raises(CalibrationError, match="4 finite"):
        check_marker(np.zeros((3, 2)), np.eye(4), T_FLANGE_MARKER, T_BASE_CAM_TOLD, K, SPEC)
    with pytest.raises(CalibrationError, match="T_base_flange"):
        check_marker(np.zeros((4, 2)), np.ones((4, 4)), T_FLANGE_MARKER, T_BASE_CAM_TOLD, K, SPEC)
    with pytest.raises(CalibrationError, match="marker_id"):
        ArucoMarkerSpec(marker_id=50)


def _samples(flanges, noise_px=0.2, seed=1) -> list[MarkerSample]:
    rng = np.random.default_rng(seed)
    out = []
    for T in flanges:
        px, _ = _hand_project(T_BASE_CAM_TRUE, T)
        out.append(MarkerSample(px + rng.normal(0.0, noise_px, px.shape), T, K))
    return out


@pytest.mark.parametrize("told", [T_BASE_CAM_TOLD, None])
def test_refine_recovers_the_knocked_pose(told):
    result, coverage = refine_scene_camera(_samples(_workspace_flanges()), SPEC, T_FLANGE_MARKER, told)
    P = result.T_parent_cam
    assert 1000 * np.linalg.norm(P[:3, 3] - T_BASE_CAM_TRUE[:3, 3]) < 2.0
    assert math.degrees(rotation_angle_between(P[:3, :3], T_BASE_CAM_TRUE[:3, :3])) < 0.2
    assert result.reprojection_rms_px < 0.4  # the noise, not a bias
    assert coverage.spread_m[1] > 0.03


def test_refine_refuses_a_static_recording_naming_the_coverage():
    still = [_flange(0.33, 0.0, 0.15, 0.0)] * 40
    with pytest.raises(CalibrationError, match=r"hardly moves.*spread 0 / 0 / 0 mm"):
        refine_scene_camera(_samples(still), SPEC, T_FLANGE_MARKER, T_BASE_CAM_TOLD)
    with pytest.raises(CalibrationError, match="only 5 images"):
        refine_scene_camera(_samples(_workspace_flanges(5)), SPEC, T_FLANGE_MARKER, T_BASE_CAM_TOLD)
    with pytest.raises(CalibrationError, match="min_spread_m"):
        RefineConfig(min_spread_m=0.0)
