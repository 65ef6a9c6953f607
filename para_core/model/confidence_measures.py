"""The policy's confidence measures by name, and the worst step of a chunk: what a consumer of the measures (the
executor's supervisor, the reports) needs without the model's tensors (``para_core.model.confidence`` computes them
from the voxel distribution; this module imports neither torch nor the model).

"Low is bad" for all but the entropy, where high is bad (:data:`HIGH_IS_BAD`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MEASURES = ("peak_mass", "entropy", "chunk_agreement", "view_agreement")
HIGH_IS_BAD = frozenset({"entropy"})  # the measures for which a larger value means less sure
MEASURE_TITLES = {  # how the docs and /diagnostics name them
    "peak_mass": "peak mass",
    "entropy": "entropy",
    "chunk_agreement": "chunk agreement",
    "view_agreement": "view agreement",
}


@dataclass
class WorstStep:
    """The least confident step of a chunk for one measure: its value and index."""

    measure: str
    value: float
    step: int


def worst_step(measure: str, values: np.ndarray, steps: int | None = None) -> WorstStep | None:
    """The worst of the first ``steps`` values (all when None) of ``measure``: the smallest, or the largest for
    :data:`HIGH_IS_BAD` measures; None for an empty array (the producer did not measure it)."""
    if measure not in MEASURES:
        raise ValueError(f"measure {measure!r} is unknown: use one of {MEASURES}")
    values = np.asarray(values, dtype=np.float64).reshape(-1)
    if steps is not None:
        values = values[: max(int(steps), 1)]
    if values.size == 0:
        return None
    i = int(np.argmax(values) if measure in HIGH_IS_BAD else np.argmin(values))
    return WorstStep(measure, float(values[i]), i)
