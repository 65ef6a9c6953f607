"""Does a checkpoint predict on this machine what it predicted on another? (library versions, devices)

Writes (``--write``) or compares against (``--reference``) the chunk a checkpoint predicts from fixed synthetic
inputs: positions, gripper and peak mass. Run ``--write`` where the package's pinned versions are installed, then
``--reference`` on the other machine (e.g. a GPU machine with its own torch / transformers) before training there:
a strict load proves the parameter names agree, the figures that the numerics do.

    python bench/check_reference_prediction.py --checkpoint checkpoints/pick_place --write ref.npz
    python bench/check_reference_prediction.py --checkpoint checkpoints/pick_place --reference ref.npz --device cuda
"""

from __future__ import annotations

import argparse
import platform
import sys

import numpy as np


def predict(checkpoint: str, device: str) -> dict:
    from para_core.data import synthetic as syn
    from para_core.model.policy import CameraObservation, Policy, RobotState

    policy = Policy.from_checkpoint(checkpoint, device=device, dtype="fp32", decoding="argmax")
    rng = np.random.default_rng(0)
    ee = np.array([0.3, 0.0, 0.2])
    cams = [
        CameraObservation(syn.random_image(rng, 256, 256), syn.intrinsics_from_fovy(256, 256, 38.0),
                          syn.scene_camera_pose()),
        CameraObservation(syn.random_image(rng, 256, 256), syn.intrinsics_from_fovy(256, 256, 58.0),
                          syn.wrist_camera_pose(ee)),
    ][: policy.config.n_views]  # fmt: skip
    T_ee = np.eye(4)
    T_ee[:3, :3] = syn.top_down_rotation()
    T_ee[:3, 3] = ee
    out = policy.predict(cams, RobotState(T_ee, 1.0, np.tile(ee, (policy.config.mv_past_n, 1))), stamp_s=0.0)
    return {"positions_world": out.positions_world, "gripper": out.gripper, "confidence": out.confidence}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--device", default="cpu")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", metavar="FILE.npz")
    g.add_argument("--reference", metavar="FILE.npz")
    args = p.parse_args(argv)
    import torch
    import transformers

    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {platform.machine()}, {args.device}")
    got = predict(args.checkpoint, args.device)
    if args.write:
        np.savez(args.write, **got)
        print(f"wrote {args.write}: positions {np.round(got['positions_world'], 4).tolist()}")
        return 0
    with np.load(args.reference, allow_pickle=False) as ref:
        worst_mm = 1000 * float(np.abs(ref["positions_world"] - got["positions_world"]).max())
        conf = float(np.abs(ref["confidence"] - got["confidence"]).max())
    print(f"max position difference {worst_mm:.4f} mm, max peak-mass difference {conf:.2e}")
    return 0 if worst_mm < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
