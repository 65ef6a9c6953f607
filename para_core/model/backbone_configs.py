"""The architectures of the backbones the model presets name, as keyword arguments of their model configs
(transformers' ``DINOv3ViTConfig``, ``InternVLVisionConfig``, ``Qwen2Config``, InternVL's whole model, DA3's ViT):
the real releases and toy versions of the same structure for tests. ``para_core.model.config`` builds the presets
from them and validates a ``backbone_config`` against their keys.
"""

from __future__ import annotations

from typing import Any

# The official DINOv3 ViT-S/16+ architecture (facebook/dinov3-vits16plus-pretrain-lvd1689m): 384 wide, 12 layers,
# 6 heads, 4 register tokens, 16-pixel patches, gated SiLU ("SwiGLU") MLP of width 1536. 28.7 M parameters.
DINOV3_VITS16PLUS: dict[str, Any] = {
    "hidden_size": 384,
    "intermediate_size": 1536,
    "num_hidden_layers": 12,
    "num_attention_heads": 6,
    "hidden_act": "silu",
    "use_gated_mlp": True,
    "num_register_tokens": 4,
    "patch_size": 16,
    "layerscale_value": 1.0,
    "rope_theta": 100.0,
    "query_bias": True,
    "key_bias": False,
    "value_bias": True,
    "proj_bias": True,
    "mlp_bias": True,
    "layer_norm_eps": 1e-5,
    # transformers' DINOv3 rescales its RoPE coordinates at random in train mode (log-uniform in [1/2, 2] by
    # default), so every training forward would see other positional encodings than inference does. PARA's head
    # reads features at exact pixels; this augmentation is OFF in every preset (None) unless set here explicitly.
    "pos_embed_rescale": None,
}

# A toy DINOv3 with the same structure (registers, gated MLP, RoPE), for tests.
DINOV3_TINY: dict[str, Any] = {
    **DINOV3_VITS16PLUS,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
}

# InternVL 2.5-1B's vision tower, InternViT-300M-448px-V2.5 (OpenGVLab/InternVL2_5-1B), as keyword arguments of
# ``transformers.InternVLVisionConfig``: 1024 wide, 24 layers, 16 heads, GELU MLP of width 4096, qkv bias, LayerNorm
# (eps 1e-6), layer scale, a CLS token, learned absolute position embeddings for 448 x 448 images, 14-pixel patches,
# no registers. 304,012,288 parameters (hand count in test/test_core_backbones.py).
INTERNVL25_1B_VISION: dict[str, Any] = {
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "hidden_act": "gelu",
    "attention_bias": True,
    "use_qk_norm": False,
    "norm_type": "layer_norm",
    "layer_norm_eps": 1e-6,
    "image_size": 448,
    "patch_size": 14,
    "layer_scale_init_value": 0.1,
    "use_absolute_position_embeddings": True,
    "use_mean_pooling": True,
}

# A toy InternViT with the same structure, for tests: 56 px images = 4 x 4 patches.
INTERNVL_VISION_TINY: dict[str, Any] = {
    **INTERNVL25_1B_VISION,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "image_size": 56,
}

# Every keyword ``transformers.InternVLVisionConfig`` takes (transformers 5.x). transformers accepts unknown keys
# silently, so a DINOv3 config handed to the InternVL backbone would build a default-sized model; we reject it.
INTERNVL_VISION_CONFIG_KEYS = frozenset(
    {
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "attention_bias",
        "use_qk_norm",
        "intermediate_size",
        "hidden_act",
        "hidden_dropout_prob",
        "attention_dropout",
        "projection_dropout",
        "initializer_range",
        "norm_type",
        "layer_norm_eps",
        "image_size",
        "patch_size",
        "num_channels",
        "use_mask_token",
        "use_absolute_position_embeddings",
        "layer_scale_init_value",
        "use_mean_pooling",
    }
)

# InternVL 2.5-1B's language model, Qwen2.5-0.5B-Instruct (OpenGVLab/InternVL2_5-1B, llm_config), as keyword
# arguments of ``transformers.Qwen2Config``: 896 wide, 24 layers, 14 query heads sharing 2 key/value heads, SiLU gated
# MLP of width 4864, RMSNorm, RoPE base 1e6, tied input/output embeddings, 151,674 tokens.
QWEN25_05B_TEXT: dict[str, Any] = {
    "model_type": "qwen2",
    "vocab_size": 151674,
    "hidden_size": 896,
    "intermediate_size": 4864,
    "num_hidden_layers": 24,
    "num_attention_heads": 14,
    "num_key_value_heads": 2,
    "hidden_act": "silu",
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": True,
    "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
}
QWEN2_CONFIG_KEYS = tuple(k for k in QWEN25_05B_TEXT if k != "model_type")

# The whole InternVL 2.5-1B for ``backbone_kind = "internvl"`` (para_core.model.backbone_vlm): its vision tower, the
# 2 x 2 pixel shuffle + MLP projector into the language model, the language model, the image token's id, and the text
# prompt (the dataset's task string or name; empty by default) with its token ids (filled in when the model is built).
INTERNVL25_1B: dict[str, Any] = {
    "vision_config": dict(INTERNVL25_1B_VISION),
    "text_config": dict(QWEN25_05B_TEXT),
    "image_token_id": 151667,
    "downsample_ratio": 0.5,
    "projector_hidden_act": "gelu",
    "prompt": "",
    "prompt_token_ids": None,
}

# A toy InternVL with the same structure, for tests: 112 px images = 8 x 8 patches = 4 x 4 image tokens, a language
# model of 2 layers with 300 token ids (byte-valued prompts fit) and 64 positions.
INTERNVL_TINY: dict[str, Any] = {
    **INTERNVL25_1B,
    "vision_config": {**INTERNVL_VISION_TINY, "image_size": 112},
    "text_config": {
        **QWEN25_05B_TEXT,
        "vocab_size": 300,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 64,
    },
    "image_token_id": 299,
}

# Depth-Anything-3 DA3-SMALL (depth-anything/DA3-SMALL; the official code's configs/da3-small.yaml), the release of
# the shipping DINOv3 ViT-S's size: a DINOv2-style ViT-S/14 (384 wide, 12 layers, 6 heads, GELU MLP x4, layer scale,
# position table for 518 px) whose layers from ``alt_start`` on use RoPE and QK-norm and alternate per-view and
# cross-view attention, plus the camera encoder (``cam_enc``: 4 transformer blocks of 16 heads) that turns each view's
# pose and field of view into the camera token. ``feature_layer`` is the last of DA3's ``out_layers`` [5, 7, 9, 11]:
# the tokens its DPT head reads last. ``cat_token``: each token is [per-view stream, normed cross-view stream], so
# C = 2 x 384 = 768. ``use_camera_poses``: feed the package's camera poses as DA3's camera tokens (else DA3's learned
# reference/source tokens). Keys: para_core.model.backbone_da3 (parameter count checked there by hand).
DA3_SMALL: dict[str, Any] = {
    "embed_dim": 384,
    "depth": 12,
    "num_heads": 6,
    "mlp_ratio": 4.0,
    "ffn_layer": "mlp",
    "patch_size": 14,
    "pos_embed_img_size": 518,
    "alt_start": 4,
    "qknorm_start": 4,
    "rope_start": 4,
    "cat_token": True,
    "feature_layer": 11,
    "cam_enc_trunk_depth": 4,
    "cam_enc_num_heads": 16,
    "use_camera_poses": True,
}

# A toy DA3 with the same structure (per-view then alternating cross-view layers, RoPE, QK-norm, camera encoder), for
# tests: 56 px images = 4 x 4 patches, cross-view attention in layer 3 (the feature layer).
DA3_TINY: dict[str, Any] = {
    **DA3_SMALL,
    "embed_dim": 32,
    "depth": 4,
    "num_heads": 2,
    "pos_embed_img_size": 56,
    "alt_start": 2,
    "qknorm_start": 2,
    "rope_start": 2,
    "feature_layer": 3,
    "cam_enc_trunk_depth": 1,
    "cam_enc_num_heads": 2,
}
DA3_CONFIG_KEYS = frozenset(DA3_SMALL)

# A small DINOv3 trained from scratch for the simulator's pick-and-place task (``V4Config.pick_place``):
# 8-pixel patches (16 x 16 tokens at 128 px: a 4 cm cube spans about one patch in the scene view), 96 wide, 4 layers.
DINOV3_PICK_PLACE: dict[str, Any] = {
    **DINOV3_VITS16PLUS,
    "hidden_size": 96,
    "intermediate_size": 192,
    "num_hidden_layers": 4,
    "num_attention_heads": 3,
    "patch_size": 8,
}
