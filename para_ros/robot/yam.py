"""The I2RT YAM as an arm description: ``config/yam.yaml`` (its i2rt model, limits and wrist-camera mount) read into
an :class:`~para_ros.robot.arm.ArmDescription`.

The YAM is one arm among any the executor can drive; everything arm-generic lives in :mod:`para_ros.robot.arm`. The
names here (``YamConfig``, ``YamLimits``, ``YamModelConfig``) are those of the generic classes, kept for the code and
scripts that speak of the YAM.
"""

from __future__ import annotations

from pathlib import Path

from para_ros.paths import config_file
from para_ros.robot.arm import (
    WORKSPACE_TOL_M,
    ArmDescription,
    ArmLimits,
    ArmModel,
    WristCameraMount,
    load_arm_description,
)

__all__ = [
    "WORKSPACE_TOL_M",
    "WristCameraMount",
    "YamConfig",
    "YamLimits",
    "YamModelConfig",
    "load_yam_config",
]

YamConfig = ArmDescription
YamLimits = ArmLimits
YamModelConfig = ArmModel


def load_yam_config(path: str | Path | None = None) -> ArmDescription:
    """Read ``config/yam.yaml`` (or ``path``), the YAM's arm description.

    :raises ValueError: naming the file and the bad or missing key.
    """
    if path is None or str(path) == "":
        path = config_file("yam.yaml")
    return load_arm_description(path)
