"""``scipy.spatial`` stand-in: only ``transform.Rotation`` (bench/gpu_shim/README.md)."""
