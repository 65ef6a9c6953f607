"""What the machine offers inference: which precision is fast on a device, and a host allocator that keeps its memory.

Two facts decide the CPU settings (``bench/bench_policy.py`` prints both for the machine it runs on; the figures
measured here are in docs/benchmarks.md, "CPU precision and allocator"):

* **bf16 matrix products are several times faster than fp32** where the CPU has bf16 dot-product instructions
  (AVX512_BF16 or AMX-BF16). Without them oneDNN emulates bf16 and it is SLOWER than fp32, and fp16 is emulated on
  CPUs without AVX512-FP16 / AMX-FP16 (far slower still). So ``dtype="auto"`` is bf16 on such a CPU and fp32 on
  others, and on a GPU bf16 where it is supported natively, else fp16 (tensor cores either way).
* **A large share of a CPU forward goes to page faults**: glibc hands every block above its mmap threshold back
  to the kernel when it is freed, so each forward maps its large activations afresh and the kernel zeroes every page
  on first touch. :func:`keep_freed_memory` tells glibc to serve every block from its heaps and keep what is freed for
  the next forward: no fault once the first few forwards have sized the heap. The price is that the process keeps its
  peak footprint instead of shrinking between forwards, which an inference process reaches on every forward anyway.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

import torch

from para_core.model.config import INFERENCE_DTYPES

# glibc's mallopt parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_MAX = -4
KEEP_TRIM_THRESHOLD_BYTES = 2**31 - 1
"""Free memory at the top of a heap above this is handed back to the kernel: the largest value mallopt takes (2 GiB),
above the free top of any forward of ours."""


@functools.lru_cache(maxsize=1)
def cpu_flags() -> frozenset[str]:
    """The CPU feature flags of ``/proc/cpuinfo`` (Linux); empty elsewhere or when unreadable."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def cpu_has_fast_bf16(flags: frozenset[str] | None = None) -> bool:
    """Whether the CPU multiplies bf16 matrices in hardware (AVX512_BF16 or AMX-BF16): then bf16 beats fp32."""
    flags = cpu_flags() if flags is None else flags
    return bool({"avx512_bf16", "amx_bf16"} & flags)


def resolve_inference_dtype(name: str, device: torch.device, flags: frozenset[str] | None = None) -> str:
    """A name of ``INFERENCE_DTYPES`` -> one of ``DTYPES`` for ``device``: ``auto`` is the fastest precision the
    device computes natively (module docstring); any other name is returned as it is."""
    if name not in INFERENCE_DTYPES:
        raise ValueError(f"dtype={name!r}; use one of {INFERENCE_DTYPES}")
    if name != "auto":
        return name
    device = torch.device(device)
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported(including_emulation=False) else "fp16"
    if device.type == "cpu":
        return "bf16" if cpu_has_fast_bf16(flags) else "fp32"
    return "fp32"


def slow_precision_warning(name: str, device: torch.device, flags: frozenset[str] | None = None) -> str | None:
    """Why ``name`` (one of ``DTYPES``) will be slow on ``device``, or None: fp16 on a CPU without fp16 matrix
    instructions (AVX512-FP16 / AMX-FP16) is emulated, about 100x slower than fp32 (module docstring)."""
    flags = cpu_flags() if flags is None else flags
    if name == "fp16" and torch.device(device).type == "cpu" and not {"avx512_fp16", "amx_fp16"} & flags:
        return (
            "dtype fp16 on a CPU without fp16 matrix instructions is emulated, about 100x slower than fp32 "
            "(docs/benchmarks.md); use 'auto', 'bf16' or 'fp32'"
        )
    return None


@functools.lru_cache(maxsize=1)
def _glibc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
        libc.gnu_get_libc_version.restype = ctypes.c_char_p
        libc.gnu_get_libc_version()  # only glibc has it: musl and others keep their own policy
    except (OSError, AttributeError):
        return None
    return libc


def keep_freed_memory() -> str:
    """Make glibc keep freed memory for reuse instead of returning large blocks to the kernel (module docstring):
    every allocation from the heaps (no mmap), no trimming. For the whole process, from now on; blocks already
    mapped stay mapped until freed. Returns what was done, for logs (a no-op off glibc, said so)."""
    libc = _glibc()
    if libc is None:
        return "allocator unchanged (not glibc)"
    ok = libc.mallopt(_M_MMAP_MAX, 0) == 1 and libc.mallopt(_M_TRIM_THRESHOLD, KEEP_TRIM_THRESHOLD_BYTES) == 1
    return "glibc keeps freed memory (mmap_max 0, no trim)" if ok else "allocator unchanged (mallopt refused)"


def keep_freed_memory_for(device: torch.device, wanted: bool = True) -> str:
    """:func:`keep_freed_memory` when ``wanted`` and ``device`` is a CPU (the forwards and steps whose activations
    live in host memory), else nothing; what was done, for logs ("unchanged" when nothing). The one rule of
    ``Policy`` and ``Trainer``."""
    return keep_freed_memory() if wanted and torch.device(device).type == "cpu" else "unchanged"
