"""The interface every image backbone implements (``para_core.model.backbones`` registers them).

A per-view backbone (``multi_view = False``: DINOv3, InternViT) takes ImageNet-normalised images (B, 3, H, W) and
returns the grid of patch tokens (B, C, H/p, W/p) and one global token (B, C). A multi-view backbone
(``multi_view = True``: Depth-Anything-3) needs every view of an observation together with the camera poses, because
its layers attend across views and read a camera token per view: it implements ``forward_views`` instead and returns
the same record for the B*N images, view-major within each batch element.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from para_core.model import cpu_attention
from para_core.model.backbone_configs import INTERNVL_VISION_CONFIG_KEYS


@dataclass
class BackboneOutput:
    patch_grid: torch.Tensor  # (B, C, H/p, W/p)
    cls: torch.Tensor  # (B, C)


class Backbone(nn.Module):
    """Interface: ``hidden_size`` (C), ``patch_size`` (p), ``forward(pixel_values) -> BackboneOutput``, and
    ``arch_config()`` (a dict that rebuilds the same architecture with random weights)."""

    hidden_size: int
    patch_size: int
    multi_view: bool = False  # True: call forward_views with every view and its pose (module docstring)

    def forward(self, pixel_values: torch.Tensor) -> BackboneOutput:  # pragma: no cover - interface
        raise NotImplementedError

    def forward_views(
        self, images: torch.Tensor, K_img: torch.Tensor, T_world_cam: torch.Tensor
    ) -> BackboneOutput:  # pragma: no cover - interface
        """Multi-view backbones: images (B, N, 3, S, S), intrinsics (B, N, 3, 3) in pixels of those images, poses
        (B, N, 4, 4) camera (OpenCV optical) -> world -> patch grid (B*N, C, S/p, S/p), global token (B*N, C)."""
        raise NotImplementedError

    def arch_config(self) -> dict:  # pragma: no cover - interface
        raise NotImplementedError

    def set_attention(self, implementation: str) -> None:
        """The attention function the transformer's layers call: a transformers ``AttentionInterface`` name ("sdpa",
        "eager", or ``para_core.model.cpu_attention.NAME``, registered here). The backbones of this module wrap a
        transformers model in ``self.vit``."""

        if implementation == cpu_attention.NAME:
            cpu_attention.register()
        self.vit.set_attn_implementation(implementation)

    @property
    def attention(self) -> str:
        """The attention implementation in use (see :meth:`set_attention`)."""
        return str(self.vit.config._attn_implementation)


def check_pretrained_dir(path: Path, what: str) -> None:
    """The same refusals as the DINOv3 backbone: a config.json and safetensors weights are required."""
    if not (path / "config.json").is_file():
        raise ValueError(
            f"V4Config.backbone_pretrained_dir = {str(path)!r} has no config.json: point it at "
            f"a local transformers {what} checkpoint directory, or set it to '' for random weights"
        )
    if not any(path.glob("*.safetensors")):
        raise ValueError(
            f"V4Config.backbone_pretrained_dir = {str(path)!r} has no *.safetensors weights; "
            f"only safetensors are loaded (a .bin/.pt file would be unpickled). Convert it "
            f"with transformers' save_pretrained(..., safe_serialization=True)"
        )


# InternVLVisionConfig fields recorded in checkpoints: every keyword the config takes except the init scale (the
# architecture and its dropouts).
_INTERNVL_ARCH_KEYS = tuple(sorted(INTERNVL_VISION_CONFIG_KEYS - {"initializer_range"}))


def internvl_tower_arch(hf) -> dict:
    """The ``backbone_config`` of an InternViT from its transformers ``InternVLVisionConfig`` (sizes as ints)."""
    out = {k: getattr(hf, k) for k in _INTERNVL_ARCH_KEYS if hasattr(hf, k)}
    for k in ("image_size", "patch_size"):
        if k in out:
            out[k] = int_side(out[k])
    return out


def int_side(value) -> int:
    """transformers stores InternViT sizes as (h, w); our configs use one int for square sizes."""
    if isinstance(value, (list, tuple)):
        if len(value) != 2 or value[0] != value[1]:
            raise ValueError(f"InternViT size {value!r} is not square; para_core uses square images and patches")
        return int(value[0])
    return int(value)


def read_safetensors_dir(path: Path, rename: Callable[[str], str | None]) -> dict[str, torch.Tensor]:
    """Every tensor of the ``*.safetensors`` shards in ``path``, in fp32, keyed ``rename(key)`` (None: left out)."""
    from safetensors import safe_open  # safetensors: loaded on first use, not on import

    state: dict[str, torch.Tensor] = {}
    for shard in sorted(path.glob("*.safetensors")):
        with safe_open(str(shard), framework="pt") as f:
            for key in f.keys():
                name = rename(key)
                if name is not None:
                    state[name] = f.get_tensor(key).to(torch.float32)
    return state


def load_every_weight(module: nn.Module, state: dict[str, torch.Tensor], path: Path, mismatch: str, fix: str) -> None:
    """``module.load_state_dict(state)``, refusing a partial load (it would leave random weights behind silently):
    a ValueError naming the directory, ``mismatch`` (what does not match what), the keys and ``fix``."""
    result = module.load_state_dict(state, strict=False)
    if result.missing_keys or result.unexpected_keys:
        raise ValueError(
            f"V4Config.backbone_pretrained_dir = {str(path)!r}: {mismatch} (missing {sorted(result.missing_keys)[:5]}, "
            f"unexpected {sorted(result.unexpected_keys)[:5]}); {fix}"
        )
