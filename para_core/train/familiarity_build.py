"""A checkpoint's familiarity memory from episode files: the patch features of every frame, through the policy's own
preprocessing (``para_core.model.familiarity`` holds the memory and the limits)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import torch

from para_core.data.dataset import Episode
from para_core.model.familiarity import Familiarity, FamiliaritySettings, build_familiarity
from para_core.model.policy import CameraObservation, Policy, RobotState


def episode_patch_features(policy: Policy, episode: Episode, frame_stride: int = 1) -> Iterator[torch.Tensor]:
    """(N, F, h, w) patch features of every ``frame_stride``-th frame of ``episode``, views in the policy's order.
    ValueError when the episode lacks one of the policy's views."""
    missing = [v for v in policy.view_names if v not in episode.images]
    if missing:
        raise ValueError(
            f"the episode has views {sorted(episode.images)}, the policy needs {list(policy.view_names)} "
            f"(missing {missing})"
        )
    mv = policy.config.mv_past_n
    for t in range(0, len(episode.stamps_ns), frame_stride):
        cameras = [
            CameraObservation(episode.images[v][t], episode.K[v][t], episode.T_world_cam[v][t])
            for v in policy.view_names
        ]
        past = np.repeat(episode.T_world_ee[t][None, :3, 3], mv, axis=0)  # (mv_past_n, 3); not used by the features
        state = RobotState(episode.T_world_ee[t], float(episode.gripper[t]), past)
        inputs = policy.preprocess(cameras, state)
        with torch.no_grad():
            patches, _ = policy.model.patch_features(inputs.images, inputs.K_img, inputs.T_world_cam)
        yield patches[0].float().cpu()  # (N, F, h, w)


def build_from_episodes(
    checkpoint: Path,
    memory_episodes: Sequence[Path],
    heldout_episodes: Sequence[Path],
    settings: FamiliaritySettings,
    frame_stride: int = 1,
    progress: bool = True,
    command: str = "",
) -> Familiarity:
    """Load the checkpoint, remember the features of ``memory_episodes``, fit the limits on ``heldout_episodes``."""
    policy = Policy.from_checkpoint(checkpoint, device="cpu")
    if not hasattr(policy.model, "patch_features"):
        raise ValueError(f"model kind {policy.config.model_kind!r} exposes no patch features to remember")
    policy.set_familiarity(None)

    def bar(items, desc):
        if not progress:
            return items
        from tqdm import tqdm  # tqdm: loaded on first use

        return tqdm(items, desc=desc, unit="episode")

    def memory_frames():
        for path in bar(memory_episodes, "memory"):
            yield from episode_patch_features(policy, Episode.load(path), frame_stride)

    def heldout():
        for path in bar(heldout_episodes, "held out"):
            yield list(episode_patch_features(policy, Episode.load(path), frame_stride))

    return build_familiarity(
        memory_frames(),
        heldout(),
        policy.view_names,
        settings,
        model_id=policy.model_id,
        source={
            "checkpoint": str(checkpoint),
            "memory_episodes": len(memory_episodes),
            "frame_stride": int(frame_stride),
            "command": command,
        },
    )
