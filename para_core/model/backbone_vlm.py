"""InternVL 2.5 as a whole vision-language model (``backbone_kind = "internvl"``; the PARA v4 design's v4_vlm).

``transformers.InternVLModel`` (vision tower InternViT, pixel shuffle + MLP projector, language model Qwen2), with:

- the vision tower and the projector TRAINABLE (the "vision tokens"), the language model FROZEN (``requires_grad``
  off: no gradient into it and no optimiser state, ``para_core.model.layers.backbone_and_head_groups`` takes only
  trainable tensors; kept in eval mode in training). Gradients still flow THROUGH the frozen language model into the
  vision tokens.
- a text prompt per model (``backbone_config["prompt"]``: the dataset's task string or name). Each view is one
  sequence ``[prompt tokens, image tokens]``. The prompt comes FIRST because the language model is causal: tokens
  after the image could read it, but the image tokens could not read tokens after them, and it is the image tokens'
  states we take.
- per-patch features: the language model's last hidden state (after its final RMSNorm) at the image-token positions.
  Why the last layer: it is the deepest mixing of the prompt into the image tokens, and after the final norm the
  tokens have the unit scale the head sees from DINOv3's final norm. (The image positions carry no next-token loss in
  InternVL's training, so no layer of theirs is specialised for the vocabulary.) The image tokens come after InternVL's
  2 x 2 pixel shuffle, so the grid is (S / 28) x (S / 28) for 14-pixel patches (16 x 16 at 448 px); token (i, j)
  describes pixels [28 j, 28 (j + 1)) x [28 i, 28 (i + 1)), which ``ParaV4Model.image_features`` upsamples to the
  P x P map with the same pixel-centre convention. Global token: the mean of the view's image-token features.

Tokens: with a real checkpoint the prompt is tokenised by the tokenizer in ``backbone_pretrained_dir``; without one
(random weights, tests) by its UTF-8 bytes (token id = byte value). The ids used are written into the checkpoint's
``backbone_config["prompt_token_ids"]``, so a saved model reads the same tokens without the tokenizer. A prompt whose
tokens plus the image tokens exceed the language model's ``max_position_embeddings`` is refused.

The tower-only variant (``backbone_kind = "internvl_vision"``, preset ``paper_internvl``) stays: InternViT's tokens
straight into the head, without projector and language model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from para_core.model.backbone_base import Backbone, BackboneOutput, internvl_tower_arch
from para_core.model.config import QWEN2_CONFIG_KEYS, V4Config


def _internvl_config(arch: dict[str, Any]):
    from transformers import InternVLConfig  # transformers: loaded on first use

    return InternVLConfig(
        vision_config=dict(arch["vision_config"]),
        text_config=dict(arch["text_config"]),
        image_token_id=arch["image_token_id"],
        downsample_ratio=arch["downsample_ratio"],
        projector_hidden_act=arch["projector_hidden_act"],
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
    )


def _arch_of(hf_config) -> dict[str, Any]:
    """The ``backbone_config`` architecture keys of a transformers ``InternVLConfig``."""
    text = hf_config.text_config
    return {
        "vision_config": internvl_tower_arch(hf_config.vision_config),
        "text_config": {"model_type": "qwen2", **{k: getattr(text, k) for k in QWEN2_CONFIG_KEYS if hasattr(text, k)}},
        "image_token_id": int(hf_config.image_token_id),
        "downsample_ratio": float(hf_config.downsample_ratio),
        "projector_hidden_act": str(hf_config.projector_hidden_act),
    }


def load_internvl_model(path: Path):
    """A whole transformers-format InternVL model (model_type "internvl", e.g. InternVL 2.5-1B's "-hf" export) from
    a local directory in fp32, every tensor present; its tokenizer when the directory has one (else None)."""
    from transformers import AutoTokenizer, InternVLModel

    from para_core.model.backbone_base import check_pretrained_dir

    if not path.is_dir():
        raise ValueError(
            f"V4Config.backbone_pretrained_dir = {str(path)!r} is not a local directory (hub ids are not downloaded "
            f"here): download a transformers-format ('-hf') export of InternVL 2.5-1B with huggingface-cli download "
            f"REPO --local-dir DIR (or convert the original with transformers' convert_internvl_weights_to_hf.py) "
            f"and set backbone_pretrained_dir to DIR"
        )
    check_pretrained_dir(path, "InternVL")
    try:
        model_type = json.loads((path / "config.json").read_text()).get("model_type")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as exc:
        raise ValueError(
            f"V4Config.backbone_pretrained_dir = {str(path)!r}: config.json is not a JSON object ({exc}); "
            f"re-export the checkpoint"
        ) from None
    if model_type != "internvl":
        hint = (
            " (a vision tower alone: use backbone_kind 'internvl_vision', preset paper_internvl)"
            if model_type == "internvl_vision"
            else " (an original OpenGVLab checkpoint: convert it with transformers' convert_internvl_weights_to_hf.py)"
            if model_type == "internvl_chat"
            else ""
        )
        raise ValueError(
            f"V4Config.backbone_pretrained_dir = {str(path)!r} holds model_type {model_type!r}{hint}; backbone_kind "
            f"'internvl' loads a whole transformers-format InternVL model (model_type 'internvl')"
        )
    # use_safetensors=True: never fall back to unpickling a pytorch_model.bin the user handed us
    model, info = InternVLModel.from_pretrained(
        str(path), local_files_only=True, use_safetensors=True, dtype=torch.float32, output_loading_info=True
    )
    if info.get("missing_keys") or info.get("mismatched_keys"):
        raise ValueError(
            f"V4Config.backbone_pretrained_dir = {str(path)!r} lacks InternVL weights "
            f"{sorted(info.get('missing_keys') or [])[:5]} (mismatched {list(info.get('mismatched_keys') or [])[:3]}); "
            f"the checkpoint is incomplete, re-export it"
        )
    tokenizer = None
    if (path / "tokenizer.json").is_file() or (path / "tokenizer_config.json").is_file():
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    return model, tokenizer


def prompt_token_ids(prompt: str, tokenizer, vocab_size: int, image_token_id: int) -> list[int]:
    """The prompt's token ids: the model's tokenizer, or without one the UTF-8 bytes (module docstring)."""
    if tokenizer is not None:
        return [int(i) for i in tokenizer(prompt, add_special_tokens=False)["input_ids"]]
    ids = list(prompt.encode("utf-8"))
    if ids and (max(ids) >= vocab_size or image_token_id in ids):
        raise ValueError(
            f"backbone_config['prompt'] = {prompt!r}: without a tokenizer its UTF-8 bytes are the token ids, which "
            f"need a vocabulary of at least 256 ids other than image_token_id {image_token_id} (vocab_size "
            f"{vocab_size}); set backbone_pretrained_dir to a checkpoint with its tokenizer"
        )
    return ids


class InternVLLanguageBackbone(Backbone):
    """InternVL 2.5 with its frozen language model and a text prompt (module docstring): real weights (and the
    tokenizer) from a local directory when ``config.backbone_pretrained_dir`` is set, otherwise random weights from
    ``config.backbone_config``."""

    def __init__(self, config: V4Config):
        super().__init__()
        from transformers import InternVLModel  # transformers: loaded on first use

        cfg = config.backbone_config
        tokenizer = None
        if config.backbone_pretrained_dir:
            self.vlm, tokenizer = load_internvl_model(Path(config.backbone_pretrained_dir))
        else:
            self.vlm = InternVLModel(_internvl_config(cfg))
        hf = self.vlm.config
        patch = hf.vision_config.patch_size
        patch = int(patch[0] if isinstance(patch, (list, tuple)) else patch)
        if patch != config.patch_size:
            raise ValueError(
                f"backbone patch_size {patch} != V4Config.patch_size {config.patch_size}: set patch_size to {patch}"
            )
        self.patch_size = patch
        self.merge = round(1 / hf.downsample_ratio)  # pixel shuffle: merge x merge patches per image token
        if config.img_size % (patch * self.merge):
            raise ValueError(
                f"V4Config.img_size = {config.img_size}: InternVL merges {self.merge} x {self.merge} patches of "
                f"{patch} px into one image token, so use a multiple of {patch * self.merge} (e.g. 448)"
            )
        self.hidden_size = int(hf.text_config.hidden_size)
        self.image_token_id = int(hf.image_token_id)
        self.prompt = str(cfg.get("prompt", ""))
        ids = cfg.get("prompt_token_ids")
        if ids is None:
            ids = prompt_token_ids(self.prompt, tokenizer, int(hf.text_config.vocab_size), self.image_token_id)
        self.n_image_tokens = (config.img_size // (patch * self.merge)) ** 2
        limit = int(hf.text_config.max_position_embeddings)
        if len(ids) + self.n_image_tokens > limit:
            raise ValueError(
                f"backbone_config['prompt'] is {len(ids)} tokens; with the {self.n_image_tokens} image tokens of a "
                f"view that exceeds the language model's limit of {limit} positions (max_position_embeddings): use "
                f"a prompt of at most {limit - self.n_image_tokens} tokens (the task's name, not its description)"
            )
        self.prompt_ids = [int(i) for i in ids]
        self.vlm.language_model.requires_grad_(False)  # frozen: no gradient, no optimiser state
        self.vlm.language_model.eval()
        mask_token = getattr(self.vlm.vision_tower.embeddings, "mask_token", None)
        if isinstance(mask_token, nn.Parameter):  # masked-image pre-training only; never in our forward
            mask_token.requires_grad_(False)

    @property
    def vit(self):
        """The module whose attention ``set_attention`` switches (the whole model: tower and language model)."""
        return self.vlm

    def train(self, mode: bool = True):
        super().train(mode)
        self.vlm.language_model.eval()  # frozen: no dropout, whatever the mode of the rest
        return self

    def arch_config(self) -> dict:
        return {**_arch_of(self.vlm.config), "prompt": self.prompt, "prompt_token_ids": list(self.prompt_ids)}

    def input_ids(self, n_sequences: int, device) -> torch.Tensor:
        """(n_sequences, L) token ids: the prompt, then one image token per image-token position."""
        ids = self.prompt_ids + [self.image_token_id] * self.n_image_tokens  # (L,)
        return torch.tensor(ids, dtype=torch.long, device=device).expand(n_sequences, -1)

    def forward(self, pixel_values: torch.Tensor) -> BackboneOutput:
        B, _, H, W = pixel_values.shape
        h, w = H // (self.patch_size * self.merge), W // (self.patch_size * self.merge)
        if h * w != self.n_image_tokens:
            raise ValueError(f"InternVL backbone built for {self.n_image_tokens} image tokens got {H} x {W} images")
        out = self.vlm(input_ids=self.input_ids(B, pixel_values.device), pixel_values=pixel_values)
        hidden = out.last_hidden_state  # (B, L, C) after the language model's final norm
        image = hidden[:, len(self.prompt_ids) :]  # (B, h*w, C) the image-token positions, row-major
        grid = image.transpose(1, 2).reshape(B, self.hidden_size, h, w)  # (B, C, h, w)
        return BackboneOutput(patch_grid=grid, cls=image.mean(dim=1))
