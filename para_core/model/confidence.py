"""How sure the policy is of each step of a chunk, read from its voxel distribution (docs/confidence.md).

PARA predicts, for every step of a chunk, one probability distribution over the voxels of all views together
(``V4Output.volume_logits``, (B, T, V)). Four measures per step, each in [0, 1]:

- **peak mass** (``ActionChunk.confidence``): the probability within ``confidence_radius_m`` of the decoded point
  (``actions.ball_confidence``). 1: every bit of probability is there; near 0: the policy does not know where to go.
- **entropy**: the step distribution's entropy divided by the log of the number of valid voxels: 0 for all the
  probability on one voxel, 1 for a uniform distribution over every valid voxel. Unlike the peak mass it sees how the
  rest of the probability is spread (two sharp alternatives vs. a fog).
- **chunk agreement**: the probability the new distribution gives to where the chunk in force (the previous chunk
  this policy produced) puts the tool at the same time: the mass within ``confidence_radius_m`` of that chunk's
  position, linearly interpolated between its steps. The fused decoding multiplies exactly these two opinions; a low
  value says the policy changed its mind. 1 where no earlier chunk covers the step (nothing to disagree with).
- **view agreement**: for each camera view that has a valid voxel within ``confidence_radius_m`` of the decoded point
  (the view sees it), the share of that view's own probability that lies there; the smallest share over those views.
  1: every view that sees the point puts its probability on it; near 0: one view's probability lies elsewhere. 1 where
  fewer than two views see the point.

"Low is bad" for all but the entropy, where high is bad (:data:`HIGH_IS_BAD`). :func:`worst_step` reduces a chunk to
the worst value over its leading steps (the ones the arm executes before the next chunk), and names the step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from para_core.model.actions import ball_log_mass_per_view, step_log_normaliser
from para_core.model.confidence_measures import HIGH_IS_BAD, MEASURE_TITLES, MEASURES, WorstStep, worst_step
from para_core.model.config import V4Config
from para_core.model.model_io import V4Output

__all__ = [
    "HIGH_IS_BAD",
    "MEASURES",
    "MEASURE_TITLES",
    "ChunkInForce",
    "StepConfidence",
    "WorstStep",
    "chunk_agreement",
    "normalised_entropy",
    "step_confidence",
    "view_agreement",
    "worst_step",
]

ENTROPY_BLOCK = 1 << 22  # logits per block of steps in normalised_entropy


@dataclass
class StepConfidence:
    """The four measures of one chunk, (T,) each, float64 in [0, 1] (module docstring)."""

    peak_mass: np.ndarray
    entropy: np.ndarray
    chunk_agreement: np.ndarray
    view_agreement: np.ndarray


def normalised_entropy(out: V4Output, b: int = 0) -> np.ndarray:
    """(T,) entropy of each step's distribution of batch element ``b`` over its valid voxels (finite logits), divided by
    ``log(number of valid voxels)``: 0 for a delta, 1 for a uniform distribution; 0 when one voxel is valid. Steps go
    in blocks of at most ``ENTROPY_BLOCK`` logits (one (block, V) temporary)."""
    logits = out.volume_logits[b].float()  # (T, V), -inf at invalid voxels
    lse = step_log_normaliser(out)[b].float()  # (T,)
    T, V = logits.shape
    per_block = max(1, ENTROPY_BLOCK // max(V, 1))
    entropy, n_valid = [], []
    for t0 in range(0, T, per_block):
        block = logits[t0 : t0 + per_block]  # (t, V)
        valid = torch.isfinite(block)  # (t, V)
        log_p = torch.where(valid, block - lse[t0 : t0 + per_block, None], torch.zeros_like(block))  # (t, V)
        entropy.append(-(log_p.exp() * log_p).masked_fill_(~valid, 0.0).sum(-1))  # (t,)
        n_valid.append(valid.sum(-1))  # (t,)
    h = torch.cat(entropy).double().cpu().numpy()  # (T,) nats
    n = torch.cat(n_valid).cpu().numpy()  # (T,)
    with np.errstate(divide="ignore", invalid="ignore"):
        normalised = np.where(n >= 2, h / np.log(np.maximum(n, 2)), 0.0)
    return np.clip(normalised, 0.0, 1.0)


def view_log_totals(out: V4Output, b: int = 0) -> torch.Tensor:
    """(T, N) log of the probability each view's voxels hold together (batch element ``b``); -inf for a view with no
    valid voxel. The voxel index runs view by view (``para_core.model.voxels``), so a view is one slice."""
    logits = out.volume_logits[b].float()  # (T, V)
    T, V = logits.shape
    N = out.grid.n_views
    return torch.logsumexp(logits.reshape(T, N, V // N), dim=-1) - step_log_normaliser(out)[b].unsqueeze(-1)


def view_agreement(config: V4Config, out: V4Output, positions_world: np.ndarray, b: int = 0) -> np.ndarray:
    """(T,) view agreement at the decoded ``positions_world`` (T, 3) metres (module docstring)."""
    pos = torch.as_tensor(np.asarray(positions_world), dtype=torch.float64, device=out.volume_logits.device)
    in_ball = ball_log_mass_per_view(config, out, pos.unsqueeze(0).expand(out.volume_logits.shape[0], -1, -1))[b]
    totals = view_log_totals(out, b)  # (T, N)
    share = (in_ball - totals).exp().double().cpu().numpy()  # (T, N); NaN where the view holds nothing
    sees = np.isfinite(in_ball.double().cpu().numpy()) & np.isfinite(totals.double().cpu().numpy())  # (T, N)
    agreement = np.ones(len(share))
    for t in range(len(share)):
        if sees[t].sum() >= 2:
            agreement[t] = float(np.clip(share[t][sees[t]].min(), 0.0, 1.0))
    return agreement


@dataclass
class ChunkInForce:
    """The last chunk a policy produced (its observation stamp, step period and (T, 3) positions): what the chunk
    agreement of the next one is measured against. Forgotten when a newer chunk's stamp is earlier (the clock went
    back) or when it has ended."""

    stamp_s: float | None = None
    step_dt_s: float = 0.0
    positions_world: np.ndarray | None = None  # (T, 3) metres

    def clear(self) -> None:
        self.stamp_s, self.positions_world = None, None

    def positions_at(self, times_s: np.ndarray) -> np.ndarray:
        """(T, 3) this chunk's position at each time (linear between its steps); NaN outside its span or when empty."""
        times_s = np.asarray(times_s, dtype=np.float64)
        result = np.full((len(times_s), 3), np.nan)
        if self.stamp_s is None or self.positions_world is None or len(self.positions_world) == 0:
            return result
        offsets = self.stamp_s + np.arange(len(self.positions_world)) * self.step_dt_s  # (T_old,)
        inside = (times_s >= offsets[0]) & (times_s <= offsets[-1])
        for axis in range(3):
            result[inside, axis] = np.interp(times_s[inside], offsets, self.positions_world[:, axis])
        return result

    def remember(self, stamp_s: float, step_dt_s: float, positions_world: np.ndarray) -> None:
        self.stamp_s, self.step_dt_s = float(stamp_s), float(step_dt_s)
        self.positions_world = np.asarray(positions_world, dtype=np.float64).copy()


def chunk_agreement(
    config: V4Config, out: V4Output, in_force: ChunkInForce, stamp_s: float | None, b: int = 0
) -> np.ndarray:
    """(T,) chunk agreement of batch element ``b`` with ``in_force`` (module docstring); all 1 without a stamp or an
    earlier chunk. Forgets ``in_force`` when ``stamp_s`` is earlier than its stamp (the clock went back)."""
    T = out.volume_logits.shape[1]
    if stamp_s is None:
        return np.ones(T)
    if in_force.stamp_s is not None and stamp_s < in_force.stamp_s:
        in_force.clear()
    old = in_force.positions_at(float(stamp_s) + np.arange(T) * config.step_dt_s)  # (T, 3), NaN where not covered
    covered = np.all(np.isfinite(old), axis=1)  # (T,)
    agreement = np.ones(T)
    if covered.any():
        filled = np.where(covered[:, None], old, 0.0)  # (T, 3): any finite point where not covered
        pos = torch.as_tensor(filled, dtype=torch.float64, device=out.volume_logits.device)
        pos = pos.unsqueeze(0).expand(out.volume_logits.shape[0], -1, -1)  # (B, T, 3)
        mass = torch.logsumexp(ball_log_mass_per_view(config, out, pos)[b], dim=-1).exp()  # (T,)
        agreement[covered] = np.clip(mass.double().cpu().numpy()[covered], 0.0, 1.0)
    return agreement


def step_confidence(
    config: V4Config,
    out: V4Output,
    positions_world: np.ndarray,
    peak_mass: np.ndarray,
    in_force: ChunkInForce | None = None,
    stamp_s: float | None = None,
    b: int = 0,
) -> StepConfidence:
    """The four measures of batch element ``b``, decoded at ``positions_world`` (T, 3) with ``peak_mass`` (T,) (the
    decoder's confidence). With ``in_force`` and ``stamp_s`` (the observation time, s) the chunk agreement is measured
    against ``in_force``, which then remembers this chunk."""
    agreement = chunk_agreement(config, out, in_force, stamp_s, b) if in_force is not None else None
    measures = StepConfidence(
        peak_mass=np.clip(np.asarray(peak_mass, dtype=np.float64), 0.0, 1.0),
        entropy=normalised_entropy(out, b),
        chunk_agreement=agreement if agreement is not None else np.ones(out.volume_logits.shape[1]),
        view_agreement=view_agreement(config, out, positions_world, b),
    )
    if in_force is not None and stamp_s is not None:
        in_force.remember(stamp_s, config.step_dt_s, positions_world)
    return measures
