"""Training a PARA v4 policy from demonstrations: ``TrainConfig``, ``Trainer`` and ``train``.

The model's own numbers (architecture, lr, backbone_lr_mult, lr_warmup, lr_schedule, max_iters, batch_size,
weight_decay) live in ``V4Config`` and are NOT repeated here; ``TrainConfig`` holds only how a run is executed.

Run directory (``out_dir``)::

    runs/NAME/
      checkpoint/               the latest weights: model.safetensors + config.json (``para_core.model.checkpoint``);
                                deploy it with ``Policy.from_checkpoint`` / ``scripts/demo --checkpoint``
      checkpoints/iter_000500/  periodic snapshots in the same format (the newest ``keep_checkpoints`` are kept)
      train_state/              optimizer.safetensors (every optimizer tensor), rng.safetensors (torch RNG states) and
                                state.json (iteration, samples consumed, param groups, scalar optimizer state, AMP
                                scaler): no pickle
      .saving/                  only while a save is in progress (see "Saving" below)
      run.json                  model config, train config, train / validation episode lists (used by resume)
      metrics.jsonl             one JSON object per line: {"split": "train"|"val", "iter": ..., losses, lr, ...}
      loss_curve.png            train loss terms and validation metrics against iterations (matplotlib, Agg)

Schedule: AdamW with two parameter groups (``model.param_groups()``: head at ``lr``, backbone at
``lr * backbone_lr_mult``); the learning rate of iteration i (0-based) is ``base * w(i) * c(i)`` with a linear warm-up
``w(i) = min(1, (i + 1) / lr_warmup)`` and, for ``lr_schedule = "cosine"``, ``c(i) = r + (1 - r) * 0.5 * (1 +
cos(pi * p))`` where ``p = (i - lr_warmup) / (max_iters - lr_warmup)`` clipped to [0, 1] and r = ``min_lr_ratio``
(``"constant"``: c = 1). Gradients are clipped to ``grad_clip_norm`` (0 = off).

Data order is a deterministic function of (seed, samples consumed): an endless stream of per-epoch permutations of
the training samples cut into batches. The train state records how many samples were consumed, so a resumed run
continues the stream exactly where it stopped, even with another batch size, and with the same batch size sees exactly
the batches the uninterrupted run would have seen (augmentation draws in worker processes are the one thing not
replayed).

Saving is all-or-nothing: ``checkpoint/`` and ``train_state/`` of iteration i are written into ``.saving/``, a
``complete.json`` marker is written last, then each directory is moved into place. A crash before the marker leaves
the previous pair untouched (the partial ``.saving/`` is discarded on resume); a crash after it is completed on
resume. Resume also checks that the checkpoint's iteration equals the train state's and refuses a mismatched pair
(written by an older para_core) with an error that says which snapshot to use. ``metrics.jsonl`` lines logged after
the resumed iteration (work that was lost with the crash) are dropped on resume, so no iteration is logged twice.

Validation runs on held-out EPISODES (``val_episodes`` by path, else ``val_fraction`` of them picked with ``seed``),
never on frames of a training episode, on at most ``val_max_samples`` evenly spaced frames. It reports the voxel CE,
the gripper and rotation CEs and the position error in metres of the decoded chunk (argmax voxel refined by the local
soft-argmax, as the deployed Policy decodes) against the ground truth: mean over all steps and at the last step.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import time
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as Fn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import default_collate

from para_core.data import augmentation
from para_core.data.dataset import EpisodeDataset, make_batch
from para_core.model.checkpoint import read_checkpoint_meta, save_checkpoint
from para_core.model.config import DTYPES, SCHEDULE_FIELDS, V4Config, flat_config_dict, torch_dtype
from para_core.model.hardware import describe_precision, keep_freed_memory_for
from para_core.model.registry import build_model
from para_core.train import init_from
from para_core.train.distributed import init_from_env
from para_core.train.tensorboard_log import TensorBoardLog, overlay_paths

RUN_FILE = "run.json"
METRICS_FILE = "metrics.jsonl"
CURVE_FILE = "loss_curve.png"
STATE_DIR = "train_state"
RNG_FILE = "rng.safetensors"
LATEST_DIR = "checkpoint"
SNAPSHOT_DIR = "checkpoints"
STAGING_DIR = ".saving"  # a save in progress: checkpoint/ + train_state/ of one iteration, then complete.json
COMMIT_FILE = "complete.json"


# The position terms of the shipped model kinds' losses (v4, dino_kv: voxel cross-entropy; coordinate regression:
# smooth-L1 in cm), for readers of metrics.jsonl that have no model; a model names its own (position_loss_term).
MAIN_LOSS_TERMS = ("voxel_ce", "position_l1_cm")


def main_loss_term(losses: dict) -> str:
    """The name of the position term in a loss dict read back without its model (plots, the command's summary):
    a shipped kind's, else ``loss``."""
    return next((k for k in MAIN_LOSS_TERMS if k in losses), "loss")


def _fail(name: str, value: Any, fix: str) -> None:
    raise ValueError(f"TrainConfig.{name} = {value!r} is invalid: {fix}")


@dataclass
class TrainConfig:
    """How a training run is executed (the model and its optimisation numbers are in ``V4Config``).

    Args:
        device: ``"auto"`` (cuda if available, else cpu), ``"cpu"``, ``"cuda"``, ``"cuda:1"`` ...
        amp_dtype: ``"fp32"`` (no autocast), ``"bf16"`` (autocast, no loss scaling) or ``"fp16"`` (autocast + loss
            scaling; CUDA only); ``"auto"``: the fastest precision the device computes natively
            (``para_core.model.hardware.describe_precision``: bf16 only on a CPU with bf16 instructions, where
            bf16 autocast is otherwise emulated and several times slower than fp32); ``Trainer.amp_dtype`` and
            ``Trainer.precision`` say what was chosen. Voxel geometry always stays in float32 inside the model.
        num_workers: DataLoader worker processes (0 = load in the training process).
        grad_clip_norm: clip the global gradient norm to this value; 0 disables clipping.
        min_lr_ratio: the cosine schedule decays to ``lr * min_lr_ratio`` at ``max_iters``.
        adam_betas, adam_eps: AdamW moments (``weight_decay`` is ``V4Config.weight_decay``).
        log_interval: iterations between train lines in ``metrics.jsonl`` (averaged over the interval).
        eval_interval: iterations between validation passes (0 = only at the end).
        ckpt_interval: iterations between checkpoints + resumable train state (0 = only at the end).
        keep_checkpoints: periodic snapshots kept under ``checkpoints/`` (0 = none; ``checkpoint/`` is always
            written).
        val_fraction: fraction of the episodes held out for validation when ``val_episodes`` is empty (at least one
            episode if the fraction is > 0 and there are two or more episodes).
        val_episodes: explicit validation episode directories (overrides ``val_fraction``).
        val_max_samples: validation frames per pass, evenly spaced over the validation set.
        augment: colour jitter on training images (see ``EpisodeDataset``); jitter_strength: its strength.
        cache_dir: where resized images are memory-mapped from (empty: hold them in RAM).
        seed: seeds model initialisation, the train/val split and the data order.
        progress: show a tqdm progress bar.
        grad_accum_steps: micro-batches per process and iteration (gradient accumulation): the global batch
            ``V4Config.batch_size`` is split over ``world_size`` processes (torchrun) and then into this many
            micro-batches, so a global batch larger than fits in memory still trains (``para_core.train.distributed``).
        tensorboard: write TensorBoard event files to ``RUN/tensorboard`` (``para_core.train.tensorboard_log``).
        tensorboard_images: validation overlays written at each validation pass (0 = none).
        keep_freed_memory: on a CPU device, make the process's allocator keep freed memory
            (``para_core.model.hardware.keep_freed_memory``: training steps are faster, since each
            step otherwise faults its activations in afresh); the process keeps its peak footprint.
        init_from: a checkpoint directory whose weights a new run starts from (fine-tuning; iteration 0, a fresh
            optimizer and schedule; ``para_core.train.init_from``); empty: random initialisation.
        told_extrinsics_error_m ... noise_sigma_range_levels: the training-time augmentations of
            ``para_core.data.augmentation.Augmentations`` (the same field names; each off by default): the calibration
            error told to the model (``told_*``: scene extrinsics, wrist mount, intrinsics), the consistent zoom /
            crop, exposure, gamma, blur and noise. The ones that are on are also recorded in the checkpoint's
            ``config.json`` (``extra.augmentations``).
    """

    device: str = "auto"
    amp_dtype: str = "fp32"
    num_workers: int = 2
    grad_clip_norm: float = 1.0
    min_lr_ratio: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.999)
    adam_eps: float = 1e-8
    log_interval: int = 10
    eval_interval: int = 500
    ckpt_interval: int = 1000
    keep_checkpoints: int = 3
    val_fraction: float = 0.1
    val_episodes: tuple[str, ...] = ()
    val_max_samples: int = 64
    augment: bool = False
    jitter_strength: float = 0.2
    cache_dir: str = ""
    seed: int = 0
    progress: bool = True
    tensorboard: bool = True
    tensorboard_images: int = 3
    grad_accum_steps: int = 1
    keep_freed_memory: bool = True
    init_from: str = ""
    told_extrinsics_error_m: float = 0.0
    told_extrinsics_error_deg: float = 0.0
    told_extrinsics_views: tuple[str, ...] = ("scene",)
    told_wrist_mount_error_m: float = 0.0
    told_wrist_mount_error_deg: float = 0.0
    told_wrist_mount_views: tuple[str, ...] = ("wrist",)
    told_focal_error_frac: float = 0.0
    told_principal_point_error_frac: float = 0.0
    told_intrinsics_views: tuple[str, ...] = ("scene",)
    zoom_range: tuple[float, float] = (1.0, 1.0)
    hue_shift_range_deg: tuple[float, float] = (0.0, 0.0)
    grey_probability: float = 0.0
    exposure_range_stops: tuple[float, float] = (0.0, 0.0)
    gamma_range: tuple[float, float] = (1.0, 1.0)
    blur_sigma_range_px: tuple[float, float] = (0.0, 0.0)
    noise_sigma_range_levels: tuple[float, float] = (0.0, 0.0)

    def __post_init__(self) -> None:
        self.adam_betas = tuple(float(b) for b in self.adam_betas)
        self.val_episodes = tuple(str(p) for p in self.val_episodes)
        for name in augmentation.field_names():  # YAML / JSON lists -> tuples (to_dict writes them as lists)
            if isinstance(getattr(self, name), list):
                setattr(self, name, tuple(getattr(self, name)))
        self.validate()

    def validate(self) -> None:
        """Raise ValueError naming the field, the value and the fix for the first invalid field."""
        if not isinstance(self.device, str) or not self.device:
            _fail("device", self.device, 'use "auto", "cpu", "cuda" or "cuda:N"')
        if self.device != "auto":
            try:
                torch.device(self.device)
            except (RuntimeError, ValueError):
                _fail("device", self.device, 'use "auto", "cpu", "cuda" or "cuda:N"')
        if self.amp_dtype not in ("auto", *DTYPES):
            _fail("amp_dtype", self.amp_dtype, f"use auto or one of {DTYPES}")
        for name in (
            "num_workers",
            "log_interval",
            "eval_interval",
            "ckpt_interval",
            "keep_checkpoints",
            "val_max_samples",
            "seed",
            "grad_accum_steps",
        ):
            value = getattr(self, name)
            low = 1 if name in ("log_interval", "val_max_samples", "grad_accum_steps") else 0
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                _fail(name, value, f"use an integer >= {low}")
        for name in ("grad_clip_norm", "min_lr_ratio", "adam_eps", "val_fraction", "jitter_strength"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                _fail(name, value, "use a finite number")
            setattr(self, name, float(value))
        if self.grad_clip_norm < 0:
            _fail("grad_clip_norm", self.grad_clip_norm, "use a value >= 0 (0 disables clipping)")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            _fail("min_lr_ratio", self.min_lr_ratio, "use a value in [0, 1]")
        if not self.adam_eps > 0:
            _fail("adam_eps", self.adam_eps, "use a value > 0, e.g. 1e-8")
        if len(self.adam_betas) != 2 or not all(0.0 <= b < 1.0 for b in self.adam_betas):
            _fail("adam_betas", self.adam_betas, "use two values in [0, 1), e.g. (0.9, 0.999)")
        if not 0.0 <= self.val_fraction < 1.0:
            _fail("val_fraction", self.val_fraction, "use a value in [0, 1) (0 = no validation)")
        if not 0.0 <= self.jitter_strength < 1.0:
            _fail("jitter_strength", self.jitter_strength, "use a value in [0, 1)")
        if (
            isinstance(self.tensorboard_images, bool)
            or not isinstance(self.tensorboard_images, int)
            or not 0 <= self.tensorboard_images <= 16
        ):
            _fail("tensorboard_images", self.tensorboard_images, "use an integer within 0..16")
        for name in ("augment", "progress", "tensorboard", "keep_freed_memory"):
            if not isinstance(getattr(self, name), bool):
                _fail(name, getattr(self, name), "use true or false")
        if not isinstance(self.cache_dir, str):
            _fail("cache_dir", self.cache_dir, 'use a directory path or ""')
        if not isinstance(self.init_from, str):
            _fail("init_from", self.init_from, 'use a checkpoint directory or ""')
        problem = augmentation.augmentation_problem(self.to_dict())
        if problem is not None:
            _fail(*problem)

    @property
    def augmentations(self) -> augmentation.Augmentations:
        """The training-time augmentations these fields describe."""
        return augmentation.Augmentations.from_mapping(self.to_dict())

    def to_dict(self) -> dict[str, Any]:
        return {
            f.name: (list(v) if isinstance(v, tuple) else v)
            for f in dataclasses.fields(self)
            for v in [getattr(self, f.name)]
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(
                f"TrainConfig: unknown field(s) {unknown}; remove them or check the spelling "
                f"(known fields: {sorted(known)})"
            )
        return cls(**data)

    def replace(self, **changes: Any) -> TrainConfig:
        return dataclasses.replace(self, **changes)


# -------------------------------------------------------------------------------------------------- schedule
def lr_factor(iteration: int, config: V4Config, min_lr_ratio: float = 0.0) -> float:
    """Multiplier of the base learning rates at 0-based ``iteration`` (warm-up then cosine; module docstring)."""
    warm = min(1.0, (iteration + 1) / config.lr_warmup) if config.lr_warmup > 0 else 1.0
    if config.lr_schedule == "constant":
        return warm
    span = max(1, config.max_iters - config.lr_warmup)
    p = min(1.0, max(0.0, (iteration - config.lr_warmup) / span))
    return warm * (min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * p)))


class ResumableBatchSampler(torch.utils.data.Sampler):
    """Endless batches: epoch e is ``np.random.default_rng([seed, e]).permutation(n)``, the stream of all epochs is
    cut into consecutive batches. ``start_sample`` skips exactly that many samples of the stream (what a resumed run
    has consumed, whatever batch size it used); ``start_iter`` is the shorthand ``start_sample = start_iter *
    batch_size`` for a constant batch size."""

    def __init__(
        self,
        n_samples: int,
        batch_size: int,
        seed: int,
        start_iter: int = 0,
        start_sample: int | None = None,
        rank: int = 0,
        world_size: int = 1,
        micro_batches: int = 1,
    ):
        if batch_size % (world_size * micro_batches) != 0:
            unit = world_size * micro_batches
            raise ValueError(
                f"batch_size {batch_size} is not a multiple of world_size {world_size} x "
                f"grad_accum_steps {micro_batches}: every process and micro-batch needs an equal share "
                f"of the global batch; use a multiple of {unit}, e.g. {unit * max(1, round(batch_size / unit))}"
            )
        self.rank, self.world_size, self.micro_batches = rank, world_size, micro_batches
        if n_samples < 1:
            raise ValueError("ResumableBatchSampler: the training set is empty; pass episodes with frames")
        if start_sample is not None and start_sample < 0:
            raise ValueError(f"ResumableBatchSampler start_sample={start_sample}; use a count >= 0")
        self.n, self.batch_size, self.seed = n_samples, batch_size, seed
        self.start_sample = start_iter * batch_size if start_sample is None else int(start_sample)

    def _stream(self, start: int):
        epoch, offset = divmod(start, self.n)
        while True:
            perm = np.random.default_rng([self.seed, epoch]).permutation(self.n)
            for j in perm[offset:]:
                yield int(j)
            epoch, offset = epoch + 1, 0

    def __iter__(self):
        """This process's micro-batches: its contiguous share of each global batch, cut into ``micro_batches``."""
        stream = self._stream(self.start_sample)
        share = self.batch_size // self.world_size
        micro = share // self.micro_batches
        while True:
            batch = [next(stream) for _ in range(self.batch_size)]
            mine = batch[self.rank * share : (self.rank + 1) * share]
            for a in range(self.micro_batches):
                yield mine[a * micro : (a + 1) * micro]

    def __len__(self) -> int:  # endless; DataLoader only needs a number
        return 2**62


# ----------------------------------------------------------------------------------------- optimizer <-> files
def save_optimizer(optimizer: torch.optim.Optimizer, directory: Path, extra: dict[str, Any]) -> None:
    """Optimizer state -> ``optimizer.safetensors`` (every tensor) + ``state.json`` (everything else). No pickle."""
    from safetensors.torch import save_file  # safetensors: loaded on first use, not on import

    sd = optimizer.state_dict()
    tensors, scalars = {}, {}
    for pid, st in sd["state"].items():
        for key, value in st.items():
            if torch.is_tensor(value):
                tensors[f"state.{pid}.{key}"] = value.detach().to("cpu").contiguous()
            else:
                scalars[f"{pid}.{key}"] = value
    groups = [{k: (list(v) if isinstance(v, tuple) else v) for k, v in g.items()} for g in sd["param_groups"]]
    directory.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(directory / "optimizer.safetensors"))
    state = {"param_groups": groups, "scalar_state": scalars, **extra}
    (directory / "state.json").write_text(json.dumps(state, indent=2, sort_keys=True))


def load_optimizer(optimizer: torch.optim.Optimizer, directory: Path) -> dict[str, Any]:
    """Inverse of ``save_optimizer``; returns the ``state.json`` dict (iteration, scaler, ...)."""
    from safetensors.torch import load_file  # safetensors: loaded on first use, not on import

    opt_file, state_file = directory / "optimizer.safetensors", directory / "state.json"
    if not opt_file.is_file() or not state_file.is_file():
        raise FileNotFoundError(
            f"{directory} has no optimizer.safetensors + state.json; the run was not "
            f"checkpointed yet (nothing to resume) or the directory is incomplete"
        )
    state = json.loads(state_file.read_text())
    tensors = load_file(str(opt_file))
    per_param: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        _, pid, name = key.split(".", 2)
        per_param.setdefault(int(pid), {})[name] = value
    for key, value in state.get("scalar_state", {}).items():
        pid, name = key.split(".", 1)
        per_param.setdefault(int(pid), {})[name] = value
    current = optimizer.state_dict()["param_groups"]
    groups = state["param_groups"]
    if [len(g["params"]) for g in groups] != [len(g["params"]) for g in current]:
        raise ValueError(
            f"{directory}: the saved optimizer has parameter groups of sizes "
            f"{[len(g['params']) for g in groups]} but the model has {[len(g['params']) for g in current]};"
            f" the run directory belongs to a different model configuration"
        )
    for g in groups:
        for k, v in g.items():
            if isinstance(v, list) and k != "params":
                g[k] = tuple(v)
    optimizer.load_state_dict({"state": per_param, "param_groups": groups})
    return state


# ---------------------------------------------------------------------------------------------------- trainer
def _split_episodes(episode_dirs: list[Path], tc: TrainConfig) -> tuple[list[Path], list[Path]]:
    episode_dirs = [Path(p).resolve() for p in episode_dirs]
    if tc.val_episodes:
        val = [Path(p).resolve() for p in tc.val_episodes]
        val_missing = [str(p) for p in val if not p.exists()]
        if val_missing:
            raise ValueError(f"TrainConfig.val_episodes: {val_missing} do not exist; pass episode directories")
        # Validation episodes may live outside the training data; those inside it are removed from training.
        return [p for p in episode_dirs if p not in val], val
    n_val = 0
    if tc.val_fraction > 0 and len(episode_dirs) >= 2:
        n_val = min(len(episode_dirs) - 1, max(1, int(round(tc.val_fraction * len(episode_dirs)))))
    order = np.random.default_rng(tc.seed).permutation(len(episode_dirs))
    val_idx = set(order[:n_val].tolist())
    return (
        [p for i, p in enumerate(episode_dirs) if i not in val_idx],
        [p for i, p in enumerate(episode_dirs) if i in val_idx],
    )


@dataclass
class TrainResult:
    run_dir: Path
    checkpoint_dir: Path
    iterations: int
    final_train: dict[str, float] = field(default_factory=dict)
    final_val: dict[str, float] = field(default_factory=dict)


class Trainer:
    """One training run (see the module docstring). ``Trainer(...).run()`` == ``train(...)``.

    :param resume: continue the run in ``out_dir`` from its ``train_state/`` (weights from ``checkpoint/``, optimizer,
        iteration, samples consumed, AMP scaler, torch RNG; an interrupted save is completed or discarded first and
        ``metrics.jsonl`` is cut back to the resumed iteration). The model architecture must match the saved one; the
        schedule fields of the model config (``SCHEDULE_FIELDS``, e.g. a larger ``max_iters`` or another
        ``batch_size``) may change.
    """

    def __init__(self, model_config: V4Config, train_config: TrainConfig, episode_dirs, out_dir, resume: bool = False):

        self.config, self.tc = model_config, train_config
        self.run_dir = Path(out_dir)
        self.device = (
            torch.device("cuda" if torch.cuda.is_available() else "cpu")
            if train_config.device == "auto"
            else torch.device(train_config.device)
        )
        if train_config.amp_dtype == "fp16" and self.device.type != "cuda":
            raise ValueError(
                f"TrainConfig.amp_dtype = 'fp16' needs a CUDA device (device is {self.device}); "
                f"use 'bf16' or 'fp32' on {self.device.type}"
            )
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(
                f"TrainConfig.device = {train_config.device!r} but CUDA is not available; use 'cpu' or 'auto'"
            )
        self.amp_dtype, self.precision = describe_precision(train_config.amp_dtype, self.device)  # "auto" resolved

        self.dist, self.device = init_from_env(self.device)  # torchrun: this rank's place and device

        self.allocator = keep_freed_memory_for(self.device, train_config.keep_freed_memory)
        world, accum = self.dist.world_size, train_config.grad_accum_steps
        if model_config.batch_size % (world * accum) != 0:
            raise ValueError(
                f"V4Config.batch_size = {model_config.batch_size} (the global batch) is not a multiple of "
                f"{world} process(es) x grad_accum_steps {accum}; use a multiple of {world * accum}"
            )
        init_config = None  # the --init-from checkpoint's config when this run starts from its weights
        if train_config.init_from and not resume:  # on resume the weights come from the run itself
            init_config = init_from.saved_config(train_config.init_from)
            init_from.check_compatible(init_config, model_config, train_config.init_from)
        state_dir = self.run_dir / STATE_DIR
        self._saved_batch_size = model_config.batch_size  # batch size of the run so far (old train states lack it)
        if resume:
            run = read_run(self.run_dir)
            _check_same_architecture(run["model_config"], model_config)
            self._saved_batch_size = int(
                flat_config_dict(run["model_config"]).get("batch_size", model_config.batch_size)
            )
            train_dirs = [Path(p) for p in run["train_episodes"]]
            val_dirs = [Path(p) for p in run["val_episodes"]]
        else:
            if (state_dir / "state.json").is_file() or (self.run_dir / STAGING_DIR / COMMIT_FILE).is_file():
                raise FileExistsError(
                    f"{self.run_dir} already holds a training run; pass resume=True (--resume) to "
                    f"continue it, or choose another output directory"
                )
            if not episode_dirs:
                raise ValueError("train: no episode directories; pass --data with episode folders")
            train_dirs, val_dirs = _split_episodes(list(episode_dirs), train_config)
            if not train_dirs:
                raise ValueError(
                    "train: every episode is a validation episode; leave some for training "
                    "(lower val_fraction or shorten val_episodes)"
                )
        self.train_dirs, self.val_dirs = train_dirs, val_dirs
        cache = train_config.cache_dir or None
        self.train_set = EpisodeDataset(
            train_dirs,
            model_config,
            augment=train_config.augment,
            jitter_strength=train_config.jitter_strength,
            augmentations=train_config.augmentations,
            cache_dir=cache,
        )
        self.val_set = EpisodeDataset(val_dirs, model_config, cache_dir=cache) if val_dirs else None

        torch.manual_seed(train_config.seed)
        build_config = model_config if init_config is None else init_from.build_config(init_config, model_config)
        if resume and model_config.backbone_pretrained_dir:
            # The weights come from the run's checkpoint: build the same architecture without the pretrained files.
            saved = V4Config.from_dict(read_checkpoint_meta(self.run_dir / LATEST_DIR)["config"])
            build_config = model_config.replace(backbone_config=saved.backbone_config, backbone_pretrained_dir="")
        self.model = build_model(build_config).to(self.device)
        if init_config is not None:
            init_from.load_weights(self.model, train_config.init_from, self.device)
        self.train_model = self.model  # what the training forward runs through (DDP-wrapped under torchrun)
        groups = self.model.param_groups()
        self.optimizer = torch.optim.AdamW(
            groups,
            lr=model_config.lr,
            betas=train_config.adam_betas,
            eps=train_config.adam_eps,
            weight_decay=model_config.weight_decay,
        )
        for g in self.optimizer.param_groups:
            g["base_lr"] = g["lr"]
        self.scaler = torch.amp.GradScaler("cuda", enabled=self.amp_dtype == "fp16")
        self.iteration = 0
        self.samples_seen = 0  # training samples consumed so far: where the data stream continues on resume
        self.tb = None  # TensorBoardLog while run() is running (tc.tensorboard)
        if resume:
            self._load_state()
        elif self.dist.is_main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.dist.is_main:
            self._write_run_file()
        if self.dist.enabled:
            self.train_model = DistributedDataParallel(
                self.model, device_ids=[self.device.index] if self.device.type == "cuda" else None
            )
            self.dist.barrier()  # rank 0 has made the run directory

    # ------------------------------------------------------------------------------------------ state files
    def _write_run_file(self) -> None:
        run = {
            "model_config": self.config.to_dict(),
            "train_config": self.tc.to_dict(),
            "train_episodes": [str(p) for p in self.train_dirs],
            "val_episodes": [str(p) for p in self.val_dirs],
        }
        (self.run_dir / RUN_FILE).write_text(json.dumps(run, indent=2, sort_keys=True))

    def _load_state(self) -> None:
        from safetensors.torch import load_file  # safetensors: loaded on first use, not on import

        if _finish_interrupted_save(self.run_dir):
            print(f"[para-train] {self.run_dir}: completed a save that was interrupted after it was fully written")
        weights = self.run_dir / LATEST_DIR / "model.safetensors"
        if not weights.is_file():
            raise FileNotFoundError(f"{self.run_dir} has no {LATEST_DIR}/model.safetensors; nothing to resume")
        state_file = self.run_dir / STATE_DIR / "state.json"
        if not state_file.is_file():
            raise FileNotFoundError(
                f"{self.run_dir} has no {STATE_DIR}/state.json; the run was not checkpointed yet "
                f"(nothing to resume) or the directory is incomplete"
            )
        state_iter = json.loads(state_file.read_text()).get("iteration")
        ckpt_iter = read_checkpoint_meta(self.run_dir / LATEST_DIR).get("extra", {}).get("iteration")
        if ckpt_iter != state_iter:
            snap = self.run_dir / SNAPSHOT_DIR / f"iter_{int(state_iter or 0):06d}"
            fix = (
                f"copy the snapshot {snap} over {self.run_dir / LATEST_DIR} (it holds the weights of iteration "
                f"{state_iter}) and resume again"
                if snap.is_dir()
                else "start a new run directory"
            )
            raise ValueError(
                f"resume: {self.run_dir / LATEST_DIR} holds the weights of iteration {ckpt_iter} but "
                f"{self.run_dir / STATE_DIR} the optimizer state of iteration {state_iter} (a save was "
                f"interrupted between the two); refusing to pair them: {fix}"
            )
        self.model.load_state_dict(load_file(str(weights), device=str(self.device)), strict=True)
        state = load_optimizer(self.optimizer, self.run_dir / STATE_DIR)
        for g in self.optimizer.param_groups:  # a resumed run may change lr / backbone_lr_mult
            g["base_lr"] = self.config.lr * (self.config.backbone_lr_mult if g.get("name") == "backbone" else 1.0)
        self.iteration = int(state["iteration"])
        # Train states written before samples_seen existed: the run's batch size was constant until then.
        self.samples_seen = int(state.get("samples_seen", self.iteration * self._saved_batch_size))
        _truncate_metrics(self.run_dir / METRICS_FILE, self.iteration)
        rng_file = self.run_dir / STATE_DIR / RNG_FILE
        if rng_file.is_file():  # random draws inside the model (e.g. DINOv3's RoPE augmentation) continue exactly
            rng = load_file(str(rng_file))
            torch.set_rng_state(rng["torch_cpu"])
            if torch.cuda.is_available():
                for i in range(torch.cuda.device_count()):
                    if f"torch_cuda_{i}" in rng:
                        torch.cuda.set_rng_state(rng[f"torch_cuda_{i}"], i)
        if state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])

    def save(self) -> Path:
        """Write ``checkpoint/`` (+ a snapshot under ``checkpoints/``) and the resumable ``train_state/``, both or
        neither (staged in ``.saving/``, see the module docstring)."""
        from safetensors.torch import save_file  # safetensors: loaded on first use, not on import

        staging = self.run_dir / STAGING_DIR
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
        extra = {"iteration": self.iteration, "trained_on": [str(p) for p in self.train_dirs]}
        if self.tc.augmentations.active:  # absent when off: checkpoints of runs without them stay as they were
            extra["augmentations"] = self.tc.augmentations.record()
        model_id = f"{self.config.model_kind}:{self.run_dir.name}:iter{self.iteration}"
        save_checkpoint(staging / LATEST_DIR, self.model, self.config, model_id=model_id, extra=extra)
        save_optimizer(
            self.optimizer,
            staging / STATE_DIR,
            {
                "iteration": self.iteration,
                "samples_seen": self.samples_seen,
                "batch_size": self.config.batch_size,
                "scaler": self.scaler.state_dict() if self.scaler.is_enabled() else {},
            },
        )
        rng = {"torch_cpu": torch.get_rng_state()}
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            rng.update({f"torch_cuda_{i}": torch.cuda.get_rng_state(i) for i in range(torch.cuda.device_count())})
        save_file(rng, str(staging / STATE_DIR / RNG_FILE))
        marker = staging / (COMMIT_FILE + ".tmp")
        marker.write_text(json.dumps({"iteration": self.iteration}))
        marker.replace(staging / COMMIT_FILE)  # from here on the save is complete: resume finishes it if need be
        _finish_interrupted_save(self.run_dir)
        latest = self.run_dir / LATEST_DIR
        if self.tc.keep_checkpoints > 0:
            snap_root = self.run_dir / SNAPSHOT_DIR
            snap = snap_root / f"iter_{self.iteration:06d}"
            if snap.exists():
                shutil.rmtree(snap)
            shutil.copytree(latest, snap)
            snaps = sorted(p for p in snap_root.iterdir() if p.is_dir() and p.name.startswith("iter_"))
            for old in snaps[: -self.tc.keep_checkpoints]:
                shutil.rmtree(old)
        return latest

    def _log(self, record: dict[str, Any]) -> None:
        with open(self.run_dir / METRICS_FILE, "a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
        if self.tb is not None:
            self.tb.record(record)
            if record.get("split") == "train":
                self.tb.learning_rates(int(record["iter"]), self.optimizer.param_groups)

    # ------------------------------------------------------------------------------------------------ steps
    def _autocast(self):
        dtype = torch_dtype(self.amp_dtype)
        return torch.autocast(device_type=self.device.type, dtype=dtype, enabled=self.amp_dtype != "fp32")

    def _set_lr(self) -> float:
        f = lr_factor(self.iteration, self.config, self.tc.min_lr_ratio)
        for g in self.optimizer.param_groups:
            g["lr"] = g["base_lr"] * f
        return self.optimizer.param_groups[0]["lr"]

    def train_step(self, batch) -> dict[str, float]:
        """One optimisation step on a collated batch, or on a list of this process's micro-batches (gradient
        accumulation; under torchrun gradients are also averaged across processes). Returns the loss terms (mean
        over the global batch), lr and gradient norm."""

        micro_batches = batch if isinstance(batch, (list, tuple)) else [batch]
        self.train_model.train()
        lr = self._set_lr()
        self.optimizer.zero_grad(set_to_none=True)
        sums: dict[str, float] = {}
        n_samples = 0
        for a, micro in enumerate(micro_batches):
            last = a == len(micro_batches) - 1
            sync = nullcontext() if last or not self.dist.enabled else self.train_model.no_sync()
            inputs, targets = make_batch(micro, self.config, self.device)
            with sync:
                with self._autocast():
                    out = self.train_model(inputs, targets)
                loss = out.losses["loss"]
                if not torch.isfinite(loss):
                    raise FloatingPointError(
                        f"iteration {self.iteration}: the loss is {loss.item()} (not finite); "
                        f"lower the learning rate or use amp_dtype='fp32'/'bf16'"
                    )
                # equal micro-batches: the mean of their means is this process's mean; DDP averages the processes
                self.scaler.scale(loss / len(micro_batches)).backward()
            for k, v in out.losses.items():
                sums[k] = sums.get(k, 0.0) + float(v.detach()) / len(micro_batches)
            n_samples += int(micro["images"].shape[0])
        self.scaler.unscale_(self.optimizer)
        params = [p for g in self.optimizer.param_groups for p in g["params"]]
        max_norm = self.tc.grad_clip_norm if self.tc.grad_clip_norm > 0 else float("inf")
        grad_norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.iteration += 1
        self.samples_seen += n_samples * self.dist.world_size
        stats = self.dist.all_reduce_mean(sums)
        return {**stats, "lr": lr, "grad_norm": float(grad_norm)}

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Validation metrics on held-out episodes (module docstring); {} when there are none.

        The loss terms come from the model run with the targets, so the v4 gripper/rotation CEs (``gripper_ce``,
        ``rotation_ce``) are those of the head at the voxel it trains at (a GT voxel). Models with a voxel
        distribution (``has_voxel_volume``, ``para_core.model.interface``) also report ``gripper_ce_at_argmax`` /
        ``rotation_ce_at_argmax``:
        the same CEs from the model run without targets, i.e. at the argmax voxel that inference reads (one more
        forward per batch); the gap between the two pairs is what mislocalised steps cost the gripper and rotation.
        Models without voxels (coordinate regression) report neither.
        """

        if self.val_set is None or len(self.val_set) == 0:
            return {}
        self.model.eval()
        n = len(self.val_set)
        idx = np.unique(np.linspace(0, n - 1, min(n, self.tc.val_max_samples)).round().astype(int))
        sums: dict[str, float] = {}
        count, steps = 0, 0
        bs = self.config.batch_size
        for start in range(0, len(idx), bs):
            batch = default_collate([self.val_set[int(i)] for i in idx[start : start + bs]])
            inputs, targets = make_batch(batch, self.config, self.device)
            with self._autocast():
                out = self.model(inputs, targets)
                at_argmax = self.model(inputs) if self.model.has_voxel_volume else None  # what inference reads
            B = inputs.images.shape[0]
            for k, v in out.losses.items():
                sums[k] = sums.get(k, 0.0) + float(v) * B
            if at_argmax is not None:
                for key, logits, bins in (
                    ("gripper_ce_at_argmax", at_argmax.gripper_logits, targets.gripper_bin),
                    ("rotation_ce_at_argmax", at_argmax.rotation_logits, targets.rotation_bins),
                ):
                    ce = Fn.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), bins.reshape(-1))  # mean
                    sums[key] = sums.get(key, 0.0) + float(ce) * B
            chunks = self.model.decode(out, refine=True)
            gt = targets.positions_world.double().cpu().numpy()  # (B, T, 3)
            err = np.stack([np.linalg.norm(c.positions_world - g, axis=-1) for c, g in zip(chunks, gt)])  # (B, T)
            sums["pos_err_m"] = sums.get("pos_err_m", 0.0) + float(err.sum())
            sums["pos_err_last_m"] = sums.get("pos_err_last_m", 0.0) + float(err[:, -1].sum())
            for t in range(err.shape[1]):  # the error of every horizon step (TensorBoard: val/pos_err_step<t>_m)
                sums[f"pos_err_step{t}_m"] = sums.get(f"pos_err_step{t}_m", 0.0) + float(err[:, t].sum())
            if self.tb is not None and start == 0:
                self._overlays(batch, chunks, gt)
            count += B
            steps += err.size
        metrics = {k: v / count for k, v in sums.items() if k not in ("pos_err_m",)}
        metrics["pos_err_m"] = sums["pos_err_m"] / steps
        self.model.train()
        return metrics

    def _overlays(self, batch: dict, chunks, gt: np.ndarray) -> None:
        """The first few validation samples' first view with the GT (green) and predicted (red) paths."""

        for k in range(min(self.tc.tensorboard_images, len(chunks))):
            img = overlay_paths(
                batch["images"][k, 0].numpy(),
                batch["K_img"][k, 0].double().numpy(),
                batch["T_world_cam"][k, 0].double().numpy(),
                gt[k],
                chunks[k].positions_world,
            )
            self.tb.image(f"val/overlay_{k}", self.iteration, img)

    # -------------------------------------------------------------------------------------------------- run
    def _loader(self):
        sampler = ResumableBatchSampler(
            len(self.train_set),
            self.config.batch_size,
            self.tc.seed,
            start_sample=self.samples_seen,
            rank=self.dist.rank,
            world_size=self.dist.world_size,
            micro_batches=self.tc.grad_accum_steps,
        )
        # Its own generator: creating the loader's iterator must not draw from the global RNG that the model uses,
        # or a resumed run would diverge from an uninterrupted one. Workers are seeded from (seed, iteration).
        generator = torch.Generator().manual_seed(self.tc.seed * 1_000_003 + self.iteration)
        return torch.utils.data.DataLoader(
            self.train_set,
            batch_sampler=sampler,
            num_workers=self.tc.num_workers,
            pin_memory=self.device.type == "cuda",
            persistent_workers=False,
            worker_init_fn=_seed_worker if self.tc.num_workers > 0 else None,
            generator=generator,
        )

    def run(self) -> TrainResult:
        """Train until ``max_iters``; checkpoints, validation, metrics and the loss curve along the way."""
        from tqdm.auto import tqdm  # tqdm: loaded on first use, not on import

        cfg, tc = self.config, self.tc
        total = cfg.max_iters
        main = self.dist.is_main
        if tc.tensorboard and self.tb is None and main:
            self.tb = TensorBoardLog(self.run_dir, purge_step=self.iteration + 1 if self.iteration else None)
        final_train: dict[str, float] = {}
        final_val: dict[str, float] = {}
        if self.iteration >= total:
            print(
                f"[para-train] {self.run_dir} is already at iteration {self.iteration} >= max_iters {total}; "
                f"nothing to do (raise --max-iters to continue)"
            )
        else:
            if main:
                print(f"[para-train] {self.precision}", flush=True)
            bar = tqdm(
                total=total,
                initial=self.iteration,
                disable=not (tc.progress and main),
                desc="train",
                unit="it",
                dynamic_ncols=True,
            )
            window: dict[str, list[float]] = {}
            t_last, it_last = time.perf_counter(), self.iteration
            loader = iter(self._loader())
            try:
                while self.iteration < total:
                    stats = self.train_step([next(loader) for _ in range(tc.grad_accum_steps)])
                    for k, v in stats.items():
                        window.setdefault(k, []).append(v)
                    bar.update(1)
                    term = self.model.position_loss_term
                    bar.set_postfix(
                        loss=f"{stats['loss']:.3f}",
                        **{term: f"{stats[term]:.3f}"},
                        grip=f"{stats['gripper_ce']:.3f}",
                        rot=f"{stats['rotation_ce']:.3f}",
                        lr=f"{stats['lr']:.2e}",
                    )
                    it = self.iteration
                    if it % tc.log_interval == 0 or it == total:
                        now = time.perf_counter()
                        final_train = {k: float(np.mean(v)) for k, v in window.items()}
                        if main:  # only rank 0 writes
                            self._log(
                                {
                                    "split": "train",
                                    "iter": it,
                                    **final_train,
                                    "samples_per_s": (it - it_last) * cfg.batch_size / max(now - t_last, 1e-9),
                                }
                            )
                        window, t_last, it_last = {}, now, it
                    if ((tc.eval_interval and it % tc.eval_interval == 0) or it == total) and main:
                        final_val = self.evaluate()
                        if final_val:
                            self._log({"split": "val", "iter": it, **final_val})
                            key = self.model.position_loss_term
                            bar.write(
                                f"[val @ {it}] {key} {final_val[key]:.3f}  pos_err "
                                f"{final_val['pos_err_m'] * 100:.1f} cm  (last step "
                                f"{final_val['pos_err_last_m'] * 100:.1f} cm)"
                            )
                    if (tc.ckpt_interval and it % tc.ckpt_interval == 0) or it == total:
                        if main:
                            self.save()
                        self.dist.barrier()
            finally:
                bar.close()
                del loader
                if self.tb is not None:
                    self.tb.close()
                    self.tb = None
        latest = self.run_dir / LATEST_DIR
        if main and not (latest / "model.safetensors").is_file():
            self.save()
        if main:
            plot_metrics(self.run_dir / METRICS_FILE, self.run_dir / CURVE_FILE)
        self.dist.barrier()
        return TrainResult(
            run_dir=self.run_dir,
            checkpoint_dir=latest,
            iterations=self.iteration,
            final_train=final_train,
            final_val=final_val,
        )


def _swap_in(staged: Path, target: Path) -> None:
    """Replace directory ``target`` by ``staged`` (two renames; the old one is deleted afterwards)."""
    old = target.with_name(target.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    if target.exists():
        target.rename(old)
    staged.rename(target)
    if old.exists():
        shutil.rmtree(old)


def _finish_interrupted_save(run_dir: Path) -> bool:
    """Move a complete staged save (``.saving/`` with ``complete.json``) into place; discard an incomplete one.
    Idempotent, so a crash in the middle of it is finished by the next call. -> True if something was moved."""
    staging = run_dir / STAGING_DIR
    if not staging.exists():
        return False
    if not (staging / COMMIT_FILE).is_file():
        shutil.rmtree(staging)  # written only partly: the previous checkpoint/ + train_state/ pair is untouched
        return False
    moved = False
    for name in (STATE_DIR, LATEST_DIR):
        if (staging / name).is_dir():
            _swap_in(staging / name, run_dir / name)
            moved = True
    shutil.rmtree(staging)
    return moved


def _truncate_metrics(path: Path, iteration: int) -> int:
    """Drop ``metrics.jsonl`` lines logged after ``iteration`` (and unreadable ones, e.g. cut by a crash); they
    belong to work lost since the checkpoint and would be logged again. -> number of lines dropped."""
    if not path.is_file():
        return 0
    keep, dropped = [], 0
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            ok = isinstance(record, dict) and int(record.get("iter", 0)) <= iteration
        except (json.JSONDecodeError, TypeError, ValueError):
            ok = False
        if ok:
            keep.append(line)
        else:
            dropped += 1
    if dropped:
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text("".join(line + "\n" for line in keep))
        tmp.replace(path)
    return dropped


def _seed_worker(worker_id: int) -> None:
    seed = torch.initial_seed() % 2**32
    np.random.seed(seed)


def _check_same_architecture(saved: dict[str, Any], config: V4Config) -> None:
    saved, now = flat_config_dict(saved, "the saved run's model_config"), config.to_flat_dict()
    diff = sorted(k for k in set(saved) | set(now) if k not in SCHEDULE_FIELDS and saved.get(k) != now.get(k))
    if diff:
        raise ValueError(
            f"resume: the model config differs from the saved run in {diff}; resume with the run's own "
            f"config (only {list(SCHEDULE_FIELDS)} may change) or start a new run directory"
        )


def read_run(run_dir) -> dict[str, Any]:
    """The ``run.json`` of a run directory: model_config (dict), train_config (dict), train/val episode lists."""
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        raise FileNotFoundError(
            f"{run_dir} is not a para-train run directory (no {RUN_FILE}); pass the --out directory of an earlier run"
        )
    return json.loads(path.read_text())


def train(
    model_config: V4Config, train_config: TrainConfig, episode_dirs, out_dir, resume: bool = False
) -> TrainResult:
    """Train a policy on episode directories; see ``Trainer`` and the module docstring."""
    return Trainer(model_config, train_config, episode_dirs, out_dir, resume=resume).run()


# ------------------------------------------------------------------------------------------------------ plots
def read_metrics(path) -> list[dict[str, Any]]:
    path = Path(path)
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def plot_metrics(metrics_path, png_path) -> Path | None:
    """Loss curve PNG from ``metrics.jsonl``: train loss terms (left), validation CE and position error (right)."""
    import matplotlib  # matplotlib: loaded on first use, not on import

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # matplotlib: loaded on first use, not on import

    rows = read_metrics(metrics_path)
    train_rows = [r for r in rows if r.get("split") == "train"]
    val_rows = [r for r in rows if r.get("split") == "val"]
    if not train_rows and not val_rows:
        return None
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4))
    for key in ("loss", *MAIN_LOSS_TERMS, "gripper_ce", "rotation_ce"):
        pts = [(r["iter"], r[key]) for r in train_rows if key in r]
        if pts:
            ax0.plot(*zip(*pts), label=f"train {key}")
    for key in ("loss", *MAIN_LOSS_TERMS):
        pts = [(r["iter"], r[key]) for r in val_rows if key in r]
        if pts:
            ax0.plot(*zip(*pts), "o--", label=f"val {key}")
    ax0.set_xlabel("iteration")
    ax0.set_ylabel("cross-entropy (nats)")
    ax0.set_title("losses")
    ax0.grid(alpha=0.3)
    ax0.legend(fontsize=8)
    pts = [(r["iter"], 100 * r["pos_err_m"]) for r in val_rows if "pos_err_m" in r]
    if pts:
        ax1.plot(*zip(*pts), "o-", label="mean over steps")
        pts_last = [(r["iter"], 100 * r["pos_err_last_m"]) for r in val_rows if "pos_err_last_m" in r]
        ax1.plot(*zip(*pts_last), "s-", label="last step")
        ax1.legend(fontsize=8)
    else:
        ax1.text(0.5, 0.5, "no validation episodes", ha="center", va="center", transform=ax1.transAxes)
    ax1.set_xlabel("iteration")
    ax1.set_ylabel("position error (cm)")
    ax1.set_title("validation: decoded chunk vs ground truth")
    ax1.grid(alpha=0.3)
    fig.tight_layout()
    png_path = Path(png_path)
    fig.savefig(png_path, dpi=100)
    plt.close(fig)
    return png_path
