"""What a real rig varies besides the scene camera's pose, drawn per demonstration: the wrist camera's mount and
field of view, object / pad / table colours, the lamps, and distractor objects the task ignores. ROS-free.

A :class:`RigRandomisation` holds validated ranges; :meth:`RigRandomisation.sample` draws one episode's
:class:`SampledRig` from the episode's layout seed (deterministic: the same seed gives the same rig, and the draw
does not reuse the layout's or the scene camera's random numbers); :func:`apply_rig` puts a sampled rig into a
:class:`~para_ros.sim.yam_scene.YamSim` at run time (no rebuild: model fields are written in place). The frames the
demonstrations record stay the truth: the wrist camera's pose is read back from the moved mount, its intrinsics from
the drawn field of view.

The words a rig builder uses:

* ``wrist_mount_xyz_m`` / ``wrist_mount_rpy_deg``: the wrist camera sits up to this far (each axis, in its own optical
  frame) and turned up to this much (roll, pitch, yaw) from its CAD mount in ``config/yam.yaml``.
* ``wrist_fovy_deg``: the wrist camera's vertical field of view (a focal length that differs from the data sheet).
* ``cube_hue_deg``, ``cube_saturation``, ``cube_value``: the task cube's colour in HSV (hue in degrees, 0 = red);
  ``pad_*`` the same for the target pad; ``table_*`` for the table top.
* ``light_scale``: each lamp's brightness relative to the training scene; ``light_tint``: each colour channel of a
  lamp scaled by up to +-this (white balance); ``light_direction_deg``: each lamp's direction turned by up to this;
  ``ambient``: the headlight's ambient level (0..1).
* ``n_distractors``: how many distractor objects (spheres and cylinders of random colours, never a cube) stand on the
  table, at least ``distractor_clearance_m`` from the cube and the pad centre. They are visual only: the arm and the
  cube pass through them, so they change what the cameras see, never the physics.
"""

from __future__ import annotations

import colorsys
import math
from dataclasses import asdict, dataclass, fields

import numpy as np

from para_ros.sim.calibration_board import offset_T
from para_ros.sim.camera_sampler import checked_range

# Extra entropy mixed into an episode's seed for its rig draw (the scene camera uses its own stream).
RIG_STREAM = 0x516A
DISTRACTOR_PREFIX = "distractor_"
HIDDEN_Z_M = -0.5  # an unused distractor slot waits below the table top, out of every camera's view
COLOURED = ("cube", "pad", "table")  # the parts whose colour a rig draws (RigRandomisation.keep_colours)


def _range(value, name: str, lo: float, hi: float, unit: str) -> tuple[float, float]:
    return checked_range(value, name, lo, hi, unit, owner="RigRandomisation")


def _bound(value, name: str, hi: float, unit: str) -> float:
    v = float(value)
    if not (math.isfinite(v) and 0.0 <= v <= hi):
        raise ValueError(f"RigRandomisation.{name}={value!r} must be within [0, {hi:g}] {unit}")
    return v


# (field name, kind, limits, unit): one table drives validation, the command-line option and its help.
_RANGES = {
    "wrist_fovy_deg": (20.0, 120.0, "degrees"),
    "cube_hue_deg": (-360.0, 360.0, "degrees"),
    "cube_saturation": (0.0, 1.0, "0..1"),
    "cube_value": (0.0, 1.0, "0..1"),
    "pad_hue_deg": (-360.0, 360.0, "degrees"),
    "pad_saturation": (0.0, 1.0, "0..1"),
    "pad_value": (0.0, 1.0, "0..1"),
    "table_hue_deg": (-360.0, 360.0, "degrees"),
    "table_saturation": (0.0, 1.0, "0..1"),
    "table_value": (0.0, 1.0, "0..1"),
    "light_scale": (0.0, 3.0, "x the training scene's lamps"),
    "ambient": (0.0, 1.0, "0..1"),
    "n_distractors": (0.0, 8.0, "objects"),
}
_BOUNDS = {
    "wrist_mount_xyz_m": (0.02, "metres"),
    "wrist_mount_rpy_deg": (15.0, "degrees"),
    "light_tint": (0.5, "fraction per colour channel"),
    "light_direction_deg": (60.0, "degrees"),
    "distractor_clearance_m": (0.3, "metres"),
}


@dataclass
class RigRandomisation:
    """Ranges of the rig drawn for each demonstration (uniform in each; see the module docstring for each word).

    Args:
        wrist_mount_xyz_m: the wrist camera's position error per axis is uniform in +-this, metres, within [0, 0.02].
        wrist_mount_rpy_deg: its roll, pitch and yaw errors are uniform in +-this, degrees, within [0, 15].
        wrist_fovy_deg: (low, high) vertical field of view of the wrist camera, degrees (nominal 58).
        cube_hue_deg / cube_saturation / cube_value: (low, high) of the task cube's colour in HSV.
        pad_hue_deg / pad_saturation / pad_value: the same for the target pad.
        table_hue_deg / table_saturation / table_value: the same for the table top.
        light_scale: (low, high) brightness of each lamp, relative to the training scene's.
        light_tint: each lamp's r, g, b are scaled by 1 +- up to this.
        light_direction_deg: each lamp's direction is turned by up to this about a random horizontal axis.
        ambient: (low, high) ambient level of the headlight (training scene 0.35).
        n_distractors: (low, high) number of distractor objects (whole numbers, within 0..8).
        distractor_clearance_m: a distractor stands at least this far from the cube and the pad centre, metres.
        keep_colours: of "cube", "pad", "table": these keep the scene's configured colour (the random numbers are
            drawn all the same, so every other draw of a seed stays what it is with all colours drawn).
    """

    wrist_mount_xyz_m: float = 0.004
    wrist_mount_rpy_deg: float = 4.0
    wrist_fovy_deg: tuple = (55.0, 61.0)
    cube_hue_deg: tuple = (-180.0, 180.0)
    cube_saturation: tuple = (0.55, 1.0)
    cube_value: tuple = (0.45, 1.0)
    pad_hue_deg: tuple = (-180.0, 180.0)
    pad_saturation: tuple = (0.55, 1.0)
    pad_value: tuple = (0.45, 1.0)
    table_hue_deg: tuple = (0.0, 360.0)
    table_saturation: tuple = (0.0, 0.3)
    table_value: tuple = (0.55, 0.9)
    light_scale: tuple = (0.6, 1.4)
    light_tint: float = 0.1
    light_direction_deg: float = 20.0
    ambient: tuple = (0.25, 0.45)
    n_distractors: tuple = (0.0, 2.0)
    distractor_clearance_m: float = 0.08
    keep_colours: tuple = ()

    def __post_init__(self):
        keep = tuple(str(k) for k in self.keep_colours)
        unknown = sorted(set(keep) - set(COLOURED))
        if unknown:
            raise ValueError(f"RigRandomisation.keep_colours={list(keep)}: {unknown} not among {list(COLOURED)}")
        self.keep_colours = tuple(k for k in COLOURED if k in keep)
        for name, (lo, hi, unit) in _RANGES.items():
            setattr(self, name, _range(getattr(self, name), name, lo, hi, unit))
        for name, (hi, unit) in _BOUNDS.items():
            setattr(self, name, _bound(getattr(self, name), name, hi, unit))
        a, b = self.n_distractors
        if a != int(a) or b != int(b):
            raise ValueError(f"RigRandomisation.n_distractors=({a:g}, {b:g}) must be whole numbers")

    @property
    def max_distractors(self) -> int:
        """Distractor slots the simulator must be built with (``SimConfig.n_distractor_slots``)."""
        return int(self.n_distractors[1])

    def sample(self, seed: int, layout=None) -> SampledRig:
        """The rig of the episode with layout seed ``seed``; ``layout``: that episode's
        :class:`~para_ros.sim.pick_place.Layout` (distractors keep clear of its cube and pad; default: drawn from
        the layout seed)."""
        from para_ros.sim.pick_place import sample_layout

        layout = layout or sample_layout(int(seed))
        rng = np.random.default_rng([int(seed), RIG_STREAM])
        xyz = rng.uniform(-self.wrist_mount_xyz_m, self.wrist_mount_xyz_m, size=3)
        rpy_deg = rng.uniform(-self.wrist_mount_rpy_deg, self.wrist_mount_rpy_deg, size=3)
        colour = {k: _hsv_rgba(rng, getattr(self, f"{k}_hue_deg"), getattr(self, f"{k}_saturation"),
                               getattr(self, f"{k}_value")) for k in COLOURED}  # fmt: skip
        for k in self.keep_colours:
            colour[k] = None  # apply_rig writes the scene's configured colour
        lamps = [
            {
                "scale": float(rng.uniform(*self.light_scale)),
                "tint": [float(v) for v in 1.0 + rng.uniform(-self.light_tint, self.light_tint, size=3)],
                "turn_deg": float(rng.uniform(0.0, self.light_direction_deg)),
                "turn_axis_deg": float(rng.uniform(0.0, 360.0)),
            }
            for _ in range(2)
        ]
        n = int(rng.integers(int(self.n_distractors[0]), int(self.n_distractors[1]) + 1))
        distractors = _place_distractors(rng, n, layout, self.distractor_clearance_m)
        return SampledRig(
            wrist_mount_offset_T=offset_T(xyz, rpy_deg),
            wrist_fovy_deg=float(rng.uniform(*self.wrist_fovy_deg)),
            cube_rgba=colour["cube"],
            pad_rgba=colour["pad"],
            table_rgba=colour["table"],
            lamps=lamps,
            ambient=float(rng.uniform(*self.ambient)),
            distractors=distractors,
        )

    def to_dict(self) -> dict:
        return asdict(self)


def _hsv_rgba(rng: np.random.Generator, hue_deg, saturation, value) -> list[float]:
    h = (float(rng.uniform(*hue_deg)) % 360.0) / 360.0
    r, g, b = colorsys.hsv_to_rgb(h, float(rng.uniform(*saturation)), float(rng.uniform(*value)))
    return [float(r), float(g), float(b), 1.0]


def distractors_for_layout(layout, n: int, clearance_m: float = 0.08) -> list[dict]:
    """``n`` distractors for ``layout``, drawn from its seed alone (an evaluation's fixed scene condition)."""
    rng = np.random.default_rng([int(layout.seed), RIG_STREAM, 1])
    return _place_distractors(rng, int(n), layout, float(clearance_m))


def place_distractors(sim, distractors: list) -> None:
    """Put ``distractors`` (dicts as :meth:`RigRandomisation.sample` draws them) into ``sim``'s slots, hide the rest."""
    import mujoco  # mujoco: loaded on first use, not on import

    slots = int(sim.config.n_distractor_slots)
    if len(distractors) > slots:
        raise ValueError(
            f"{len(distractors)} distractors but the simulator was built with {slots} slots "
            "(SimConfig.n_distractor_slots)"
        )
    for i in range(slots):
        _place_distractor_slot(sim, i, distractors[i] if i < len(distractors) else None)
    mujoco.mj_forward(sim.model, sim.data)


def _place_distractors(rng: np.random.Generator, n: int, layout, clearance_m: float) -> list[dict]:
    """``n`` distractors on the table, each at least ``clearance_m`` from the cube, the pad and each other."""
    keep_clear = [np.asarray(layout.cube_xy_m, dtype=np.float64), np.asarray(layout.target_xy_m, dtype=np.float64)]
    out: list[dict] = []
    for _ in range(n):
        for _attempt in range(500):
            xy = np.array([rng.uniform(0.2, 0.46), rng.uniform(-0.2, 0.2)])  # (2,) inside the cameras' table view
            if all(np.linalg.norm(xy - p) >= clearance_m for p in keep_clear):
                break
        else:
            raise ValueError(
                f"rig randomisation: no room for {n} distractors {clearance_m:g} m clear of the cube, the pad and "
                "each other on the table; lower n_distractors or distractor_clearance_m"
            )
        keep_clear.append(xy)
        shape = "sphere" if rng.uniform() < 0.5 else "cylinder"
        radius = float(rng.uniform(0.012, 0.025))
        half_height = radius if shape == "sphere" else float(rng.uniform(0.01, 0.035))
        out.append(
            {
                "shape": shape,
                "xy_m": [float(v) for v in xy],
                "radius_m": radius,
                "half_height_m": half_height,
                "rgba": _hsv_rgba(rng, (0.0, 360.0), (0.0, 1.0), (0.2, 1.0)),
            }
        )
    return out


@dataclass
class SampledRig:
    """One episode's rig (what :func:`apply_rig` writes into the simulator)."""

    wrist_mount_offset_T: np.ndarray  # (4, 4) in the wrist camera's optical frame, applied to the CAD mount
    wrist_fovy_deg: float
    cube_rgba: list | None  # None: the scene's configured colour (RigRandomisation.keep_colours)
    pad_rgba: list | None
    table_rgba: list | None
    lamps: list  # one dict per lamp: scale, tint (3,), turn_deg, turn_axis_deg
    ambient: float
    distractors: list  # dicts: shape, xy_m, radius_m, half_height_m, rgba

    def to_dict(self) -> dict:
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["wrist_mount_offset_T"] = np.asarray(self.wrist_mount_offset_T).tolist()
        return d


def nominal_rig(sim) -> SampledRig:
    """The training scene's rig (CAD wrist mount, configured colours, lamps as built, no distractors)."""
    c = sim.config
    return SampledRig(
        wrist_mount_offset_T=np.eye(4),
        wrist_fovy_deg=float(c.wrist_cam_fovy_deg),
        cube_rgba=list(c.cube_rgba),
        pad_rgba=list(c.target_rgba),
        table_rgba=list(c.table_rgba),
        lamps=[{"scale": 1.0, "tint": [1.0, 1.0, 1.0], "turn_deg": 0.0, "turn_axis_deg": 0.0}] * 2,
        ambient=0.35,
        distractors=[],
    )


def apply_rig(sim, rig: SampledRig) -> None:
    """Write ``rig`` into ``sim`` (a ``YamSim`` built with enough ``n_distractor_slots``), in place.

    :raises ValueError: when the rig has more distractors than the simulator has slots.
    """
    import mujoco  # mujoco: loaded on first use, not on import

    from para_ros.sim.yam_scene import LAMP_DIFFUSE, LAMP_DIRECTIONS, WRIST_CAM_BODY

    m = sim.model
    place_distractors(sim, rig.distractors)
    T_mount = sim.config.wrist_cam_true_T_gripper_cam() @ np.asarray(rig.wrist_mount_offset_T).reshape(4, 4)
    body = m.body(WRIST_CAM_BODY).id
    m.body_pos[body] = T_mount[:3, 3]
    m.body_quat[body] = _quat_wxyz(T_mount[:3, :3])
    m.cam_fovy[m.camera("wrist").id] = float(rig.wrist_fovy_deg)
    c = sim.config
    m.geom_rgba[m.geom("cube_0_geom").id] = c.cube_rgba if rig.cube_rgba is None else rig.cube_rgba
    if sim.has_target_pad():
        m.geom_rgba[m.geom("target_pad_geom").id] = c.target_rgba if rig.pad_rgba is None else rig.pad_rgba
    m.geom_rgba[m.geom("table").id] = c.table_rgba if rig.table_rgba is None else rig.table_rgba
    for i, lamp in enumerate(rig.lamps):
        m.light_diffuse[i] = LAMP_DIFFUSE * float(sim.config.light_scale) * lamp["scale"] * np.asarray(lamp["tint"])
        m.light_dir[i] = _turned(
            np.asarray(LAMP_DIRECTIONS[i], dtype=np.float64), lamp["turn_deg"], lamp["turn_axis_deg"]
        )
    m.vis.headlight.ambient[:] = rig.ambient
    mujoco.mj_forward(m, sim.data)


def _place_distractor_slot(sim, i: int, d: dict | None) -> None:
    import mujoco  # mujoco: loaded on first use, not on import

    m = sim.model
    body = m.body(f"{DISTRACTOR_PREFIX}{i}")
    geom = m.geom(f"{DISTRACTOR_PREFIX}{i}_geom").id
    mocap = m.body_mocapid[body.id]
    if d is None:
        m.body_pos[body.id] = sim.data.mocap_pos[mocap] = [0.3, 0.0, HIDDEN_Z_M]
        m.geom_rgba[geom][3] = 0.0
        return
    m.geom_type[geom] = mujoco.mjtGeom.mjGEOM_SPHERE if d["shape"] == "sphere" else mujoco.mjtGeom.mjGEOM_CYLINDER
    m.geom_size[geom] = [d["radius_m"], d["half_height_m"], 0.0]
    m.geom_rgba[geom] = d["rgba"]
    m.geom_rbound[geom] = math.hypot(d["radius_m"], d["half_height_m"])  # the renderer culls by this bound
    # body_pos too: a reset (mj_resetData) puts every mocap body back at its body_pos
    m.body_pos[body.id] = sim.data.mocap_pos[mocap] = [d["xy_m"][0], d["xy_m"][1], d["half_height_m"]]


def _turned(direction: np.ndarray, turn_deg: float, axis_deg: float) -> np.ndarray:
    """``direction`` (3,) turned by ``turn_deg`` about the horizontal axis at ``axis_deg`` from x (Rodrigues)."""
    a = math.radians(axis_deg)
    k = np.array([math.cos(a), math.sin(a), 0.0])  # (3,) unit axis
    t = math.radians(turn_deg)
    v = direction / np.linalg.norm(direction)
    return v * math.cos(t) + np.cross(k, v) * math.sin(t) + k * np.dot(k, v) * (1.0 - math.cos(t))


def _quat_wxyz(R: np.ndarray) -> np.ndarray:
    from para_ros.sim.cameras import rotation_matrix_to_quat_wxyz

    return np.asarray(rotation_matrix_to_quat_wxyz(R), dtype=np.float64)


# ----------------------------------------------------------------------------------------------- command line
def add_rig_arguments(p) -> None:
    """``--randomise-rig`` and ``--rig-range NAME=LO,HI`` (``para-sim demos``)."""
    g = p.add_argument_group(
        "rig randomisation (wrist mount, wrist field of view, colours, lamps, distractors drawn per episode)"
    )
    g.add_argument(
        "--randomise-rig",
        action="store_true",
        help="draw the rig per episode (deterministic from the layout seed) within the ranges below; the true "
        "wrist camera pose and intrinsics go into every frame, the draw into the episode's meta.json",
    )
    defaults = RigRandomisation()
    names = ", ".join(f"{k}={_fmt(getattr(defaults, k))}" for k in list(_RANGES) + list(_BOUNDS))
    g.add_argument(
        "--rig-range",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="change one range (LO,HI) or bound (one number); repeatable. Names and defaults: " + names,
    )
    g.add_argument(
        "--rig-keep-colours",
        nargs="+",
        default=[],
        choices=COLOURED,
        metavar="PART",
        help=f"parts of {', '.join(COLOURED)} that keep the scene's colour while the rest of the rig is drawn "
        "(e.g. a policy for one known object under varied mounts and light)",
    )


def _fmt(v) -> str:
    return f"{v[0]:g},{v[1]:g}" if isinstance(v, tuple) else f"{v:g}"


def rig_from_args(args) -> RigRandomisation | None:
    """The :class:`RigRandomisation` of the parsed options (None without ``--randomise-rig``).

    :raises ValueError: naming the option and the rule for an unknown name or a bad value.
    """
    changes = {}
    for item in getattr(args, "rig_range", []) or []:
        name, sep, text = item.partition("=")
        name = name.strip().replace("-", "_")
        if not sep or name not in {**_RANGES, **_BOUNDS}:
            raise ValueError(
                f"--rig-range {item!r}: give NAME=VALUE with NAME one of {', '.join(list(_RANGES) + list(_BOUNDS))}"
            )
        try:
            values = [float(v) for v in text.split(",")]
        except ValueError:
            raise ValueError(f"--rig-range {item!r}: {text!r} is not a number list") from None
        want = 2 if name in _RANGES else 1
        if len(values) != want:
            raise ValueError(f"--rig-range {item!r}: {name} takes {'LO,HI' if want == 2 else 'one number'}")
        changes[name] = tuple(values) if want == 2 else values[0]
    keep = tuple(getattr(args, "rig_keep_colours", []) or [])
    if not getattr(args, "randomise_rig", False):
        if changes or keep:
            raise ValueError(f"{'--rig-range' if changes else '--rig-keep-colours'} needs --randomise-rig")
        return None
    return RigRandomisation(**changes, keep_colours=keep)


__all__ = [
    "RigRandomisation",
    "SampledRig",
    "add_rig_arguments",
    "apply_rig",
    "distractors_for_layout",
    "place_distractors",
    "nominal_rig",
    "rig_from_args",
]
