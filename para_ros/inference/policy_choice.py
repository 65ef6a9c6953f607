"""Which policy the inference node runs and how: a checkpoint, or an untrained random model of a preset (demos,
tests), on a device and precision, with a decoding mode. Built from the node's parameter values (a plain mapping),
so the choice and its loading are testable without ROS.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from para_core.model.config import V4Config
from para_core.model.decoding import DecodingConfig
from para_core.model.familiarity import Familiarity
from para_core.model.policy import Policy


@dataclass(frozen=True)
class PolicyChoice:
    """The inference node's ``policy`` parameters (docs/parameters.md), as one value.

    :param checkpoint: checkpoint directory; empty: an untrained model of ``random_preset`` seeded ``random_seed``.
    :param device: torch device; None = cuda if available, else cpu.
    :param familiarity_memory: a directory holding a familiarity memory (``para_core.model.familiarity``) to use
        instead of the checkpoint's own; empty: the checkpoint's, if it has one.
    """

    checkpoint: str = ""
    random_preset: str = "tiny"
    random_seed: int = 0
    device: str | None = None
    dtype: str = "fp32"
    fast_path: bool = False
    compile_mode: str = "off"
    keep_freed_memory: bool = True
    decoding: DecodingConfig = field(default_factory=DecodingConfig)
    familiarity_memory: str = ""

    @classmethod
    def from_parameters(cls, p: Mapping[str, Any]) -> PolicyChoice:
        """From the inference node's parameter values (``device: auto`` -> None)."""
        return cls(
            checkpoint=p["checkpoint"],
            random_preset=p["random_preset"],
            random_seed=int(p["random_seed"]),
            device=None if p["device"] == "auto" else p["device"],
            dtype=p["dtype"],
            fast_path=bool(p["fast_path"]),
            compile_mode=p["compile_mode"],
            keep_freed_memory=bool(p["keep_freed_memory"]),
            decoding=DecodingConfig(
                mode=p["decoding"],
                top_k=int(p["decoding_top_k"]),
                max_speed_m_s=float(p["decoding_max_speed_m_s"]),
                motion_cost_per_m=float(p["decoding_motion_cost_per_m"]),
                fusion_tau_s=float(p["fusion_tau_s"]),
            ),
            familiarity_memory=p.get("familiarity_memory", ""),
        )

    def load(self, warn: Callable[[str], None]) -> Policy:
        """The policy; ``warn`` is told when it is an untrained random model (its actions mean nothing)."""
        options = dict(
            device=self.device,
            dtype=self.dtype,
            fast=self.fast_path,
            compile_mode=self.compile_mode,
            keep_freed_memory=self.keep_freed_memory,  # on a CPU device only
            decoding=self.decoding,
        )
        if self.checkpoint:
            policy = Policy.from_checkpoint(self.checkpoint, **options)
            if self.familiarity_memory:  # ValueError: missing files, or a memory of another checkpoint or views
                policy.set_familiarity(Familiarity.load(self.familiarity_memory))
            return policy
        if self.familiarity_memory:
            raise ValueError(
                f"familiarity_memory {self.familiarity_memory!r} needs a checkpoint: a memory is of one checkpoint's "
                f"features, and an untrained random model has none"
            )
        warn(
            "no checkpoint given: using an UNTRAINED policy with random weights "
            f"(preset {self.random_preset}, seed {self.random_seed}); its actions mean "
            "nothing. Pass checkpoint:=<dir> for a trained one."
        )
        return Policy.random_init(V4Config.preset(self.random_preset), seed=self.random_seed, **options)
