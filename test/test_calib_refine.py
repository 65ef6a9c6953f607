"""``para-calib refine`` on rosbag2 recordings rendered by the simulator (no ROS processes): the scene camera rendered
1 cm / 1 deg away from the pose ``/tf_static`` tells, the arm moving over the workspace with the ArUco marker on the
gripper; the refined pose against the simulator's truth, and a recording of the arm at rest refused with its
coverage figures and nothing written."""

from __future__ import annotations

import numpy as np
import pytest

from para_core.calibration.calibration_file import load_calibration
from para_core.calibration.marker import ArucoMarkerSpec
from para_ros.calibration.solve import pose_error
from para_ros.commands import calib
from para_ros.sim.calibration_board import offset_T
from para_ros.sim.calibration_marker import MARKER_BODY, MarkerMount
from para_ros.sim.told_frames import told_frames
from para_ros.sim.yam_scene import GRASP_SITE, WRIST_CAM_BODY, SimConfig, YamSim

W = H = 256
SPEC = ArucoMarkerSpec()
KNOCK = offset_T((0.01, 0.0, 0.0), (0.0, 1.0, 0.0))
T0_NS = 1_700_000_000 * 10**9


def _stamp(msg_header, t_ns: int) -> None:
    msg_header.stamp.sec, msg_header.stamp.nanosec = divmod(t_ns, 10**9)


def write_operation_bag(path, sim: YamSim, T_base_cam_told: np.ndarray, poses_q) -> None:
    """The scene camera's images + CameraInfo, /tf and /tf_static (the told camera pose), one image per arm pose."""
    from geometry_msgs.msg import TransformStamped
    from rclpy.serialization import serialize_message
    from sensor_msgs.msg import CameraInfo, Image
    from tf2_msgs.msg import TFMessage

    from para_ros.adapters.transforms import matrix_to_transform
    from para_ros.bag.recording import McapRecorder
    from para_ros.observation.camera_model import camera_info_fields

    topics = {
        "/scene_cam/image_raw": "sensor_msgs/msg/Image",
        "/scene_cam/camera_info": "sensor_msgs/msg/CameraInfo",
        "/tf": "tf2_msgs/msg/TFMessage",
        "/tf_static": "tf2_msgs/msg/TFMessage",
    }
    names = {WRIST_CAM_BODY: "wrist_cam_optical_frame", GRASP_SITE: GRASP_SITE}
    rec = McapRecorder(path, topics)
    static = TransformStamped()
    _stamp(static.header, T0_NS)
    static.header.frame_id, static.child_frame_id = "base", "scene_cam_optical_frame"
    static.transform = matrix_to_transform(T_base_cam_told)
    rec.write("/tf_static", T0_NS, serialize_message(TFMessage(transforms=[static])))
    for k, q in enumerate(poses_q):
        sim.reset(np.append(q, 1.0))
        t_ns = T0_NS + (k + 1) * 100_000_000
        for dt in (-50_000_000, 0, 50_000_000):  # the arm "moving": TF around the image stamp
            tf = TFMessage()
            for parent, child, T in sim.link_transforms():
                m = TransformStamped()
                _stamp(m.header, t_ns + dt)
                m.header.frame_id, m.child_frame_id = parent, names.get(child, child)
                m.transform = matrix_to_transform(T)
                tf.transforms.append(m)
            rec.write("/tf", t_ns + dt, serialize_message(tf))
        rgb = sim.render("scene", W, H)
        img = Image(height=H, width=W, encoding="rgb8", step=3 * W, data=rgb.tobytes())
        _stamp(img.header, t_ns)
        img.header.frame_id = "scene_cam_optical_frame"
        info = CameraInfo(**camera_info_fields(sim.intrinsics("scene", W, H)), width=W, height=H)
        _stamp(info.header, t_ns)
        info.header.frame_id = "scene_cam_optical_frame"
        rec.write("/scene_cam/image_raw", t_ns + 1000, serialize_message(img))
        rec.write("/scene_cam/camera_info", t_ns + 1000, serialize_message(info))
    rec.close()


@pytest.fixture(scope="module")
def rig():
    config = SimConfig(n_cubes=0, scene_extras=(MarkerMount(SPEC),), scene_cam_true_offset_T=KNOCK)
    sim = YamSim(config)
    yield sim, told_frames(config).T_base_scene_cam
    sim.close()


def _operation_poses(n: int = 40, seed: int = 0) -> list[np.ndarray]:
    """Arm poses of pick-and-place work: the gripper down over the workspace at varied heights and yaws."""
    rng = np.random.default_rng(seed)
    home = np.array([0.0, 1.7, 1.55, -1.4, 0.0, 0.0])
    out = []
    for _ in range(n):
        q = home.copy()
        q[0] += rng.uniform(-0.35, 0.35)
        q[1] += rng.uniform(-0.25, 0.25)
        q[2] += rng.uniform(-0.25, 0.25)
        q[3] += rng.uniform(-0.2, 0.2)
        q[5] += rng.uniform(-0.5, 0.5)
        out.append(q)
    return out


def test_refine_brings_the_told_pose_back_to_the_truth(rig, tmp_path, capsys):
    sim, T_told = rig
    bag = tmp_path / "operation"
    write_operation_bag(bag, sim, T_told, _operation_poses())
    out = tmp_path / "calibration.yaml"
    assert calib.main(["refine", str(bag), "--out", str(out)]) == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    truth = sim.T_world_cam("scene")
    T = load_calibration(out).camera("scene_cam").T_parent_child()
    told_mm, told_deg = pose_error(T_told, truth)
    mm, deg = pose_error(T, truth)
    print(f"told {told_mm:.1f} mm / {told_deg:.2f} deg from the truth; refined {mm:.2f} mm / {deg:.3f} deg\n{printed}")
    assert told_mm > 9.0 and told_deg > 0.9  # the knock is really there
    assert mm < 2.0 and deg < 0.2
    assert "coverage: marker positions spread" in printed and "from the told one" in printed
    assert np.allclose(
        load_calibration(out).camera("scene_cam").T_board(), sim.T_parent_child("gripper", MARKER_BODY), atol=1e-9
    )  # the marker's mount is written as it was given (held fixed)
    assert calib.main(["refine", str(bag), "--out", str(out)]) == 1  # never over an existing file


def test_refine_refuses_a_recording_of_the_arm_at_rest(rig, tmp_path, capsys):
    sim, T_told = rig
    bag = tmp_path / "rest"
    write_operation_bag(bag, sim, T_told, [np.array([0.0, 1.7, 1.55, -1.4, 0.0, 0.0])] * 30)
    out = tmp_path / "calibration.yaml"
    assert calib.main(["refine", str(bag), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert "hardly moves" in err and "spread 0 / 0 / 0 mm" in err and "Nothing was written" in err
    assert not out.exists()
    assert calib.main(["refine", str(bag), "--out", str(out), "--marker-id", "7"]) == 1  # another marker: none found
    assert "found in none of the 30" in capsys.readouterr().err and not out.exists()
