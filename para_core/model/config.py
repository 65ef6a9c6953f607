"""``V4Config``: the single place where every number of the PARA v4 model lives.

Presets:

- ``V4Config.paper()``: the paper's table (DINOv3 ViT-S/16+, pred_size 64, 128 height bins per view, feat_dim 32,
  height_enc_dim 16, T = n_window = 32, frame_stride 4, cam_margin 0.01 m, mv_past_n 8, lr 3e-4, backbone_lr_mult 0.1,
  warm-up 500, cosine, 20000 iterations, batch 4) with ONE deliberate change: ``img_size = 512`` instead of the paper's
  504. A ViT with 16-pixel patches needs the image side to be a multiple of 16; 504 = 31.5 * 16, so the last 8 pixels
  would be dropped silently and every feature would be shifted by up to half a patch, which breaks pixel alignment.
  Any ``img_size`` that is not a multiple of ``patch_size`` is rejected with an error that proposes the nearest valid
  sizes.
- ``V4Config.tiny()``: the same architecture at toy size (tiny DINOv3 ViT, 64 px images, 16 x 16 prediction grid, 8
  height bins, T = 4) so that a forward + backward pass takes well under a second on 2 CPU cores. For tests and demos.
  ``V4Config.tiny(backbone_kind="internvl_vision")`` swaps in a toy InternViT (14-pixel patches, 56 px images: the
  same 4 x 4 patch grid).
- ``V4Config.paper_internvl()``: the PARA v4 design's backbone variant v4_vlm. Every head field is the paper
  preset's; only the backbone (InternVL 2.5-1B's vision tower InternViT-300M-448px-V2.5, ``INTERNVL25_1B_VISION``:
  304,012,288 parameters), ``patch_size`` 14 and ``img_size`` 448 (InternVL 2.5's native tile size, 32 x 32 patches)
  differ. The head's layers are the same; the two that read backbone tokens (1x1 projection, global MLP input) take
  C = 1024 channels instead of 384. Both backbones expect ImageNet-normalised RGB (InternVL uses the ImageNet mean and
  std too), so the data pipeline is unchanged.

- ``V4Config.paper_da3()``: the PARA v4 design's backbone variant v4_da3: the paper preset's head with
  Depth-Anything-3's multi-view ViT (DA3-SMALL, ``DA3_SMALL``: 29,237,504 parameters with its camera encoder; the
  views go in together with their camera poses, ``para_core.model.backbone_da3``), ``patch_size`` 14 and ``img_size``
  504 (36 x 36 patches). The head reads C = 768 channels (DA3's concatenated per-view and cross-view tokens).

- ``V4Config.paper_vlm()``: v4_vlm as the PARA v4 design describes it: the whole InternVL 2.5-1B (``INTERNVL25_1B``),
  vision tower and projector trainable, the language model frozen and reading ``backbone_config["prompt"]``
  (``para_core.model.backbone_vlm``), img_size 448 (16 x 16 image tokens). The head reads C = 896 channels.

Earlier-variant switches (ablations along the PARA v4 design's version history):

- ``height_encoding``: ``"sincos"`` (v4: sin/cos PE of metric height normalised by the GLOBAL span [z_lo, z_hi]) or
  ``"learned"`` (v2: one learned embedding per (view, bin)).
- ``z_range_mode``: ``"adaptive"`` (v4: ``z_hi_k = min(z_hi, cam_z_k - cam_margin_m)`` per view and frame) or
  ``"fixed"`` (v2: every view uses [z_lo, z_hi]).

Field groups: ``backbone`` (:class:`BackboneConfig`), ``voxels`` (:class:`VoxelGridConfig`), ``head``
(:class:`HeadConfig`), ``data`` (:class:`DataConfig`), ``actions`` (:class:`ActionConfig`), ``training``
(:class:`TrainingConfig`), next to ``model_kind`` and ``name``. Each group validates its own fields; ``V4Config``
adds the checks that span groups. A field's name is unique across the groups: ``cfg.img_size`` reads
``cfg.backbone.img_size`` (a read-only property, see :class:`V4Config`), and error messages name fields that way.

Serialisation: ``to_dict`` / ``from_dict`` (JSON-safe, tuples become lists and back), ``to_json`` / ``from_json``,
``to_yaml`` / ``from_yaml``, ``save`` / ``load`` (by file extension). ``to_dict`` writes the grouped layout;
``from_dict`` also reads the flat one (one key per field; the shipped checkpoints' ``config.json`` and their runs use it),
and a mix of both. Unknown keys and a field given twice are rejected by name.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from para_core.model.backbone_configs import (  # noqa: F401 (re-exported: the presets' backbones)
    DA3_CONFIG_KEYS,
    DA3_SMALL,
    DA3_TINY,
    DINOV3_PICK_PLACE,
    DINOV3_TINY,
    DINOV3_VITS16PLUS,
    INTERNVL25_1B,
    INTERNVL25_1B_VISION,
    INTERNVL_TINY,
    INTERNVL_VISION_CONFIG_KEYS,
    INTERNVL_VISION_TINY,
    QWEN2_CONFIG_KEYS,
    QWEN25_05B_TEXT,
)

HEIGHT_ENCODINGS = ("sincos", "learned")
Z_RANGE_MODES = ("adaptive", "fixed")
BACKBONE_KINDS = ("dinov3", "internvl_vision", "da3", "internvl")
# Patch size of each backbone family (the default when backbone_config does not set one).
BACKBONE_DEFAULT_PATCH = {"dinov3": 16, "internvl_vision": 14, "da3": 14, "internvl": 14}
LR_SCHEDULES = ("cosine", "constant")
# Model-config fields that only steer the optimisation: a resumed or fine-tuned run may change these (e.g. more
# max_iters; para_core.train.trainer, para_core.train.init_from).
SCHEDULE_FIELDS = (
    "lr",
    "backbone_lr_mult",
    "lr_warmup",
    "lr_schedule",
    "max_iters",
    "batch_size",
    "weight_decay",
    "name",
)
DTYPES = ("fp32", "bf16", "fp16")  # precision names of every command, node and config (one table)
# inference entry points also take "auto": the fastest precision the device computes natively
# (para_core.model.hardware.resolve_inference_dtype)
INFERENCE_DTYPES = ("auto",) + DTYPES
COMPILE_MODES = ("off", "default", "reduce-overhead", "max-autotune")  # Policy(compile_mode=): torch.compile modes


def torch_dtype(name: str):
    """The torch dtype of a precision name of :data:`DTYPES` (autocast for bf16 / fp16; fp32 = none)."""
    import torch  # torch: loaded on first use, not on import

    table = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    if name not in table:
        raise ValueError(f"dtype {name!r}: use one of {list(DTYPES)}")
    return table[name]


def _fail(field_name: str, value: Any, fix: str) -> None:
    raise ValueError(f"V4Config.{field_name} = {value!r} is invalid: {fix}")


def _square_size(value: Any) -> Any:
    """A side given as an int or as a square (p, p) pair (how transformers stores InternViT sizes) -> the int;
    anything else is returned unchanged (and then fails the equality checks)."""
    if isinstance(value, (list, tuple)) and len(value) == 2 and value[0] == value[1]:
        return value[0]
    return value


# Presets by name (each a V4Config classmethod): the choices of every tool's --preset / random_preset.
PRESET_NAMES = (
    "tiny",
    "tiny_dino_kv",
    "pick_place",
    "pick_place_regression",
    "paper",
    "paper_internvl",
    "paper_da3",
    "paper_vlm",
    "paper_v2",
    "dino_kv",
)


def _check_positive_ints(group: Any, names: tuple[str, ...]) -> None:
    for name in names:
        value = getattr(group, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            _fail(name, value, "use a positive integer")


def _check_finite_floats(group: Any, names: tuple[str, ...]) -> None:
    """Each named field a finite number, stored as float."""
    for name in names:
        value = getattr(group, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            _fail(name, value, "use a finite number")
        setattr(group, name, float(value))


class _Group:
    """What every field group of :class:`V4Config` shares: validation on construction, a JSON-safe dict."""

    def __post_init__(self) -> None:
        self._normalise()
        self.validate()

    def _normalise(self) -> None:
        """Containers read from JSON / YAML (lists) back to their declared types."""

    def validate(self) -> None:
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict (tuples become lists, dicts are copied)."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            out[f.name] = (
                list(value) if isinstance(value, tuple) else (dict(value) if isinstance(value, dict) else value)
            )
        return out


@dataclass
class BackboneConfig(_Group):
    """The image backbone and the image it reads.

    Args:
        backbone_kind: key into ``para_core.model.backbones.BACKBONE_REGISTRY`` (``"dinov3"``, ``"internvl_vision"``
            ``"da3"`` or ``"internvl"``).
        backbone_config: keyword arguments of ``transformers.DINOv3ViTConfig`` (dinov3) or
            ``transformers.InternVLVisionConfig`` (internvl_vision), the ``DA3_SMALL`` keys (da3) or the
            ``INTERNVL25_1B`` keys (internvl: tower and language-model configs, prompt) (random init; used when
            ``backbone_pretrained_dir`` is empty).
        backbone_pretrained_dir: local directory with a ``transformers`` checkpoint of the backbone
            (``from_pretrained``, safetensors only; for internvl_vision also a whole InternVL model, whose vision tower
            is taken; for da3 a Depth-Anything-3 release: ``para_core.model.backbone_da3``); empty string = build from
            ``backbone_config`` with random weights.
        img_size: side of the square image fed to the backbone, pixels. Must be a multiple of ``patch_size``.
        patch_size: backbone patch size in pixels (DINOv3: 16, InternViT: 14). Must equal
            ``backbone_config["patch_size"]``.
    """

    backbone_kind: str = "dinov3"
    backbone_config: dict[str, Any] = field(default_factory=lambda: dict(DINOV3_VITS16PLUS))
    backbone_pretrained_dir: str = ""
    img_size: int = 512
    patch_size: int = 16

    def _normalise(self) -> None:
        self.backbone_config = dict(self.backbone_config)

    def validate(self) -> None:
        """Raise ValueError naming the field, the value and the fix for the first invalid field."""
        _check_positive_ints(self, ("img_size", "patch_size"))
        if self.backbone_kind not in BACKBONE_KINDS:
            _fail("backbone_kind", self.backbone_kind, f"use one of {BACKBONE_KINDS}")
        if self.backbone_kind == "internvl_vision":
            self._validate_internvl_backbone()
        if self.backbone_kind == "da3":
            self._validate_da3_backbone()
        if self.backbone_kind == "internvl":
            self._validate_internvl_lm_backbone()
        if self.img_size % self.patch_size != 0:
            lo = (self.img_size // self.patch_size) * self.patch_size
            hi = lo + self.patch_size
            choices = f"{lo} or {hi}" if lo > 0 else f"{hi}"
            if self.backbone_kind == "internvl_vision":
                choices += " (InternVL 2.5's native size is 448 = 32 x 14)"
            _fail(
                "img_size",
                self.img_size,
                f"must be a multiple of patch_size={self.patch_size} (a ViT drops the remainder pixels and shifts "
                f"every feature, breaking pixel alignment); use {choices}",
            )
        if _square_size(self.backbone_config.get("patch_size", self.patch_size)) != self.patch_size:
            _fail(
                "backbone_config",
                {"patch_size": self.backbone_config.get("patch_size")},
                f"backbone_config['patch_size'] must equal patch_size={self.patch_size}",
            )
        if not isinstance(self.backbone_pretrained_dir, str):
            _fail("backbone_pretrained_dir", self.backbone_pretrained_dir, 'use a directory path or ""')

    def _validate_internvl_backbone(self) -> None:
        """backbone_kind "internvl_vision": backbone_config must be InternVLVisionConfig keywords (transformers would
        silently ignore DINOv3 keys and build a default 300 M model) and the patch size must be the backbone's."""
        unknown = sorted(set(self.backbone_config) - INTERNVL_VISION_CONFIG_KEYS)
        if unknown:
            _fail(
                "backbone_config",
                {k: self.backbone_config[k] for k in unknown},
                f"keys {unknown} are not transformers.InternVLVisionConfig fields (a DINOv3 config?); for "
                f'backbone_kind "internvl_vision" use para_core.model.config.INTERNVL25_1B_VISION '
                f"(V4Config.paper_internvl()) or INTERNVL_VISION_TINY "
                f'(V4Config.tiny(backbone_kind="internvl_vision"))',
            )
        patch = _square_size(self.backbone_config.get("patch_size", BACKBONE_DEFAULT_PATCH["internvl_vision"]))
        if patch != self.patch_size:
            _fail(
                "patch_size",
                self.patch_size,
                f'backbone_kind "internvl_vision" has {patch}-pixel patches (backbone_config); '
                f"set patch_size={patch} and an img_size that is a multiple of it"
                + (", e.g. 448" if patch == 14 else ""),
            )

    def _validate_internvl_lm_backbone(self) -> None:
        """backbone_kind "internvl": backbone_config must hold the ``INTERNVL25_1B`` keys, a tower config of
        InternVLVisionConfig keywords, a Qwen2 text config, a string prompt and 14-pixel patches."""
        fix = "start from para_core.model.config.INTERNVL25_1B (V4Config.paper_vlm()) or INTERNVL_TINY"
        cfg = self.backbone_config
        unknown, missing = sorted(set(cfg) - set(INTERNVL25_1B)), sorted(set(INTERNVL25_1B) - set(cfg))
        if unknown or missing:
            _fail("backbone_config", cfg, f"keys {unknown} are unknown and {missing} missing for InternVL; {fix}")
        vision, text = cfg["vision_config"], cfg["text_config"]
        if not isinstance(vision, dict) or set(vision) - INTERNVL_VISION_CONFIG_KEYS:
            _fail("backbone_config", {"vision_config": vision}, f"use InternVLVisionConfig keywords; {fix}")
        if not isinstance(text, dict) or text.get("model_type") != "qwen2" or set(text) - set(QWEN25_05B_TEXT):
            _fail("backbone_config", {"text_config": text}, f"use a qwen2 config with the QWEN25_05B_TEXT keys; {fix}")
        if not isinstance(cfg["prompt"], str):
            _fail("backbone_config", {"prompt": cfg["prompt"]}, "use a string (the dataset's task or name)")
        ids = cfg["prompt_token_ids"]
        if ids is not None and not (isinstance(ids, list) and all(isinstance(i, int) and i >= 0 for i in ids)):
            _fail("backbone_config", {"prompt_token_ids": ids}, "use null (tokenise the prompt) or a list of token ids")
        if cfg["downsample_ratio"] != 0.5:
            _fail("backbone_config", {"downsample_ratio": cfg["downsample_ratio"]}, "InternVL 2.5 uses 0.5")
        patch = _square_size(vision.get("patch_size", 14))
        if patch != self.patch_size:
            _fail(
                "patch_size",
                self.patch_size,
                f'backbone_kind "internvl" has {patch}-pixel patches; set patch_size={patch} and an img_size that is '
                f"a multiple of {2 * patch} (e.g. 448)",
            )

    def _validate_da3_backbone(self) -> None:
        """backbone_kind "da3": backbone_config must hold exactly the ``DA3_SMALL`` keys with sizes DA3's code can
        build, a feature layer after the first cross-view layer, and only the v4 head can feed it (it needs every
        view and its pose at once)."""
        fix = "start from para_core.model.config.DA3_SMALL (V4Config.paper_da3()) or DA3_TINY"
        cfg = self.backbone_config
        unknown, missing = sorted(set(cfg) - DA3_CONFIG_KEYS), sorted(DA3_CONFIG_KEYS - set(cfg))
        if unknown or missing:
            _fail("backbone_config", cfg, f"keys {unknown} are unknown and {missing} missing for a DA3 backbone; {fix}")
        for key in ("embed_dim", "depth", "num_heads", "patch_size", "pos_embed_img_size", "cam_enc_trunk_depth",
                    "cam_enc_num_heads"):  # fmt: skip
            if isinstance(cfg[key], bool) or not isinstance(cfg[key], int) or cfg[key] < 1:
                _fail("backbone_config", {key: cfg[key]}, "use a positive integer")
        for key in ("cat_token", "use_camera_poses"):
            if not isinstance(cfg[key], bool):
                _fail("backbone_config", {key: cfg[key]}, "use true or false")
        if cfg["ffn_layer"] not in ("mlp", "swiglufused"):
            _fail("backbone_config", {"ffn_layer": cfg["ffn_layer"]}, 'use "mlp" (ViT-S/B/L) or "swiglufused" (ViT-g)')
        for heads in ("num_heads", "cam_enc_num_heads"):
            if cfg["embed_dim"] % cfg[heads] != 0:
                _fail("backbone_config", {heads: cfg[heads]}, f"must divide embed_dim={cfg['embed_dim']}")
        if cfg["pos_embed_img_size"] % cfg["patch_size"] != 0:
            _fail("backbone_config", {"pos_embed_img_size": cfg["pos_embed_img_size"]}, "use a multiple of patch_size")
        depth, alt, layer = cfg["depth"], cfg["alt_start"], cfg["feature_layer"]
        if not (isinstance(alt, int) and 1 <= alt < depth):
            _fail("backbone_config", {"alt_start": alt}, f"the first cross-view layer: use 1 .. {depth - 1}")
        for key in ("qknorm_start", "rope_start"):
            if not (isinstance(cfg[key], int) and (cfg[key] == -1 or 0 <= cfg[key] < depth)):
                _fail("backbone_config", {key: cfg[key]}, f"use -1 (off) or a layer 0 .. {depth - 1}")
        first_cross = alt if alt % 2 == 1 else alt + 1  # DA3: layers i >= alt_start with odd i attend across views
        if not (isinstance(layer, int) and first_cross <= layer < depth):
            _fail(
                "backbone_config",
                {"feature_layer": layer},
                f"take a layer at or after the first cross-view layer {first_cross} and below depth={depth} "
                f"(DA3-SMALL: 11, the last layer its DPT head reads)",
            )
        patch = cfg["patch_size"]
        if patch != self.patch_size:
            _fail(
                "patch_size", self.patch_size, f'backbone_kind "da3" has {patch}-pixel patches; set patch_size={patch}'
            )


@dataclass
class VoxelGridConfig(_Group):
    """The voxel grid: its rays, its height bins and their encoding, the workspace it covers.

    Args:
        pred_size: side P of each view's feature map after the bilinear upsample; the voxel grid has P x P rays a view.
        n_height_bins: Z, height bins per view. Voxels V = len(view_names) * Z * P^2.
        height_encoding: ``"sincos"`` (v4) or ``"learned"`` (v2 ablation), see the module docstring.
        height_enc_dim: channels of the height encoding; for sin/cos it is 2 x octaves, so it must be even.
        z_range_mode: ``"adaptive"`` (v4) or ``"fixed"`` (v2 ablation).
        z_lo_m, z_hi_m: global height range of the workspace in the world frame, metres (z_lo shared by all views).
        cam_margin_m: adaptive mode keeps each view's grid this far below its camera, metres.
        min_z_span_m: smallest allowed per-view height span; a camera lower than z_lo + margin + this gets a grid of
            this span (its voxels are then mostly behind it and masked) instead of an empty or inverted range.
        workspace_x_m, workspace_y_m: (min, max) world x / y of the workspace box, metres; voxels outside are masked.
    """

    pred_size: int = 64
    n_height_bins: int = 128
    height_encoding: str = "sincos"
    height_enc_dim: int = 16
    z_range_mode: str = "adaptive"
    z_lo_m: float = 0.0
    z_hi_m: float = 0.4
    cam_margin_m: float = 0.01
    min_z_span_m: float = 0.01
    workspace_x_m: tuple[float, float] = (-0.1, 0.7)
    workspace_y_m: tuple[float, float] = (-0.4, 0.4)

    def _normalise(self) -> None:
        self.workspace_x_m = tuple(float(v) for v in self.workspace_x_m)
        self.workspace_y_m = tuple(float(v) for v in self.workspace_y_m)

    def validate(self) -> None:
        """Raise ValueError naming the field, the value and the fix for the first invalid field."""
        _check_positive_ints(self, ("pred_size", "n_height_bins", "height_enc_dim"))
        if self.height_encoding not in HEIGHT_ENCODINGS:
            _fail("height_encoding", self.height_encoding, f"use one of {HEIGHT_ENCODINGS}")
        if self.height_encoding == "sincos" and self.height_enc_dim % 2 != 0:
            _fail("height_enc_dim", self.height_enc_dim, "sin/cos encoding needs an even size (2 x octaves), e.g. 16")
        if self.z_range_mode not in Z_RANGE_MODES:
            _fail("z_range_mode", self.z_range_mode, f"use one of {Z_RANGE_MODES}")
        _check_finite_floats(self, ("z_lo_m", "z_hi_m", "cam_margin_m", "min_z_span_m"))
        if not self.z_hi_m > self.z_lo_m:
            _fail("z_hi_m", self.z_hi_m, f"must be greater than z_lo_m={self.z_lo_m}")
        if self.cam_margin_m < 0:
            _fail("cam_margin_m", self.cam_margin_m, "use a value >= 0")
        if self.min_z_span_m <= 0:
            _fail("min_z_span_m", self.min_z_span_m, "use a value > 0")
        for name in ("workspace_x_m", "workspace_y_m"):
            box = getattr(self, name)
            if len(box) != 2 or not all(math.isfinite(b) for b in box) or not box[1] > box[0]:
                _fail(name, box, "use a (min, max) pair of finite metres with min < max")


@dataclass
class HeadConfig(_Group):
    """The head's layer sizes: voxel fusion MLP, query MLP, gripper / rotation MLP, the logit scale.

    Args:
        feat_dim: F, channels of the per-pixel feature and of the voxel feature / query dot product.
        voxel_mlp_hidden: hidden width of the 3-layer voxel fusion MLP.
        global_mlp_hidden: hidden width of the global query MLP.
        head_hidden: hidden width of the 4-layer gripper/rotation head.
        learned_logit_scale: multiply ``q . voxel_feat`` by a learned scale (initialised to 1/sqrt(F)); if False the
            scale is the fixed 1/sqrt(F).
        voxel_chunk_size: voxels per chunk of the voxel MLP (0 = all at once). Bounds the activation memory of the
            fusion MLP; in training each chunk is gradient-checkpointed.
    """

    feat_dim: int = 32
    voxel_mlp_hidden: int = 64
    global_mlp_hidden: int = 512
    head_hidden: int = 128
    learned_logit_scale: bool = True
    voxel_chunk_size: int = 262144

    def validate(self) -> None:
        """Raise ValueError naming the field, the value and the fix for the first invalid field."""
        _check_positive_ints(self, ("feat_dim", "voxel_mlp_hidden", "global_mlp_hidden", "head_hidden"))
        if not isinstance(self.learned_logit_scale, bool):
            _fail("learned_logit_scale", self.learned_logit_scale, "use true or false")
        if (
            isinstance(self.voxel_chunk_size, bool)
            or not isinstance(self.voxel_chunk_size, int)
            or self.voxel_chunk_size < 0
        ):
            _fail("voxel_chunk_size", self.voxel_chunk_size, "use 0 (no chunking) or a positive integer")


@dataclass
class DataConfig(_Group):
    """What the model reads and predicts, and the time base of both: cameras, chunk length, past positions.

    Args:
        view_names: camera views, in the order the model receives them (``("scene", "wrist")``).
        n_window: T, future steps predicted per chunk.
        frame_stride: dataset frames between consecutive chunk steps.
        dataset_fps: frame rate of the training data, Hz. Step i is at ``i * frame_stride / dataset_fps`` seconds.
        mv_past_n: number of past end-effector positions fed to the query MLP.
    """

    view_names: tuple[str, ...] = ("scene", "wrist")
    n_window: int = 32
    frame_stride: int = 4
    dataset_fps: float = 30.0
    mv_past_n: int = 8

    def _normalise(self) -> None:
        self.view_names = tuple(str(v) for v in self.view_names)

    def validate(self) -> None:
        """Raise ValueError naming the field, the value and the fix for the first invalid field."""
        _check_positive_ints(self, ("n_window", "frame_stride", "mv_past_n"))
        if len(self.view_names) < 1 or len(set(self.view_names)) != len(self.view_names):
            _fail("view_names", self.view_names, 'use one or more distinct names, e.g. ("scene", "wrist")')
        _check_finite_floats(self, ("dataset_fps",))
        if self.dataset_fps <= 0:
            _fail("dataset_fps", self.dataset_fps, "use a value > 0")


@dataclass
class ActionConfig(_Group):
    """How a voxel distribution becomes actions: gripper and rotation bins, confidence, what is shown.

    Args:
        n_gripper_bins: gripper classes; bin i stands for opening ``i / (n_gripper_bins - 1)`` (0 closed .. 1 open).
        n_rotation_bins: bins per rotation-vector component.
        rotation_range_rad: each component of the rotation vector of ``R_ref^T R`` is binned uniformly in
            [-rotation_range_rad, +rotation_range_rad] (values outside are clipped to the end bins).
        rotation_ref_quat_xyzw: the top-down reference orientation R_ref of the tool in the world frame, (x, y, z, w).
            Default: the YAM's reachable top-down grasp, tool axes x=[-1,0,0], y=[0,1,0], z=[0,0,-1] (pi about y).
        confidence_radius_m: a step's confidence is the predicted probability mass within this distance of its
            decoded point.
        viz_top_k: number of most probable voxels returned for visualisation.
    """

    n_gripper_bins: int = 2
    n_rotation_bins: int = 36
    rotation_range_rad: float = math.pi
    rotation_ref_quat_xyzw: tuple[float, float, float, float] = (0.0, 1.0, 0.0, 0.0)
    confidence_radius_m: float = 0.02
    viz_top_k: int = 256

    def _normalise(self) -> None:
        self.rotation_ref_quat_xyzw = tuple(float(v) for v in self.rotation_ref_quat_xyzw)

    def validate(self) -> None:
        """Raise ValueError naming the field, the value and the fix for the first invalid field."""
        _check_positive_ints(self, ("n_rotation_bins", "viz_top_k"))
        _check_finite_floats(self, ("rotation_range_rad", "confidence_radius_m"))
        for name in ("rotation_range_rad", "confidence_radius_m"):
            if getattr(self, name) <= 0:
                _fail(name, getattr(self, name), "use a value > 0")
        if self.rotation_range_rad > math.pi + 1e-9:
            _fail("rotation_range_rad", self.rotation_range_rad, "a rotation vector never exceeds pi; use <= pi")
        if len(self.rotation_ref_quat_xyzw) != 4 or not all(math.isfinite(q) for q in self.rotation_ref_quat_xyzw):
            _fail("rotation_ref_quat_xyzw", self.rotation_ref_quat_xyzw, "use 4 finite numbers (x, y, z, w)")
        norm = math.sqrt(sum(q * q for q in self.rotation_ref_quat_xyzw))
        if abs(norm - 1.0) > 1e-3:
            _fail(
                "rotation_ref_quat_xyzw",
                self.rotation_ref_quat_xyzw,
                f"must be a unit quaternion (norm is {norm:.6f}); normalise it",
            )
        if isinstance(self.n_gripper_bins, bool) or not isinstance(self.n_gripper_bins, int) or self.n_gripper_bins < 2:
            _fail("n_gripper_bins", self.n_gripper_bins, "use an integer >= 2 (closed .. open)")


@dataclass
class TrainingConfig(_Group):
    """The loss weights and the optimisation schedule (read by the trainer; the model's layers do not depend on
    them). The schedule fields are :data:`SCHEDULE_FIELDS`: a resumed or fine-tuned run may change those.

    Args:
        lr, backbone_lr_mult: head learning rate and the factor applied to the backbone's learning rate.
        lr_warmup, lr_schedule, max_iters, batch_size, weight_decay: training schedule (used by the trainer).
        gripper_loss_weight, rotation_loss_weight: weights of the two CE terms next to the voxel CE.
    """

    lr: float = 3e-4
    backbone_lr_mult: float = 0.1
    lr_warmup: int = 500
    lr_schedule: str = "cosine"
    max_iters: int = 20000
    batch_size: int = 4
    weight_decay: float = 0.0
    gripper_loss_weight: float = 1.0
    rotation_loss_weight: float = 1.0

    def validate(self) -> None:
        """Raise ValueError naming the field, the value and the fix for the first invalid field."""
        _check_positive_ints(self, ("max_iters", "batch_size"))
        _check_finite_floats(
            self, ("lr", "backbone_lr_mult", "gripper_loss_weight", "rotation_loss_weight", "weight_decay")
        )
        for name in ("gripper_loss_weight", "rotation_loss_weight", "weight_decay", "backbone_lr_mult"):
            if getattr(self, name) < 0:
                _fail(name, getattr(self, name), "use a value >= 0")
        if self.lr <= 0:
            _fail("lr", self.lr, "use a value > 0")
        if self.lr_schedule not in LR_SCHEDULES:
            _fail("lr_schedule", self.lr_schedule, f"use one of {LR_SCHEDULES}")
        if isinstance(self.lr_warmup, bool) or not isinstance(self.lr_warmup, int) or self.lr_warmup < 0:
            _fail("lr_warmup", self.lr_warmup, "use an integer >= 0")


# The field groups of V4Config: attribute -> its dataclass. Every group field name is unique across groups, so the
# flat name of a field (``img_size``) says which group holds it (``backbone``): FLAT_FIELD_GROUP.
CONFIG_GROUPS: dict[str, type] = {
    "backbone": BackboneConfig,
    "voxels": VoxelGridConfig,
    "head": HeadConfig,
    "data": DataConfig,
    "actions": ActionConfig,
    "training": TrainingConfig,
}
FLAT_FIELD_GROUP: dict[str, str] = {
    f.name: group for group, cls in CONFIG_GROUPS.items() for f in dataclasses.fields(cls)
}
TOP_LEVEL_FIELDS = ("model_kind", "name")


def flat_config_dict(data: Any, where: str = "V4Config") -> dict[str, Any]:
    """A model config mapping in either layout -> one flat ``{field: value}`` dict (no validation of the values).

    Accepts the grouped layout :meth:`V4Config.to_dict` writes (``{"backbone": {"img_size": 512, ...}, ...}``), the
    flat layout (``{"img_size": 512, ...}``, as in the shipped checkpoints' ``config.json``), and a mix (a
    group may be a dict or a group dataclass). Unknown keys and a field given twice raise ValueError naming them."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a mapping of fields, got {type(data).__name__}")
    flat: dict[str, Any] = {}

    def put(key: str, value: Any, spelled: str) -> None:
        if key in flat:
            raise ValueError(f"{where}: field {key!r} is given twice (also as {spelled!r}); keep one")
        flat[key] = value

    unknown = []
    for key, value in data.items():
        if key in CONFIG_GROUPS:
            if isinstance(value, CONFIG_GROUPS[key]):
                value = value.to_dict()
            if not isinstance(value, dict):
                raise ValueError(f"{where}.{key}: expected a mapping of {CONFIG_GROUPS[key].__name__} fields")
            for sub, sub_value in value.items():
                if FLAT_FIELD_GROUP.get(sub) != key:
                    unknown.append(f"{key}.{sub}")
                else:
                    put(sub, sub_value, f"{key}.{sub}")
        elif key in FLAT_FIELD_GROUP or key in TOP_LEVEL_FIELDS:
            put(key, value, key)
        else:
            unknown.append(key)
    if unknown:
        known = sorted(TOP_LEVEL_FIELDS + tuple(CONFIG_GROUPS) + tuple(FLAT_FIELD_GROUP))
        raise ValueError(
            f"{where}: unknown field(s) {sorted(unknown)}; remove them or check the spelling (known fields: {known})"
        )
    return flat


@dataclass
class V4Config:
    """All hyperparameters of the PARA v4 volumetric policy, in field groups.

    Args:
        model_kind: key into ``para_core.model.registry.MODEL_REGISTRY`` (``"para_v4"``).
        name: free-form preset name, printed by tools ("paper", "tiny", ...).
        backbone: :class:`BackboneConfig`, the image backbone and image size.
        voxels: :class:`VoxelGridConfig`, the voxel grid (rays, height bins, workspace).
        head: :class:`HeadConfig`, the head's layer sizes.
        data: :class:`DataConfig`, the cameras, the chunk length and its time base, the past positions.
        actions: :class:`ActionConfig`, gripper / rotation bins and what decoding reports.
        training: :class:`TrainingConfig`, loss weights and the optimisation schedule.

    Every field of a group also reads as a flat attribute of the config (``cfg.img_size`` is
    ``cfg.backbone.img_size``): a read-only property, the group holds the one value. This is the bridge for the
    many readers of single fields (models, geometry, datasets, nodes), which do not care which group a number sits
    in; write through :meth:`replace` (which takes flat names, group names or both) or a group. A flat name is unique
    across the groups, so it is also how files and error messages name a field.
    """

    model_kind: str = "para_v4"
    name: str = "custom"
    backbone: BackboneConfig = field(default_factory=BackboneConfig)
    voxels: VoxelGridConfig = field(default_factory=VoxelGridConfig)
    head: HeadConfig = field(default_factory=HeadConfig)
    data: DataConfig = field(default_factory=DataConfig)
    actions: ActionConfig = field(default_factory=ActionConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)

    # ----------------------------------------------------------------------------------------------------- presets
    @classmethod
    def paper(cls, **overrides: Any) -> V4Config:
        """The paper's table, with img_size 512 (see the module docstring). V = 2 * 128 * 64^2 = 1,048,576."""
        return cls.from_dict({"name": "paper", **overrides})

    @classmethod
    def paper_internvl(cls, **overrides: Any) -> V4Config:
        """PARA v4's v4_vlm variant: the paper preset's head with InternVL 2.5-1B's vision tower (InternViT-300M,
        14-pixel patches) at img_size 448 (32 x 32 patches). See the module docstring."""
        base = dict(
            name="paper_internvl",
            backbone_kind="internvl_vision",
            backbone_config=dict(INTERNVL25_1B_VISION),
            patch_size=14,
            img_size=448,
        )
        base.update(overrides)
        return cls.from_dict(base)

    @classmethod
    def paper_da3(cls, **overrides: Any) -> V4Config:
        """PARA v4's v4_da3 variant: the paper preset's head with Depth-Anything-3's multi-view ViT (DA3-SMALL,
        ``DA3_SMALL``: cross-view attention, camera tokens from the package's camera poses, no DPT head), 14-pixel
        patches and img_size 504 (36 x 36 patches, DA3's default processing resolution). See the module docstring."""
        base = dict(
            name="paper_da3",
            backbone_kind="da3",
            backbone_config=dict(DA3_SMALL),
            patch_size=14,
            img_size=504,
        )
        base.update(overrides)
        return cls.from_dict(base)

    @classmethod
    def paper_vlm(cls, **overrides: Any) -> V4Config:
        """PARA v4's v4_vlm variant as designed: the paper preset's head with the whole InternVL 2.5-1B
        (``INTERNVL25_1B``: trainable vision tower and projector, frozen language model reading a text prompt,
        ``para_core.model.backbone_vlm``) at img_size 448 (16 x 16 image tokens). Set the prompt in
        ``backbone_config["prompt"]``."""
        base = dict(
            name="paper_vlm",
            backbone_kind="internvl",
            backbone_config=dict(INTERNVL25_1B),
            patch_size=14,
            img_size=448,
        )
        base.update(overrides)
        return cls.from_dict(base)

    @classmethod
    def tiny(cls, **overrides: Any) -> V4Config:
        """Same architecture at toy size: forward + backward well under a second on 2 CPU cores.
        ``tiny(backbone_kind="internvl_vision")`` uses a toy InternViT (patch 14, img_size 56)."""
        base = dict(
            name="tiny",
            img_size=64,
            pred_size=16,
            feat_dim=16,
            n_height_bins=8,
            height_enc_dim=8,
            n_window=4,
            mv_past_n=2,
            voxel_mlp_hidden=32,
            global_mlp_hidden=64,
            head_hidden=32,
            voxel_chunk_size=0,
            n_rotation_bins=12,
            viz_top_k=32,
            backbone_config=dict(DINOV3_TINY),
            lr_warmup=10,
            max_iters=300,
            batch_size=2,
        )
        if overrides.get("backbone_kind") == "internvl_vision":
            base.update(backbone_config=dict(INTERNVL_VISION_TINY), patch_size=14, img_size=56)
        if overrides.get("backbone_kind") == "da3":
            base.update(backbone_config=dict(DA3_TINY), patch_size=14, img_size=56)
        if overrides.get("backbone_kind") == "internvl":
            base.update(backbone_config=dict(INTERNVL_TINY), patch_size=14, img_size=112)
        base.update(overrides)
        return cls.from_dict(base)

    @classmethod
    def dino_kv(cls, **overrides: Any) -> V4Config:
        """PARA v4's single-view dino_kv head (``para_core.model.dino_kv``, figure script 000): one scene view, DINOv3
        ViT-S/16+, 48-d pixel features and keys, a 56 x 56 grid, 32 height bins, T = 8. img_size 512 (the paper's 504
        is not a multiple of 16; see the module docstring)."""
        return cls.paper(
            **{
                "name": "dino_kv",
                "model_kind": "para_dino_kv",
                "view_names": ("scene",),
                "feat_dim": 48,
                "pred_size": 56,
                "n_height_bins": 32,
                "n_window": 8,
                **overrides,
            }
        )

    @classmethod
    def tiny_dino_kv(cls, **overrides: Any) -> V4Config:
        """The dino_kv head at the tiny preset's size (tests, demos)."""
        return cls.tiny(**{"name": "tiny_dino_kv", "model_kind": "para_dino_kv", "view_names": ("scene",), **overrides})

    @classmethod
    def paper_v2(cls, **overrides: Any) -> V4Config:
        """PARA v4's v2 column of its parity table, for ablations against v4: a learned embedding per (view, height
        bin) instead of the sin/cos PE, the fixed z range [z_lo, z_hi] in every view instead of the adaptive one,
        32 height bins and P = 128; everything else is the paper preset. V = 2 * 32 * 128^2 = 1,048,576."""
        return cls.paper(
            **{
                "name": "paper_v2",
                "height_encoding": "learned",
                "z_range_mode": "fixed",
                "n_height_bins": 32,
                "pred_size": 128,
                **overrides,
            }
        )

    @classmethod
    def pick_place(cls, **overrides: Any) -> V4Config:
        """Sized for the simulator's pick-and-place task and for training from scratch on 2 CPU cores
        (``scripts/train_pick_place``; recipe in ``checkpoints/pick_place/recipe.json``): 128 px images with 8-pixel
        patches, a 32 x 32 grid per view, 12 height bins over 0..0.16 m (1.3 cm), a workspace box around the table area
        the task uses, T = 6 steps of 0.2 s (10 Hz cameras, frame_stride 2), the backbone at the head's learning rate
        (no pretrained weights), 9 rotation bins (the top-down pose is the centre bin). V = 2 * 12 * 32^2 = 24,576."""
        base = dict(
            name="pick_place",
            img_size=128,
            patch_size=8,
            pred_size=32,
            feat_dim=32,
            n_height_bins=12,
            height_enc_dim=16,
            z_lo_m=0.0,
            z_hi_m=0.16,
            workspace_x_m=(0.15, 0.5),
            workspace_y_m=(-0.25, 0.25),
            n_window=6,
            frame_stride=2,
            dataset_fps=10.0,
            mv_past_n=4,
            voxel_mlp_hidden=48,
            global_mlp_hidden=256,
            head_hidden=64,
            voxel_chunk_size=0,
            n_rotation_bins=9,
            rotation_range_rad=math.pi / 2,
            viz_top_k=64,
            backbone_config=dict(DINOV3_PICK_PLACE),
            lr=1e-3,
            backbone_lr_mult=1.0,
            lr_warmup=200,
            max_iters=5000,
            batch_size=8,
            weight_decay=0.01,
        )
        base.update(overrides)
        return cls.from_dict(base)

    @classmethod
    def pick_place_regression(cls, **overrides: Any) -> V4Config:
        """The paper's coordinate-regression baseline for the pick-and-place task: ``pick_place``'s backbone, data and
        schedule, with a head that regresses the future EE positions (``para_core.model.regression``)."""
        return cls.pick_place(**{"model_kind": "coord_regression", "name": "pick_place_regression", **overrides})

    @classmethod
    def preset(cls, name: str, **overrides: Any) -> V4Config:
        """The preset called ``name`` (one of :data:`PRESET_NAMES`): what ``--preset`` options of the tools take."""
        if name not in PRESET_NAMES:
            raise ValueError(f"unknown V4Config preset {name!r}: use one of {list(PRESET_NAMES)}")
        return getattr(cls, name)(**overrides)

    # -------------------------------------------------------------------------------------------------- validation
    def __post_init__(self) -> None:
        # Groups read from JSON / YAML arrive as mappings of their fields.
        for group, cls in CONFIG_GROUPS.items():
            value = getattr(self, group)
            if isinstance(value, dict):
                setattr(self, group, cls(**value))
            elif not isinstance(value, cls):
                raise ValueError(f"V4Config.{group} = {value!r} is invalid: use a {cls.__name__} or a mapping of it")
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the field, the value and the fix for the first invalid field: each group's own
        checks, then the ones that span groups."""
        if not self.model_kind:
            _fail("model_kind", self.model_kind, 'use a registered model kind, e.g. "para_v4"')
        for group in CONFIG_GROUPS:
            getattr(self, group).validate()
        if self.backbone.backbone_kind == "da3" and self.model_kind != "para_v4":
            _fail(
                "backbone_kind",
                self.backbone.backbone_kind,
                f"model_kind {self.model_kind!r} runs its backbone one view at a time; DA3 needs every view and its "
                f'camera pose together, which only model_kind "para_v4" feeds. Use "dinov3" or "internvl_vision"',
            )

    # ---------------------------------------------------------------------------------------------- derived sizes
    @property
    def n_views(self) -> int:
        return len(self.data.view_names)

    @property
    def n_voxels(self) -> int:
        """V = n_views * n_height_bins * pred_size^2."""
        return self.n_views * self.voxels.n_height_bins * self.voxels.pred_size * self.voxels.pred_size

    @property
    def patch_grid(self) -> int:
        """Patch tokens per image side (img_size / patch_size)."""
        return self.backbone.img_size // self.backbone.patch_size

    @property
    def step_dt_s(self) -> float:
        """Seconds between consecutive chunk steps: frame_stride / dataset_fps."""
        return self.data.frame_stride / self.data.dataset_fps

    # ------------------------------------------------------------------------------------------- serialisation
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe dict in the grouped layout (tuples become lists): what new checkpoints and runs store."""
        out: dict[str, Any] = {name: getattr(self, name) for name in TOP_LEVEL_FIELDS}
        out.update({group: getattr(self, group).to_dict() for group in CONFIG_GROUPS})
        return out

    def to_flat_dict(self) -> dict[str, Any]:
        """JSON-safe dict with one key per field (the flat layout of the shipped checkpoints' ``config.json``):
        for comparing two configs field by field."""
        return flat_config_dict(self.to_dict())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> V4Config:
        """Inverse of ``to_dict``; also reads the flat layout (see :func:`flat_config_dict`).
        Unknown keys raise ValueError naming them."""
        flat = flat_config_dict(data)
        groups: dict[str, dict[str, Any]] = {group: {} for group in CONFIG_GROUPS}
        for key, value in flat.items():
            if key in FLAT_FIELD_GROUP:
                groups[FLAT_FIELD_GROUP[key]][key] = value
        top = {key: flat[key] for key in TOP_LEVEL_FIELDS if key in flat}
        return cls(**top, **{group: CONFIG_GROUPS[group](**values) for group, values in groups.items()})

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> V4Config:
        return cls.from_dict(json.loads(text))

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=True)

    @classmethod
    def from_yaml(cls, text: str) -> V4Config:
        return cls.from_dict(yaml.safe_load(text))

    def save(self, path: str | Path) -> None:
        """Write to ``path``; ``.yaml``/``.yml`` -> YAML, anything else JSON."""
        path = Path(path)
        text = self.to_yaml() if path.suffix in (".yaml", ".yml") else self.to_json()
        path.write_text(text)

    @classmethod
    def load(cls, path: str | Path) -> V4Config:
        path = Path(path)
        text = path.read_text()
        return cls.from_yaml(text) if path.suffix in (".yaml", ".yml") else cls.from_json(text)

    def replace(self, **changes: Any) -> V4Config:
        """A validated copy with some fields changed: flat names (``img_size=448``), groups as a mapping of the
        fields to change (``backbone={"img_size": 448}``) or as a whole group dataclass."""
        return V4Config.from_dict({**self.to_flat_dict(), **flat_config_dict(changes, "V4Config.replace")})


def _flat_alias(group: str, name: str) -> property:
    return property(
        lambda self: getattr(getattr(self, group), name),
        doc=f"``{group}.{name}`` (read-only; change it with ``replace({name}=...)``).",
    )


for _name, _group in FLAT_FIELD_GROUP.items():
    setattr(V4Config, _name, _flat_alias(_group, _name))
del _name, _group
