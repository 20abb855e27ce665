"""ResourceClaim allocations across `--state-dir` runs (numalign_dra_claims.json): each CLI call is a
subprocess on the same directory, as a user runs one after the other. A device a claim holds is never
handed out again; `remove` ends the pod's reservation and a claim nobody reserves is deallocated."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from numalign.adapters.statedir.draclaims import HeldClaim, PodReference, encode_claims, read_claims
from numalign.adapters.statedir.layout import DRA_CLAIMS_FILE
from numalign.k8s.dra.types import DeviceAllocationResult, DeviceRequestAllocationResult, ResourceClaim

EXE = [sys.executable, "-m", "numalign.cli.main"]
# Four GPUs, one per NUMA node, published by the machine itself (pool "node", driver gpu.example.com).
MACHINE = "2s x 2n x 4c x 2t, 16Gi/node, dra:gpu.example.com=1/node{model=h100}"
OBJECTS = """apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared-gpu}
spec:
  devices:
    requests:
    - name: gpu
      exactly: {deviceClassName: gpu}
"""
POD = """---
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
  resourceClaims:
  - name: gpu
    {source}
  containers:
  - name: main
    image: trainer
    resources:
      limits: {{cpu: "1", memory: 1Gi}}
      claims:
      - name: gpu
"""


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=120, check=False)


def pods_file(tmp: Path, *names: str, shared: bool = False) -> Path:
    source = "resourceClaimName: shared-gpu" if shared else "resourceClaimTemplateName: one-gpu"
    f = tmp / f"{'-'.join(names)}.yaml"
    f.write_text(OBJECTS + "".join(POD.format(name=n, source=source) for n in names))
    return f


def admit(state: Path, f: Path) -> dict[str, list[str] | None]:
    """pod name -> the devices its claims got (None: unschedulable), from `admit -o json`."""
    p = run("admit", "--state-dir", str(state), "--machine", MACHINE, "--reserved-cpus", "0", str(f), "-o", "json")
    assert p.returncode == 0, p.stderr
    out: dict[str, list[str] | None] = {}
    for pod in json.loads(p.stdout)["pods"]:
        dra = pod["dra"]
        out[pod["pod"].split("/")[1]] = ([d for ds in dra["claims"].values() for d in ds]
                                         if dra["schedulable"] else None)
    return out


def test_a_second_admit_does_not_hand_out_a_claimed_device_and_remove_frees_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = admit(state, pods_file(tmp_path, "a"))
    second = admit(state, pods_file(tmp_path, "b"))
    (a_gpu,), (b_gpu,) = first["a"] or [], second["b"] or []
    assert a_gpu != b_gpu  # the first claim still holds its GPU
    # `pods` names each pod's claim and device, from the claims file.
    listed = json.loads(run("pods", "--state-dir", str(state), "-o", "json").stdout)["pods"]
    assert {p["name"]: p["claims"] for p in listed.values()} == {"a": {"default/a-gpu": [a_gpu]},
                                                                 "b": {"default/b-gpu": [b_gpu]}}
    text = run("pods", "--state-dir", str(state)).stdout
    assert f"default/a: DRA claim default/a-gpu: {a_gpu}" in text

    third = admit(state, pods_file(tmp_path, "c", "d", "e"))
    assert sorted(third["c"] or []) + sorted(third["d"] or []) != [] and third["e"] is None  # four GPUs, five pods
    held = {a_gpu, b_gpu, *(third["c"] or []), *(third["d"] or [])}
    assert len(held) == 4

    removed = run("remove", "--state-dir", str(state), "a", "-o", "json")
    assert removed.returncode == 0, removed.stderr
    assert json.loads(removed.stdout)["claims_released"] == ["default/a-gpu"]
    again = admit(state, pods_file(tmp_path, "e"))
    assert again["e"] == [a_gpu]  # the only free GPU is the one a's claim held
    assert {h.key for h in read_claims(state)} == {"default/b-gpu", "default/c-gpu", "default/d-gpu",
                                                    "default/e-gpu"}


def test_a_shared_claim_keeps_its_device_until_its_last_pod_is_removed(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (gpu,) = admit(state, pods_file(tmp_path, "s1", shared=True))["s1"] or []
    # The claim object is given again without status: the device recorded for it stands.
    assert admit(state, pods_file(tmp_path, "s2", shared=True))["s2"] == [gpu]
    (held,) = read_claims(state)
    assert [r.name for r in held.reserved_for] == ["s1", "s2"]
    first = json.loads(run("remove", "--state-dir", str(state), "s1", "-o", "json").stdout)
    assert first["claims_released"] == []  # s2 still reserves it
    assert admit(state, pods_file(tmp_path, "t"))["t"] != [gpu]
    last = json.loads(run("remove", "--state-dir", str(state), "s2", "-o", "json").stdout)
    assert last["claims_released"] == ["default/shared-gpu"]
    assert "default/shared-gpu" not in {h.key for h in read_claims(state)}


def test_a_reservation_by_a_pod_the_record_does_not_list_is_dropped(tmp_path: Path) -> None:
    """What a kill between the claims file and the pod record leaves: the claim is not held."""
    state = tmp_path / "state"
    (gpu,) = admit(state, pods_file(tmp_path, "a"))["a"] or []
    assert gpu == "gpu.example.com/node/gpu-0"  # the allocator takes the devices in order
    # A reservation of gpu-1, the next one, by a pod numalign_pods.json does not list.
    ghost = HeldClaim(ResourceClaim("ghost-gpu", "default", "u1", allocation=DeviceAllocationResult((
        DeviceRequestAllocationResult("gpu", "gpu.example.com", "node", "gpu-1"),))),
        (PodReference("default", "ghost", "no-such-uid"),))
    real = read_claims(state)
    assert {h.key for h in real} == {"default/a-gpu"}
    (state / DRA_CLAIMS_FILE).write_bytes(encode_claims([*real, ghost]))
    assert admit(state, pods_file(tmp_path, "b"))["b"] == ["gpu.example.com/node/gpu-1"]  # gpu-0 stays a's
    assert {h.key for h in read_claims(state)} == {"default/a-gpu", "default/b-gpu"}


def test_a_damaged_claims_file_is_one_line_naming_it_and_nothing_is_written(tmp_path: Path) -> None:
    state = tmp_path / "state"
    admit(state, pods_file(tmp_path, "a"))
    path = state / DRA_CLAIMS_FILE
    path.write_bytes(path.read_bytes().replace(b'"name": "a"', b'"name": "z"'))
    before = {p: p.read_bytes() for p in state.rglob("*") if p.is_file() and not p.name.endswith(".lock")}
    for args in (["admit", "--state-dir", str(state), "--machine", MACHINE, "--reserved-cpus", "0",
                  str(pods_file(tmp_path, "b"))], ["pods", "--state-dir", str(state)],
                 ["remove", "--state-dir", str(state), "a"]):
        p = run(*args)
        assert p.returncode != 0, p.stdout
        (line,) = p.stderr.strip().splitlines()
        assert f"{path}: cannot read the DRA claims numalign allocated: checksum mismatch" in line, line
        assert "fix:" in line
    assert {p: p.read_bytes() for p in state.rglob("*") if p.is_file() and not p.name.endswith(".lock")} == before


def test_admit_replace_ends_the_old_pods_reservations(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (gpu,) = admit(state, pods_file(tmp_path, "a"))["a"] or []
    # The same pod, now naming the shared claim: its template claim is no longer reserved, so deallocated.
    p = run("admit", "--state-dir", str(state), "--machine", MACHINE, "--reserved-cpus", "0", "--replace",
            str(pods_file(tmp_path, "a", shared=True)), "-o", "json")
    assert p.returncode == 0, p.stderr
    (pod,) = json.loads(p.stdout)["pods"]
    assert pod["dra"]["claims"] == {"default/shared-gpu": [gpu]}  # gpu-0 was freed with a-gpu
    assert {h.key for h in read_claims(state)} == {"default/shared-gpu"}


def test_a_dry_run_reads_the_claims_and_writes_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (gpu,) = admit(state, pods_file(tmp_path, "a"))["a"] or []
    before = (state / DRA_CLAIMS_FILE).read_bytes()
    p = run("admit", "--state-dir", str(state), "--dry-run", str(pods_file(tmp_path, "b")), "-o", "json")
    assert p.returncode == 0, p.stderr
    (pod,) = json.loads(p.stdout)["pods"]
    assert pod["dra"]["claims"]["default/b-gpu"] != [gpu]
    assert (state / DRA_CLAIMS_FILE).read_bytes() == before


SLICE = """---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: worker-1-gpus}
spec:
  driver: gpu.example.com
  nodeName: worker-1
  pool: {name: worker-1, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: gpu-0, attributes: {resource.kubernetes.io/numaNode: {int: 0}}}
  - {name: gpu-1, attributes: {resource.kubernetes.io/numaNode: {int: 1}}}
"""


def test_a_snapshot_carries_the_claims_and_admit_on_it_respects_them(tmp_path: Path) -> None:
    from support.sysfs_tree import write_sysfs

    root = write_sysfs(tmp_path / "root", cores=2)
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n")
    state = tmp_path / "state"
    first = pods_file(tmp_path, "a")
    first.write_text(first.read_text() + SLICE)
    p = run("admit", "--state-dir", str(state), "--machine", str(root), "--config", str(config), str(first),
            "-o", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["pods"][0]["dra"]["claims"] == {"default/a-gpu": ["gpu.example.com/worker-1/gpu-0"]}
    snap = tmp_path / "node.tgz"
    made = run("snapshot", str(snap), "--sysfs-root", str(root), "--state-dir", str(state), "--config", str(config),
               "--pod-resources-socket", str(tmp_path / "none.sock"))
    assert made.returncode == 0, made.stderr
    second = pods_file(tmp_path, "b")
    second.write_text(second.read_text() + SLICE)
    asked = run("admit", "--node", str(snap), str(second), "-o", "json")
    assert asked.returncode == 0, asked.stderr
    assert json.loads(asked.stdout)["pods"][0]["dra"]["claims"] == {"default/b-gpu": ["gpu.example.com/worker-1/gpu-1"]}
