"""serve's status file sorts its keys; the picture and `pods -o wide` built from it keep the pod's own
container order (init containers first, in spec order), so an app container that reuses a finished
init container's CPUs is drawn over it, as the kubelet gives them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from integration.agent.conftest import Layout, wait_pod

from numalign.agent import Agent
from numalign.agent.status import read_status
from numalign.cli.main import main
from numalign.k8s.cpuset import parse_cpuset
from numalign.machine.examples import example
from numalign.report import node_view_from_status, terminal_picture

# "router" sorts before "setup": sorted keys put the init container last, over its app container.
ROUTER = """apiVersion: v1
kind: Pod
metadata: {name: dpdk-router, namespace: net}
spec:
  initContainers:
  - name: setup
    image: registry.example/setup:1
    resources:
      limits: {cpu: "2", memory: 1Gi}
  containers:
  - name: router
    image: registry.example/router:1
    resources:
      limits: {cpu: "4", memory: 4Gi}
"""


def test_a_pod_with_an_init_container_keeps_its_order_from_serve_to_the_picture(
    layout: Layout, agent: Agent, capsys: pytest.CaptureFixture[str]
) -> None:
    layout.write_manifest("router.yaml", ROUTER)
    entry = wait_pod(layout, "dpdk-router", "admitted", timeout=10)
    setup = set(parse_cpuset(entry["allocations"]["setup"]["cpus"]))
    router = set(parse_cpuset(entry["allocations"]["router"]["cpus"]))
    shared = sorted(setup & router)
    assert shared, entry["allocations"]  # the app container reuses the init container's CPUs

    doc = read_status(layout.state)
    assert doc is not None
    view = node_view_from_status(example("dual-socket"), doc)
    (pod,) = view.pods
    assert [c.name for c in pod.containers] == ["setup", "router"]
    lines = terminal_picture(view).splitlines()
    letter = {line.split()[-1]: line.split()[0] for line in lines if line.strip().endswith(("setup", "router"))}
    # A row per NUMA node, a cell per CPU of that node in id order.
    machine = example("dual-socket")
    rows = {int(line.split()[1]): line.split()[2] for line in lines if re.match(r"NUMA \d+ ", line)}
    cells = {cpu: rows[n.id][i] for n in machine.numa_nodes
             for i, cpu in enumerate(sorted(c.id for c in machine.cpus if c.numa_node == n.id))}
    # The CPUs both held are drawn as router's, as the text gives them to router.
    assert {cells[c] for c in shared} == {letter["router"]}

    assert main(["pods", "--state-dir", str(layout.state), "-o", "wide"]) == 0
    out = capsys.readouterr().out
    assert out.index("    setup: ") < out.index("    router: ")


def test_an_entry_without_container_order_still_draws_its_containers(tmp_path: Path) -> None:
    """A status file an older serve wrote: the allocations' own order, nothing dropped."""
    from numalign.report.view import container_order

    entry = {"allocations": {"b": {}, "a": {}}, "container_order": ["a"]}
    assert container_order(entry) == ["a", "b"]
    assert container_order({"allocations": {"b": {}, "a": {}}}) == ["b", "a"]
