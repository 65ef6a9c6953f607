"""``para-train``: train a PARA v4 policy from demonstration episodes and print how to deploy it.

Examples::

    para-train --data episodes/ --preset tiny --out runs/try --max-iters 300
    para-train --data episodes/ --preset paper --config my_model.yaml --out runs/pick_v1 --device cuda --amp bf16
    para-train --out runs/pick_v1 --resume --max-iters 40000      # continue (and extend) an interrupted run

``--config`` is a YAML (or JSON) file of ``V4Config`` fields that override the preset, plus an optional ``train:``
mapping of ``TrainConfig`` fields::

    n_window: 16
    backbone_pretrained_dir: /models/dinov3-vits16plus-pretrain-lvd1689m
    train:
      eval_interval: 250
      augment: true

Command-line flags override both.

Several processes (GPUs, or CPU processes with gloo), PyTorch's torchrun + DistributedDataParallel::

    torchrun --standalone --nproc_per_node 4 -m para_core.train.cli --data episodes/ --preset paper --out runs/p4
    torchrun --nnodes 2 --node_rank K --nproc_per_node 8 --rdzv_backend c10d --rdzv_endpoint HOST:29500 \
        -m para_core.train.cli ...            # on each of 2 machines

``--batch-size`` is the GLOBAL batch (split over the processes and ``--grad-accum-steps`` micro-batches), so the
learning rate and the results do not depend on the process count, and ``--resume`` works with another one. Only rank
0 writes the run directory (see ``para_core.train.distributed``). Episodes: ``--data`` takes episode directories (``meta.json`` + ``arrays.npz``, see
``para_core.data.dataset``) or folders that contain them (searched recursively), and LeRobotDataset v3 directories
that carry camera calibration (``para-bag export-lerobot``; converted once into RUN_DIR/lerobot_episodes). A
LeRobot dataset of joint positions (LeRobot's YAM plugins) needs a calibration file: convert it with ``para-bag
import-lerobot DATASET --calibration calibration.yaml --out EPISODES`` and train on EPISODES.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import yaml

from para_core.data.augmentation import field_names as augmentation_field_names
from para_core.data.dataset import find_episode_dirs
from para_core.data.lerobot_dataset import LeRobotImportOptions, convert_for_training
from para_core.model.config import (
    CONFIG_GROUPS,
    DTYPES,
    FLAT_FIELD_GROUP,
    PRESET_NAMES,
    TOP_LEVEL_FIELDS,
    V4Config,
)
from para_core.model.hardware import WAIT_POLICIES, configure_cpu_threads
from para_core.train.calibration_record import episode_calibrations, write_recipe_calibrations


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="para-train",
        description=__doc__.split("\n\n")[0],
        epilog="Output: RUN/checkpoint (deployable), RUN/metrics.jsonl, RUN/loss_curve.png, RUN/train_state "
        "(resume). See para_core.train.trainer for the schedule and the run directory layout. "
        "`para-train familiarity --help`: a trained checkpoint's memory of its training features (docs/confidence.md).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--data",
        nargs="+",
        metavar="DIR",
        default=None,
        help="episode directories or parent folders of episodes (required unless --resume)",
    )
    p.add_argument(
        "--camera-key",
        action="append",
        metavar="VIEW=FEATURE",
        default=None,
        help="LeRobot datasets in --data: the video feature of a camera view (repeatable), e.g. "
        "scene=observation.images.top; default observation.images.<view>",
    )
    p.add_argument("--out", required=True, metavar="RUN_DIR", help="run directory, e.g. runs/pick_v1")
    p.add_argument(
        "--preset",
        choices=PRESET_NAMES,
        default="paper",
        help="model preset: 'paper' (DINOv3 ViT-S/16+, 512 px, 2x128x64^2 voxels), 'paper_internvl' (the "
        "same head on InternVL 2.5-1B's vision tower, 448 px) or 'tiny' (toy size, CPU tests/demos); "
        "default: paper",
    )
    p.add_argument(
        "--config",
        metavar="FILE",
        default=None,
        help="YAML/JSON of V4Config fields overriding the preset, plus an optional 'train:' mapping of "
        "TrainConfig fields",
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out from its last checkpoint (configs and episodes come from the run; "
        "--max-iters/--batch-size/--lr/--device/--amp/--num-workers may change; the data stream "
        "continues at the samples already consumed, whatever the batch size)",
    )
    g = p.add_argument_group("overrides")
    g.add_argument("--max-iters", type=int, default=None, help="total training iterations (V4Config.max_iters)")
    g.add_argument("--batch-size", type=int, default=None, help="samples per iteration (V4Config.batch_size)")
    g.add_argument("--lr", type=float, default=None, help="head learning rate (V4Config.lr)")
    g.add_argument(
        "--backbone-pretrained-dir",
        default=None,
        metavar="DIR",
        help="local checkpoint to start the backbone from (DINOv3 / InternVL transformers directory, DA3 release)",
    )
    g.add_argument(
        "--prompt",
        default=None,
        metavar="TEXT",
        help="text prompt of backbone_kind 'internvl' (preset paper_vlm): the task in a few words; default: the name "
        "of the first --data path",
    )
    g.add_argument("--device", default=None, help="'auto' (default), 'cpu', 'cuda', 'cuda:N'")
    g.add_argument(
        "--amp",
        choices=("auto", *DTYPES),
        default=None,
        help="autocast dtype (default fp32; auto: bf16 on a CPU with bf16 instructions or a GPU with bf16, fp16 on "
        "an older GPU, else fp32; the trainer's log says which)",
    )
    g.add_argument("--num-workers", type=int, default=None, help="DataLoader workers (default 2)")
    g.add_argument("--val-fraction", type=float, default=None, help="fraction of episodes held out (default 0.1)")
    g.add_argument("--val-episodes", nargs="+", default=None, metavar="DIR", help="explicit validation episodes")
    g.add_argument("--eval-interval", type=int, default=None, help="iterations between validation passes")
    g.add_argument("--ckpt-interval", type=int, default=None, help="iterations between checkpoints")
    g.add_argument("--augment", action="store_true", default=None, help="colour jitter on training images")
    g.add_argument("--cache-dir", default=None, help="memory-map resized images from here (large datasets)")
    g.add_argument(
        "--init-from",
        default=None,
        metavar="CHECKPOINT",
        help="start from this checkpoint's weights (fine-tuning): iteration 0, a fresh optimizer and "
        "learning-rate schedule; refused unless it holds the same preset, cameras and architecture",
    )
    g.add_argument("--seed", type=int, default=None, help="seed of init, split and data order (default 0)")
    g.add_argument("--no-progress", action="store_true", help="no progress bar (logs still go to metrics.jsonl)")
    g.add_argument(
        "--grad-accum-steps",
        type=int,
        default=None,
        help="micro-batches per process and iteration (gradient accumulation); --batch-size stays the "
        "global batch (all processes, all micro-batches)",
    )
    g.add_argument(
        "--no-tensorboard",
        action="store_true",
        help="do not write TensorBoard event files (default: RUN/tensorboard; watch with "
        "'tensorboard --logdir RUN/tensorboard')",
    )
    g.add_argument(
        "--no-keep-freed-memory",
        action="store_true",
        help="on a CPU, leave glibc's allocator as it is (default: it keeps freed memory for the next step: "
        "faster steps, the process keeps its peak footprint)",
    )
    g.add_argument("--print-config", action="store_true", help="print the resolved configs and exit")
    g.add_argument(
        "--threads",
        default="auto",
        metavar="auto|N",
        help="torch CPU threads (default auto: OMP_NUM_THREADS if set, else the cores this process may use, "
        "shared among torchrun's processes on this machine; para_core.model.hardware.configure_cpu_threads)",
    )
    g.add_argument(
        "--omp-wait-policy",
        choices=WAIT_POLICIES,
        default=None,
        help="OpenMP wait policy, set before torch loads (default: OMP_WAIT_POLICY of the environment, else "
        "passive: waiting threads sleep instead of spinning, much faster on shared cores)",
    )
    _add_augmentation_arguments(p)
    return p


def _add_augmentation_arguments(p: argparse.ArgumentParser) -> None:
    """The training-time augmentations (TrainConfig fields of the same names; docs/data.md); all off by default."""
    a = p.add_argument_group(
        "augmentation",
        "training-time randomisation of any dataset (sim demos, bags, LeRobot); each off by default, drawn per "
        "view and sample from the run's seed. 'told' errors change only the camera pose / intrinsics the model "
        "is given, never the images or the action targets",
    )
    for flag, unit, what in (
        (
            "--told-extrinsics-error-m",
            "M",
            "bound of the told pose's translation error of --told-extrinsics-views, "
            "metres (length uniform in [0, M], random direction, in the camera's frame), e.g. 0.01",
        ),
        ("--told-extrinsics-error-deg", "DEG", "bound of its rotation error, degrees (random axis), e.g. 1"),
        (
            "--told-wrist-mount-error-m",
            "M",
            "bound of the told wrist mount's translation error of --told-wrist-mount-views, metres, e.g. 0.003",
        ),
        ("--told-wrist-mount-error-deg", "DEG", "bound of the told wrist mount's rotation error, degrees, e.g. 3"),
        (
            "--told-focal-error-frac",
            "F",
            "told fx, fy scaled by 1 + e, e uniform in [-F, F] (images unchanged), e.g. 0.05",
        ),
        ("--told-principal-point-error-frac", "P", "told cx, cy shifted by e * image size, e uniform in [-P, P]"),
        (
            "--grey-probability",
            "P",
            "probability that a view of a sample is shown in greyscale (BT.601 luma): for objects of colours the "
            "demonstrations never showed, e.g. 0.2",
        ),
    ):
        a.add_argument(flag, type=float, default=None, metavar=unit, help=what)
    for flag, default in (
        ("--told-extrinsics-views", "scene"),
        ("--told-wrist-mount-views", "wrist"),
        ("--told-intrinsics-views", "scene"),
    ):
        a.add_argument(flag, nargs="+", default=None, metavar="VIEW", help=f"views it applies to (default {default})")
    for flag, unit, what in (
        (
            "--zoom-range",
            "Z",
            "consistent zoom / crop: images resampled AND K changed exactly, zoom factor "
            "uniform in [LO, HI] (1 = off; < 1 zooms out with a black border), e.g. 0.95 1.1",
        ),
        (
            "--hue-shift-range-deg",
            "DEG",
            "hue rotation of the whole image, degrees (HSV hue; value and saturation kept), e.g. -180 180",
        ),
        ("--exposure-range-stops", "STOPS", "exposure change, stops (gain 2**stops), e.g. -0.5 0.5"),
        ("--gamma-range", "G", "gamma exponent applied to [0, 1] intensities, e.g. 0.8 1.25"),
        ("--blur-sigma-range-px", "PX", "Gaussian blur sigma in pixels of the model's input, e.g. 0 1"),
        ("--noise-sigma-range-levels", "LEVELS", "Gaussian noise sigma in uint8 levels, e.g. 0 6"),
    ):
        a.add_argument(flag, type=float, nargs=2, default=None, metavar=(f"{unit}_LO", f"{unit}_HI"), help=what)


AUGMENTATION_FLAGS = augmentation_field_names()  # TrainConfig fields and --flags of the same names


def _read_mapping(path: str) -> dict[str, Any]:
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"--config {path}: no such file")
    text = file.read_text()
    data = json.loads(text) if file.suffix == ".json" else yaml.safe_load(text)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(
            f"--config {path}: expected a mapping of V4Config fields (and an optional 'train:' "
            f"mapping), got {type(data).__name__}"
        )
    return data


def parse_camera_keys(items: list[str] | None) -> dict[str, str]:
    """``--camera-key VIEW=FEATURE`` items -> {view: feature}; a malformed item is refused naming the form."""
    keys: dict[str, str] = {}
    for item in items or []:
        view, sep, feature = item.partition("=")
        if not sep or not view.strip() or not feature.strip():
            raise ValueError(f"--camera-key {item!r}: use VIEW=FEATURE, e.g. scene=observation.images.top")
        keys[view.strip()] = feature.strip()
    return keys


def resolve_configs(args: argparse.Namespace):
    """-> (V4Config, TrainConfig, episode dirs) from the preset / --config / flags, or from the run on --resume."""
    from para_core.train.trainer import TrainConfig, read_run  # scipy, torch: loaded on first use, not on import

    if args.resume:
        run = read_run(args.out)
        model = V4Config.from_dict(run["model_config"])
        train = TrainConfig.from_dict(run["train_config"])
        episodes = [Path(p) for p in run["train_episodes"]]
        if args.data:
            print("[para-train] --resume: --data is ignored; the run's own episode lists are used", file=sys.stderr)
    else:
        if not args.data:
            raise ValueError("--data is required (episode directories or folders of episodes) unless --resume")
        model_over: dict[str, Any] = {}
        train_over: dict[str, Any] = {}
        if args.config:
            data = _read_mapping(args.config)
            train_over = data.pop("train", None) or {}
            if not isinstance(train_over, dict):
                raise ValueError(f"--config {args.config}: 'train' must be a mapping of TrainConfig fields")
            model_over = data
        base = V4Config.preset(args.preset)
        unknown = sorted(set(model_over) - set(TOP_LEVEL_FIELDS) - set(CONFIG_GROUPS) - set(FLAT_FIELD_GROUP))
        if unknown:
            raise ValueError(
                f"--config {args.config}: unknown V4Config field(s) {unknown}; check the spelling "
                f"(put TrainConfig fields under 'train:')"
            )
        model = base.replace(**model_over)
        train = TrainConfig.from_dict(train_over)
        camera_keys = parse_camera_keys(args.camera_key)
        unknown_views = sorted(set(camera_keys) - set(model.view_names))
        if unknown_views:
            raise ValueError(
                f"--camera-key names view(s) {unknown_views}; the model's views are {list(model.view_names)}"
            )
        lerobot = LeRobotImportOptions(view_names=model.view_names, camera_keys=camera_keys)
        episodes = find_episode_dirs(convert_for_training(args.data, Path(args.out) / "lerobot_episodes", lerobot))
    model_changes = {
        k: v
        for k, v in (("max_iters", args.max_iters), ("batch_size", args.batch_size), ("lr", args.lr))
        if v is not None
    }
    if args.backbone_pretrained_dir is not None:
        if args.resume:
            raise ValueError("--backbone-pretrained-dir cannot change on --resume (the weights come from the run)")
        model_changes["backbone_pretrained_dir"] = args.backbone_pretrained_dir
    if model.backbone_kind == "internvl" and not args.resume:
        # the PARA v4 design's v4_vlm reads the dataset's name as its text prompt (para_core.model.backbone_vlm)
        prompt = (
            args.prompt
            if args.prompt is not None
            else model.backbone_config["prompt"] or Path(args.data[0]).resolve().name
        )
        model_changes["backbone_config"] = {**model.backbone_config, "prompt": prompt, "prompt_token_ids": None}
    elif args.prompt is not None:
        raise ValueError(f"--prompt is for backbone_kind 'internvl' (preset paper_vlm), not {model.backbone_kind!r}")
    if model_changes:
        model = model.replace(**model_changes)
    train_changes = {
        k: v
        for k, v in (
            ("device", args.device),
            ("amp_dtype", args.amp),
            ("num_workers", args.num_workers),
            ("val_fraction", args.val_fraction),
            ("eval_interval", args.eval_interval),
            ("ckpt_interval", args.ckpt_interval),
            ("augment", args.augment),
            ("cache_dir", args.cache_dir),
            ("seed", args.seed),
            ("grad_accum_steps", args.grad_accum_steps),
            ("init_from", args.init_from),
        )
        if v is not None
    }
    for name in AUGMENTATION_FLAGS:
        value = getattr(args, name)
        if value is not None:
            train_changes[name] = tuple(value) if isinstance(value, list) else value
    if args.val_episodes:
        train_changes["val_episodes"] = tuple(str(p) for p in find_episode_dirs(args.val_episodes))
    if args.no_progress:
        train_changes["progress"] = False
    if args.no_tensorboard:
        train_changes["tensorboard"] = False
    if args.no_keep_freed_memory:
        train_changes["keep_freed_memory"] = False
    if args.resume:
        frozen = sorted(
            set(train_changes) & {"val_fraction", "val_episodes", "seed", "augment", "init_from", *AUGMENTATION_FLAGS}
        )
        if frozen:
            raise ValueError(f"--resume cannot change {frozen} (they define the run); start a new --out instead")
    if train_changes:
        train = train.replace(**train_changes)
    train.augmentations.check_views(model.view_names)  # views named by an augmentation are the model's
    return model, train, episodes


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["familiarity"]:  # the one sub-command: a trained checkpoint's memory of its training features
        from para_core.train.familiarity_cli import main as familiarity_main

        return familiarity_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    try:  # first: OMP_WAIT_POLICY takes effect only when set before torch loads (resolve_configs imports it)
        cpu_threads = configure_cpu_threads(args.threads, args.omp_wait_policy)
    except ValueError as exc:
        parser.error(f"--threads / --omp-wait-policy: {exc}")
    try:
        model_config, train_config, episodes = resolve_configs(args)
    except (ValueError, FileNotFoundError, ImportError) as exc:
        parser.error(str(exc))
    if args.print_config:
        print(
            json.dumps(
                {
                    "model": model_config.to_dict(),
                    "train": train_config.to_dict(),
                    "episodes": [str(p) for p in episodes],
                },
                indent=2,
            )
        )
        return 0

    from para_core.train.distributed import shutdown  # torch: loaded on first use, not on import
    from para_core.train.trainer import train  # scipy, torch: loaded on first use, not on import

    rank = int(os.environ.get("RANK", "0"))  # under torchrun only rank 0 talks
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if rank == 0:
        print(
            f"[para-train] {'resuming' if args.resume else 'training'} {model_config.name} "
            f"({model_config.n_voxels:,} voxels, T={model_config.n_window}) on {len(episodes)} episode(s) -> "
            f"{args.out}" + (f" with {world} processes (global batch {model_config.batch_size})" if world > 1 else ""),
            flush=True,
        )
        print(f"[para-train] {cpu_threads.describe()}", flush=True)
    try:
        result = train(model_config, train_config, episodes, args.out, resume=args.resume)
    except (ValueError, FileNotFoundError, FileExistsError) as exc:  # (a CheckpointError is a ValueError)
        print(f"para-train: error: {exc}", file=sys.stderr)
        return 2
    finally:
        shutdown()
    if rank != 0:
        return 0
    ckpt = result.checkpoint_dir
    recipe = write_recipe_calibrations(ckpt, episode_calibrations(episodes))
    if recipe is not None:
        print(f"[para-train] the episodes' camera calibration(s) recorded in {recipe}")
    print(f"\n[para-train] done at iteration {result.iterations}")
    if result.final_val:
        v = result.final_val
        from para_core.train.trainer import main_loss_term  # scipy, torch: loaded on first use, not on import

        key = main_loss_term(v)
        print(
            f"  validation: {key} {v[key]:.3f}, position error {v['pos_err_m'] * 100:.1f} cm "
            f"(last step {v['pos_err_last_m'] * 100:.1f} cm)"
        )
    print(f"  checkpoint:  {ckpt}")
    print(f"  metrics:     {result.run_dir / 'metrics.jsonl'}  (curve: {result.run_dir / 'loss_curve.png'})")
    if (result.run_dir / "tensorboard").is_dir():
        print(f"  tensorboard: tensorboard --logdir {shlex.quote(str(result.run_dir / 'tensorboard'))}")
    print("  deploy on the simulated YAM:")
    print(f"    scripts/demo --checkpoint {shlex.quote(str(ckpt))}")
    print("  deploy with ROS 2:")
    print(f"    ros2 launch para_ros deploy.launch.py checkpoint:={shlex.quote(str(ckpt.resolve()))}")
    print(f"  continue training:  para-train --out {shlex.quote(str(result.run_dir))} --resume --max-iters N")
    return 0


if __name__ == "__main__":
    sys.exit(main())
