"""Depth-Anything-3's multi-view ViT as a v4 backbone (``backbone_kind = "da3"``; the PARA v4 design's v4_da3).

The official model code (PyPI ``depth-anything-3==0.1.1``, module ``depth_anything_3.model``, installed by
``scripts/setup`` with ``requirements-da3.txt``) builds the network; this module only feeds it and reads it:

- All N views of an observation go through the ViT together, (B, N, 3, S, S): from layer ``alt_start`` on, DA3's odd
  layers attend across all views' tokens and token 0 of every view is a camera token.
- Camera tokens (``use_camera_poses``): DA3's camera encoder (``CameraEnc``) turns each view's pose and field of view
  into its camera token, from the poses the package already has (:func:`da3_extrinsics` converts them); without poses
  DA3 puts its learned reference / source tokens there.
- Features: the tokens of layer ``feature_layer`` exactly as DA3 hands them to its DPT head (the last of its
  ``out_layers``; with ``cat_token`` each token is [per-view stream, cross-view stream after the final norm], so
  C = 2 x embed_dim), reshaped to the (S/p, S/p) patch grid; the global token is that layer's camera token as DA3's
  camera decoder reads it. The DPT head, the camera decoder and everything after them are not built.

DA3's camera convention (read from its code): ``extrinsics`` are world -> camera (w2c) in OpenCV axes (x right, y
down, z forward: ``utils/geometry.py`` unprojects pixels with K^-1 [u, v, 1] * depth and maps them to the world with
the inverse of the extrinsics; the COLMAP and glTF exports write them as w2c unchanged); ``intrinsics`` are pixels of
the image the network sees; ``CameraEnc`` keeps of them only the fields of view 2 atan(H / 2 f_y), 2 atan(W / 2 f_x).
Its inference API (``DepthAnything3.inference``) normalises the poses before the network sees them: expressed
relative to the first view (view 0's extrinsics become the identity) and translations divided by the median camera
distance from view 0, at least 0.1 (with two views torch's lower median is view 0's own 0, so the divisor is 0.1).
:func:`da3_extrinsics` does the same from the package's ``T_world_cam`` (camera, OpenCV optical, -> world: the
inverse of DA3's extrinsics, same axes), so the network sees poses as its own pipeline would give them.

Real weights: ``backbone_pretrained_dir`` is a local copy of a DA3 release (``config.json`` with ``model_name``, e.g.
``{"model_name": "da3-small"}``, and ``model.safetensors``: what ``DepthAnything3.save_pretrained`` writes; download
with ``huggingface-cli download depth-anything/DA3-SMALL --local-dir DIR``). The architecture is the one DA3's own
``configs/<model_name>.yaml`` describes; the ``model.backbone.*`` and ``model.cam_enc.*`` tensors are read from
safetensors (nothing is unpickled), every tensor must be there with its shape, and the module is assigned only after
the whole load succeeded.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from para_core.model.backbone_base import Backbone, BackboneOutput
from para_core.model.config import DA3_SMALL, V4Config

# DA3's ViT sizes by its config name (depth_anything_3/model/dinov2/vision_transformer.py vit_small .. vit_giant2).
_DA3_VIT_SIZES = {
    "vits": {"embed_dim": 384, "depth": 12, "num_heads": 6, "ffn_layer": "mlp"},
    "vitb": {"embed_dim": 768, "depth": 12, "num_heads": 12, "ffn_layer": "mlp"},
    "vitl": {"embed_dim": 1024, "depth": 24, "num_heads": 16, "ffn_layer": "mlp"},
    "vitg": {"embed_dim": 1536, "depth": 40, "num_heads": 24, "ffn_layer": "swiglufused"},
}
_WEIGHT_PREFIXES = {"model.backbone.": "", "model.cam_enc.": "cam_enc."}  # release key prefix -> ours
INSTALL_HINT = (
    "the Depth-Anything-3 model code is not installed: run scripts/setup (it installs requirements-da3.txt and "
    "depth-anything-3==0.1.1 with --no-deps), or pip install -r requirements-da3.txt && "
    "pip install --no-deps depth-anything-3==0.1.1"
)


def _da3_modules():
    """DA3's ViT and camera encoder classes (imported on first use; a clear error when the package is missing)."""
    try:
        from depth_anything_3.model.cam_enc import CameraEnc
        from depth_anything_3.model.dinov2.vision_transformer import DinoVisionTransformer
        from depth_anything_3.utils import logger as da3_logger
    except ImportError as exc:
        raise ImportError(f"backbone_kind 'da3': {INSTALL_HINT} ({exc})") from exc
    if "DA3_LOG_LEVEL" not in os.environ:  # DA3 prints an INFO line on every forward with camera tokens
        da3_logger.logger.level = da3_logger.LOG_LEVELS["WARN"]
    return DinoVisionTransformer, CameraEnc


def rigid_inverse(T: torch.Tensor) -> torch.Tensor:
    """(..., 4, 4) rigid transforms -> their inverses [R^T, -R^T t]."""
    R, t = T[..., :3, :3], T[..., :3, 3:]  # (..., 3, 3), (..., 3, 1)
    top = torch.cat([R.transpose(-1, -2), -R.transpose(-1, -2) @ t], dim=-1)  # (..., 3, 4)
    return torch.cat([top, T[..., 3:, :]], dim=-2)  # (..., 4, 4)


def da3_extrinsics(T_world_cam: torch.Tensor) -> torch.Tensor:
    """The package's camera poses in DA3's convention, normalised as DA3's inference API does (module docstring).

    :param T_world_cam: (B, N, 4, 4) camera (OpenCV optical) -> world, metres.
    :return: (B, N, 4, 4) world' -> camera extrinsics, where world' is view 0's camera frame and lengths are divided by
        max(median distance of the cameras from view 0, 0.1) (the median over the N views of each batch element).
    """
    w2c = rigid_inverse(T_world_cam)  # (B, N, 4, 4) world -> camera k
    w2c_rel = w2c @ T_world_cam[:, :1]  # (B, N, 4, 4) camera 0 -> camera k: view 0 becomes the identity
    dist = rigid_inverse(w2c_rel)[..., :3, 3].norm(dim=-1)  # (B, N) camera centres in view 0's frame
    scale = dist.median(dim=1).values.clamp(min=0.1)  # (B,) torch's lower median, as DA3's API
    t = w2c_rel[..., :3, 3] / scale[:, None, None]  # (B, N, 3)
    return torch.cat([torch.cat([w2c_rel[..., :3, :3], t.unsqueeze(-1)], dim=-1), w2c_rel[..., 3:, :]], dim=-2)


def da3_release_arch(path: Path) -> dict[str, Any]:
    """The ``backbone_config`` architecture of the DA3 release in local directory ``path``, from its config.json's
    ``model_name`` and DA3's own ``configs/<model_name>.yaml``; refuses anything that is not a multi-view DA3 with a
    camera encoder (mono, metric and nested releases have no camera tokens or wrap two networks)."""
    import yaml  # PyYAML: loaded on first use

    _da3_modules()
    import depth_anything_3.model as da3_model  # the configs live next to the model package

    try:
        meta = json.loads((path / "config.json").read_text())
        model_name = meta.get("model_name")
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError) as exc:
        raise ValueError(
            f"V4Config.backbone_pretrained_dir = {str(path)!r}: config.json is not a JSON object ({exc}); "
            f"re-download the DA3 release"
        ) from None
    configs = Path(da3_model.__file__).resolve().parent.parent / "configs"
    supported = sorted(p.stem for p in configs.glob("da3-*.yaml"))
    if not isinstance(model_name, str) or not (configs / f"{model_name}.yaml").is_file():
        raise ValueError(
            f"V4Config.backbone_pretrained_dir = {str(path)!r}: config.json names model_name {model_name!r} "
            f"(model_type {meta.get('model_type')!r}), not a Depth-Anything-3 release; point it at a local copy "
            f"of one of {supported} (e.g. huggingface-cli download depth-anything/DA3-SMALL --local-dir DIR)"
        )
    spec = yaml.safe_load((configs / f"{model_name}.yaml").read_text())
    net, cam_enc = spec.get("net") or {}, spec.get("cam_enc")
    if model_name not in supported or cam_enc is None or net.get("alt_start", -1) == -1:
        raise ValueError(
            f"V4Config.backbone_pretrained_dir = {str(path)!r} holds DA3 release {model_name!r}, which has no "
            f"cross-view layers and camera encoder (or wraps two networks); use one of {supported}"
        )
    return {
        **DA3_SMALL,
        **_DA3_VIT_SIZES[net["name"]],
        "pos_embed_img_size": 518,  # DinoV2(...) builds every DA3 ViT with img_size=518
        "alt_start": int(net["alt_start"]),
        "qknorm_start": int(net["qknorm_start"]),
        "rope_start": int(net["rope_start"]),
        "cat_token": bool(net["cat_token"]),
        "feature_layer": int(net["out_layers"][-1]),
        "cam_enc_trunk_depth": 4,  # CameraEnc's defaults; the releases set only dim_out (= embed_dim)
        "cam_enc_num_heads": 16,
    }


class DA3Network(nn.Module):
    """DA3's ViT (as ``pretrained``, the attribute name DA3's ``DinoV2`` wrapper gives it) and its camera encoder
    (``cam_enc``), built from a ``backbone_config`` dict with DA3's own classes; random weights."""

    def __init__(self, arch: dict[str, Any]):
        super().__init__()
        DinoVisionTransformer, CameraEnc = _da3_modules()
        self.pretrained = DinoVisionTransformer(
            img_size=arch["pos_embed_img_size"],
            patch_size=arch["patch_size"],
            embed_dim=arch["embed_dim"],
            depth=arch["depth"],
            num_heads=arch["num_heads"],
            mlp_ratio=arch["mlp_ratio"],
            ffn_layer=arch["ffn_layer"],
            alt_start=arch["alt_start"],
            qknorm_start=arch["qknorm_start"],
            rope_start=arch["rope_start"],
            cat_token=arch["cat_token"],
        )
        self.cam_enc = CameraEnc(
            dim_out=arch["embed_dim"], trunk_depth=arch["cam_enc_trunk_depth"], num_heads=arch["cam_enc_num_heads"]
        )


def load_da3_release(path: Path, use_camera_poses: bool) -> tuple[DA3Network, dict[str, Any]]:
    """A ``DA3Network`` with the weights of the DA3 release in local directory ``path`` (module docstring), and its
    architecture. Raises ValueError naming the problem and the fix; nothing is returned half-loaded."""
    from safetensors import safe_open  # safetensors: loaded on first use

    if not path.is_dir():
        raise ValueError(
            f"V4Config.backbone_pretrained_dir = {str(path)!r} is not a local directory (hub ids are not downloaded "
            f"here): download the release first, e.g. huggingface-cli download depth-anything/DA3-SMALL "
            f"--local-dir DIR, and set backbone_pretrained_dir to DIR"
        )
    if not (path / "config.json").is_file():
        raise ValueError(
            f"V4Config.backbone_pretrained_dir = {str(path)!r} has no config.json: point it at a local copy of a "
            f"Depth-Anything-3 release (config.json + model.safetensors), or set it to '' for random weights"
        )
    shards = sorted(path.glob("*.safetensors"))
    if not shards:
        raise ValueError(
            f"V4Config.backbone_pretrained_dir = {str(path)!r} has no *.safetensors weights; only safetensors are "
            f"loaded (a .bin/.pt file would be unpickled): download the release's model.safetensors"
        )
    arch = {**da3_release_arch(path), "use_camera_poses": use_camera_poses}
    net = DA3Network(arch)
    state: dict[str, torch.Tensor] = {}
    for shard in shards:
        with safe_open(str(shard), framework="pt") as f:
            for key in f.keys():
                for prefix, ours in _WEIGHT_PREFIXES.items():
                    if key.startswith(prefix):
                        state[ours + key[len(prefix) :]] = f.get_tensor(key).to(torch.float32)
    want = net.state_dict()
    missing = sorted(set(want) - set(state))
    wrong = sorted(k for k in want if k in state and state[k].shape != want[k].shape)
    if missing or wrong:
        raise ValueError(
            f"V4Config.backbone_pretrained_dir = {str(path)!r} does not hold the tensors its model_name's "
            f"architecture needs (missing {missing[:5]}{'...' if len(missing) > 5 else ''}, wrong shape "
            f"{wrong[:5]}); the download is incomplete or config.json names another release: download it again"
        )
    net.load_state_dict({k: state[k] for k in want}, strict=True)
    return net, arch


class DA3Backbone(Backbone):
    """Depth-Anything-3's multi-view ViT (module docstring): real weights from a local release directory when
    ``config.backbone_pretrained_dir`` is set, otherwise random weights from ``config.backbone_config``."""

    multi_view = True

    def __init__(self, config: V4Config):
        super().__init__()
        use_poses = bool(config.backbone_config.get("use_camera_poses", True))
        if config.backbone_pretrained_dir:
            net, arch = load_da3_release(Path(config.backbone_pretrained_dir), use_poses)
        else:
            net, arch = DA3Network(config.backbone_config), dict(config.backbone_config)
        if arch["patch_size"] != config.patch_size:
            raise ValueError(
                f"backbone patch_size {arch['patch_size']} != V4Config.patch_size {config.patch_size}: "
                f"set patch_size to {arch['patch_size']}"
            )
        self.net = net
        self.arch = arch
        self.n_views = config.n_views
        self.patch_size = int(arch["patch_size"])
        self.hidden_size = int(arch["embed_dim"]) * (2 if arch["cat_token"] else 1)
        self.use_camera_poses = use_poses
        self.attention_request = "sdpa"
        # The learned fallback camera tokens only enter without poses; with poses they never get a gradient.
        self.net.pretrained.camera_token.requires_grad_(not use_poses)
        if not use_poses:  # the camera encoder is then never called: frozen, kept for checkpoint compatibility
            self.net.cam_enc.requires_grad_(False)

    def arch_config(self) -> dict:
        return dict(self.arch)

    def set_attention(self, implementation: str) -> None:
        """DA3's layers always call torch's ``scaled_dot_product_attention`` (its ``Attention.fused_attn``); the
        request is recorded, not applied (``para_core.model.cpu_attention`` hooks transformers models only)."""
        self.attention_request = implementation

    @property
    def attention(self) -> str:
        return "sdpa (depth_anything_3 layers)"

    def forward(self, pixel_values: torch.Tensor) -> BackboneOutput:
        raise ValueError(
            "backbone_kind 'da3' attends across views and reads their camera poses: call forward_views(images "
            "(B, N, 3, S, S), K_img, T_world_cam) with every view of an observation, not one image at a time"
        )

    def camera_tokens(self, K_img: torch.Tensor, T_world_cam: torch.Tensor, image_hw: tuple[int, int]):
        """(B, N, 3, 3) intrinsics, (B, N, 4, 4) poses -> DA3's camera tokens (B, N, embed_dim), in fp32 (DA3 runs its
        camera encoder outside autocast too)."""
        with torch.autocast(device_type=K_img.device.type, enabled=False):
            ext = da3_extrinsics(T_world_cam.float())  # (B, N, 4, 4) DA3 convention
            return self.net.cam_enc(ext, K_img.float(), image_hw)  # (B, N, embed_dim)

    def forward_views(self, images: torch.Tensor, K_img: torch.Tensor, T_world_cam: torch.Tensor) -> BackboneOutput:
        B, N, _, H, W = images.shape
        if N != self.n_views or K_img.shape[:2] != (B, N) or T_world_cam.shape[:2] != (B, N):
            raise ValueError(
                f"DA3 backbone built for {self.n_views} view(s) got images {tuple(images.shape)}, K_img "
                f"{tuple(K_img.shape)}, T_world_cam {tuple(T_world_cam.shape)}: pass all {self.n_views} views "
                f"(V4Config.view_names) of each observation with one intrinsics matrix and one pose per view"
            )
        if H % self.patch_size or W % self.patch_size:
            raise ValueError(f"DA3 images {H} x {W} are not multiples of patch_size {self.patch_size}")
        cam_token = self.camera_tokens(K_img, T_world_cam, (H, W)) if self.use_camera_poses else None
        layer = self.arch["feature_layer"]
        layers, _ = self.net.pretrained.get_intermediate_layers(images, [layer], cam_token=cam_token)
        tokens, camera = layers[0]  # (B, N, h*w, C) what DA3's DPT head reads, (B, N, C) its camera decoder's input
        h, w = H // self.patch_size, W // self.patch_size
        grid = tokens.reshape(B * N, h, w, self.hidden_size).permute(0, 3, 1, 2)  # (B*N, C, h, w)
        return BackboneOutput(patch_grid=grid, cls=camera.reshape(B * N, self.hidden_size))
