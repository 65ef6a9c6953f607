"""The pick-and-place task of the simulated YAM: seeded layouts and a success detector. ROS-free.

Task: one cube (``cube_0``) lies on the table at a random position and yaw; a coloured pad (no collision) marks a
random target spot; the robot must pick the cube up and leave it resting on the pad, released.

* :func:`sample_layout` draws a :class:`Layout` from a seed (the same seed always gives the same layout), with the
  cube and the target at least ``min_separation_m`` apart so that every episode needs a carry.
* :func:`judge` reads the simulator's state and says what the cube is doing now (:class:`Judgement`):
  ``held`` (a finger touches it), ``moving``, ``fallen`` (not resting on a face, or off the table), ``off_target``
  (resting, released, too far from the pad centre) or ``on_target`` (resting on a face, released, its centre within
  ``success_tolerance_m`` of the pad centre in the table plane). Success = ``on_target``.
* :class:`EpisodeMonitor` follows an episode tick by tick and, at its end, names the failure cause it can tell apart:
  ``no_grasp`` (the cube was never lifted), ``dropped`` (lifted, then left off target after being released away from
  the pad), ``misplaced`` (released near the pad but resting outside the tolerance), ``fallen``, ``timeout`` (still
  held or moving at the time limit).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# "fault": the evaluation itself failed (lockstep: an answer of the graph that never came), not the policy.
OUTCOMES = ("success", "no_grasp", "dropped", "misplaced", "fallen", "timeout", "limits", "fault")


@dataclass
class PickPlaceConfig:
    """Randomisation and success rules of the task.

    Args:
        cube_region_m: ((x_lo, x_hi), (y_lo, y_hi)) where the cube centre is drawn, metres in ``base``.
        target_region_m: the same for the target pad centre.
        cube_yaw_range_rad: the cube's yaw is uniform in +-this (the expert grasps top-down at yaw 0; a parallel
            gripper squares a cube up to about +-35 deg on closing).
        min_separation_m: smallest cube-to-target distance in the table plane.
        success_tolerance_m: largest distance of the cube centre from the pad centre (table plane) for success.
        rest_speed_m_s: the cube counts as resting below this speed.
        flat_tolerance_rad: resting "on a face" = some cube axis within this angle of world z.
        lift_height_m: the cube counts as lifted when its bottom is this far above the table.
    """

    cube_region_m: tuple = ((0.26, 0.40), (-0.12, 0.12))
    target_region_m: tuple = ((0.26, 0.40), (-0.12, 0.12))
    cube_yaw_range_rad: float = 0.5
    min_separation_m: float = 0.10
    success_tolerance_m: float = 0.03
    rest_speed_m_s: float = 0.02
    flat_tolerance_rad: float = math.radians(10.0)
    lift_height_m: float = 0.02

    def __post_init__(self):
        for name in ("cube_region_m", "target_region_m"):
            (x_lo, x_hi), (y_lo, y_hi) = getattr(self, name)
            if not (x_lo < x_hi and y_lo < y_hi):
                raise ValueError(
                    f"PickPlaceConfig.{name}={getattr(self, name)} must be ((x_lo, x_hi), (y_lo, y_hi)) with lo < hi"
                )
        for name in ("success_tolerance_m", "rest_speed_m_s", "flat_tolerance_rad", "lift_height_m"):
            if not float(getattr(self, name)) > 0:
                raise ValueError(f"PickPlaceConfig.{name}={getattr(self, name)} must be > 0")
        if not 0 <= float(self.cube_yaw_range_rad) <= math.pi:
            raise ValueError(f"PickPlaceConfig.cube_yaw_range_rad={self.cube_yaw_range_rad} must be in [0, pi]")
        if float(self.min_separation_m) < 0:
            raise ValueError(f"PickPlaceConfig.min_separation_m={self.min_separation_m} must be >= 0")


@dataclass(frozen=True)
class Layout:
    """One episode's initial scene: cube centre (x, y) and yaw, target pad centre (x, y); metres, radians."""

    seed: int
    cube_xy_m: tuple
    cube_yaw_rad: float
    target_xy_m: tuple

    def to_dict(self) -> dict:
        return {
            "seed": self.seed,
            "cube_xy_m": list(self.cube_xy_m),
            "cube_yaw_rad": self.cube_yaw_rad,
            "target_xy_m": list(self.target_xy_m),
        }


MAX_SEED = 2**31 - 1


def check_seed(seed) -> int:
    """A task seed as an int in [0, 2^31 - 1], else a ValueError naming the valid range."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) <= MAX_SEED:
        raise ValueError(f"task seed {seed!r} is out of range: use an integer in [0, {MAX_SEED}]")
    return int(seed)


def sample_layout(seed: int, config: PickPlaceConfig | None = None) -> Layout:
    """The layout of episode ``seed`` (deterministic)."""
    config = config or PickPlaceConfig()
    rng = np.random.default_rng(check_seed(seed))
    (cx0, cx1), (cy0, cy1) = config.cube_region_m
    (tx0, tx1), (ty0, ty1) = config.target_region_m
    for _ in range(1000):
        cube = np.array([rng.uniform(cx0, cx1), rng.uniform(cy0, cy1)])
        target = np.array([rng.uniform(tx0, tx1), rng.uniform(ty0, ty1)])
        if np.linalg.norm(cube - target) >= config.min_separation_m:
            break
    else:
        raise ValueError(f"no layout with min_separation_m={config.min_separation_m} fits the regions")
    yaw = float(rng.uniform(-config.cube_yaw_range_rad, config.cube_yaw_range_rad))
    return Layout(int(seed), tuple(float(v) for v in cube), yaw, tuple(float(v) for v in target))


def apply_layout(sim, layout: Layout) -> None:
    """Put the cube and the target pad of ``layout`` into ``sim`` (a ``YamSim`` with a target pad)."""
    h = sim.config.cube_half_size_m
    sim.set_cube_pose(0, (layout.cube_xy_m[0], layout.cube_xy_m[1], h + 1e-4), layout.cube_yaw_rad)
    sim.set_target_position(layout.target_xy_m)


@dataclass
class Judgement:
    """What the cube is doing now (see the module docstring)."""

    state: str  # "held" | "moving" | "fallen" | "off_target" | "on_target"
    place_error_m: float  # cube centre to pad centre, table plane
    cube_height_m: float  # cube bottom above the table (for a cube resting on a face: about 0)
    held: bool

    @property
    def success(self) -> bool:
        return self.state == "on_target"


def cube_tilt_rad(R_world_cube: np.ndarray) -> float:
    """Angle between world z and the cube axis closest to it (0 = resting on a face)."""
    cos = np.abs(np.asarray(R_world_cube)[2, :3]).max()  # |z component| of each cube axis
    return float(math.acos(min(1.0, cos)))


def judge_state(
    T_world_cube: np.ndarray,
    velocity: np.ndarray,
    touching_fingers: int,
    target_xyz: np.ndarray,
    cube_half_size_m: float,
    config: PickPlaceConfig | None = None,
) -> Judgement:
    """The rule of :func:`judge` on plain numbers (testable with hand-placed poses)."""
    config = config or PickPlaceConfig()
    pos = np.asarray(T_world_cube)[:3, 3]
    err = float(np.linalg.norm(pos[:2] - np.asarray(target_xyz)[:2]))
    bottom = float(pos[2] - cube_half_size_m)
    held = touching_fingers > 0
    tilt = cube_tilt_rad(np.asarray(T_world_cube)[:3, :3])
    speed = float(np.linalg.norm(np.asarray(velocity)[:3]))
    if held:
        state = "held"
    elif pos[2] < 0.0 or (speed < config.rest_speed_m_s and tilt > config.flat_tolerance_rad):
        state = "fallen"
    elif speed >= config.rest_speed_m_s or bottom > 0.01:
        state = "moving"
    elif err <= config.success_tolerance_m:
        state = "on_target"
    else:
        state = "off_target"
    return Judgement(state, err, bottom, held)


def judge(sim, config: PickPlaceConfig | None = None) -> Judgement:
    """Judge the cube of ``sim`` (a ``YamSim``) now."""
    return judge_state(
        sim.cube_pose(0),
        sim.cube_velocity(0),
        len(sim.finger_contacts(0)),
        sim.target_position(),
        sim.config.cube_half_size_m,
        config,
    )


class EpisodeMonitor:
    """Follows one episode (call :meth:`update` every tick) and classifies its end (:meth:`outcome`)."""

    def __init__(self, config: PickPlaceConfig | None = None):
        self.config = config or PickPlaceConfig()
        self.max_lift_m = 0.0
        self.release_error_m: float | None = None  # place error when the cube was last let go of in the air
        self.last: Judgement | None = None
        self._was_held = False

    def update(self, j: Judgement) -> Judgement:
        if j.held:
            self.max_lift_m = max(self.max_lift_m, j.cube_height_m)
        if self._was_held and not j.held:
            self.release_error_m = j.place_error_m
        self._was_held = j.held
        self.last = j
        return j

    @property
    def lifted(self) -> bool:
        return self.max_lift_m >= self.config.lift_height_m

    def outcome(self, limits_hit: bool = False) -> str:
        """One of :data:`OUTCOMES` for the episode so far (call at its end)."""
        j = self.last
        if j is not None and j.success:
            return "success"
        if limits_hit:
            return "limits"
        if not self.lifted:
            return "no_grasp"
        if j is None or j.state in ("held", "moving"):
            return "timeout"
        if j.state == "fallen":
            return "fallen"
        near = self.release_error_m is not None and self.release_error_m <= 2.0 * self.config.success_tolerance_m
        return "misplaced" if near else "dropped"


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """95 % Wilson score interval of a success rate (``z`` = the normal quantile)."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # clamped to hold the rate: at 0 or n successes the end equals it and rounding could put it on the wrong side
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))
