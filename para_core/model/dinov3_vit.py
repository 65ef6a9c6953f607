"""DINOv3's vision transformer in plain torch, tensor for tensor ``transformers.DINOv3ViTModel``.

Why its own module: importing transformers' DINOv3 takes 2.5-3.5 s on a 2-core machine (it pulls in ``torch._dynamo``,
its quantizers and ``scipy.optimize``), more than half of the inference node's start-up, for a network of a few
hundred lines. This one has the same parameter names and shapes (``embeddings.*``, ``model.layer.N.*``, ``norm.*``),
so checkpoints and local transformers DINOv3 directories load into it unchanged, and the same arithmetic:
``test/test_core_dinov3_vit.py`` holds it to transformers' outputs, gradients and train-time randomness on the same
weights.

The network (DINOv3, Simeoni et al., 2025): 16-pixel patches embedded by a convolution, a CLS token and register
tokens in front, pre-norm layers (attention with 2D rotary position embeddings on the patch tokens only, a plain or
gated MLP, a learned per-channel layer scale on each branch), a final LayerNorm. In train mode the rotary
coordinates can be shifted, jittered and rescaled at random (``pos_embed_*``) and the branches dropped per sample
(``drop_path_rate``), drawing from torch's global generator in transformers' order.

Attention runs through torch's ``scaled_dot_product_attention`` ("sdpa"), the explicit product ("eager"), or the
CPU bf16 kernel of ``para_core.model.cpu_attention`` (:data:`para_core.model.cpu_attention.NAME`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as Fn
from torch import nn

from para_core.model import cpu_attention
from para_core.model.backbone_base import load_every_weight, read_safetensors_dir

# transformers' activation names this module runs, and the torch functions that compute the same values.
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "gelu": Fn.gelu,
    "gelu_pytorch_tanh": lambda x: Fn.gelu(x, approximate="tanh"),
    "silu": Fn.silu,
    "swish": Fn.silu,
    "relu": Fn.relu,
}
ATTENTIONS = ("sdpa", "eager", cpu_attention.NAME)

# DINOv3ViTConfig keys that describe how transformers uses the network elsewhere (backbone stages, output features);
# accepted in a config and ignored, since this module returns the last hidden state only.
_IGNORED_KEYS = frozenset({"apply_layernorm", "reshape_hidden_states", "out_features", "out_indices"})


@dataclass(frozen=True)
class DINOv3Arch:
    """A DINOv3 ViT's architecture: the fields and defaults of transformers' ``DINOv3ViTConfig`` (5.x)."""

    hidden_size: int = 384
    intermediate_size: int = 1536
    num_hidden_layers: int = 12
    num_attention_heads: int = 6
    hidden_act: str = "gelu"
    attention_dropout: float = 0.0
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-5
    rope_theta: float = 100.0
    image_size: int = 224  # transformers' nominal size; the network takes any multiple of patch_size
    patch_size: int = 16
    num_channels: int = 3
    query_bias: bool = True
    key_bias: bool = False
    value_bias: bool = True
    proj_bias: bool = True
    mlp_bias: bool = True
    layerscale_value: float = 1.0
    drop_path_rate: float = 0.0
    use_gated_mlp: bool = False
    num_register_tokens: int = 0
    pos_embed_shift: float | None = None  # train mode: coordinates shifted uniformly in [-shift, shift]
    pos_embed_jitter: float | None = None  # train mode: each axis scaled log-uniformly in [1/jitter, jitter]
    pos_embed_rescale: float | None = 2.0  # train mode: both axes scaled log-uniformly in [1/rescale, rescale]

    def __post_init__(self):
        for name in ("hidden_size", "intermediate_size", "num_attention_heads", "num_channels", "patch_size"):
            if int(getattr(self, name)) < 1:
                raise ValueError(f"DINOv3 {name} = {getattr(self, name)!r}: must be at least 1")
        for name in ("num_hidden_layers", "num_register_tokens"):
            if int(getattr(self, name)) < 0:
                raise ValueError(f"DINOv3 {name} = {getattr(self, name)!r}: must be 0 or more")
        head_dim, rest = divmod(self.hidden_size, self.num_attention_heads)
        if rest or head_dim % 4:
            raise ValueError(
                f"DINOv3 hidden_size {self.hidden_size} / num_attention_heads {self.num_attention_heads}: the head "
                f"width must be a whole multiple of 4 (2D rotary embeddings split it into four)"
            )
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"DINOv3 hidden_act = {self.hidden_act!r}: use one of {sorted(ACTIVATIONS)}")
        for name in ("attention_dropout", "drop_path_rate"):
            if not 0.0 <= float(getattr(self, name)) < 1.0:
                raise ValueError(f"DINOv3 {name} = {getattr(self, name)!r}: must be in [0, 1)")
        for name in ("pos_embed_shift", "pos_embed_jitter", "pos_embed_rescale"):
            value = getattr(self, name)
            floor = 0.0 if name == "pos_embed_shift" else 1.0
            if value is not None and not float(value) >= floor:
                raise ValueError(f"DINOv3 {name} = {value!r}: must be None or at least {floor}")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @classmethod
    def from_dict(cls, config: dict[str, Any], where: str = "backbone_config") -> DINOv3Arch:
        """From ``DINOv3ViTConfig`` keywords; unknown keys are refused (a config meant for another backbone)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(config) - names - _IGNORED_KEYS)
        if unknown:
            raise ValueError(f"{where}: keys {unknown} are not DINOv3ViTConfig fields; DINOv3 takes {sorted(names)}")
        values = {k: v for k, v in config.items() if k in names}
        for key in ("image_size", "patch_size"):  # transformers allows (h, w); the network is square here
            if isinstance(values.get(key), (list, tuple)):
                side = values[key]
                if len(side) != 2 or side[0] != side[1]:
                    raise ValueError(f"{where}: {key} {side!r} is not square; para_core uses square patches")
                values[key] = int(side[0])
        return cls(**values)

    @classmethod
    def from_pretrained_config(cls, path: Path) -> DINOv3Arch:
        """The architecture in a transformers DINOv3 directory's ``config.json`` (its other keys ignored)."""
        try:
            config = json.loads((path / "config.json").read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path / 'config.json'}: not JSON ({exc}); re-export the checkpoint") from None
        if not isinstance(config, dict):
            raise ValueError(f"{path / 'config.json'}: not a JSON object; re-export the checkpoint")
        model_type = config.get("model_type")
        if model_type not in (None, "dinov3_vit"):
            raise ValueError(
                f"{path / 'config.json'} holds model_type {model_type!r}; backbone_kind 'dinov3' loads a "
                f"transformers DINOv3 ViT ('dinov3_vit')"
            )
        names = {f.name for f in fields(cls)}
        return cls.from_dict({k: v for k, v in config.items() if k in names}, where=str(path / "config.json"))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def patch_centres(n_h: int, n_w: int, device: torch.device) -> torch.Tensor:
    """(n_h * n_w, 2) row-major (y, x) centres of the patches, in [-1, 1] across the image."""
    ys = (torch.arange(0.5, n_h, dtype=torch.float32, device=device) / n_h) * 2.0 - 1.0  # (n_h,)
    xs = (torch.arange(0.5, n_w, dtype=torch.float32, device=device) / n_w) * 2.0 - 1.0  # (n_w,)
    return torch.stack(torch.meshgrid(ys, xs, indexing="ij"), dim=-1).flatten(0, 1)  # (n_h * n_w, 2)


def log_uniform(shape: tuple[int, ...], limit: float, device: torch.device) -> torch.Tensor:
    """Factors drawn log-uniformly in [1/limit, limit] from torch's global generator."""
    span = math.log(limit)
    return torch.empty(shape, dtype=torch.float32, device=device).uniform_(-span, span).exp()


class RotaryEmbedding(nn.Module):
    """The cos / sin tables of DINOv3's 2D rotary embedding for an image's patch grid."""

    def __init__(self, arch: DINOv3Arch):
        super().__init__()
        self.arch = arch
        quarter = torch.arange(0, 1, 4 / arch.head_dim, dtype=torch.float32)  # (head_dim / 4,)
        self.register_buffer("inv_freq", 1.0 / arch.rope_theta**quarter, persistent=False)

    def forward(self, pixel_values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """pixel_values (B, 3, H, W) -> cos, sin (h*w, head_dim) in the images' dtype."""
        p = self.arch.patch_size
        device = pixel_values.device
        coords = patch_centres(pixel_values.shape[2] // p, pixel_values.shape[3] // p, device)  # (N, 2)
        if self.training:  # the draws and their order are transformers'
            if self.arch.pos_embed_shift is not None:
                s = self.arch.pos_embed_shift
                coords = coords + torch.empty((1, 2), dtype=coords.dtype, device=device).uniform_(-s, s)
            if self.arch.pos_embed_jitter is not None:
                coords = coords * log_uniform((1, 2), self.arch.pos_embed_jitter, device)
            if self.arch.pos_embed_rescale is not None:
                coords = coords * log_uniform((1,), self.arch.pos_embed_rescale, device)
        angles = 2 * math.pi * coords[:, :, None] * self.inv_freq[None, None, :]  # (N, 2, head_dim / 4)
        angles = angles.flatten(1, 2).tile(2)  # (N, head_dim): [y freqs, x freqs] twice
        return torch.cos(angles).to(pixel_values.dtype), torch.sin(angles).to(pixel_values.dtype)


def rotate_patches(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding on the patch tokens of x (B, H, n_prefix + N, D); the CLS and register tokens pass as they
    are. cos, sin: (N, D)."""
    n_prefix = x.shape[-2] - cos.shape[-2]
    prefix, patches = x.split((n_prefix, cos.shape[-2]), dim=-2)
    half = patches.shape[-1] // 2
    rotated = torch.cat((-patches[..., half:], patches[..., :half]), dim=-1)  # (B, H, N, D)
    return torch.cat((prefix, patches * cos + rotated * sin), dim=-2)


class Attention(nn.Module):
    def __init__(self, arch: DINOv3Arch):
        super().__init__()
        C = arch.hidden_size
        self.heads, self.head_dim = arch.num_attention_heads, arch.head_dim
        self.scaling = self.head_dim**-0.5
        self.dropout = float(arch.attention_dropout)
        self.implementation = "sdpa"
        # registered in transformers' order, so parameter lists (and optimiser states) line up with its model's
        self.k_proj = nn.Linear(C, C, bias=arch.key_bias)
        self.v_proj = nn.Linear(C, C, bias=arch.value_bias)
        self.q_proj = nn.Linear(C, C, bias=arch.query_bias)
        self.o_proj = nn.Linear(C, C, bias=arch.proj_bias)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        B, N, C = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:
            return t.view(B, N, self.heads, self.head_dim).transpose(1, 2)  # (B, H, N, D)

        q = rotate_patches(heads(self.q_proj(x)), *rope)
        k = rotate_patches(heads(self.k_proj(x)), *rope)
        v = heads(self.v_proj(x))
        out = self.attend(q, k, v)  # (B, N, H, D)
        return self.o_proj(out.reshape(B, N, C))

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """softmax(q k^T * scaling) v with the chosen implementation: (B, H, N, D) each -> (B, N, H, D)."""
        dropout = self.dropout if self.training else 0.0
        if self.implementation == cpu_attention.NAME:
            dtype = cpu_attention.blocked_dtype(q, k, None, dropout, causal=False)
            if dtype is not None:
                return cpu_attention.run_blocked(q, k, v, self.scaling, dtype)
        if self.implementation == "eager":
            weights = torch.softmax(torch.matmul(q, k.transpose(2, 3)) * self.scaling, dim=-1)  # (B, H, N, N)
            out = torch.matmul(Fn.dropout(weights, p=dropout, training=self.training), v)
        else:
            out = Fn.scaled_dot_product_attention(q, k, v, dropout_p=dropout, scale=self.scaling)
        return out.transpose(1, 2).contiguous()


class LayerScale(nn.Module):
    def __init__(self, arch: DINOv3Arch):
        super().__init__()
        self.lambda1 = nn.Parameter(torch.full((arch.hidden_size,), float(arch.layerscale_value)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.lambda1


class MLP(nn.Module):
    """down(act(up(x))), or with ``use_gated_mlp`` down(act(gate(x)) * up(x)) (SwiGLU with SiLU)."""

    def __init__(self, arch: DINOv3Arch):
        super().__init__()
        C, I = arch.hidden_size, arch.intermediate_size  # noqa: E741 - the usual names
        if arch.use_gated_mlp:
            self.gate_proj = nn.Linear(C, I, bias=arch.mlp_bias)
        self.up_proj = nn.Linear(C, I, bias=arch.mlp_bias)
        self.down_proj = nn.Linear(I, C, bias=arch.mlp_bias)
        self.act = ACTIVATIONS[arch.hidden_act]
        self.gated = arch.use_gated_mlp

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gated:
            return self.down_proj(self.act(self.gate_proj(x)) * self.up_proj(x))
        return self.down_proj(self.act(self.up_proj(x)))


def drop_path(x: torch.Tensor, rate: float, training: bool) -> torch.Tensor:
    """Stochastic depth: each sample's branch zeroed with probability ``rate`` (the rest scaled up), in training."""
    if rate == 0.0 or not training:
        return x
    keep = 1.0 - rate
    mask = torch.floor(torch.rand((x.shape[0],) + (1,) * (x.ndim - 1), dtype=x.dtype, device=x.device) + keep)
    return x.div(keep) * mask


class Layer(nn.Module):
    def __init__(self, arch: DINOv3Arch):
        super().__init__()
        self.norm1 = nn.LayerNorm(arch.hidden_size, eps=arch.layer_norm_eps)
        self.attention = Attention(arch)
        self.layer_scale1 = LayerScale(arch)
        self.norm2 = nn.LayerNorm(arch.hidden_size, eps=arch.layer_norm_eps)
        self.mlp = MLP(arch)
        self.layer_scale2 = LayerScale(arch)
        self.drop_path_rate = float(arch.drop_path_rate)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        x = drop_path(self.layer_scale1(self.attention(self.norm1(x), rope)), self.drop_path_rate, self.training) + x
        return drop_path(self.layer_scale2(self.mlp(self.norm2(x))), self.drop_path_rate, self.training) + x


class Embeddings(nn.Module):
    def __init__(self, arch: DINOv3Arch):
        super().__init__()
        C = arch.hidden_size
        self.cls_token = nn.Parameter(torch.zeros(1, 1, C))
        self.mask_token = nn.Parameter(torch.zeros(1, 1, C))  # masked-image pre-training only; kept for its weights
        self.register_tokens = nn.Parameter(torch.zeros(1, arch.num_register_tokens, C))
        self.patch_embeddings = nn.Conv2d(arch.num_channels, C, kernel_size=arch.patch_size, stride=arch.patch_size)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """(B, 3, H, W) -> (B, 1 + R + h*w, C): CLS, registers, then the patches row-major."""
        B = pixel_values.shape[0]
        patches = self.patch_embeddings(pixel_values).flatten(2).transpose(1, 2)  # (B, h*w, C)
        return torch.cat([self.cls_token.expand(B, -1, -1), self.register_tokens.expand(B, -1, -1), patches], dim=1)


class Encoder(nn.Module):
    def __init__(self, arch: DINOv3Arch):
        super().__init__()
        self.layer = nn.ModuleList(Layer(arch) for _ in range(arch.num_hidden_layers))


class DINOv3ViT(nn.Module):
    """pixel_values (B, 3, H, W), H and W multiples of the patch size -> last hidden state (B, 1 + R + h*w, C) after
    the final LayerNorm (transformers' ``last_hidden_state``). ``config`` is the :class:`DINOv3Arch`."""

    def __init__(self, arch: DINOv3Arch):
        super().__init__()
        self.config = arch
        self.embeddings = Embeddings(arch)
        self.rope_embeddings = RotaryEmbedding(arch)
        self.model = Encoder(arch)
        self.norm = nn.LayerNorm(arch.hidden_size, eps=arch.layer_norm_eps)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Random weights as transformers initialises a DINOv3 (truncated normal at ``initializer_range``)."""
        std = self.config.initializer_range
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Conv2d)):
                nn.init.trunc_normal_(module.weight, std=std)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
            elif isinstance(module, nn.LayerNorm):
                nn.init.ones_(module.weight)
                nn.init.zeros_(module.bias)
        nn.init.trunc_normal_(self.embeddings.cls_token, std=std)
        nn.init.trunc_normal_(self.embeddings.register_tokens, std=std)
        nn.init.zeros_(self.embeddings.mask_token)

    @property
    def attention(self) -> str:
        return self.model.layer[0].attention.implementation if len(self.model.layer) else "sdpa"

    def set_attention(self, implementation: str) -> None:
        if implementation not in ATTENTIONS:
            raise ValueError(f"DINOv3 attention {implementation!r}: use one of {ATTENTIONS}")
        for layer in self.model.layer:
            layer.attention.implementation = implementation

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        pixel_values = pixel_values.to(self.embeddings.patch_embeddings.weight.dtype)
        x = self.embeddings(pixel_values)  # (B, 1 + R + h*w, C)
        rope = self.rope_embeddings(pixel_values)  # cos, sin (h*w, D)
        for layer in self.model.layer:
            x = layer(x, rope)
        return self.norm(x)


# transformers 4.x saved the layers as "layer.N.*"; 5.x keeps them under "model.layer.N.*" (and renames on load).
_OLD_LAYER_KEY = re.compile(r"^layer\.")


def load_pretrained(path: Path, **overrides: Any) -> DINOv3ViT:
    """A DINOv3 ViT from a local transformers directory (``config.json`` + ``*.safetensors``), in fp32.
    ``overrides`` replace architecture fields (the train-time augmentations). Every weight must match: a partial
    load would leave random weights behind silently."""
    arch = DINOv3Arch.from_pretrained_config(path)
    vit = DINOv3ViT(DINOv3Arch(**{**arch.to_dict(), **overrides}))
    state = read_safetensors_dir(path, lambda key: _OLD_LAYER_KEY.sub("model.layer.", key))
    load_every_weight(
        vit,
        state,
        path,
        "its weights do not match its config.json's DINOv3",
        "use a complete transformers DINOv3ViTModel directory",
    )
    return vit
