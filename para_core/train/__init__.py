"""Training: ``trainer`` (``TrainConfig``, the loop, checkpoints, resume), ``cli`` (``para-train``), ``distributed``
(torchrun + DDP), ``tensorboard_log``.
"""
