"""`numalign admit` with DRA, as a user runs it (a subprocess, real files): the issue's example end to
end, the claim no device satisfies, DRA devices declared by the machine, a dump of DRA objects beside
the pods, a claim already allocated."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

EXE = [sys.executable, "-m", "numalign.cli.main"]
DATA = Path(__file__).resolve().parents[1] / "data" / "dra"
EXAMPLE = DATA / "four-gpus.yaml"
GPU_MACHINE = "2s x 2n x 8c x 2t, 64Gi/node, dra:gpu.example.com=2/node{model=h100;capacity.memory=80Gi}"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=120, check=False)


def test_issue_example_two_gpus_on_one_numa_node_and_where_the_cpus_are() -> None:
    p = run("admit", str(EXAMPLE))
    assert p.returncode == 0, p.stderr
    assert "pod default/trainer: admitted" in p.stdout
    assert ("dra: claim default/two-gpus: gpu.example.com/gpu-1 (NUMA 1), gpu.example.com/gpu-2 (NUMA 1)"
            in p.stdout)
    # The built-in example pins the pod's CPUs and memory on NUMA 0: the Topology Manager never saw the GPUs.
    assert ("dra alignment: NOT aligned: main: DRA devices on NUMA 1; pinned CPUs on NUMA 0; memory on NUMA 0\n"
            in p.stdout)
    doc = json.loads(run("admit", str(EXAMPLE), "-o", "json").stdout)
    pod = doc["pods"][0]
    assert pod["result"]["admit"] is True
    assert pod["dra"]["claims"] == {"default/two-gpus": ["gpu.example.com/node-a/gpu-1",
                                                         "gpu.example.com/node-a/gpu-2"]}
    main = pod["dra"]["alignment"]["containers"][0]
    assert (main["verdict"], main["devicesNumaNodes"], main["cpusNumaNodes"], main["memoryNumaNodes"]) == (
        "NOT aligned", [1], [0], [0])


def test_a_selector_matching_nothing_is_unschedulable_with_the_allocators_reason(tmp_path: Path) -> None:
    text = EXAMPLE.read_text().replace('model == "h100"', 'model == "h200"')
    f = tmp_path / "nomatch.yaml"
    f.write_text(text)
    p = run("admit", str(f), "--exit-code")
    assert p.returncode == 1, p.stderr
    line = next(x for x in p.stdout.splitlines() if x.startswith("pod default/trainer"))
    assert line == (f"pod default/trainer: UNSCHEDULABLE on this node (kube-scheduler's DynamicResources plugin; the "
                    f"kubelet never sees the pod): {f}: document 3: ResourceClaim default/two-gpus: cannot allocate "
                    "all claims")
    doc = json.loads(run("admit", str(f), "-o", "json").stdout)
    assert doc["pods"][0]["result"]["reason"] == "Unschedulable"
    assert doc["pods"][0]["dra"]["schedulable"] is False
    assert doc["pods"][0]["dra"]["message"] == "cannot allocate all claims"
    assert doc["pods"][0]["allocations"] == {}


def test_machine_shorthand_declares_dra_devices_and_a_template_claim_is_stamped_out() -> None:
    p = run("admit", str(DATA / "claim-and-pod.yaml"), "--machine", GPU_MACHINE, "--reserved-cpus", "0,32",
            "-o", "json")
    assert p.returncode == 0, p.stderr
    pod = json.loads(p.stdout)["pods"][0]
    assert pod["dra"]["node"] == "node"
    assert pod["dra"]["claims"] == {"default/trainer-gpus": ["gpu.example.com/node/gpu-0",
                                                            "gpu.example.com/node/gpu-1"]}
    assert pod["dra"]["alignment"]["containers"][0]["devicesNumaNodes"] == [0]
    assert pod["dra"]["alignment"]["aligned"] is True


def test_a_kubectl_dump_of_slices_beside_the_pods_and_a_claim_already_allocated(tmp_path: Path) -> None:
    import yaml

    docs = list(yaml.safe_load_all(EXAMPLE.read_text()))
    slices, cls, claim, pod = docs
    # The claim was allocated before (gpu-0 and gpu-3 are not what the allocator would pick): it keeps them.
    claim["status"] = {"allocation": {"devices": {"results": [
        {"request": "gpus", "driver": "gpu.example.com", "pool": "node-a", "device": d} for d in ("gpu-0", "gpu-3")]}}}
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": [slices, cls, claim]}))
    pods = tmp_path / "pod.yaml"
    pods.write_text(yaml.safe_dump(pod))
    p = run("admit", str(dump), str(pods))
    assert p.returncode == 0, p.stderr
    assert ("dra: claim default/two-gpus (already allocated: kept): gpu.example.com/gpu-0 (NUMA 0), "
            "gpu.example.com/gpu-3 (NUMA 3)") in p.stdout


def test_pods_sharing_the_node_take_the_devices_left() -> None:
    import yaml

    slices, cls, claim, pod = yaml.safe_load_all(EXAMPLE.read_text())
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "two-gpus"}, "spec": {"spec": claim["spec"]}}
    pod["spec"]["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "two-gpus"}]
    second = json.loads(json.dumps(pod))
    second["metadata"]["name"] = "trainer-2"
    text = yaml.safe_dump_all([slices, cls, template, pod, second])
    p = subprocess.run([*EXE, "admit", "-", "-o", "json"], input=text, capture_output=True, text=True, timeout=120,
                       check=False)
    assert p.returncode == 0, p.stderr
    first, other = json.loads(p.stdout)["pods"]
    assert first["dra"]["claims"] == {"default/trainer-gpus": ["gpu.example.com/node-a/gpu-1",
                                                               "gpu.example.com/node-a/gpu-2"]}
    # Only gpu-0 (NUMA 0) is left of the h100s: no two on one NUMA node.
    assert other["result"]["reason"] == "Unschedulable"
    assert other["dra"]["message"] == "cannot allocate all claims"


def test_would_be_aligned_if_lists_the_three_ways_each_checked() -> None:
    p = run("admit", str(EXAMPLE), "-o", "json")
    options = json.loads(p.stdout)["pods"][0]["dra"]["alignment"]["wouldBeAlignedIf"]
    assert [o["kind"] for o in options] == ["match-attribute", "device-plugin", "preview"]
    assert all(o["verified"] for o in options)
    assert options[2]["preview"] is True and "dra-topology-hints" in options[2]["change"]
    # the matchAttribute run takes the GPUs' NUMA node for the CPUs too
    assert "devices NUMA 1, CPUs 16-17,80-81 (NUMA 1), memory NUMA 1" in options[0]["outcome"]


def test_the_device_plugin_alternative_is_named_by_the_classs_extended_resource(tmp_path: Path) -> None:
    """A DeviceClass with extendedResourceName (DRAExtendedResource) names the resource a pod would ask
    for from a device plugin; without one numalign falls back to DRIVER/device."""
    text = EXAMPLE.read_text().replace("  name: h100\nspec:\n",
                                       "  name: h100\nspec:\n  extendedResourceName: example.com/h100\n")
    assert "extendedResourceName" in text
    named = tmp_path / "named.yaml"
    named.write_text(text)
    options = json.loads(run("admit", str(named), "-o", "json").stdout)["pods"][0]["dra"]["alignment"][
        "wouldBeAlignedIf"]
    plugin = next(o for o in options if o["kind"] == "device-plugin")
    assert "(example.com/h100: 2)" in plugin["change"]
    options = json.loads(run("admit", str(EXAMPLE), "-o", "json").stdout)["pods"][0]["dra"]["alignment"][
        "wouldBeAlignedIf"]
    assert "(gpu.example.com/device: 2)" in next(o for o in options if o["kind"] == "device-plugin")["change"]


def test_preview_dra_topology_hints_puts_the_cpus_with_the_gpus() -> None:
    p = run("admit", str(EXAMPLE), "--preview", "dra-topology-hints")
    assert p.returncode == 0, p.stderr
    assert "# preview: dra-topology-hints=true" in p.stdout
    assert "dra (preview)/dra:default/two-gpus/gpus: {1}P" in p.stdout
    assert "main: cpus 16-17,80-81 (exclusive, NUMA 1); memory 8Gi on NUMA 1" in p.stdout
    assert "dra alignment: aligned" in p.stdout and "(preview dra-topology-hints:" in p.stdout


def test_cpus_and_memory_through_dra_drivers_next_to_a_gpu() -> None:
    p = run("admit", str(DATA / "gpu-cpu-memory.yaml"), "--machine", "2s x 2n x 8c x 2t, 64Gi/node, "
            "dra:gpu.example.com=1/node", "--reserved-cpus", "0,32", "--dra-driver", "cpu", "--dra-driver", "memory")
    assert p.returncode == 0, p.stderr
    assert ("dra drivers: main: CPUs 1-2,33-34 (NUMA 0); memory 8Gi on NUMA 0; the kubelet's managers for the same "
            "request: CPUs 1-2,33-34 (NUMA 0); memory 8Gi on NUMA 0") in p.stdout
    assert "dra alignment: aligned" in p.stdout and "(by the claims: CPUs and memory came through DRA)" in p.stdout
    bad = run("admit", str(EXAMPLE), "--dra-driver", "cpu=cores")
    assert bad.returncode == 2 and "--dra-driver cpu=cores: expected cpu[=MODE]" in bad.stderr


def test_the_node_picture_draws_dra_devices_and_marks_the_misaligned_pod(tmp_path: Path) -> None:
    report = tmp_path / "node.html"
    p = run("admit", str(EXAMPLE), "--report", str(report))
    assert p.returncode == 0, p.stderr
    html = report.read_text()
    for chip in ("dra gpu-0", "dra gpu-1", "dra gpu-2", "dra gpu-3"):
        assert chip in html  # every device of the node's slices, on its NUMA node
    assert '<li class="misaligned" data-pod="default/trainer">&#9888; <b>default/trainer</b>' in html
    assert "DRA (default/two-gpus): NOT aligned" in html


def test_a_snapshot_keeps_the_dra_objects_and_its_pci_devices_give_the_numa_nodes(tmp_path: Path) -> None:
    from support.sysfs_tree import write_sysfs

    # A discovered machine: two GPUs on PCI buses of NUMA nodes 0 and 1. The slice's devices carry only
    # their pciBusID (no numaNode attribute): the machine's PCI devices tell their NUMA node.
    root = write_sysfs(tmp_path / "root", gpus={"0000:17:00.0": 0, "0000:57:00.0": 1})
    devices = [{"name": f"gpu-{i}", "attributes": {"resource.kubernetes.io/pciBusID": {"string": addr}}}
               for i, addr in enumerate(("0000:17:00.0", "0000:57:00.0"))]
    objects = [
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
         "spec": {"driver": "gpu.example.com", "nodeName": "worker-1", "devices": devices,
                  "pool": {"name": "worker-1", "generation": 1, "resourceSliceCount": 1}}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu"},
         "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "one"},
         "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu", "count": 2}}]}}},
    ]
    dump = tmp_path / "dra.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    snap = tmp_path / "node.tgz"
    made = run("snapshot", str(snap), "--sysfs-root", str(root), "--dra-objects", str(dump),
               "--pod-resources-socket", str(tmp_path / "none.sock"), "--state-dir", str(tmp_path / "none"),
               "--proc-root", str(tmp_path / "proc"), "--kubelet-version", "1.37")
    assert made.returncode == 0, made.stderr
    pod = tmp_path / "pod.yaml"
    pod.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  resourceClaims: [{name: g, "
                   "resourceClaimName: one}]\n  containers:\n  - name: c\n    resources: {claims: [{name: g}]}\n")
    p = run("admit", str(pod), "--node", str(snap), "-o", "json")
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    assert any(n.startswith("DRA objects from the snapshot: 3") for n in doc["notes"])
    places = doc["pods"][0]["dra"]["alignment"]["devices"]
    assert [(d["device"], d["numaNode"], d["numaFrom"]) for d in places] == [
        ("gpu.example.com/worker-1/gpu-0", 0, "pciBusID"), ("gpu.example.com/worker-1/gpu-1", 1, "pciBusID")]


def test_a_device_with_only_its_drivers_bus_id_is_unknown_and_the_line_names_the_attributes(tmp_path: Path) -> None:
    # An older NVIDIA slice names the bus in the driver's domain (pcieBusID), not resource.kubernetes.io/pciBusID:
    # the GPU at 0000:17:00.0 is on the built-in machine, but nothing tells numalign which device it is.
    objects = [
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": "s"},
         "spec": {"driver": "gpu.nvidia.com", "nodeName": "node-a",
                  "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
                  "devices": [{"name": "gpu-0", "attributes": {"type": {"string": "gpu"},
                                                               "pcieBusID": {"string": "0000:17:00.0"}}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": "gpu.nvidia.com"},
         "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "one"},
         "spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
         "spec": {"resourceClaims": [{"name": "g", "resourceClaimName": "one"}],
                  "containers": [{"name": "c", "resources": {"limits": {"cpu": "2", "memory": "1Gi"},
                                                             "claims": [{"name": "g"}]}}]}},
    ]
    path = tmp_path / "nvidia.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    p = run("admit", str(path))
    assert p.returncode == 0, p.stderr
    assert ("dra alignment: unknown: c: DRA devices on NUMA ? (no numaNode attribute, and no pciBusID or pcieRoot "
            "attribute this machine lists); pinned CPUs on NUMA 0; memory on NUMA 0\n") in p.stdout
