"""The model registry: ``V4Config.model_kind`` -> the model class that builds it. It lives apart from the models it
registers so that each model module imports only what it uses and a new head registers here, in one line. What a
registered class implements: ``para_core.model.interface`` (``build_model`` checks it)."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from para_core.model.config import V4Config
from para_core.model.dino_kv import ParaDinoKVModel
from para_core.model.interface import check_model_interface
from para_core.model.regression import CoordRegressionModel
from para_core.model.v4 import ParaV4Model

MODEL_REGISTRY: dict[str, Callable[[V4Config], nn.Module]] = {
    "para_v4": ParaV4Model,
    "coord_regression": CoordRegressionModel,
    "para_dino_kv": ParaDinoKVModel,
}


def build_model(config: V4Config) -> nn.Module:
    """The model ``config.model_kind`` names, built from ``config`` (random weights; checkpoints load into it).
    Raises TypeError when the registered class does not implement ``para_core.model.interface.ParaModel``."""
    try:
        factory = MODEL_REGISTRY[config.model_kind]
    except KeyError:
        raise ValueError(
            f"V4Config.model_kind = {config.model_kind!r} is not registered; use one of {sorted(MODEL_REGISTRY)}"
        ) from None
    model = factory(config)
    check_model_interface(model)
    return model
