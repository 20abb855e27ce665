"""`numalign serve` with DRA: the claims of a manifest's pod allocated on this node and reported by
PodResources v1 `dynamic_resources` over a real unix socket (KEP-3695); a claim no device satisfies is
a fault and the pod runs without devices."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


def _wait_claims(layout: Layout, pod: str) -> None:
    """The claims are allocated on serve's allocation thread, after the pod's admission."""
    wait_for(lambda: pod in _list(layout) and _list(layout)[pod].containers[0].dynamic_resources,
             f"{pod}'s claims")


def test_list_reports_the_claims_devices(node_a: Agent, layout: Layout) -> None:
    layout.write_manifest("trainer.yaml", EXAMPLE.read_text())
    wait_pod(layout, "trainer", "admitted")
    _wait_claims(layout, "trainer")
    (main,) = _list(layout)["trainer"].containers
    (claim,) = main.dynamic_resources
    assert (claim.claim_name, claim.claim_namespace) == ("two-gpus", "default")
    assert [(r.driver_name, r.pool_name, r.device_name) for r in claim.claim_resources] == [
        ("gpu.example.com", "node-a", "gpu-1"), ("gpu.example.com", "node-a", "gpu-2")]
    assert len(main.cpu_ids) == 4  # the kubelet's own answer is unchanged


def test_a_namespace_beside_the_pods_is_skipped_as_admit_skips_it(
    node_a: Agent, layout: Layout, caplog: pytest.LogCaptureFixture
) -> None:
    """NVIDIA's quickstart specs begin with their Namespace: serve refused the whole file ("unsupported kind
    'Namespace'"), so none of its pods ran, where admit notes the Namespace and admits the pods."""
    caplog.set_level("INFO", logger="numalign.agent.dra")
    namespace = "apiVersion: v1\nkind: Namespace\nmetadata: {name: default}\n---\n"
    layout.write_manifest("trainer.yaml", namespace + EXAMPLE.read_text())
    wait_pod(layout, "trainer", "admitted")
    _wait_claims(layout, "trainer")
    (main,) = _list(layout)["trainer"].containers
    assert len(main.dynamic_resources) == 1 and not node_a.faults.get("invalid_manifest")
    skipped = "document 1: Namespace default skipped (no pod template)"
    assert any(r.getMessage().endswith(skipped) for r in caplog.records)


def test_a_claim_that_cannot_be_allocated_is_a_fault(node_a: Agent, layout: Layout) -> None:
    layout.write_manifest("trainer.yaml", EXAMPLE.read_text().replace('model == "h100"', 'model == "h200"'))
    wait_pod(layout, "trainer", "admitted")
    wait_for(lambda: node_a.faults.get("dra_unallocatable"), "the DRA fault")
    (main,) = _list(layout)["trainer"].containers
    assert list(main.dynamic_resources) == []
    (line,) = [line for line in node_a.fault_log if "cannot allocate all claims" in line]
    # why, as admit explains it: the class's selector matches no device of the node
    assert "; why: claim default/two-gpus, request gpus: class h100 selector #0 matched none" in line
    assert line.endswith("; it runs without them")
    (entry,) = layout.status()["draUnallocatable"].values()
    assert entry["pod"] == "default/trainer" and entry["message"].endswith("cannot allocate all claims")
    assert [w.split(":")[0] for w in entry["why"]] == ["claim default/two-gpus, request gpus"]


# ---- a restart keeps the static pods' claims -------------------------------------------------------

# A pod asking for one more h100 on NUMA node 1: trainer's claim holds both there, so it cannot have one.
NEXT = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: numa1-gpu}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: h100
          selectors:
          - cel: {expression: 'device.attributes["resource.kubernetes.io"].numaNode == 1'}
---
apiVersion: v1
kind: Pod
metadata: {name: next}
spec:
  resourceClaims:
  - {name: gpu, resourceClaimTemplateName: numa1-gpu}
  containers:
  - name: main
    image: trainer
    resources:
      limits: {cpu: "1", memory: 1Gi}
      claims: [{name: gpu}]
"""
TRAINER_DEVICES = [("gpu.example.com", "node-a", "gpu-1"), ("gpu.example.com", "node-a", "gpu-2")]


def _claims(layout: Layout, pod: str) -> list[tuple[str, list[tuple[str, str, str]]]]:
    (main,) = _list(layout)[pod].containers
    return [(c.claim_name, [(r.driver_name, r.pool_name, r.device_name) for r in c.claim_resources])
            for c in main.dynamic_resources]


def _next_pod_gets_nothing(layout: Layout, pod: str) -> None:
    layout.write_manifest("next.yaml", NEXT)
    wait_pod(layout, pod, "admitted")
    wait_for(lambda: "dra_unallocatable" in layout.status().get("faults", {}), "the next pod's DRA fault")
    assert _claims(layout, pod) == []


def test_a_graceful_restart_keeps_the_static_pods_claims(layout: Layout) -> None:
    first = Agent(layout.options(node_name="node-a"))
    first.start()
    try:
        layout.write_manifest("trainer.yaml", EXAMPLE.read_text())
        wait_pod(layout, "trainer", "admitted")
        _wait_claims(layout, "trainer")
        assert _claims(layout, "trainer") == [("two-gpus", TRAINER_DEVICES)]
    finally:
        first.stop()
    again = Agent(layout.options(node_name="node-a"))
    again.start()
    try:
        assert _claims(layout, "trainer") == [("two-gpus", TRAINER_DEVICES)]  # PodResources, after the restart
        _next_pod_gets_nothing(layout, "next")  # and the devices stay trainer's
    finally:
        again.stop()


def test_a_kill_9_of_serve_keeps_the_static_pods_claims(layout: Layout) -> None:
    import signal
    import subprocess
    import sys

    from integration.agent.conftest import DATA

    cmd = [sys.executable, "-m", "numalign.cli.main", "serve", "--machine", "dual-socket",
           "--config", str(DATA / "example-kubelet-config.yaml"), "--device-plugin-dir", str(layout.plugins),
           "--pod-resources-socket", str(layout.pr_socket), "--manifests", str(layout.manifests),
           "--state-dir", str(layout.state), "--hostname-override", "node-a"]
    layout.write_manifest("trainer.yaml", EXAMPLE.read_text())
    for run in ("first", "after kill -9"):
        with (layout.root / f"serve-{run}.log").open("wb") as log:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        try:
            # Static pods are named <name>-<node name>, as the kubelet names them.
            wait_pod(layout, "trainer-node-a", "admitted", timeout=20)
            wait_for(lambda: layout.pr_socket.is_socket(), "the PodResources socket", timeout=10)
            _wait_claims(layout, "trainer-node-a")
            assert _claims(layout, "trainer-node-a") == [("two-gpus", TRAINER_DEVICES)], run
            if run == "first":
                proc.send_signal(signal.SIGKILL)
                assert proc.wait(timeout=10) == -signal.SIGKILL
                # A status file from before the kill must not pass for the restarted agent's.
                (layout.state / "numalign_status.json").unlink()
            else:
                _next_pod_gets_nothing(layout, "next-node-a")
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(10)


def test_a_manifest_changed_to_a_version_without_claims_frees_its_devices(node_a: Agent, layout: Layout) -> None:
    layout.write_manifest("trainer.yaml", EXAMPLE.read_text())
    wait_pod(layout, "trainer", "admitted")
    _wait_claims(layout, "trainer")
    assert _claims(layout, "trainer") == [("two-gpus", TRAINER_DEVICES)]
    plain = EXAMPLE.read_text().replace("  resourceClaims:\n  - name: gpus\n    resourceClaimName: two-gpus\n", "")
    plain = plain.replace("      claims:\n      - name: gpus\n", "")
    layout.write_manifest("trainer.yaml", plain)
    wait_for(lambda: _list(layout).get("trainer") is not None and not _claims(layout, "trainer"),
             "trainer without claims")
    layout.write_manifest("next.yaml", NEXT)  # the GPU on NUMA node 1 it asks for is free again
    wait_pod(layout, "next", "admitted")
    wait_for(lambda: _claims(layout, "next"), "next's claim")
    assert _claims(layout, "next") == [("next-gpu", [TRAINER_DEVICES[0]])]


def test_a_costly_claim_does_not_hold_back_the_next_manifest(node_a: Agent, layout: Layout) -> None:
    """newcomer (session of 29 Nov): a claim whose search runs to its work bound (~10 s of CPU, 45 s at
    load 12) kept every manifest dropped after it waiting. The allocation runs on a thread of its own now:
    here it is held until the next manifest's pod is admitted, then let go (no timing involved)."""
    import threading

    life = node_a.core.dra.life
    build = life._ledger_for
    release = threading.Event()
    started = threading.Event()
    calls: list[str] = []

    class Held:
        def __init__(self, ledger: Any) -> None:
            self.ledger = ledger

        def __getattr__(self, name: str) -> Any:
            return getattr(self.ledger, name)

        def allocate(self, pod: Any, claims: Any = None) -> Any:
            if pod.name == "trainer":
                calls.append(pod.name)
                started.set()
                assert release.wait(60), "the test never let the allocation go"
            return self.ledger.allocate(pod, claims)

    life._ledger_for = lambda view: Held(build(view))
    life.set_given(life.given)
    try:
        layout.write_manifest("trainer.yaml", EXAMPLE.read_text())
        wait_pod(layout, "trainer", "admitted")
        wait_for(started.is_set, "trainer's allocation to start")
        assert layout.status().get("draAllocating") == ["default/trainer"] or wait_for(
            lambda: layout.status().get("draAllocating") == ["default/trainer"], "draAllocating")
        layout.write_manifest("plain.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: plain}\nspec:\n"
                              "  containers:\n  - name: main\n    image: x\n"
                              "    resources: {limits: {cpu: '1', memory: 1Gi}}\n")
        wait_pod(layout, "plain", "admitted")  # while trainer's allocation is still held
        assert not release.is_set() and _claims(layout, "trainer") == []
        (layout.manifests / "plain.yaml").unlink()  # a pod without claims comes and goes meanwhile
        wait_for(lambda: "plain" not in _list(layout), "plain removed")
    finally:
        release.set()
    _wait_claims(layout, "trainer")
    assert _claims(layout, "trainer") == [("two-gpus", TRAINER_DEVICES)]
    assert calls == ["trainer"]  # review-3 H1: that churn did not make the answer stale (computed once)
    wait_for(lambda: "draAllocating" not in layout.status(), "draAllocating gone")
