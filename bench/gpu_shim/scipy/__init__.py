"""A NumPy stand-in for the part of SciPy the benchmarks need on a machine without SciPy (bench/gpu_shim/README.md)."""
