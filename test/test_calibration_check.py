"""Calibration check: the tool frame projected with CameraInfo + TF lands on the rendered gripper; a wrong extrinsic
shows as the offset it should; ``para-bag calib`` on a recording agrees with OpenCV's projection."""

import json

import cv2
import numpy as np
import pytest
from bag_fixtures import K_IMAGE, T_SCENE, SyntheticBagSpec, reference_ee_pose, write_synthetic_bag

from para_core.eval.calibration import expected_pixel_offset, project_tool
from para_ros.commands import bag as bag_tools


@pytest.fixture(scope="module")
def sim():
    from para_ros.sim.yam_scene import SimConfig, YamSim

    s = YamSim(SimConfig())
    yield s
    s.close()


def _marker_centroid(sim, cam: str, size: int) -> np.ndarray:
    """Where MuJoCo draws the grasp-site marker (only its geom group rendered): centroid in para_core pixels."""
    from para_ros.sim.yam_scene import MARKER_GROUP

    seg = sim.render(cam, size, size, geom_groups=(MARKER_GROUP,), segmentation=True)[..., 0]  # object ids
    marker = sim.model.geom("grasp_marker").id
    rows, cols = np.nonzero(seg == marker)
    assert rows.size > 3, f"marker not visible in {cam}"
    return np.array([cols.mean() + 0.5, rows.mean() + 0.5])


@pytest.mark.parametrize("cam", ["scene", "wrist"])
def test_projected_tool_frame_lands_on_the_rendered_gripper(sim, cam):
    size = 256
    sim.reset()
    proj = project_tool(sim.site_pose(), sim.intrinsics(cam, size, size), sim.T_world_cam(cam), (size, size))
    assert proj.in_image
    assert np.linalg.norm(proj.origin_uv - _marker_centroid(sim, cam, size)) < 2.0


def test_a_two_centimetre_extrinsic_error_moves_the_projection_by_f_d_over_depth(sim):
    size = 256
    sim.reset()
    K = sim.intrinsics("scene", size, size)
    T_true = sim.T_world_cam("scene")
    shift = np.eye(4)
    shift[0, 3] = 0.02  # the TF says the camera is 2 cm further along its own x axis than it is
    T_wrong = T_true @ shift
    good = project_tool(sim.site_pose(), K, T_true, (size, size))
    bad = project_tool(sim.site_pose(), K, T_wrong, (size, size))
    offset = good.origin_uv - bad.origin_uv  # the point appears 2 cm to the camera's left -> +u in the truth
    assert offset[0] == pytest.approx(expected_pixel_offset(K, good.depth_m, 0.02), abs=1e-6)
    assert abs(offset[1]) < 1e-6
    # the same from OpenCV, independently
    T_cam_world = np.linalg.inv(T_wrong)
    rvec, _ = cv2.Rodrigues(T_cam_world[:3, :3])
    uv, _ = cv2.projectPoints(
        sim.site_pose()[:3, 3].reshape(1, 3),
        rvec,
        T_cam_world[:3, 3],
        K - np.array([[0, 0, 0.5], [0, 0, 0.5], [0, 0, 0]]),
        None,
    )  # OpenCV pixel centres at integers
    np.testing.assert_allclose(uv.reshape(2) + 0.5, bad.origin_uv, atol=1e-6)
    # and the wrong projection misses the rendered marker by about that much
    miss = np.linalg.norm(bad.origin_uv - _marker_centroid(sim, "scene", size))
    assert abs(miss - expected_pixel_offset(K, good.depth_m, 0.02)) < 2.0


def test_para_bag_calib_writes_the_sheet_and_projections(tmp_path):
    spec = SyntheticBagSpec(wrist_compressed=False)
    bag = write_synthetic_bag(tmp_path / "bag", spec)
    rc = bag_tools.main(["calib", str(bag), "--out", str(tmp_path / "calib"), "--frames", "4"])
    assert rc == 0
    assert (tmp_path / "calib" / "calibration_sheet.png").is_file()
    report = json.loads((tmp_path / "calib" / "calibration.json").read_text())
    assert 3 <= len(report["frames"]) <= 4  # the last pair may lie past the end of TF: no observation
    K = K_IMAGE(spec)
    T_cam_world = np.linalg.inv(T_SCENE())
    rvec, _ = cv2.Rodrigues(T_cam_world[:3, :3])
    for f in report["frames"]:
        p = reference_ee_pose(spec, f["stamp_ns"])[:3, 3]
        uv, _ = cv2.projectPoints(
            p.reshape(1, 3), rvec, T_cam_world[:3, 3], K - np.array([[0, 0, 0.5], [0, 0, 0.5], [0, 0, 0]]), None
        )
        np.testing.assert_allclose(f["views"]["scene"]["uv"], uv.reshape(2) + 0.5, atol=1e-4)


def test_para_bag_calib_refuses_a_bad_frame_count(tmp_path, capsys):
    bag = write_synthetic_bag(tmp_path / "bag", SyntheticBagSpec(duration_s=0.5))
    assert bag_tools.main(["calib", str(bag), "--out", str(tmp_path / "c"), "--frames", "0"]) == 2
    assert "--frames 0" in capsys.readouterr().err
