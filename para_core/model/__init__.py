"""The PARA models and what every model shares: ``V4Config``, camera geometry, voxel grids, backbones, the three
heads (``v4``, ``dino_kv``, ``regression``), targets/decoding (``actions``), checkpoints and the ``Policy`` entry point.
"""
