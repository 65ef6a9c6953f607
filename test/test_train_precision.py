"""``TrainConfig.amp_dtype = "auto"``: bf16 autocast only on a CPU with bf16 instructions, and the log line says why."""

from __future__ import annotations

import pytest
import torch

from para_core.model import hardware
from para_core.train.trainer import TrainConfig, _resolve_amp_dtype


@pytest.mark.parametrize(
    ("flags", "asked", "expected", "said"),
    [
        (frozenset({"avx2", "fma"}), "auto", "fp32", "auto: this CPU has no bf16 instructions"),
        (frozenset({"avx512f", "avx512_bf16"}), "auto", "bf16", "auto: this CPU has bf16 instructions"),
        (frozenset({"amx_bf16"}), "auto", "bf16", "has bf16 instructions"),
        (frozenset({"avx2"}), "fp32", "fp32", "precision fp32 (this CPU has no bf16"),
        (frozenset({"avx2"}), "bf16", "bf16", "emulated here, several times slower than fp32"),
        (frozenset({"avx512_bf16"}), "bf16", "bf16", "precision bf16 (this CPU has bf16 instructions)"),
    ],
)
def test_auto_precision_follows_the_cpu_flags(monkeypatch, flags, asked, expected, said):
    monkeypatch.setattr(hardware, "cpu_flags", lambda: flags)
    resolved, why = _resolve_amp_dtype(asked, torch.device("cpu"))
    assert resolved == expected
    assert said in why


def test_emulation_warning_only_when_bf16_is_emulated(monkeypatch):
    monkeypatch.setattr(hardware, "cpu_flags", lambda: frozenset({"avx512_bf16"}))
    assert "emulated" not in _resolve_amp_dtype("bf16", torch.device("cpu"))[1]


def test_train_config_takes_auto_and_refuses_other_names():
    assert TrainConfig(amp_dtype="auto").amp_dtype == "auto"
    with pytest.raises(ValueError, match=r"amp_dtype = 'int8' is invalid: use auto or one of"):
        TrainConfig(amp_dtype="int8")
