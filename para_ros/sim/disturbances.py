"""Run-time out-of-distribution conditions of the simulated rig: what goes wrong while an episode runs.

Three conditions, each switched on at a given EPISODE time (simulated seconds since the last reset, so every episode
of an evaluation meets it at the same moment), each off by default (the default model and images are unchanged):

* :class:`CameraKnock`: the scene camera is knocked: from ``at_s`` on it is RENDERED moved by a rigid offset (xyz
  metres and roll-pitch-yaw degrees in its own optical frame, ``T_true = T_before @ T_offset``), while ``/tf_static``
  goes on telling the pose it had before (nobody told the graph).
* :class:`CameraFault`: a camera is ``covered`` (a black image) or ``frozen`` (the last image before ``at_s`` is sent
  again and again) while the stamps, CameraInfo and TF go on as before: a lens cap, a driver that hangs on a frame.
* :class:`HandOccluder`: a hand-like capsule (visual only: no collision, no mass) appears at ``at_s`` above the cube
  region, between the cameras and the workspace, and stays. It is a mocap body parked far below the table until then;
  it exists in the model only when configured (:meth:`DisturbanceConfig.scene_extras`).

:class:`Disturbances` applies a :class:`DisturbanceConfig` to a :class:`para_ros.sim.yam_scene.YamSim`: call
:meth:`Disturbances.update` before rendering, pass each rendered image through :meth:`Disturbances.filter_image`, and
:meth:`Disturbances.reset` after the simulator was reset. ROS-free; ``sim_node`` drives it from its parameters
(:mod:`para_ros.nodes.sim_disturbance_params`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from para_ros.sim.calibration_board import offset_T

CAMERA_FAULT_KINDS = ("none", "covered", "frozen")
CAMERA_FAULT_CAMERAS = ("scene", "wrist", "both")
OCCLUDER_BODY = "ood_hand_occluder"
OCCLUDER_GEOM = "ood_hand_occluder_geom"
OCCLUDER_PARKED_M = (0.0, 0.0, -5.0)  # where the occluder waits: far under the table, out of every view
SKIN_RGBA = (0.87, 0.70, 0.60, 1.0)


def _finite_vector(value, n: int, where: str, fix: str) -> tuple[float, ...]:
    try:
        out = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}={value!r}: {fix}") from None
    if len(out) != n or not all(math.isfinite(v) for v in out):
        raise ValueError(f"{where}={value!r}: {fix}")
    return out


def _episode_time(value, where: str) -> float:
    try:
        t = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}={value!r}: give the episode time in seconds (>= 0)") from None
    if not math.isfinite(t) or t < 0.0:
        raise ValueError(f"{where}={value!r}: give the episode time in seconds (>= 0; simulated s since the reset)")
    return t


@dataclass(frozen=True)
class CameraKnock:
    """The scene camera knocked at episode time ``at_s``.

    Args:
        at_s: episode time (simulated seconds since the last reset) of the knock.
        xyz_m: translation of the knock, metres, in the camera's optical frame (x right, y down, z forward).
        rpy_deg: rotation of the knock, roll-pitch-yaw degrees about the optical frame's x, y, z.
    """

    at_s: float
    xyz_m: tuple = (0.0, 0.0, 0.0)
    rpy_deg: tuple = (0.0, 0.0, 0.0)

    def __post_init__(self):
        object.__setattr__(self, "at_s", _episode_time(self.at_s, "CameraKnock.at_s"))
        xyz = _finite_vector(self.xyz_m, 3, "CameraKnock.xyz_m", "give 3 finite numbers (metres, optical frame)")
        rpy = _finite_vector(self.rpy_deg, 3, "CameraKnock.rpy_deg", "give 3 finite numbers (degrees)")
        if np.linalg.norm(xyz) > 0.5 or max(abs(v) for v in rpy) > 90.0:
            raise ValueError(
                f"CameraKnock xyz_m={list(xyz)} / rpy_deg={list(rpy)}: a knock is at most 0.5 m and 90 deg; give a "
                "smaller one (for a camera elsewhere, configure the scene camera's pose instead)"
            )
        object.__setattr__(self, "xyz_m", xyz)
        object.__setattr__(self, "rpy_deg", rpy)

    def offset_T(self) -> np.ndarray:
        """(4, 4) the knock in the camera's optical frame."""
        return offset_T(self.xyz_m, self.rpy_deg)


@dataclass(frozen=True)
class CameraFault:
    """A camera covered or frozen from episode time ``at_s`` on.

    Args:
        kind: ``covered`` (every image black) or ``frozen`` (the last image before ``at_s``, again and again).
        camera: ``scene``, ``wrist`` or ``both``.
        at_s: episode time (simulated seconds since the last reset) the fault starts.
    """

    kind: str
    camera: str = "scene"
    at_s: float = 0.0

    def __post_init__(self):
        if self.kind not in CAMERA_FAULT_KINDS[1:]:
            raise ValueError(f"CameraFault.kind={self.kind!r}: use one of {CAMERA_FAULT_KINDS[1:]}")
        if self.camera not in CAMERA_FAULT_CAMERAS:
            raise ValueError(f"CameraFault.camera={self.camera!r}: use one of {CAMERA_FAULT_CAMERAS}")
        object.__setattr__(self, "at_s", _episode_time(self.at_s, "CameraFault.at_s"))

    def affects(self, camera: str) -> bool:
        return self.camera == "both" or self.camera == camera


@dataclass(frozen=True)
class HandOccluder:
    """A hand-like capsule over the workspace from episode time ``at_s`` on (visual only).

    Args:
        at_s: episode time (simulated seconds since the last reset) the hand appears.
        centre_m: capsule centre in ``base``, metres (default above the middle of the cube region, under the
            scene camera's line of sight to it).
        radius_m: capsule radius, metres (a hand or forearm is 0.03-0.05 m).
        half_length_m: half the length of the capsule's straight part, metres.
        yaw_deg: direction of the capsule's axis in the table plane, degrees from ``base`` x.
        rgba: its colour (default a skin tone).
    """

    at_s: float
    centre_m: tuple = (0.33, 0.0, 0.14)
    radius_m: float = 0.04
    half_length_m: float = 0.10
    yaw_deg: float = 0.0
    rgba: tuple = SKIN_RGBA

    def __post_init__(self):
        object.__setattr__(self, "at_s", _episode_time(self.at_s, "HandOccluder.at_s"))
        centre = _finite_vector(self.centre_m, 3, "HandOccluder.centre_m", "give x, y, z in metres (base frame)")
        object.__setattr__(self, "centre_m", centre)
        for name, lo, hi in (("radius_m", 0.005, 0.3), ("half_length_m", 0.0, 0.5), ("yaw_deg", -360.0, 360.0)):
            value = getattr(self, name)
            try:
                v = float(value)
            except (TypeError, ValueError):
                v = float("nan")
            if not lo <= v <= hi:
                raise ValueError(f"HandOccluder.{name}={value!r}: give a number within [{lo}, {hi}]")
            object.__setattr__(self, name, v)
        rgba = _finite_vector(self.rgba, 4, "HandOccluder.rgba", "give r, g, b, a within [0, 1]")
        if not all(0.0 <= c <= 1.0 for c in rgba):
            raise ValueError(f"HandOccluder.rgba={list(rgba)}: give r, g, b, a within [0, 1]")
        object.__setattr__(self, "rgba", rgba)

    def add_to_spec(self, spec) -> None:
        """Add the parked occluder (a mocap body with one capsule, no collision, no mass) to an ``mujoco.MjSpec``."""
        import mujoco  # mujoco: loaded on first use, not on import

        body = spec.worldbody.add_body()
        body.name = OCCLUDER_BODY
        body.mocap = True
        body.pos = list(OCCLUDER_PARKED_M)
        yaw = math.radians(self.yaw_deg)
        # The capsule's axis is the geom's z: turn it into the table plane (pitch 90 deg), then yaw it.
        half_pitch, half_yaw = math.pi / 4.0, yaw / 2.0
        q_yaw = np.array([math.cos(half_yaw), 0.0, 0.0, math.sin(half_yaw)])
        q_pitch = np.array([math.cos(half_pitch), 0.0, math.sin(half_pitch), 0.0])
        quat = np.zeros(4)
        mujoco.mju_mulQuat(quat, q_yaw, q_pitch)
        body.quat = quat.tolist()
        geom = body.add_geom()
        geom.name = OCCLUDER_GEOM
        geom.type = mujoco.mjtGeom.mjGEOM_CAPSULE
        geom.size = [self.radius_m, max(self.half_length_m, 1e-4), 0.0]
        geom.rgba = list(self.rgba)
        geom.contype = 0
        geom.conaffinity = 0
        geom.density = 0.0
        geom.mass = 0.0


@dataclass(frozen=True)
class DisturbanceConfig:
    """Which run-time conditions an episode meets (each None = off; all None = the normal rig)."""

    knock: CameraKnock | None = None
    camera_fault: CameraFault | None = None
    occluder: HandOccluder | None = None

    def __post_init__(self):
        for name, kind in (("knock", CameraKnock), ("camera_fault", CameraFault), ("occluder", HandOccluder)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, kind):
                raise ValueError(
                    f"DisturbanceConfig.{name}: give a {kind.__name__} or None, got {type(value).__name__}"
                )

    @property
    def any(self) -> bool:
        return any(v is not None for v in (self.knock, self.camera_fault, self.occluder))

    def scene_extras(self) -> tuple:
        """What the simulator's model needs added (``SimConfig.scene_extras``): the occluder when configured."""
        return () if self.occluder is None else (self.occluder,)


@dataclass
class Disturbances:
    """Applies a :class:`DisturbanceConfig` to a ``YamSim`` (see the module docstring).

    Args:
        config: the conditions.
        scene_cam_T_world_cam: (4, 4) where the scene camera is rendered when not knocked (the simulator's
            ``SimConfig.scene_cam_true_T_world_cam()``).
    """

    config: DisturbanceConfig
    scene_cam_T_world_cam: np.ndarray
    _knocked: bool | None = field(default=None, init=False)
    _occluding: bool | None = field(default=None, init=False)
    _last_good: dict = field(default_factory=dict, init=False)  # camera -> (H, W, 3) uint8, the frozen frame

    def __post_init__(self):
        T = np.asarray(self.scene_cam_T_world_cam, dtype=np.float64)
        if T.shape != (4, 4) or not np.all(np.isfinite(T)):
            raise ValueError(f"Disturbances.scene_cam_T_world_cam: give a finite (4, 4) pose, got shape {T.shape}")
        self.scene_cam_T_world_cam = T

    def knocked_T_world_cam(self) -> np.ndarray:
        """(4, 4) where the knocked scene camera is rendered (the unknocked pose when there is no knock)."""
        if self.config.knock is None:
            return self.scene_cam_T_world_cam.copy()
        return self.scene_cam_T_world_cam @ self.config.knock.offset_T()

    def reset(self, sim) -> None:
        """After ``sim.reset()`` (a new episode): everything as before its conditions start."""
        self._knocked = self._occluding = None
        self._last_good.clear()
        self.update(sim)

    def update(self, sim) -> None:
        """Put the scene camera and the occluder where they are at the simulator's current episode time."""
        t = sim.time_s
        knock = self.config.knock
        if knock is not None:
            knocked = t + 1e-9 >= knock.at_s
            if knocked != self._knocked:
                sim.set_scene_camera_pose(self.knocked_T_world_cam() if knocked else self.scene_cam_T_world_cam)
                self._knocked = knocked
        occluder = self.config.occluder
        if occluder is not None:
            occluding = t + 1e-9 >= occluder.at_s
            if occluding != self._occluding:
                self._move_occluder(sim, occluder.centre_m if occluding else OCCLUDER_PARKED_M)
                self._occluding = occluding

    def filter_image(self, camera: str, rgb: np.ndarray, t_s: float) -> np.ndarray:
        """The image a camera delivers at episode time ``t_s`` given its render ``rgb`` (H, W, 3) uint8: the render,
        a black image (covered) or the last image before the fault (frozen)."""
        fault = self.config.camera_fault
        if fault is None or not fault.affects(camera):
            return rgb
        if t_s + 1e-9 < fault.at_s:
            if fault.kind == "frozen":
                self._last_good[camera] = rgb.copy()
            return rgb
        if fault.kind == "covered":
            return np.zeros_like(rgb)
        frozen = self._last_good.get(camera)
        if frozen is None or frozen.shape != rgb.shape:  # fault from the first frame on: that frame stays
            frozen = self._last_good[camera] = rgb.copy()
        return frozen.copy()

    @staticmethod
    def _move_occluder(sim, position_m) -> None:
        import mujoco  # mujoco: loaded on first use, not on import

        body = sim.model.body(OCCLUDER_BODY)
        sim.data.mocap_pos[sim.model.body_mocapid[body.id]] = np.asarray(position_m, dtype=np.float64)
        mujoco.mj_kinematics(sim.model, sim.data)
