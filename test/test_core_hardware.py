"""para_core.model.hardware: the precision ``auto`` picks per device, and an allocator that keeps freed memory.

The allocator change is process-wide, so it is tested in fresh interpreters, against the kernel's own count of page
faults (getrusage), and ``Policy`` is checked to apply it on a CPU and to leave it alone when told.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import pytest
import torch

from para_core.model import hardware
from para_core.model.config import DTYPES, INFERENCE_DTYPES


@pytest.mark.parametrize(
    "flags, expected",
    [
        (frozenset({"avx2", "avx512f", "avx512_bf16"}), "bf16"),  # Zen 4/5, Cooper Lake: bf16 dot products
        (frozenset({"avx512f", "amx_bf16", "amx_tile"}), "bf16"),  # Sapphire Rapids: AMX
        (frozenset({"avx2", "avx512f", "avx512_vnni"}), "fp32"),  # Cascade Lake: bf16 only emulated, slower than fp32
        (frozenset(), "fp32"),  # flags unknown (not Linux): the safe choice
    ],
)
def test_auto_on_a_cpu_is_bf16_only_with_bf16_instructions(flags, expected):
    assert hardware.resolve_inference_dtype("auto", torch.device("cpu"), flags=flags) == expected


@pytest.mark.parametrize("native_bf16, expected", [(True, "bf16"), (False, "fp16")])
def test_auto_on_a_gpu_is_bf16_where_native_else_fp16(monkeypatch, native_bf16, expected):
    asked = {}

    def is_bf16_supported(including_emulation=True):
        asked["including_emulation"] = including_emulation
        return native_bf16

    monkeypatch.setattr(torch.cuda, "is_bf16_supported", is_bf16_supported)  # no GPU here: the answer is given
    assert hardware.resolve_inference_dtype("auto", torch.device("cuda:0")) == expected
    assert asked == {"including_emulation": False}  # emulated bf16 would be slow: it must not count


def test_explicit_dtypes_pass_through_and_unknown_names_are_refused():
    assert INFERENCE_DTYPES == ("auto",) + DTYPES
    for name in DTYPES:
        assert hardware.resolve_inference_dtype(name, torch.device("cpu"), flags=frozenset({"avx512_bf16"})) == name
    with pytest.raises(ValueError, match="use one of"):
        hardware.resolve_inference_dtype("int8", torch.device("cpu"))


def test_cpu_flags_are_the_flags_line_of_proc_cpuinfo():
    try:
        text = open("/proc/cpuinfo", encoding="ascii", errors="replace").read()
    except OSError:
        pytest.skip("no /proc/cpuinfo")
    lines = [line for line in text.splitlines() if line.split(":")[0].strip() == "flags"]
    if not lines:
        pytest.skip("this kernel lists no flags")
    assert hardware.cpu_flags() == frozenset(lines[0].split(":", 1)[1].split())


_FAULTS_SCRIPT = textwrap.dedent("""
    import resource, sys, torch
    from para_core.model import hardware
    {setup}
    def faults():
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    counts = []
    for _ in range(8):  # a forward's pattern: large activations allocated, written, freed
        before = faults()
        x = torch.ones(16 << 20)  # 64 MiB: above glibc's largest mmap threshold
        y = torch.ones(4 << 20)  # 16 MiB
        del x, y
        counts.append(faults() - before)
    print(max(counts[-3:]))  # the steady state: the heap needs a few rounds to hold a free block of each size
""")


def _faults_of_last_rounds(setup: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", _FAULTS_SCRIPT.format(setup=setup)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return int(out.stdout.split()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_keep_freed_memory_ends_the_page_faults_of_repeated_large_allocations():
    # 80 MiB a round is 20,480 fresh 4 KiB pages when glibc hands the blocks back to the kernel at every free
    default = _faults_of_last_rounds("")
    kept = _faults_of_last_rounds("print(hardware.keep_freed_memory(), file=sys.stderr)")
    assert default > 15000, default  # the problem exists here: every round faults its pages in again
    assert kept < 500, kept  # the last rounds reuse what the first ones freed


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_policy_keeps_freed_memory_on_a_cpu_unless_told_not_to():
    on = _faults_of_last_rounds(
        "from para_core.model.config import V4Config\n"
        "from para_core.model.policy import Policy\n"
        "p = Policy.random_init(V4Config.tiny(), device='cpu')\n"
        "assert 'keeps freed memory' in p.allocator, p.allocator"
    )
    off = _faults_of_last_rounds(
        "from para_core.model.config import V4Config\n"
        "from para_core.model.policy import Policy\n"
        "p = Policy.random_init(V4Config.tiny(), device='cpu', keep_freed_memory=False)\n"
        "assert p.allocator == 'unchanged', p.allocator"
    )
    assert on < 500 < 15000 < off, (on, off)


def test_policy_resolves_auto_and_refuses_unknown_precisions():
    from para_core.model.config import V4Config
    from para_core.model.policy import Policy

    policy = Policy.random_init(V4Config.tiny(), device="cpu", dtype="auto", keep_freed_memory=False)
    assert policy.dtype == hardware.resolve_inference_dtype("auto", torch.device("cpu"))
    assert policy.dtype in DTYPES
    with pytest.raises(ValueError, match="use one of"):
        Policy.random_init(V4Config.tiny(), device="cpu", dtype="half", keep_freed_memory=False)


def test_fp16_on_a_cpu_without_fp16_instructions_is_called_slow():
    cpu = torch.device("cpu")
    assert "100x slower" in hardware.slow_precision_warning("fp16", cpu, flags=frozenset({"avx512_bf16"}))
    assert hardware.slow_precision_warning("fp16", cpu, flags=frozenset({"avx512_fp16"})) is None
    assert hardware.slow_precision_warning("fp16", torch.device("cuda")) is None  # tensor cores
    for name in ("fp32", "bf16"):
        assert hardware.slow_precision_warning(name, cpu, flags=frozenset()) is None


def test_policy_warns_about_fp16_on_this_cpu_only_when_it_is_slow_here():
    from para_core.model.config import V4Config
    from para_core.model.policy import Policy

    expected = hardware.slow_precision_warning("fp16", torch.device("cpu"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Policy.random_init(V4Config.tiny(), device="cpu", dtype="fp16", keep_freed_memory=False)
    said = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert said == ([expected] if expected else [])


def test_the_allocator_is_left_alone_off_a_cpu_or_when_not_wanted():
    # neither call may reach mallopt: both answer "unchanged" (the CPU case is the subprocess tests' above)
    assert hardware.keep_freed_memory_for(torch.device("cuda:0")) == "unchanged"
    assert hardware.keep_freed_memory_for(torch.device("cpu"), wanted=False) == "unchanged"
