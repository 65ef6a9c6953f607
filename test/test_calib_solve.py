"""``para-calib solve`` (and ``board``, ``capture --dry-run``) on real rosbag2 files rendered by the simulator, without
ROS processes: the recordings are written here from :class:`YamSim` renders at arm poses, with the topics a capture
records (images, CameraInfo, /tf, /joint_states), so the reading, detection, solving and file writing are exercised
end to end; then every kind of bad input: nothing written, a message that says what is missing.

Truth (scene camera rendered 5 cm / 5 deg away from its configured pose) is composed here from the offset.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from para_core.calibration.board import CharucoBoardSpec
from para_ros.calibration.solve import pose_error
from para_ros.commands import calib
from para_ros.sim.calibration_board import BoardMount, offset_T
from para_ros.sim.yam_scene import GRASP_SITE, WRIST_CAM_BODY, SimConfig, YamSim

SPEC = CharucoBoardSpec()
W, H = 320, 240
OFFSET = offset_T((0.04, -0.03, 0.0), (3.0, -4.0, 0.0))
T0_NS = 1_700_000_000 * 10**9


def _serialize(msg) -> bytes:
    from rclpy.serialization import serialize_message

    return serialize_message(msg)


def write_sim_bag(path, sim: YamSim, poses_q, zero_focal: bool = False, with_tf: bool = True) -> None:
    """A recording of ``sim`` at each arm pose (1 s apart, the arm still): both cameras, TF, joint states."""
    from geometry_msgs.msg import TransformStamped
    from sensor_msgs.msg import CameraInfo, Image, JointState
    from tf2_msgs.msg import TFMessage

    from para_ros.adapters.transforms import matrix_to_transform
    from para_ros.bag.recording import McapRecorder
    from para_ros.observation.camera_model import camera_info_fields
    from para_ros.sim.yam_scene import COMMAND_JOINT_NAMES

    topics = {
        "/scene_cam/image_raw": "sensor_msgs/msg/Image",
        "/scene_cam/camera_info": "sensor_msgs/msg/CameraInfo",
        "/wrist_cam/image_raw": "sensor_msgs/msg/Image",
        "/wrist_cam/camera_info": "sensor_msgs/msg/CameraInfo",
        "/tf": "tf2_msgs/msg/TFMessage",
        "/joint_states": "sensor_msgs/msg/JointState",
    }
    names = {WRIST_CAM_BODY: "wrist_cam_optical_frame", GRASP_SITE: GRASP_SITE}
    rec = McapRecorder(path, topics)
    for k, q in enumerate(poses_q):
        sim.reset(np.append(q, 1.0))
        t_ns = T0_NS + k * 10**9
        for dt in (-300_000_000, -100_000_000, 0, 100_000_000, 300_000_000):
            sec, nsec = divmod(t_ns + dt, 10**9)
            tf = TFMessage()
            for parent, child, T in sim.link_transforms():
                m = TransformStamped()
                m.header.stamp.sec, m.header.stamp.nanosec = sec, nsec
                m.header.frame_id, m.child_frame_id = parent, names.get(child, child)
                m.transform = matrix_to_transform(T)
                tf.transforms.append(m)
            if with_tf:
                rec.write("/tf", t_ns + dt, _serialize(tf))
            js = JointState(
                name=list(COMMAND_JOINT_NAMES),
                position=[float(v) for v in sim.joint_positions()],
                velocity=[0.0] * 7,
                effort=[0.0] * 7,
            )  # rosbags refuses rclpy's CDR of empty sequences
            js.header.stamp.sec, js.header.stamp.nanosec = sec, nsec
            rec.write("/joint_states", t_ns + dt, _serialize(js))
        sec, nsec = divmod(t_ns, 10**9)
        for cam, ns, frame in (
            ("scene", "/scene_cam", "scene_cam_optical_frame"),
            ("wrist", "/wrist_cam", "wrist_cam_optical_frame"),
        ):
            rgb = sim.render(cam, W, H)
            img = Image(height=H, width=W, encoding="rgb8", step=3 * W, data=rgb.tobytes())
            img.header.stamp.sec, img.header.stamp.nanosec, img.header.frame_id = sec, nsec, frame
            info = CameraInfo(**camera_info_fields(sim.intrinsics(cam, W, H)), width=W, height=H)
            if zero_focal:
                info.k = [0.0] * 9
            info.header.stamp.sec, info.header.stamp.nanosec, info.header.frame_id = sec, nsec, frame
            rec.write(f"{ns}/image_raw", t_ns + 1000, _serialize(img))
            rec.write(f"{ns}/camera_info", t_ns + 1000, _serialize(info))
    rec.close()


@pytest.fixture(scope="module")
def flange_sim():
    sim = YamSim(SimConfig(n_cubes=0, calibration_board=BoardMount(SPEC, "flange"), scene_cam_true_offset_T=OFFSET))
    yield sim
    sim.close()


@pytest.fixture(scope="module")
def plan_q():
    from para_ros.deploy.calibration_capture import CaptureSettings, make_plan, sim_centre_q

    plan = make_plan(CaptureSettings(out="unused", camera="scene_cam", poses=10), sim_centre_q())
    return [p.q_rad for p in plan.poses]


@pytest.fixture(scope="module")
def good_bag(tmp_path_factory, flange_sim, plan_q):
    path = tmp_path_factory.mktemp("calib") / "good"
    write_sim_bag(path, flange_sim, plan_q)
    return path


def test_solve_recovers_the_scene_camera_and_writes_the_file_and_overlay(good_bag, tmp_path, capsys):
    from para_core.calibration.calibration_file import load_calibration

    out = tmp_path / "cal.yaml"
    assert calib.main(["solve", str(good_bag), "--camera", "scene_cam", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "reprojection rms" in printed and "rotation coverage" in printed and "handeye_rot_deg" in printed
    cam = load_calibration(out).camera("scene_cam")
    assert cam.parent_frame == "base" and cam.frame_id == "scene_cam_optical_frame"
    mm, deg = pose_error(cam.T_parent_child(), SimConfig().scene_cam_T_world_cam() @ OFFSET)
    assert mm < 2.0 and deg < 0.2, (mm, deg)
    assert (tmp_path / "cal_scene_cam_overlay.png").is_file()
    # Never over an existing file without --force; with it, yes.
    before = out.read_bytes()
    assert calib.main(["solve", str(good_bag), "--out", str(out)]) == 2
    assert out.read_bytes() == before
    assert calib.main(["solve", str(good_bag), "--out", str(out), "--force"]) == 0


def _refused(capsys, args, out, *words):
    assert calib.main(args) == 1
    err = capsys.readouterr().err
    for w in words:
        assert w in err, err
    assert "Nothing was written" in err
    assert not out.exists()


def test_bad_input_is_refused_and_nothing_written(good_bag, flange_sim, plan_q, tmp_path, capsys):
    out = tmp_path / "cal.yaml"
    # The board options do not match the printed board: no board found.
    _refused(capsys, ["solve", str(good_bag), "--squares-x", "6", "--out", str(out)], out, "found in none")
    # No TF for the arm.
    no_tf = tmp_path / "no_tf"
    write_sim_bag(no_tf, flange_sim, plan_q[:2], with_tf=False)
    _refused(capsys, ["solve", str(no_tf), "--out", str(out)], out, "TF")
    # An uncalibrated CameraInfo (focal length 0).
    zero = tmp_path / "zero"
    write_sim_bag(zero, flange_sim, plan_q[:2], zero_focal=True)
    _refused(capsys, ["solve", str(zero), "--out", str(out)], out, "focal length")
    # Too few samples.
    few = tmp_path / "few"
    write_sim_bag(few, flange_sim, plan_q[:2])
    _refused(capsys, ["solve", str(few), "--out", str(out)], out, "sample")
    # Rotations about one axis only (joint6 alone turns the flange about its own z): degenerate.
    centre = np.asarray(plan_q[0])
    one_axis = [centre + np.array([0, 0, 0, 0, 0, a]) for a in np.radians([-20, -12, -5, 0, 5, 12, 20])]
    flat = tmp_path / "one_axis"
    write_sim_bag(flat, flange_sim, one_axis)
    _refused(capsys, ["solve", str(flat), "--out", str(out)], out, "axis")
    # Not a recording at all.
    assert calib.main(["solve", str(tmp_path / "missing"), "--out", str(out)]) == 1
    assert not out.exists()


def test_capture_dry_run_lists_poses_inside_the_limits(capsys):
    from para_ros.deploy.calibration_capture import CaptureSettings, make_plan, sim_centre_q
    from para_ros.robot.yam import load_yam_config
    from para_ros.robot.yam_ik import YamKinematics

    assert calib.main(["capture", "--out", "unused", "--dry-run", "--camera", "wrist_cam"]) == 0
    assert "poses" in capsys.readouterr().out
    yam = load_yam_config()
    kin = YamKinematics()
    for camera in ("scene_cam", "wrist_cam"):
        plan = make_plan(CaptureSettings(out="unused", camera=camera, poses=16, angle_deg=40.0), sim_centre_q())
        assert len(plan.poses) >= 6
        for p in plan.poses:  # checked here by plain comparisons against config/yam.yaml
            assert np.all(p.q_rad >= np.asarray(yam.limits.joint_lower_rad)) and np.all(
                p.q_rad <= np.asarray(yam.limits.joint_upper_rad)
            )
            tool = kin.fk(p.q_rad)[:3, 3]
            assert np.all(tool >= yam.limits.workspace_min_m) and np.all(tool <= yam.limits.workspace_max_m)
        axes = np.array([p.axis for p in plan.poses])
        assert np.linalg.matrix_rank(axes, tol=0.3) == 3  # rotations about clearly different axes


def test_board_command_writes_png_and_pdf_and_never_overwrites(tmp_path, capsys):
    out = tmp_path / "board"
    assert calib.main(["board", "--out", str(out)]) == 0
    assert (tmp_path / "board.png").stat().st_size > 0 and (tmp_path / "board.pdf").read_bytes()[:4] == b"%PDF"
    assert calib.main(["board", "--out", str(out)]) == 2
    assert calib.main(["board", "--out", str(out), "--force"]) == 0


class _Session:
    """What ArmMover needs of a CaptureSession: a command backend, alive, no own state."""

    own_state = False

    def __init__(self, backend):
        self.backend = backend

    def alive(self) -> bool:
        return True


class _DriftingBackend:
    """An arm that never settles: each read is 0.01 rad further; records what is sent."""

    name = "drifting"

    def __init__(self, q0):
        self.q = np.asarray(q0, dtype=float).copy()
        self.sent = []

    def read_joints(self):
        self.q = self.q + 0.01
        return self.q.copy(), 1.0

    def send(self, command):
        self.sent.append(command)

    def describe(self):
        return self.name


def test_moves_stay_within_every_limit_and_a_stuck_pose_holds_the_arm():
    from para_ros.deploy.calibration_capture import ArmMover, CaptureAborted, CaptureSettings, sim_centre_q
    from para_ros.execution.backends import RecordingBackend
    from para_ros.robot.yam import load_yam_config
    from para_ros.robot.yam_ik import YamKinematics

    yam = load_yam_config()
    kin = YamKinematics()
    settings = CaptureSettings(
        out="unused", control_rate_hz=100.0, speed_fraction=1.0, settle_s=0.05, sample_timeout_s=0.3
    )
    q0 = sim_centre_q()
    backend = RecordingBackend(q0, gripper0=1.0)  # a perfect arm: measured = commanded
    mover = ArmMover(_Session(backend), yam, kin, settings)
    target = q0 + np.array([0.4, -0.2, 0.2, 0.3, -0.3, 0.5])
    mover.move_to(target)
    qs = np.array([q0] + [c.q_rad for c in backend.commands])  # (N, 6)
    dt = 1.0 / settings.control_rate_hz
    speeds = np.abs(np.diff(qs, axis=0)) / dt  # (N-1, 6), checked here against config/yam.yaml
    assert np.all(speeds <= np.asarray(yam.limits.max_joint_speed_rad_s) * 1.001)
    tool = np.array([kin.fk(q)[:3, 3] for q in qs])
    assert np.all(np.linalg.norm(np.diff(tool, axis=0), axis=1) / dt <= yam.limits.max_ee_speed_m_s * 1.001)
    assert np.allclose(qs[-1], target, atol=1e-9)
    # A target outside the joint range: refused, nothing sent.
    n = len(backend.commands)
    outside = target.copy()
    outside[3] = yam.limits.joint_upper_rad[3] + 0.1
    with pytest.raises(CaptureAborted, match="outside"):
        mover.move_to(outside)
    assert len(backend.commands) == n
    # An arm that does not settle: the capture stops and the last command is where the arm was measured (held).
    drifting = _DriftingBackend(q0)
    mover = ArmMover(_Session(drifting), yam, kin, settings)
    with pytest.raises(CaptureAborted, match="did not settle"):
        mover.wait_settled(settings.sample_timeout_s)
    assert drifting.sent and np.allclose(drifting.sent[-1].q_rad, drifting.q, atol=1e-12)
    assert not drifting.sent[-1].moving


def test_capture_with_the_sdk_writes_joint_states_and_tf_a_reader_understands(tmp_path):
    """Backend i2rt: capture owns the arm, so it writes /joint_states and the arm's /tf itself (no CAN here: the
    writer is driven directly with the SDK-less frames of config/yam.yaml); the bag must read back with rosbags and
    give the flange pose FK says."""
    import threading
    import types

    from para_ros.bag.reader import BagReader, BagTopicConfig
    from para_ros.bag.recording import McapRecorder
    from para_ros.deploy.calibration_capture import CaptureSession, CaptureSettings, sim_centre_q
    from para_ros.robot.yam import load_yam_config
    from para_ros.robot.yam_frames import YamFrames

    settings = CaptureSettings(out=tmp_path / "bag", robot="i2rt")
    yam = load_yam_config()
    frames = YamFrames(yam.wrist_camera)
    fake = types.SimpleNamespace(
        settings=settings,
        frames=frames,
        lock=threading.Lock(),
        recording=True,
        recorder=McapRecorder(tmp_path / "bag", settings.recorded_topics()),
    )
    q = sim_centre_q()
    for _ in range(3):
        CaptureSession.write_own_state(fake, q, 1.0)
        time.sleep(0.01)
    fake.recorder.close()
    with BagReader(tmp_path / "bag", BagTopicConfig(ee_frame="gripper"), cameras=False) as bag:
        _, js = next(iter(bag.messages("/joint_states")))
        assert list(js.name) == [*yam.model.joint_names, "gripper"]
        assert np.allclose(js.position[:6], q)
        stamp = int(js.header.stamp.sec) * 10**9 + int(js.header.stamp.nanosec)
        T_chain = np.eye(4)
        for _parent, child, T in frames.transforms(q):
            if child in ("link1", "link2", "link3", "link4", "link5", "gripper"):
                T_chain = T_chain @ T
        assert np.allclose(bag.lookup("gripper", stamp), T_chain, atol=1e-6)
