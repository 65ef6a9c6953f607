"""Chunk decoding in voxel space: which voxel each step of a chunk goes to, from the model's per-step distributions.

PARA predicts, for every step of a chunk, a distribution over the voxels of the observation (``volume_logits``,
(B, T, V)). Three ways to turn it into positions (``DECODING_MODES``):

- ``argmax``: each step's most probable voxel, independently (``para_core.model.actions.decode_outputs``): the
  reference. A two-mode distribution (the cube and the pad) can send consecutive steps to different modes.
- ``joint``: the chunk's voxels chosen together (:func:`best_path`): dynamic programming (Viterbi) over each step's
  ``top_k`` most probable voxels, maximising the sum of the steps' log-probabilities minus ``motion_cost_per_m`` times
  the path length, with every step slower than ``max_speed_m_s`` (the executor's ``max_implied_speed_m_s``: the
  speed two consecutive steps, ``step_dt_s`` apart, imply). The path starts at the current end-effector position,
  taken as a step one period before step 0 under the same limit. A transition faster than the limit is forbidden
  while any path avoids it: paths are ranked first by their total excess distance over the limit (metres, 0 for a
  path within it), then by score; so when every path breaks the limit the one that breaks it least is taken (heavily
  penalised, never refused), best scored among those.
- ``fused``: the new chunk's per-step log-distributions plus those of earlier chunks still in force at the same times
  (:class:`ChunkFusion`: a product of distributions, each earlier one weighted by ``exp(-age / fusion_tau_s)``),
  then decoded jointly as ``joint``: temporal ensembling in the space the model predicts in.

``auto`` (``DECODING_CHOICES``) is not a way of its own: ``Policy`` resolves it to ``fused`` for a model that predicts a
voxel distribution (it won on held-out layouts, docs/evaluation.md) and to ``argmax`` for one that does not (the
coordinate-regression baseline), so one default serves every model kind.

Every mode keeps the sub-voxel refinement (local soft-argmax around the chosen voxel,
``actions.refine_positions``) and the confidence (probability mass near the decoded point, ``actions.ball_confidence``)
of the new chunk's own distribution. The gripper and rotation come from the model's head, which read its features at
each step's argmax voxel (``V4Output.chosen_voxel``); where ``joint`` picks another voxel they are still those.

A step whose distribution holds a NaN, or is -inf everywhere (no valid voxel), is refused with a ``ValueError``, as
the argmax path refuses an observation without a valid voxel: the caller drops the observation.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, replace

import numpy as np
import torch

from para_core.model.actions import DecodedChunk, decode_at_voxels, step_log_normaliser
from para_core.model.config import V4Config
from para_core.model.model_io import V4Output

DECODING_MODES = ("argmax", "joint", "fused")
AUTO_DECODING = "auto"
DECODING_CHOICES = (AUTO_DECODING, *DECODING_MODES)  # what a user may ask for (``auto``: module docstring)
EXCESS_TIE_M = 1e-9  # two paths whose excess distances differ by less are equally fast: their scores decide


@dataclass
class DecodingConfig:
    """How ``Policy`` decodes a chunk (module docstring).

    Args:
        mode: one of ``DECODING_CHOICES``; ``argmax`` is the reference; ``auto`` is resolved by the model kind
            (:meth:`resolved_for`).
        top_k: candidate voxels per step for ``joint`` / ``fused`` (the DP costs T * top_k^2).
        max_speed_m_s: the fastest tool motion two consecutive steps may imply (m/s); match the executor's
            ``max_implied_speed_m_s`` so that a jointly decoded chunk is never truncated for speed.
        motion_cost_per_m: score (nats) taken off per metre of path length: of two paths within the limit, 10 cm more
            motion must buy ``0.1 * motion_cost_per_m`` nats of log-probability. 0: only the limit.
        fusion_tau_s: an earlier chunk's distribution of age a (s) weighs ``exp(-a / fusion_tau_s)`` in ``fused``.
        fusion_radius_m: an earlier chunk's probability at a point is its stored mass within this distance (m).
        fusion_store_k: voxels kept per step of each chunk for fusion (the memory is sparse and bounded).
        fusion_max_chunks: earlier chunks kept for fusion, newest first.
    """

    mode: str = "argmax"
    top_k: int = 8
    max_speed_m_s: float = 1.0
    motion_cost_per_m: float = 5.0
    fusion_tau_s: float = 0.5
    fusion_radius_m: float = 0.02
    fusion_store_k: int = 32
    fusion_max_chunks: int = 8

    def __post_init__(self):
        if self.mode not in DECODING_CHOICES:
            raise ValueError(f"DecodingConfig.mode = {self.mode!r} is invalid: use one of {DECODING_CHOICES}")
        for name in ("top_k", "fusion_store_k", "fusion_max_chunks"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"DecodingConfig.{name} = {value!r} is invalid: pass an integer >= 1")
        for name in ("max_speed_m_s", "fusion_tau_s", "fusion_radius_m"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"DecodingConfig.{name} = {value!r} is invalid: pass a finite number > 0")
        value = self.motion_cost_per_m
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ValueError(f"DecodingConfig.motion_cost_per_m = {value!r} is invalid: pass a finite number >= 0")

    def resolved_for(self, has_voxel_volume: bool) -> DecodingConfig:
        """This config with ``auto`` made concrete for a model that does (``fused``) or does not (``argmax``) predict
        a voxel distribution; any other mode unchanged."""
        if self.mode != AUTO_DECODING:
            return self
        return replace(self, mode="fused" if has_voxel_volume else "argmax")


@dataclass
class PathChoice:
    """The result of :func:`best_path`."""

    index: np.ndarray  # (T,) int: the chosen candidate of each step
    score: float  # sum of log-probabilities - motion_cost_per_m * path length
    excess_m: float  # total distance beyond the speed limit (0: the path keeps to it)


def best_path(
    log_probs: np.ndarray,
    xyz: np.ndarray,
    step_dt_s: float,
    max_speed_m_s: float,
    motion_cost_per_m: float = 0.0,
    start_xyz: np.ndarray | None = None,
) -> PathChoice:
    """The best path through each step's candidates (Viterbi), ranked by (least excess distance, highest score).

    A transition of d metres between consecutive steps has excess ``max(0, d - max_speed_m_s * step_dt_s)`` and
    costs ``motion_cost_per_m * d``; ``start_xyz`` (3,), when given, is one such step before step 0. A candidate with
    a non-finite log-probability (fewer valid voxels than candidates) is never chosen.

    :param log_probs: (T, k) each candidate's log-probability (or fused score); at least one finite per step.
    :param xyz: (T, k, 3) the candidates' positions, metres.
    """
    lp = np.asarray(log_probs, dtype=np.float64)  # (T, k)
    pts = np.asarray(xyz, dtype=np.float64)  # (T, k, 3)
    T, k = lp.shape
    limit_m = max_speed_m_s * step_dt_s
    usable = np.isfinite(lp)  # (T, k)
    if start_xyz is not None:
        d0 = np.linalg.norm(pts[0] - np.asarray(start_xyz, dtype=np.float64), axis=-1)  # (k,)
        excess, score = np.maximum(d0 - limit_m, 0.0), lp[0] - motion_cost_per_m * d0  # (k,), (k,)
    else:
        excess, score = np.zeros(k), lp[0].copy()
    excess = np.where(usable[0], excess, np.inf)
    back = np.zeros((T, k), dtype=np.int64)  # (T, k) best predecessor of each candidate
    cols = np.arange(k)
    for t in range(1, T):
        d = np.linalg.norm(pts[t - 1][:, None] - pts[t][None], axis=-1)  # (k_prev, k)
        cand_e = excess[:, None] + np.maximum(d - limit_m, 0.0)  # (k_prev, k)
        cand_s = score[:, None] + lp[t][None] - motion_cost_per_m * d  # (k_prev, k)
        least = cand_e.min(axis=0)  # (k,)
        fastest_ok = cand_e <= least + EXCESS_TIE_M  # (k_prev, k): the predecessors of least excess
        prev = np.where(fastest_ok, np.nan_to_num(cand_s, nan=-np.inf), -np.inf).argmax(axis=0)  # (k,)
        back[t] = prev
        excess = np.where(usable[t], cand_e[prev, cols], np.inf)
        score = cand_s[prev, cols]
    least = excess.min()
    last = int(np.where(excess <= least + EXCESS_TIE_M, score, -np.inf).argmax())
    index = np.zeros(T, dtype=np.int64)
    index[-1] = last
    for t in range(T - 1, 0, -1):
        index[t - 1] = back[t, index[t]]
    return PathChoice(index=index, score=float(score[last]), excess_m=float(excess[last]))


def check_distributions(out: V4Output) -> None:
    """Refuse (ValueError) a batch whose step distributions hold a NaN or are -inf everywhere."""
    step_max = out.volume_logits.amax(-1)  # (B, T): NaN where a step holds one (amax propagates it), -inf if empty
    bad_nan = torch.isnan(step_max)  # (B, T)
    if bool(bad_nan.any()):
        b, t = (int(i) for i in torch.nonzero(bad_nan)[0])
        raise ValueError(
            f"the voxel distribution of step {t} (batch element {b}) holds NaN: the model output is "
            f"invalid; check the checkpoint and the inputs"
        )
    empty = torch.isneginf(step_max)  # (B, T)
    if bool(empty.any()):
        raise ValueError(
            "no valid voxel for this observation: every voxel of a step is -inf (no camera ray meets the "
            "workspace box in front of its camera); check T_world_cam and the workspace box"
        )


@dataclass
class StoredChunk:
    """One chunk's distributions kept for fusion: step i holds at ``stamp_s + i * step_dt_s``."""

    stamp_s: float
    step_dt_s: float
    xyz: np.ndarray  # (T, K, 3) metres: the K most probable voxels of each step
    prob: np.ndarray  # (T, K) their probabilities (of the whole distribution)

    def step_at(self, time_s: float) -> int | None:
        """The step nearest ``time_s``, or None when ``time_s`` lies outside the chunk (by more than half a step)."""
        i = round((time_s - self.stamp_s) / self.step_dt_s)
        return i if 0 <= i < len(self.prob) else None

    def end_s(self) -> float:
        return self.stamp_s + (len(self.prob) - 0.5) * self.step_dt_s


class ChunkFusion:
    """The recent chunks' sparse distributions, and their fusion into a new chunk's candidate scores.

    Times: a chunk stamped s (its observation time) with step period dt holds step i at ``s + i * dt``; a new chunk's
    step at time t meets an earlier chunk's nearest step, when t lies within that chunk (``StoredChunk.step_at``).
    Storage: each step's ``store_k`` most probable voxels (world positions and probabilities), at most ``max_chunks``
    chunks, chunks past their last step dropped: memory ``max_chunks * T * store_k * 4`` floats.

    Fusion (:meth:`fused_scores`): a candidate at x for the step at time t scores
    ``log p_new + sum_c exp(-age_c / tau_s) * log max(m_c(x), floor_c)`` over the earlier chunks c in force at t,
    age_c = new stamp - c's stamp (s); ``m_c(x)`` is c's stored probability within ``radius_m`` of x at its step
    nearest t; ``floor_c`` is the smallest stored probability of that step, an upper bound of any voxel c did not
    store: a point c found improbable is penalised, never excluded. The product of distributions is the sum of their
    log-probabilities; the age weights make it a geometric mixture that forgets.
    """

    def __init__(self, tau_s: float = 0.5, radius_m: float = 0.02, store_k: int = 32, max_chunks: int = 8):
        self.tau_s, self.radius_m, self.store_k = float(tau_s), float(radius_m), int(store_k)
        self.chunks: deque[StoredChunk] = deque(maxlen=int(max_chunks))

    def clear(self) -> None:
        """Forget every chunk (the clock jumped back: their times mean nothing on the new clock)."""
        self.chunks.clear()

    def in_force(self, stamp_s: float) -> list[StoredChunk]:
        """The stored chunks not past their last step at ``stamp_s`` and not from its future (clock went back)."""
        return [c for c in self.chunks if c.stamp_s <= stamp_s < c.end_s()]

    def fused_scores(self, log_probs: np.ndarray, xyz: np.ndarray, stamp_s: float, step_dt_s: float) -> np.ndarray:
        """(T, k) fused scores of the new chunk's candidates (class docstring).

        :param log_probs: (T, k) the new chunk's log-probabilities of its candidates; ``xyz``: (T, k, 3) metres.
        """
        fused = np.asarray(log_probs, dtype=np.float64).copy()  # (T, k)
        pts = np.asarray(xyz, dtype=np.float64)  # (T, k, 3)
        r2 = self.radius_m**2
        for chunk in self.in_force(stamp_s):
            weight = math.exp(-(stamp_s - chunk.stamp_s) / self.tau_s)
            for t in range(len(fused)):
                j = chunk.step_at(stamp_s + t * step_dt_s)
                if j is None:
                    continue
                d2 = ((pts[t][:, None] - chunk.xyz[j][None]) ** 2).sum(-1)  # (k, K)
                mass = (chunk.prob[j][None] * (d2 <= r2)).sum(-1)  # (k,)
                floor = max(float(chunk.prob[j].min()), 1e-300)
                fused[t] += weight * np.log(np.maximum(mass, floor))
        return fused

    def add(self, stamp_s: float, step_dt_s: float, xyz: np.ndarray, prob: np.ndarray) -> None:
        """Keep a chunk's (T, K, 3) voxels and (T, K) probabilities; drop chunks no longer in force."""
        while self.chunks and self.chunks[0].end_s() <= stamp_s:
            self.chunks.popleft()
        self.chunks.append(
            StoredChunk(
                float(stamp_s), float(step_dt_s), np.asarray(xyz, dtype=np.float64), np.asarray(prob, dtype=np.float64)
            )
        )


def top_candidates(out: V4Output, k: int, b: int = 0) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
    """Each step's k most probable voxels of batch element b: indices (T, k) long, log-probabilities (T, k) and
    positions (T, k, 3) on the host (float64)."""
    logits = out.volume_logits[b]  # (T, V)
    k = min(k, logits.shape[-1])
    top_logit, top_i = torch.topk(logits.float(), k, dim=-1)  # (T, k), (T, k)
    log_p = top_logit - step_log_normaliser(out)[b].unsqueeze(-1)  # (T, k)
    xyz = out.voxel_xyz[b][top_i]  # (T, k, 3)
    return top_i, log_p.double().cpu().numpy(), xyz.double().cpu().numpy()


def decode_chunk(
    config: V4Config,
    out: V4Output,
    decoding: DecodingConfig,
    refine: bool = True,
    start_xyz: np.ndarray | None = None,
    fusion: ChunkFusion | None = None,
    stamp_s: float | None = None,
) -> DecodedChunk:
    """Batch element 0 of ``out`` decoded by ``decoding.mode`` (module docstring); ``start_xyz`` (3,): the current
    end-effector position (metres); ``fusion`` and ``stamp_s`` (the observation time, s) for ``fused``, where the new
    chunk is added to ``fusion`` after decoding. Raises ValueError on NaN / all -inf distributions."""
    if decoding.mode == "argmax":
        raise ValueError("decode_chunk decodes 'joint' and 'fused'; 'argmax' is the model's own decode")
    check_distributions(out)
    fused = decoding.mode == "fused"
    if fused and (fusion is None or stamp_s is None):
        raise ValueError("decoding 'fused' needs the fusion memory and the observation stamp (stamp_s)")
    k = decoding.top_k
    store_i, store_lp, store_xyz = top_candidates(out, max(k, fusion.store_k) if fused else k)  # (T, K) ...
    top_i, log_p, xyz = store_i[:, :k], store_lp[:, :k], store_xyz[:, :k]  # (T, k), (T, k), (T, k, 3): sorted
    scores = fusion.fused_scores(log_p, xyz, stamp_s, config.step_dt_s) if fused else log_p
    path = best_path(scores, xyz, config.step_dt_s, decoding.max_speed_m_s, decoding.motion_cost_per_m, start_xyz)
    chosen = top_i.gather(-1, torch.as_tensor(path.index, device=top_i.device).unsqueeze(-1)).T  # (1, T)
    chunk = decode_at_voxels(config, out, chosen, refine=refine)[0]
    if fused:
        K = fusion.store_k
        fusion.add(stamp_s, config.step_dt_s, store_xyz[:, :K], np.exp(store_lp[:, :K]))
    return chunk
