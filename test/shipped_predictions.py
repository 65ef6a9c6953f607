"""The shipped checkpoints' predictions on one fixed observation: written once to
``test/fixtures/shipped_checkpoint_predictions.json`` by the code of the time, and compared against by
``test_shipped_checkpoints`` so that a change to how a checkpoint loads (its config, its weights) cannot change
what it predicts unnoticed.

Write the fixture (only when the predictions are meant to change, e.g. a checkpoint is retrained)::

    PYTHONPATH=. python test/shipped_predictions.py --write
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import numpy as np
import torch

from para_core.data import synthetic as syn
from para_core.model.checkpoint import load_checkpoint
from para_core.model.policy import CameraObservation, Policy, RobotState

REPO = Path(__file__).resolve().parents[1]
FIXTURE = REPO / "test" / "fixtures" / "shipped_checkpoint_predictions.json"
COMMAND = "PYTHONPATH=. python test/shipped_predictions.py --write"


def shipped() -> list[Path]:
    return sorted(p for p in (REPO / "checkpoints").iterdir() if p.is_dir())


def fixed_observation(n_past: int) -> tuple[list[CameraObservation], RobotState]:
    """Two 256 px random-colour cameras (seed 0) at the simulator's scene / wrist poses, the tool top-down at
    (0.3, 0, 0.1) m, the gripper open, ``n_past`` past positions all there."""
    rng = np.random.default_rng(0)
    ee = np.array([0.3, 0.0, 0.1])
    cams = [
        CameraObservation(
            syn.random_image(rng, 256, 256), syn.intrinsics_from_fovy(256, 256, 38.0), syn.scene_camera_pose()
        ),
        CameraObservation(
            syn.random_image(rng, 256, 256), syn.intrinsics_from_fovy(256, 256, 58.0), syn.wrist_camera_pose(ee)
        ),
    ]
    T = np.eye(4)
    T[:3, :3] = syn.top_down_rotation()
    T[:3, 3] = ee
    return cams, RobotState(T, 1.0, np.tile(ee, (n_past, 1)))


def predict(checkpoint: Path) -> dict[str, list]:
    """The checkpoint's chunk on :func:`fixed_observation` (fp32 on the CPU): positions (T, 3) m, quaternions (T, 4),
    gripper (T,), confidence (T,)."""
    torch.manual_seed(0)
    model, cfg, _ = load_checkpoint(checkpoint)
    policy = Policy(model, cfg, torch.device("cpu"))
    cams, state = fixed_observation(cfg.mv_past_n)
    out = policy.predict(cams, state)
    return {
        "positions_world": out.positions_world.tolist(),
        "quaternions_xyzw": out.quaternions_xyzw.tolist(),
        "gripper": out.gripper.tolist(),
        "confidence": out.confidence.tolist(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--write", action="store_true", help=f"write {FIXTURE.relative_to(REPO)} (else print)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True).stdout.strip()
    data = {
        "made_by": COMMAND,
        "code_commit": commit,
        "checkpoints": {ck.name: predict(ck) for ck in shipped()},
    }
    text = json.dumps(data, indent=1, sort_keys=True) + "\n"
    if args.write:
        FIXTURE.write_text(text)
        print(f"wrote {FIXTURE}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
