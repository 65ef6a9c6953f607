"""The test processes keep DDS on loopback: discovery range, per-run domain, and the shipped profile in force."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET

import pytest
from ros_helpers import start_python, stop_process

from para_ros import dds_env
from para_ros.paths import config_file

# A child process that starts a DDS participant and reports the UDP sockets it bound (from /proc, not from DDS).
SOCKET_PROBE = r"""
import json, os, time, rclpy
rclpy.init(); node = rclpy.create_node('socket_probe'); time.sleep(0.5)
inodes = set()
for fd in os.listdir('/proc/self/fd'):
    try: link = os.readlink('/proc/self/fd/' + fd)
    except OSError: continue
    if link.startswith('socket:['): inodes.add(link[8:-1])
bound = []
for line in open('/proc/net/udp').read().splitlines()[1:]:
    f = line.split()
    if f[9] in inodes:
        ip_hex, port_hex = f[1].split(':')
        ip = '.'.join(str(int(ip_hex[i:i + 2], 16)) for i in (6, 4, 2, 0))
        bound.append([ip, int(port_hex, 16)])
print('SOCKETS=' + json.dumps(bound), flush=True)
rclpy.shutdown()
"""


def dds_unicast_ports(domain_id: int) -> range:
    """RTPS well-known ports of a domain (PB=7400, DG=250): metatraffic/user unicast live in [PB+DG*d+10, PB+DG*(d+1))."""
    base = 7400 + 250 * domain_id
    return range(base + 10, base + 250)


def probe_sockets(env_extra=None):
    proc = start_python(SOCKET_PROBE, env_extra=env_extra)
    try:
        out, _ = proc.communicate(timeout=30)
        rc = proc.returncode
    finally:
        stop_process(proc)
    lines = [line for line in out.splitlines() if line.startswith("SOCKETS=")]
    assert lines, f"probe printed no sockets (rc={rc}):\n{out}"
    return json.loads(lines[0][len("SOCKETS=") :])


def test_environment_of_the_test_run_is_loopback_only():
    assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    assert 1 <= int(os.environ["ROS_DOMAIN_ID"]) <= 100
    assert os.environ[dds_env.PROFILE_ENV_VAR] == str(config_file("fastdds_loopback.xml"))
    assert dds_env.check_loopback_dds_env() == []


def test_shipped_profile_restricts_transports_to_loopback():
    ns = {"d": "http://www.eprosima.com"}
    root = ET.parse(config_file("fastdds_loopback.xml")).getroot()
    participant = root.find(".//d:participant", ns)
    assert participant.get("is_default_profile") == "true"
    assert participant.find(".//d:useBuiltinTransports", ns).text == "false"
    addresses = [a.text for a in root.findall(".//d:interfaceWhiteList/d:address", ns)]
    assert addresses == ["127.0.0.1"]
    peers = [a.text for a in participant.findall(".//d:initialPeersList//d:address", ns)]
    assert peers == ["127.0.0.1"]
    shm = [t for t in root.findall(".//d:transport_descriptor", ns) if t.find("d:type", ns).text == "SHM"]
    assert int(shm[0].find("d:segment_size", ns).text) >= 16 * 1024 * 1024


@pytest.mark.ros
def test_participant_binds_its_dds_ports_to_loopback_only():
    domain = int(os.environ["ROS_DOMAIN_ID"])
    ports = dds_unicast_ports(domain)
    dds_sockets = [(ip, port) for ip, port in probe_sockets() if port in ports]
    assert dds_sockets, "no RTPS unicast socket found: the probe did not start a participant"
    assert all(ip == "127.0.0.1" for ip, _ in dds_sockets), dds_sockets


@pytest.mark.ros
def test_probe_can_fail_without_the_profile():
    """Control: with the profile switched off, Fast DDS binds its RTPS ports on all interfaces (0.0.0.0).

    Discovery stays LOCALHOST in this control, so nothing leaves the host either way.
    """
    domain = int(os.environ["ROS_DOMAIN_ID"])
    sockets = probe_sockets(env_extra={"PARA_DDS_PROFILE": "none", dds_env.PROFILE_ENV_VAR: ""})
    dds_sockets = [(ip, port) for ip, port in sockets if port in dds_unicast_ports(domain)]
    assert any(ip == "0.0.0.0" for ip, _ in dds_sockets), dds_sockets


def test_env_helper_keeps_a_chosen_domain_and_picks_fresh_ones():
    env = dds_env.loopback_dds_env({"ROS_DOMAIN_ID": "42", "ROS_STATIC_PEERS": "10.0.0.1"})
    assert env["ROS_DOMAIN_ID"] == "42" and "ROS_STATIC_PEERS" not in env
    assert env["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST"
    fresh = {dds_env.loopback_dds_env({})["ROS_DOMAIN_ID"] for _ in range(50)}
    assert len(fresh) > 1 and all(1 <= int(d) <= 100 for d in fresh)
    assert dds_env.loopback_dds_env({"ROS_DISTRO": "jazzy"})[dds_env.LEGACY_PROFILE_ENV_VAR]
    assert dds_env.LEGACY_PROFILE_ENV_VAR not in dds_env.loopback_dds_env({"ROS_DISTRO": "kilted"})
    assert dds_env.check_loopback_dds_env({"ROS_DOMAIN_ID": "3"})  # no discovery range -> a problem reported


def test_multi_host_opt_out_leaves_the_users_dds_alone_and_launch_env_lists_only_changes(monkeypatch):
    user = {
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "SUBNET",
        "ROS_STATIC_PEERS": "192.168.1.20",
        "ROS_DOMAIN_ID": "7",
        dds_env.OPT_OUT_ENV_VAR: "0",
    }
    env = dds_env.loopback_dds_env(user, pick_domain=False)
    assert env == user  # nothing changed: the robot's own multi-host set-up
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "SUBNET")
    monkeypatch.delenv("ROS_DOMAIN_ID", raising=False)
    monkeypatch.delenv(dds_env.PROFILE_ENV_VAR, raising=False)
    changes = dds_env.dds_env_vars()
    assert changes["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "LOCALHOST" and "ROS_DOMAIN_ID" not in changes
    assert changes[dds_env.PROFILE_ENV_VAR].endswith("fastdds_loopback.xml")


def test_other_domain_ids_are_distinct_in_range_and_never_the_runs(monkeypatch, tmp_path):
    import random

    monkeypatch.setenv(dds_env.LOCK_DIR_ENV_VAR, str(tmp_path))  # claims of every domain: not the machine's own

    span = dds_env.DOMAIN_ID_RANGE[1] - dds_env.DOMAIN_ID_RANGE[0] + 1
    run_domain = dds_env.DOMAIN_ID_RANGE[0] + 7
    # every other domain of the range: a generator that repeats or returns the run's own would loop or fail here
    ids = dds_env.other_domain_ids(span - 1, {"ROS_DOMAIN_ID": str(run_domain)}, random.Random(3))
    assert len(set(ids)) == span - 1
    assert run_domain not in ids
    assert all(dds_env.DOMAIN_ID_RANGE[0] <= d <= dds_env.DOMAIN_ID_RANGE[1] for d in ids)
    assert dds_env.other_domain_ids(2, {"ROS_DOMAIN_ID": "5"}, random.Random(9)) == dds_env.other_domain_ids(
        2, {"ROS_DOMAIN_ID": "5"}, random.Random(9)
    )
    with pytest.raises(ValueError, match="other_domain_ids: n must be in"):
        dds_env.other_domain_ids(span, {"ROS_DOMAIN_ID": str(run_domain)})


def test_a_domain_another_run_holds_is_never_picked_and_the_claim_survives_para_envs_exec(monkeypatch, tmp_path):
    """Two runs side by side on one machine (an evaluation beside the test suite) must not share a domain: their
    /clock and /joint_states would mix. A domain held by another process (through ``para-env -- CMD``, whose exec
    keeps the claim) is refused by claim_domain_id and skipped by fresh_domain_id, even when it is the only one the
    random order would give first."""
    import random
    import subprocess
    import sys

    monkeypatch.setenv(dds_env.LOCK_DIR_ENV_VAR, str(tmp_path))
    env = {**os.environ, dds_env.LOCK_DIR_ENV_VAR: str(tmp_path)}
    env.pop("ROS_DOMAIN_ID", None)
    held = subprocess.Popen(
        [sys.executable, "-m", "para_ros.dds_env", "--", sys.executable, "-c",
         "import os, sys, time; print(os.environ['ROS_DOMAIN_ID'], flush=True); time.sleep(30)"],
        env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        domain = int(held.stdout.readline())
        assert dds_env.claim_domain_id(domain) is False  # held by the exec'd command
        lo, hi = dds_env.DOMAIN_ID_RANGE
        others = [d for d in range(lo, hi + 1) if d != domain]
        free = others[0]
        for seed in range(5):  # whatever the random order, only the free one of the two comes back
            assert dds_env.fresh_domain_id(random.Random(seed), exclude=others[1:]) == free
    finally:
        held.kill()
        held.wait()
    assert dds_env.claim_domain_id(domain) is True  # released when the holder ended
