"""Scene-camera poses around the simulator's nominal one: moves, random draws for demonstrations, a visibility check.

ROS-free (numpy + the project's geometry). A :class:`CameraMove` describes a viewpoint relative to the nominal scene
camera (``SimConfig``'s position, look-at point and field of view), in the words a user moving a camera on a rig
would use:

* ``orbit_deg``: the camera turned about the vertical axis through the look-at point (the workspace centre), positive
  counter-clockwise seen from above; the camera keeps its distance and height and keeps looking at the workspace.
* ``height_m``: the camera raised (negative: lowered) by this much, still looking at the look-at point (a tilt that
  keeps the workspace centred, so the apparent scale changes).
* ``distance_m``: the camera moved along its line of sight, away from (positive) or towards the look-at point.
* ``look_at_m``: the aim point shifted by this world vector (the camera centre stays; it turns towards the new point).
* ``fovy_deg``: another vertical field of view (a zoom; ``None`` keeps the nominal one).

:func:`camera_pose` turns a move into the OpenCV optical ``T_world_cam`` (4, 4) and a field of view;
:func:`visible_fraction` says which fraction of the task's workspace (a grid over the cube and pad regions of
``PickPlaceConfig``, at the table and at the cube's top) projects inside the image; :func:`check_workspace_visible`
refuses a move that leaves part of it out of view, naming the visible fraction. :class:`CameraRandomisation` holds
validated ranges and draws one move per episode seed (deterministic: the same seed gives the same camera), drawing
again while a draw would not see the whole workspace.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass, field

import numpy as np

from para_ros.paths import effective_params
from para_ros.sim.cameras import intrinsics_from_fovy, look_at_T_world_cam
from para_ros.sim.pick_place import PickPlaceConfig

# Extra entropy mixed into an episode's seed for its camera draw, so the camera does not reuse the layout's numbers.
CAMERA_STREAM = 0x5CA3E


@dataclass(frozen=True)
class NominalCamera:
    """The scene camera every move starts from (defaults: ``SimConfig``'s, i.e. ``config/sim.yaml``'s)."""

    position_m: tuple = (0.33, -0.5, 0.6)
    look_at_m: tuple = (0.33, 0.0, 0.03)
    up_hint: tuple = (0.0, 0.0, 1.0)
    fovy_deg: float = 38.0

    @classmethod
    def from_sim_config(cls, config=None) -> NominalCamera:
        from para_ros.sim.yam_scene import SimConfig  # mujoco: loaded on first use, not on import

        c = config or SimConfig()
        return cls(
            tuple(c.scene_cam_pos_m),
            tuple(c.scene_cam_look_at_m),
            tuple(c.scene_cam_up_hint),
            float(c.scene_cam_fovy_deg),
        )

    @property
    def distance_m(self) -> float:
        return float(np.linalg.norm(np.subtract(self.position_m, self.look_at_m)))


@dataclass(frozen=True)
class CameraMove:
    """A viewpoint relative to the nominal scene camera (see the module docstring for each field)."""

    orbit_deg: float = 0.0
    height_m: float = 0.0
    distance_m: float = 0.0
    look_at_m: tuple = (0.0, 0.0, 0.0)
    fovy_deg: float | None = None

    def __post_init__(self):
        for name in ("orbit_deg", "height_m", "distance_m"):
            if not math.isfinite(float(getattr(self, name))):
                raise ValueError(f"CameraMove.{name}={getattr(self, name)!r} must be a finite number")
        if len(self.look_at_m) != 3 or not all(math.isfinite(float(v)) for v in self.look_at_m):
            raise ValueError(f"CameraMove.look_at_m={self.look_at_m!r} must be 3 finite numbers (metres)")
        if self.fovy_deg is not None and not 1.0 <= float(self.fovy_deg) <= 170.0:
            raise ValueError(
                f"CameraMove.fovy_deg={self.fovy_deg!r} must be within [1, 170] degrees (the simulator's range)"
            )

    def describe(self) -> str:
        parts = [f"orbit {self.orbit_deg:+g} deg", f"height {100 * self.height_m:+g} cm"]
        if self.distance_m:
            parts.append(f"distance {100 * self.distance_m:+g} cm")
        if any(self.look_at_m):
            parts.append("look-at shift (" + ", ".join(f"{100 * v:+.1f}" for v in self.look_at_m) + ") cm")
        if self.fovy_deg is not None:
            parts.append(f"fovy {self.fovy_deg:g} deg")
        return ", ".join(parts)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["look_at_m"] = [float(v) for v in self.look_at_m]
        return d


def camera_pose(move: CameraMove, nominal: NominalCamera | None = None) -> tuple[np.ndarray, float]:
    """The scene camera of ``move``: (``T_world_cam`` (4, 4) OpenCV optical in ``base``, vertical fov in degrees).

    Order: orbit the nominal centre about the vertical through the nominal look-at point, raise it by ``height_m``,
    move it along the line to the look-at point by ``distance_m``, then aim at the look-at point shifted by
    ``look_at_m``.
    :raises ValueError: if the camera would end at (or past) the look-at point.
    """
    nominal = nominal or NominalCamera()
    target = np.asarray(nominal.look_at_m, dtype=np.float64)  # (3,)
    offset = np.asarray(nominal.position_m, dtype=np.float64) - target  # (3,) look-at -> camera
    a = math.radians(move.orbit_deg)
    R_z = np.array([[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0], [0.0, 0.0, 1.0]])
    offset = R_z @ offset
    offset[2] += move.height_m
    dist = float(np.linalg.norm(offset))
    new_dist = dist + move.distance_m
    if new_dist < 0.05:
        raise ValueError(
            f"camera move {move.describe()}: the camera ends {new_dist:.3f} m from the look-at point "
            "(needs >= 0.05 m); use a smaller negative distance_m"
        )
    position = target + offset * (new_dist / dist)  # (3,)
    aim = target + np.asarray(move.look_at_m, dtype=np.float64)  # (3,)
    fovy = float(nominal.fovy_deg if move.fovy_deg is None else move.fovy_deg)
    return look_at_T_world_cam(position, aim, nominal.up_hint), fovy


def workspace_points_m(task: PickPlaceConfig | None = None, n_per_side: int = 7, top_m: float = 0.04) -> np.ndarray:
    """Points of the task's workspace: an ``n_per_side`` x ``n_per_side`` grid over the box that holds the cube and
    the pad regions, at the table (z = 0) and at the top of the cube (``top_m``). (2 n^2, 3) metres in ``base``."""
    task = task or PickPlaceConfig()
    (cx0, cx1), (cy0, cy1) = task.cube_region_m
    (tx0, tx1), (ty0, ty1) = task.target_region_m
    xs = np.linspace(min(cx0, tx0), max(cx1, tx1), n_per_side)  # (n,)
    ys = np.linspace(min(cy0, ty0), max(cy1, ty1), n_per_side)  # (n,)
    gx, gy = np.meshgrid(xs, ys, indexing="ij")  # (n, n)
    pts = [np.stack([gx.ravel(), gy.ravel(), np.full(gx.size, z)], axis=1) for z in (0.0, top_m)]  # 2 x (n^2, 3)
    return np.concatenate(pts, axis=0)


def visible_mask(points_m: np.ndarray, T_world_cam: np.ndarray, fovy_deg: float, width: int, height: int) -> np.ndarray:
    """Which world points (N, 3) project inside a ``width`` x ``height`` image of this camera, in front of it. (N,)"""
    import torch  # torch: loaded on first use, not on import (the sim's commands and the evaluator stay light)

    from para_core.model.geometry import project  # torch: as above

    K = intrinsics_from_fovy(fovy_deg, width, height)
    uv, depth = project(
        torch.as_tensor(points_m, dtype=torch.float64),
        torch.as_tensor(K),
        torch.as_tensor(T_world_cam, dtype=torch.float64),
    )  # (N, 2), (N,)
    uv, depth = uv.numpy(), depth.numpy()
    return (depth > 0) & (uv[:, 0] >= 0) & (uv[:, 0] < width) & (uv[:, 1] >= 0) & (uv[:, 1] < height)


def visible_fraction(
    T_world_cam: np.ndarray, fovy_deg: float, width: int = 256, height: int = 256, task: PickPlaceConfig | None = None
) -> float:
    """Fraction (0..1) of :func:`workspace_points_m` that this camera sees inside its image."""
    return float(visible_mask(workspace_points_m(task), T_world_cam, fovy_deg, width, height).mean())


def check_workspace_visible(
    move: CameraMove,
    nominal: NominalCamera | None = None,
    width: int = 256,
    height: int = 256,
    min_fraction: float = 1.0,
    task: PickPlaceConfig | None = None,
) -> tuple[np.ndarray, float]:
    """:func:`camera_pose` of ``move`` after checking that at least ``min_fraction`` of the workspace is in view.

    :raises ValueError: naming the move and the visible fraction when less is in view.
    """
    T, fovy = camera_pose(move, nominal)
    frac = visible_fraction(T, fovy, width, height, task)
    if frac < min_fraction:
        raise ValueError(
            f"camera move {move.describe()} leaves the workspace partly out of view: "
            f"{100 * frac:.0f} % of it projects inside the {width}x{height} image (needs >= "
            f"{100 * min_fraction:.0f} %); choose a smaller move or a wider field of view"
        )
    return T, fovy


def checked_range(
    value, name: str, lo: float, hi: float, unit: str, owner: str = "CameraRandomisation"
) -> tuple[float, float]:
    """``value`` as a (low, high) pair of floats within [lo, hi]; a ValueError names ``owner.name`` and the rule."""
    try:
        a, b = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{owner}.{name}={value!r} must be two numbers (low, high) in {unit}") from None
    if not (math.isfinite(a) and math.isfinite(b) and lo <= a <= b <= hi):
        raise ValueError(f"{owner}.{name}=({a:g}, {b:g}) must satisfy {lo:g} <= low <= high <= {hi:g} ({unit})")
    return a, b


@dataclass
class CameraRandomisation:
    """Ranges of the scene camera drawn for each demonstration (uniform in each; see :class:`CameraMove`).

    Args:
        orbit_deg: (low, high) orbit about the workspace's vertical axis, degrees, within [-180, 180].
        height_m: (low, high) change of the camera height, metres, within [-0.4, 0.6].
        distance_m: (low, high) change of the distance to the look-at point, metres, within [-0.4, 0.6].
        look_at_jitter_m: each coordinate of the aim point is shifted uniformly in +-this, metres, within [0, 0.2].
        fovy_deg: (low, high) vertical field of view, degrees, within [10, 120].
        min_visible_fraction: a draw is kept only if at least this fraction of the workspace is in view (0, 1].
        image_size: image side the visibility is judged at, pixels (the rendered size).
        max_draws: draws per episode before giving up (the ranges then leave the workspace out of view too often).
    """

    orbit_deg: tuple = (-45.0, 45.0)
    height_m: tuple = (-0.17, 0.17)
    distance_m: tuple = (-0.08, 0.08)
    look_at_jitter_m: float = 0.03
    fovy_deg: tuple = (28.0, 48.0)
    min_visible_fraction: float = 1.0
    image_size: int = 256
    max_draws: int = 200
    nominal: NominalCamera = field(default_factory=NominalCamera)

    def __post_init__(self):
        self.orbit_deg = checked_range(self.orbit_deg, "orbit_deg", -180.0, 180.0, "degrees")
        self.height_m = checked_range(self.height_m, "height_m", -0.4, 0.6, "metres")
        self.distance_m = checked_range(self.distance_m, "distance_m", -0.4, 0.6, "metres")
        self.fovy_deg = checked_range(self.fovy_deg, "fovy_deg", 10.0, 120.0, "degrees")
        if not 0.0 <= float(self.look_at_jitter_m) <= 0.2:
            raise ValueError(
                f"CameraRandomisation.look_at_jitter_m={self.look_at_jitter_m!r} must be within [0, 0.2] metres"
            )
        if not 0.0 < float(self.min_visible_fraction) <= 1.0:
            raise ValueError(
                f"CameraRandomisation.min_visible_fraction={self.min_visible_fraction!r} must be within (0, 1]"
            )
        if not 32 <= int(self.image_size) <= 1024:
            raise ValueError(f"CameraRandomisation.image_size={self.image_size!r} must be within 32..1024 pixels")
        if not 1 <= int(self.max_draws) <= 100_000:
            raise ValueError(f"CameraRandomisation.max_draws={self.max_draws!r} must be within 1..100000")
        if self.distance_m[0] <= 0.1 - self.nominal.distance_m:
            raise ValueError(
                f"CameraRandomisation.distance_m low {self.distance_m[0]:g} m would bring the camera "
                f"within 0.1 m of the look-at point (nominal distance {self.nominal.distance_m:.2f} m); "
                "raise it"
            )

    def draw(self, rng: np.random.Generator) -> CameraMove:
        """One move, uniform in the ranges (no visibility check)."""
        j = float(self.look_at_jitter_m)
        return CameraMove(
            orbit_deg=float(rng.uniform(*self.orbit_deg)),
            height_m=float(rng.uniform(*self.height_m)),
            distance_m=float(rng.uniform(*self.distance_m)),
            look_at_m=tuple(float(v) for v in rng.uniform(-j, j, size=3)),
            fovy_deg=float(rng.uniform(*self.fovy_deg)),
        )

    def sample(self, seed: int, task: PickPlaceConfig | None = None) -> SampledCamera:
        """The camera of the episode with layout seed ``seed``: the first draw that sees at least
        ``min_visible_fraction`` of the workspace.

        :raises ValueError: when ``max_draws`` draws all leave the workspace out of view (the ranges are too wide).
        """
        rng = np.random.default_rng([int(seed), CAMERA_STREAM])
        worst = 1.0
        for draws in range(1, int(self.max_draws) + 1):
            move = self.draw(rng)
            T, fovy = camera_pose(move, self.nominal)
            frac = visible_fraction(T, fovy, self.image_size, self.image_size, task)
            if frac >= self.min_visible_fraction:
                return SampledCamera(move, T, fovy, frac, draws)
            worst = min(worst, frac)
        raise ValueError(
            f"camera randomisation: {self.max_draws} draws for seed {seed} all left the workspace partly "
            f"out of view (as little as {100 * worst:.0f} % visible, needs >= "
            f"{100 * self.min_visible_fraction:.0f} %); narrow the ranges"
        )

    def to_dict(self) -> dict:
        d = asdict(self)
        d["nominal"] = asdict(self.nominal)
        return d


@dataclass
class SampledCamera:
    """One episode's scene camera: the move, its pose and field of view, the visible workspace fraction."""

    move: CameraMove
    T_world_cam: np.ndarray  # (4, 4)
    fovy_deg: float
    visible_fraction: float
    draws: int

    def to_dict(self) -> dict:
        return {
            "move": self.move.to_dict(),
            "T_world_cam": np.asarray(self.T_world_cam).tolist(),
            "fovy_deg": self.fovy_deg,
            "visible_fraction": self.visible_fraction,
            "draws": self.draws,
        }

    def sim_node_overrides(self) -> dict:
        """``sim_node`` parameters that put its scene camera here (the pose then goes out on /tf_static)."""
        return {
            "scene_cam_T_world_cam": [float(v) for v in np.asarray(self.T_world_cam).reshape(-1)],
            "scene_cam_fovy_deg": float(self.fovy_deg),
        }


def apply_to_sim(sim, camera: SampledCamera) -> None:
    """Put a ``YamSim``'s scene camera at ``camera`` (pose and field of view)."""
    sim.set_scene_camera_pose(camera.T_world_cam, fovy_deg=camera.fovy_deg)


# ----------------------------------------------------------------------------------------------- command line
def _pair(text: str) -> tuple[float, float]:
    try:
        parts = [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give LOW,HIGH (two numbers)") from None
    if len(parts) != 2:
        raise argparse.ArgumentTypeError(f"{text!r}: give LOW,HIGH (two numbers)")
    return parts[0], parts[1]


def add_randomisation_arguments(p) -> None:
    """``--randomise-camera`` and its ranges (``para-sim demos`` / ``record``)."""
    d = CameraRandomisation.__dataclass_fields__
    g = p.add_argument_group("scene camera randomisation (each episode from a camera drawn around the nominal one)")
    g.add_argument(
        "--randomise-camera",
        action="store_true",
        help="draw the scene camera per episode (deterministic from the layout seed); the true pose goes "
        "into every frame (para-sim demos) or onto /tf_static (para-sim record)",
    )
    g.add_argument(
        "--orbit-deg",
        type=_pair,
        default=d["orbit_deg"].default,
        metavar="LO,HI",
        help="orbit about the workspace's vertical axis, degrees (default %(default)s)",
    )
    g.add_argument(
        "--height-m",
        type=_pair,
        default=d["height_m"].default,
        metavar="LO,HI",
        help="camera raised by, metres, still aimed at the workspace (default %(default)s)",
    )
    g.add_argument(
        "--distance-m",
        type=_pair,
        default=d["distance_m"].default,
        metavar="LO,HI",
        help="camera moved away from the workspace by, metres (default %(default)s)",
    )
    g.add_argument(
        "--look-at-jitter-m",
        type=float,
        default=d["look_at_jitter_m"].default,
        metavar="M",
        help="aim point shifted by up to +-M per axis, metres (default %(default)s)",
    )
    g.add_argument(
        "--fovy-deg",
        type=_pair,
        default=d["fovy_deg"].default,
        metavar="LO,HI",
        help="vertical field of view, degrees (default %(default)s)",
    )


def randomisation_from_args(args, image_size: int = 256) -> CameraRandomisation | None:
    """The :class:`CameraRandomisation` of the parsed options (None without ``--randomise-camera``)."""
    if not getattr(args, "randomise_camera", False):
        return None
    return CameraRandomisation(
        orbit_deg=args.orbit_deg,
        height_m=args.height_m,
        distance_m=args.distance_m,
        look_at_jitter_m=args.look_at_jitter_m,
        fovy_deg=args.fovy_deg,
        image_size=image_size,
        nominal=NominalCamera.from_sim_config(),
    )


def check_scene_camera_sees_workspace(
    T_world_cam: np.ndarray, sim_params: dict | None = None, min_fraction: float = 1.0
) -> float:
    """Refuse (ValueError, naming the visible fraction) a scene camera pose of the sim node that does not see at
    least ``min_fraction`` of the task's workspace; ``sim_params``: sim_node parameters that differ from
    ``config/sim.yaml`` (``scene_cam_fovy_deg``, ``image_width``, ``image_height``). Returns the visible fraction."""
    params = effective_params("config/sim.yaml", "sim_node", sim_params or {})
    fovy, width, height = float(params["scene_cam_fovy_deg"]), int(params["image_width"]), int(params["image_height"])
    frac = visible_fraction(T_world_cam, fovy, width, height)
    if frac < min_fraction:
        pos = ", ".join(f"{v:.3f}" for v in np.asarray(T_world_cam)[:3, 3])
        raise ValueError(
            f"the scene camera at ({pos}) m with fovy {fovy:g} deg sees {100 * frac:.0f} % of the "
            f"workspace (needs >= {100 * min_fraction:.0f} %): a move that puts the cube or pad out of "
            "view tests nothing; choose a smaller move"
        )
    return frac
