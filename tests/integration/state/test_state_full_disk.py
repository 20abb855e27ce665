"""A full disk (RLIMIT_FSIZE in the child, so no root and no tmpfs are needed): an admission whose
files could not be written is reported rejected with the write error, and never comes back admitted."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

from support.nodecheck import check_node, open_read_only

from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.machine.examples import example

DATA = Path(__file__).resolve().parents[3] / "src" / "numalign" / "data"
CLI = [sys.executable, "-m", "numalign.cli.main"]


def _pod(path: Path, name: str, cpus: int) -> Path:
    path.write_text(f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n  - name: app\n"
                    f"    resources: {{limits: {{cpu: {cpus}, memory: 1Gi}}}}\n")
    return path


def _admit(pod: Path, state: Path, max_file_size: int | None = None) -> subprocess.CompletedProcess[str]:
    def limit() -> None:
        # EFBIG instead of SIGXFSZ: the write fails as it does on a full disk.
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        assert max_file_size is not None
        resource.setrlimit(resource.RLIMIT_FSIZE, (max_file_size, max_file_size))

    return subprocess.run([*CLI, "admit", str(pod), "--state-dir", str(state), "--output", "json"],
                          capture_output=True, text=True, check=False,
                          preexec_fn=limit if max_file_size is not None else None)


def test_a_full_disk_fails_the_admission_completely(tmp_path: Path) -> None:
    state = tmp_path / "state"
    first = _admit(_pod(tmp_path / "a.yaml", "a", 4), state)
    assert first.returncode == 0, first.stderr
    sizes = {p.name: p.stat().st_size for p in state.rglob("*") if p.is_file()}
    # Room for every file as it is, not for one that grows: the next admission's writes fail part-way.
    full = _admit(_pod(tmp_path / "b.yaml", "b", 4), state, max_file_size=max(sizes.values()) + 8)
    assert full.returncode == 0, full.stderr
    (rec,) = json.loads(full.stdout)["pods"]
    assert not rec["result"]["admit"] and rec["result"]["reason"] == "UnexpectedAdmissionError"
    assert "File too large" in rec["result"]["message"] and rec["allocations"] == {}
    # Space again, and a restart: b is not admitted, a is as it was, nothing is held twice.
    machine = example("dual-socket")
    config = config_from_yaml((DATA / "example-kubelet-config.yaml").read_text(), "cfg")
    node = open_read_only(machine, config, state)
    held = check_node(node, state)
    assert sorted(p.name for p in node.pods.values()) == ["a"] and held[next(iter(node.pods))]["app"]
    again = _admit(tmp_path / "b.yaml", state)  # and b can be asked again
    assert again.returncode == 0 and json.loads(again.stdout)["pods"][0]["result"]["admit"]
