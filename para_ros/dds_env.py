"""The one place that decides how this project's processes talk DDS: on loopback, in a per-run domain.

Every launcher, node entry point, test and benchmark of the project calls :func:`apply_loopback_dds_env` (in-process,
before ``rclpy.init``) or passes :func:`loopback_dds_env` to a child process. It sets

* ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``: discovery never leaves the host. (``ROS_LOCALHOST_ONLY`` is silently
  ignored by ROS 2 Kilted, so it is not relied on.)
* ``ROS_DOMAIN_ID``: kept if the caller chose one. Run-level entry points (tests, ``scripts/demo``, ``para-deploy``,
  benchmarks) otherwise pick a fresh one per run, so parallel runs never see each other, and hand it to their children.
  A fresh domain is claimed on this machine (:func:`claim_domain_id`: a lock file held for the process's life, kept
  across ``para-env -- CMD``'s exec), so two runs side by side (an evaluation and the test suite, two sweeps) never
  pick the same one: a shared domain mixes their clocks, joint states and acknowledgements.
  Node entry points (``pick_domain=False``) never pick one: nodes started separately (``ros2 run``, ``ros2 launch``)
  must share the user's domain.
* ``FASTDDS_DEFAULT_PROFILES_FILE`` (and, on Humble/Iron/Jazzy whose Fast DDS 2.x reads only that name,
  ``FASTRTPS_DEFAULT_PROFILES_FILE``): the shipped
  ``config/fastdds_loopback.xml`` (16 MB shared memory + UDP on 127.0.0.1 only). ``PARA_DDS_PROFILE=none`` leaves the
  user's own profile alone; ``PARA_DDS_PROFILE=/path.xml`` uses another.
* ``RMW_IMPLEMENTATION=rmw_fastrtps_cpp`` unless the user picked another RMW.

Nothing here imports rclpy: the environment must be in place before the middleware starts.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import random
import shlex
import tempfile
from collections.abc import Iterable, Mapping, MutableMapping
from pathlib import Path

from para_ros.paths import config_file

DISCOVERY_RANGE = "LOCALHOST"
PROFILE_FILE_NAME = "fastdds_loopback.xml"
PROFILE_ENV_VAR = "FASTDDS_DEFAULT_PROFILES_FILE"
LEGACY_PROFILE_ENV_VAR = "FASTRTPS_DEFAULT_PROFILES_FILE"  # Fast DDS 2.x; Fast DDS 3 warns that it is deprecated
LEGACY_FASTDDS_DISTROS = ("humble", "iron", "jazzy")
# Domain ids whose Fast DDS ports are valid on Linux (0..101); 0 is left to the user's default graph.
DOMAIN_ID_RANGE = (1, 100)


# A robot whose cameras or arm driver run on ANOTHER host needs DDS beyond loopback: PARA_DDS_LOOPBACK=0 makes the
# project's nodes leave discovery range, static peers and the Fast DDS profile exactly as the user configured them.
# Never set it in tests, the demo or CI.
OPT_OUT_ENV_VAR = "PARA_DDS_LOOPBACK"


def loopback_enabled(environ: Mapping[str, str]) -> bool:
    """False only when the user switched loopback-only DDS off (``PARA_DDS_LOOPBACK=0``) for a multi-host robot."""
    return environ.get(OPT_OUT_ENV_VAR, "1").strip().lower() not in ("0", "false", "no", "off")


def dds_env_vars(pick_domain: bool = False) -> dict[str, str]:
    """Only the variables :func:`loopback_dds_env` sets or changes (for a launch file's ``additional_env``)."""
    before = dict(os.environ)
    after = loopback_dds_env(before, pick_domain=pick_domain)
    return {k: v for k, v in after.items() if before.get(k) != v}


# Where the domain claims live (one lock file per domain id); PARA_DDS_LOCK_DIR overrides it.
LOCK_DIR_ENV_VAR = "PARA_DDS_LOCK_DIR"
_claimed: dict[Path, int] = {}  # a domain's lock file -> its open descriptor, held for this process's life


def domain_lock_dir() -> Path:
    """The folder of the per-domain lock files (``PARA_DDS_LOCK_DIR``, else ``<tmp>/para_ros_dds_domains``)."""
    return Path(os.environ.get(LOCK_DIR_ENV_VAR) or Path(tempfile.gettempdir()) / "para_ros_dds_domains")


def claim_domain_id(domain: int) -> bool:
    """Claim ``domain`` for this process: True when it is this process's now (or was already), False when another
    process of the project on this machine holds it. The claim is an exclusive ``flock`` on the domain's lock file,
    released when the process ends; the file stays open across ``exec`` (``para-env -- CMD`` hands it to CMD).
    Where no lock file can be made (a read-only temp folder) nothing is claimed and the answer is True: the domain is
    then as random as it always was."""
    path = domain_lock_dir() / f"domain-{int(domain)}.lock"
    if path in _claimed:
        return True
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        return True
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    os.set_inheritable(fd, True)
    _claimed[path] = fd
    return True


def fresh_domain_id(rng: random.Random | None = None, exclude: Iterable[int] = ()) -> int:
    """A random domain id in :data:`DOMAIN_ID_RANGE` besides ``exclude`` that no other run on this machine holds,
    claimed for this process (:func:`claim_domain_id`), for one run (tests, demo, CI, a graph). When every one is
    held, a random one of them (as before claims existed)."""
    rng = rng or random.SystemRandom()
    excluded = set(exclude)
    candidates = [d for d in range(DOMAIN_ID_RANGE[0], DOMAIN_ID_RANGE[1] + 1) if d not in excluded]
    if not candidates:
        raise ValueError(f"fresh_domain_id: every domain of {DOMAIN_ID_RANGE} is excluded")
    rng.shuffle(candidates)
    return next((d for d in candidates if claim_domain_id(d)), candidates[0])


def other_domain_ids(n: int, environ: Mapping[str, str] | None = None, rng: random.Random | None = None) -> list[int]:
    """``n`` distinct fresh domain ids, none of them this run's ``ROS_DOMAIN_ID``: for graphs run beside this one
    (parallel evaluation shards) or a node built under a graph's name that this run's domain must not list."""
    span = DOMAIN_ID_RANGE[1] - DOMAIN_ID_RANGE[0] + 1
    if not 0 <= n < span:
        raise ValueError(f"other_domain_ids: n must be in [0, {span - 1}] (the domains besides this run's), got {n}")
    environ = os.environ if environ is None else environ
    taken = {int(environ.get("ROS_DOMAIN_ID", "0") or 0)}
    out: list[int] = []
    while len(out) < n:
        domain = fresh_domain_id(rng, exclude=taken)
        taken.add(domain)
        out.append(domain)
    return out


def loopback_dds_env(
    base: Mapping[str, str] | None = None, domain_id: int | None = None, pick_domain: bool = True
) -> dict[str, str]:
    """Return a copy of ``base`` (default ``os.environ``) with the loopback DDS settings applied.

    :param base: environment to start from.
    :param domain_id: the ROS domain to use; default: ``base``'s ``ROS_DOMAIN_ID`` if set, else a fresh one when
        ``pick_domain`` (a run), else none (a node: ROS's default domain, like every other node of the user's).
    """
    env = dict(os.environ if base is None else base)
    if domain_id is not None:
        env["ROS_DOMAIN_ID"] = str(domain_id)
    elif not env.get("ROS_DOMAIN_ID") and pick_domain:
        env["ROS_DOMAIN_ID"] = str(fresh_domain_id())
    if not loopback_enabled(env):
        return env  # the user's own multi-host DDS set-up, untouched (see OPT_OUT_ENV_VAR)
    env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = DISCOVERY_RANGE
    env.pop("ROS_STATIC_PEERS", None)
    env.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    choice = env.get("PARA_DDS_PROFILE", "")
    if choice.lower() != "none":
        profile = choice or str(config_file(PROFILE_FILE_NAME))
        env[PROFILE_ENV_VAR] = profile
        if env.get("ROS_DISTRO", "").lower() in LEGACY_FASTDDS_DISTROS:
            env[LEGACY_PROFILE_ENV_VAR] = profile
    return env


def apply_loopback_dds_env(
    domain_id: int | None = None, environ: MutableMapping[str, str] | None = None, pick_domain: bool = True
) -> dict:
    """Apply :func:`loopback_dds_env` to ``environ`` (default ``os.environ``) in place; call before ``rclpy.init``."""
    environ = os.environ if environ is None else environ
    env = loopback_dds_env(environ, domain_id, pick_domain)
    environ.update(env)
    return env


def check_loopback_dds_env(environ: Mapping[str, str] | None = None) -> list[str]:
    """List what in ``environ`` would let DDS leave loopback (empty list: all good)."""
    environ = os.environ if environ is None else environ
    problems = []
    if environ.get("ROS_AUTOMATIC_DISCOVERY_RANGE") != DISCOVERY_RANGE:
        problems.append(
            f"ROS_AUTOMATIC_DISCOVERY_RANGE is {environ.get('ROS_AUTOMATIC_DISCOVERY_RANGE')!r}, "
            f"not {DISCOVERY_RANGE!r}"
        )
    if not environ.get("ROS_DOMAIN_ID", "").isdigit():
        problems.append("ROS_DOMAIN_ID is not set to a number")
    if environ.get("ROS_STATIC_PEERS"):
        problems.append("ROS_STATIC_PEERS is set")
    if environ.get("PARA_DDS_PROFILE", "").lower() != "none":
        profile = environ.get(PROFILE_ENV_VAR, "")
        if not profile or not os.path.isfile(profile):
            problems.append(f"{PROFILE_ENV_VAR} is {profile!r}: the loopback Fast DDS profile is not in force")
    return problems


def main(argv: list[str] | None = None) -> int:
    """``para-env [--domain-id N] [--] CMD ...``: run CMD with the loopback DDS environment; with no CMD print it."""

    parser = argparse.ArgumentParser(prog="para-env", description=main.__doc__)
    parser.add_argument(
        "--domain-id", type=int, default=None, help="ROS_DOMAIN_ID to use (default: keep or pick fresh)"
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="command to run (default: print export lines)")
    args = parser.parse_args(argv)
    env = apply_loopback_dds_env(args.domain_id)
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        for key in (
            "ROS_AUTOMATIC_DISCOVERY_RANGE",
            "ROS_DOMAIN_ID",
            "RMW_IMPLEMENTATION",
            PROFILE_ENV_VAR,
            LEGACY_PROFILE_ENV_VAR,
        ):
            if key in env:
                print(f"export {key}={shlex.quote(env[key])}")
        return 0
    os.execvpe(cmd[0], cmd, env)
    return 127  # not reached


if __name__ == "__main__":
    raise SystemExit(main())
