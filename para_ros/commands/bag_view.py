"""``para-bag view BAG --out FILE.rrd``'s options: a recording written as a rerun recording by
:func:`para_ros.bag.view.recording_to_rerun`."""

from __future__ import annotations

import sys

from para_ros.bag.topic_options import add_topic_args, topic_config
from para_ros.bag.view import recording_to_rerun


def view(args) -> int:
    views = tuple(v.strip() for v in args.views.split(",") if v.strip())
    counts = recording_to_rerun(args.bag, args.out, topic_config(args, views), args.max_frames, args.quiet)
    out = counts["path"]
    if counts["observations"] == 0 and counts["chunks"] == 0:
        print(f"warning: nothing to show from {args.bag}: {counts['summary'] or 'no camera pair'}", file=sys.stderr)
    print(
        f"wrote {out}: {counts['observations']} observations, {counts['chunks']} chunks, {counts['clouds']} voxel "
        f"clouds (open with: rerun {out})"
    )
    return 0


def add_parser(sub) -> None:
    """Register ``view`` on para-bag's subparsers."""
    p = sub.add_parser(
        "view", help="a recording -> a rerun recording (.rrd): posed cameras, trajectory, chunks, voxel clouds"
    )
    p.add_argument("bag", help="rosbag2 directory (metadata.yaml + .mcap or .db3)")
    p.add_argument("--out", required=True, help="output .rrd file")
    p.add_argument("--views", default="scene,wrist", help="comma-separated camera views")
    p.add_argument("--max-frames", type=int, default=0, help="at most this many observations (0: all)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_topic_args(p)
    p.set_defaults(func=view)
