"""Episodes packed small for a narrow link to a training machine: each view's images resized to the model's input
size (the dataset's own preprocessing, so training sees the pixels it would have made itself) and stored as an H.264
video, everything else (stamps, poses, intrinsics rescaled exactly, gripper, meta) kept exactly.

The video is lossy: at the default quality (``crf`` 12, full-resolution colour) the mean absolute pixel error is
below one grey level (measured on simulator renders), far below the image noise training adds. Packing needs PyAV
(the data extras); unpacking needs only OpenCV, so a bare GPU machine can unpack.

Usage::

    python -m para_core.data.episode_archive pack DATA PACKED --size 128
    python -m para_core.data.episode_archive unpack PACKED DATA
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import numpy as np

ARRAYS_FILE = "arrays.npz"
META_FILE = "meta.json"
PACKED_FORMAT = "para_packed_episode"
VIDEO_RATE_HZ = 10  # the container's nominal rate; frames are stored one for one, stamps kept in the arrays


def pack_episode(src: Path, dst: Path, size: int, crf: int = 12) -> Path:
    """Pack the episode directory ``src`` into ``dst`` (created): images as ``<view>.mp4`` at ``size`` px."""
    import av  # PyAV: a data extra, loaded on first use

    from para_core.data.dataset import Episode
    from para_core.model.policy import resize_to_model_input

    if size % 2:
        raise ValueError(f"pack size {size} must be even (H.264 at full colour resolution still needs even sides)")
    ep = Episode.load(src)
    dst.mkdir(parents=True, exist_ok=True)
    arrays = {"stamps_ns": ep.stamps_ns, "T_world_ee": ep.T_world_ee, "gripper": ep.gripper}
    for view in ep.view_names:
        frames, Ks = [], []
        for image, K in zip(ep.images[view], ep.K[view]):
            small, K_small = resize_to_model_input(image, K, size)
            frames.append(small)
            Ks.append(K_small)
        arrays[f"K.{view}"] = np.asarray(Ks)
        arrays[f"T_world_cam.{view}"] = ep.T_world_cam[view]
        container = av.open(str(dst / f"{view}.mp4"), "w")
        stream = container.add_stream("libx264", rate=VIDEO_RATE_HZ)
        stream.width = stream.height = size
        stream.pix_fmt = "yuv444p"
        stream.options = {"crf": str(int(crf))}
        for frame in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
        container.close()
    np.savez_compressed(dst / ARRAYS_FILE, **arrays)
    header = {"format": PACKED_FORMAT, "fps": ep.fps, "view_names": list(ep.view_names), "meta": ep.meta,
              "size": int(size), "crf": int(crf)}  # fmt: skip
    (dst / META_FILE).write_text(json.dumps(header, indent=2, sort_keys=True))
    return dst


def unpack_episode(src: Path, dst: Path) -> Path:
    """Unpack a packed episode ``src`` into a PARA episode directory ``dst``.

    :raises ValueError: when a video holds another number of frames than the episode has stamps.
    """
    import cv2

    from para_core.data.dataset import Episode

    header = json.loads((src / META_FILE).read_text())
    if header.get("format") != PACKED_FORMAT:
        raise ValueError(f"{src}: not a packed episode (format {header.get('format')!r}, expected {PACKED_FORMAT!r})")
    with np.load(src / ARRAYS_FILE, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    views = tuple(header["view_names"])
    images = {}
    for view in views:
        cap = cv2.VideoCapture(str(src / f"{view}.mp4"))
        frames = []
        while True:
            ok, bgr = cap.read()
            if not ok:
                break
            frames.append(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB))
        cap.release()
        if len(frames) != len(arrays["stamps_ns"]):
            raise ValueError(
                f"{src / (view + '.mp4')}: {len(frames)} frames decoded for {len(arrays['stamps_ns'])} stamps; "
                "this OpenCV cannot read the video (needs its FFmpeg backend) or the file is cut short"
            )
        images[view] = np.asarray(frames, dtype=np.uint8)
    Episode(
        view_names=views,
        stamps_ns=arrays["stamps_ns"],
        images=images,
        K={v: arrays[f"K.{v}"] for v in views},
        T_world_cam={v: arrays[f"T_world_cam.{v}"] for v in views},
        T_world_ee=arrays["T_world_ee"],
        gripper=arrays["gripper"],
        fps=header["fps"],
        meta={**header["meta"], "packed": {"size": header["size"], "crf": header["crf"]}},
    ).save(dst)
    return dst


def _episode_dirs(root: Path) -> list[Path]:
    return sorted(p.parent for p in root.glob(f"*/{META_FILE}"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m para_core.data.episode_archive", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("pack", help="pack every episode directory under SRC into DST")
    a.add_argument("src", type=Path)
    a.add_argument("dst", type=Path)
    a.add_argument("--size", type=int, default=128, help="image side after resizing, pixels (the model's img_size)")
    a.add_argument("--crf", type=int, default=12, help="H.264 quality, 0 (best) .. 51 (default 12)")
    b = sub.add_parser("unpack", help="unpack every packed episode under SRC into DST")
    b.add_argument("src", type=Path)
    b.add_argument("dst", type=Path)
    args = p.parse_args(argv)
    dirs = _episode_dirs(args.src)
    if not dirs:
        print(f"episode_archive: no episodes under {args.src}", file=sys.stderr)
        return 2
    if args.command == "pack" and not (16 <= args.size <= 1024 and 0 <= args.crf <= 51):
        print(f"episode_archive: --size {args.size} must be 16..1024, --crf {args.crf} 0..51", file=sys.stderr)
        return 2
    for d in dirs:
        out = args.dst / d.name
        if (out / META_FILE).exists():
            continue
        tmp = args.dst / (d.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        if args.command == "pack":
            pack_episode(d, tmp, args.size, args.crf)
        else:
            unpack_episode(d, tmp)
        tmp.rename(out)
    print(f"episode_archive: {args.command}ed {len(dirs)} episodes into {args.dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
