"""`numalign nrt` on the command line: built-in node, pods admitted first, a state directory, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from support.terminal import run_on_a_terminal

from numalign.cli.main import main

DATA = Path(__file__).resolve().parents[2] / "src" / "numalign" / "data"


def test_nrt_yaml_json_and_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nrt", "--node-name", "n1"]) == 0
    obj = yaml.safe_load(capsys.readouterr().out)
    assert obj["kind"] == "NodeResourceTopology" and obj["metadata"]["name"] == "n1"
    assert main(["nrt", "-o", "json", str(DATA / "example-pods.yaml")]) == 0
    out = capsys.readouterr()
    after = json.loads(out.out)
    # The example pods take CPUs and GPUs; one of them is rejected and said so on stderr.
    free = {z["name"]: {r["name"]: r["available"] for r in z["resources"]} for z in after["zones"]}
    before = {z["name"]: {r["name"]: r["available"] for r in z["resources"]} for z in obj["zones"]}
    assert free != before
    assert "TopologyAffinityError" in out.err
    assert main(["nrt", "-o", "text"]) == 0
    assert "zone node-0 (Node)" in capsys.readouterr().out


def test_nrt_reads_a_state_directory_without_writing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = tmp_path / "state"
    assert main(["admit", "--state-dir", str(state), str(DATA / "example-pods.yaml")]) == 0
    capsys.readouterr()
    files = {p: p.stat().st_mtime_ns for p in state.rglob("*") if p.is_file()}
    assert main(["nrt", "-o", "json", "--state-dir", str(state)]) == 0
    from_state = json.loads(capsys.readouterr().out)
    assert main(["nrt", "-o", "json", str(DATA / "example-pods.yaml")]) == 0
    from_pods = json.loads(capsys.readouterr().out)
    assert from_state == from_pods  # zones, attributes and the pod-set fingerprint
    assert from_state["attributes"][2]["name"] == "nodeTopologyPodsFingerprint"
    assert {p: p.stat().st_mtime_ns for p in state.rglob("*") if p.is_file()} == files


def test_nrt_of_a_state_directory_uses_the_machine_and_config_admit_recorded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """As pods, remove and resize: numalign_node.json names the machine and the kubelet flags, so `nrt
    --state-dir` alone answers for the node admit decided on (it took the built-in dual-socket and the
    CPU manager refused the state with a wrong 'remove the state file' fix)."""
    state = tmp_path / "state"
    flags = ["--machine", "epyc-nps4", "--reserved-cpus", "0,128"]
    assert main(["admit", "--state-dir", str(state), *flags, str(DATA / "example-pods.yaml")]) in (0, 1)
    capsys.readouterr()
    assert main(["nrt", "-o", "json", "--state-dir", str(state)]) == 0
    out = capsys.readouterr()
    recorded = json.loads(out.out)
    assert "as recorded by admit in" in out.err and "epyc-nps4" in out.err
    assert main(["nrt", "-o", "json", "--state-dir", str(state), *flags]) == 0
    assert json.loads(capsys.readouterr().out) == recorded
    assert [z["name"] for z in recorded["zones"]] == [f"node-{i}" for i in range(8)]


def test_nrt_of_a_state_directory_that_is_not_there_is_refused(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A mistyped --state-dir was answered as an empty node (exit 0), as `admit --dry-run` refuses it."""
    assert main(["nrt", "--state-dir", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope: no such directory" in err[0] and "check the path" in err[0]
    assert not (tmp_path / "nope").exists()


@pytest.mark.parametrize("text", ["", "---\n---\n", '{"apiVersion": "v1", "kind": "List", "items": []}'])
def test_nrt_of_a_pod_file_without_pods_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    text: str) -> None:
    """An empty (or truncated) POD.yaml was answered with the node as it is and exit 0 (newcomer finding 2);
    as `admit`, a file named to add pods that holds none is refused, nothing printed on stdout."""
    pods = tmp_path / "pods.yaml"
    pods.write_text(text)
    assert main(["nrt", str(pods)]) == 2
    out = capsys.readouterr()
    err = out.err.strip().splitlines()
    assert out.out == "" and len(err) == 1
    assert err[0].startswith(f"numalign nrt: error: {pods}: no Pod (or workload with a pod template) found; "
                             "expected a manifest of kind Pod, ")
    assert "is not empty" in err[0]


def test_nrt_of_a_kubelets_own_state_directory_counts_what_its_checkpoints_hold(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A directory without numalign's pod record (a kubelet's /var/lib/kubelet, a copy): its pods are
    known only by UID, yet what they hold is taken, as the topology-updater sees it through List."""
    state = tmp_path / "state"
    assert main(["admit", "--state-dir", str(state), str(DATA / "example-pods.yaml")]) == 0
    capsys.readouterr()
    assert main(["nrt", "-o", "json", "--state-dir", str(state)]) == 0
    recorded = json.loads(capsys.readouterr().out)
    (state / "numalign_pods.json").unlink()
    assert main(["nrt", "-o", "json", "--state-dir", str(state)]) == 0
    out = capsys.readouterr()
    kubelets = json.loads(out.out)
    assert kubelets["zones"] == recorded["zones"]
    assert main(["nrt", "-o", "json"]) == 0
    assert kubelets["zones"] != json.loads(capsys.readouterr().out)["zones"]
    # No names, no fingerprint: said once on stderr.
    assert [a["name"] for a in kubelets["attributes"]] == ["topologyManagerPolicy", "topologyManagerScope"]
    # (the other notes say where the machine and the kubelet version came from: numalign_node.json)
    assert sum("nodeTopologyPodsFingerprint" in line for line in out.err.splitlines()) == 1
    assert all(line.startswith("numalign nrt: note: ") for line in out.err.strip().splitlines())


def test_nrt_from_a_socket_that_is_not_there(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nrt", "--pod-resources-socket", str(tmp_path / "kubelet.sock")]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "kubelet.sock: not a socket; expected the PodResources socket" in err[0]


def test_a_cluster_export_shows_progress_on_a_terminal_only() -> None:
    # stderr on a real pseudo-terminal, stdout on a pipe: the objects go to stdout, untouched
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "numalign.cli.main", "nrt", "--cluster", "example", "-o", "json"]
    proc, shown = run_on_a_terminal(cmd, timeout=60)
    assert len(json.loads(proc.stdout)["items"]) == 12
    assert "nrt: 12 node(s) of example" in shown and "writing 12 object(s) as json" in shown
    assert shown.endswith("\x1b[2K")  # the line is cleared at the end
    piped = subprocess.run(cmd, capture_output=True, check=True, timeout=60)
    assert piped.stderr == b"" and piped.stdout == proc.stdout
