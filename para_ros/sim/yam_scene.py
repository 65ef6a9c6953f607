"""A MuJoCo scene of the I2RT YAM arm (linear_4310 gripper) on a table, with an overhead and a wrist camera.

ROS-free: the ``sim_node`` wraps :class:`YamSim` into topics; tests drive it directly.

The scene is built with ``mujoco.MjSpec`` on top of the MJCF that the i2rt SDK ships
(``combine_arm_and_gripper_xml(ArmType.YAM, GripperType.LINEAR_4310)``; its temporary XML is deleted at once):

* World frame = the arm's ``base`` body frame: the SDK puts ``base`` at the MuJoCo world origin with identity
  orientation (checked at build time), so every pose this module returns is in ``base`` (z up, metres).
  The table top is the plane z = 0 the base stands on.
* Position servos on the 7 command joints: ``joint1`` .. ``joint6`` (radians) and the gripper (command 0 closed ..
  1 open, mapped linearly onto the finger slide ``joint7``'s range; ``joint8`` follows it by the SDK's equality).
  Gravity is compensated on the arm bodies (``gravcomp``), like the real arm's gravity-compensation torque.
* Camera ``scene``: fixed, pose from :class:`SimConfig` (position + look-at, or a ``T_world_cam``).
* Camera ``wrist``: on body ``gripper`` (the joint6 flange) at the real D405 mount from the SDK's
  ``yam_station_linear_4310_d405`` model: flange -> optical frame xyz (0, -0.0704, 0.0770) m,
  quat (w, x, y, z) (-0.976, 0.216, 0, 0). The body ``wrist_cam_optical`` IS that optical frame.
* ``grasp_marker``: a 5 mm sphere at ``grasp_site`` in geom group 5 (hidden by default). Tests render only that group
  to find where MuJoCo draws the grasp site, an independent check of the camera model.
* Rendering is cheap on CPU: anti-aliasing off, no shadows, no reflections (docs/benchmarks.md, "Simulator").
* Grasping (``finger_collision="boxes"``, the default): MuJoCo collides a mesh as its convex hull, and each
  linear_4310 finger mesh is L-shaped, so the two hulls form a tent over a cube and nothing can be lifted (measured: 0
  of 20 scripted grasps). The finger meshes are therefore kept for rendering only (``contype = conaffinity = 0``) and
  each finger body gets two invisible, massless collision boxes fitted to its mesh vertices at build time: the
  fingertip pad (the last :data:`PAD_HEIGHT_M` of the finger along the gripper's z) and the finger segment above it.
  ``finger_collision="mesh"`` keeps the SDK's hull collision (for comparison).
* ``target_pad``: a flat coloured square on the table (no collision) on a mocap body, the visible place target of the
  pick-and-place task (:mod:`para_ros.sim.pick_place`); :meth:`YamSim.set_target_position` moves it.

Threading: with ``MUJOCO_GL=egl`` an OpenGL context belongs to the thread that created it. :class:`YamSim` creates
its renderers lazily on the first :meth:`YamSim.render` and refuses (clear error) to render from another thread.
Physics calls are not locked: drive one :class:`YamSim` from one thread.
"""

from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass, field

import mujoco
import numpy as np

from para_core.model.rotations import make_matrix
from para_ros.robot.yam import load_yam_config
from para_ros.sim.cameras import (
    QUAT_WXYZ_MJCAM_OPTICAL,
    R_MJCAM_OPTICAL,
    intrinsics_from_fovy,
    look_at_T_world_cam,
    mjcam_to_T_world_optical,
    rotation_matrix_to_quat_wxyz,
)
from para_ros.sim.pick_place import sample_layout

# The YAM's arm description (config/yam.yaml): the arm joints the servos drive and the wrist-camera mount come from
# it, the single source the executor uses too. The scene around them (gripper, cameras, table) is the YAM rig's.
YAM = load_yam_config()
ARM_JOINT_NAMES = YAM.joint_names  # joint1 .. joint6
N_ARM_JOINTS = len(ARM_JOINT_NAMES)
GRIPPER_INDEX = N_ARM_JOINTS  # the gripper's place in a command vector (after the arm joints)
GRIPPER_NAME = "gripper"  # the command / JointState name of the gripper (0 closed .. 1 open)
COMMAND_JOINT_NAMES = ARM_JOINT_NAMES + (GRIPPER_NAME,)
GRIPPER_SLIDE_JOINT = "joint7"  # MuJoCo finger slide driven by the gripper command; joint8 mirrors it
# The kinematic chain published on /tf: (parent, child) body names, base first.
ARM_LINK_CHAIN = ("base", "link1", "link2", "link3", "link4", "link5", "gripper")
CAMERA_NAMES = ("scene", "wrist")
GRASP_SITE = "grasp_site"
WRIST_CAM_BODY = "wrist_cam_optical"
MARKER_GEOM = "grasp_marker"
MARKER_GROUP = 5  # geom group of test-only markers; MuJoCo shows groups 0-2 by default
COLLISION_GROUP = 3  # geom group of the invisible finger collision boxes (hidden by default)
FINGER_BODIES = ("tip_left", "tip_right")
TARGET_BODY = "target_pad"
FINGER_COLLISIONS = ("boxes", "mesh")
# Finger collision boxes, along the gripper body's z (the fingers' length), measured from the finger's far end:
# the pad is the last 18 mm, the segment box spans 28..60 mm from the end (yam-sim.md, "Grasping").
PAD_HEIGHT_M = 0.018
SEGMENT_FROM_END_M = (0.028, 0.060)
# The two lamps of the training scene (no shadows): direction (world) and diffuse level before ``light_scale``.
LAMP_POSITIONS_M = ((0.3, -0.6, 1.5), (0.3, 0.6, 1.5))
LAMP_DIRECTIONS = ((0.0, 0.4, -1.0), (0.0, -0.4, -1.0))
LAMP_DIFFUSE = 0.45
TABLE_RGBA = (0.78, 0.74, 0.66, 1.0)


def _wrist_mount_from_yam_yaml() -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The D405 wrist mount (flange ``gripper`` -> optical frame) from ``config/yam.yaml``'s ``wrist_camera``, the
    single source the executor's TF uses too: (xyz metres, quaternion (w, x, y, z) as MuJoCo wants it)."""

    mount = YAM.wrist_camera
    if mount.parent_frame != "gripper":
        raise ValueError(
            f"config/yam.yaml wrist_camera.parent_frame={mount.parent_frame!r}: the simulator mounts the "
            "wrist camera on body 'gripper' only"
        )
    x, y, z, w = (float(v) for v in mount.quat_xyzw)
    return tuple(float(v) for v in mount.xyz_m), (w, x, y, z)


# D405 wrist mount, from i2rt robot_models/station/yam_station_linear_4310_d405 (flange `gripper` -> optical frame).
WRIST_CAM_POS_IN_GRIPPER_M, WRIST_CAM_QUAT_WXYZ_IN_GRIPPER = _wrist_mount_from_yam_yaml()

# Gripper pointing straight down about 0.15 m above the workspace centre (x about 0.3 m), open.
DEFAULT_HOME_Q7 = (0.0, 1.7, 1.55, -1.4, 0.0, 0.0, 1.0)


def _vec(value, n: int, name: str) -> tuple[float, ...]:
    try:
        out = tuple(float(v) for v in value)
    except TypeError:
        raise ValueError(f"{name}={value!r} must be a list of {n} numbers") from None
    if len(out) != n or not all(math.isfinite(v) for v in out):
        raise ValueError(f"{name}={value!r} must be {n} finite numbers")
    return out


@dataclass
class SimConfig:
    """Parameters of the simulated rig.

    Args:
        scene_cam_pos_m: scene camera centre in ``base``, metres. Used with ``scene_cam_look_at_m`` unless
            ``scene_T_world_cam`` is given.
        scene_cam_look_at_m: world point the scene camera's optical axis passes through, metres.
        scene_cam_up_hint: world direction that appears "up" in the scene image.
        scene_T_world_cam: optional 4x4 (or 16 row-major numbers) OpenCV-optical pose of the scene camera;
            overrides position/look-at when set.
        scene_cam_fovy_deg: vertical field of view of the scene camera, degrees.
        wrist_cam_fovy_deg: vertical field of view of the wrist camera, degrees (a D405 has about 58 deg vertical
            at 848x480; a square crop of it keeps that).
        n_cubes: number of free cubes on the table.
        cube_half_size_m: half edge of each cube, metres.
        cube_rgba: colour of cube 0 (the task's cube); further cubes take colours of a fixed palette.
        finger_collision: ``"boxes"`` (fitted collision boxes, the fingers can grasp) or ``"mesh"`` (the SDK's
            convex hulls; cannot grasp). See the module docstring.
        target_pad: add the visible place target (no collision).
        target_half_size_m: half edge of the square target pad, metres.
        target_rgba: colour of the target pad.
        table_rgba: colour of the table top.
        n_distractor_slots: visual-only distractor objects the model holds (hidden until
            :func:`para_ros.sim.rig_randomisation.apply_rig` places them); 0 keeps the training scene's model.
        light_scale: multiplies the diffuse light of the scene's lamps (lighting variation for evaluation).
        object_region_m: ((x_lo, x_hi), (y_lo, y_hi)) where cubes are dropped by :meth:`YamSim.reset_objects`.
        timestep_s: physics step, seconds.
        servo_kp: position servo stiffness of the arm joints (N m / rad); kv is chosen for critical damping.
        gripper_kp: position servo stiffness of the finger slide (N / m).
        home_q7: initial command (the arm joints of config/yam.yaml in radians, 6 for the YAM, + gripper 0..1).
        max_render_size: largest image side the offscreen buffer allows, pixels.
        seed: seed of the initial object layout.
        calibration_board: a ChArUco board on the flange or the table
            (:class:`para_ros.sim.calibration_board.BoardMount`), or None.
        scene_cam_true_offset_T: (4, 4) or None: the scene camera is RENDERED at ``scene_cam_T_world_cam() @
            offset`` (offset in its own optical frame), a pose the graph is not told (calibration tests).
        wrist_cam_true_offset_T: (4, 4) or None: the wrist camera is rendered at the ``config/yam.yaml`` mount
            ``@ offset``.
        scene_extras: further things to add to the model, each with an ``add_to_spec(spec)`` method (the
            run-time disturbances' occluder, :mod:`para_ros.sim.disturbances`; the calibration monitor's marker,
            :mod:`para_ros.sim.calibration_marker`); empty keeps the model as it is.
    """

    scene_cam_pos_m: tuple = (0.33, -0.5, 0.6)
    scene_cam_look_at_m: tuple = (0.33, 0.0, 0.03)
    scene_cam_up_hint: tuple = (0.0, 0.0, 1.0)
    scene_T_world_cam: object = None
    scene_cam_fovy_deg: float = 38.0
    wrist_cam_fovy_deg: float = 58.0
    n_cubes: int = 1
    cube_half_size_m: float = 0.02
    cube_rgba: tuple = (0.85, 0.15, 0.15, 1.0)
    finger_collision: str = "boxes"
    target_pad: bool = True
    target_half_size_m: float = 0.04
    target_rgba: tuple = (0.1, 0.7, 0.25, 1.0)
    table_rgba: tuple = TABLE_RGBA
    n_distractor_slots: int = 0
    light_scale: float = 1.0
    object_region_m: tuple = ((0.26, 0.40), (-0.12, 0.12))
    timestep_s: float = 0.002
    servo_kp: float = 60.0
    gripper_kp: float = 400.0
    home_q7: tuple = DEFAULT_HOME_Q7
    max_render_size: int = 1024
    seed: int = 0
    extra: dict = field(default_factory=dict)
    calibration_board: object = None
    scene_cam_true_offset_T: object = None
    wrist_cam_true_offset_T: object = None
    scene_extras: tuple = ()

    def __post_init__(self):
        self.scene_cam_pos_m = _vec(self.scene_cam_pos_m, 3, "scene_cam_pos_m")
        self.scene_cam_look_at_m = _vec(self.scene_cam_look_at_m, 3, "scene_cam_look_at_m")
        self.scene_cam_up_hint = _vec(self.scene_cam_up_hint, 3, "scene_cam_up_hint")
        if self.scene_T_world_cam is not None:
            T = np.asarray(self.scene_T_world_cam, dtype=np.float64)
            if T.size != 16 or not np.all(np.isfinite(T)):
                raise ValueError(f"scene_T_world_cam must be a 4x4 matrix (or 16 numbers), got {T.shape}")
            T = T.reshape(4, 4)
            R = T[:3, :3]
            if not np.allclose(R @ R.T, np.eye(3), atol=1e-6) or np.linalg.det(R) < 0:
                raise ValueError(
                    "scene_T_world_cam's rotation is not a proper rotation matrix; give an orthonormal "
                    "right-handed 3x3 block (OpenCV optical frame: x right, y down, z forward)"
                )
            self.scene_T_world_cam = T
        elif np.allclose(self.scene_cam_pos_m, self.scene_cam_look_at_m):
            raise ValueError(f"scene_cam_pos_m {self.scene_cam_pos_m} equals scene_cam_look_at_m; move one of them")
        for name in ("scene_cam_fovy_deg", "wrist_cam_fovy_deg"):
            v = float(getattr(self, name))
            if not 1.0 <= v <= 170.0:
                raise ValueError(f"{name}={v} must be within [1, 170] degrees")
            setattr(self, name, v)
        if not 0 <= int(self.n_cubes) <= 10:
            raise ValueError(f"n_cubes={self.n_cubes} must be within 0..10")
        self.n_cubes = int(self.n_cubes)
        self.cube_rgba = _vec(self.cube_rgba, 4, "cube_rgba")
        self.target_rgba = _vec(self.target_rgba, 4, "target_rgba")
        self.table_rgba = _vec(self.table_rgba, 4, "table_rgba")
        if not 0 <= int(self.n_distractor_slots) <= 8:
            raise ValueError(f"n_distractor_slots={self.n_distractor_slots} must be within 0..8")
        self.n_distractor_slots = int(self.n_distractor_slots)
        for name in ("cube_rgba", "target_rgba", "table_rgba"):
            if not all(0.0 <= c <= 1.0 for c in getattr(self, name)):
                raise ValueError(f"{name}={getattr(self, name)} must be 4 numbers within [0, 1] (r, g, b, a)")
        if self.finger_collision not in FINGER_COLLISIONS:
            raise ValueError(f"finger_collision={self.finger_collision!r} must be one of {FINGER_COLLISIONS}")
        if not 0.01 <= float(self.target_half_size_m) <= 0.2:
            raise ValueError(f"target_half_size_m={self.target_half_size_m} must be within [0.01, 0.2] m")
        if not 0.0 <= float(self.light_scale) <= 3.0:
            raise ValueError(f"light_scale={self.light_scale} must be within [0, 3]")
        if not 0.005 <= float(self.cube_half_size_m) <= 0.05:
            raise ValueError(f"cube_half_size_m={self.cube_half_size_m} must be within [0.005, 0.05] m")
        (x_lo, x_hi), (y_lo, y_hi) = self.object_region_m
        if not (x_lo < x_hi and y_lo < y_hi):
            raise ValueError(
                f"object_region_m={self.object_region_m} must be ((x_lo, x_hi), (y_lo, y_hi)) with lo < hi"
            )
        if not 1e-4 <= float(self.timestep_s) <= 0.01:
            raise ValueError(f"timestep_s={self.timestep_s} must be within [1e-4, 0.01] s")
        if float(self.servo_kp) <= 0 or float(self.gripper_kp) <= 0:
            raise ValueError(f"servo_kp={self.servo_kp} and gripper_kp={self.gripper_kp} must be positive")
        self.home_q7 = _vec(self.home_q7, N_ARM_JOINTS + 1, "home_q7")
        if not 64 <= int(self.max_render_size) <= 8192:
            raise ValueError(f"max_render_size={self.max_render_size} must be within 64..8192 pixels")

    def scene_cam_true_T_world_cam(self) -> np.ndarray:
        """Where the scene camera is rendered: :meth:`scene_cam_T_world_cam` moved by ``scene_cam_true_offset_T``."""
        T = self.scene_cam_T_world_cam()
        return T if self.scene_cam_true_offset_T is None else T @ np.asarray(self.scene_cam_true_offset_T).reshape(4, 4)

    def wrist_cam_true_T_gripper_cam(self) -> np.ndarray:
        """Where the wrist camera is rendered on body ``gripper`` (4, 4): the ``config/yam.yaml`` mount moved by
        ``wrist_cam_true_offset_T``."""
        w, x, y, z = WRIST_CAM_QUAT_WXYZ_IN_GRIPPER
        T = make_matrix(WRIST_CAM_POS_IN_GRIPPER_M, (x, y, z, w))
        return T if self.wrist_cam_true_offset_T is None else T @ np.asarray(self.wrist_cam_true_offset_T).reshape(4, 4)

    def scene_cam_T_world_cam(self) -> np.ndarray:
        """The scene camera's OpenCV optical pose in ``base`` (4, 4), as configured (before any true offset)."""
        if self.scene_T_world_cam is not None:
            return np.array(self.scene_T_world_cam, dtype=np.float64)
        return look_at_T_world_cam(self.scene_cam_pos_m, self.scene_cam_look_at_m, self.scene_cam_up_hint)


def _load_sdk_spec() -> mujoco.MjSpec:
    """The SDK's combined YAM + linear_4310 MJCF as an MjSpec; the temporary XML the SDK writes is removed."""
    # i2rt: loaded on first use, not on import
    from i2rt.robots.utils import ArmType, GripperType, combine_arm_and_gripper_xml

    path = combine_arm_and_gripper_xml(ArmType.YAM, GripperType.LINEAR_4310)
    try:
        with open(path, encoding="utf-8") as f:
            xml = f.read()
    finally:
        try:
            os.remove(path)
        except OSError:
            pass
    return mujoco.MjSpec.from_string(xml)  # mesh paths in it are absolute


def _mj_quat_of_optical(T_world_cam: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pos, quat wxyz) of the MuJoCo camera frame whose optical frame is ``T_world_cam``."""
    R_mj = T_world_cam[:3, :3] @ R_MJCAM_OPTICAL
    return T_world_cam[:3, 3].copy(), rotation_matrix_to_quat_wxyz(R_mj)


def build_spec(config: SimConfig) -> mujoco.MjSpec:
    """Build the scene's MjSpec (see the module docstring for what it holds)."""
    spec = _load_sdk_spec()
    spec.modelname = "yam_para_sim"
    spec.option.timestep = float(config.timestep_s)

    # Rendering: cheap and deterministic on CPU.
    spec.visual.quality.offsamples = 0
    spec.visual.quality.shadowsize = 0
    spec.visual.global_.offwidth = int(config.max_render_size)
    spec.visual.global_.offheight = int(config.max_render_size)
    spec.visual.headlight.ambient = [0.35, 0.35, 0.35]
    spec.visual.headlight.diffuse = [0.35, 0.35, 0.35]
    spec.visual.headlight.specular = [0.0, 0.0, 0.0]
    spec.visual.map.znear = 0.005  # fraction of the model extent: lets the wrist camera see the fingers

    world = spec.worldbody
    # Lights (no shadows).
    for pos, direction in zip(LAMP_POSITIONS_M, LAMP_DIRECTIONS):
        light = world.add_light()
        light.pos = pos
        light.dir = direction
        light.castshadow = False
        light.diffuse = [LAMP_DIFFUSE * float(config.light_scale)] * 3
        light.specular = [0.0, 0.0, 0.0]

    # Table: a slab whose top is z = 0 (the plane the base stands on).
    table = world.add_geom()
    table.name = "table"
    table.type = mujoco.mjtGeom.mjGEOM_BOX
    table.size = [1.0, 1.0, 0.02]
    table.pos = [0.3, 0.0, -0.02]
    table.rgba = list(config.table_rgba)
    table.friction = [1.0, 0.005, 0.0001]

    # Arm: gravity compensation, joint damping/armature for stable servos, base/link1 contact exclusion
    # (their meshes overlap by ~5 mm and would block joint1).
    for name in ARM_LINK_CHAIN[1:] + ("tip_left", "tip_right"):
        spec.body(name).gravcomp = 1.0
    for name in ARM_JOINT_NAMES:
        joint = spec.joint(name)
        joint.armature = 0.01
        damping = np.zeros(len(joint.damping))
        damping[0] = 0.5  # MuJoCo 4: damping is a 3-vector; the first entry is the linear coefficient
        joint.damping = damping
    for name in (GRIPPER_SLIDE_JOINT, "joint8"):
        joint = spec.joint(name)
        joint.armature = 0.001
        damping = np.zeros(len(joint.damping))
        damping[0] = 2.0
        joint.damping = damping
    exclude = spec.add_exclude()
    exclude.bodyname1 = "base"
    exclude.bodyname2 = "link1"

    # Position servos on the 7 command joints (ctrl in the joint's own units: rad, or metres of finger slide).
    for name in ARM_JOINT_NAMES + (GRIPPER_SLIDE_JOINT,):
        joint = spec.joint(name)
        act = spec.add_actuator()
        act.name = f"servo_{name}"
        act.target = name
        act.trntype = mujoco.mjtTrn.mjTRN_JOINT
        kp = float(config.gripper_kp if name == GRIPPER_SLIDE_JOINT else config.servo_kp)
        act.set_to_position(kp=kp, dampratio=1.0)
        act.ctrllimited = True
        act.ctrlrange = list(joint.range)
        act.forcelimited = True
        act.forcerange = [-20.0, 20.0] if name == GRIPPER_SLIDE_JOINT else [-10.0, 10.0]

    gripper = spec.body("gripper")
    # Test marker at the grasp site (hidden group, no collisions, no mass).
    site = spec.site(GRASP_SITE)
    marker = gripper.add_geom()
    marker.name = MARKER_GEOM
    marker.type = mujoco.mjtGeom.mjGEOM_SPHERE
    marker.size = [0.005, 0, 0]
    marker.group = MARKER_GROUP
    marker.contype = 0
    marker.conaffinity = 0
    marker.density = 0.0
    marker.rgba = [1.0, 0.0, 1.0, 1.0]
    _place_at_site(marker, site)

    # Wrist camera: the optical-frame body at the D405 mount, the MuJoCo camera turned 180 deg about X in it.
    wrist_body = gripper.add_body()
    wrist_body.name = WRIST_CAM_BODY
    T_gripper_wrist = config.wrist_cam_true_T_gripper_cam()
    wrist_body.pos = T_gripper_wrist[:3, 3].tolist()
    wrist_body.quat = rotation_matrix_to_quat_wxyz(T_gripper_wrist[:3, :3]).tolist()
    wrist_cam = wrist_body.add_camera()
    wrist_cam.name = "wrist"
    wrist_cam.quat = list(QUAT_WXYZ_MJCAM_OPTICAL)
    wrist_cam.fovy = float(config.wrist_cam_fovy_deg)

    # Scene camera: fixed in the world.
    pos, quat = _mj_quat_of_optical(config.scene_cam_true_T_world_cam())
    scene_cam = world.add_camera()
    scene_cam.name = "scene"
    scene_cam.pos = pos.tolist()
    scene_cam.quat = quat.tolist()
    scene_cam.fovy = float(config.scene_cam_fovy_deg)

    # Free cubes.
    colours = (
        [0.85, 0.15, 0.15, 1],
        [0.15, 0.65, 0.2, 1],
        [0.15, 0.3, 0.85, 1],
        [0.9, 0.75, 0.1, 1],
        [0.6, 0.2, 0.7, 1],
    )
    h = float(config.cube_half_size_m)
    for i in range(config.n_cubes):
        body = world.add_body()
        body.name = f"cube_{i}"
        body.pos = [0.3, 0.0, h + 0.001]
        body.add_freejoint().name = f"cube_{i}_free"
        geom = body.add_geom()
        geom.name = f"cube_{i}_geom"
        geom.type = mujoco.mjtGeom.mjGEOM_BOX
        geom.size = [h, h, h]
        geom.mass = 0.05
        geom.rgba = list(config.cube_rgba) if i == 0 else colours[i % len(colours)]
        geom.friction = [1.0, 0.005, 0.0001]

    if config.target_pad:
        pad_body = world.add_body()
        pad_body.name = TARGET_BODY
        pad_body.mocap = True
        pad_body.pos = [0.3, 0.15, 0.0]
        pad = pad_body.add_geom()
        pad.name = "target_pad_geom"
        pad.type = mujoco.mjtGeom.mjGEOM_BOX
        t = float(config.target_half_size_m)
        pad.size = [t, t, 0.0005]
        pad.pos = [0.0, 0.0, 0.0006]  # just above the table top, below any cube
        pad.rgba = list(config.target_rgba)
        pad.contype = 0
        pad.conaffinity = 0
        pad.density = 0.0
    for i in range(config.n_distractor_slots):  # visual only: no collision, no mass, hidden below the table
        body = world.add_body()
        body.name = f"distractor_{i}"
        body.mocap = True
        body.pos = [0.3, 0.0, -0.5]
        geom = body.add_geom()
        geom.name = f"distractor_{i}_geom"
        geom.type = mujoco.mjtGeom.mjGEOM_SPHERE
        geom.size = [0.02, 0.02, 0]
        geom.rgba = [0.5, 0.5, 0.5, 0.0]
        geom.contype = 0
        geom.conaffinity = 0
        geom.density = 0.0
    if config.finger_collision == "boxes":
        _add_finger_collision_boxes(spec)
    if config.calibration_board is not None:
        config.calibration_board.add_to_spec(spec)
    for extra in config.scene_extras:
        extra.add_to_spec(spec)
    return spec


def _quat_wxyz(R: np.ndarray) -> list[float]:
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(R, dtype=np.float64).reshape(-1))
    return q.tolist()


def _add_finger_collision_boxes(spec: mujoco.MjSpec) -> None:
    """Replace each finger mesh's (convex-hull) collision by two boxes fitted to the mesh vertices.

    The fit is done on a compiled copy at the model's reference pose: each finger's mesh vertices are expressed in
    the ``gripper`` body frame (z along the fingers), cut into the pad slab (the last :data:`PAD_HEIGHT_M`) and the
    segment slab (:data:`SEGMENT_FROM_END_M` from the end), and each slab's bounding box, aligned with the gripper
    frame, becomes a box geom of the finger body (invisible group, massless; the mesh keeps the finger's inertia).
    """
    model = spec.compile()
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    g_id = model.body("gripper").id
    R_wg, p_wg = data.xmat[g_id].reshape(3, 3), data.xpos[g_id]
    for finger in FINGER_BODIES:
        b_id = model.body(finger).id
        R_wb, p_wb = data.xmat[b_id].reshape(3, 3), data.xpos[b_id]
        verts_g = []
        for gid in range(model.ngeom):
            if model.geom_bodyid[gid] != b_id or model.geom_type[gid] != mujoco.mjtGeom.mjGEOM_MESH:
                continue
            m = model.geom_dataid[gid]
            v = model.mesh_vert[model.mesh_vertadr[m] : model.mesh_vertadr[m] + model.mesh_vertnum[m]]  # (n, 3)
            v_w = data.geom_xpos[gid] + v @ data.geom_xmat[gid].reshape(3, 3).T  # (n, 3) world
            verts_g.append((v_w - p_wg) @ R_wg)  # (n, 3) gripper frame
        if not verts_g:
            raise RuntimeError(f"finger body {finger!r} has no mesh geom to fit collision boxes to")
        for geom in spec.body(finger).geoms:  # the meshes stay visible, they no longer collide
            if geom.type == mujoco.mjtGeom.mjGEOM_MESH:
                geom.contype = 0
                geom.conaffinity = 0
        v = np.concatenate(verts_g)  # (n, 3) in the gripper frame
        z_end = float(v[:, 2].max())
        R_bg = R_wb.T @ R_wg  # gripper axes in the finger body frame
        slabs = {
            "pad": (z_end - PAD_HEIGHT_M, z_end),
            "segment": (z_end - SEGMENT_FROM_END_M[1], z_end - SEGMENT_FROM_END_M[0]),
        }
        for label, (z0, z1) in slabs.items():
            sel = v[(v[:, 2] >= z0) & (v[:, 2] <= z1)]
            if len(sel) < 4:
                raise RuntimeError(f"finger {finger!r}: too few mesh vertices in its {label} slab to fit a box")
            lo, hi = sel.min(0), sel.max(0)
            lo[2], hi[2] = max(lo[2], z0), min(hi[2], z1)
            centre_g = 0.5 * (lo + hi)
            centre_b = R_wb.T @ (p_wg + R_wg @ centre_g - p_wb)
            box = spec.body(finger).add_geom()
            box.name = f"{finger}_{label}_collision"
            box.type = mujoco.mjtGeom.mjGEOM_BOX
            box.size = (0.5 * (hi - lo)).tolist()
            box.pos = centre_b.tolist()
            box.quat = _quat_wxyz(R_bg)
            box.group = COLLISION_GROUP
            box.rgba = [0.2, 0.6, 1.0, 0.0]
            box.density = 0.0
            box.mass = 0.0
            box.friction = [1.0, 0.005, 0.0001]


def _place_at_site(geom, site) -> None:
    """Put ``geom`` where ``site`` is, in the site's body frame (the site may sit in a ``<frame>``)."""
    frame = site.frame
    if frame is None:
        geom.pos = list(site.pos)
        return
    # Compose frame pose and site pose (quat wxyz).
    q = np.asarray(frame.quat, dtype=np.float64)
    R = np.zeros(9)
    mujoco.mju_quat2Mat(R, q / np.linalg.norm(q))
    geom.pos = (np.asarray(frame.pos) + R.reshape(3, 3) @ np.asarray(site.pos)).tolist()


class YamSim:
    """The simulated YAM rig: physics, servo targets, camera renders and frame poses. Not thread-safe.

    :param config: the rig's :class:`SimConfig` (defaults if None).
    """

    def __init__(self, config: SimConfig | None = None):
        self.config = config or SimConfig()
        self.spec = build_spec(self.config)
        self.model = self.spec.compile()
        self.data = mujoco.MjData(self.model)
        m = self.model
        base = m.body("base")
        if not (np.allclose(m.body_pos[base.id], 0) and np.allclose(m.body_quat[base.id], [1, 0, 0, 0])):
            raise RuntimeError(
                "the SDK model's `base` body is not at the world origin; the sim assumes world == "
                "base (all published frames are in `base`)"
            )
        self._arm_qadr = np.array([m.jnt_qposadr[m.joint(n).id] for n in ARM_JOINT_NAMES])
        self._arm_dadr = np.array([m.jnt_dofadr[m.joint(n).id] for n in ARM_JOINT_NAMES])
        grip = m.joint(GRIPPER_SLIDE_JOINT)
        self._grip_qadr = int(m.jnt_qposadr[grip.id])
        self._grip_dadr = int(m.jnt_dofadr[grip.id])
        self._grip_lo, self._grip_hi = (float(v) for v in m.jnt_range[grip.id])
        self._mirror_qadr = int(m.jnt_qposadr[m.joint("joint8").id])
        self._act_ids = np.array([m.actuator(f"servo_{n}").id for n in ARM_JOINT_NAMES + (GRIPPER_SLIDE_JOINT,)])
        arm_range = np.array([m.jnt_range[m.joint(n).id] for n in ARM_JOINT_NAMES])  # (n, 2)
        self.q_lower = np.concatenate([arm_range[:, 0], [0.0]])  # (n + 1,) command space
        self.q_upper = np.concatenate([arm_range[:, 1], [1.0]])  # (n + 1,)
        self._cube_qadr = [int(m.jnt_qposadr[m.joint(f"cube_{i}_free").id]) for i in range(self.config.n_cubes)]
        self._cube_dadr = [int(m.jnt_dofadr[m.joint(f"cube_{i}_free").id]) for i in range(self.config.n_cubes)]
        self._renderers: dict[tuple[int, int], mujoco.Renderer] = {}
        self._render_thread: int | None = None
        self._link_ids: list | None = None  # link_transforms' frames, looked up at its first call
        self.reset(seed=self.config.seed)

    # ---- state ----------------------------------------------------------------------------------------------
    def reset(self, q7=None, seed: int | None = None) -> None:
        """Put the arm at ``q7`` (default ``home_q7``) at rest, targets there, objects re-dropped, time 0."""
        mujoco.mj_resetData(self.model, self.data)
        q7 = np.asarray(self.config.home_q7 if q7 is None else q7, dtype=np.float64)
        self._write_qpos(q7)
        self.set_joint_targets(q7)
        self.reset_objects(self.config.seed if seed is None else seed)

    def _write_qpos(self, q7: np.ndarray) -> None:
        q7 = np.clip(q7, self.q_lower, self.q_upper)
        self.data.qpos[self._arm_qadr] = q7[:N_ARM_JOINTS]
        slide = self._grip_lo + q7[GRIPPER_INDEX] * (self._grip_hi - self._grip_lo)
        self.data.qpos[self._grip_qadr] = slide
        self.data.qpos[self._mirror_qadr] = slide
        self.data.qvel[:] = 0.0
        mujoco.mj_forward(self.model, self.data)

    @property
    def time_s(self) -> float:
        """Simulated time since the last reset, seconds."""
        return float(self.data.time)

    def step(self, dt_s: float) -> int:
        """Advance physics by ``dt_s`` seconds (rounded to whole timesteps); returns the number of steps taken.

        After the steps the derived quantities (body, site and camera poses, contacts) are recomputed from the new
        joint positions (``mj_forward``): ``mj_step`` leaves them at the state before its last step, so the joints,
        /tf and the images of one instant would come from two states one physics step apart (2 ms; 5 mm of tool
        motion at full speed). ``mj_forward`` does not change the state, so the trajectory is the same."""
        n = int(round(float(dt_s) / self.model.opt.timestep))
        if n > 0:
            mujoco.mj_step(self.model, self.data, nstep=n)
            mujoco.mj_forward(self.model, self.data)
        return n

    def set_joint_targets(self, q7) -> np.ndarray:
        """Servo targets: 6 joint angles (rad) + gripper (0 closed .. 1 open). Clipped to limits; returns them."""
        q7 = np.asarray(q7, dtype=np.float64).reshape(-1)
        if q7.shape != (N_ARM_JOINTS + 1,) or not np.all(np.isfinite(q7)):
            raise ValueError(
                f"joint targets must be {N_ARM_JOINTS + 1} finite numbers ({', '.join(COMMAND_JOINT_NAMES)}), got {q7.tolist()}"
            )
        q7 = np.clip(q7, self.q_lower, self.q_upper)
        ctrl = q7.copy()
        ctrl[GRIPPER_INDEX] = self._grip_lo + q7[GRIPPER_INDEX] * (self._grip_hi - self._grip_lo)
        self.data.ctrl[self._act_ids] = ctrl
        return q7

    def joint_targets(self) -> np.ndarray:
        """Current servo targets in command space (n + 1,)."""
        ctrl = self.data.ctrl[self._act_ids].copy()
        ctrl[GRIPPER_INDEX] = (ctrl[GRIPPER_INDEX] - self._grip_lo) / (self._grip_hi - self._grip_lo)
        return ctrl

    def joint_positions(self) -> np.ndarray:
        """Measured positions (n + 1,): the arm joints (joint1..joint6) in rad, gripper 0 closed .. 1 open."""
        q = np.empty(N_ARM_JOINTS + 1)
        q[:N_ARM_JOINTS] = self.data.qpos[self._arm_qadr]
        q[GRIPPER_INDEX] = (self.data.qpos[self._grip_qadr] - self._grip_lo) / (self._grip_hi - self._grip_lo)
        return q

    def joint_velocities(self) -> np.ndarray:
        """Measured velocities (n + 1,): rad/s, and gripper opening fraction per second."""
        v = np.empty(N_ARM_JOINTS + 1)
        v[:N_ARM_JOINTS] = self.data.qvel[self._arm_dadr]
        v[GRIPPER_INDEX] = self.data.qvel[self._grip_dadr] / (self._grip_hi - self._grip_lo)
        return v

    def reset_objects(self, seed: int | None = None) -> np.ndarray:
        """Drop the cubes at random non-overlapping spots of ``object_region_m`` with random yaw, at rest.

        With the target pad (the pick-and-place scene), cube 0 and the pad take the task layout of ``seed``
        (:func:`para_ros.sim.pick_place.sample_layout`), so the sim node, the expert and tests that reset with the
        same seed see the same scene; further cubes are dropped around it.

        :returns: (n_cubes, 3) cube centres in ``base``, metres.
        """
        rng = np.random.default_rng(seed)
        (x_lo, x_hi), (y_lo, y_hi) = self.config.object_region_m
        h = self.config.cube_half_size_m
        placed: list[np.ndarray] = []
        layout = None
        if self.has_target_pad() and self._cube_qadr:
            layout = sample_layout(int(seed) if seed is not None else int(rng.integers(0, 2**31 - 1)))
            self.set_target_position(layout.target_xy_m)
        for i, (qadr, dadr) in enumerate(zip(self._cube_qadr, self._cube_dadr)):
            if i == 0 and layout is not None:
                xy, yaw = np.asarray(layout.cube_xy_m), layout.cube_yaw_rad
            else:
                for _ in range(200):
                    xy = np.array([rng.uniform(x_lo, x_hi), rng.uniform(y_lo, y_hi)])
                    if all(np.linalg.norm(xy - p[:2]) > 3.0 * h for p in placed):
                        break
                yaw = rng.uniform(-math.pi, math.pi)
            pos = np.array([xy[0], xy[1], h + 1e-4])
            self.data.qpos[qadr : qadr + 3] = pos
            self.data.qpos[qadr + 3 : qadr + 7] = [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]
            self.data.qvel[dadr : dadr + 6] = 0.0
            placed.append(pos)
        mujoco.mj_forward(self.model, self.data)
        return np.array(placed).reshape(-1, 3)

    def object_positions(self) -> np.ndarray:
        """(n_cubes, 3) cube centres in ``base``, metres."""
        return np.array([self.data.qpos[a : a + 3] for a in self._cube_qadr]).reshape(-1, 3)

    def cube_pose(self, i: int = 0) -> np.ndarray:
        """(4, 4) pose of cube ``i`` in ``base``."""
        return self.T_world_body(f"cube_{int(i)}")

    def cube_velocity(self, i: int = 0) -> np.ndarray:
        """(6,) linear (m/s, world) and angular (rad/s) velocity of cube ``i``."""
        d = self._cube_dadr[int(i)]
        return self.data.qvel[d : d + 6].copy()

    def set_cube_pose(self, i: int, position_m, yaw_rad: float = 0.0, quat_wxyz=None) -> None:
        """Place cube ``i`` at rest at ``position_m`` (3,) with yaw ``yaw_rad`` about world z (or ``quat_wxyz``)."""
        qadr, dadr = self._cube_qadr[int(i)], self._cube_dadr[int(i)]
        q = (
            np.array([math.cos(yaw_rad / 2), 0.0, 0.0, math.sin(yaw_rad / 2)])
            if quat_wxyz is None
            else np.asarray(quat_wxyz, dtype=np.float64) / np.linalg.norm(quat_wxyz)
        )
        self.data.qpos[qadr : qadr + 3] = _vec(position_m, 3, "position_m")
        self.data.qpos[qadr + 3 : qadr + 7] = q
        self.data.qvel[dadr : dadr + 6] = 0.0
        mujoco.mj_forward(self.model, self.data)

    def has_target_pad(self) -> bool:
        return self._has(self.model.body, TARGET_BODY)

    def target_position(self) -> np.ndarray:
        """(3,) centre of the target pad on the table, metres (requires ``target_pad``)."""
        body = self._named(self.model.body, TARGET_BODY, "body")
        return self.data.mocap_pos[self.model.body_mocapid[body.id]].copy()

    def set_target_position(self, xy_m) -> None:
        """Move the target pad to table position ``xy_m`` (2,)."""
        body = self._named(self.model.body, TARGET_BODY, "body")
        x, y = _vec(xy_m, 2, "xy_m")
        self.data.mocap_pos[self.model.body_mocapid[body.id]] = [x, y, 0.0]
        mujoco.mj_forward(self.model, self.data)

    def finger_contacts(self, i: int = 0) -> set[str]:
        """Names of the finger bodies touching cube ``i`` now (a subset of :data:`FINGER_BODIES`)."""
        cube = self.model.body(f"cube_{int(i)}").id
        fingers = {self.model.body(n).id: n for n in FINGER_BODIES}
        touching = set()
        for c in self.data.contact[: self.data.ncon]:
            b1, b2 = self.model.geom_bodyid[c.geom1], self.model.geom_bodyid[c.geom2]
            if b1 == cube and b2 in fingers:
                touching.add(fingers[b2])
            elif b2 == cube and b1 in fingers:
                touching.add(fingers[b1])
        return touching

    # ---- frames ---------------------------------------------------------------------------------------------
    def T_world_body(self, name: str) -> np.ndarray:
        """(4, 4) pose of body ``name`` in ``base`` (= MuJoCo world)."""
        body = self._named(self.model.body, name, "body")
        T = np.eye(4)
        T[:3, :3] = self.data.xmat[body.id].reshape(3, 3)
        T[:3, 3] = self.data.xpos[body.id]
        return T

    def site_pose(self, name: str = GRASP_SITE) -> np.ndarray:
        """(4, 4) pose of site ``name`` in ``base``."""
        site = self._named(self.model.site, name, "site")
        T = np.eye(4)
        T[:3, :3] = self.data.site_xmat[site.id].reshape(3, 3)
        T[:3, 3] = self.data.site_xpos[site.id]
        return T

    def T_world_cam(self, camera_name: str) -> np.ndarray:
        """(4, 4) OpenCV optical pose (x right, y down, z forward) of camera ``camera_name`` in ``base``."""
        cam = self._named(self.model.camera, camera_name, "camera")
        return mjcam_to_T_world_optical(self.data.cam_xpos[cam.id], self.data.cam_xmat[cam.id])

    def T_parent_child(self, parent: str, child: str) -> np.ndarray:
        """(4, 4) pose of body or site ``child`` in body ``parent``, from the current state."""
        T_w_p = self.T_world_body(parent)
        T_w_c = self.site_pose(child) if self._has(self.model.site, child) else self.T_world_body(child)
        return np.linalg.inv(T_w_p) @ T_w_c

    def link_transforms(self) -> list[tuple[str, str, np.ndarray]]:
        """The moving frames for /tf: (parent, child, T_parent_child) for the arm chain, grasp site, wrist camera.

        Frame names are the model's body names (``base`` .. ``gripper``), ``grasp_site`` and
        ``wrist_cam_optical`` (the wrist camera's OpenCV optical frame) under ``gripper``.
        """
        if self._link_ids is None:  # looked up once: name look-ups (and the KeyErrors of _has) were half its time
            pairs = list(zip(ARM_LINK_CHAIN[:-1], ARM_LINK_CHAIN[1:]))
            pairs += [("gripper", GRASP_SITE), ("gripper", WRIST_CAM_BODY)]
            self._link_ids = [
                (
                    parent,
                    child,
                    self._named(self.model.body, parent, "body").id,
                    self._has(self.model.site, child),
                    (self.model.site(child) if self._has(self.model.site, child) else self.model.body(child)).id,
                )
                for parent, child in pairs
            ]
        # Each body's world pose built once and each parent's inverse taken once (a body is the child of one pair and
        # the parent of the next; the gripper parents three): the same operations on the same numbers as building
        # them per pair, so the same bits, in less of the simulator's time (it runs for every lockstep instant).
        xmat, xpos = self.data.xmat, self.data.xpos
        T_world_body: dict[int, np.ndarray] = {}
        inv_T_world_parent: dict[int, np.ndarray] = {}
        out = []
        for parent, child, parent_id, child_is_site, child_id in self._link_ids:
            T_p_w = inv_T_world_parent.get(parent_id)
            if T_p_w is None:
                T_w_p = T_world_body.get(parent_id)
                if T_w_p is None:
                    T_w_p = np.eye(4)
                    T_w_p[:3, :3] = xmat[parent_id].reshape(3, 3)
                    T_w_p[:3, 3] = xpos[parent_id]
                T_p_w = inv_T_world_parent[parent_id] = np.linalg.inv(T_w_p)
            T_w_c = np.eye(4)
            if child_is_site:
                T_w_c[:3, :3] = self.data.site_xmat[child_id].reshape(3, 3)
                T_w_c[:3, 3] = self.data.site_xpos[child_id]
            else:
                T_w_c[:3, :3] = xmat[child_id].reshape(3, 3)
                T_w_c[:3, 3] = xpos[child_id]
                T_world_body[child_id] = T_w_c
            out.append((parent, child, T_p_w @ T_w_c))  # as T_parent_child computes it
        return out

    def set_scene_camera_pose(self, T_world_cam, fovy_deg: float | None = None) -> None:
        """Move the fixed scene camera to OpenCV optical pose ``T_world_cam`` (4, 4) in ``base``; ``fovy_deg``: also
        set its vertical field of view (degrees, within [1, 170])."""
        T = np.asarray(T_world_cam, dtype=np.float64).reshape(4, 4)
        pos, quat = _mj_quat_of_optical(T)
        cam = self.model.camera("scene")
        if fovy_deg is not None:
            if not 1.0 <= float(fovy_deg) <= 170.0:
                raise ValueError(f"fovy_deg={fovy_deg!r} must be within [1, 170] degrees")
            self.model.cam_fovy[cam.id] = float(fovy_deg)
        self.model.cam_pos[cam.id] = pos
        self.model.cam_quat[cam.id] = quat
        mujoco.mj_kinematics(self.model, self.data)
        mujoco.mj_camlight(self.model, self.data)

    # ---- cameras --------------------------------------------------------------------------------------------
    def fovy_deg(self, camera_name: str) -> float:
        """Vertical field of view of camera ``camera_name``, degrees."""
        return float(self.model.cam_fovy[self._named(self.model.camera, camera_name, "camera").id])

    def intrinsics(self, camera_name: str, width: int, height: int) -> np.ndarray:
        """(3, 3) K of camera ``camera_name`` rendered at ``width`` x ``height`` (matches :meth:`render`)."""
        return intrinsics_from_fovy(self.fovy_deg(camera_name), width, height)

    def _renderer(self, width: int, height: int) -> mujoco.Renderer:
        me = threading.get_ident()
        if self._render_thread is None:
            self._render_thread = me
        elif self._render_thread != me and os.environ.get("MUJOCO_GL", "egl").lower() == "egl":
            raise RuntimeError(
                "YamSim.render was called from a different thread than the first render; an EGL "
                "context belongs to the thread that created it. Render from one thread only."
            )
        key = (int(width), int(height))
        r = self._renderers.get(key)
        if r is None:
            limit = self.config.max_render_size
            if not (0 < key[0] <= limit and 0 < key[1] <= limit):
                raise ValueError(
                    f"render size {key[0]}x{key[1]} must be within 1..{limit} pixels per side; raise "
                    "SimConfig.max_render_size for bigger images"
                )
            r = mujoco.Renderer(self.model, height=key[1], width=key[0])
            r.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = False
            r.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = False
            r.scene.flags[mujoco.mjtRndFlag.mjRND_SKYBOX] = False
            self._renderers[key] = r
        return r

    def render(
        self, camera_name: str, width: int = 256, height: int = 256, geom_groups=None, segmentation: bool = False
    ) -> np.ndarray:
        """Render camera ``camera_name``.

        :param geom_groups: geom groups to show (default MuJoCo's 0, 1, 2); e.g. ``(5,)`` shows only the marker.
        :param segmentation: return MuJoCo's segmentation (H, W, 2) int32 (object id, object type) instead of RGB.
        :returns: (H, W, 3) uint8 RGB (or the segmentation).
        """
        self._named(self.model.camera, camera_name, "camera")
        r = self._renderer(width, height)
        option = mujoco.MjvOption()
        option.sitegroup[:] = 0  # sites are frames, not things a camera sees
        if geom_groups is not None:
            option.geomgroup[:] = 0
            for g in geom_groups:
                option.geomgroup[int(g)] = 1
        r.update_scene(self.data, camera=camera_name, scene_option=option)
        if segmentation:
            r.enable_segmentation_rendering()
            try:
                return r.render().copy()
            finally:
                r.disable_segmentation_rendering()
        return r.render().copy()

    def close(self) -> None:
        """Free the renderers (call from the rendering thread)."""
        for r in self._renderers.values():
            r.close()
        self._renderers.clear()

    # ---- helpers --------------------------------------------------------------------------------------------
    @staticmethod
    def _has(accessor, name: str) -> bool:
        try:
            accessor(name)
            return True
        except KeyError:
            return False

    @staticmethod
    def _named(accessor, name: str, kind: str):
        try:
            return accessor(name)
        except KeyError:
            raise KeyError(f"no {kind} named {name!r} in the sim model") from None
