"""kubectl manners of every command: -o json|yaml parse, `pods` as a table, admit --exit-code, exit 2 for
invalid input, -v and --log-format json (numalign.cli.main.main in-process, with capsys)."""

from __future__ import annotations

import io
import json
import select
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.schemas import validate
from support.shared import shared_dir

from numalign.adapters.textfiles import load_pods
from numalign.agent.status import write_status
from numalign.cli.main import main
from numalign.cli.output import EXIT_CHECK_FAILED, EXIT_INVALID, EXIT_OK
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.kubelet.node import Node
from numalign.machine.examples import example
from numalign.machine.fileformat import machine_to_dict

DATA = Path(__file__).resolve().parents[2] / "src" / "numalign" / "data"
ORACLE = shared_dir() / "oracle" / "merge_vectors.jsonl"
FITS = "apiVersion: v1\nkind: Pod\nmetadata: {name: small}\nspec:\n  containers:\n  - name: c\n" \
       "    resources:\n      limits: {cpu: '2', memory: 1Gi}\n"
TOO_BIG = FITS.replace("small", "huge").replace("cpu: '2'", "cpu: '200'")


def _parse(text: str, fmt: str) -> Any:
    return json.loads(text) if fmt == "json" else yaml.safe_load(text)


@pytest.fixture
def vectors(tmp_path: Path) -> Path:
    """A few recorded merge scenarios with their results (the whole file makes YAML output slow)."""
    path = tmp_path / "vectors.jsonl"
    with ORACLE.open(encoding="utf-8") as fh:
        path.write_text("".join(next(fh) for _ in range(12)), encoding="utf-8")
    return path


@pytest.fixture
def status_dir(tmp_path: Path) -> Path:
    """The agent's status file after admitting the built-in example pods (one of them rejected)."""
    config = config_from_yaml((DATA / "example-kubelet-config.yaml").read_text(encoding="utf-8"), "cfg")
    node = Node(example("dual-socket"), config)
    pods = {}
    for pod in load_pods(DATA / "example-pods.yaml"):
        rec = node.admit(pod)
        pods[pod.uid] = {"namespace": pod.namespace, "name": pod.name, "uid": pod.uid, "file": "pods.yaml",
                         "status": "admitted" if rec.result.admit else "rejected", "reason": rec.result.reason,
                         "message": rec.result.message, "record": rec.to_dict(),
                         "allocations": rec.to_dict()["allocations"],
                         "containers": "started" if rec.result.admit else None}
    state = tmp_path / "state"
    state.mkdir()
    write_status(state, {"pods": pods, "manifests": {}, "resources": {}, "faults": {},
                         "machine": machine_to_dict(node.machine), "reserved_cpus": "0"})
    return state


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_every_one_shot_command_prints_parseable_json_and_yaml(
    fmt: str, capsys: pytest.CaptureFixture[str], status_dir: Path, vectors: Path
) -> None:
    commands: list[tuple[list[str], str]] = [
        (["admit"], "pods"),
        (["replay", str(vectors)], "results"),
        (["replay", "--check", str(vectors)], "equal"),
        (["discover", "--machine", "dual-socket"], "numaNodes"),
        (["pods", "--state-dir", str(status_dir)], "pods"),
        (["nrt"], "zones"),
        (["simulate", "--generate", "8", "--scheduler", "default", "-j", "1"], "runs"),
        (["capacity"], "pools"),
    ]
    for args, key in commands:
        capsys.readouterr()
        assert main([*args, "-o", fmt]) == EXIT_OK, args
        doc = _parse(capsys.readouterr().out, fmt)
        assert key in doc, (args, sorted(doc))
    capsys.readouterr()
    assert main(["discover", "--list", "-o", fmt]) == EXIT_OK
    assert "dual-socket" in [row["name"] for row in _parse(capsys.readouterr().out, fmt)]


def test_replay_check_counts_in_json(capsys: pytest.CaptureFixture[str], vectors: Path) -> None:
    assert main(["replay", "--check", str(vectors), "-o", "json"]) == EXIT_OK
    doc = json.loads(capsys.readouterr().out)
    assert doc["total"] == doc["equal"] == 12 and doc["differences"] == []
    lines = vectors.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    recorded = first["result"]
    first["result"] = {"changed": True}
    vectors.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    assert main(["replay", "--check", str(vectors), "-o", "yaml"]) == EXIT_CHECK_FAILED
    doc = yaml.safe_load(capsys.readouterr().out)
    assert doc["equal"] == 11 and len(doc["differences"]) == 1
    assert doc["differences"][0]["line"] == 1 and doc["differences"][0]["got"] == recorded


def test_admit_exit_code_says_whether_every_pod_fits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fits, too_big = tmp_path / "fits.yaml", tmp_path / "too-big.yaml"
    fits.write_text(FITS)
    too_big.write_text(TOO_BIG)
    assert main(["admit", str(fits), "--exit-code"]) == EXIT_OK
    assert main(["admit", str(fits), str(too_big), "--exit-code"]) == EXIT_CHECK_FAILED
    out = capsys.readouterr().out
    assert "pod default/huge: REJECTED" in out  # the answer is still printed
    # Without --exit-code a rejection is an answer, not a failure (as before).
    assert main(["admit", str(fits), str(too_big)]) == EXIT_OK
    assert main(["admit", str(too_big), "--exit-code", "-o", "yaml"]) == EXIT_CHECK_FAILED


def test_admit_reads_manifests_from_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((FITS + "---\n" + TOO_BIG).encode())))
    assert main(["admit", "-", "--exit-code", "-o", "json"]) == EXIT_CHECK_FAILED
    pods = json.loads(capsys.readouterr().out)["pods"]
    assert [(p["pod"], p["result"]["admit"]) for p in pods] == [("default/small", True), ("default/huge", False)]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"kind: Pod\nmetadata: [1\n")))
    assert main(["admit", "-"]) == EXIT_INVALID
    assert capsys.readouterr().err.startswith("numalign admit: error: <stdin>: line 3, column 1: ")


def test_invalid_input_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: Pod\nmetadata: [1\n")
    assert main(["admit", str(broken)]) == EXIT_INVALID
    assert main(["admit", str(tmp_path / "missing.yaml")]) == EXIT_INVALID
    assert main(["nrt", "--config", str(broken)]) == EXIT_INVALID
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(line.startswith(("numalign admit: error: ", "numalign nrt: error: ")) for line in err)
    with pytest.raises(SystemExit) as usage:  # argparse's own usage errors are 2 as well
        main(["admit", "--no-such-flag"])
    assert usage.value.code == EXIT_INVALID
    with pytest.raises(SystemExit) as usage:
        main(["admit", "-o", "xml"])
    assert usage.value.code == EXIT_INVALID
    # one line each (what, and where to read more), not argparse's usage block first
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "numalign admit: error: unrecognized arguments: --no-such-flag; see 'numalign admit --help'",
        "numalign admit: error: argument -o/--output: invalid choice: 'xml' (choose from 'text', 'json', 'yaml'); "
        "see 'numalign admit --help'",
    ]


def test_run_has_no_user_option_and_says_what_does_it(capsys: pytest.CaptureFixture[str]) -> None:
    """`sudo numalign run --user me ...` (newcomer finding 6) was "numalign: error: unrecognized arguments:
    --user; see 'numalign --help'": the wrong command's help, and no word of the documented way (setpriv
    inside COMMAND, docs/commands.md#run). Nothing ran."""
    with pytest.raises(SystemExit) as usage:
        main(["run", "--user", "alice", "--cpus", "1", "--memory", "1Gi", "--", "touch", "never"])
    assert usage.value.code == EXIT_INVALID
    out = capsys.readouterr()
    (line,) = out.err.splitlines()
    assert line.startswith("numalign run: error: unrecognized arguments: --user; numalign run has no option to "
                           "change user: COMMAND runs as the user who ran numalign (root under sudo)")
    assert "-- setpriv --reuid=$(id -u) --regid=$(id -g) --init-groups COMMAND" in line
    assert line.endswith("; see 'numalign run --help'") and out.out == ""
    assert not Path("never").exists()


def test_log_lines_as_klog_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    too_big = tmp_path / "too-big.yaml"
    too_big.write_text(TOO_BIG)
    assert main(["admit", str(too_big), "-v", "1", "--log-format", "json"]) == EXIT_OK
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    rejected = [line for line in lines if "rejected" in line["msg"]]
    assert rejected and {"ts", "v", "logger", "msg"} <= set(rejected[0])
    assert rejected[0]["v"] == 1 and rejected[0]["logger"] == "numalign.kubelet.topologymanager.manager"
    assert "default/huge" in rejected[0]["msg"]
    # At -v 0 a one-shot command's info lines stay quiet (its answer is on stdout); -v before the command too.
    assert main(["admit", str(too_big)]) == EXIT_OK
    assert capsys.readouterr().err == ""
    assert main(["-v", "1", "admit", str(too_big)]) == EXIT_OK
    assert "numalign admit: info: pod default/huge rejected" in capsys.readouterr().err


def test_pods_table_and_wide(status_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pods", "--state-dir", str(status_dir)]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    rows = {tuple(line.split()[:2]): line.split() for line in lines[1:6]}
    assert lines[0].split() == ["NAMESPACE", "NAME", "STATUS", "CPUS", "MEMORY", "DEVICES"]
    assert rows[("ml", "inference-gpu")][2:] == ["admitted", "1-4,65-68", "32Gi@0", "nvidia.com/gpu=1"]
    assert rows[("net", "dpdk-router")][2:] == ["admitted", "5-6,69-70", "4Gi@0", "intel.com/sriov_netdevice=2"]
    assert rows[("default", "web")][2:] == ["admitted", "shared", "-", "-"]
    assert rows[("default", "db")][2:] == ["admitted", "7-10,71-73", "49408Mi@0", "-"]  # two containers summed
    assert rows[("ml", "training-4gpu")][2:] == ["TopologyAffinityError", "-", "-", "-"]
    # Columns line up: every row's cells start where the header's do.
    starts = [lines[0].index(h) for h in ("NAME ", "STATUS", "CPUS", "MEMORY", "DEVICES")]
    for line in lines[1:6]:
        assert all(line[s - 1] == " " and line[s] != " " for s in starts), line
    assert "ml/training-4gpu: rejected: TopologyAffinityError: " in "\n".join(lines)

    assert main(["pods", "--state-dir", str(status_dir), "-o", "wide"]) == EXIT_OK
    wide = capsys.readouterr().out.splitlines()
    assert wide[0].split() == ["NAMESPACE", "NAME", "STATUS", "CPUS", "MEMORY", "DEVICES", "CONTAINERS",
                               "HUGEPAGES", "DEVICE-IDS", "FILE"]
    router = next(line.split() for line in wide if line.startswith("net "))
    assert router[6:] == ["started", "hugepages-1Gi=4Gi@0", "0000:18:00.0,0000:18:00.1", "pods.yaml"]
    assert "    router: cpus 5-6,69-70 (exclusive); hugepages-1Gi 4Gi on NUMA 0; memory 4Gi on NUMA 0; " \
           "intel.com/sriov_netdevice 0000:18:00.0 0000:18:00.1 (NUMA 0)" in wide  # the devices' NUMA, as admit


def _wait_line(proc: subprocess.Popen[str]) -> str:
    """The next stdout line of a running command, failing (not hanging) if none comes."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], 30)
    assert ready, "no status line from the command"
    return proc.stdout.readline()


def _stop(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGTERM, then the rest of stdout and stderr (read from the same buffered streams _wait_line used)."""
    assert proc.stdout is not None and proc.stderr is not None
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=20)
    out, err = proc.stdout.read(), proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    return out, err


def test_serve_status_lines_and_logs_as_json() -> None:
    root = Path(tempfile.mkdtemp(prefix="na-", dir="/tmp"))  # unix socket paths stay short
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "numalign.cli.main", "serve", "--machine", "dual-socket",
             "--device-plugin-dir", str(root / "dp"), "--pod-resources-socket", str(root / "pr.sock"),
             "--state-dir", str(root / "state"), "--hostname-override", "Worker-1", "-o", "json",
             "--log-format", "json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            started = json.loads(_wait_line(proc))
            assert started["event"] == "started" and started["machine"] == "dual-socket"
            validate("serve", started)
            assert started["nodeName"] == "worker-1" and started["metrics"] is None
            assert started["kubeletSocket"] == str(root / "dp" / "kubelet.sock")
            out, err = _stop(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=10)
        assert proc.returncode == EXIT_OK, err
        assert [json.loads(line) for line in out.splitlines()] == [{"event": "stopped"}]
        logs = [json.loads(line) for line in err.splitlines()]  # every stderr line is a klog JSON line
        assert any(line["msg"].startswith("numalign agent started") and line["v"] == 0 for line in logs)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_plugin_status_as_yaml_documents() -> None:
    root = Path(tempfile.mkdtemp(prefix="na-", dir="/tmp"))
    try:
        devices = root / "devices.yaml"
        devices.write_text("- {id: gpu0, numa: 0}\n- {id: gpu1, numa: 1}\n", encoding="utf-8")
        proc = subprocess.Popen(
            [sys.executable, "-m", "numalign.cli.main", "plugin", "--resource", "example.com/gpu", "--devices",
             str(devices), "--device-plugin-dir", str(root), "--poll-interval", "0.05", "-o", "yaml"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert _wait_line(proc) == "---\n"  # flushed as soon as it serves
            out, err = _stop(proc)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate(timeout=10)
        assert proc.returncode == EXIT_OK, err
        docs = list(yaml.safe_load_all("---\n" + out))
        assert [d["event"] for d in docs] == ["started", "stopped"]
        assert docs[0]["devices"] == ["gpu0", "gpu1"] and docs[0]["socket"] == str(root / "example-com_gpu.sock")
    finally:
        shutil.rmtree(root, ignore_errors=True)
