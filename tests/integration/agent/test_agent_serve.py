"""The node agent in-process: a real SDK device plugin registers over gRPC, a manifest pod gets its
devices, a raw PodResources v1 client sees CPUs, memory and devices, and a restart keeps it all."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from integration.agent.conftest import GPU, Layout, gpu_pod, pod_status, wait_for, wait_pod

from numalign import metrics as m
from numalign.adapters.grpc.gen.podresources.v1 import api_pb2 as pr
from numalign.adapters.grpc.gen.podresources.v1 import api_pb2_grpc as pr_grpc
from numalign.agent import Agent
from numalign.cli.main import main
from numalign.deviceplugin import Device, DevicePlugin
from numalign.machine.examples import example

GPUS = [Device("gpu0", topology=(0,)), Device("gpu1", topology=(1,)), Device("gpu2", topology=(2,)),
        Device("gpu3", topology=(3,))]


def _numa_of_cpus(cpus: list[int]) -> set[int]:
    return {n.id for n in example("dual-socket").numa_nodes if set(cpus) & set(n.cpus)}


def _plugin(layout: Layout, devices: list[Device] = GPUS) -> DevicePlugin:
    plugin = DevicePlugin(GPU, devices, socket_dir=layout.plugins, watch_interval=0.1)
    plugin.start()
    return plugin


def _healthy(layout: Layout) -> list[str]:
    res = layout.status().get("resources", {}).get(GPU, {})
    healthy: list[str] = res.get("healthy", [])
    return healthy


def test_plugin_devices_reach_a_manifest_pod_and_podresources(
    agent: Agent, layout: Layout, pr_stub: Callable[[], pr_grpc.PodResourcesListerStub]
) -> None:
    plugin = _plugin(layout)
    try:
        wait_for(lambda: len(_healthy(layout)) == 4, "4 healthy gpus in the status file")
        assert agent.metrics.value(m.DP_REGISTRATION, resource_name=GPU) == 1
        layout.write_manifest("train.yaml", gpu_pod("train"))
        entry = wait_pod(layout, "train", "admitted")
        alloc = entry["allocations"]["main"]
        (dev_id, topo), = alloc["devices"][GPU].items()
        assert entry["record"]["result"]["admit"] is True
        assert alloc["exclusive_cpus"] is True
        # single-numa-node: the GPU, the memory and the CPUs share one NUMA node.
        assert [b["numa_nodes"] for b in alloc["memory"]] == [topo]

        stub = pr_stub()
        listed = stub.List(pr.ListPodResourcesRequest(), timeout=5)
        (pod,) = listed.pod_resources
        assert (pod.namespace, pod.name) == ("ml", "train")
        (c,) = pod.containers
        assert len(c.cpu_ids) == 4 and _numa_of_cpus(list(c.cpu_ids)) == set(topo)
        assert [(d.resource_name, list(d.device_ids), [n.ID for n in d.topology.nodes]) for d in c.devices] == [
            (GPU, [dev_id], topo)
        ]
        assert [(mem.memory_type, mem.size, [n.ID for n in mem.topology.nodes]) for mem in c.memory] == [
            ("memory", 4 << 30, topo)
        ]
        got = stub.Get(pr.GetPodResourcesRequest(pod_name="train", pod_namespace="ml"), timeout=5)
        assert got.pod_resources == pod

        alloc_resp = stub.GetAllocatableResources(pr.AllocatableResourcesRequest(), timeout=5)
        assert sorted(d.device_ids[0] for d in alloc_resp.devices) == ["gpu0", "gpu1", "gpu2", "gpu3"]
        assert set(c.cpu_ids) <= set(alloc_resp.cpu_ids) and 0 not in alloc_resp.cpu_ids  # 0 is reserved
        assert {n.ID for mem in alloc_resp.memory for n in mem.topology.nodes} == {0, 1, 2, 3}
        assert agent.metrics.value(m.PR_REQUESTS_LIST, server_api_version="v1") == 1
        assert agent.metrics.value(m.PR_REQUESTS, server_api_version="v1") == 3
        assert agent.metrics.value(m.DP_ALLOC_DURATION, resource_name=GPU) == 1

        # Removing the file releases the pod: PodResources no longer lists it.
        (layout.manifests / "train.yaml").unlink()
        wait_for(lambda: not layout.status()["pods"], "pod released")
        assert not stub.List(pr.ListPodResourcesRequest(), timeout=5).pod_resources
    finally:
        plugin.stop()


def test_changed_manifest_replaces_its_pods(agent: Agent, layout: Layout) -> None:
    plugin = _plugin(layout)
    try:
        wait_for(lambda: len(_healthy(layout)) == 4, "gpus")
        path = layout.write_manifest("a.yaml", gpu_pod("one", gpus=1))
        wait_pod(layout, "one", "admitted")
        path.write_text(gpu_pod("two", gpus=2, cpus=2), encoding="utf-8")
        entry = wait_pod(layout, "two", "rejected")  # 2 GPUs never share a NUMA node here
        assert entry["reason"] == "TopologyAffinityError"
        assert wait_for(lambda: {p["name"] for p in layout.status()["pods"].values()} == {"two"}, "one removed")
        assert agent.node is not None and not agent.node.pods
    finally:
        plugin.stop()


def test_restart_keeps_allocations_and_releases_files_removed_while_down(
    layout: Layout, pr_stub: Callable[[], pr_grpc.PodResourcesListerStub]
) -> None:
    first = Agent(layout.options())
    first.start()
    plugin = _plugin(layout)
    try:
        wait_for(lambda: len(_healthy(layout)) == 4, "gpus")
        layout.write_manifest("keep.yaml", gpu_pod("keep"))
        layout.write_manifest("gone.yaml", gpu_pod("gone"))
        before = wait_pod(layout, "keep", "admitted")["allocations"]
        wait_pod(layout, "gone", "admitted")
    finally:
        first.stop()
    (layout.manifests / "gone.yaml").unlink()

    second = Agent(layout.options())
    second.start()
    try:
        # Restored, not re-admitted: the Topology Manager saw no admission request in this run.
        assert second.metrics.value(m.TM_ADMISSION_REQUESTS) == 0
        entry = wait_pod(layout, "keep", "admitted")
        assert entry["allocations"] == before
        assert entry["record"] is not None  # the decision record survives in the status file
        assert pod_names(layout) == {"keep"}
        (pod,) = pr_stub().List(pr.ListPodResourcesRequest(), timeout=5).pod_resources
        assert pod.name == "keep"
        assert sorted(pod.containers[0].cpu_ids) == sorted(_cpu_list(before["main"]["cpus"]))
        # The plugin notices the new kubelet.sock and re-registers; its devices come back healthy.
        wait_for(lambda: plugin.registrations >= 2, "plugin re-registered", timeout=8)
        wait_for(lambda: len(_healthy(layout)) == 4, "devices back", timeout=5)
    finally:
        plugin.stop()
        second.stop()


def pod_names(layout: Layout) -> set[str]:
    return {p["name"] for p in layout.status()["pods"].values()}


def _cpu_list(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def test_state_files_are_written_beside_the_status(agent: Agent, layout: Layout) -> None:
    layout.write_manifest("web.yaml", gpu_pod("web", gpus=0))
    wait_pod(layout, "web", "admitted")
    names = {p.name for p in layout.state.iterdir()}
    assert {"cpu_manager_state", "memory_manager_state", "numalign_status.json", "numalign_pods.json"} <= names
    assert (layout.state / "device-plugins" / "kubelet_internal_checkpoint").exists()
    assert Path(layout.plugins / "kubelet.sock").is_socket()


def test_allocate_answers_and_prestart_are_recorded_per_container(
    agent: Agent, layout: Layout, capsys: pytest.CaptureFixture[str]
) -> None:
    from numalign.deviceplugin import ContainerAllocateResponse, DeviceSpec, Mount

    prestarted: list[list[str]] = []

    def allocate(ids: Sequence[str]) -> ContainerAllocateResponse:
        return ContainerAllocateResponse(
            envs={"GPU_IDS": ",".join(ids)},
            mounts=(Mount("/usr/lib/gpu", "/opt/gpu/lib", read_only=True),),
            devices=tuple(DeviceSpec(f"/dev/{i}", f"/dev/{i}", "rw") for i in ids),
            annotations={"example.com/gpu": "yes"},
            cdi_devices=tuple(f"example.com/gpu={i}" for i in ids),
        )

    def pre_start(ids: Sequence[str]) -> None:
        prestarted.append(list(ids))
        if "gpu3" in ids:
            raise RuntimeError("gpu3 failed its reset")

    with DevicePlugin(GPU, GPUS, socket_dir=layout.plugins, allocate=allocate, pre_start=pre_start) as plugin:
        plugin.register()
        wait_for(lambda: len(_healthy(layout)) == 4, "gpus")
        layout.write_manifest("a.yaml", gpu_pod("a"))
        wait_pod(layout, "a", "admitted")
        entry = wait_for(lambda: (e := pod_status(layout, "a")) is not None and e["containers"] == "started" and e,
                         "containers of a started")
        (dev,) = entry["allocations"]["main"]["devices"][GPU]
        assert prestarted == [[dev]]
        assert entry["runtime"]["main"] == {
            "envs": {"GPU_IDS": dev},
            "mounts": [{"container_path": "/usr/lib/gpu", "host_path": "/opt/gpu/lib", "read_only": True}],
            "devices": [{"container_path": f"/dev/{dev}", "host_path": f"/dev/{dev}", "permissions": "rw"}],
            "annotations": {"example.com/gpu": "yes"},
            "cdi_devices": [f"example.com/gpu={dev}"],
        }
        assert entry["container_errors"] == {}
        capsys.readouterr()
        assert main(["pods", "--state-dir", str(layout.state), "-o", "wide"]) == 0
        out = capsys.readouterr().out
        assert f"env GPU_IDS={dev}" in out and "mount /opt/gpu/lib -> /usr/lib/gpu (read-only)" in out
        assert f"device /dev/{dev} -> /dev/{dev} (rw)" in out and "annotations example.com/gpu=yes" in out
        assert f"cdi example.com/gpu={dev}" in out
        # -o json: the same options in the document's key style; the runtime's names as written
        assert main(["pods", "--state-dir", str(layout.state), "-o", "json"]) == 0
        shown = json.loads(capsys.readouterr().out)["pods"][entry["uid"]]["runtime"]["main"]
        assert shown["mounts"] == [{"containerPath": "/usr/lib/gpu", "hostPath": "/opt/gpu/lib", "readOnly": True}]
        assert (shown["envs"], shown["cdiDevices"]) == ({"GPU_IDS": dev}, [f"example.com/gpu={dev}"])
        # Fill the node's GPUs until gpu3 is handed out: its PreStartContainer fails, which fails the
        # container's start (recorded) but not the admission.
        for i in range(3):
            layout.write_manifest(f"b{i}.yaml", gpu_pod(f"b{i}"))
            wait_pod(layout, f"b{i}", "admitted")
        wait_for(lambda: all(p["containers"] in ("started", "failed") for p in layout.status()["pods"].values()),
                 "every container start attempted")
        failed = [p for p in layout.status()["pods"].values() if p["container_errors"]]
        assert len(failed) == 1 and "gpu3 failed its reset" in failed[0]["container_errors"]["main"]
        assert layout.status()["faults"]["container_start_error"] == 1


def test_manifest_changed_while_down_is_admitted_afresh(layout: Layout) -> None:
    with Agent(layout.options()):
        layout.write_manifest("x.yaml", gpu_pod("x", gpus=0, cpus=2))
        wait_pod(layout, "x", "admitted")
    layout.write_manifest("x.yaml", gpu_pod("x", gpus=0, cpus=6))
    with Agent(layout.options()) as second:
        entry = wait_pod(layout, "x", "admitted")
        assert len(_cpu_list(entry["allocations"]["main"]["cpus"])) == 6
        assert second.metrics.value(m.TM_ADMISSION_REQUESTS) == 1
        assert second.node is not None and len(second.node.pods) == 1
