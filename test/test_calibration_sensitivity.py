"""The calibration-sensitivity benchmark moves the scene camera by exactly the error it names."""

import importlib.util
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation
from test_calibration_file import _calibration as example_calibration

from para_core.calibration.calibration_file import load_calibration, save_calibration

BENCH = Path(__file__).resolve().parent.parent / "bench" / "calibration_sensitivity.py"


def _bench():
    spec = importlib.util.spec_from_file_location("calibration_sensitivity", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_error_is_applied_along_and_about_the_camera_x_axis(tmp_path):
    bench = _bench()
    cal = example_calibration()
    T0 = cal.camera("scene_cam").T_parent_child()
    moved = bench.perturbed_scene_camera(cal, translation_m=0.010, rotation_deg=2.0)
    T1 = moved.camera("scene_cam").T_parent_child()
    # Independent reference: the centre moves 10 mm along the camera's own x axis (first column of R_base_cam) ...
    np.testing.assert_allclose(T1[:3, 3], T0[:3, 3] + 0.010 * T0[:3, 0], atol=1e-12)
    # ... and the relative rotation is 2 deg about the camera's x axis, by scipy's rotation vector.
    rotvec = Rotation.from_matrix(T0[:3, :3].T @ T1[:3, :3]).as_rotvec(degrees=True)
    np.testing.assert_allclose(rotvec, [2.0, 0.0, 0.0], atol=1e-9)
    # The wrist camera is untouched and the file round-trips.
    np.testing.assert_array_equal(moved.camera("wrist_cam").T_parent_child(), cal.camera("wrist_cam").T_parent_child())
    path = save_calibration(moved, tmp_path / "moved.yaml")
    np.testing.assert_allclose(load_calibration(path).camera("scene_cam").T_parent_child(), T1, atol=1e-12)


def test_no_error_keeps_the_pose():
    bench = _bench()
    cal = example_calibration()
    same = bench.perturbed_scene_camera(cal, 0.0, 0.0)
    np.testing.assert_allclose(
        same.camera("scene_cam").T_parent_child(), cal.camera("scene_cam").T_parent_child(), atol=1e-12
    )


def test_the_rendered_offset_is_the_same_error_as_the_perturbed_calibration():
    """Both ways of making the error use the same transform in the camera's optical frame: the simulator's rendered
    offset (the node parameters, read as the node reads them) equals the error the calibration file gets. (Rendered
    off the told pose against told off the rendered one: the same size, the opposite sign, as the docstring says.)"""
    import yaml

    from para_ros.sim.calibration_board import offset_T

    bench = _bench()
    cal = example_calibration()
    T0 = cal.camera("scene_cam").T_parent_child()
    for t_m, r_deg in ((0.010, 0.0), (0.0, 2.0), (0.02, 0.0)):
        args = bench.rendered_offset_params(t_m, r_deg)
        values = dict(a.split(":=", 1) for a in args if ":=" in a)
        xyz = yaml.safe_load(values["sim_node:scene_cam_true_offset_xyz_m"])
        rpy = yaml.safe_load(values["sim_node:scene_cam_true_offset_rpy_deg"])
        T1 = bench.perturbed_scene_camera(cal, t_m, r_deg).camera("scene_cam").T_parent_child()
        np.testing.assert_allclose(offset_T(xyz, rpy), np.linalg.inv(T0) @ T1, atol=1e-12)
        assert bench.point_label(t_m, r_deg) == f"t{t_m * 1000:g}mm_r{r_deg:g}deg"


def test_the_table_has_a_column_per_checkpoint(tmp_path):
    bench = _bench()
    cell = {"successes": 9, "episodes": 10, "rate": 0.9, "wilson_lo": 0.596, "wilson_hi": 0.982, "outcomes": {}}
    rows = [
        {"translation_mm": 10.0, "rotation_deg": 0.0, "checkpoints": {"a": {**cell, "outcomes": {"no_grasp": 1}}}},
        {"translation_mm": 0.0, "rotation_deg": 2.0, "checkpoints": {"a": cell, "b": cell}},
    ]
    text = bench.write_table(tmp_path, rows, ["a", "b"])
    lines = text.splitlines()
    assert lines[0] == "| scene camera error | a | b |"
    assert lines[2] == "| 10 mm along x | 9/10 (60-98 %); 1 no_grasp | not run |"
    assert lines[3] == "| 2 deg about x | 9/10 (60-98 %) | 9/10 (60-98 %) |"
