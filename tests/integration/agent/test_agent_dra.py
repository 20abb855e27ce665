"""`numalign serve` with DRA: the claims of a manifest's pod allocated on this node and reported by
PodResources v1 `dynamic_resources` over a real unix socket (KEP-3695); a claim no device satisfies is
a fault and the pod runs without devices."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from integration.agent.conftest import Layout, wait_for, wait_pod

from numalign.adapters.grpc.gen.podresources.v1 import api_pb2 as pr
from numalign.adapters.grpc.gen.podresources.v1 import api_pb2_grpc as pr_grpc
from numalign.agent import Agent

EXAMPLE = Path(__file__).resolve().parents[2] / "data" / "dra" / "four-gpus.yaml"


@pytest.fixture
def node_a(layout: Layout) -> Iterator[Agent]:
    a = Agent(layout.options(node_name="node-a"))  # the node the example's slices name
    a.start()
    try:
        yield a
    finally:
        a.stop()


def _list(layout: Layout) -> dict[str, pr.PodResources]:
    with grpc.insecure_channel(f"unix://{layout.pr_socket}") as ch:
        reply = pr_grpc.PodResourcesListerStub(ch).List(pr.ListPodResourcesRequest(), timeout=5)
    return {p.name: p for p in reply.pod_resources}


def test_list_reports_the_claims_devices(node_a: Agent, layout: Layout) -> None:
    layout.write_manifest("trainer.yaml", EXAMPLE.read_text())
    wait_pod(layout, "trainer", "admitted")
    (main,) = _list(layout)["trainer"].containers
    (claim,) = main.dynamic_resources
    assert (claim.claim_name, claim.claim_namespace) == ("two-gpus", "default")
    assert [(r.driver_name, r.pool_name, r.device_name) for r in claim.claim_resources] == [
        ("gpu.example.com", "node-a", "gpu-1"), ("gpu.example.com", "node-a", "gpu-2")]
    assert len(main.cpu_ids) == 4  # the kubelet's own answer is unchanged


def test_a_claim_that_cannot_be_allocated_is_a_fault(node_a: Agent, layout: Layout) -> None:
    layout.write_manifest("trainer.yaml", EXAMPLE.read_text().replace('model == "h100"', 'model == "h200"'))
    wait_pod(layout, "trainer", "admitted")
    wait_for(lambda: node_a.faults.get("dra_unallocatable"), "the DRA fault")
    (main,) = _list(layout)["trainer"].containers
    assert list(main.dynamic_resources) == []
    assert any("cannot allocate all claims" in line for line in node_a.fault_log)
