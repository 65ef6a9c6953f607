"""The contract every model kind implements: forward, decoding, visualisation (``ParaModel``) and, for a kind whose
outputs are a voxel distribution over camera rays, what the figures read (``VoxelVolumeModel``).

``Policy``, the trainer, the figures and the bag tools call these members only; none of them asks which class a
model is. A new model kind is a module with a class that implements ``ParaModel`` (and ``VoxelVolumeModel`` when
``has_voxel_volume``) plus one line in ``para_core.model.registry.MODEL_REGISTRY``; ``build_model`` checks the
members with ``check_model_interface`` and names what is missing. See docs/contracts.md ("A new model kind").

Shapes: B batch, N views, S img_size, T n_window (steps), Z n_height_bins, P pred_size, F per-pixel feature width,
G n_gripper_bins, R n_rotation_bins, V = N * Z * P * P voxels, flattened view-major:
``v = view * Z * P^2 + bin * P^2 + row * P + col`` (``para_core.model.voxels``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch

from para_core.model.actions import DecodedChunk
from para_core.model.backbone_base import Backbone
from para_core.model.config import V4Config
from para_core.model.model_io import V4Inputs, V4Output, V4Targets


@dataclass
class ScoreExplanation:
    """What scored one voxel, for the method figure's panel (e) and headline (numpy, batch element 0)."""

    vectors: np.ndarray  # (k, F') the vectors whose product gave the voxel's logit, drawn as k bar rows
    labels: tuple[str, ...]  # (k,) one label per row
    formula: str  # one line: how the head turns those vectors into volume_logits
    logit_scale: float  # the multiplier of the dot product (1.0 for a head without one)


@runtime_checkable
class ParaModel(Protocol):
    """Forward, decoding and visualisation: what ``Policy``, the trainer and the bag tools call on any model kind.

    An ``nn.Module`` built from a ``V4Config`` alone (``factory(config)``, random weights; checkpoints load into it
    strictly by ``state_dict`` keys).

    Attributes:
        kind: the key under which ``para_core.model.registry.MODEL_REGISTRY`` builds it (``config.model_kind``).
        config: the ``V4Config`` it was built from.
        backbone: its image backbone (``para_core.model.backbone_base.Backbone``): ``Policy`` sets its attention
            and compiles it, the figures show its patch tokens.
        has_voxel_volume: True when ``forward`` returns a ``V4Output`` whose ``volume_logits`` (B, T, V) are a
            distribution over the voxels of the camera rays; then the model is also a ``VoxelVolumeModel``, and
            ``Policy`` offers the ``joint`` / ``fused`` decodings and the confidence measures, the trainer the
            at-argmax head metrics, and the method figure draws it. False: decoding is ``decode`` only.
        has_fast_path: True when setting ``fast_inference`` selects a faster inference path with the same
            predictions (``Policy(fast=True)``); ``fast_inference`` is then False until ``Policy`` sets it.
        fast_inference: the fast path is on (always False when ``has_fast_path`` is False).
        position_loss_term: the key of the position term in ``forward``'s ``losses`` (the trainer's progress lines
            and validation summary show it beside ``loss``, ``gripper_ce`` and ``rotation_ce``).
    """

    kind: str
    config: V4Config
    backbone: Backbone
    has_voxel_volume: bool
    has_fast_path: bool
    fast_inference: bool
    position_loss_term: str

    def forward(self, inputs: V4Inputs, targets: V4Targets | None = None) -> Any:
        """``inputs`` (``V4Inputs``: images (B, N, 3, S, S), K_img (B, N, 3, 3), T_world_cam (B, N, 4, 4),
        T_world_ee (B, 4, 4), gripper (B,), past_positions_world (B, mv_past_n, 3)) -> the kind's output record.

        Every output has ``gripper_logits`` (B, T, G), ``rotation_logits`` (B, T, 3, R) and ``losses``, filled only
        when ``targets`` is given: a dict of scalars with ``"loss"`` (the training objective), ``"gripper_ce"``,
        ``"rotation_ce"`` and the ``position_loss_term``. A voxel-volume kind returns a ``V4Output``."""
        ...

    def decode(self, out: Any, refine: bool = False) -> list[DecodedChunk]:
        """``forward``'s output -> one ``DecodedChunk`` per batch element: positions (T, 3) m in world,
        rotations (T, 3, 3), quaternions (T, 4) xyzw, gripper (T,) 0..1, confidence (T,) 0..1, time offsets (T,) s,
        voxel_index (T,) (-1: no voxel). ``refine``: sub-voxel refinement where the kind has one. Raises
        ValueError when the observation cannot be decoded (e.g. no valid voxel)."""
        ...

    def visualisation(self, out: Any, top_k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Batch element 0 -> (points to show (K, 3) m in world, K <= top_k, their probability (K,), min / max
        corner of the region the model can predict in (2, 3)); numpy float64. The inference node's markers."""
        ...

    def param_groups(self) -> list[dict]:
        """Optimizer parameter groups (``torch.optim`` dicts with ``params`` and ``lr``) for the trainer."""
        ...


@runtime_checkable
class VoxelVolumeModel(ParaModel, Protocol):
    """A ``ParaModel`` with ``has_voxel_volume``: ``forward`` returns a ``V4Output`` whose ``volume_logits``
    (B, T, V) (-inf at invalid voxels) score the view-major voxels of ``grid`` (the module docstring's layout), and
    these members let the figures explain a prediction."""

    def feature_maps(self, inputs: V4Inputs) -> torch.Tensor:
        """(B, N, F, P, P): the per-pixel features of every view the volume is scored from (PCA panels)."""
        ...

    def explain_score(self, inputs: V4Inputs, out: V4Output, step: int, voxel: int) -> ScoreExplanation:
        """What gave voxel ``voxel`` (flat index into V) its logit at step ``step`` of batch element 0."""
        ...


def missing_members(model: object) -> list[str]:
    """The members of the interface ``model`` lacks: ``ParaModel``'s, and ``VoxelVolumeModel``'s when it says
    ``has_voxel_volume``; [] when it implements the contract."""
    protocol = VoxelVolumeModel if getattr(model, "has_voxel_volume", False) else ParaModel
    return sorted(n for n in _members(protocol) if not hasattr(model, n))


def _members(protocol: type) -> set[str]:
    """The public attributes and methods a protocol class and its protocol bases declare."""
    names: set[str] = set()
    for cls in protocol.__mro__:
        if cls in (object, Protocol) or not getattr(cls, "_is_protocol", False):
            continue
        names |= set(cls.__dict__.get("__annotations__", {}))
        names |= {n for n, v in cls.__dict__.items() if callable(v) and not n.startswith("_")}
    return names


def check_model_interface(model: object) -> None:
    """Raise TypeError naming the missing members when ``model`` does not implement the model contract."""
    missing = missing_members(model)
    if missing:
        raise TypeError(
            f"{type(model).__name__} does not implement para_core.model.interface.ParaModel"
            f"{' / VoxelVolumeModel' if getattr(model, 'has_voxel_volume', False) else ''}: missing "
            f"{', '.join(missing)} (see docs/contracts.md, 'A new model kind')"
        )
