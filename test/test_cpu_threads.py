"""CPU threads and OpenMP wait policy (``para_core.model.hardware.choose_cpu_threads`` / ``configure_cpu_threads``):
the choices against hand-worked cases, and that the environment variable reaches OpenMP when set before torch."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from para_core.model import hardware


def choose(threads="auto", wait_policy=None, cores=2, env=None, loaded=False):
    return hardware.choose_cpu_threads(
        threads, wait_policy, cores=cores, environ=env or {}, openmp_already_loaded=loaded
    )


@pytest.mark.parametrize(
    ("threads", "cores", "env", "expected"),
    [
        ("auto", 2, {}, 2),  # the cores this process may use
        ("auto", 16, {}, 16),
        ("auto", 1, {}, 1),
        ("auto", 16, {"LOCAL_WORLD_SIZE": "4"}, 4),  # torchrun: 16 cores among 4 processes
        ("auto", 2, {"LOCAL_WORLD_SIZE": "4"}, 1),  # never below one
        ("auto", 16, {"OMP_NUM_THREADS": "3"}, 3),  # the user's environment wins over the cores
        ("AUTO", 8, {}, 8),
        (1, 16, {"OMP_NUM_THREADS": "3"}, 1),  # an explicit number wins over everything
        ("4", 2, {}, 4),  # text from a command line; more than the cores is allowed (said in the log line)
        (12, 2, {}, 12),
    ],
)
def test_thread_count(threads, cores, env, expected):
    choice = choose(threads, cores=cores, env=env)
    assert choice.threads == expected
    if threads not in ("auto", "AUTO") and int(threads) > cores:
        assert "share cores" in choice.threads_why


@pytest.mark.parametrize("bad", ["0", 0, -1, "-2", "two", "1.5", 1.5, True, None, ""])
def test_invalid_threads_name_the_value_and_the_fix(bad):
    with pytest.raises(ValueError, match=r"threads=.*use 'auto'.*integer >= 1"):
        choose(bad)


def test_invalid_environment_is_refused_with_its_name():
    with pytest.raises(ValueError, match="OMP_NUM_THREADS='0'"):
        choose(env={"OMP_NUM_THREADS": "0"})
    with pytest.raises(ValueError, match="OMP_WAIT_POLICY in the environment='spin'"):
        choose(env={"OMP_WAIT_POLICY": "spin"})
    with pytest.raises(ValueError, match=r"wait_policy='sleepy'.*passive"):
        choose(wait_policy="sleepy")


@pytest.mark.parametrize(
    ("wanted", "env", "expected"),
    [
        (None, {}, "passive"),  # the default
        (None, {"OMP_WAIT_POLICY": "ACTIVE"}, "active"),  # the user's environment when nothing is asked for
        ("passive", {"OMP_WAIT_POLICY": "ACTIVE"}, "passive"),  # asked for wins
        ("Active", {}, "active"),
    ],
)
def test_wait_policy_before_openmp_loads(wanted, env, expected):
    choice = choose(wait_policy=wanted, env=env)
    assert (choice.wait_policy, choice.wait_policy_settable) == (expected, True)
    assert f"wait policy {expected}" in choice.describe()


def test_wait_policy_after_openmp_loaded_is_what_it_read_and_says_how_to_change_it():
    unset = choose(wait_policy="passive", loaded=True)
    assert (unset.wait_policy, unset.wait_policy_settable) == ("active", False)  # OpenMP's own default
    assert "OMP_WAIT_POLICY=PASSIVE in its environment" in unset.wait_policy_why
    fixed = choose(wait_policy="passive", env={"OMP_WAIT_POLICY": "PASSIVE"}, loaded=True)
    assert fixed.wait_policy == "passive" and "asked for but" not in fixed.wait_policy_why


def _run(code: str, env_changes: dict) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    env.update(env_changes)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout


def test_configure_before_torch_sets_the_environment_and_the_threads():
    out = _run(
        "import os; from para_core.model import hardware as h\n"
        "c = h.configure_cpu_threads(1)\n"
        "import torch\n"
        "print(os.environ['OMP_WAIT_POLICY'], torch.get_num_threads(), c.wait_policy_settable)",
        {},
    )
    assert out.split() == ["PASSIVE", "1", "True"]


def test_default_wait_policy_keeps_the_users_choice():
    code = "import os; from para_core.model import hardware as h; h.default_omp_wait_policy(); print(os.environ['OMP_WAIT_POLICY'])"
    assert _run(code, {}).strip() == "PASSIVE"
    assert _run(code, {"OMP_WAIT_POLICY": "ACTIVE"}).strip() == "ACTIVE"
    late = "import os, torch; from para_core.model import hardware as h; h.default_omp_wait_policy(); print(os.environ.get('OMP_WAIT_POLICY', '-'))"
    assert _run(late, {}).strip() == "-"  # torch loaded first: nothing set that would pretend to take effect


def test_hardware_imports_no_torch():
    out = _run("import sys; import para_core.model.hardware; print('torch' in sys.modules)", {})
    assert out.strip() == "False"


def test_para_train_refuses_a_bad_thread_count_before_anything_else(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "para_core.train.cli", "--out", str(tmp_path / "run"), "--threads", "two"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert "--threads / --omp-wait-policy: threads='two' is invalid: use 'auto'" in done.stderr
    assert not (tmp_path / "run").exists()  # nothing written
