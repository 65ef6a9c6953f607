"""What the training-time augmentations cost per sample: ``EpisodeDataset[i]`` without and with them, interleaved.

Builds synthetic episodes of the model preset's size in a temporary directory and times sample loading with the
``train:`` augmentation fields of two recipes (default: the randomised recipe, which has only the colour jitter, and
the robust one, which turns every augmentation on), one torch thread, as in a DataLoader worker.

Usage::

    python bench/bench_augmentation.py [--preset pick_place] [--base config/train_pick_place_randomised.yaml]
        [--augmented config/train_pick_place_robust.yaml] [--samples 80] [--rounds 7]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
import yaml

from para_core.data import synthetic as syn
from para_core.data.dataset import EpisodeDataset
from para_core.model.config import PRESET_NAMES, V4Config
from para_core.train.trainer import TrainConfig

REPO = Path(__file__).resolve().parent.parent


def dataset_for(recipe: Path, episode_dirs, config: V4Config) -> EpisodeDataset:
    tc = TrainConfig.from_dict(yaml.safe_load(recipe.read_text()).get("train") or {})
    return EpisodeDataset(
        episode_dirs, config, augment=tc.augment, jitter_strength=tc.jitter_strength, augmentations=tc.augmentations
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", choices=PRESET_NAMES, default="pick_place")
    p.add_argument("--base", type=Path, default=REPO / "config/train_pick_place_randomised.yaml")
    p.add_argument("--augmented", type=Path, default=REPO / "config/train_pick_place_robust.yaml")
    p.add_argument("--samples", type=int, default=80, help="samples per timed round")
    p.add_argument("--rounds", type=int, default=7, help="interleaved rounds per recipe")
    args = p.parse_args()
    torch.set_num_threads(1)
    config = V4Config.preset(args.preset)
    with tempfile.TemporaryDirectory() as tmp:
        dirs = [
            syn.synthetic_episode(config, np.random.default_rng(i), n_frames=40, image_hw=(256, 256)).save(
                Path(tmp) / f"ep{i}"
            )
            for i in range(2)
        ]
        sets = {"base": dataset_for(args.base, dirs, config), "augmented": dataset_for(args.augmented, dirs, config)}
        torch.manual_seed(0)
        times: dict[str, list[float]] = {k: [] for k in sets}
        for _ in range(args.rounds):
            for name, ds in sets.items():
                t0 = time.perf_counter()
                for i in range(args.samples):
                    ds[(i * 7) % len(ds)]
                times[name].append((time.perf_counter() - t0) / args.samples * 1e3)
    print(f"preset {args.preset}, {len(config.view_names)} views of {config.img_size} px, one torch thread")
    for name, recipe in (("base", args.base), ("augmented", args.augmented)):
        v = times[name]
        print(f"  {name:9s} {recipe.name}: {np.median(v):.2f} ms/sample median, {min(v):.2f} min")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
