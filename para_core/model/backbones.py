"""Swappable image backbones behind one small interface.

A backbone takes ImageNet-normalised images (B, 3, H, W) with H, W multiples of its patch size and returns the grid
of patch tokens (B, C, H/p, W/p) -- token (i, j) describes pixels [p*j, p*(j+1)) x [p*i, p*(i+1)), i.e. the grid is
the image resized by 1/p under the pixel-centre convention of ``para_core.model.geometry`` -- and one global token (B, C)
(DINOv3: the CLS token after the final layer norm). Register tokens are dropped.

Registered kinds (``V4Config.backbone_kind``):

- ``"dinov3"``: DINOv3's ViT, ``para_core.model.dinov3_vit`` (weight for weight ``transformers.DINOv3ViTModel``,
  without importing transformers).
- ``"internvl_vision"``: the vision TOWER of InternVL 2.5 (InternViT, ``transformers.InternVLVisionModel``; PARA v4's
  v4_vlm variant). We take the raw tokens of its last layer -- what InternVL itself feeds on (vision_feature_layer
  -1) -- with the CLS token dropped from the grid and BEFORE InternVL's pixel shuffle (which would merge 2 x 2 patches
  and halve the grid) and its MLP projector into the LLM; InternViT has no register tokens. Global token: with
  ``use_mean_pooling`` (InternVL 2.5's setting) the mean of the patch tokens, the pooled output that
  ``InternVLVisionConfig`` defines (InternVL trains only the patch tokens; its CLS output feeds nothing), else the
  CLS token after the model's final layer norm. With ``use_mean_pooling`` the model has no final norm (its last
  hidden state is the raw residual stream), so we apply a parameter-free LayerNorm over C to every patch token and to
  the mean token: the head then sees unit-scale tokens as it does from DINOv3's final norm (any affine part would be
  absorbed by the head's first linear layers anyway).

- ``"da3"``: Depth-Anything-3's multi-view ViT on the official ``depth_anything_3`` code (PARA v4's v4_da3), in
  ``para_core.model.backbone_da3``. It is the one multi-view backbone (``Backbone.multi_view``): every view of an
  observation and its camera pose go in together (``forward_views``), see that module.

The interface itself (``Backbone``, ``BackboneOutput``) is in ``para_core.model.backbone_base``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as Fn
from torch import nn

from para_core.model.backbone_base import (
    Backbone,
    BackboneOutput,
    check_pretrained_dir,
    int_side,
    internvl_tower_arch,
    load_every_weight,
    read_safetensors_dir,
)
from para_core.model.backbone_da3 import DA3Backbone
from para_core.model.backbone_vlm import InternVLLanguageBackbone
from para_core.model.config import V4Config
from para_core.model.dinov3_vit import DINOv3Arch, DINOv3ViT, load_pretrained

# DINOv3ViTConfig fields recorded in checkpoints (the architecture, not the training-time extras).
_DINOV3_ARCH_KEYS = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "hidden_act",
    "use_gated_mlp",
    "num_register_tokens",
    "patch_size",
    "layerscale_value",
    "rope_theta",
    "query_bias",
    "key_bias",
    "value_bias",
    "proj_bias",
    "mlp_bias",
    "layer_norm_eps",
    "pos_embed_shift",
    "pos_embed_jitter",
    "pos_embed_rescale",
)


class DINOv3Backbone(Backbone):
    """DINOv3 ViT (``para_core.model.dinov3_vit``, weight for weight transformers' ``DINOv3ViTModel``): real weights
    from a local transformers directory when ``config.backbone_pretrained_dir`` is set, otherwise random weights from
    ``config.backbone_config``."""

    def __init__(self, config: V4Config):
        super().__init__()
        if config.backbone_pretrained_dir:
            path = Path(config.backbone_pretrained_dir)
            check_pretrained_dir(path, "DINOv3")
            # The RoPE train-time augmentations follow backbone_config (off in the presets), not the hub's config.
            rope_aug = {
                k: config.backbone_config.get(k) for k in ("pos_embed_shift", "pos_embed_jitter", "pos_embed_rescale")
            }
            self.vit = load_pretrained(path, **rope_aug)
        else:
            self.vit = DINOv3ViT(DINOv3Arch.from_dict(config.backbone_config))
        arch = self.vit.config
        if arch.patch_size != config.patch_size:
            raise ValueError(
                f"backbone patch_size {arch.patch_size} != V4Config.patch_size {config.patch_size}: "
                f"set patch_size to {arch.patch_size}"
            )
        self.hidden_size = int(arch.hidden_size)
        self.patch_size = int(arch.patch_size)
        self.n_prefix = 1 + int(arch.num_register_tokens)  # CLS + registers come before the patch tokens
        # The mask token only serves masked-image pre-training; it never enters our forward, so it is frozen
        # (kept in the state dict so transformers' weights load).
        self.vit.embeddings.mask_token.requires_grad_(False)

    def arch_config(self) -> dict:
        arch = self.vit.config
        return {k: getattr(arch, k) for k in _DINOV3_ARCH_KEYS}

    def set_attention(self, implementation: str) -> None:
        """ "sdpa", "eager" or ``para_core.model.cpu_attention.NAME`` (see ``para_core.model.dinov3_vit``)."""
        self.vit.set_attention(implementation)

    @property
    def attention(self) -> str:
        return self.vit.attention

    def forward(self, pixel_values: torch.Tensor) -> BackboneOutput:
        B, _, H, W = pixel_values.shape
        h, w = H // self.patch_size, W // self.patch_size
        tokens = self.vit(pixel_values)  # (B, 1 + R + h*w, C), layer-normed
        patches = tokens[:, self.n_prefix :]  # (B, h*w, C)
        grid = patches.transpose(1, 2).reshape(B, self.hidden_size, h, w)  # (B, C, h, w)
        return BackboneOutput(patch_grid=grid, cls=tokens[:, 0])


# Where a whole InternVL model's safetensors keep the vision tower (hub layout, and transformers 5's module layout).
_INTERNVL_TOWER_PREFIXES = ("vision_tower.", "model.vision_tower.")


def _load_internvl_tower(path: Path) -> nn.Module:
    """InternViT weights from a local directory, in fp32. Accepts a saved ``InternVLVisionModel``
    (model_type "internvl_vision") or a whole transformers-format InternVL model (model_type "internvl", e.g. an
    InternVL 2.5-1B "-hf" export), whose ``vision_tower.*`` tensors are read alone (the LLM is never loaded). Every
    tower tensor must be present: a partial load would leave random weights behind silently."""
    # transformers: loaded on first use, not on import
    from transformers import InternVLVisionConfig, InternVLVisionModel

    check_pretrained_dir(path, "InternVL")
    try:
        model_type = json.loads((path / "config.json").read_text()).get("model_type")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as exc:
        raise ValueError(
            f"V4Config.backbone_pretrained_dir = {str(path)!r}: config.json is not a JSON object "
            f"({exc}); re-export the checkpoint"
        ) from None
    if model_type == "internvl_vision":
        # use_safetensors=True: never fall back to unpickling a pytorch_model.bin the user handed us
        vit, info = InternVLVisionModel.from_pretrained(
            str(path), local_files_only=True, use_safetensors=True, dtype=torch.float32, output_loading_info=True
        )
        if info.get("missing_keys"):
            raise ValueError(
                f"V4Config.backbone_pretrained_dir = {str(path)!r} lacks InternViT weights "
                f"{sorted(info['missing_keys'])[:5]}...; the checkpoint is incomplete, re-export it"
            )
        return vit
    if model_type == "internvl":
        hf_cfg = InternVLVisionConfig.from_pretrained(str(path), local_files_only=True)  # its vision_config
        vit = InternVLVisionModel(hf_cfg)

        def tower_key(key: str) -> str | None:
            prefix = next((p for p in _INTERNVL_TOWER_PREFIXES if key.startswith(p)), None)
            return None if prefix is None else key[len(prefix) :]

        load_every_weight(
            vit,
            read_safetensors_dir(path, tower_key),
            path,
            "its vision tower does not match its vision_config",
            "use a complete transformers-format InternVL checkpoint",
        )
        return vit
    if model_type == "internvl_chat":
        raise ValueError(
            f"V4Config.backbone_pretrained_dir = {str(path)!r} is an original OpenGVLab InternVL "
            f"checkpoint (model_type 'internvl_chat', trust_remote_code); convert it to the transformers "
            f"format (transformers' convert_internvl_weights_to_hf.py, or use the '-hf' export)"
        )
    raise ValueError(
        f"V4Config.backbone_pretrained_dir = {str(path)!r} holds model_type {model_type!r}; "
        f"backbone_kind 'internvl_vision' loads 'internvl_vision' (a saved InternVLVisionModel) or "
        f"'internvl' (a whole transformers InternVL model)"
    )


class InternVLVisionBackbone(Backbone):
    """InternVL's vision tower (InternViT) through ``transformers.InternVLVisionModel``: real weights from a local
    directory when ``config.backbone_pretrained_dir`` is set (see ``_load_internvl_tower``), otherwise random
    weights from ``config.backbone_config``. Outputs: see the module docstring."""

    def __init__(self, config: V4Config):
        super().__init__()
        # transformers: loaded on first use, not on import
        from transformers import InternVLVisionConfig, InternVLVisionModel

        if config.backbone_pretrained_dir:
            self.vit = _load_internvl_tower(Path(config.backbone_pretrained_dir))
        else:
            self.vit = InternVLVisionModel(InternVLVisionConfig(**config.backbone_config))
        hf = self.vit.config
        patch = int_side(hf.patch_size)
        if patch != config.patch_size:
            raise ValueError(
                f"backbone patch_size {patch} != V4Config.patch_size {config.patch_size}: "
                f"set patch_size to {patch} (and img_size to a multiple of it, e.g. 448)"
            )
        self.hidden_size = int(hf.hidden_size)
        self.patch_size = patch
        self.mean_pool = bool(hf.use_mean_pooling)
        # No final norm in the model when it mean-pools (InternVL 2.5): add a parameter-free one (module docstring).
        self.out_norm_eps = float(hf.layer_norm_eps)
        mask_token = getattr(self.vit.embeddings, "mask_token", None)
        if isinstance(mask_token, nn.Parameter):  # masked-image pre-training only; never in our forward
            mask_token.requires_grad_(False)

    def arch_config(self) -> dict:
        return internvl_tower_arch(self.vit.config)

    def _norm(self, x: torch.Tensor) -> torch.Tensor:
        return Fn.layer_norm(x, (self.hidden_size,), eps=self.out_norm_eps) if self.mean_pool else x

    def forward(self, pixel_values: torch.Tensor) -> BackboneOutput:
        B, _, H, W = pixel_values.shape
        h, w = H // self.patch_size, W // self.patch_size
        tokens = self.vit(pixel_values=pixel_values).last_hidden_state  # (B, 1 + h*w, C): CLS, then row-major patches
        patches = tokens[:, 1:]  # (B, h*w, C)
        glob = patches.mean(dim=1) if self.mean_pool else tokens[:, 0]  # (B, C)
        grid = self._norm(patches).transpose(1, 2).reshape(B, self.hidden_size, h, w)  # (B, C, h, w)
        return BackboneOutput(patch_grid=grid, cls=self._norm(glob))


BACKBONE_REGISTRY: dict[str, Callable[[V4Config], Backbone]] = {
    "dinov3": DINOv3Backbone,
    "internvl_vision": InternVLVisionBackbone,
    "da3": DA3Backbone,
    "internvl": InternVLLanguageBackbone,
}


def build_backbone(config: V4Config) -> Backbone:
    try:
        factory = BACKBONE_REGISTRY[config.backbone_kind]
    except KeyError:
        raise ValueError(
            f"V4Config.backbone_kind = {config.backbone_kind!r} is not registered; use one of "
            f"{sorted(BACKBONE_REGISTRY)}"
        ) from None
    return factory(config)


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
