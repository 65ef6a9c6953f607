"""para_core: the ROS-free core of PARA (Pixel-Aligned Robot Actions) v4.

Packages (each module has one job; docs/contracts.md has the map of the whole repository):

- ``model``  -- ``config`` (``V4Config``: every hyperparameter, validated, presets), ``geometry`` (projection,
  unprojection, intrinsics rescaling), ``voxels`` (the adaptive voxel grid), ``backbones`` (DINOv3 / InternVL through
  ``transformers``), the heads ``v4`` (the volumetric model and its losses), ``dino_kv`` and ``regression`` (the
  coordinate-regression baseline) with what they share (``model_io``: inputs, targets, outputs; ``layers``),
  ``registry`` (``model_kind`` -> model), ``actions`` (targets and decoding), ``checkpoint``
  (``model.safetensors`` + ``config.json``; nothing is unpickled), ``rotations`` (quaternion / matrix maths),
  ``hardware`` (the precision ``auto`` picks, the CPU allocator that keeps freed memory) and ``policy``
  (``Policy``: the single inference entry point).
- ``data``   -- ``dataset`` (``Episode`` on disk, ``EpisodeDataset``) and ``synthetic`` (cameras, trajectories,
  episodes for tests, demos and benchmarks).
- ``train``  -- ``trainer`` (``TrainConfig``, the loop, checkpoints, resume), ``cli`` (``para-train``),
  ``distributed`` (torchrun + DDP), ``tensorboard_log``.
- ``eval``   -- ``metrics`` (chunk errors against a recording), ``figures``, ``method_figure`` (the paper's figure),
  ``calibration`` (the camera calibration check).

Importing ``para_core`` imports nothing heavy; import the submodules you need.
"""

__version__ = "0.1.0"
