"""What the training tests share: one torch thread per test, and a quick CPU TrainConfig (no workers, no
checkpoints, no validation, no progress bar) with the test's own fields on top."""

from __future__ import annotations

import pytest
import torch

from para_core.train.trainer import TrainConfig


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Autouse in a module that imports it: a test's small matrices run faster on one thread than on a busy pool."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def quick(**kw) -> TrainConfig:
    base = dict(
        device="cpu",
        num_workers=0,
        log_interval=1,
        eval_interval=0,
        ckpt_interval=0,
        keep_checkpoints=1,
        val_fraction=0.0,
        progress=False,
    )
    return TrainConfig(**{**base, **kw})
