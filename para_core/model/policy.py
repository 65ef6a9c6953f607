"""``Policy``: the single inference entry point (ROS node, offline evaluation, demo). API: docs/contracts.md.

``predict`` takes raw RGB images of any size with their own intrinsics and camera poses, resizes each to
img_size x img_size (bilinear; ``cv2.INTER_AREA`` when shrinking) with the exact intrinsics rescale
``K' = diag(S/W, S/H, 1) @ K`` (pixel-centre convention, see ``para_core.model.geometry``), applies ImageNet normalisation,
runs the model (geometry always in float32; the network in ``dtype`` through autocast) and decodes the chunk
(``decoding``: each step's argmax voxel, the reference, or the chunk's voxels chosen jointly, optionally fused with the
earlier chunks' distributions, see ``para_core.model.decoding``; refined by a local soft-argmax, see
``para_core.model.actions``).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch
import torch.nn.functional as Fn

from para_core.model import cpu_attention, hardware
from para_core.model.checkpoint import load_checkpoint
from para_core.model.confidence import ChunkInForce, step_confidence
from para_core.model.config import COMPILE_MODES, V4Config, torch_dtype
from para_core.model.decoding import ChunkFusion, DecodingConfig, decode_chunk
from para_core.model.familiarity import Familiarity, has_familiarity
from para_core.model.interface import check_model_interface
from para_core.model.model_io import V4Inputs
from para_core.model.registry import build_model
from para_core.model.rotations import check_rigid

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass
class CameraObservation:
    image_rgb: np.ndarray  # (H, W, 3) uint8, RGB, any size
    K: np.ndarray  # (3, 3) float64 intrinsics of THIS image (pixels)
    T_world_cam: np.ndarray  # (4, 4) float64, OpenCV optical frame -> world


@dataclass
class RobotState:
    T_world_ee: np.ndarray  # (4, 4) current end-effector pose in world
    gripper: float  # 0 closed .. 1 open
    past_positions_world: np.ndarray  # (mv_past_n, 3) previous EE positions, oldest first (repeat current if unknown)


@dataclass
class PolicyOutput:
    positions_world: np.ndarray  # (T, 3) metres
    quaternions_xyzw: np.ndarray  # (T, 4) EE orientation in world
    gripper: np.ndarray  # (T,) 0..1
    confidence: np.ndarray  # (T,) 0..1
    time_offsets_s: np.ndarray  # (T,) seconds after the observation stamp
    top_voxels_world: np.ndarray  # (K, 3) most probable voxels (union over steps) for rviz
    top_voxels_prob: np.ndarray  # (K,)
    voxel_bounds_world: np.ndarray  # (2, 3) min/max corner of all valid voxels of this observation
    # the other confidence measures (para_core.model.confidence; ``confidence`` is the peak mass), (T,) each in
    # [0, 1]; empty for a model without a voxel distribution (the coordinate-regression baseline)
    entropy: np.ndarray = field(default_factory=lambda: np.zeros(0))
    chunk_agreement: np.ndarray = field(default_factory=lambda: np.zeros(0))
    view_agreement: np.ndarray = field(default_factory=lambda: np.zeros(0))
    # (N,) per view, in view_names order: how novel the view's image features are against the training data's, as a
    # ratio to the familiar limit (above 1: unfamiliar; para_core.model.familiarity); empty without a memory
    novelty_ratio: np.ndarray = field(default_factory=lambda: np.zeros(0))


def resolve_device(device: str | torch.device | None) -> torch.device:
    if device is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def resize_to_model_input(image_rgb: np.ndarray, K: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """One camera image + its intrinsics -> the (size, size, 3) uint8 model input and the exactly rescaled K.

    Bilinear resize (``cv2.INTER_AREA`` when shrinking both sides); ``K' = diag(size/W, size/H, 1) @ K`` (pixel-centre
    convention: u -> (size / W) u). Shared by ``Policy.preprocess`` and ``para_core.data.dataset`` so that training and
    inference see identical pixels.
    """
    img = np.asarray(image_rgb)
    H, W = img.shape[:2]
    if (H, W) != (size, size):
        interp = cv2.INTER_AREA if (H > size and W > size) else cv2.INTER_LINEAR
        img = cv2.resize(img, (size, size), interpolation=interp)
    return np.ascontiguousarray(img), rescaled_intrinsics(K, (H, W), size)


def rescaled_intrinsics(K: np.ndarray, image_hw: tuple[int, int], size: int) -> np.ndarray:
    """``K' = diag(size / W, size / H, 1) @ K`` (float64): the intrinsics of an (H, W) image resized to a square."""
    H, W = image_hw
    K = np.asarray(K, dtype=np.float64).copy()
    K[0] *= size / W  # exact: u -> (size / W) u
    K[1] *= size / H
    return K


def resize_on_device(image_rgb: np.ndarray, size: int, device: torch.device) -> torch.Tensor:
    """``resize_to_model_input``'s pixels, computed on ``device``: (H, W, 3) uint8 -> (3, size, size) float32 0..255.

    The uint8 image is uploaded as it is (a third of the float bytes), then resized with OpenCV's kernels: its area
    average when shrinking both sides (each output pixel the mean of the input area it covers, fractional pixels
    weighted by their overlap: two small matrix products, ``area_weights``), else bilinear with half-pixel centres (as
    ``cv2.INTER_LINEAR``); rounded to integers as OpenCV's uint8 output is. OpenCV's fixed-point weights round
    differently: at most one grey level apart (``test_core_fast_path``)."""

    img = torch.from_numpy(np.ascontiguousarray(image_rgb)).to(device)  # (H, W, 3) uint8
    x = img.permute(2, 0, 1).float()  # (3, H, W)
    H, W = img.shape[:2]
    if (H, W) == (size, size):
        return x
    if H > size and W > size:
        x = area_weights(H, size, device) @ x @ area_weights(W, size, device).T  # (3, size, size)
    else:
        x = Fn.interpolate(x.unsqueeze(0), size=(size, size), mode="bilinear", align_corners=False)[0]
    return x.round_().clamp_(0.0, 255.0)


def area_weights(n_in: int, n_out: int, device: torch.device | None = None) -> torch.Tensor:
    """(n_out, n_in) float32 weights of an area-average shrink along one axis: output pixel i covers input
    [i s, (i + 1) s), s = n_in / n_out, and weighs each input pixel by its overlap with that span / s (rows sum
    to 1)."""
    scale = n_in / n_out
    out_edges = torch.arange(n_out + 1, dtype=torch.float64, device=device) * scale  # (n_out + 1,)
    in_edges = torch.arange(n_in + 1, dtype=torch.float64, device=device)  # (n_in + 1,)
    overlap = (
        torch.minimum(out_edges[1:, None], in_edges[None, 1:])
        - torch.maximum(out_edges[:-1, None], in_edges[None, :-1])
    ).clamp_(min=0.0)  # (n_out, n_in)
    return (overlap / scale).float()


# Poses reach the policy through float32 ROS messages and TF interpolation: a looser rotation tolerance than
# para_core.model.rotations' default, and an exact last row.
POSE_ROTATION_TOLERANCE = 1e-3
POSE_LAST_ROW_TOLERANCE = 1e-9


def _check_rigid(name: str, T: np.ndarray) -> np.ndarray:
    try:
        return check_rigid(
            T, name, rotation_tolerance=POSE_ROTATION_TOLERANCE, last_row_tolerance=POSE_LAST_ROW_TOLERANCE
        )
    except ValueError as exc:
        raise ValueError(f"{exc} (pass a finite rigid pose; from ROS: is TF available for that frame?)") from None


class Policy:
    """Inference wrapper around any model kind: preprocessing, forward, decoding. See docs/contracts.md.

    The model is used through ``para_core.model.interface.ParaModel`` only (``forward``, ``decode``,
    ``visualisation``, ``backbone``, ``has_voxel_volume``, ``has_fast_path``), so a new registered kind needs no change
    here."""

    def __init__(
        self,
        model: torch.nn.Module,
        config: V4Config,
        device: torch.device,
        dtype: str = "fp32",
        model_id: str = "",
        refine: bool = True,
        fast: bool = False,
        compile_mode: str = "off",
        device_preprocess: bool | None = None,
        keep_freed_memory: bool = True,
        decoding: str | DecodingConfig = "argmax",
    ):
        """``fast``: the model's fast inference path where it has one (v4: ``para_core.model.v4_fast``), the same
        predictions and logits within float tolerance (it keeps no per-voxel features: ``last_output.voxel_feat`` is
        None); False keeps the reference path (the oracle the fast one is tested against).

        ``compile_mode``: ``torch.compile`` the backbone (most of the FLOPs; static shapes: the views are always
        ``img_size`` squares) in this mode (``COMPILE_MODES``), "off" = eager. The first prediction compiles (tens of
        seconds; it needs a C++ compiler on CPU); the numbers stay within float tolerance of eager. On the
        paper config the backbone runs faster (docs/benchmarks.md).

        ``device_preprocess``: upload the raw uint8 images and resize + normalise them on ``device``
        (``resize_on_device``) instead of with OpenCV on the host; default: with ``fast`` on a GPU. The pixels
        agree with the host's (``resize_to_model_input``, what training sees) to one grey level.

        ``dtype``: one of ``INFERENCE_DTYPES``; ``auto`` is the fastest precision ``device`` computes natively (bf16 on
        a CPU with bf16 instructions or a GPU that has bf16, fp16 on an older GPU, else fp32:
        ``para_core.model.hardware``); ``self.dtype`` holds the resolved name.

        With ``fast`` on a CPU in bf16 / fp16 the backbone's attention is ``para_core.model.cpu_attention`` (bf16
        matrix products a few heads at a time; torch's CPU kernel computes in fp32 whatever the dtype: 2x slower per
        layer); ``self.attention`` names the one in use.

        ``keep_freed_memory``: on a CPU device, make the process's allocator keep freed memory
        (``hardware.keep_freed_memory_for``: a CPU forward otherwise spends 10-45 % of its time in page faults); for
        the whole process; ``self.allocator`` says what was done.

        ``decoding``: a ``DecodingConfig`` or its mode name (``para_core.model.decoding.DECODING_MODES``): how the
        chunk's voxels are chosen; ``argmax`` (the reference) needs no voxel distribution, ``joint`` and ``fused``
        need one (not the coordinate-regression baseline); ``auto`` is ``fused`` where the model has one, else
        ``argmax``. ``fused`` keeps the earlier chunks in ``self.fusion``
        unless ``predict`` is given a ``ChunkFusion`` of its own."""

        check_model_interface(model)  # TypeError naming what a model that is not a ParaModel lacks
        self.decoding = (
            decoding if isinstance(decoding, DecodingConfig) else DecodingConfig(mode=decoding)
        ).resolved_for(model.has_voxel_volume)
        if self.decoding.mode != "argmax" and not model.has_voxel_volume:
            raise ValueError(
                f"decoding={self.decoding.mode!r}: model kind {config.model_kind!r} predicts no voxel "
                f"distribution to decode; use decoding='argmax'"
            )
        dtype = hardware.resolve_inference_dtype(dtype, device)  # refuses a name not in INFERENCE_DTYPES
        slow = hardware.slow_precision_warning(dtype, device)
        if slow:
            warnings.warn(slow, RuntimeWarning, stacklevel=2)
        if compile_mode not in COMPILE_MODES:
            raise ValueError(f"compile_mode={compile_mode!r}; use one of {COMPILE_MODES}")
        self.config = config
        self.device = device
        self.dtype = dtype
        self.model = model.to(device).eval()
        self.fast = bool(fast) and self.model.has_fast_path
        if self.fast:
            self.model.fast_inference = True
            self.model.backbone.set_attention(cpu_attention.fast_path_attention(device.type, dtype))
        self.attention = self.model.backbone.attention  # what the backbone's layers call
        self.compile_mode = compile_mode
        self.device_preprocess = (
            (self.fast and device.type != "cpu") if device_preprocess is None else bool(device_preprocess)
        )
        if compile_mode != "off":
            self.model.backbone.compile(mode=compile_mode, dynamic=False)  # in place: state_dict keys unchanged
        self.allocator = hardware.keep_freed_memory_for(device, keep_freed_memory)
        self.model_id = model_id or f"{config.model_kind}:{config.name}:untrained"
        self.view_names: tuple[str, ...] = tuple(config.view_names)
        self.refine = refine
        d = self.decoding
        self.fusion = ChunkFusion(d.fusion_tau_s, d.fusion_radius_m, d.fusion_store_k, d.fusion_max_chunks)
        self.chunk_in_force = ChunkInForce()  # the last chunk predicted: what the chunk agreement is measured against
        self.familiarity: Familiarity | None = None  # the training features' memory (set_familiarity)
        self.last_output: Any = None  # the last forward's output record (a V4Output for a voxel-volume kind)
        self.last_timing_s: dict[str, float] = {}
        self._warned_low_scene_camera = False
        self._mean = torch.tensor(IMAGENET_MEAN, device=device).view(3, 1, 1)
        self._std = torch.tensor(IMAGENET_STD, device=device).view(3, 1, 1)

    # ------------------------------------------------------------------------------------------- constructors
    @classmethod
    def from_checkpoint(
        cls,
        path,
        device=None,
        dtype: str = "fp32",
        fast: bool = False,
        compile_mode: str = "off",
        device_preprocess: bool | None = None,
        keep_freed_memory: bool = True,
        decoding: str | DecodingConfig = "argmax",
    ) -> Policy:
        """Load a checkpoint directory (``para_core.model.checkpoint``); device None -> cuda if available else cpu."""

        model, config, meta = load_checkpoint(path)
        model_id = meta.get("model_id") or f"{config.model_kind}:{Path(path).name}"
        policy = cls(
            model,
            config,
            resolve_device(device),
            dtype=dtype,
            model_id=model_id,
            fast=fast,
            compile_mode=compile_mode,
            device_preprocess=device_preprocess,
            keep_freed_memory=keep_freed_memory,
            decoding=decoding,
        )
        if has_familiarity(path):  # the checkpoint ships the memory of its training features
            policy.set_familiarity(Familiarity.load(path))
        return policy

    def set_familiarity(self, familiarity: Familiarity | None) -> None:
        """Measure each observation's novelty against ``familiarity`` (``PolicyOutput.novelty_ratio``); None: stop.
        ValueError when it was built for other views or another checkpoint's weights."""
        if familiarity is not None:
            if tuple(familiarity.view_names) != self.view_names:
                raise ValueError(
                    f"familiarity: built for views {list(familiarity.view_names)}, the policy has {list(self.view_names)}"
                )
            if familiarity.model_id and familiarity.model_id != self.model_id:
                raise ValueError(
                    f"familiarity: built for checkpoint {familiarity.model_id!r}, this policy is {self.model_id!r}: "
                    f"its features are another model's (rebuild it with `para-train familiarity`)"
                )
        self.familiarity = None if familiarity is None else familiarity.to(self.device)  # moved once, not per call

    @classmethod
    def random_init(
        cls,
        config: V4Config,
        device=None,
        dtype: str = "fp32",
        seed: int = 0,
        fast: bool = False,
        compile_mode: str = "off",
        device_preprocess: bool | None = None,
        keep_freed_memory: bool = True,
        decoding: str | DecodingConfig = "argmax",
    ) -> Policy:
        """An untrained policy (random weights, deterministic in ``seed``) for demos and tests."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = build_model(config)
        return cls(
            model,
            config,
            resolve_device(device),
            dtype=dtype,
            model_id=f"{config.model_kind}:{config.name}:random-seed{seed}",
            fast=fast,
            compile_mode=compile_mode,
            device_preprocess=device_preprocess,
            keep_freed_memory=keep_freed_memory,
            decoding=decoding,
        )

    # ---------------------------------------------------------------------------------------- preprocessing
    def _validate(self, cameras: Sequence[CameraObservation], state: RobotState) -> None:
        cfg = self.config
        if len(cameras) != cfg.n_views:
            raise ValueError(
                f"predict got {len(cameras)} cameras; this policy needs {cfg.n_views} in the order {self.view_names}"
            )
        for name, cam in zip(self.view_names, cameras):
            img = np.asarray(cam.image_rgb)
            if img.ndim != 3 or img.shape[2] != 3 or img.shape[0] < 2 or img.shape[1] < 2:
                raise ValueError(f"camera '{name}': image_rgb has shape {img.shape}; pass (H, W, 3) RGB")
            if img.dtype != np.uint8:
                raise ValueError(f"camera '{name}': image_rgb has dtype {img.dtype}; pass uint8 RGB (0..255)")
            K = np.asarray(cam.K, dtype=np.float64)
            if K.shape != (3, 3) or not np.all(np.isfinite(K)):
                raise ValueError(f"camera '{name}': K must be a finite (3, 3) matrix, got {np.asarray(cam.K)!r}")
            if K[0, 0] <= 0 or K[1, 1] <= 0 or np.abs(K[2] - [0, 0, 1]).max() > 1e-9:
                raise ValueError(
                    f"camera '{name}': K={K.tolist()} is not a pinhole intrinsics matrix "
                    f"(need fx, fy > 0 and last row [0, 0, 1]); check the CameraInfo"
                )
            T_world_cam = _check_rigid(f"camera '{name}': T_world_cam", cam.T_world_cam)
            if name == "scene" and not self._warned_low_scene_camera:
                self._warn_if_scene_range_clipped(float(T_world_cam[2, 3]))
        _check_rigid("state.T_world_ee", state.T_world_ee)
        g = float(state.gripper)
        if not np.isfinite(g):
            raise ValueError(f"state.gripper = {state.gripper!r}; pass a finite value in [0, 1]")
        past = np.asarray(state.past_positions_world, dtype=np.float64)
        if past.shape != (cfg.mv_past_n, 3) or not np.all(np.isfinite(past)):
            raise ValueError(
                f"state.past_positions_world has shape {past.shape} (finite: "
                f"{bool(np.all(np.isfinite(past)))}); pass finite ({cfg.mv_past_n}, 3) positions, "
                f"oldest first (repeat the current position if unknown)"
            )

    def _warn_if_scene_range_clipped(self, cam_z_m: float) -> None:
        """PARA v4's sanity check: the static scene camera should look down on the whole height range.

        In adaptive mode the range is clipped as soon as ``cam_z - cam_margin_m < z_hi`` (``z_hi_k = cam_z -
        margin``), so that is the condition, not ``cam_z <= z_hi``. It works, but usually means a wrong TF frame (the
        camera link instead of the optical frame, a flipped z). In fixed mode nothing is clipped (voxels above the
        camera are masked), so the warning asks for the camera to be above ``z_hi`` itself. Once per policy.
        """
        cfg = self.config
        ceiling_m = cfg.z_hi_m + (cfg.cam_margin_m if cfg.z_range_mode == "adaptive" else 0.0)
        if cam_z_m >= ceiling_m:
            return
        self._warned_low_scene_camera = True
        if cfg.z_range_mode == "adaptive":
            z_hi_k = max(cam_z_m - cfg.cam_margin_m, cfg.z_lo_m + cfg.min_z_span_m)
            what = (
                f"below z_hi_m + cam_margin_m = {ceiling_m:.3f} m: its height range is clipped to "
                f"[{cfg.z_lo_m:.3f}, {z_hi_k:.3f}] m instead of [{cfg.z_lo_m:.3f}, {cfg.z_hi_m:.3f}] m"
            )
        else:
            what = f"not above z_hi_m = {cfg.z_hi_m:.3f} m: the upper height bins lie above it and are masked"
        warnings.warn(f"scene camera is at z = {cam_z_m:.3f} m, {what}; check the camera's TF", stacklevel=4)

    def preprocess(self, cameras: Sequence[CameraObservation], state: RobotState) -> V4Inputs:
        """Validated raw observations -> batched model inputs (B = 1) on the policy's device."""
        self._validate(cameras, state)
        S = self.config.img_size
        images, Ks, Ts = [], [], []
        for cam in cameras:
            if self.device_preprocess:  # uint8 up, then resized where the model runs: (3, S, S) float 0..255
                images.append(resize_on_device(cam.image_rgb, S, self.device))
                Ks.append(rescaled_intrinsics(cam.K, np.asarray(cam.image_rgb).shape[:2], S))
            else:
                img, K = resize_to_model_input(cam.image_rgb, cam.K, S)
                images.append(torch.from_numpy(img).to(self.device).permute(2, 0, 1))  # (3, S, S) uint8
                Ks.append(K)
            Ts.append(np.asarray(cam.T_world_cam, dtype=np.float64))
        x = torch.stack(images).float() / 255.0  # (N, 3, S, S)
        x = (x - self._mean) / self._std
        dev = self.device
        return V4Inputs(
            images=x.unsqueeze(0),  # (1, N, 3, S, S)
            K_img=torch.tensor(np.stack(Ks), dtype=torch.float32, device=dev).unsqueeze(0),  # (1, N, 3, 3)
            T_world_cam=torch.tensor(np.stack(Ts), dtype=torch.float32, device=dev).unsqueeze(0),  # (1, N, 4, 4)
            T_world_ee=torch.tensor(np.asarray(state.T_world_ee), dtype=torch.float32, device=dev).unsqueeze(0),
            gripper=torch.tensor([float(state.gripper)], dtype=torch.float32, device=dev),
            past_positions_world=torch.tensor(
                np.asarray(state.past_positions_world), dtype=torch.float32, device=dev
            ).unsqueeze(0),
        )

    # ---------------------------------------------------------------------------------------------- predict
    @torch.inference_mode()
    def predict(
        self,
        cameras: Sequence[CameraObservation],
        state: RobotState,
        stamp_s: float | None = None,
        fusion: ChunkFusion | None = None,
    ) -> PolicyOutput:
        """Observation -> decoded action chunk + visualisation data. Raises ValueError on bad input.

        ``stamp_s``: the observation time (s, any clock the caller keeps): the chunk's time base, which ``fused``
        decoding needs to match its steps with the earlier chunks'; ``fusion``: the memory of earlier chunks to fuse
        with and add to (default ``self.fusion``)."""
        t0 = time.perf_counter()
        inputs = self.preprocess(cameras, state)
        t1 = time.perf_counter()
        use_amp = self.dtype != "fp32"
        if self.compile_mode == "reduce-overhead":
            # CUDA graphs reuse their output memory from one replay to the next; torch asks inference loops to mark
            # each step. The previous prediction's backbone outputs (e.g. ``last_output.cls``) are invalid after it.
            # (Untested here: it needs a GPU.)
            torch.compiler.cudagraph_mark_step_begin()
        with torch.autocast(device_type=self.device.type, dtype=torch_dtype(self.dtype), enabled=use_amp):
            out = self.model(inputs)
        t_model = time.perf_counter()  # on CUDA the kernels may still run: their wait lands in "decode"
        if self.decoding.mode == "argmax":
            chunk = self.model.decode(out, refine=self.refine)[0]  # the kind's own decoding (ParaModel.decode)
        else:
            chunk = decode_chunk(
                self.config,
                out,
                self.decoding,
                refine=self.refine,
                start_xyz=np.asarray(state.T_world_ee, dtype=np.float64)[:3, 3],
                fusion=fusion if fusion is not None else self.fusion,
                stamp_s=stamp_s,
            )
        top_xyz, top_p, bounds = self.model.visualisation(out, self.config.viz_top_k)
        measures = None
        if self.model.has_voxel_volume:  # a voxel distribution to measure
            measures = step_confidence(
                self.config, out, chunk.positions_world, chunk.confidence, self.chunk_in_force, stamp_s
            )
        novelty_ratio = np.zeros(0)
        patch_features = getattr(out, "patch_features", None)
        if self.familiarity is not None and patch_features is not None:
            novelty_ratio = self.familiarity.ratios(self.familiarity.novelty(patch_features[0]))
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        t2 = time.perf_counter()
        self.last_output = out
        self.last_timing_s = {"preprocess": t1 - t0, "model": t_model - t1, "decode": t2 - t_model, "total": t2 - t0}
        return PolicyOutput(
            positions_world=chunk.positions_world,
            quaternions_xyzw=chunk.quaternions_xyzw,
            gripper=chunk.gripper,
            confidence=chunk.confidence,
            time_offsets_s=chunk.time_offsets_s,
            top_voxels_world=top_xyz,
            top_voxels_prob=top_p,
            voxel_bounds_world=bounds,
            novelty_ratio=novelty_ratio,
            **(
                {}
                if measures is None
                else dict(
                    entropy=measures.entropy,
                    chunk_agreement=measures.chunk_agreement,
                    view_agreement=measures.view_agreement,
                )
            ),
        )
