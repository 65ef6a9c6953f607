"""The layouts LeRobot's YAM recorders write, as named profiles: joint names, units and camera keys.

A LeRobot dataset of the YAM holds joint positions under ``observation.state`` with per-joint names, and nothing says
their unit: the PyPI follower plugin writes each arm joint scaled to [-100, 100] over its range, another widespread
plugin degrees (``use_degrees``) or the same [-100, 100] scale, other recorders radians. Read in the wrong unit, a
dataset gives plausible joints and tool poses tens of centimetres off, so ``para-bag import-lerobot --layout NAME``
names the layout, and :func:`check_layout` refuses a dataset whose values lie outside the arm's range in it (naming the
layouts whose unit would fit), a layout whose joints the dataset lacks (naming the layouts whose names it has) and a
camera key that is not a video feature.

Units (``joint_unit``):

* ``deg`` / ``rad``: the joint angle itself.
* ``range``: ``-100 + 200 * (q - lo) / (hi - lo)`` over the recorder's own joint range ``joint_range_rad`` (lo, hi),
  clipped there; so q = lo + (v + 100) / 200 * (hi - lo).

The gripper's value divided by ``gripper_scale`` is the package's opening (0 closed .. 1 open).

The profiles, checked against the plugins' own source (read from the packages, not copied):

* ``yam-follower-pypi``: ``lerobot-robot-yam`` 0.1.2 + ``yam-common`` 0.1.2 on PyPI
  (``lerobot_robot_yam/config_yam_follower.py``: motors ``shoulder_pan`` .. ``wrist_yaw`` with
  ``MotorNormMode.RANGE_M100_100`` and ``gripper`` with ``RANGE_0_100``; ``yam_common/yam_arm.py``:
  ``normalize_from_physical`` scales each arm joint over ``DEFAULT_JOINT_LIMITS`` (the I2RT SDK's limits plus its
  0.15 rad buffer) and writes the gripper's 0 closed .. 1 open command as 0..100; features ``<motor>.pos``, cameras
  ``observation.images.<camera name in the robot config>``, ``robot_type`` ``yam_follower``).
* ``yam-degrees`` / ``yam-range``: the I2RT LeRobot helpers (``i2rt/lerobot/helpers.py``, read through the code
  search index, version not stated there): motors ``shoulder_pan`` .. ``wrist_roll``, ``wrist_rotate``;
  ``normalize_arm_position`` writes degrees with ``use_degrees`` and otherwise [-100, 100] over the joint limits of
  ``get_yam_robot`` (the same buffered limits); ``normalize_gripper_position`` 0 closed .. 100 open.
* ``joints-radians``: recorders that write ``joint_1.pos`` .. ``joint_6.pos`` in radians with ``gripper.pos``
  0 closed .. 1 open (e.g. ``lerobot_robot_piper_follower``'s README: "Joint absolute ... unit: rad").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from para_core.data.lerobot_dataset import IMAGE_KEY, LeRobotDataError
from para_ros.robot.yam import load_yam_config

JOINT_UNITS = ("deg", "rad", "range")
# The I2RT SDK's joint limits plus its 0.15 rad buffer, (lo, hi) rad per joint in chain order: what
# yam_common 0.1.2 (DEFAULT_JOINT_LIMITS) and i2rt's get_yam_robot scale [-100, 100] over.
I2RT_BUFFERED_JOINT_RANGE_RAD = (
    (-2.767, 3.28),
    (-0.15, 3.8),
    (-0.15, 3.28),
    (-1.72, 1.72),
    (-1.72, 1.72),
    (-2.24, 2.24),
)
# How far outside config/yam.yaml's limits a recorded joint may lie: the SDK's 0.15 rad buffer beyond the MJCF
# ranges (the real arm reaches it) plus 0.01 rad for encoder noise and float32 storage.
RANGE_MARGIN_RAD = 0.16
GRIPPER_MARGIN = 0.02  # fraction of gripper_scale a gripper value may lie outside [0, gripper_scale]


@dataclass(frozen=True)
class LeRobotYamLayout:
    """How one recorder writes the YAM into a LeRobot dataset.

    Args:
        name: the profile's name (``--layout``).
        joint_names: the 6 arm joints' names in the state feature, in chain order (joint1 .. joint6).
        joint_unit: ``deg``, ``rad`` or ``range`` ([-100, 100] over ``joint_range_rad``).
        joint_range_rad: 6 (lo, hi) pairs, radians: the range a ``range`` recorder scales over.
        gripper_name: the gripper's name in the state feature (``""``: none, stored as open).
        gripper_scale: the value of a fully open gripper (opening = value / gripper_scale).
        camera_key_pattern: the video feature of a view (``{view}``: the view name); ``--camera-key`` overrides.
        robot_type: the ``robot_type`` the recorder writes into ``meta/info.json``, or "": a dataset of that
            robot_type whose names fit no layout is pointed to this one.
        description: one line for ``--help`` and the docs.
    """

    name: str
    joint_names: tuple[str, ...]
    joint_unit: str
    gripper_name: str
    gripper_scale: float
    joint_range_rad: tuple[tuple[float, float], ...] = I2RT_BUFFERED_JOINT_RANGE_RAD
    camera_key_pattern: str = IMAGE_KEY
    robot_type: str = ""
    description: str = ""

    def __post_init__(self):
        if len(self.joint_names) != 6:
            raise LeRobotDataError(
                f"layout {self.name!r}: joint_names has {len(self.joint_names)} names "
                f"{list(self.joint_names)}; the YAM has 6 arm joints"
            )
        if self.joint_unit not in JOINT_UNITS:
            raise LeRobotDataError(
                f"layout {self.name!r}: joint_unit={self.joint_unit!r}; use one of {list(JOINT_UNITS)}"
            )
        rng = np.asarray(self.joint_range_rad, dtype=float)
        if rng.shape != (6, 2) or not np.all(rng[:, 0] < rng[:, 1]):
            raise LeRobotDataError(
                f"layout {self.name!r}: joint_range_rad={self.joint_range_rad!r}; need 6 (lo, hi) pairs, lo < hi"
            )
        if not (np.isfinite(self.gripper_scale) and self.gripper_scale > 0):
            raise LeRobotDataError(
                f"layout {self.name!r}: gripper_scale={self.gripper_scale!r}; give the open value (100 or 1)"
            )

    @property
    def unit_words(self) -> str:
        if self.joint_unit == "range":
            return "[-100, 100] over each joint's range"
        return {"deg": "degrees", "rad": "radians"}[self.joint_unit]

    def joints_to_radians(self, values: np.ndarray) -> np.ndarray:
        """(N, 6) joint values in this layout's unit -> (N, 6) joint angles, radians."""
        v = np.asarray(values, dtype=np.float64)  # (N, 6)
        if self.joint_unit == "deg":
            return np.deg2rad(v)
        if self.joint_unit == "rad":
            return v.copy()
        rng = np.asarray(self.joint_range_rad, dtype=np.float64)  # (6, 2)
        return rng[:, 0] + (v + 100.0) / 200.0 * (rng[:, 1] - rng[:, 0])

    def radians_to_joints(self, q_rad: np.ndarray) -> np.ndarray:
        """(N, 6) radians -> (N, 6) values as this layout's recorder writes them (``range``: clipped to the range)."""
        q = np.asarray(q_rad, dtype=np.float64)  # (N, 6)
        if self.joint_unit == "deg":
            return np.rad2deg(q)
        if self.joint_unit == "rad":
            return q.copy()
        rng = np.asarray(self.joint_range_rad, dtype=np.float64)  # (6, 2)
        t = np.clip((q - rng[:, 0]) / (rng[:, 1] - rng[:, 0]), 0.0, 1.0)
        return t * 200.0 - 100.0

    def to_dict(self) -> dict:
        """What an imported episode records about the layout it was read with."""
        return {
            "name": self.name,
            "joint_names": list(self.joint_names),
            "joint_unit": self.joint_unit,
            "joint_range_rad": [list(r) for r in self.joint_range_rad] if self.joint_unit == "range" else None,
            "gripper_name": self.gripper_name,
            "gripper_scale": self.gripper_scale,
        }


PYPI_JOINTS = tuple(
    f"{n}.pos" for n in ("shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "wrist_yaw")
)
I2RT_HELPER_JOINTS = (*PYPI_JOINTS[:5], "wrist_rotate.pos")
LAYOUTS: dict[str, LeRobotYamLayout] = {
    layout.name: layout
    for layout in (
        LeRobotYamLayout(
            name="yam-follower-pypi",
            joint_names=PYPI_JOINTS,
            joint_unit="range",
            gripper_name="gripper.pos",
            gripper_scale=100.0,
            robot_type="yam_follower",
            description="lerobot-robot-yam (PyPI): shoulder_pan..wrist_yaw in [-100, 100] over the I2RT range, "
            "gripper 0..100",
        ),
        LeRobotYamLayout(
            name="yam-degrees",
            joint_names=I2RT_HELPER_JOINTS,
            joint_unit="deg",
            gripper_name="gripper.pos",
            gripper_scale=100.0,
            description="I2RT LeRobot helpers with use_degrees: shoulder_pan..wrist_rotate in degrees, gripper 0..100",
        ),
        LeRobotYamLayout(
            name="yam-range",
            joint_names=I2RT_HELPER_JOINTS,
            joint_unit="range",
            gripper_name="gripper.pos",
            gripper_scale=100.0,
            description="I2RT LeRobot helpers without use_degrees: shoulder_pan..wrist_rotate in [-100, 100] over "
            "the I2RT range, gripper 0..100",
        ),
        LeRobotYamLayout(
            name="joints-radians",
            joint_names=tuple(f"joint_{i}.pos" for i in range(1, 7)),
            joint_unit="rad",
            gripper_name="gripper.pos",
            gripper_scale=1.0,
            description="joint_1..joint_6 in radians, gripper 0..1",
        ),
    )
}
DEFAULT_LAYOUT = "yam-degrees"  # the import's defaults before layouts were named: existing commands keep working


def layout_named(name: str) -> LeRobotYamLayout:
    """The profile called ``name``; an unknown name lists the known ones."""
    if name not in LAYOUTS:
        raise LeRobotDataError(f"--layout {name!r} is not a known layout; use one of {sorted(LAYOUTS)}")
    return LAYOUTS[name]


def layout_with_overrides(
    name: str, joint_names=None, joint_unit=None, gripper_name=None, gripper_scale=None
) -> LeRobotYamLayout:
    """Profile ``name`` with the command line's ``--joint-names`` / ``--joint-unit`` / ``--gripper-name`` /
    ``--gripper-scale`` (None: the profile's) replacing its fields; the result is named ``NAME+custom`` when any
    field changed."""
    base = layout_named(name)
    changes = {
        k: v
        for k, v in (
            ("joint_names", tuple(joint_names) if joint_names is not None else None),
            ("joint_unit", joint_unit),
            ("gripper_name", gripper_name),
            ("gripper_scale", gripper_scale),
        )
        if v is not None and v != getattr(base, k)
    }
    return replace(base, name=f"{name}+custom", **changes) if changes else base


# ------------------------------------------------------------------------------------------- checking a dataset
@dataclass
class ArmRange:
    """The joint range a recorded YAM joint may lie in: ``config/yam.yaml``'s limits widened by ``margin_rad``."""

    lower_rad: np.ndarray  # (6,)
    upper_rad: np.ndarray  # (6,)
    margin_rad: float = RANGE_MARGIN_RAD

    @classmethod
    def from_yam_config(cls, yam_config_path=None, margin_rad: float = RANGE_MARGIN_RAD) -> ArmRange:
        limits = load_yam_config(yam_config_path).limits
        return cls(np.asarray(limits.joint_lower_rad), np.asarray(limits.joint_upper_rad), margin_rad)

    def outside(self, q_rad: np.ndarray) -> np.ndarray:
        """(N, 6) radians -> (6,) bool: joints with a value outside the range (NaN counts as outside)."""
        q = np.asarray(q_rad, dtype=np.float64)  # (N, 6)
        ok = (q >= self.lower_rad - self.margin_rad) & (q <= self.upper_rad + self.margin_rad)
        return ~np.all(ok, axis=0)


@dataclass
class StateColumns:
    """The state feature's names and every frame's values, read from the dataset's parquet files."""

    names: list[str]
    values: np.ndarray  # (N, D) float64
    robot_type: str = ""
    video_keys: list[str] = field(default_factory=list)
    features: dict = field(default_factory=dict)

    def columns(self, names) -> np.ndarray:
        return self.values[:, [self.names.index(n) for n in names]]


def _feature_names(feature: dict) -> list[str]:
    names = feature.get("names")
    if isinstance(names, dict):  # LeRobot also writes {"motors": [...]}
        names = next(iter(names.values()), [])
    return [str(n) for n in (names or [])]


def read_state_columns(root, state_key: str) -> StateColumns:
    """The names and values of ``state_key`` in the LeRobot v3 dataset at ``root`` (``meta/info.json`` and
    ``data/**/*.parquet``, read with pyarrow; nothing decoded)."""
    import pyarrow.parquet as pq  # pyarrow (optional: requirements-data.txt): loaded on first use, not on import

    root = Path(root)
    info_path = root / "meta" / "info.json"
    if not info_path.is_file():
        raise LeRobotDataError(f"{root} is not a LeRobot dataset: no meta/info.json")
    info = json.loads(info_path.read_text())
    features = info.get("features", {})
    video_keys = sorted(k for k, f in features.items() if f.get("dtype") == "video")
    state = features.get(state_key)
    if state is None:
        numeric = sorted(k for k, f in features.items() if f.get("dtype") in ("float32", "float64"))
        raise LeRobotDataError(
            f"{root}: no joint-position feature {state_key!r}; its numeric features are {numeric}: pass --state-key"
        )
    files = sorted((root / "data").rglob("*.parquet"))
    if not files:
        raise LeRobotDataError(f"{root}: no data/**/*.parquet files; the dataset holds no frames")
    rows = [
        np.asarray(pq.read_table(f, columns=[state_key]).column(state_key).to_pylist(), dtype=np.float64) for f in files
    ]
    values = np.concatenate([r.reshape(len(r), -1) for r in rows])  # (N, D)
    return StateColumns(_feature_names(state), values, str(info.get("robot_type") or ""), video_keys, features)


def _fits(layout: LeRobotYamLayout, columns: StateColumns, arm: ArmRange) -> bool:
    """True when ``columns`` has the layout's names and every value lies in the arm's range in its unit."""
    wanted = [*layout.joint_names, *([layout.gripper_name] if layout.gripper_name else [])]
    if any(n not in columns.names for n in wanted):
        return False
    raw = columns.columns(layout.joint_names)  # (N, 6)
    if layout.joint_unit == "range" and np.any(np.abs(raw) > 100.0 + 1e-3):
        return False
    if arm.outside(layout.joints_to_radians(raw)).any():
        return False
    if layout.gripper_name:
        g = columns.columns([layout.gripper_name])[:, 0] / layout.gripper_scale  # (N,)
        if np.any(g < -GRIPPER_MARGIN) or np.any(g > 1.0 + GRIPPER_MARGIN):
            return False
    return True


def _unit_variants(layout: LeRobotYamLayout) -> list[LeRobotYamLayout]:
    """The layout with each joint unit (its own first): which unit the values would fit under these names."""
    out = [layout]
    for unit in JOINT_UNITS:
        if unit != layout.joint_unit:
            out.append(replace(layout, name=f"{layout.name} with --joint-unit {unit}", joint_unit=unit))
    return out


def check_camera_keys(features: dict, camera_keys: dict[str, str], where: str = "the dataset") -> None:
    """Refuse (``LeRobotDataError``) a camera key that is not a video feature of ``features`` (``meta/info.json``'s),
    naming the video features the dataset has."""
    video_keys = sorted(k for k, f in features.items() if f.get("dtype") == "video")
    for view, key in camera_keys.items():
        feature = features.get(key)
        if feature is None or feature.get("dtype") != "video":
            what = (
                "is not a feature" if feature is None else f"is a {feature.get('dtype')} feature {feature.get('shape')}"
            )
            raise LeRobotDataError(
                f"{where}: the {view} camera key {key!r} {what}; a camera key must name a video feature. The dataset's "
                f"video features are {video_keys}: pass --camera-key {view}=ONE_OF_THEM. Nothing was written"
            )


def check_layout(
    columns: StateColumns,
    layout: LeRobotYamLayout,
    camera_keys: dict[str, str],
    arm: ArmRange,
    where: str = "the dataset",
    state_key: str = "observation.state",
) -> list[str]:
    """Refuse (``LeRobotDataError``) a dataset that ``layout`` does not describe; -> warnings (other layouts that fit
    as well, which the values cannot tell apart).

    :param camera_keys: view -> the video feature the import will read.
    """
    check_camera_keys(columns.features, camera_keys, where)
    wanted = [*layout.joint_names, *([layout.gripper_name] if layout.gripper_name else [])]
    absent = [n for n in wanted if n not in columns.names]
    if absent:
        by_names = [n for n, lay in LAYOUTS.items() if all(x in columns.names for x in lay.joint_names)]
        by_robot = [n for n, lay in LAYOUTS.items() if lay.robot_type and lay.robot_type == columns.robot_type]
        if by_names:
            hint = f"its names fit layout(s) {by_names}: pass --layout {by_names[0]}"
        elif by_robot:
            hint = (
                f"its robot_type is that of layout(s) {by_robot} but its names differ: name the 6 arm joints with "
                "--joint-names (chain order) and the gripper with --gripper-name"
            )
        else:
            hint = (
                "no known layout has these names: name the 6 arm joints with --joint-names (chain order) and the "
                "gripper with --gripper-name ('' for none)"
            )
        raise LeRobotDataError(
            f"{where}: layout {layout.name!r} expects {state_key} names {wanted}; the dataset "
            f"(robot_type {columns.robot_type or 'not given'!r}) has {columns.names} "
            f"(missing {absent}). {hint}"
        )
    if not _fits(layout, columns, arm):
        raw = columns.columns(layout.joint_names)  # (N, 6)
        q = layout.joints_to_radians(raw)  # (N, 6)
        bad = np.nonzero(arm.outside(q))[0]
        lines = [
            f"{layout.joint_names[j]} spans [{raw[:, j].min():.4g}, {raw[:, j].max():.4g}] = "
            f"[{q[:, j].min():.3f}, {q[:, j].max():.3f}] rad, the YAM reaches "
            f"[{arm.lower_rad[j] - arm.margin_rad:.3f}, {arm.upper_rad[j] + arm.margin_rad:.3f}] rad"
            for j in bad
        ]
        if layout.joint_unit == "range" and np.any(np.abs(raw) > 100.0 + 1e-3):
            lines.append(f"values beyond +-100 ({np.abs(raw).max():.4g})")
        if layout.gripper_name and not lines:
            g = columns.columns([layout.gripper_name])[:, 0]
            lines.append(
                f"{layout.gripper_name} spans [{g.min():.4g}, {g.max():.4g}], outside 0..{layout.gripper_scale:g} "
                "(--gripper-scale: the value of a fully open gripper)"
            )
        fitting = [n for n, lay in LAYOUTS.items() if n != layout.name and _fits(lay, columns, arm)]
        units = [v.joint_unit for v in _unit_variants(layout)[1:] if _fits(v, columns, arm)]
        if fitting or units:
            hint = "The values fit " + "; ".join(
                [f"layout {n} (pass --layout {n})" for n in fitting]
                + [f"these names in unit {u} (pass --joint-unit {u})" for u in units]
            )
        else:
            hint = (
                "They fit no known layout ("
                + "; ".join(f"{n}: {lay.unit_words}" for n, lay in LAYOUTS.items())
                + "): check the recorder's joint unit and --joint-names"
            )
        raise LeRobotDataError(
            f"{where}: read as layout {layout.name!r} ({layout.unit_words}), the joint values lie outside the YAM's "
            f"range: {'; '.join(lines)}. {hint}. Nothing was written"
        )
    others = [
        n
        for n, lay in LAYOUTS.items()
        if n != layout.name and lay.joint_unit != layout.joint_unit and _fits(lay, columns, arm)
    ]
    if others:
        return [
            f"the joint values also fit layout(s) {others}, which the values alone cannot tell apart from "
            f"{layout.name!r} ({layout.unit_words}): check how the dataset was recorded (e.g. use_degrees)"
        ]
    return []
