"""Training-time augmentations that need no re-rendering: what the model is told about its cameras, and what it sees.

Three kinds, each off by default (``Augmentations()`` changes nothing and draws nothing from the RNG):

- **Told calibration error** (the model's camera pose and intrinsics only; never the images, never the labels):
  ``T_world_cam_told = T_world_cam @ T_err`` with ``T_err`` a rigid error in the camera's own optical frame (as
  ``bench/calibration_sensitivity.py`` applies it): a translation of length uniform in [0, max] metres along a
  uniformly random direction, and a rotation by an angle uniform in [0, max] degrees about a uniformly random axis.
  So the camera centre moves by exactly the translation's length and its orientation turns by exactly that angle.
  One pair of bounds for the views whose pose comes from a hand-eye calibration (``told_extrinsics_*``, default the
  scene view) and one for the views whose pose comes from the arm's kinematics and a CAD mount (``told_wrist_mount_*``,
  default the wrist view: the same composition in the camera's frame is a mount error). Intrinsics told:
  ``fx, fy`` scaled by ``1 + e`` with e uniform in [-f, f], ``cx, cy`` shifted by ``e_x * S, e_y * S`` pixels with
  e_x, e_y uniform in [-p, p] (S: the model's square input size).
- **Consistent zoom / crop** (images AND intrinsics, exactly): each view is resampled as the crop of side ``S / z``
  at origin ``(x0, y0)`` scaled back to S x S (z > 1: zoom in; z < 1: zoom out, the border outside the recorded image
  is black), and ``K' = [[z, 0, -z x0], [0, z, -z y0], [0, 0, 1]] @ K`` (docs/contracts.md: a crop shifts cx -= x0,
  a resize by z maps u -> z u). z is uniform in ``zoom_range``; the origin uniform between 0 and ``S - S / z`` on
  each axis, so a zoomed-in crop stays inside the image.
- **Appearance** (images only, after the colour jitter of ``EpisodeDataset``): a hue rotation (every pixel's HSV hue
  turned by the same angle, its value and saturation kept: a red cube and a grey table become a green cube and the same
  grey table), greyscale with a probability (ITU-R BT.601 luma in all three channels: colour gone, shape and shading
  kept), exposure (gain ``2 ** stops``), gamma (``x ** g`` on [0, 1]), Gaussian blur (sigma in pixels of the model's
  input, kernel radius ``ceil(3 sigma)``, mirrored border), Gaussian noise (sigma in uint8 levels, per pixel and
  channel), in that order, rounded once. The two colour ones are for objects and pads of colours the demonstrations
  never showed.

Random draws follow the dataset's colour-jitter rule: torch's global RNG, per view and sample, in a fixed order and
only for the options that are on (the run's seed makes them reproducible; DataLoader workers are seeded from it).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

# (field, lower bound, upper bound, unit words) of the scalar bounds
_SCALAR_BOUNDS = (
    ("told_extrinsics_error_m", 0.0, 0.2, "metres"),
    ("told_extrinsics_error_deg", 0.0, 20.0, "degrees"),
    ("told_wrist_mount_error_m", 0.0, 0.05, "metres"),
    ("told_wrist_mount_error_deg", 0.0, 10.0, "degrees"),
    ("told_focal_error_frac", 0.0, 0.3, "a fraction of the focal length"),
    ("told_principal_point_error_frac", 0.0, 0.2, "a fraction of the image size"),
    ("grey_probability", 0.0, 1.0, "a probability per view and sample"),
)
# (field, lower bound, upper bound, identity range, unit words) of the (low, high) ranges
_RANGE_BOUNDS = (
    ("zoom_range", 0.5, 2.0, (1.0, 1.0), "a scale factor (1 = unchanged)"),
    ("hue_shift_range_deg", -180.0, 180.0, (0.0, 0.0), "degrees of hue"),
    ("exposure_range_stops", -3.0, 3.0, (0.0, 0.0), "stops (gain 2 ** stops)"),
    ("gamma_range", 0.25, 4.0, (1.0, 1.0), "a gamma exponent (1 = unchanged)"),
    ("blur_sigma_range_px", 0.0, 10.0, (0.0, 0.0), "pixels of the model's input"),
    ("noise_sigma_range_levels", 0.0, 64.0, (0.0, 0.0), "uint8 levels"),
)
VIEW_LIST_FIELDS = ("told_extrinsics_views", "told_wrist_mount_views", "told_intrinsics_views")


@dataclass(frozen=True)
class Augmentations:
    """The training-time augmentations of ``EpisodeDataset`` (module docstring); every default is off.

    Args:
        told_extrinsics_error_m: bound of the told pose's translation error of ``told_extrinsics_views``, metres
            (a length, uniform in [0, bound], random direction).
        told_extrinsics_error_deg: bound of its rotation error, degrees (uniform in [0, bound], random axis).
        told_extrinsics_views: views given that error (a hand-eye calibrated camera), default the scene view.
        told_wrist_mount_error_m, told_wrist_mount_error_deg: the same for ``told_wrist_mount_views`` (default the
            wrist view: a mount that differs from its CAD value, composed in the camera's own frame).
        told_focal_error_frac: the told fx, fy are scaled by 1 + e, e uniform in [-bound, bound].
        told_principal_point_error_frac: the told cx, cy are shifted by e * S pixels, e uniform in [-bound, bound].
        told_intrinsics_views: views given the intrinsics error, default the scene view.
        zoom_range: (low, high) zoom factor of the consistent zoom / crop (images and K), every view.
        hue_shift_range_deg: (low, high) hue rotation, degrees (HSV hue; value and saturation kept).
        grey_probability: probability that a view of a sample is turned to greyscale (BT.601 luma).
        exposure_range_stops: (low, high) exposure change, stops.
        gamma_range: (low, high) gamma exponent.
        blur_sigma_range_px: (low, high) Gaussian blur sigma, pixels of the model's input.
        noise_sigma_range_levels: (low, high) Gaussian noise sigma, uint8 levels.
    """

    told_extrinsics_error_m: float = 0.0
    told_extrinsics_error_deg: float = 0.0
    told_extrinsics_views: tuple[str, ...] = ("scene",)
    told_wrist_mount_error_m: float = 0.0
    told_wrist_mount_error_deg: float = 0.0
    told_wrist_mount_views: tuple[str, ...] = ("wrist",)
    told_focal_error_frac: float = 0.0
    told_principal_point_error_frac: float = 0.0
    told_intrinsics_views: tuple[str, ...] = ("scene",)
    zoom_range: tuple[float, float] = (1.0, 1.0)
    hue_shift_range_deg: tuple[float, float] = (0.0, 0.0)
    grey_probability: float = 0.0
    exposure_range_stops: tuple[float, float] = (0.0, 0.0)
    gamma_range: tuple[float, float] = (1.0, 1.0)
    blur_sigma_range_px: tuple[float, float] = (0.0, 0.0)
    noise_sigma_range_levels: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self) -> None:
        problem = augmentation_problem(self.to_dict())
        if problem is not None:
            name, value, rule = problem
            raise ValueError(f"augmentation {name} = {value!r} is invalid: {rule}")
        for name in VIEW_LIST_FIELDS:
            object.__setattr__(self, name, tuple(str(v) for v in getattr(self, name)))
        for name, *_ in _RANGE_BOUNDS:
            object.__setattr__(self, name, tuple(float(v) for v in getattr(self, name)))
        for name, *_ in _SCALAR_BOUNDS:
            object.__setattr__(self, name, float(getattr(self, name)))

    @classmethod
    def from_mapping(cls, data: dict[str, Any]) -> Augmentations:
        """The augmentation fields of a mapping (e.g. ``TrainConfig.to_dict()``); other keys are ignored."""
        return cls(**{k: data[k] for k in field_names() if k in data})

    def to_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    # ------------------------------------------------------------------------------------------ what is on
    @property
    def told_extrinsics_on(self) -> bool:
        return self.told_extrinsics_error_m > 0 or self.told_extrinsics_error_deg > 0

    @property
    def told_wrist_mount_on(self) -> bool:
        return self.told_wrist_mount_error_m > 0 or self.told_wrist_mount_error_deg > 0

    @property
    def told_intrinsics_on(self) -> bool:
        return self.told_focal_error_frac > 0 or self.told_principal_point_error_frac > 0

    def _range_on(self, name: str) -> bool:
        identity = next(ident for n, _, _, ident, _ in _RANGE_BOUNDS if n == name)
        return tuple(getattr(self, name)) != identity

    @property
    def zoom_on(self) -> bool:
        return self._range_on("zoom_range")

    @property
    def colour_on(self) -> bool:
        """A hue rotation or greyscale is on (part of the appearance)."""
        return self._range_on("hue_shift_range_deg") or self.grey_probability > 0

    @property
    def appearance_on(self) -> bool:
        return self.colour_on or any(
            self._range_on(n)
            for n in ("exposure_range_stops", "gamma_range", "blur_sigma_range_px", "noise_sigma_range_levels")
        )

    @property
    def active(self) -> bool:
        return (
            self.told_extrinsics_on or self.told_wrist_mount_on or self.told_intrinsics_on or self.zoom_on
        ) or self.appearance_on

    def record(self) -> dict[str, Any]:
        """The options that are on (JSON-able), for a checkpoint's record of how it was trained; {} when none."""
        on = {}
        if self.told_extrinsics_on:
            on.update({k: v for k, v in self.to_dict().items() if k.startswith("told_extrinsics_")})
        if self.told_wrist_mount_on:
            on.update({k: v for k, v in self.to_dict().items() if k.startswith("told_wrist_mount_")})
        if self.told_intrinsics_on:
            on.update(
                {
                    k: getattr(self, k)
                    for k in ("told_focal_error_frac", "told_principal_point_error_frac", "told_intrinsics_views")
                }
            )
        for name, *_ in _RANGE_BOUNDS:
            if self._range_on(name):
                on[name] = getattr(self, name)
        if self.grey_probability > 0:
            on["grey_probability"] = self.grey_probability
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in on.items()}

    def check_views(self, view_names) -> None:
        """Every view named by an option that is on must be one of the model's views."""
        view_names = tuple(view_names)
        lists = (
            ("told_extrinsics_views", self.told_extrinsics_on),
            ("told_wrist_mount_views", self.told_wrist_mount_on),
            ("told_intrinsics_views", self.told_intrinsics_on),
        )
        for name, on in lists:
            unknown = [v for v in getattr(self, name) if v not in view_names]
            if on and unknown:
                raise ValueError(
                    f"augmentation {name} = {list(getattr(self, name))} is invalid: {unknown} are not views of the "
                    f"model (its views are {list(view_names)}); list views from those"
                )
        if self.told_extrinsics_on and self.told_wrist_mount_on:
            both = sorted(set(self.told_extrinsics_views) & set(self.told_wrist_mount_views))
            if both:
                raise ValueError(
                    f"augmentation told_wrist_mount_views = {list(self.told_wrist_mount_views)} is invalid: {both} "
                    f"is also in told_extrinsics_views; give each view one kind of pose error"
                )


def field_names() -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(Augmentations))


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def augmentation_problem(values: dict[str, Any]) -> tuple[str, Any, str] | None:
    """The first invalid augmentation field of ``values`` as (name, value, rule), or None (absent fields: defaults)."""
    for name, low, high, unit in _SCALAR_BOUNDS:
        value = values.get(name, 0.0)
        if not _is_number(value) or not low <= value <= high:
            return name, value, f"use a number within [{low:g}, {high:g}] ({unit}; 0 = off)"
    for name, low, high, identity, unit in _RANGE_BOUNDS:
        value = values.get(name, identity)
        if isinstance(value, (str, bytes)) or not hasattr(value, "__len__") or len(value) != 2:
            return name, value, f"use a (low, high) pair, e.g. {list(identity)} (off)"
        lo, hi = value
        if not (_is_number(lo) and _is_number(hi)):
            return name, value, f"use two finite numbers (low, high), {unit}"
        if lo > hi:
            return name, value, f"the range is inverted (low {lo:g} > high {hi:g}); give (low, high) with low <= high"
        if lo < low or hi > high:
            return name, value, f"use a range within [{low:g}, {high:g}] ({unit}; {list(identity)} = off)"
    for name in VIEW_LIST_FIELDS:
        value = values.get(name, ())
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            return name, value, 'use a list of view names, e.g. ["scene"]'
        if not all(isinstance(v, str) and v for v in value):
            return name, value, "use non-empty view names"
    return None


# ================================================================================================== the draws
@dataclass
class AugmentationDraw:
    """What one sample gets, per view (N views, in the model's order): identity where an option is off."""

    T_cam_told: np.ndarray  # (N, 4, 4) float64: T_world_cam_told = T_world_cam @ T_cam_told
    focal_scale: np.ndarray  # (N,) told fx, fy multiplier
    principal_shift_px: np.ndarray  # (N, 2) told (cx, cy) shift, pixels
    zoom: np.ndarray  # (N,) zoom factor z of the consistent zoom / crop
    crop_origin_px: np.ndarray  # (N, 2) (x0, y0) of the crop in the model-size image, pixels
    exposure_gain: np.ndarray  # (N,)
    gamma: np.ndarray  # (N,)
    blur_sigma_px: np.ndarray  # (N,)
    noise_sigma_levels: np.ndarray  # (N,)
    hue_shift_deg: np.ndarray | None = None  # (N,) hue rotation, degrees; None: zeros
    grey: np.ndarray | None = None  # (N,) bool, the views turned to greyscale; None: none

    @classmethod
    def identity(cls, n: int) -> AugmentationDraw:
        """What ``n`` views get with every option off: nothing changes."""
        return cls(
            T_cam_told=np.tile(np.eye(4), (n, 1, 1)),
            focal_scale=np.ones(n),
            principal_shift_px=np.zeros((n, 2)),
            zoom=np.ones(n),
            crop_origin_px=np.zeros((n, 2)),
            exposure_gain=np.ones(n),
            gamma=np.ones(n),
            blur_sigma_px=np.zeros(n),
            noise_sigma_levels=np.zeros(n),
        )

    def __post_init__(self) -> None:
        n = len(self.zoom)
        self.hue_shift_deg = np.zeros(n) if self.hue_shift_deg is None else np.asarray(self.hue_shift_deg, float)
        self.grey = np.zeros(n, dtype=bool) if self.grey is None else np.asarray(self.grey, dtype=bool)


def _uniform(n: int, low: float, high: float) -> np.ndarray:
    """(n,) float64 uniform in [low, high] from torch's global RNG."""
    import torch  # torch: loaded on first use, not on import

    return low + (high - low) * torch.rand(n, dtype=torch.float64).numpy()


def _unit_vectors(n: int) -> np.ndarray:
    """(n, 3) directions uniform on the sphere (normalised Gaussians) from torch's global RNG."""
    import torch  # torch: loaded on first use, not on import

    v = torch.randn(n, 3, dtype=torch.float64).numpy()  # (n, 3)
    norm = np.linalg.norm(v, axis=1, keepdims=True)  # (n, 1)
    return np.where(norm > 1e-12, v / np.maximum(norm, 1e-12), np.array([1.0, 0.0, 0.0]))


def axis_angle_matrix(axis: np.ndarray, angle_rad: float) -> np.ndarray:
    """(3, 3) rotation by ``angle_rad`` about the unit ``axis`` (Rodrigues)."""
    x, y, z = axis
    Kx = np.array([[0.0, -z, y], [z, 0.0, -x], [-y, x, 0.0]])
    return np.eye(3) + math.sin(angle_rad) * Kx + (1.0 - math.cos(angle_rad)) * (Kx @ Kx)


def rigid_errors(n: int, max_translation_m: float, max_rotation_deg: float) -> np.ndarray:
    """(n, 4, 4) rigid errors: translation length uniform in [0, max] along a random direction, rotation angle
    uniform in [0, max] about a random axis (draw order: lengths, directions, angles, axes)."""
    T = np.tile(np.eye(4), (n, 1, 1))  # (n, 4, 4)
    if max_translation_m > 0:
        T[:, :3, 3] = _uniform(n, 0.0, max_translation_m)[:, None] * _unit_vectors(n)
    if max_rotation_deg > 0:
        angles = np.radians(_uniform(n, 0.0, max_rotation_deg))  # (n,)
        axes = _unit_vectors(n)  # (n, 3)
        T[:, :3, :3] = np.stack([axis_angle_matrix(a, t) for a, t in zip(axes, angles)])
    return T


def draw(aug: Augmentations, view_names, img_size: int) -> AugmentationDraw:
    """One sample's augmentation parameters for views ``view_names`` (torch's global RNG, fixed order, only for the
    options that are on)."""
    view_names = tuple(view_names)
    n = len(view_names)
    S = float(img_size)
    d = AugmentationDraw.identity(n)
    for on, names, m, deg in (
        (aug.told_extrinsics_on, aug.told_extrinsics_views, aug.told_extrinsics_error_m, aug.told_extrinsics_error_deg),
        (
            aug.told_wrist_mount_on,
            aug.told_wrist_mount_views,
            aug.told_wrist_mount_error_m,
            aug.told_wrist_mount_error_deg,
        ),
    ):
        if on:
            idx = [k for k, v in enumerate(view_names) if v in names]
            d.T_cam_told[idx] = rigid_errors(len(idx), m, deg)
    if aug.told_intrinsics_on:
        idx = [k for k, v in enumerate(view_names) if v in aug.told_intrinsics_views]
        f, p = aug.told_focal_error_frac, aug.told_principal_point_error_frac
        d.focal_scale[idx] = 1.0 + _uniform(len(idx), -f, f)
        d.principal_shift_px[idx] = S * _uniform(2 * len(idx), -p, p).reshape(-1, 2)
    if aug.zoom_on:
        d.zoom = _uniform(n, *aug.zoom_range)
        span = S - S / d.zoom  # (n,) >= 0 zoomed in, < 0 zoomed out
        d.crop_origin_px = _uniform(2 * n, 0.0, 1.0).reshape(n, 2) * span[:, None]
    if aug.appearance_on:
        d.exposure_gain = 2.0 ** _uniform(n, *aug.exposure_range_stops)
        d.gamma = _uniform(n, *aug.gamma_range)
        d.blur_sigma_px = _uniform(n, *aug.blur_sigma_range_px)
        d.noise_sigma_levels = _uniform(n, *aug.noise_sigma_range_levels)
        # the colour options draw after the others, and only when on: a recipe without them draws as before
        if aug._range_on("hue_shift_range_deg"):
            d.hue_shift_deg = _uniform(n, *aug.hue_shift_range_deg)
        if aug.grey_probability > 0:
            d.grey = _uniform(n, 0.0, 1.0) < aug.grey_probability
    return d


# ============================================================================================ applying draws
def told_poses(T_world_cam: np.ndarray, d: AugmentationDraw) -> np.ndarray:
    """(N, 4, 4) the poses the model is told: ``T_world_cam @ T_cam_told`` per view."""
    return np.einsum("nij,njk->nik", T_world_cam, d.T_cam_told)


def zoom_matrix(zoom: float, crop_origin_px) -> np.ndarray:
    """(3, 3) pixel map of the zoom / crop, ``u' = zoom * (u - x0)`` (pixel-centre convention), so ``K' = A @ K``."""
    x0, y0 = crop_origin_px
    return np.array([[zoom, 0.0, -zoom * x0], [0.0, zoom, -zoom * y0], [0.0, 0.0, 1.0]])


def _linear_taps(n_out: int, n_in: int, zoom: float, origin_px: float):
    """Bilinear taps of one axis: output pixel o (centre o + 0.5) reads the input at u = (o + 0.5) / zoom + origin.
    -> (indices p0, p1 into the input padded by one black pixel each side, weights w0, w1), each (n_out,)."""
    s = (np.arange(n_out) + 0.5) / zoom + origin_px - 0.5  # (n_out,) source position, integer-centred
    i0 = np.floor(s)
    w1 = (s - i0).astype(np.float32)
    p0 = np.clip(i0.astype(np.int64) + 1, 0, n_in + 1)  # +1: the padding; clipped taps read black
    p1 = np.clip(i0.astype(np.int64) + 2, 0, n_in + 1)
    return p0, p1, 1.0 - w1, w1


def zoom_image(image_rgb: np.ndarray, zoom: float, crop_origin_px) -> np.ndarray:
    """(H, W, 3) uint8 -> (H, W, 3) uint8 resampled by ``zoom_matrix`` (bilinear, separable; black outside the
    image). Plain numpy: no thread pool beside the training process's own."""
    x0, y0 = crop_origin_px
    H, W = image_rgb.shape[:2]
    padded = np.pad(image_rgb.astype(np.float32), ((1, 1), (1, 1), (0, 0)))  # (H + 2, W + 2, 3), black ring
    r0, r1, rw0, rw1 = _linear_taps(H, H, zoom, y0)
    c0, c1, cw0, cw1 = _linear_taps(W, W, zoom, x0)
    rows = rw0[:, None, None] * padded[r0] + rw1[:, None, None] * padded[r1]  # (H, W + 2, 3)
    out = cw0[None, :, None] * rows[:, c0] + cw1[None, :, None] * rows[:, c1]  # (H, W, 3)
    return np.rint(np.clip(out, 0.0, 255.0)).astype(np.uint8)


def told_intrinsics(K_img: np.ndarray, d: AugmentationDraw) -> np.ndarray:
    """(N, 3, 3) intrinsics after the exact zoom / crop and then the told error (fx, fy scaled; cx, cy shifted)."""
    K = np.einsum("nij,njk->nik", np.stack([zoom_matrix(z, o) for z, o in zip(d.zoom, d.crop_origin_px)]), K_img)
    K = K.copy()
    K[:, 0, 0] *= d.focal_scale
    K[:, 1, 1] *= d.focal_scale
    K[:, :2, 2] += d.principal_shift_px
    return K


def gaussian_kernel_1d(sigma_px: float) -> np.ndarray:
    """(2r + 1,) normalised Gaussian taps, r = ceil(3 sigma)."""
    r = max(1, int(math.ceil(3.0 * sigma_px)))
    x = np.arange(-r, r + 1, dtype=np.float64)
    k = np.exp(-0.5 * (x / sigma_px) ** 2)
    return k / k.sum()


def blur_image(image_hwc: np.ndarray, sigma_px: float) -> np.ndarray:
    """(H, W, C) float32 -> float32 blurred by a Gaussian of ``sigma_px`` (``gaussian_kernel_1d``, separable; mirrored
    border, the edge pixel not repeated). Plain numpy: no thread pool beside the training process's own."""
    taps = gaussian_kernel_1d(sigma_px).astype(np.float32)  # (2r + 1,)
    r = taps.size // 2
    H, W = image_hwc.shape[:2]
    padded = np.pad(image_hwc, ((r, r), (r, r), (0, 0)), mode="reflect")  # (H + 2r, W + 2r, C)
    rows = sum(t * padded[j : j + H] for j, t in enumerate(taps))  # (H, W + 2r, C)
    return sum(t * rows[:, j : j + W] for j, t in enumerate(taps)).astype(np.float32)  # (H, W, C)


def rotate_hue(image_hwc: np.ndarray, degrees: float) -> np.ndarray:
    """(H, W, 3) float RGB -> float32, every pixel's HSV hue turned by ``degrees`` with its value (max channel) and
    chroma (max - min) kept; a grey pixel (chroma 0) is unchanged."""
    x = image_hwc.astype(np.float32)
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    hi, lo = x.max(axis=-1), x.min(axis=-1)  # (H, W)
    chroma = hi - lo
    c = np.where(chroma > 0, chroma, 1.0)
    hue = np.where(hi == r, ((g - b) / c) % 6.0, np.where(hi == g, (b - r) / c + 2.0, (r - g) / c + 4.0))  # sextants
    hue = (hue + np.float32(degrees / 60.0)) % 6.0
    # channel n of (R, G, B) = (5, 3, 1): value - chroma * clamp(min(k, 4 - k), 0, 1), k = (n + hue) mod 6
    out = [hi - chroma * np.clip(np.minimum(k, 4.0 - k), 0.0, 1.0) for k in ((n + hue) % 6.0 for n in (5.0, 3.0, 1.0))]
    return np.stack(out, axis=-1).astype(np.float32)


LUMA_BT601 = np.array([0.299, 0.587, 0.114], dtype=np.float32)  # R, G, B weights of greyscale (OpenCV's RGB2GRAY)


def apply_appearance(images, d: AugmentationDraw):
    """Hue, greyscale, exposure, gamma, blur, noise on (N, 3, S, S) uint8 torch images -> uint8 (module docstring
    order); an identity step (hue 0, colour kept, gain 1, gamma 1, sigma 0) is skipped, which leaves its result
    unchanged."""
    import torch  # torch: loaded on first use, not on import

    n = images.shape[0]
    x = images.permute(0, 2, 3, 1).numpy().astype(np.float32)  # (N, S, S, 3) levels 0..255
    for k in range(n):
        if d.hue_shift_deg[k] != 0.0:
            x[k] = rotate_hue(x[k], float(d.hue_shift_deg[k]))
        if d.grey[k]:
            x[k] = (x[k] @ LUMA_BT601)[..., None]  # (S, S, 1) -> broadcast to all three channels
        if d.exposure_gain[k] != 1.0:
            x[k] = np.clip(x[k] * np.float32(d.exposure_gain[k]), 0.0, 255.0)
        if d.gamma[k] != 1.0:
            x[k] = 255.0 * np.power(x[k] / 255.0, np.float32(d.gamma[k]))
        if d.blur_sigma_px[k] > 1e-3:
            x[k] = blur_image(x[k], float(d.blur_sigma_px[k]))
    if np.any(d.noise_sigma_levels > 0):
        noise = torch.randn(n, 3, *x.shape[1:3]).permute(0, 2, 3, 1).numpy()  # (N, S, S, 3) unit Gaussian
        x += d.noise_sigma_levels.astype(np.float32)[:, None, None, None] * noise
    out = np.rint(np.clip(x, 0.0, 255.0)).astype(np.uint8)  # (N, S, S, 3)
    return torch.from_numpy(out).permute(0, 3, 1, 2).contiguous()  # (N, 3, S, S) uint8
