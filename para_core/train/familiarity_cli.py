"""``para-train familiarity``: build a checkpoint's memory of its training features, so the robot can tell a scene it
never saw (an unseen object, a hand in the workspace) from one it knows (docs/confidence.md, "Familiarity").

Examples::

    para-train familiarity --checkpoint checkpoints/pick_place_robust --data data/pick_place_rig
    para-train familiarity --checkpoint runs/pick_v1/checkpoint --data episodes/ --heldout-fraction 0.25 --force

The episodes should be the checkpoint's training data (or more of the same kind). The last ``--heldout-fraction`` of
them (in name order) are left out of the memory and fit the limits, or ``--heldout EPISODES`` fit them (recordings of
your own rig in normal operation: tighter limits, which also stop at what the training data varied and your rig
does not). Writes ``familiarity.safetensors`` and
``familiarity.json`` into the checkpoint directory (or ``--out``); ``Policy.from_checkpoint`` then loads them and the
inference node checks every observation against them (its ``familiarity_check`` parameter).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from para_core.data.dataset import find_episode_dirs
from para_core.model.familiarity import FamiliaritySettings, has_familiarity
from para_core.model.hardware import configure_cpu_threads


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="para-train familiarity",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--checkpoint", required=True, help="checkpoint directory whose features to remember")
    p.add_argument("--data", nargs="+", required=True, help="episode directories or folders holding them")
    p.add_argument(
        "--heldout-fraction",
        type=float,
        default=0.2,
        help="share of the episodes (the last in name order) kept out of the memory to fit the limits (default 0.2)",
    )
    p.add_argument(
        "--heldout",
        nargs="+",
        default=None,
        help="fit the limits on these episodes instead (all of --data then goes into the memory): recordings of your "
        "own rig in normal operation give tighter limits than held-out training episodes drawn over a wider range "
        "(docs/confidence.md, 'Familiarity')",
    )
    p.add_argument("--frame-stride", type=int, default=1, help="use every n-th frame of each episode (default 1)")
    p.add_argument("--out", default=None, help="where to write the two files (default: the checkpoint directory)")
    p.add_argument("--force", action="store_true", help="replace a familiarity memory already there")
    d = FamiliaritySettings()
    p.add_argument("--memory-size", type=int, default=d.memory_size, help=f"patches kept per view ({d.memory_size})")
    p.add_argument("--candidates", type=int, default=d.candidates, help=f"patches drawn per view ({d.candidates})")
    p.add_argument(
        "--top-patches", type=int, default=d.top_patches, help=f"patches a view's novelty averages ({d.top_patches})"
    )
    p.add_argument(
        "--window-frames", type=int, default=d.window_frames, help=f"frames of the median ({d.window_frames})"
    )
    p.add_argument("--limit-quantile", type=float, default=d.limit_quantile, help=f"({d.limit_quantile})")
    p.add_argument("--limit-margin", type=float, default=d.limit_margin, help=f"({d.limit_margin})")
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--threads", default="auto", help="CPU threads: auto or a number (default auto)")
    p.add_argument("--no-progress", action="store_true")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        configure_cpu_threads(args.threads)
        settings = FamiliaritySettings(
            memory_size=args.memory_size,
            candidates=args.candidates,
            top_patches=args.top_patches,
            window_frames=args.window_frames,
            limit_quantile=args.limit_quantile,
            limit_margin=args.limit_margin,
            seed=args.seed,
        )
    except ValueError as exc:
        parser.error(str(exc))
    if not 0.0 < args.heldout_fraction < 1.0:
        parser.error(f"--heldout-fraction {args.heldout_fraction} must be between 0 and 1")
    if args.frame_stride < 1:
        parser.error(f"--frame-stride {args.frame_stride} must be at least 1")
    out = Path(args.out or args.checkpoint)
    if has_familiarity(out) and not args.force:
        parser.error(f"{out} already holds a familiarity memory; --force replaces it")
    try:
        episodes = find_episode_dirs(args.data)
    except (FileNotFoundError, ValueError) as exc:
        parser.error(str(exc))
    if args.heldout:
        try:
            heldout = find_episode_dirs(args.heldout)
        except (FileNotFoundError, ValueError) as exc:
            parser.error(f"--heldout: {exc}")
        overlap = sorted({str(p) for p in heldout} & {str(p) for p in episodes})
        if overlap:
            parser.error(f"--heldout episodes are also in --data (their novelty would be 0): {overlap[:3]}")
        if not episodes or not heldout:
            parser.error(f"found {len(episodes)} episode(s) in --data and {len(heldout)} in --heldout: need both")
        memory = episodes
    else:
        n_heldout = int(round(len(episodes) * args.heldout_fraction))
        if len(episodes) < 2 or n_heldout < 1 or n_heldout >= len(episodes):
            parser.error(
                f"found {len(episodes)} episode(s) in {args.data}: need at least 2, with --heldout-fraction leaving "
                f"some for the memory and some held out"
            )
        memory, heldout = episodes[: len(episodes) - n_heldout], episodes[len(episodes) - n_heldout :]
    from para_core.train.familiarity_build import build_from_episodes  # torch: loaded on first use

    try:
        familiarity = build_from_episodes(
            Path(args.checkpoint),
            memory,
            heldout,
            settings,
            frame_stride=args.frame_stride,
            progress=not args.no_progress,
            command=shlex.join(["para-train", "familiarity", *(sys.argv[1:] if argv is None else argv)]),
        )
    except ValueError as exc:
        print(f"para-train familiarity: {exc}", file=sys.stderr)
        return 2
    familiarity.save(out)
    src = familiarity.source
    for v in familiarity.view_names:
        print(
            f"  {v}: limit {familiarity.limits[v]:.3f} (held-out q{settings.limit_quantile:g} "
            f"{src['heldout_quantile'][v]:.3f}, max {src['heldout_max'][v]:.3f})"
        )
    print(
        f"para-train familiarity: {src['memory_frames']} frames in the memory, {src['heldout_episodes']} held-out "
        f"episodes ({src['heldout_frames']} frames) -> {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
