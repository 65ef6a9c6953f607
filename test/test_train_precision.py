"""``TrainConfig.amp_dtype = "auto"`` and the node's ``dtype: auto`` (``hardware.describe_precision``): bf16 only on a
CPU with bf16 instructions, and the log line says why."""

from __future__ import annotations

import pytest
import torch

from para_core.model import hardware
from para_core.train.trainer import TrainConfig


@pytest.mark.parametrize(
    ("flags", "asked", "expected", "said"),
    [
        (frozenset({"avx2", "fma"}), "auto", "fp32", "auto: this CPU has no bf16 instructions"),
        (frozenset({"avx512f", "avx512_bf16"}), "auto", "bf16", "auto: this CPU has bf16 instructions"),
        (frozenset({"amx_bf16"}), "auto", "bf16", "has bf16 instructions"),
        (frozenset({"avx2"}), "fp32", "fp32", "precision fp32 (this CPU has no bf16"),
        (frozenset({"avx2"}), "bf16", "bf16", "bf16 is emulated here, several times slower than fp32"),
        (frozenset({"avx512_bf16"}), "bf16", "bf16", "precision bf16 (this CPU has bf16 instructions)"),
    ],
)
def test_auto_precision_follows_the_cpu_flags(flags, asked, expected, said):
    resolved, why = hardware.describe_precision(asked, torch.device("cpu"), flags=flags)
    assert resolved == expected
    assert said in why


def test_emulation_warning_only_when_bf16_is_emulated(monkeypatch):
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx512_bf16"}))  # the process's own flags
    assert "emulated" not in hardware.describe_precision("bf16", torch.device("cpu"))[1]


def test_train_config_takes_auto_and_refuses_other_names():
    assert TrainConfig(amp_dtype="auto").amp_dtype == "auto"
    with pytest.raises(ValueError, match=r"amp_dtype = 'int8' is invalid: use auto or one of"):
        TrainConfig(amp_dtype="int8")


def test_trainer_resolves_auto_and_says_why(monkeypatch, tmp_path):
    import numpy as np

    from para_core.data.synthetic import synthetic_episode
    from para_core.model.config import V4Config
    from para_core.train.trainer import Trainer

    cfg = V4Config.tiny()
    episodes = [synthetic_episode(cfg, np.random.default_rng(0), n_frames=8).save(tmp_path / "ep0")]
    for flags, expected in ((frozenset({"avx2"}), "fp32"), (frozenset({"avx512_bf16"}), "bf16")):
        monkeypatch.setattr(hardware, "cpu_flags", lambda flags=flags: flags)
        tc = TrainConfig(device="cpu", amp_dtype="auto", val_fraction=0.0, num_workers=0, tensorboard=False)
        trainer = Trainer(cfg, tc, episodes, tmp_path / f"run_{expected}")
        assert trainer.amp_dtype == expected and trainer.precision.startswith(f"precision {expected} (auto: ")
        autocast = trainer._autocast()
        assert autocast._enabled == (expected == "bf16")
        if expected == "bf16":
            assert autocast.fast_dtype == torch.bfloat16
