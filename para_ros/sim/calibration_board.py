"""A ChArUco calibration board in the simulated rig, and the camera poses the simulator renders but does not tell.

Board: a thin box of exactly known geometry whose top face carries the board image of
:meth:`para_core.calibration.board.CharucoBoardSpec.image` (OpenCV's ``CharucoBoard.generateImage`` drawing: board
point (x, y, 0) of the board frame lands at image pixel (column, row) = (margin + x * px_per_m, margin + y * px_per_m),
pixel edges at integers). MuJoCo maps a 2-D texture on a box face with no repeat so that texture column grows along
the geom's +x and texture row along the geom's -y (measured, to 0.1 px), so on the top (+z) face the board frame is
at ``T_geom_board`` = origin (-half_x + margin_m, +half_y - margin_m, +half_z), axes x_b = x_g, y_b = -y_g,
z_b = -z_g (OpenCV's board frame: z into the board). The body ``calibration_board`` IS the board frame, so
``YamSim.T_world_body("calibration_board")`` is the truth a calibration must recover. A plain backing box under the
textured one hides the texture the box also draws on its other faces (a mirrored board seen from behind).

Mounts (``where``): ``flange``: on body ``gripper`` (the joint6 flange), default a plate just beyond the finger tips
facing along the fingers (the way a board held by the gripper is seen); ``table``: lying face up on the table, default
centred on the workspace. The pose (``T_parent_board``) is a parameter: the board frame's pose in ``gripper`` or
``base``.

"Truth withheld": :func:`offset_T` builds the small rigid offsets (xyz metres + roll-pitch-yaw degrees, applied in the
camera's own optical frame: ``T_true = T_told @ T_offset``) with which the simulator renders the scene camera and the
wrist mount away from what it publishes on TF.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from para_ros.sim.cameras import rotation_matrix_to_quat_wxyz

BOARD_BODY = "calibration_board"
BOARD_GEOM = "calibration_board_face"
BOARD_BACKING_GEOM = "calibration_board_backing"
BOARD_MOUNTS = ("none", "flange", "table")
MOUNT_PARENT_BODY = {"flange": "gripper", "table": "world"}
R_GEOM_BOARD = np.diag([1.0, -1.0, -1.0])  # (3, 3) board axes in the textured box's frame (see the module docstring)
FACE_THICKNESS_M = 0.001  # the textured box
BACKING_GAP_M = 0.0002  # the backing starts this far behind the printed face (hides the texture's other faces)
MAX_TEXTURE_PX = 4096
# Default flange mount, in the gripper frame (x: finger opening direction, z: along the fingers): the board beside the
# fingers, its face turned towards +x and back up towards the flange, so that at the sim's start pose (gripper pointing
# down, its +x towards -y of base) it faces the default scene camera (beside the table, 0.6 m up).
FLANGE_BOARD_NORMAL = (0.86, 0.0, -0.51)
FLANGE_BOARD_CENTRE_M = (0.13, 0.0, 0.07)


def rpy_deg_to_matrix(rpy_deg) -> np.ndarray:
    """(3, 3) rotation of roll, pitch, yaw (degrees) about fixed x, then y, then z: ``Rz @ Ry @ Rx``."""
    r, p, y = (math.radians(float(v)) for v in rpy_deg)
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    Rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    Ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    Rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return Rz @ Ry @ Rx


def offset_T(xyz_m=(0.0, 0.0, 0.0), rpy_deg=(0.0, 0.0, 0.0)) -> np.ndarray:
    """(4, 4) rigid transform from a translation (metres) and roll-pitch-yaw (degrees)."""
    xyz = np.asarray(xyz_m, dtype=np.float64).reshape(-1)
    rpy = np.asarray(rpy_deg, dtype=np.float64).reshape(-1)
    if xyz.shape != (3,) or rpy.shape != (3,) or not (np.all(np.isfinite(xyz)) and np.all(np.isfinite(rpy))):
        raise ValueError(f"offset xyz_m={list(xyz)} / rpy_deg={list(rpy)}: give 3 finite numbers each")
    T = np.eye(4)
    T[:3, :3] = rpy_deg_to_matrix(rpy)
    T[:3, 3] = xyz
    return T


def default_T_parent_board(where: str, size_m: tuple[float, float]) -> np.ndarray:
    """Default pose of the board frame in its parent (``gripper`` for ``flange``, ``base`` for ``table``), (4, 4).

    ``flange``: beside the fingers (:data:`FLANGE_BOARD_CENTRE_M`, face along :data:`FLANGE_BOARD_NORMAL`), long side
    along the fingers' z. ``table``: face up, centred on (0.33, 0.0) in ``base``, 3 mm thick.
    """
    w, h = size_m
    T = np.eye(4)
    if where == "flange":
        n = np.array(FLANGE_BOARD_NORMAL)
        n /= np.linalg.norm(n)
        z_b = -n
        x_b = np.array([0.0, 1.0, 0.0])
        y_b = np.cross(z_b, x_b)
        T[:3, :3] = np.stack([x_b, y_b, z_b], axis=1)
        centre = np.asarray(FLANGE_BOARD_CENTRE_M)
        T[:3, 3] = centre - T[:3, :3] @ np.array([w / 2.0, h / 2.0, 0.0])
    elif where == "table":
        T[:3, :3] = R_GEOM_BOARD  # face up
        T[:3, 3] = [0.33 - w / 2.0, h / 2.0, 0.003]
    else:
        raise ValueError(f"calibration_board={where!r}: a board mount is one of {BOARD_MOUNTS[1:]}")
    return T


@dataclass
class BoardMount:
    """A ChArUco board in the simulated scene.

    Args:
        spec: the board (:class:`para_core.calibration.board.CharucoBoardSpec`).
        where: ``flange`` (on body ``gripper``) or ``table`` (in ``base``).
        T_parent_board: (4, 4) pose of the board frame in the parent; None = :func:`default_T_parent_board`.
        px_per_m: texture resolution; the default keeps the texture within :data:`MAX_TEXTURE_PX` pixels a side.
        margin_m: white border around the board (a quiet zone for the detector), metres.
        thickness_m: board thickness (textured face + backing), metres.
    """

    spec: object
    where: str = "flange"
    T_parent_board: object = None
    px_per_m: float | None = None
    margin_m: float = 0.01
    thickness_m: float = 0.003

    def __post_init__(self):
        if self.where not in BOARD_MOUNTS[1:]:
            raise ValueError(f"BoardMount.where={self.where!r}: use one of {BOARD_MOUNTS[1:]}")
        if self.T_parent_board is None:
            self.T_parent_board = default_T_parent_board(self.where, self.spec.size_m)
        T = np.asarray(self.T_parent_board, dtype=np.float64).reshape(4, 4)
        R = T[:3, :3]
        if not (np.all(np.isfinite(T)) and np.allclose(R @ R.T, np.eye(3), atol=1e-6) and np.linalg.det(R) > 0):
            raise ValueError("BoardMount.T_parent_board: give a rigid 4x4 transform (orthonormal, right-handed)")
        self.T_parent_board = T
        if not 0.0 <= float(self.margin_m) <= 0.1:
            raise ValueError(f"BoardMount.margin_m={self.margin_m}: give 0..0.1 m")
        if not 2 * FACE_THICKNESS_M < float(self.thickness_m) <= 0.05:
            raise ValueError(f"BoardMount.thickness_m={self.thickness_m}: give {2 * FACE_THICKNESS_M}..0.05 m")
        w, h = self.spec.size_m
        if self.px_per_m is None:  # whole pixels per square: the image's square edges are then exact
            square_px = math.floor((MAX_TEXTURE_PX - 1) * self.spec.square_m / (max(w, h) + 2 * self.margin_m))
            self.px_per_m = square_px / self.spec.square_m
        side_px = (max(w, h) + 2 * self.margin_m) * float(self.px_per_m)
        if float(self.px_per_m) < 100.0 or side_px > MAX_TEXTURE_PX:
            raise ValueError(
                f"BoardMount.px_per_m={self.px_per_m}: give at least 100 and at most "
                f"{MAX_TEXTURE_PX} pixels over the board's longer side"
            )

    @property
    def parent_body(self) -> str:
        return MOUNT_PARENT_BODY[self.where]

    def texture(self) -> tuple[np.ndarray, float]:
        """(H, W, 3) uint8 RGB texture of the board and its margin, and the margin in metres it really has (whole
        pixels)."""
        margin_px = int(round(self.margin_m * self.px_per_m))
        gray = np.asarray(self.spec.image(float(self.px_per_m), margin_px=margin_px), dtype=np.uint8)  # (H, W)
        return np.repeat(gray[:, :, None], 3, axis=2), margin_px / float(self.px_per_m)

    def add_to_spec(self, spec) -> None:
        """Add the board (texture, material, body ``calibration_board`` = the board frame, its two geoms) to an
        ``mujoco.MjSpec``. No collisions, no mass: the board never disturbs the arm or the objects."""

        rgb, margin_m = self.texture()
        H, W = rgb.shape[:2]
        half_x, half_y = W / (2.0 * self.px_per_m), H / (2.0 * self.px_per_m)
        material = add_matte_material(spec, "calibration_board", rgb)

        parent = spec.worldbody if self.parent_body == "world" else spec.body(self.parent_body)
        body = parent.add_body()
        body.name = BOARD_BODY
        body.pos = self.T_parent_board[:3, 3].tolist()
        body.quat = _quat_wxyz(self.T_parent_board[:3, :3])
        # Textured box: its top face (+z_g) is the board plane z_b = 0; in the board frame its centre is
        # R_board_geom @ (-(origin in geom)).
        origin_g = np.array([-half_x + margin_m, half_y - margin_m, FACE_THICKNESS_M / 2.0])  # board origin in geom
        R_board_geom = R_GEOM_BOARD.T
        for name, half_z, depth_m, face_material in (
            (BOARD_GEOM, FACE_THICKNESS_M / 2.0, 0.0, material),
            (BOARD_BACKING_GEOM, (self.thickness_m - BACKING_GAP_M) / 2.0, BACKING_GAP_M, None),
        ):
            centre_b = (
                R_board_geom @ (-origin_g)
                if face_material
                else R_board_geom @ (-origin_g) + np.array([0.0, 0.0, depth_m + half_z - FACE_THICKNESS_M / 2.0])
            )
            add_visual_box(body, name, (half_x, half_y, half_z), centre_b, R_board_geom, face_material)
        body.mass = 0.0


def add_matte_material(spec, prefix: str, rgb: np.ndarray) -> str:
    """A 2-D texture of ``rgb`` (H, W, 3) uint8 and a matte material showing it, named ``prefix`` + ``_texture`` /
    ``_material``, added to an ``mujoco.MjSpec``; returns the material's name."""
    import mujoco  # mujoco: loaded on first use, not on import

    H, W = rgb.shape[:2]
    tex = spec.add_texture()
    tex.name = f"{prefix}_texture"
    tex.type = mujoco.mjtTexture.mjTEXTURE_2D
    tex.width, tex.height, tex.nchannel = W, H, 3
    tex.data = rgb.tobytes()
    mat = spec.add_material()
    mat.name = f"{prefix}_material"
    mat.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = tex.name
    mat.texrepeat = [1.0, 1.0]
    mat.texuniform = False
    mat.specular = 0.0
    mat.shininess = 0.0
    mat.reflectance = 0.0
    return mat.name


def add_visual_box(body, name: str, half_size_m, centre_m, R_body_geom: np.ndarray, material: str | None) -> None:
    """A box geom on ``body`` that is only seen (no collision, no mass): textured white with ``material``, else the
    dark grey of a backing plate."""
    import mujoco  # mujoco: loaded on first use, not on import

    geom = body.add_geom()
    geom.name = name
    geom.type = mujoco.mjtGeom.mjGEOM_BOX
    geom.size = [float(v) for v in half_size_m]
    geom.pos = np.asarray(centre_m, dtype=np.float64).tolist()
    geom.quat = _quat_wxyz(R_body_geom)
    geom.rgba = [1.0, 1.0, 1.0, 1.0] if material else [0.25, 0.25, 0.28, 1.0]
    if material:
        geom.material = material
    geom.contype = 0
    geom.conaffinity = 0
    geom.density = 0.0
    geom.mass = 0.0


def _quat_wxyz(R: np.ndarray) -> list[float]:
    return [float(v) for v in rotation_matrix_to_quat_wxyz(np.asarray(R, dtype=np.float64))]
