"""A key written twice in one mapping of a file users write (a pod, a KubeletConfiguration, a machine
file, a cluster dump, a --devices file) is refused in one line naming the file, the line, the key and
the fix, as Kubernetes' strict decoding refuses it, instead of the last value silently winning (the
newcomer trial's finding: `cpu:` written twice was admitted with the second number)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from numalign.cli.main import main
from numalign.cli.output import EXIT_INVALID
from numalign.k8s.documents import parse_documents

POD_TWICE = """\
apiVersion: v1
kind: Pod
metadata:
  name: p
spec:
  containers:
  - name: c
    resources:
      limits:
        cpu: "2"
        memory: 1Gi
        cpu: "4"
"""


def error_of(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run the CLI: it must exit 2 with exactly one line on stderr and print nothing on stdout."""
    code = main(list(args))
    captured = capsys.readouterr()
    assert code == EXIT_INVALID, captured.err
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"numalign {args[0]}: error: "), captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    return lines[0]


def test_a_pod_with_a_limit_written_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD_TWICE)
    line = error_of(capsys, "admit", str(pod), "--machine", "dual-socket")
    assert f'{pod}: line 12, column 9: key "cpu" already set in map (first on line 10)' in line
    assert "keep one of the two" in line


def test_a_json_pod_names_the_key_after_unescaping(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # "c\u0070u" is "cpu"; a `":` inside a label value is no key.
    pod = tmp_path / "pod.json"
    pod.write_text('{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a\\"": "x:"}},\n'
                   ' "spec": {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2",\n'
                   '    "memory": "1Gi", "c\\u0070u": "4"}}}]}}\n')
    line = error_of(capsys, "admit", str(pod))
    assert f'{pod}: line 3, column 22: duplicate field "cpu" (first on line 2)' in line


def test_a_kubelet_config_with_a_policy_written_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD_TWICE.replace('        cpu: "4"\n', ""))
    config = tmp_path / "kubelet.yaml"
    config.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                      "cpuManagerPolicy: static\nreservedSystemCPUs: '0'\ntopologyManagerPolicy: single-numa-node\n"
                      "topologyManagerPolicy: none\n")
    line = error_of(capsys, "admit", str(pod), "--config", str(config))
    assert f'{config}: line 6, column 1: key "topologyManagerPolicy" already set in map (first on line 5)' in line
    assert "expected a KubeletConfiguration" in line


def test_a_machine_file_with_a_field_written_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    machine = tmp_path / "machine.yaml"
    machine.write_text("name: m\nsockets: 2\nnuma_nodes_per_socket: 1\ncores_per_numa_node: 4\n"
                       "threads_per_core: 2\nmemory_per_numa_node: 16Gi\nsockets: 1\n")
    line = error_of(capsys, "discover", "--machine", str(machine))
    assert f'{machine}: line 7, column 1: key "sockets" already set in map (first on line 2)' in line


def test_a_nodes_dump_with_a_capacity_written_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    nodes = tmp_path / "nodes.json"
    node = '{"kind": "Node", "metadata": {"name": "a"}, "status": {"capacity": {"cpu": "8", "cpu": "64"}}}'
    nodes.write_text('{"apiVersion": "v1", "kind": "List", "items": [\n' + node + "\n]}\n")
    nrts = tmp_path / "nrts.json"
    nrts.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}))
    line = error_of(capsys, "simulate", "--nodes", str(nodes), "--nrts", str(nrts), "--generate", "1")
    assert f'{nodes}: line 2, column 81: duplicate field "cpu" (first on line 2)' in line


def test_a_devices_file_with_a_key_written_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    devices = tmp_path / "allocatable.json"
    devices.write_text('{"devices": [{"resource_name": "r", "resource_name": "s", "device_ids": ["a"]}]}')
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD_TWICE.replace('        cpu: "4"\n', ""))
    line = error_of(capsys, "admit", str(pod), "--machine", "dual-socket", "--devices", str(devices))
    assert f'--devices {devices}: line 1, column 37: duplicate field "resource_name" (first on line 1)' in line


def test_keys_a_merge_brings_in_may_be_overridden() -> None:
    """`<<: *anchor` then the same key is YAML's override, not a duplicate; the explicit key wins."""
    text = "base: &b {cpu: '2', memory: 1Gi}\nlimits:\n  <<: *b\n  cpu: '4'\n"
    assert parse_documents(text, "t.yaml", "x") == [{"base": {"cpu": "2", "memory": "1Gi"},
                                                     "limits": {"cpu": "4", "memory": "1Gi"}}]
    with pytest.raises(Exception, match=r'line 5, column 3: key "cpu" already set in map \(first on line 4\)'):
        parse_documents(text + "  cpu: '8'\n", "t.yaml", "x")


def test_a_mapping_of_merges_only_is_no_duplicate() -> None:
    """Two merged anchors sharing a key (the first listed wins, as YAML 1.1 says) write no key twice."""
    text = "a: &a {k: 1}\nb: &b {k: 2}\nc: {<<: [*a, *b]}\n"
    assert parse_documents(text, "t.yaml", "x")[0]["c"] == {"k": 1}
