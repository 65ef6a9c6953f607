"""How a checkpoint's familiarity memory judges recorded episodes, condition by condition, offline.

    python bench/familiarity_conditions.py --checkpoint checkpoints/pick_place_robust \
        nominal=data/nominal blue_cube=data/blue dim=data/dim [--out runs/familiarity/conditions.json]

Each NAME=FOLDER is a set of episodes (``para-sim demos`` writes them; recordings converted with ``para-bag
extract`` too). Every frame goes through the policy's preprocessing and backbone, and through the inference node's
own check (``para_ros.inference.familiarity_check.FamiliarityCheck``, the memory's window), as if the node saw the
episode frame by frame. Prints per condition: the episodes with at least one withheld frame, the share of frames
withheld, the first withheld frame's time (median over the episodes that have one), and each view's windowed novelty
ratio (median and max). ROS-free; no DDS.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
from pathlib import Path

import numpy as np

from para_core.data.dataset import Episode, find_episode_dirs
from para_core.model.hardware import configure_cpu_threads


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 2)[2])
    p.add_argument("conditions", nargs="+", help="NAME=FOLDER of episodes")
    p.add_argument("--checkpoint", required=True, help="checkpoint directory holding familiarity.safetensors")
    p.add_argument("--max-episodes", type=int, default=0, help="per condition (0 = all)")
    p.add_argument("--out", default="", help="optional JSON of the figures")
    p.add_argument("--threads", default="auto")
    args = p.parse_args(argv)
    named = []
    for item in args.conditions:
        name, sep, folder = item.partition("=")
        if not sep or not name or not folder:
            p.error(f"{item!r}: give NAME=FOLDER")
        named.append((name, folder))
    configure_cpu_threads(args.threads)
    from para_core.model.policy import Policy
    from para_core.train.familiarity_build import episode_patch_features
    from para_ros.inference.familiarity_check import FamiliarityCheck

    policy = Policy.from_checkpoint(args.checkpoint, device="cpu")
    memory = policy.familiarity
    if memory is None:
        p.error(f"{args.checkpoint} holds no familiarity memory (para-train familiarity builds one)")
    views = policy.view_names
    print(f"# {args.checkpoint}: limits " + ", ".join(f"{v} {memory.limits[v]:.3f}" for v in views))
    print(f"# {platform.processor() or platform.machine()}, window {memory.settings.window_frames} frames")
    results = {}
    for name, folder in named:
        dirs = find_episode_dirs([folder])
        if args.max_episodes:
            dirs = dirs[: args.max_episodes]
        flagged_eps, frames, withheld, first_s, medians = 0, 0, 0, [], []
        for d in dirs:
            ep = Episode.load(d)
            check = FamiliarityCheck()
            t0 = ep.stamps_ns[0]
            first = None
            for t, feats in enumerate(episode_patch_features(policy, ep)):
                problem = check.check(views, memory.ratios(memory.novelty(feats)), memory.settings.window_frames)
                medians.append(check.last_medians.copy())
                frames += 1
                if problem is not None:
                    withheld += 1
                    if first is None:
                        first = (ep.stamps_ns[t] - t0) / 1e9
            if first is not None:
                flagged_eps += 1
                first_s.append(first)
        m = np.stack(medians)  # (frames, N)
        row = {
            "episodes": len(dirs),
            "episodes_withheld": flagged_eps,
            "frames_withheld_share": withheld / max(frames, 1),
            "first_withheld_median_s": float(np.median(first_s)) if first_s else None,
            "ratio_median": {v: float(np.median(m[:, i])) for i, v in enumerate(views)},
            "ratio_max": {v: float(m[:, i].max()) for i, v in enumerate(views)},
        }
        results[name] = row
        first_txt = f"{row['first_withheld_median_s']:.1f} s" if first_s else "-"
        ratios = ", ".join(f"{v} {row['ratio_median'][v]:.2f} / {row['ratio_max'][v]:.2f}" for v in views)
        print(
            f"{name:12s} episodes withheld {flagged_eps}/{len(dirs)}, frames {100 * row['frames_withheld_share']:.1f} %, "
            f"first at {first_txt}; ratio median / max: {ratios}",
            flush=True,
        )
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
