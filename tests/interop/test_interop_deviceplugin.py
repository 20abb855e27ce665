"""The kubelet's own device-plugin stub (k8s.io/kubernetes pkg/kubelet/cm/devicemanager/plugin/v1beta1,
NewDevicePluginStub, built from the published module in interop/dpstub) registered with a real
`numalign serve`: registration, ListAndWatch, GetPreferredAllocation and Allocate when a pod that needs
the resource is admitted, PreStartContainer before its container starts, and a restart of either side.
Every wait is for a line in a file (the stub's events, serve's status), never for a moment."""

from __future__ import annotations

from typing import Any

from interop.peers import NODE, Serve, Stub, pod, wait_for

GPU = "example.com/gpu"
DEVICES = "gpu0@0,gpu1@0,gpu2@1,gpu3@1"


def healthy(serve: Serve) -> list[str]:
    r: dict[str, Any] = serve.status().get("resources", {}).get(GPU) or {}
    return sorted(r.get("healthy", [])) if r.get("connected") else []


def gpus(entry: dict[str, Any]) -> dict[str, list[int]]:
    got: dict[str, list[int]] = entry["allocations"]["main"]["devices"].get(GPU, {})
    return got


def admit_gpu_pod(serve: Serve, name: str, count: int) -> dict[str, Any]:
    serve.write_manifest(f"{name}.yaml", pod(name, "ml", f'cpu: "2", memory: 1Gi, {GPU}: "{count}"'))
    return serve.wait_pod(f"{name}-{NODE}")


def test_stub_registers_and_is_asked_at_the_kubelets_moments(serve: Serve) -> None:
    stub = Stub(serve, DEVICES)
    try:
        stub.wait_event("registered")
        # ListAndWatch: serve reports the stub's four healthy devices.
        wait_for(lambda: healthy(serve) == ["gpu0", "gpu1", "gpu2", "gpu3"], "the stub's devices in serve's status")
        assert stub.events("preferred") == [] and stub.events("allocate") == []  # nothing asked before a pod

        entry = admit_gpu_pod(serve, "train", 1)
        (preferred,) = stub.wait_event("preferred")
        (req,) = preferred["request"]["container_requests"]
        # The kubelet asks with the devices the topology manager's hint allows (one NUMA node's pair).
        assert req["allocation_size"] == 1
        assert sorted(req["available_deviceIDs"]) in (["gpu0", "gpu1"], ["gpu2", "gpu3"])
        # The stub prefers the highest ID; serve honours the preference, Allocates it, records the answer.
        choice = max(req["available_deviceIDs"])
        (allocate,) = stub.wait_event("allocate")
        assert allocate["request"]["container_requests"] == [{"devices_ids": [choice]}]
        assert list(gpus(entry)) == [choice]
        runtime = wait_for(lambda: serve.wait_pod(f"train-{NODE}")["runtime"].get("main"), "train's runtime answer")
        assert runtime["envs"] == {"STUB_DEVICES": choice}
        # PreStartRequired: the stub logs the PreStartContainer call it gets before the container starts.
        wait_for(lambda: "PreStartContainer" in stub.log() and choice in stub.log(), "PreStartContainer")

        # Two GPUs on one NUMA node: the only pair left is the other node's.
        two = admit_gpu_pod(serve, "pair", 2)
        assert len(stub.wait_event("allocate", 2)) == 2
        assert sorted(gpus(two)) == (["gpu2", "gpu3"] if choice in ("gpu0", "gpu1") else ["gpu0", "gpu1"])
    finally:
        stub.stop()
    # The stub is gone: serve no longer counts its devices as connected.
    wait_for(lambda: healthy(serve) == [], "the stub's devices gone from serve's status")


def test_restart_of_serve_then_of_the_stub(serve: Serve) -> None:
    stub = Stub(serve, DEVICES)
    try:
        stub.wait_event("registered")
        wait_for(lambda: len(healthy(serve)) == 4, "the stub's devices")
        first = gpus(admit_gpu_pod(serve, "before", 1))

        # serve restarts on the same directories: kubelet.sock is created again, the stub's own watch
        # restarts its server and registers anew; serve keeps the admitted pod's devices.
        serve.stop()
        serve.start()
        stub.wait_event("reregister")
        wait_for(lambda: len(healthy(serve)) == 4, "the stub's devices after serve's restart")
        assert gpus(serve.wait_pod(f"before-{NODE}")) == first
        after = gpus(admit_gpu_pod(serve, "after", 1))
        assert set(after).isdisjoint(first)
        assert stub.wait_event("allocate", 2)[-1]["request"]["container_requests"] == [{"devices_ids": list(after)}]
    finally:
        stub.stop()

    # The plugin restarts (a new process, a new socket): it registers again and serves the next pod.
    again = Stub(serve, DEVICES, name="stub2")
    try:
        again.wait_event("registered")
        wait_for(lambda: len(healthy(serve)) == 4, "the restarted stub's devices")
        third = gpus(admit_gpu_pod(serve, "third", 1))
        assert set(third).isdisjoint({*first, *after})
        (allocate,) = again.wait_event("allocate")
        assert allocate["request"]["container_requests"] == [{"devices_ids": list(third)}]
    finally:
        again.stop()
