"""The running kubelet's command line as pflag reads it."""

from __future__ import annotations

from pathlib import Path

from numalign.adapters.kubelet_process import find_kubelet, parse_command_line


def test_both_flag_forms_booleans_and_only_modelled_flags_kept() -> None:
    argv = ["kubelet", "--config=/etc/k/c.yaml", "--root-dir", "/data/kubelet", "--fail-swap-on", "--v=4",
            "--reserved-cpus", "0-1", "--cgroups-per-qos", "--kube-reserved=cpu=1,memory=1Gi",
            "--topology-manager-policy-options", "prefer-closest-numa-nodes=true"]
    flags, last = parse_command_line(argv)
    assert flags == [("--reserved-cpus", "0-1"), ("--cgroups-per-qos", "true"),
                     ("--kube-reserved", "cpu=1,memory=1Gi"),
                     ("--topology-manager-policy-options", "prefer-closest-numa-nodes=true")]
    assert last["config"] == "/etc/k/c.yaml" and last["root-dir"] == "/data/kubelet"
    assert last["fail-swap-on"] == "true" and last["v"] == "4"


def test_find_kubelet_skips_other_processes(tmp_path: Path) -> None:
    for pid, comm in (("7", "containerd"), ("12", "kubelet")):
        (tmp_path / pid).mkdir()
        (tmp_path / pid / "comm").write_text(comm + "\n")
        (tmp_path / pid / "cmdline").write_bytes(f"/bin/{comm}\0--memory-manager-policy=Static\0".encode())
    (tmp_path / "self").mkdir()
    found = find_kubelet(tmp_path)
    assert found is not None and found.pid == 12
    assert found.flags == (("--memory-manager-policy", "Static"),) and found.config is None
    assert find_kubelet(tmp_path / "missing") is None
