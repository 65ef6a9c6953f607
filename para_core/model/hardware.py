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

And how many CPU threads compute, and how they wait (:func:`configure_cpu_threads`; ``bench/bench_training.py``
compares the choices in one run):

* **OpenMP's waiting threads spin by default**: at every barrier of an operation the threads that finished first
  busy-wait for the others. On cores shared with other work (an evaluation, a simulator, other processes) the spinning
  takes the cores from the thread everybody waits for, and a training step beside an evaluation was 1.75-6.4x slower
  than with ``OMP_WAIT_POLICY=PASSIVE`` (threads that sleep), which costs nothing measurable on idle cores. OpenMP
  reads the variable once, when its library loads with torch: it has to be in the environment BEFORE the process's
  first ``import torch``, so every entry point calls :func:`configure_cpu_threads` (or
  :func:`default_omp_wait_policy`) before it imports anything that imports torch.
* **Threads**: ``auto`` is ``OMP_NUM_THREADS`` when the environment sets it, else the cores this process may run on
  (its CPU affinity, not the machine's count), shared out among the processes of a torchrun job on this machine
  (``LOCAL_WORLD_SIZE``). One thread was 1.7x slower than two on 2 idle cores.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from para_core.model.config import INFERENCE_DTYPES

if TYPE_CHECKING:  # torch is imported inside the functions: configure_cpu_threads must run before torch loads
    import torch

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
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported(including_emulation=False) else "fp16"
    if device.type == "cpu":
        return "bf16" if cpu_has_fast_bf16(flags) else "fp32"
    return "fp32"


def describe_precision(name: str, device: torch.device, flags: frozenset[str] | None = None) -> tuple[str, str]:
    """A name of ``INFERENCE_DTYPES`` -> (the resolved name, a log line saying why): on a CPU whether it has bf16
    instructions, and a warning when bf16 would be emulated (several times slower than fp32)."""
    import torch

    resolved = resolve_inference_dtype(name, device, flags)
    auto = "auto: " if name == "auto" else ""
    if torch.device(device).type != "cpu":
        return resolved, f"precision {resolved}" + (" (auto)" if auto else "")
    bf16 = cpu_has_fast_bf16(flags)
    has = "has bf16 instructions" if bf16 else "has no bf16 instructions (AVX512_BF16 / AMX-BF16)"
    why = f"precision {resolved} ({auto}this CPU {has}"
    if resolved == "bf16" and not bf16:
        why += "; bf16 is emulated here, several times slower than fp32: use auto or fp32"
    return resolved, why + ")"


def slow_precision_warning(name: str, device: torch.device, flags: frozenset[str] | None = None) -> str | None:
    """Why ``name`` (one of ``DTYPES``) will be slow on ``device``, or None: fp16 on a CPU without fp16 matrix
    instructions (AVX512-FP16 / AMX-FP16) is emulated, about 100x slower than fp32 (module docstring)."""
    import torch

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
    import torch

    return keep_freed_memory() if wanted and torch.device(device).type == "cpu" else "unchanged"


# ------------------------------------------------------------------------------------------- threads and waiting
WAIT_POLICIES = ("passive", "active")
"""OpenMP wait policies: ``passive`` (waiting threads sleep: the default here) or ``active`` (they spin: OpenMP's
own default, fastest only on cores nothing else uses)."""
DEFAULT_WAIT_POLICY = "passive"
THREADS_AUTO = "auto"


@dataclass(frozen=True)
class CpuThreads:
    """What :func:`choose_cpu_threads` chose and why (``describe()`` is the log line).

    Args:
        threads: torch's intra-op threads.
        threads_why: where the number comes from.
        wait_policy: the OpenMP wait policy this process runs with (``WAIT_POLICIES``; OpenMP loaded without
            ``OMP_WAIT_POLICY`` spins: ``active``).
        wait_policy_why: where it comes from, and when it is not the one asked for, why not and what to do.
        wait_policy_settable: whether the environment variable can still take effect (OpenMP not loaded yet).
    """

    threads: int
    threads_why: str
    wait_policy: str
    wait_policy_why: str
    wait_policy_settable: bool

    def describe(self) -> str:
        return (
            f"CPU threads {self.threads} ({self.threads_why}); OpenMP wait policy {self.wait_policy} "
            f"({self.wait_policy_why})"
        )


def cpu_cores_available() -> int:
    """The logical cores this process may run on (its affinity mask; ``os.cpu_count()`` where there is none)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def openmp_loaded() -> bool:
    """Whether an OpenMP runtime (libgomp / libiomp / libomp) is already loaded in this process (``/proc/self/maps``;
    where that is unreadable, whether torch is imported): then it has read ``OMP_WAIT_POLICY`` already."""
    try:
        with open("/proc/self/maps", encoding="ascii", errors="replace") as f:
            maps = f.read()
    except OSError:
        return "torch" in sys.modules
    return any(name in maps for name in ("libgomp", "libiomp", "libomp")) or "torch" in sys.modules


def _parse_threads(threads) -> int | None:
    """``"auto"`` -> None, a positive integer (or its text) -> the int; anything else -> ValueError."""
    if isinstance(threads, str):
        text = threads.strip().lower()
        if text == THREADS_AUTO:
            return None
        if text.isdigit() and int(text) >= 1:
            return int(text)
    elif isinstance(threads, int) and not isinstance(threads, bool) and threads >= 1:
        return threads
    raise ValueError(
        f"threads={threads!r} is invalid: use 'auto' (the cores this process may use) or an integer >= 1 "
        f"(the CPU threads torch computes with)"
    )


def _parse_wait_policy(policy, source: str) -> str:
    text = policy.strip().lower() if isinstance(policy, str) else None
    if text not in WAIT_POLICIES:
        raise ValueError(
            f"{source}={policy!r} is invalid: use one of {WAIT_POLICIES} (passive: waiting threads sleep, "
            f"the default; active: they spin)"
        )
    return text


def choose_cpu_threads(
    threads="auto",
    wait_policy: str | None = None,
    *,
    cores: int | None = None,
    environ=None,
    openmp_already_loaded: bool | None = None,
) -> CpuThreads:
    """The CPU threads and OpenMP wait policy for this process, without changing anything (module docstring).

    :param threads: ``"auto"`` or an integer >= 1 (or its text, as a command line gives it).
    :param wait_policy: ``"passive"`` | ``"active"``; None: ``OMP_WAIT_POLICY`` of the environment when it is set,
        else ``"passive"``.
    :param cores: the cores available (default: this process's affinity); ``environ``: the environment (default
        ``os.environ``); ``openmp_already_loaded``: default :func:`openmp_loaded`. Given by tests.
    :raises ValueError: an invalid ``threads``, ``wait_policy`` or ``OMP_NUM_THREADS`` / ``OMP_WAIT_POLICY``.
    """
    env = os.environ if environ is None else environ
    cores = cpu_cores_available() if cores is None else cores
    loaded = openmp_loaded() if openmp_already_loaded is None else openmp_already_loaded
    asked = _parse_threads(threads)
    if asked is not None:
        n, why = asked, "asked for"
        if asked > cores:
            why += f"; more than the {cores} core(s) this process may use: the threads will share cores"
    elif env.get("OMP_NUM_THREADS", "").strip():
        text = env["OMP_NUM_THREADS"].strip()
        if not (text.isdigit() and int(text) >= 1):
            raise ValueError(f"OMP_NUM_THREADS={text!r} in the environment is invalid: use an integer >= 1 or unset it")
        n, why = int(text), f"auto: OMP_NUM_THREADS={text} in the environment"
    else:
        local = env.get("LOCAL_WORLD_SIZE", "1").strip() or "1"
        local_n = int(local) if local.isdigit() and int(local) >= 1 else 1
        n = max(1, cores // local_n)
        why = f"auto: the {cores} core(s) this process may use"
        if local_n > 1:
            why += f", shared by {local_n} processes on this machine (LOCAL_WORLD_SIZE)"

    in_env = env.get("OMP_WAIT_POLICY", "").strip()
    env_policy = _parse_wait_policy(in_env, "OMP_WAIT_POLICY in the environment") if in_env else None
    wanted = _parse_wait_policy(wait_policy, "wait_policy") if wait_policy is not None else None
    if not loaded:
        if wanted is not None:
            policy, pwhy = wanted, "asked for"
        elif env_policy is not None:
            policy, pwhy = env_policy, "OMP_WAIT_POLICY in the environment"
        else:
            policy, pwhy = DEFAULT_WAIT_POLICY, "the default"
        return CpuThreads(n, why, policy, pwhy, wait_policy_settable=True)
    # OpenMP has read the environment already: what it holds now is what OpenMP read (nobody changes it after).
    if env_policy is None:
        policy, pwhy = "active", "OpenMP's own default: it loaded before without OMP_WAIT_POLICY"
    else:
        policy, pwhy = env_policy, "fixed when OpenMP loaded, from OMP_WAIT_POLICY in the environment"
    if wanted is not None and wanted != policy:
        pwhy += (
            f"; {wanted} was asked for but OpenMP reads OMP_WAIT_POLICY only when torch loads: start the "
            f"process with OMP_WAIT_POLICY={wanted.upper()} in its environment"
        )
    return CpuThreads(n, why, policy, pwhy, wait_policy_settable=False)


def configure_cpu_threads(threads="auto", wait_policy: str | None = None) -> CpuThreads:
    """Choose (:func:`choose_cpu_threads`) and apply: ``OMP_WAIT_POLICY`` into the environment while OpenMP is not
    loaded yet (so call this BEFORE the process's first ``import torch``; child processes inherit it), then torch's
    intra-op threads. Returns the choice; log ``describe()``.

    :raises ValueError: as :func:`choose_cpu_threads`."""
    choice = choose_cpu_threads(threads, wait_policy)
    if choice.wait_policy_settable:
        os.environ["OMP_WAIT_POLICY"] = choice.wait_policy.upper()
    import torch

    if torch.get_num_threads() != choice.threads:
        torch.set_num_threads(choice.threads)
    return choice


def default_omp_wait_policy() -> None:
    """Put the default wait policy (``passive``) into the environment unless it names one or OpenMP is loaded
    already: what a process that reads its settings only after torch loads (a ROS node) calls first."""
    if not os.environ.get("OMP_WAIT_POLICY", "").strip() and not openmp_loaded():
        os.environ["OMP_WAIT_POLICY"] = DEFAULT_WAIT_POLICY.upper()
