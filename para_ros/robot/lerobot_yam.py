"""Joint positions of a LeRobot YAM dataset -> the poses PARA trains on, from a calibration file and the YAM's FK.

Datasets recorded with LeRobot's YAM plugins hold joint positions and images, no camera geometry. The calibration
file (``para_core.calibration.calibration_file``, read with ``load_calibration``: ``cameras.scene_cam`` is the fixed
camera's pose in ``base``, ``cameras.wrist_cam`` the wrist mount in ``gripper``) plus forward kinematics on the I2RT
SDK's model (``para_ros.robot.yam_frames``, the frames the executor publishes on a real arm) give per frame: the tool
pose ``base <- grasp_site`` and each camera's pose in ``base``. A calibration file without ``wrist_cam`` keeps
``config/yam.yaml``'s mount. A view's intrinsics come from its camera's optional ``camera_matrix`` (OpenCV
convention, converted to ``para_core``'s by ``para_ros.observation.camera_model``; its ``image_size``, when given,
must be the dataset's image size), else from ``--intrinsics``.
"""

from __future__ import annotations

import numpy as np

from para_core.calibration.calibration_file import CalibrationFile
from para_core.data.lerobot_dataset import LeRobotDataError
from para_core.model.pixel_convention import ros_K_to_para
from para_ros.robot.yam import WristCameraMount, load_yam_config
from para_ros.robot.yam_frames import YamFrames

VIEW_TO_CALIBRATION_CAMERA = {"scene": "scene_cam", "wrist": "wrist_cam"}


def intrinsics_from_calibration(
    calibration: CalibrationFile, views=("scene", "wrist"), image_wh: dict[str, tuple[int, int]] | None = None
) -> dict[str, np.ndarray]:
    """view -> (3, 3) float64 K in ``para_core``'s pixel convention, for the ``views`` whose calibration camera
    carries a ``camera_matrix`` (the others are left out).

    :param image_wh: view -> (width, height) of the dataset's images. A camera whose ``image_size`` differs raises
        LeRobotDataError: its matrix does not describe those images.
    """
    out = {}
    for view in views:
        name = VIEW_TO_CALIBRATION_CAMERA.get(view)
        cam = calibration.cameras.get(name)
        if cam is None or not cam.has_intrinsics:
            continue
        wh = (image_wh or {}).get(view)
        if cam.image_size is not None and wh is not None and tuple(wh) != tuple(cam.image_size):
            raise LeRobotDataError(
                f"calibration cameras.{name}.image_size is {cam.image_size[0]}x{cam.image_size[1]} but the dataset's "
                f"{view} images are {wh[0]}x{wh[1]}: its camera_matrix does not describe them. Calibrate the "
                f"intrinsics at the dataset's size or give --intrinsics {view}=fx,fy,cx,cy"
            )
        out[view] = ros_K_to_para(cam.K())  # (3, 3)
    return out


def ignored_distortion(calibration: CalibrationFile, views=("scene", "wrist")) -> list[str]:
    """Warnings for the ``views`` whose camera has non-zero ``distortion``: PARA projects with a pinhole model and
    does not undistort a dataset's images."""
    out = []
    for view in views:
        cam = calibration.cameras.get(VIEW_TO_CALIBRATION_CAMERA.get(view))
        if cam is not None and cam.distortion is not None and np.any(np.abs(cam.distortion) > 1e-9):
            out.append(
                f"calibration {VIEW_TO_CALIBRATION_CAMERA[view]} has non-zero distortion "
                f"{list(cam.distortion)} that PARA does not correct: the {view} images are used as recorded"
            )
    return out


def yam_joints_to_poses(calibration: CalibrationFile, views=("scene", "wrist"), yam_config_path: str | None = None):
    """-> callable (N, 6) arm joints, radians -> (T_base_tool (N, 4, 4), {view: T_base_cam (N, 4, 4)})."""
    cfg = load_yam_config(yam_config_path)
    cams = calibration.cameras
    mount = cfg.wrist_camera
    if "wrist_cam" in cams:
        wrist = cams["wrist_cam"]
        if wrist.parent_frame != "gripper":
            raise LeRobotDataError(
                f"calibration cameras.wrist_cam.parent_frame = {wrist.parent_frame!r}; the wrist "
                "mount must be given in 'gripper' (the joint6 flange): calibrate it eye_in_hand"
            )
        mount = WristCameraMount(
            parent_frame=wrist.parent_frame, frame_id=wrist.frame_id, xyz_m=wrist.xyz_m, quat_xyzw=wrist.quat_xyzw
        )
    T_base_scene = None
    if "scene_cam" in cams:
        scene = cams["scene_cam"]
        if scene.parent_frame != "base":
            raise LeRobotDataError(
                f"calibration cameras.scene_cam.parent_frame = {scene.parent_frame!r}; the scene "
                "camera's pose must be given in 'base': calibrate it eye_to_hand"
            )
        T_base_scene = scene.T_parent_child()  # (4, 4)
    if "scene" in views and T_base_scene is None:
        raise LeRobotDataError(
            "the calibration file has no scene_cam (the fixed camera's pose in base); calibrate it "
            "or leave the scene view out"
        )
    frames = YamFrames(mount, cfg.model.arm_type, cfg.model.gripper_type)

    def convert(q_rad: np.ndarray):
        q_rad = np.asarray(q_rad, dtype=float)  # (N, 6)
        T_tool = np.zeros((q_rad.shape[0], 4, 4))
        T_cam = {v: np.zeros((q_rad.shape[0], 4, 4)) for v in views}
        for i, q in enumerate(q_rad):
            T = np.eye(4)
            T_base_gripper = T_wrist = None  # set along the chain: "gripper" comes before its children
            for _parent, child, T_pc in frames.transforms(q):
                if child == frames.tool_site:
                    T_tool[i] = T_base_gripper @ T_pc
                elif child == mount.frame_id:
                    T_wrist = T_base_gripper @ T_pc
                else:
                    T = T @ T_pc
                    if child == "gripper":
                        T_base_gripper = T.copy()
            if "wrist" in views:
                T_cam["wrist"][i] = T_wrist
            if "scene" in views:
                T_cam["scene"][i] = T_base_scene
        return T_tool, T_cam

    return convert


def wrist_mount_record(
    episodes, calibration: CalibrationFile | None = None, yam_config_path: str | None = None
) -> dict:
    """The wrist camera's mount (its optical frame's pose in ``gripper``, the joint6 flange) for an export's metadata.

    From the calibration file's ``wrist_cam`` when it has one; otherwise from the data: each frame's wrist-camera pose
    in the tool frame (``inv(T_base_tool) @ T_base_wrist``) moved to ``gripper`` by the YAM model's fixed
    ``gripper -> grasp_site`` transform. ``max_deviation_m`` is the largest distance of a frame's mount position from
    the first frame's (0 on a rigid mount); ``static`` says it is below 1e-6 m.
    """
    if calibration is not None and "wrist_cam" in calibration.cameras:
        cam = calibration.camera("wrist_cam")
        return {
            "source": "calibration file cameras.wrist_cam",
            "parent_frame": cam.parent_frame,
            "frame_id": cam.frame_id,
            "T_parent_cam": cam.T_parent_child().tolist(),
            "static": True,
        }
    cfg = load_yam_config(yam_config_path)
    frames = YamFrames(cfg.wrist_camera, cfg.model.arm_type, cfg.model.gripper_type)
    T_gripper_tool = next(T for parent, child, T in frames.transforms(np.zeros(6)) if child == frames.tool_site)
    T_tool_cam = np.concatenate(
        [np.linalg.inv(ep.T_world_ee) @ ep.T_world_cam["wrist"] for ep in episodes]
    )  # (N, 4, 4): the wrist camera in the tool frame, every frame
    tool_frames = {str(ep.meta.get("ee_frame") or frames.tool_site) for ep in episodes}
    if tool_frames == {frames.tool_site}:
        parent, source = "gripper", "the data: wrist camera pose in the tool frame, moved to gripper by the YAM model"
        T_gripper_cam = T_gripper_tool @ T_tool_cam  # (N, 4, 4)
    else:  # the episodes' tool is not the model's tool site: keep the mount in the tool frame the data gives
        parent, source = ",".join(sorted(tool_frames)), "the data: wrist camera pose in the episodes' tool frame"
        T_gripper_cam = T_tool_cam
    deviation = float(np.linalg.norm(T_gripper_cam[:, :3, 3] - T_gripper_cam[0, :3, 3], axis=1).max())
    return {
        "source": source,
        "parent_frame": parent,
        "frame_id": cfg.wrist_camera.frame_id,
        "T_parent_cam": T_gripper_cam[0].tolist(),
        "static": deviation < 1e-6,
        "max_deviation_m": deviation,
    }
