"""Synthetic observations for tests, demos and benchmarks: a YAM-like scene camera and a wrist camera over a table.

Nothing here is used by the model; it only makes plausible inputs (cameras that see the workspace box, a smooth
end-effector trajectory inside it) without a simulator.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from para_core.data.dataset import Episode
from para_core.model.config import V4Config
from para_core.model.geometry import look_at


def intrinsics_from_fovy(width: int, height: int, fovy_deg: float) -> np.ndarray:
    """Square-pixel pinhole intrinsics with the principal point at the image centre (MuJoCo camera model)."""
    f = (height / 2.0) / math.tan(math.radians(fovy_deg) / 2.0)
    return np.array([[f, 0.0, width / 2.0], [0.0, f, height / 2.0], [0.0, 0.0, 1.0]])


def scene_camera_pose(eye=(0.3, -0.55, 0.9), target=(0.3, 0.0, 0.05)) -> np.ndarray:
    """An oblique overhead scene camera, T_world_cam (4, 4) float64."""
    return look_at(torch.tensor(eye), torch.tensor(target)).numpy()


def wrist_camera_pose(ee_pos=(0.3, 0.0, 0.2), height_above_ee=0.05, tilt_m=0.05) -> np.ndarray:
    """A wrist-like camera a little above the EE, looking down and slightly forward."""
    eye = np.asarray(ee_pos, dtype=np.float64) + np.array([-tilt_m, 0.0, height_above_ee])
    target = np.asarray(ee_pos, dtype=np.float64) + np.array([0.1, 0.0, -0.2])
    return look_at(torch.tensor(eye), torch.tensor(target), up=torch.tensor([1.0, 0.0, 0.0])).numpy()


def top_down_rotation() -> np.ndarray:
    """The YAM's reachable top-down tool orientation: x=[-1,0,0], y=[0,1,0], z=[0,0,-1]."""
    return np.diag([-1.0, 1.0, -1.0])


def random_trajectory(config: V4Config, rng: np.random.Generator, n_steps: int | None = None):
    """A smooth EE trajectory inside the workspace box: positions (T, 3), rotations (T, 3, 3), gripper (T,)."""
    from scipy.spatial.transform import Rotation  # scipy: loaded on first use, not on import

    T = n_steps or config.n_window
    x0, x1 = config.workspace_x_m
    y0, y1 = config.workspace_y_m
    start = np.array([rng.uniform(0.2, 0.4), rng.uniform(-0.15, 0.15), rng.uniform(0.05, 0.15)])
    end = start + rng.uniform(-0.1, 0.1, size=3) * np.array([1.0, 1.0, 0.3])
    s = np.linspace(0.0, 1.0, T)[:, None]
    pos = start + s * (end - start)
    pos[:, 0] = np.clip(pos[:, 0], x0 + 0.05, x1 - 0.05)
    pos[:, 1] = np.clip(pos[:, 1], y0 + 0.05, y1 - 0.05)
    pos[:, 2] = np.clip(pos[:, 2], config.z_lo_m + 0.02, config.z_hi_m - 0.05)
    yaw = rng.uniform(-0.5, 0.5) * s[:, 0]
    rots = np.stack([top_down_rotation() @ Rotation.from_euler("z", a).as_matrix() for a in yaw])
    grip = (s[:, 0] < 0.5).astype(np.float64)
    return pos, rots, grip


def random_image(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """(H, W, 3) uint8 smooth random colours."""
    small = rng.integers(0, 256, size=(max(2, height // 16), max(2, width // 16), 3), dtype=np.uint8)
    import cv2  # cv2: loaded on first use, not on import

    return cv2.resize(small, (width, height), interpolation=cv2.INTER_LINEAR)


def _draw_point(
    image: np.ndarray,
    K: np.ndarray,
    T_world_cam: np.ndarray,
    point_world: np.ndarray,
    radius_m: float,
    colour: tuple[int, int, int],
) -> None:
    """Draw a filled disc at the projection of a world point (pixel-centre convention: cv2's integer coordinates are
    pixel centres, so continuous u maps to u - 0.5), radius = radius_m at that depth; nothing if behind the camera."""
    import cv2  # cv2: loaded on first use, not on import

    p_cam = np.linalg.inv(T_world_cam) @ np.append(point_world, 1.0)  # (4,)
    if p_cam[2] <= 1e-3:
        return
    u = K[0, 0] * p_cam[0] / p_cam[2] + K[0, 2]
    v = K[1, 1] * p_cam[1] / p_cam[2] + K[1, 2]
    r_px = max(1.5, K[0, 0] * radius_m / p_cam[2])
    H, W = image.shape[:2]
    if not (-r_px <= u <= W + r_px and -r_px <= v <= H + r_px):
        return
    shift = 4  # sub-pixel drawing: coordinates in 1/16 px
    centre = (int(round((u - 0.5) * 16)), int(round((v - 0.5) * 16)))
    cv2.circle(image, centre, int(round(r_px * 16)), colour, thickness=-1, lineType=cv2.LINE_AA, shift=shift)


def synthetic_episode(
    config: V4Config,
    rng: np.random.Generator,
    n_frames: int = 48,
    image_hw: tuple[int, int] | None = None,
    meta: dict | None = None,
):
    """A learnable synthetic demonstration (``para_core.data.dataset.Episode``) for tests and demos.

    The tool moves from a random start to a random goal inside the workspace (minimum-jerk profile over the first
    75 % of the episode, then holds), turning about the vertical by a random yaw, open (1.0) until it arrives and
    closed (0.0) after. Every view of ``config.view_names`` is rendered with cv2 on a dim, smooth random background:
    the GOAL as a red disc and the current tool position as a green disc, each drawn at its exact projection with a
    radius of 2 cm at its depth. The first view is a fixed oblique scene camera, every other view a wrist camera that
    follows the tool. Images are ``image_hw`` (default: 1.25 x img_size wide, 4:3), deliberately not the model's
    size, so the dataset's resize and exact K rescale are exercised. Stamps are at ``config.dataset_fps``.

    Because the goal is visible and the motion is a deterministic function of (current position, goal), the future
    chunk is predictable from the observation: a model trained on these episodes should drive its loss down.
    """
    from scipy.spatial.transform import Rotation  # scipy: loaded on first use, not on import

    if n_frames < 1:
        raise ValueError(f"synthetic_episode n_frames={n_frames}; use a positive integer")
    S = config.img_size
    H, W = image_hw or (int(round(S * 0.9375)), int(round(S * 1.25)))
    lo = np.array(
        [max(config.workspace_x_m[0] + 0.05, 0.2), max(config.workspace_y_m[0] + 0.05, -0.15), config.z_lo_m + 0.03]
    )
    hi = np.array(
        [
            min(config.workspace_x_m[1] - 0.05, 0.45),
            min(config.workspace_y_m[1] - 0.05, 0.15),
            min(config.z_hi_m - 0.05, config.z_lo_m + 0.2),
        ]
    )
    start, goal = rng.uniform(lo, hi), rng.uniform(lo, hi)
    yaw0, yaw1 = rng.uniform(-0.6, 0.6, size=2)
    tau = np.clip(np.arange(n_frames) / max(1.0, 0.75 * (n_frames - 1)), 0.0, 1.0)  # (n,)
    s = 10 * tau**3 - 15 * tau**4 + 6 * tau**5  # (n,) minimum jerk, 0 -> 1
    pos = start + s[:, None] * (goal - start)  # (n, 3)
    yaw = yaw0 + s * (yaw1 - yaw0)  # (n,)
    T_world_ee = np.tile(np.eye(4), (n_frames, 1, 1))  # (n, 4, 4)
    T_world_ee[:, :3, :3] = top_down_rotation() @ Rotation.from_euler("z", yaw[:, None]).as_matrix()
    T_world_ee[:, :3, 3] = pos
    gripper = (tau < 1.0).astype(np.float64)  # (n,)

    K = intrinsics_from_fovy(W, H, 60.0)
    background = (40 + random_image(rng, H, W) // 3).astype(np.uint8)
    images, Ks, Ts = {}, {}, {}
    for k, view in enumerate(config.view_names):
        frames, poses = [], []
        for i in range(n_frames):
            T_cam = scene_camera_pose() if k == 0 else wrist_camera_pose(pos[i], height_above_ee=0.12, tilt_m=0.08)
            img = background.copy()
            _draw_point(img, K, T_cam, goal, 0.02, (255, 40, 40))
            _draw_point(img, K, T_cam, pos[i], 0.02, (40, 255, 40))
            frames.append(img)
            poses.append(T_cam)
        images[view] = np.stack(frames)  # (n, H, W, 3)
        Ks[view] = np.repeat(K[None], n_frames, axis=0)  # (n, 3, 3)
        Ts[view] = np.stack(poses)  # (n, 4, 4)
    stamps = 1_700_000_000_000_000_000 + np.rint(np.arange(n_frames) * 1e9 / config.dataset_fps).astype(np.int64)
    return Episode(
        view_names=tuple(config.view_names),
        stamps_ns=stamps,
        images=images,
        K=Ks,
        T_world_cam=Ts,
        T_world_ee=T_world_ee,
        gripper=gripper,
        fps=config.dataset_fps,
        meta={"source": "para_core.data.synthetic.synthetic_episode", "goal_world": goal.tolist(), **(meta or {})},
    )
