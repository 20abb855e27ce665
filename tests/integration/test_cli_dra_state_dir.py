"""ResourceClaim allocations across `--state-dir` runs (the claims of numalign_pods.json): each CLI call is
a subprocess on the same directory, as a user runs one after the other. A device a claim holds is never
handed out again; `remove` ends the pod's reservation and a claim nobody reserves is deallocated."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
import sys
from pathlib import Path

from support.schemas import validate

from numalign.adapters.statedir.directory import read_pod_record
from numalign.adapters.statedir.draclaims import HeldClaim, PodReference, encode_claims
from numalign.adapters.statedir.layout import DRA_CLAIMS_FILE, POD_RECORD_FILE
from numalign.adapters.statedir.podrecord import encode_pod_record
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


def read_claims(state: Path) -> list[HeldClaim]:
    """The claims the pod record keeps."""
    record = read_pod_record(state)
    assert record is not None and record.claims is not None
    return list(record.claims)


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
    doc = json.loads(removed.stdout)
    validate("remove", doc)
    assert doc["claimsReleased"] == ["default/a-gpu"] and doc["summary"]["removed"] == 1
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
    assert first["claimsReleased"] == []  # s2 still reserves it
    assert admit(state, pods_file(tmp_path, "t"))["t"] != [gpu]
    last = json.loads(run("remove", "--state-dir", str(state), "s2", "-o", "json").stdout)
    assert last["claimsReleased"] == ["default/shared-gpu"]
    assert "default/shared-gpu" not in {h.key for h in read_claims(state)}


def test_a_reservation_by_a_pod_the_record_does_not_list_is_dropped(tmp_path: Path) -> None:
    """A reservation by a pod the record does not list (a hand-edited record, or an interrupted write of a
    directory from before claims joined the pod record) holds nothing."""
    state = tmp_path / "state"
    (gpu,) = admit(state, pods_file(tmp_path, "a"))["a"] or []
    assert gpu == "gpu.example.com/node/gpu-0"  # the allocator takes the devices in order
    # A reservation of gpu-1, the next one, by a pod numalign_pods.json does not list.
    ghost = HeldClaim(ResourceClaim("ghost-gpu", "default", "u1", allocation=DeviceAllocationResult((
        DeviceRequestAllocationResult("gpu", "gpu.example.com", "node", "gpu-1"),))),
        (PodReference("default", "ghost", "no-such-uid"),))
    record = read_pod_record(state)
    assert record is not None and {h.key for h in record.claims or ()} == {"default/a-gpu"}
    (state / POD_RECORD_FILE).write_bytes(encode_pod_record(
        dataclasses.replace(record, claims=(*(record.claims or ()), ghost))))
    assert admit(state, pods_file(tmp_path, "b"))["b"] == ["gpu.example.com/node/gpu-1"]  # gpu-0 stays a's
    assert {h.key for h in read_claims(state)} == {"default/a-gpu", "default/b-gpu"}


def as_version_2(state: Path) -> list[HeldClaim]:
    """Turn the directory into what numalign wrote before claims joined the pod record: a version 2
    record and numalign_dra_claims.json beside it. The claims, as they were."""
    record = read_pod_record(state)
    assert record is not None
    doc = json.loads(encode_pod_record(record))
    body = {"generation": doc["generation"], "pods": doc["pods"], "version": 2}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    (state / POD_RECORD_FILE).write_text(json.dumps(
        {**body, "checksum": "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()}))
    claims = list(record.claims or ())
    (state / DRA_CLAIMS_FILE).write_bytes(encode_claims(claims))
    return claims


def test_a_directory_with_the_old_claims_file_is_read_and_moved_into_the_record(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (gpu,) = admit(state, pods_file(tmp_path, "a"))["a"] or []
    claims = as_version_2(state)
    listed = json.loads(run("pods", "--state-dir", str(state), "-o", "json").stdout)["pods"]
    assert [p["claims"] for p in listed.values()] == [{"default/a-gpu": [gpu]}]
    assert admit(state, pods_file(tmp_path, "b"))["b"] != [gpu]  # a's claim still holds its GPU
    assert not (state / DRA_CLAIMS_FILE).exists()  # the record holds the claims now
    assert {h.key for h in read_claims(state)} == {h.key for h in claims} | {"default/b-gpu"}


def test_a_damaged_or_looping_claims_file_is_one_line_naming_it_and_nothing_is_written(tmp_path: Path) -> None:
    state = tmp_path / "state"
    admit(state, pods_file(tmp_path, "a"))
    as_version_2(state)
    path = state / DRA_CLAIMS_FILE
    damaged = path.read_bytes().replace(b'"name": "a"', b'"name": "z"')
    loop = tmp_path / "loop"

    def make_loop() -> None:
        loop.symlink_to(path)
        path.symlink_to(loop)

    for damage, expected in ((lambda: path.write_bytes(damaged),
                              "cannot read the DRA claims numalign allocated: checksum mismatch"),
                             (make_loop, "it is a loop of symbolic links")):
        path.unlink()
        damage()
        before = {p: p.read_bytes() for p in state.rglob("*") if p.is_file() and not p.name.endswith(".lock")}
        for args in (["admit", "--state-dir", str(state), "--machine", MACHINE, "--reserved-cpus", "0",
                      str(pods_file(tmp_path, "b"))], ["pods", "--state-dir", str(state)],
                     ["remove", "--state-dir", str(state), "a"]):
            p = run(*args)
            assert p.returncode != 0, p.stdout
            (line,) = p.stderr.strip().splitlines()
            assert str(path) in line and expected in line, line
            assert "fix:" in line
        assert {p: p.read_bytes() for p in state.rglob("*")
                if p.is_file() and not p.name.endswith(".lock")} == before


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
    before = (state / POD_RECORD_FILE).read_bytes()
    p = run("admit", "--state-dir", str(state), "--dry-run", str(pods_file(tmp_path, "b")), "-o", "json")
    assert p.returncode == 0, p.stderr
    (pod,) = json.loads(p.stdout)["pods"]
    assert pod["dra"]["claims"]["default/b-gpu"] != [gpu]
    assert (state / POD_RECORD_FILE).read_bytes() == before


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


# ---- --replace: the old version's claims end with it, the new version's come with it ------------------


def replace(state: Path, f: Path) -> dict[str, list[str] | None]:
    p = run("admit", "--state-dir", str(state), "--machine", MACHINE, "--reserved-cpus", "0", "--replace", str(f),
            "-o", "json")
    assert p.returncode == 0, p.stderr
    return {pod["pod"].split("/")[1]: [d for ds in pod["dra"]["claims"].values() for d in ds]
            for pod in json.loads(p.stdout)["pods"] if "dra" in pod}


def plain_pod_file(tmp: Path, name: str) -> Path:
    """The pod `name` without claims."""
    f = tmp / f"{name}-plain.yaml"
    f.write_text(f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n  - name: main\n"
                 "    image: trainer\n    resources:\n      limits: {cpu: \"1\", memory: 1Gi}\n")
    return f


def test_replacing_a_pod_whose_claim_comes_from_a_template_gives_it_a_device_again(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (gpu,) = admit(state, pods_file(tmp_path, "a"))["a"] or []
    # The template's claim is deleted with the old version and created again for the new one.
    assert replace(state, pods_file(tmp_path, "a")) == {"a": [gpu]}
    (held,) = read_claims(state)
    assert held.key == "default/a-gpu" and held.devices == (gpu,)
    # The next pod does not get a's device.
    assert admit(state, pods_file(tmp_path, "b"))["b"] == ["gpu.example.com/node/gpu-1"]


def test_replacing_a_pod_by_a_version_without_claims_deallocates_its_claim(tmp_path: Path) -> None:
    state = tmp_path / "state"
    (gpu,) = admit(state, pods_file(tmp_path, "a"))["a"] or []
    assert replace(state, plain_pod_file(tmp_path, "a")) == {}
    assert read_claims(state) == []
    listed = json.loads(run("pods", "--state-dir", str(state), "-o", "json").stdout)["pods"]
    assert ["claims" in p for p in listed.values()] == [False]
    assert admit(state, pods_file(tmp_path, "b"))["b"] == [gpu]  # a's old device is free


KILL_AT_RECORD_WRITE = """
import os, signal, sys
from numalign.adapters.statedir import directory

writes = 0
real_init = directory.StateDirectory.__init__

def kill_at_record_write(what):
    global writes
    if what == "record":
        writes += 1
        if writes == int(os.environ["KILL_AT_WRITE"]):
            os.kill(os.getpid(), signal.SIGKILL)

def init(self, *args, **kwargs):
    real_init(self, *args, **kwargs)
    self.before_write = kill_at_record_write

directory.StateDirectory.__init__ = init
from numalign.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def test_replace_killed_at_its_commit_leaves_the_old_version_with_its_own_claims(tmp_path: Path) -> None:
    """kill -9 right before the write that commits `--replace` (the pod record, which holds the claims):
    the old version stays recorded with its own claim and device, never with the new version's claims."""
    import os
    import signal

    state = tmp_path / "state"
    (gpu,) = admit(state, pods_file(tmp_path, "a"))["a"] or []
    before = read_pod_record(state)
    killed = subprocess.run(
        [sys.executable, "-c", KILL_AT_RECORD_WRITE, "admit", "--state-dir", str(state), "--machine", MACHINE,
         "--reserved-cpus", "0", "--replace", str(pods_file(tmp_path, "a", shared=True)), "-o", "json"],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, "KILL_AT_WRITE": "1"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    after = read_pod_record(state)
    assert after is not None and before is not None
    assert after.pods == before.pods and after.claims == before.claims  # the old version, its own claim
    listed = json.loads(run("pods", "--state-dir", str(state), "-o", "json").stdout)["pods"]
    assert [p["claims"] for p in listed.values()] == [{"default/a-gpu": [gpu]}]
    assert admit(state, pods_file(tmp_path, "b"))["b"] == ["gpu.example.com/node/gpu-1"]  # gpu-0 stays a's
    # Run again, the replacement completes: the shared claim takes a free GPU, a's old one is freed.
    assert replace(state, pods_file(tmp_path, "a", shared=True)) == {"a": [gpu]}
    assert {h.key for h in read_claims(state)} == {"default/shared-gpu", "default/b-gpu"}


def test_replace_by_a_new_uid_killed_between_its_two_writes_leaves_no_claim_of_either(tmp_path: Path) -> None:
    """A replacement with another uid writes the record twice (the removal first): killed between the two,
    the old version is gone with its claim and the new one is not there yet; its device is free."""
    import os
    import signal

    state = tmp_path / "state"
    (gpu,) = admit(state, pods_file(tmp_path, "a"))["a"] or []
    new = pods_file(tmp_path, "a", shared=True)
    new.write_text(new.read_text().replace("metadata: {name: a}", "metadata: {name: a, uid: a-version-2}"))
    killed = subprocess.run(
        [sys.executable, "-c", KILL_AT_RECORD_WRITE, "admit", "--state-dir", str(state), "--machine", MACHINE,
         "--reserved-cpus", "0", "--replace", str(new), "-o", "json"],
        capture_output=True, text=True, timeout=120, check=False, env={**os.environ, "KILL_AT_WRITE": "2"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    after = read_pod_record(state)
    assert after is not None and after.pods == () and after.claims == ()
    assert admit(state, pods_file(tmp_path, "b"))["b"] == [gpu]
