"""Accuracy of the hand-eye solver on synthetic scenes with known truth (ROS-free).

For each case (eye-to-hand, eye-in-hand), number of poses and pixel noise, solves ``--seeds`` random scenes (board
corners projected with cv2.projectPoints from the truth of ``test/calibration_fixtures.py``, 640 x 480, fx = 600,
board 0.4-0.6 m away, tilts up to 30 deg, Gaussian pixel noise) and prints the median and worst camera-pose error
of the closed-form guess and of the refined solution. Usage:
    python bench/bench_calibration.py [--seeds 20] [--poses 8 15 20] [--noise 0.1 0.3 0.5]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "test"))  # the synthetic scenes the tests use

from calibration_fixtures import (  # noqa: E402
    SPEC,
    T_BASE_BOARD,
    T_BASE_CAM,
    T_FLANGE_BOARD,
    T_FLANGE_CAM,
    synthetic_samples,
    transform_error,
)

from para_core.calibration.handeye import solve_eye_in_hand, solve_eye_to_hand  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=20, help="random scenes per setting (default 20)")
    parser.add_argument("--poses", type=int, nargs="+", default=[8, 15, 20], help="poses per calibration")
    parser.add_argument("--noise", type=float, nargs="+", default=[0.1, 0.3, 0.5], help="pixel noise sigma per axis")
    args = parser.parse_args(argv)
    cases = [
        ("eye_to_hand", solve_eye_to_hand, T_BASE_CAM, T_FLANGE_BOARD),
        ("eye_in_hand", solve_eye_in_hand, T_FLANGE_CAM, T_BASE_BOARD),
    ]
    print(
        f"{'case':12s} {'poses':>5s} {'noise':>5s} | camera error, median / worst over {args.seeds} scenes: "
        "closed form mm, deg | refined mm, deg | refined rms px"
    )
    for method, solve, T_cam_truth, _ in cases:
        for n_poses in args.poses:
            for noise in args.noise:
                init, refined, rms = [], [], []
                for seed in range(args.seeds):
                    result = solve(synthetic_samples(method, n_poses, noise, seed=1000 + seed), SPEC)
                    init.append(transform_error(result.T_parent_cam_initial, T_cam_truth))
                    refined.append(transform_error(result.T_parent_cam, T_cam_truth))
                    rms.append(result.reprojection_rms_px)
                init, refined = np.array(init), np.array(refined)  # (S, 2) mm, deg
                print(
                    f"{method:12s} {n_poses:5d} {noise:5.2f} | "
                    f"{np.median(init[:, 0]):5.2f}/{init[:, 0].max():5.2f} mm {np.median(init[:, 1]):5.3f}/"
                    f"{init[:, 1].max():5.3f} deg | {np.median(refined[:, 0]):5.2f}/{refined[:, 0].max():5.2f} mm "
                    f"{np.median(refined[:, 1]):5.3f}/{refined[:, 1].max():5.3f} deg | {np.median(rms):5.3f} px",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
