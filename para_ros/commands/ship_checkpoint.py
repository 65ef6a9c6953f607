"""Copy a finished ``para-train`` run's checkpoint into a shipped checkpoint folder with its recipe and curves.

``python -m para_ros.commands.ship_checkpoint --run RUN --out checkpoints/pick_place --data DIR --episodes N``: the
options of :func:`para_ros.sim.ship_checkpoint.ship_checkpoint`, which says what the folder holds.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from para_ros.sim.ship_checkpoint import ship_checkpoint


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m para_ros.commands.ship_checkpoint", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--run", required=True, help="para-train run directory")
    p.add_argument("--out", required=True, help="shipped checkpoint folder to (re)write")
    p.add_argument("--data", default="", help="the demonstrations folder (recorded in the recipe)")
    p.add_argument("--episodes", type=int, default=0, help="demonstrations recorded")
    p.add_argument("--trained-at", default="", help="git commit the training ran at (default: the current one)")
    p.add_argument(
        "--reproduce",
        default="",
        help="the command that reproduces it (default: scripts/train_pick_place with the run's preset)",
    )
    p.add_argument("--note", default="", help="a remark recorded in the recipe (e.g. why a run stopped early)")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    run, out = Path(args.run), Path(args.out)
    ship_checkpoint(
        run,
        out,
        episodes=args.episodes,
        trained_at=args.trained_at,
        reproduce=args.reproduce,
        note=args.note,
        data=args.data,
    )
    print(f"shipped {run / 'checkpoint'} -> {out} (recipe.json, metrics.jsonl, loss_curve.png)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
