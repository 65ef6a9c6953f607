"""para_core: the ROS-free core of PARA (Pixel-Aligned Robot Actions) v4.

Modules (each has one job):

- ``config``      -- ``V4Config``: every hyperparameter, validated, with ``paper()`` / ``tiny()`` presets.
- ``geometry``    -- pinhole projection / ray-plane unprojection / adaptive z range / intrinsics rescaling (torch).
- ``voxels``      -- the per-view adaptive voxel grid and point -> voxel lookup (shared by model and labels).
- ``backbones``   -- the swappable image backbone interface (DINOv3 through ``transformers``).
- ``model``       -- the v4 volumetric model, its losses and the model registry (``model_kind``).
- ``actions``     -- ground-truth trajectory -> training targets, model outputs -> action chunk.
- ``checkpoint``  -- save/load a model directory (``model.safetensors`` + ``config.json``); nothing is unpickled.
- ``policy``      -- ``Policy``: the single inference entry point (see docs/contracts.md).
- ``dataset``     -- ``Episode`` (one demonstration on disk: meta.json + arrays.npz) and ``EpisodeDataset``.
- ``training``    -- ``TrainConfig`` and the trainer (AdamW groups, warm-up + cosine, checkpoints, resume).
- ``train_cli``   -- the ``para-train`` command.
- ``evaluation``  -- chunk metrics against a recorded trajectory (position, rotation, gripper).
- ``figures``     -- PNG figures: path overlays, error per step, the response volume of one step.
- ``rotations``   -- quaternion (x, y, z, w) / rotation-matrix / rigid-transform maths in numpy.
- ``synthetic``   -- synthetic cameras / trajectories / images / episodes for tests, demos and benchmarks.

Importing ``para_core`` imports nothing heavy; import the submodules you need.
"""

__version__ = "0.1.0"
