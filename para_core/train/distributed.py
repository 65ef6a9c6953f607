"""Multi-process training with PyTorch's own engine: ``torchrun`` + ``DistributedDataParallel``.

``torchrun --nproc_per_node N -m para_core.train.cli ...`` starts N processes; each reads ``RANK``, ``LOCAL_RANK``
and ``WORLD_SIZE`` from the environment (:func:`init_from_env`), joins the process group (NCCL on GPUs, gloo on
CPUs), takes GPU ``LOCAL_RANK`` and wraps the model in DDP (gradients averaged across processes after backward).
Multi-node: ``torchrun --nnodes M --node_rank K --nproc_per_node N --rdzv_backend c10d --rdzv_endpoint HOST:29500
-m para_core.train.cli ...`` on every node. Started without torchrun (no ``WORLD_SIZE``), training is one process.

Batch semantics: ``V4Config.batch_size`` is the GLOBAL batch of one iteration, whatever the number of processes or
the gradient accumulation: each process takes its contiguous share of every global batch of the resumable data
stream (:class:`para_core.train.trainer.ResumableBatchSampler`) and splits it into ``grad_accum_steps`` micro-batches.
The learning rate therefore means the same thing with 1 or N processes (no scaling rule is applied), a run is
numerically the same (to float tolerance) with 1 or N processes, and resume works with another process count
(the stream position is the number of samples consumed, which does not depend on it). ``batch_size`` must be a
multiple of ``world_size * grad_accum_steps``.

Only rank 0 writes: checkpoints, the train state, ``metrics.jsonl``, TensorBoard, the loss curve; it also runs
validation. The other ranks wait for it at a barrier after each save.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DistContext:
    """This process's place in the run (rank 0 of 1 without torchrun)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def barrier(self) -> None:
        if self.enabled:
            torch.distributed.barrier()

    def all_reduce_mean(self, values: dict[str, float]) -> dict[str, float]:
        """The mean over ranks of each value (every rank gets it)."""
        if not self.enabled or not values:
            return values
        keys = sorted(values)
        t = torch.tensor([float(values[k]) for k in keys], dtype=torch.float64)
        torch.distributed.all_reduce(t)
        return {k: float(v) / self.world_size for k, v in zip(keys, t.tolist())}


def init_from_env(device: torch.device) -> tuple[DistContext, torch.device]:
    """Join the process group torchrun describes in the environment; returns the context and this rank's device
    (``cuda:LOCAL_RANK`` for a CUDA run)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistContext(), device
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    if device.type == "cuda":
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return DistContext(rank, world, local), device


def shutdown() -> None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
