"""Closed-loop evaluation of a checkpoint on the pick-and-place task through the real nodes (``para-sim eval``)."""
from __future__ import annotations

import math


def wilson_interval(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """95 % Wilson score interval of a success rate (``z`` = the normal quantile)."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def add_eval_arguments(p) -> None:
    p.add_argument("--checkpoint", required=True)


def cmd_eval(args) -> int:
    raise SystemExit("para-sim eval: not implemented yet")
