"""A part of the workspace for the task's cube (``--cube-region y<0``): train on layouts in one part, evaluate on the
other (the spatial extrapolation test of the PARA v4 design). ROS-free.

A region is one or more half-planes of the table, joined by commas: ``y<0``, ``y>=0``, ``x<0.33,y<0`` (axes ``x`` and
``y`` of ``base``, metres; operators ``<``, ``<=``, ``>``, ``>=``). Layouts stay those of
:func:`para_ros.sim.pick_place.sample_layout`: a run with a region takes, from its first seed upwards, the seeds whose
cube centre lies in the region (:func:`episode_seeds`), so the layouts of a seed never change and two runs with
disjoint seed ranges still share no layout. The pad is wherever that layout puts it.
"""

from __future__ import annotations

import argparse
import math
import operator
import re
from dataclasses import dataclass

from para_ros.sim.pick_place import MAX_SEED, PickPlaceConfig, sample_layout

_OPS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_TERM = re.compile(r"^\s*([xy])\s*(<=|>=|<|>)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")
# A region must keep at least this fraction of the task's cube region (else almost every seed is skipped).
MIN_AREA_FRACTION = 0.05


@dataclass(frozen=True)
class CubeRegion:
    """Half-planes ((axis, operator, value in metres), ...) that the cube centre must satisfy, and their text."""

    terms: tuple
    text: str

    @classmethod
    def parse(cls, text: str, task: PickPlaceConfig | None = None) -> CubeRegion:
        """Parse and validate ``text`` (see the module docstring) against the task's cube region.

        :raises ValueError: a term that is not ``AXIS OP NUMBER``, or a region that keeps less than 5 % of the task's
            cube region (named with the area fraction and the task's region).
        """
        if not isinstance(text, str) or not text.strip():
            raise ValueError("--cube-region is empty: give half-planes like 'y<0' or 'x>=0.3,y<0'")
        terms = []
        for part in text.split(","):
            m = _TERM.match(part)
            if m is None:
                raise ValueError(
                    f"--cube-region {text!r}: {part.strip()!r} is not AXIS OP NUMBER (axis x or y, "
                    "op one of < <= > >=, metres in base), e.g. 'y<0'"
                )
            value = float(m.group(3))
            if not math.isfinite(value):
                raise ValueError(f"--cube-region {text!r}: {value} is not a finite number")
            terms.append((m.group(1), m.group(2), value))
        region = cls(tuple(terms), ",".join(f"{a}{o}{v:g}" for a, o, v in terms))
        frac = region.area_fraction(task)
        if frac < MIN_AREA_FRACTION:
            (x0, x1), (y0, y1) = (task or PickPlaceConfig()).cube_region_m
            raise ValueError(
                f"--cube-region {text!r} keeps {100 * frac:.1f} % of the task's cube region (x {x0:g}.."
                f"{x1:g} m, y {y0:g}..{y1:g} m; needs >= {100 * MIN_AREA_FRACTION:.0f} %): choose a "
                "region that overlaps it"
            )
        return region

    def contains(self, xy_m) -> bool:
        """Whether the table point ``xy_m`` (x, y) lies in the region."""
        p = {"x": float(xy_m[0]), "y": float(xy_m[1])}
        return all(_OPS[op](p[axis], value) for axis, op, value in self.terms)

    def area_fraction(self, task: PickPlaceConfig | None = None) -> float:
        """Fraction of the task's (rectangular) cube region inside this region: the share of seeds it keeps."""
        (x0, x1), (y0, y1) = (task or PickPlaceConfig()).cube_region_m
        box = {"x": [x0, x1], "y": [y0, y1]}
        for axis, op, value in self.terms:
            lo, hi = box[axis]
            if op in ("<", "<="):
                hi = min(hi, value)
            else:
                lo = max(lo, value)
            box[axis] = [lo, hi]
        wx, wy = max(0.0, box["x"][1] - box["x"][0]), max(0.0, box["y"][1] - box["y"][0])
        return (wx * wy) / ((x1 - x0) * (y1 - y0))


def episode_seeds(
    first_seed: int, episodes: int, region: CubeRegion | None = None, task: PickPlaceConfig | None = None
) -> list[int]:
    """The layout seeds of ``episodes`` episodes from ``first_seed``: consecutive without a region, else the first
    ``episodes`` seeds >= ``first_seed`` whose cube lies in ``region``.

    :raises ValueError: when the seeds would pass ``MAX_SEED``.
    """
    if region is None:
        if first_seed + episodes - 1 > MAX_SEED:
            raise ValueError(f"seeds {first_seed}..{first_seed + episodes - 1} exceed {MAX_SEED}")
        return list(range(first_seed, first_seed + episodes))
    seeds: list[int] = []
    seed = first_seed
    while len(seeds) < episodes:
        if seed > MAX_SEED:
            raise ValueError(
                f"only {len(seeds)} seeds from {first_seed} up to {MAX_SEED} put the cube in "
                f"{region.text}; start from a lower --seed"
            )
        if region.contains(sample_layout(seed, task).cube_xy_m):
            seeds.append(seed)
        seed += 1
    return seeds


def parse_region_arg(text: str | None) -> CubeRegion | None:
    """``--cube-region`` as an argparse type: None for an empty value, else a validated region."""
    if text is None or text == "":
        return None
    try:
        return CubeRegion.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_region_argument(p) -> None:
    """``--cube-region`` (``para-sim demos`` / ``record`` / ``eval`` / ``sweep``)."""
    p.add_argument(
        "--cube-region",
        type=parse_region_arg,
        default=None,
        metavar="REGION",
        help="only layouts whose cube centre lies in REGION: half-planes of base like 'y<0', 'y>=0' or "
        "'x>=0.3,y<0' (metres); the run takes the seeds from --seed upwards that satisfy it",
    )
