"""`numalign resize` (preview inplace-resize-exclusive-cpus, KEP-5554) as a subprocess on a state directory
written by `numalign admit`: exit codes, the files it leaves, the preview label in every output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml
from support.schemas import validate

EXE = [sys.executable, "-m", "numalign.cli.main"]
MACHINE = "1s x 2n x 4c x 2t, 8Gi/node"
PREVIEW = ["--preview", "inplace-resize-exclusive-cpus"]
POD = """apiVersion: v1
kind: Pod
metadata: {name: web, uid: web-uid}
spec:
  containers:
  - name: app
    resources:
      limits: {cpu: "2", memory: 256Mi}
"""


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=120, check=False)


def _admitted(tmp_path: Path) -> Path:
    (tmp_path / "pod.yaml").write_text(POD, encoding="utf-8")
    state = tmp_path / "state"
    done = run("admit", str(tmp_path / "pod.yaml"), "--machine", MACHINE, "--state-dir", str(state),
               "--cpu-manager-policy", "static", "--reserved-cpus", "0", "--topology-manager-policy",
               "single-numa-node")
    assert done.returncode == 0, done.stderr
    return state


def _cpu_state(state: Path) -> dict[str, object]:
    """The checkpoint's content: kubelet 1.37 (the default release) keeps it whole in `data`, a JSON
    string beside the older top-level fields; baselines exist only there."""
    doc: dict[str, object] = json.loads((state / "cpu_manager_state").read_text(encoding="utf-8"))
    data = doc.get("data")
    if isinstance(data, str):
        content: dict[str, object] = json.loads(data)
        return content
    return doc


def test_resize_grows_shrinks_and_refuses_with_the_exit_codes(tmp_path: Path) -> None:
    state = _admitted(tmp_path)
    before = _cpu_state(state)
    baseline = before["entries"]["web-uid"]["app"]  # type: ignore[index]

    refused = run("resize", "web", "--container", "app", "--cpus", "4", "--state-dir", str(state))
    assert refused.returncode == 2 and "--preview inplace-resize-exclusive-cpus" in refused.stderr
    assert refused.stderr.count("\n") == 1 and _cpu_state(state) == before

    dry = run("resize", "web", "--container", "app", "--cpus", "4", "--state-dir", str(state), "--dry-run",
              *PREVIEW)
    assert dry.returncode == 0 and "would resize default/web container app: 2 -> 4 CPUs" in dry.stdout
    assert "preview: inplace-resize-exclusive-cpus=true" in dry.stdout and _cpu_state(state) == before

    grown = run("resize", "web", "--container", "app", "--cpus", "4", "--state-dir", str(state), "-o", "json",
                *PREVIEW)
    assert grown.returncode == 0, grown.stderr
    doc = json.loads(grown.stdout)
    validate("resize", doc)
    assert doc["resized"] and doc["previews"] == {"inplace-resize-exclusive-cpus": "true"}
    assert len(doc["cpusAfter"]) == 4 and set(doc["cpusBefore"]) < set(doc["cpusAfter"]) and doc["numaNodes"] == [0]
    after = _cpu_state(state)
    assert after["baselines"] == {"web-uid": {"app": {"baseline": baseline}}}
    # the pods listing reads the resized state back as consistent
    listed = run("pods", "--state-dir", str(state), "-o", "json")
    assert listed.returncode == 0, listed.stderr

    below = run("resize", "web-uid", "--container", "app", "--cpus", "1", "--state-dir", str(state), "-o", "yaml",
                *PREVIEW)
    assert below.returncode == 1
    out = yaml.safe_load(below.stdout)
    assert out["reason"] == "prohibitedCPUAllocationError" and not out["resized"]
    assert _cpu_state(state) == after

    back = run("resize", "default/web", "--container", "app", "--cpus", "2", "--state-dir", str(state), *PREVIEW)
    assert back.returncode == 0 and "released" in back.stdout
    assert _cpu_state(state)["entries"] == {"web-uid": {"app": baseline}}


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    state = _admitted(tmp_path)
    for args, expect in ((["--cpus", "lots"], "--cpus"), (["--cpus", "0"], "--cpus 0"),
                         (["--cpus", "2", "--container", "nope"], "no such container")):
        container = [] if "--container" in args else ["--container", "app"]
        done = run("resize", "web", *container, *args, "--state-dir", str(state), *PREVIEW)
        assert done.returncode == 2 and expect in done.stderr and done.stderr.count("\n") == 1, done.stderr
    missing = run("resize", "ghost", "--container", "app", "--cpus", "3", "--state-dir", str(state), *PREVIEW)
    assert missing.returncode == 2 and "no pod default/ghost" in missing.stderr


def test_resize_on_a_snapshot_reads_its_state_and_never_writes(tmp_path: Path) -> None:
    from support.sysfs_tree import write_sysfs

    root = write_sysfs(tmp_path / "root", cores=4)
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                      "cpuManagerPolicy: static\nreservedSystemCPUs: \"0\"\ntopologyManagerPolicy: single-numa-node\n",
                      encoding="utf-8")
    (tmp_path / "pod.yaml").write_text(POD, encoding="utf-8")
    state = tmp_path / "state"
    admitted = run("admit", str(tmp_path / "pod.yaml"), "--machine", str(root), "--config", str(config),
                   "--state-dir", str(state))
    assert admitted.returncode == 0, admitted.stderr
    snap = tmp_path / "node.tgz"
    taken = run("snapshot", str(snap), "--sysfs-root", str(root), "--config", str(config), "--state-dir", str(state))
    assert taken.returncode == 0, taken.stderr
    before = snap.read_bytes(), _cpu_state(state)
    done = run("resize", "web", "--container", "app", "--cpus", "3", "--node", str(snap), "-o", "json", *PREVIEW)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    validate("resize", doc)
    assert doc["summary"] == {"pod": doc["pod"], "container": "app", "requestedCPUs": "3", "resized": True,
                              "dryRun": True}
    assert doc["dryRun"] and doc["resized"] and len(doc["cpusAfter"]) == 3
    assert set(doc["cpusBefore"]) < set(doc["cpusAfter"])
    assert (snap.read_bytes(), _cpu_state(state)) == before


def test_resize_on_a_small_machine_admitted_with_the_example_configuration(tmp_path: Path) -> None:
    """admit fits the built-in example's reservedSystemCPUs (0,64 on dual-socket) to the machine's first
    core; resize reads the same state with the same fitted configuration (it failed "unknown CPU ID: 64")."""
    (tmp_path / "pod.yaml").write_text(POD, encoding="utf-8")
    state = tmp_path / "state"
    done = run("admit", str(tmp_path / "pod.yaml"), "--machine", MACHINE, "--state-dir", str(state))
    assert done.returncode == 0, done.stderr
    for machine in (["--machine", MACHINE], []):  # given again, or the node record's
        done = run("resize", "web", "--container", "app", "--cpus", "4", "--state-dir", str(state), "--dry-run",
                   *machine, *PREVIEW)
        assert done.returncode == 0, done.stderr
        assert "CPUs      1,9 -> 1-2,9-10" in done.stdout
