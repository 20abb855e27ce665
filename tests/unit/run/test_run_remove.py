"""`numalign remove` of a `numalign run` pod whose process still runs is refused: the run is released when
its process ends, and freeing its CPUs before would give the same exclusive CPU to the next run."""

from __future__ import annotations

import dataclasses
import os
import shutil
from pathlib import Path

import pytest

from numalign.adapters.statedir.layout import POD_RECORD_FILE
from numalign.adapters.statedir.podrecord import decode_pod_record, encode_pod_record
from numalign.cli.main import main

# Written on dual-socket with a static CPU manager reserving CPU 0: runs a and b (pids 10 and 11), and a
# pod without a process (an agent's).
WRITTEN_BEFORE = Path(__file__).resolve().parents[2] / "data" / "state" / "run-processes"
NODE = ["--machine", "dual-socket", "--cpu-manager-policy", "static", "--reserved-cpus", "0",
        "--memory-manager-policy", "None", "--topology-manager-policy", "none"]


def _run_of_a_is_this_process(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    shutil.copytree(WRITTEN_BEFORE, state)
    stat = Path("/proc/self/stat").read_text()
    start = int(stat[stat.rfind(")") + 2:].split()[22 - 3])  # field 22: start time, as numalign run records it
    path = state / POD_RECORD_FILE
    record = decode_pod_record(path.read_bytes())
    pods = tuple(dataclasses.replace(e, process={**e.process, "pid": os.getpid(), "start_time": start})
                 if e.uid == "uid-a" and e.process is not None else e for e in record.pods)
    path.write_bytes(encode_pod_record(dataclasses.replace(record, pods=pods)))
    return state


def test_the_pod_of_a_running_run_is_not_removed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = _run_of_a_is_this_process(tmp_path)
    before = (state / POD_RECORD_FILE).read_bytes()
    assert main(["remove", "--state-dir", str(state), *NODE, "default/a", "uid-agent"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"remove default/a: it is the pod of a running `numalign run` (pid {os.getpid()}" in err[0]
    assert f"fix: end that process (kill {os.getpid()})" in err[0]
    record = decode_pod_record((state / POD_RECORD_FILE).read_bytes())
    assert "uid-a" in record.uids() and "uid-agent" in record.uids()  # one transaction: neither removed
    # b's process (pid 11, another start time) ended: released on the load, as every writer does.
    assert "uid-b" not in record.uids() and before != (state / POD_RECORD_FILE).read_bytes()


def test_a_pod_without_a_running_process_is_removed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = _run_of_a_is_this_process(tmp_path)
    assert main(["remove", "--state-dir", str(state), *NODE, "uid-agent"]) == 0
    assert "removed default/agent" in capsys.readouterr().out
    assert decode_pod_record((state / POD_RECORD_FILE).read_bytes()).uids() == ["uid-a"]


def _manifest(tmp_path: Path, name: str, uid: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: default, uid: {uid}}}\n"
                    "spec:\n  containers:\n  - name: main\n    resources: {limits: {cpu: '4', memory: 1Gi}}\n",
                    encoding="utf-8")
    return path


@pytest.mark.parametrize("uid", ["uid-a", "uid-a2"])
def test_admit_replace_of_a_running_runs_pod_is_refused_as_remove_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], uid: str
) -> None:
    # Same uid: the same pod to the kubelet (its process record would pass to the new version); another
    # uid, same name: the run's CPUs would be freed while its process still runs on them.
    state = _run_of_a_is_this_process(tmp_path)
    assert main(["remove", "--state-dir", str(state), *NODE, "uid-agent"]) == 0  # b released too: settled
    capsys.readouterr()
    before = (state / POD_RECORD_FILE).read_bytes()
    pod = _manifest(tmp_path, "a", uid)
    assert main(["admit", "--state-dir", str(state), *NODE, "--replace", str(pod)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    assert f"admit --replace default/a: it is the pod of a running `numalign run` (pid {os.getpid()}" in err[0]
    assert f"fix: end that process (kill {os.getpid()})" in err[0] and "under another name" in err[0]
    assert (state / POD_RECORD_FILE).read_bytes() == before  # nothing written
    # pods still shows the run's own pod, with its 2 CPUs, as the process's
    assert main(["pods", "--state-dir", str(state), "-o", "json"]) == 0
    assert '"uid-a"' in capsys.readouterr().out
    record = decode_pod_record((state / POD_RECORD_FILE).read_bytes())
    (entry,) = record.pods
    assert entry.uid == "uid-a" and entry.process is not None and entry.process["pid"] == os.getpid()
    assert entry.manifest["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "2"


def test_admit_replace_after_the_run_ended_admits_the_new_version_without_the_process(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    shutil.copytree(WRITTEN_BEFORE, state)  # a's process (pid 10) is not running: released on the load
    pod = _manifest(tmp_path, "a", "uid-a")
    assert main(["admit", "--state-dir", str(state), *NODE, "--replace", str(pod)]) == 0
    capsys.readouterr()
    record = decode_pod_record((state / POD_RECORD_FILE).read_bytes())
    (entry,) = [e for e in record.pods if e.uid == "uid-a"]
    assert entry.process is None  # the new version is not the ended run's process
    assert entry.manifest["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "4"
