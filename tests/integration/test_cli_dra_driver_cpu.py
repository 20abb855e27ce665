"""`admit --dra-driver cpu` as dra-driver-cpu is deployed (issue 28): the DeviceClass its Helm chart
installs, the driver's own words for its modes, and the reserved CPUs left out under CPU manager `none`
(the policy the driver requires)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXE = [sys.executable, "-m", "numalign.cli.main"]
MACHINE = "2s x 2n x 8c x 2t, 64Gi/node"
# No DeviceClass in the file: the chart's dra.cpu is the one the claims name.
PODS = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: cpus}
spec:
  spec:
    devices:
      requests:
      - {name: cpus, exactly: {deviceClassName: dra.cpu, count: 4}}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  resourceClaims: [{name: c, resourceClaimTemplateName: cpus}]
  containers:
  - {name: main, image: x, resources: {claims: [{name: c}]}}
"""
GROUPED = PODS.replace("{deviceClassName: dra.cpu, count: 4}",
                       "{deviceClassName: dra.cpu, capacity: {requests: {dra.cpu/cpu: '4'}}}")


def _admit(tmp_path: Path, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    pods = tmp_path / "pods.yaml"
    pods.write_text(text)
    return subprocess.run([*EXE, "admit", str(pods), "--machine", MACHINE, "--cpu-manager-policy", "none",
                           "--memory-manager-policy", "None", *args],
                          capture_output=True, text=True, timeout=120, check=False)


def _published(p: subprocess.CompletedProcess[str]) -> tuple[str, str]:
    """How many devices and classes the node has, and where the pod's CPUs are."""
    assert p.returncode == 0, p.stderr
    note = next(line for line in p.stdout.splitlines() if "DRA: claims are allocated on node" in line)
    where = next(line.strip() for line in p.stdout.splitlines() if line.strip().startswith("dra drivers:"))
    counts = note[note.index("does (") + len("does ("):note.index("DeviceClass(es)") + len("DeviceClass(es)")]
    return counts, where[:len("dra drivers: main: CPUs 1-2,33-34 (NUMA 0)")]


def test_the_charts_device_class_is_published_and_the_reserved_cpus_are_left_out(tmp_path: Path) -> None:
    # No reservation (the built-in kubelet configuration's reservedSystemCPUs cleared): 64 CPUs, 64 devices.
    assert _published(_admit(tmp_path, PODS, "--reserved-cpus=", "--dra-driver", "cpu")) == (
        "64 device(s) in 1 ResourceSlice(s), 1 DeviceClass(es)", "dra drivers: main: CPUs 0-1,32-33 (NUMA 0)")
    # Under `none` the kubelet reserves no set; the driver is told the kubelet's reservedSystemCPUs.
    assert _published(_admit(tmp_path, PODS, "--reserved-cpus", "0,32", "--dra-driver", "cpu")) == (
        "62 device(s) in 1 ResourceSlice(s), 1 DeviceClass(es)", "dra drivers: main: CPUs 1-2,33-34 (NUMA 0)")
    # As many CPUs as kubeReserved + systemReserved cpu: those the static policy would reserve (a whole core).
    assert _published(_admit(tmp_path, PODS, "--reserved-cpus=", "--kube-reserved", "cpu=1", "--system-reserved",
                             "cpu=1", "--dra-driver", "cpu")) == (
        "62 device(s) in 1 ResourceSlice(s), 1 DeviceClass(es)", "dra drivers: main: CPUs 1-2,33-34 (NUMA 0)")
    # The driver's own reservedCPUs wins.
    assert _published(_admit(tmp_path, PODS, "--reserved-cpus", "0,32", "--dra-driver", "cpu=reservedCPUs=0-3,32")) == (
        "59 device(s) in 1 ResourceSlice(s), 1 DeviceClass(es)", "dra drivers: main: CPUs 4-5,36-37 (NUMA 0)")


def test_the_drivers_own_words_for_its_grouped_mode(tmp_path: Path) -> None:
    for setting, device in (("grouped", "cpudevnuma000"), ("cpuDeviceMode=grouped", "cpudevnuma000"),
                            ("grouped,groupBy=socket", "cpudevsocket000"),
                            ("cpuDeviceMode=grouped,groupBy=machine", "cpudevmachine"),
                            ("groupBy=socket", "cpudevsocket000")):
        p = _admit(tmp_path, GROUPED, "--dra-driver", f"cpu={setting}", "-o", "json")
        assert p.returncode == 0, p.stderr
        claims = json.loads(p.stdout)["pods"][0]["dra"]["claims"]
        assert list(claims.values()) == [[f"dra.cpu/node/{device}"]], setting


def test_words_the_driver_does_not_know_are_refused_in_one_line(tmp_path: Path) -> None:
    for setting, text in (("cores", "expected cpu[=MODE]"), ("groupBy=core", "groupBy 'core'; expected one of"),
                          ("individual,groupBy=socket", "groupBy applies to cpuDeviceMode grouped only"),
                          ("reservedCPUs=x", "reservedCPUs 'x'"),
                          # a count is read as a CPU id, which this 64-CPU machine does not have (as the kubelet
                          # refuses such a reservedSystemCPUs; the driver would reserve nothing, silently)
                          ("reservedCPUs=200", "reservedCPUs names CPU(s) 200, not on this machine"),
                          ("reservedCPUs=0,63-64", "reservedCPUs names CPU(s) 64, not on this machine")):
        p = _admit(tmp_path, PODS, "--dra-driver", f"cpu={setting}")
        assert p.returncode == 2, setting
        assert f"--dra-driver cpu={setting}: " in p.stderr and text in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


def test_a_value_is_checked_when_no_pod_has_claims(tmp_path: Path) -> None:
    """The pods use no DRA, so the drivers' slices are never made; a mistyped value is still refused (it was
    silently unused, exit 0), and before the state directory is touched."""
    plain = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers: [{name: c}]\n"
    state = tmp_path / "state"
    for spec, text in (("gpu", "expected cpu[=MODE]"), ("memory=x", "expected cpu[=MODE]"),
                       ("cpu=reservedCPUs=200", "reservedCPUs names CPU(s) 200, not on this machine")):
        p = _admit(tmp_path, plain, "--dra-driver", spec, "--state-dir", str(state))
        assert p.returncode == 2 and f"--dra-driver {spec}: " in p.stderr and text in p.stderr, p.stderr
        assert len(p.stderr.strip().splitlines()) == 1
        assert not (state / "numalign_node.json").exists() and not (state / "numalign_pods.json").exists()
    assert _admit(tmp_path, plain, "--dra-driver", "cpu=grouped", "--dra-driver", "memory").returncode == 0
