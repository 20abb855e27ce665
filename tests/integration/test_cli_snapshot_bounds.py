"""`--node SNAPSHOT` and `--machine DUMP.tar.*` as a user meets them with a hostile or damaged tarball:
bounded before anything is written, and every malformed member is invalid input (exit 2) in one line
naming the snapshot and the member, never an internal error."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from support.sysfs_tree import write_sysfs

EXE = [sys.executable, "-m", "numalign.cli.main"]
POD = """apiVersion: v1
kind: Pod
metadata: {name: b}
spec:
  containers:
  - name: c
    resources: {limits: {cpu: "1", memory: 1Gi}}
"""


def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=300, check=False, input=stdin)


def _one_line_of_invalid_input(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert "internal error" not in line and "Traceback" not in line
    return line


def test_a_member_past_the_size_limit_is_refused_before_it_is_written(tmp_path: Path) -> None:
    src = tmp_path / "bomb.tgz"
    with tarfile.open(src, "w:gz") as tf:  # 65 MiB of zeros: 65 kB compressed
        info = tarfile.TarInfo("state/cpu_manager_state")
        info.size = 65 << 20
        tf.addfile(info, io.BytesIO(bytes(info.size)))
    line = _one_line_of_invalid_input(run("discover", "--node", str(src)))
    assert f"--node {src}: entry 'state/cpu_manager_state' is 68,157,440 bytes, more than the limit of 64 MiB" in line


def test_an_archive_of_too_many_entries_is_refused_at_the_limit(tmp_path: Path) -> None:
    src = tmp_path / "many.tar"
    with tarfile.open(src, "w") as tf:
        for i in range(100_001):
            tf.addfile(tarfile.TarInfo(f"sys/f{i}"))
    line = _one_line_of_invalid_input(run("discover", "--machine", str(src)))
    assert f"--machine {src}: more than 100,000 entries (the limit)" in line


@pytest.mark.parametrize("option", ["--node", "--machine"])
def test_a_member_a_thousand_directories_deep_is_refused(tmp_path: Path, option: str) -> None:
    """Extracting it overflowed os.makedirs' recursion: "internal error: RecursionError"."""
    src = tmp_path / "deep.tgz"
    with tarfile.open(src, "w:gz") as tf:
        info = tarfile.TarInfo("sys/" + "d/" * 1000 + "f")
        info.size = 1
        tf.addfile(info, io.BytesIO(b"x"))
    line = _one_line_of_invalid_input(run("discover", option, str(src)))
    assert f"{option} {src}: entry sys/d/d/d" in line and "is 1002 directories deep, more than the limit of 64" in line


@pytest.mark.parametrize("option", ["--node", "--machine"])
def test_an_escaping_link_is_refused_by_name(tmp_path: Path, option: str) -> None:
    src = tmp_path / "link.tgz"
    with tarfile.open(src, "w:gz") as tf:
        link = tarfile.TarInfo("dump/sys/devices/system/node/node0/cpu0")
        link.type, link.linkname = tarfile.SYMTYPE, "../../../../../../../etc"
        tf.addfile(link)
    line = _one_line_of_invalid_input(run("discover", option, str(src)))
    assert "entry 'dump/sys/devices/system/node/node0/cpu0' is a link to '../../../../../../../etc', outside" in line


# ---- malformed members of a real snapshot ----------------------------------------------------------


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[tarfile.TarInfo, bytes | None]]:
    d = tmp_path_factory.mktemp("snap")
    root = write_sysfs(d / "root")
    state = d / "state"
    admitted = run("admit", "-", "--machine", str(root), "--state-dir", str(state), "--cpu-manager-policy", "static",
                   "--reserved-cpus", "0", "--memory-manager-policy", "None", stdin=POD)
    assert admitted.returncode == 0, admitted.stderr
    (d / "config.yaml").write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                                   "cpuManagerPolicy: static\nreservedSystemCPUs: '0'\n")
    made = run("snapshot", str(d / "good.tgz"), "--sysfs-root", str(root), "--state-dir", str(state),
               "--config", str(d / "config.yaml"), "--pod-resources-socket", str(d / "none.sock"))
    assert made.returncode == 0, made.stderr
    with tarfile.open(d / "good.tgz") as tf:
        members = {}
        for m in tf.getmembers():
            body = tf.extractfile(m) if m.isreg() else None
            members[m.name] = (m, body.read() if body is not None else None)
    allocatable = json.dumps({"devices": []}).encode()
    members["podresources/allocatable.json"] = (tarfile.TarInfo("podresources/allocatable.json"), allocatable)
    return members


def _with(tmp_path: Path, members: dict[str, tuple[tarfile.TarInfo, bytes | None]], name: str,
          data: bytes) -> Path:
    out = tmp_path / "damaged.tgz"
    with tarfile.open(out, "w:gz") as tf:
        for member, (info, body) in members.items():
            if member == name:
                info, body = tarfile.TarInfo(name), data
            if body is not None:
                info.size = len(body)
            tf.addfile(info, io.BytesIO(body) if body is not None else None)
    return out


def test_the_intact_snapshot_answers(tmp_path: Path, snapshot: dict[str, tuple[tarfile.TarInfo, bytes | None]]) -> None:
    src = _with(tmp_path, snapshot, "", b"")
    done = run("admit", "-", "--node", str(src), stdin=POD.replace("name: b", "name: another"))
    assert done.returncode == 0, done.stderr
    again = run("admit", "-", "--node", str(src), stdin=POD)  # the pod the snapshot holds
    line = _one_line_of_invalid_input(again)
    assert f"{src}:state" in line and "numalign-node-" not in line


@pytest.mark.parametrize(
    ("member", "data", "said"),
    [
        ("snapshot.json", b'{"x":' + b"[" * 5000, "no readable snapshot.json"),
        ("snapshot.json", b"\xff\xfe", "no readable snapshot.json"),
        ("snapshot.json", b'{"format": [1]}', "snapshot.json has format [1]"),
        ("podresources/allocatable.json", b'{"devices": [' + b"[" * 5000, "podresources/allocatable.json: not JSON"),
        ("podresources/allocatable.json", b"[1, 2]", "podresources/allocatable.json: expected a PodResources"),
        ("state/cpu_manager_state", b"{", "state/cpu_manager_state"),
        ("state/cpu_manager_state", b"null", "state/cpu_manager_state"),
        ("state/device-plugins/kubelet_internal_checkpoint", b"\xff\xfe", "kubelet_internal_checkpoint"),
        ("state/numalign_pods.json", b"[1, 2]", "state/numalign_pods.json"),
    ],
    ids=["manifest-deep", "manifest-binary", "manifest-format", "allocatable-deep", "allocatable-list",
         "cpu-state-cut", "cpu-state-null", "device-checkpoint-binary", "pod-record-list"],
)
@pytest.mark.parametrize("command", ["admit", "pods"])
def test_a_malformed_member_is_invalid_input_naming_it(
    tmp_path: Path, snapshot: dict[str, tuple[tarfile.TarInfo, bytes | None]], member: str, data: bytes, said: str,
    command: str,
) -> None:
    src = _with(tmp_path, snapshot, member, data)
    line = _one_line_of_invalid_input(run(command, *(["-"] if command == "admit" else []), "--node", str(src),
                                          stdin=POD))
    assert said in line and str(src) in line and "numalign-node-" not in line
