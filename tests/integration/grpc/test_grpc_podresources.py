"""PodResources v1 and v1alpha1 clients (raw generated stubs, as an exporter would use) against
PodResourcesServer."""

from __future__ import annotations

import stat
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import grpc
import pytest

from numalign.adapters.grpc.gen.podresources.v1 import api_pb2 as pb
from numalign.adapters.grpc.gen.podresources.v1 import api_pb2_grpc as pb_grpc
from numalign.adapters.grpc.gen.podresources.v1alpha1 import api_pb2 as alpha_pb
from numalign.adapters.grpc.gen.podresources.v1alpha1 import api_pb2_grpc as alpha_pb_grpc
from numalign.adapters.grpc.podresources import (
    DEFAULT_BURST_TOKENS,
    DEFAULT_QPS,
    AllocatableDevice,
    AllocatableResources,
    AssignedDevices,
    ContainerResources,
    MemoryBlock,
    PodResources,
    PodResourcesServer,
    RateLimiter,
    SnapshotPodResourcesSource,
    get_enabled,
)

GPU = "example.com/gpu"
NIC = "example.com/nic"
GI = 1 << 30


PODS = [
    PodResources(
        "web",
        "default",
        (
            ContainerResources(
                "app",
                cpu_ids=(2, 3),
                memory=(MemoryBlock("memory", 2 * GI, (0,)), MemoryBlock("hugepages-2Mi", 4 << 20, (0, 1))),
                devices=(
                    AssignedDevices(GPU, ("gpu0", "gpu1"), 0),
                    AssignedDevices(GPU, ("gpu1",), 1),  # gpu1 spans NUMA nodes 0 and 1
                    AssignedDevices(NIC, ("vf3",), None),  # no topology
                ),
            ),
            ContainerResources("shared"),
        ),
    ),
    PodResources("batch", "jobs", (ContainerResources("main", cpu_ids=(5,)),)),
]
ALLOC = AllocatableResources(
    cpu_ids=(1, 2, 3, 4, 5, 6, 7),
    memory=(MemoryBlock("memory", 30 * GI, (0,)), MemoryBlock("memory", 31 * GI, (1,))),
    devices=(
        AllocatableDevice(NIC, "vf3", None),
        AllocatableDevice(GPU, "gpu0", (0,)),
        AllocatableDevice(GPU, "gpu1", (0, 1)),
    ),
)


def _devs(entries: Sequence[pb.ContainerDevices]) -> list[tuple[str, list[str], list[int] | None]]:
    return [
        (
            e.resource_name,
            list(e.device_ids),
            [n.ID for n in e.topology.nodes] if e.HasField("topology") else None,
        )
        for e in entries
    ]


@pytest.fixture
def counted() -> list[tuple[str, bool]]:
    return []


@pytest.fixture
def stub(sock_dir: Path, counted: list[tuple[str, bool]]) -> Iterator[pb_grpc.PodResourcesListerStub]:
    server = PodResourcesServer(
        SnapshotPodResourcesSource(PODS, ALLOC),
        sock_dir / "pod-resources" / "kubelet.sock",
        on_call=lambda m, failed: counted.append((m, failed)),
    )
    server.start()
    channel = grpc.insecure_channel(f"unix://{sock_dir}/pod-resources/kubelet.sock")
    try:
        yield pb_grpc.PodResourcesListerStub(channel)
    finally:
        channel.close()
        server.stop(grace=0.2)
    assert not (sock_dir / "pod-resources" / "kubelet.sock").exists()


def test_grpc_podresources_list(
    stub: pb_grpc.PodResourcesListerStub, counted: list[tuple[str, bool]]
) -> None:
    resp = stub.List(pb.ListPodResourcesRequest(), timeout=5)
    assert [(p.namespace, p.name) for p in resp.pod_resources] == [("default", "web"), ("jobs", "batch")]
    app, shared = resp.pod_resources[0].containers
    assert app.name == "app"
    assert list(app.cpu_ids) == [2, 3]
    assert [(m.memory_type, m.size, [n.ID for n in m.topology.nodes]) for m in app.memory] == [
        ("memory", 2 * GI, [0]),
        ("hugepages-2Mi", 4 << 20, [0, 1]),
    ]
    # One entry per device per NUMA node; no topology for devices without one.
    assert _devs(app.devices) == [
        (GPU, ["gpu0"], [0]),
        (GPU, ["gpu1"], [0]),
        (GPU, ["gpu1"], [1]),
        (NIC, ["vf3"], None),
    ]
    assert shared.name == "shared"
    assert list(shared.cpu_ids) == [] and list(shared.devices) == [] and list(shared.memory) == []
    assert counted == [("list", False)]


def test_grpc_podresources_get_allocatable(stub: pb_grpc.PodResourcesListerStub) -> None:
    resp = stub.GetAllocatableResources(pb.AllocatableResourcesRequest(), timeout=5)
    assert list(resp.cpu_ids) == [1, 2, 3, 4, 5, 6, 7]
    assert [(m.memory_type, m.size, [n.ID for n in m.topology.nodes]) for m in resp.memory] == [
        ("memory", 30 * GI, [0]),
        ("memory", 31 * GI, [1]),
    ]
    assert _devs(resp.devices) == [
        (GPU, ["gpu0"], [0]),
        (GPU, ["gpu1"], [0]),
        (GPU, ["gpu1"], [1]),
        (NIC, ["vf3"], None),
    ]


def test_grpc_podresources_get(stub: pb_grpc.PodResourcesListerStub, counted: list[tuple[str, bool]]) -> None:
    resp = stub.Get(pb.GetPodResourcesRequest(pod_name="batch", pod_namespace="jobs"), timeout=5)
    assert resp.pod_resources.name == "batch"
    assert [list(c.cpu_ids) for c in resp.pod_resources.containers] == [[5]]
    with pytest.raises(grpc.RpcError) as info:
        stub.Get(pb.GetPodResourcesRequest(pod_name="web", pod_namespace="jobs"), timeout=5)
    err = info.value
    assert isinstance(err, grpc.Call)
    assert err.code() == grpc.StatusCode.UNKNOWN
    assert err.details() == "pod web in namespace jobs not found"
    assert counted == [("get", False), ("get", True)]


def test_grpc_podresources_socket_is_0600(stub: pb_grpc.PodResourcesListerStub, sock_dir: Path) -> None:
    mode = (sock_dir / "pod-resources" / "kubelet.sock").stat().st_mode
    assert stat.S_ISSOCK(mode)
    assert stat.S_IMODE(mode) == 0o600


def test_grpc_podresources_source_failure_is_an_error_not_a_crash(sock_dir: Path) -> None:
    class Broken(SnapshotPodResourcesSource):
        def list_pods(self) -> Sequence[PodResources]:
            raise RuntimeError("state unavailable")

    with (
        PodResourcesServer(Broken(), sock_dir / "pr.sock"),
        grpc.insecure_channel(f"unix://{sock_dir}/pr.sock") as ch,
    ):
        s = pb_grpc.PodResourcesListerStub(ch)
        with pytest.raises(grpc.RpcError, match="state unavailable"):
            s.List(pb.ListPodResourcesRequest(), timeout=5)
        # The server still answers afterwards.
        assert s.GetAllocatableResources(pb.AllocatableResourcesRequest(), timeout=5).cpu_ids == []


def test_grpc_podresources_sees_published_snapshots(sock_dir: Path) -> None:
    source = SnapshotPodResourcesSource()
    with (
        PodResourcesServer(source, sock_dir / "pr.sock"),
        grpc.insecure_channel(f"unix://{sock_dir}/pr.sock") as ch,
    ):
        s = pb_grpc.PodResourcesListerStub(ch)
        assert list(s.List(pb.ListPodResourcesRequest(), timeout=5).pod_resources) == []
        source.publish(pods=PODS[1:])
        assert [p.name for p in s.List(pb.ListPodResourcesRequest(), timeout=5).pod_resources] == ["batch"]
        source.publish(allocatable=ALLOC)
        assert list(s.GetAllocatableResources(pb.AllocatableResourcesRequest(), timeout=5).cpu_ids) == [
            1,
            2,
            3,
            4,
            5,
            6,
            7,
        ]
        assert [p.name for p in s.List(pb.ListPodResourcesRequest(), timeout=5).pod_resources] == ["batch"]


class _FrozenClock:
    """A clock that moves only when the test says so, so the rate-limit test depends on no timing."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_grpc_podresources_rate_limit_is_the_kubelets(sock_dir: Path) -> None:
    # The kubelet serves every PodResources call through one limiter: 100 QPS, burst 10. Over the
    # limit a client gets ResourceExhausted "rejected by rate limit", and no metric counts the call.
    clock = _FrozenClock()
    limiter = RateLimiter(clock=clock)
    assert (limiter.qps, limiter.burst) == (DEFAULT_QPS, DEFAULT_BURST_TOKENS) == (100, 10)
    counted: list[tuple[str, bool]] = []
    with (
        PodResourcesServer(
            SnapshotPodResourcesSource(PODS, ALLOC),
            sock_dir / "pr.sock",
            limiter=limiter,
            on_call=lambda m, failed: counted.append((m, failed)),
        ),
        grpc.insecure_channel(f"unix://{sock_dir}/pr.sock") as ch,
    ):
        s = pb_grpc.PodResourcesListerStub(ch)

        def list_pods() -> pb.ListPodResourcesResponse:
            return s.List(pb.ListPodResourcesRequest(), timeout=5)

        def allocatable() -> pb.AllocatableResourcesResponse:
            return s.GetAllocatableResources(pb.AllocatableResourcesRequest(), timeout=5)

        def get() -> pb.GetPodResourcesResponse:
            return s.Get(pb.GetPodResourcesRequest(pod_name="batch", pod_namespace="jobs"), timeout=5)

        calls: list[Callable[[], object]] = [list_pods, allocatable, get]
        for i in range(10):  # the burst: one bucket shared by all three methods
            calls[i % 3]()
        for call in calls:
            with pytest.raises(grpc.RpcError) as info:
                call()
            assert isinstance(info.value, grpc.Call)
            assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert info.value.details() == "rejected by rate limit"
        assert len(counted) == 10
        clock.now += 0.015  # 100 tokens per second: 1.5 tokens, so one more call passes
        assert [p.name for p in list_pods().pod_resources] == ["web", "batch"]
        with pytest.raises(grpc.RpcError, match="rejected by rate limit"):
            list_pods()
        clock.now += 60  # refills to the burst, never above it
        for i in range(10):
            calls[i % 3]()
        with pytest.raises(grpc.RpcError, match="rejected by rate limit"):
            allocatable()
        assert len(counted) == 21


def test_grpc_podresources_get_disabled_by_feature_gate(sock_dir: Path) -> None:
    # KubeletPodResourcesGet=false: Get fails with upstream's plain error (code Unknown) and counts as
    # a Get error; List and GetAllocatableResources (no gate since 1.30) still answer.
    assert get_enabled({}) is True  # beta, on by default since 1.34
    assert get_enabled({"KubeletPodResourcesGet": False}) is False
    counted: list[tuple[str, bool]] = []
    with (
        PodResourcesServer(
            SnapshotPodResourcesSource(PODS, ALLOC),
            sock_dir / "pr.sock",
            get_enabled=False,
            on_call=lambda m, failed: counted.append((m, failed)),
        ),
        grpc.insecure_channel(f"unix://{sock_dir}/pr.sock") as ch,
    ):
        s = pb_grpc.PodResourcesListerStub(ch)
        with pytest.raises(grpc.RpcError) as info:
            s.Get(pb.GetPodResourcesRequest(pod_name="batch", pod_namespace="jobs"), timeout=5)
        assert isinstance(info.value, grpc.Call)
        assert info.value.code() == grpc.StatusCode.UNKNOWN
        assert info.value.details() == "PodResources API Get method disabled"
        assert len(s.List(pb.ListPodResourcesRequest(), timeout=5).pod_resources) == 2
        assert list(s.GetAllocatableResources(pb.AllocatableResourcesRequest(), timeout=5).cpu_ids) == [
            1, 2, 3, 4, 5, 6, 7
        ]
    assert counted == [("get", True), ("list", False), ("get_allocatable", False)]


def test_grpc_podresources_v1alpha1_list_on_the_same_socket(sock_dir: Path) -> None:
    # The kubelet registers v1alpha1 beside v1 on kubelet.sock. Its List walks pod.Spec.Containers
    # only (no sidecars) and copies each v1 device entry without its topology.
    assert alpha_pb.DESCRIPTOR.package == "v1alpha1"
    svc = alpha_pb.DESCRIPTOR.services_by_name["PodResourcesLister"]
    assert [m.full_name for m in svc.methods] == ["v1alpha1.PodResourcesLister.List"]
    assert {f.name: f.number for f in alpha_pb.ContainerDevices.DESCRIPTOR.fields} == {
        "resource_name": 1,
        "device_ids": 2,
    }
    assert {f.name: f.number for f in alpha_pb.ContainerResources.DESCRIPTOR.fields} == {"name": 1, "devices": 2}
    pods = [
        PodResources(
            "web",
            "default",
            (
                ContainerResources("proxy", cpu_ids=(1,), sidecar=True),
                *PODS[0].containers,
            ),
        ),
        PODS[1],
    ]
    alpha_calls: list[str] = []
    counted: list[tuple[str, bool]] = []
    clock = _FrozenClock()
    with (
        PodResourcesServer(
            SnapshotPodResourcesSource(pods, ALLOC),
            sock_dir / "pr.sock",
            limiter=RateLimiter(clock=clock),
            on_call=lambda m, failed: counted.append((m, failed)),
            on_alpha_call=lambda: alpha_calls.append("list"),
        ),
        grpc.insecure_channel(f"unix://{sock_dir}/pr.sock") as ch,
    ):
        alpha = alpha_pb_grpc.PodResourcesListerStub(ch)
        resp = alpha.List(alpha_pb.ListPodResourcesRequest(), timeout=5)
        assert [(p.namespace, p.name) for p in resp.pod_resources] == [("default", "web"), ("jobs", "batch")]
        web = resp.pod_resources[0]
        assert [c.name for c in web.containers] == ["app", "shared"]
        assert [(d.resource_name, list(d.device_ids)) for d in web.containers[0].devices] == [
            (GPU, ["gpu0"]),
            (GPU, ["gpu1"]),
            (GPU, ["gpu1"]),  # gpu1 spans NUMA nodes 0 and 1: two v1 entries, two v1alpha1 entries
            (NIC, ["vf3"]),
        ]
        assert list(web.containers[1].devices) == []
        # v1 still reports the sidecar, first.
        v1 = pb_grpc.PodResourcesListerStub(ch).List(pb.ListPodResourcesRequest(), timeout=5)
        assert [c.name for c in v1.pod_resources[0].containers] == ["proxy", "app", "shared"]
        assert alpha_calls == ["list"] and counted == [("list", False)]
        # One rate limiter for both versions: 2 tokens used, 8 left.
        for _ in range(8):
            alpha.List(alpha_pb.ListPodResourcesRequest(), timeout=5)
        with pytest.raises(grpc.RpcError, match="rejected by rate limit"):
            alpha.List(alpha_pb.ListPodResourcesRequest(), timeout=5)
        assert len(alpha_calls) == 9
