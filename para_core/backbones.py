"""Swappable image backbones behind one small interface.

A backbone takes ImageNet-normalised images (B, 3, H, W) with H, W multiples of its patch size and returns the grid
of patch tokens (B, C, H/p, W/p) -- token (i, j) describes pixels [p*j, p*(j+1)) x [p*i, p*(i+1)), i.e. the grid is
the image resized by 1/p under the pixel-centre convention of ``para_core.geometry`` -- and one global token (B, C)
(DINOv3: the CLS token after the final layer norm). Register tokens are dropped.

Registered kinds (``V4Config.backbone_kind``): ``"dinov3"`` (``transformers.DINOv3ViTModel``). The seed's other
backbones (Depth-Anything-3, InternVL vision tower) would be added here with the same interface.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch
from torch import nn

from .config import V4Config

# DINOv3ViTConfig fields recorded in checkpoints (the architecture, not the training-time extras).
_DINOV3_ARCH_KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "hidden_act",
                     "use_gated_mlp", "num_register_tokens", "patch_size", "layerscale_value", "rope_theta",
                     "query_bias", "key_bias", "value_bias", "proj_bias", "mlp_bias", "layer_norm_eps",
                     "pos_embed_shift", "pos_embed_jitter", "pos_embed_rescale")


@dataclass
class BackboneOutput:
    patch_grid: torch.Tensor  # (B, C, H/p, W/p)
    cls: torch.Tensor  # (B, C)


class Backbone(nn.Module):
    """Interface: ``hidden_size`` (C), ``patch_size`` (p), ``forward(pixel_values) -> BackboneOutput``, and
    ``arch_config()`` (a dict that rebuilds the same architecture with random weights)."""

    hidden_size: int
    patch_size: int

    def forward(self, pixel_values: torch.Tensor) -> BackboneOutput:  # pragma: no cover - interface
        raise NotImplementedError

    def arch_config(self) -> dict:  # pragma: no cover - interface
        raise NotImplementedError


class DINOv3Backbone(Backbone):
    """DINOv3 ViT through ``transformers``: real weights from a local directory (``from_pretrained``) when
    ``config.backbone_pretrained_dir`` is set, otherwise random weights from ``config.backbone_config``."""

    def __init__(self, config: V4Config):
        super().__init__()
        from transformers import DINOv3ViTConfig, DINOv3ViTModel

        if config.backbone_pretrained_dir:
            path = Path(config.backbone_pretrained_dir)
            if not (path / "config.json").is_file():
                raise ValueError(f"V4Config.backbone_pretrained_dir = {str(path)!r} has no config.json: point it at "
                                 f"a local transformers DINOv3 checkpoint directory, or set it to '' for random "
                                 f"weights")
            if not any(path.glob("*.safetensors")):
                raise ValueError(f"V4Config.backbone_pretrained_dir = {str(path)!r} has no *.safetensors weights; "
                                 f"only safetensors are loaded (a .bin/.pt file would be unpickled). Convert it "
                                 f"with transformers' save_pretrained(..., safe_serialization=True)")
            # use_safetensors=True: never fall back to unpickling a pytorch_model.bin the user handed us
            self.vit = DINOv3ViTModel.from_pretrained(str(path), local_files_only=True, use_safetensors=True)
        else:
            self.vit = DINOv3ViTModel(DINOv3ViTConfig(**config.backbone_config))
        hf = self.vit.config
        if hf.patch_size != config.patch_size:
            raise ValueError(f"backbone patch_size {hf.patch_size} != V4Config.patch_size {config.patch_size}: "
                             f"set patch_size to {hf.patch_size}")
        self.hidden_size = int(hf.hidden_size)
        self.patch_size = int(hf.patch_size)
        self.n_prefix = 1 + int(hf.num_register_tokens)  # CLS + registers come before the patch tokens
        # The mask token only serves masked-image pre-training; it never enters our forward, so it is frozen
        # (kept in the state dict for from_pretrained compatibility).
        mask_token = getattr(self.vit.embeddings, "mask_token", None)
        if isinstance(mask_token, nn.Parameter):
            mask_token.requires_grad_(False)

    def arch_config(self) -> dict:
        hf = self.vit.config
        return {k: getattr(hf, k) for k in _DINOV3_ARCH_KEYS if hasattr(hf, k)}

    def forward(self, pixel_values: torch.Tensor) -> BackboneOutput:
        B, _, H, W = pixel_values.shape
        h, w = H // self.patch_size, W // self.patch_size
        tokens = self.vit(pixel_values=pixel_values).last_hidden_state  # (B, 1 + R + h*w, C), layer-normed
        patches = tokens[:, self.n_prefix:]  # (B, h*w, C)
        grid = patches.transpose(1, 2).reshape(B, self.hidden_size, h, w)  # (B, C, h, w)
        return BackboneOutput(patch_grid=grid, cls=tokens[:, 0])


BACKBONE_REGISTRY: dict[str, Callable[[V4Config], Backbone]] = {"dinov3": DINOv3Backbone}


def build_backbone(config: V4Config) -> Backbone:
    try:
        factory = BACKBONE_REGISTRY[config.backbone_kind]
    except KeyError:
        raise ValueError(f"V4Config.backbone_kind = {config.backbone_kind!r} is not registered; use one of "
                         f"{sorted(BACKBONE_REGISTRY)}") from None
    return factory(config)


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
