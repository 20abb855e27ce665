"""`numalign serve` and `numalign run` sharing a state directory: while a run's command runs, what it holds
is out of PodResources GetAllocatableResources (serve reads the directory again once another process
changed it) and the run is not in List (no API server knows it: NFD's topology-updater would fail its
scan looking it up); after it exits, its CPUs are allocatable again."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import grpc
from integration.agent.conftest import wait_for
from integration.run.test_run_process import finish, start

from numalign.adapters.grpc.gen.podresources.v1 import api_pb2 as pr
from numalign.adapters.grpc.gen.podresources.v1 import api_pb2_grpc as pr_grpc
from numalign.k8s.cpuset import parse_cpuset

RUN_CONFIG = Path(__file__).resolve().parents[3] / "src" / "numalign" / "data" / "run-kubelet-config.yaml"


def allocatable_cpus(socket: Path) -> set[int]:
    with grpc.insecure_channel(f"unix://{socket}") as ch:
        resp = pr_grpc.PodResourcesListerStub(ch).GetAllocatableResources(
            pr.AllocatableResourcesRequest(), timeout=5)
    return set(resp.cpu_ids)


def listed(socket: Path) -> dict[str, list[int]]:
    with grpc.insecure_channel(f"unix://{socket}") as ch:
        resp = pr_grpc.PodResourcesListerStub(ch).List(pr.ListPodResourcesRequest(), timeout=5)
    return {f"{p.namespace}/{p.name}": sorted(c.cpu_ids[0] for c in p.containers if c.cpu_ids)
            for p in resp.pod_resources}


@contextlib.contextmanager
def serving(state: Path, sock: Path, plugins: Path) -> Iterator[None]:
    """`numalign serve` on `state` (PodResources on `sock`, device plugins in `plugins`) for the block."""
    serve = subprocess.Popen(
        [sys.executable, "-m", "numalign.cli.main", "serve", "--config", str(RUN_CONFIG), "--state-dir", str(state),
         "--device-plugin-dir", str(plugins), "--pod-resources-socket", str(sock)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        yield
    finally:
        serve.terminate()
        serve.wait(timeout=30)


def test_a_run_holds_its_cpus_out_of_allocatable_and_is_not_listed(tmp_path: Path) -> None:
    state, sock = tmp_path / "state", tmp_path / "pr.sock"
    with serving(state, sock, tmp_path / "dp"):
        wait_for(sock.is_socket, "the agent's PodResources socket", timeout=120)
        before = wait_for(lambda: allocatable_cpus(sock), "allocatable CPUs", timeout=120)
        proc = start(state, "--cpus", "1", "--memory", "64Mi")
        seen = parse_cpuset(json.loads(proc.stdout.readline())["cpus"])  # type: ignore[union-attr]
        assert seen <= before
        wait_for(lambda: allocatable_cpus(sock) == before - seen, "the run's CPU out of allocatable", timeout=120)
        assert listed(sock) == {}
        assert finish(proc)[0] == 0
        wait_for(lambda: allocatable_cpus(sock) == before, "the run's CPU allocatable again", timeout=120)


def test_a_killed_run_leaves_podresources_without_another_write(tmp_path: Path) -> None:
    """serve notices on its own tick that a run's process ended (kill -9 of `numalign run`), releases
    the pod and gives its CPU back to allocatable, though nobody else wrote the directory."""
    state, sock = tmp_path / "state", tmp_path / "pr.sock"
    with serving(state, sock, tmp_path / "dp"):
        wait_for(sock.is_socket, "the agent's PodResources socket", timeout=120)
        before = wait_for(lambda: allocatable_cpus(sock), "allocatable CPUs", timeout=120)
        proc = start(state, "--cpus", "1", "--memory", "64Mi")
        seen = parse_cpuset(json.loads(proc.stdout.readline())["cpus"])  # type: ignore[union-attr]
        wait_for(lambda: allocatable_cpus(sock) == before - seen, "the run's CPU out of allocatable", timeout=120)
        proc.kill()
        proc.communicate(timeout=120)
        wait_for(lambda: allocatable_cpus(sock) == before, "the run's CPU allocatable again", timeout=120)
        assert json.loads((state / "numalign_pods.json").read_text())["pods"] == []


def test_serve_ends_what_a_killed_run_left_before_freeing_its_cpu(tmp_path: Path) -> None:
    """A killed run's child outlives it; serve, reclaiming the pod on its tick, ends the child first (as a
    container's processes end with it), so the CPU is never shared with it."""
    from integration.run.test_run_leftovers import killed, running, start_leaving_a_child

    state, sock = tmp_path / "state", tmp_path / "pr.sock"
    with serving(state, sock, tmp_path / "dp"):
        wait_for(sock.is_socket, "the agent's PodResources socket", timeout=120)
        before = wait_for(lambda: allocatable_cpus(sock), "allocatable CPUs", timeout=120)
        proc, child, cpus = start_leaving_a_child(state, "--no-cgroup")
        try:
            wait_for(lambda: allocatable_cpus(sock) == before - cpus, "the run's CPU out of allocatable", timeout=120)
            killed(proc)
            wait_for(lambda: allocatable_cpus(sock) == before, "the run's CPU allocatable again", timeout=120)
            assert not running(child)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, 9)


def test_a_device_of_a_plugin_registered_with_serve_comes_with_its_allocate_environment(tmp_path: Path) -> None:
    """The run dials the plugin serve reports connected, learns its devices (with their NUMA nodes) from
    ListAndWatch and asks it for Allocate: COMMAND gets exactly the environment the plugin answered."""
    from numalign.deviceplugin import ContainerAllocateResponse, Device, DevicePlugin

    state, sock, plugins = tmp_path / "state", tmp_path / "pr.sock", tmp_path / "dp"
    asked: list[list[str]] = []

    def allocate(ids: Sequence[str]) -> ContainerAllocateResponse:
        asked.append(list(ids))
        return ContainerAllocateResponse(envs={"EXAMPLE_VISIBLE_DEVICES": ",".join(ids)})

    with serving(state, sock, plugins):
        plugin = DevicePlugin("example.com/gpu", [Device("gpu0", topology=(0,)), Device("gpu1", topology=(0,))],
                              socket_dir=plugins, allocate=allocate)
        try:
            wait_for(lambda: (plugins / "kubelet.sock").is_socket(), "the agent's registration socket", timeout=20)
            plugin.start()

            def reported() -> bool:
                path = state / "numalign_status.json"
                doc = json.loads(path.read_text()) if path.exists() else {}
                return bool(doc.get("resources", {}).get("example.com/gpu", {}).get("healthy")
                            and doc.get("plugin_sockets", {}).get("example.com/gpu"))

            wait_for(reported, "the plugin in serve's status", timeout=20)
            proc = start(state, "--cpus", "1", "--memory", "64Mi", "--device", "example.com/gpu=1",
                         command=[sys.executable, "-c", "import os; print(os.environ.get('EXAMPLE_VISIBLE_DEVICES'))"])
            code, out, err = finish(proc)
            assert code == 0, err
            given = json.loads(err[err.index("{"):])["decision"]["allocations"]["main"]["devices"]["example.com/gpu"]
            assert out.strip() == ",".join(given) and asked == [list(given)]
        finally:
            plugin.stop()


def test_device_env_and_what_a_host_process_cannot_be_given_for_a_serve_registered_plugin(tmp_path: Path) -> None:
    """--device-env names a variable for a serve-registered plugin's devices too, and the DeviceSpecs,
    mounts and annotations its Allocate answered are said (not dropped): a host process has no container."""
    from numalign.deviceplugin import ContainerAllocateResponse, Device, DevicePlugin
    from numalign.k8s.deviceplugin import DeviceSpec, Mount

    state, sock, plugins = tmp_path / "state", tmp_path / "pr.sock", tmp_path / "dp"

    def allocate(ids: Sequence[str]) -> ContainerAllocateResponse:
        return ContainerAllocateResponse(
            envs={"EXAMPLE_VISIBLE_DEVICES": ",".join(ids)},
            devices=tuple(DeviceSpec(f"/dev/ex{i}", f"/dev/host-{i}", "rw") for i in ids),
            mounts=(Mount("/usr/local/example", "/opt/example/lib", True),),
            annotations={"example.com/ids": ",".join(ids)},
        )

    with serving(state, sock, plugins):
        plugin = DevicePlugin("example.com/gpu", [Device("gpu0", topology=(0,))], socket_dir=plugins,
                              allocate=allocate)
        try:
            wait_for(lambda: (plugins / "kubelet.sock").is_socket(), "the agent's registration socket", timeout=120)
            plugin.start()

            def reported() -> bool:
                path = state / "numalign_status.json"
                doc = json.loads(path.read_text()) if path.exists() else {}
                return bool(doc.get("plugin_sockets", {}).get("example.com/gpu"))

            wait_for(reported, "the plugin in serve's status", timeout=120)
            proc = start(state, "--cpus", "1", "--memory", "64Mi", "--device", "example.com/gpu=1",
                         "--device-env", "example.com/gpu=MY_GPUS",
                         command=[sys.executable, "-c", "import os; print(os.environ.get('MY_GPUS'), "
                                  "os.environ.get('EXAMPLE_VISIBLE_DEVICES'))"])
            code, out, err = finish(proc)
            assert code == 0, err
            assert out.split() == ["gpu0", "gpu0"]
            not_applied = json.loads(err[err.index("{"):])["notApplied"]
            assert any("/dev/host-gpu0" in n and "/dev/exgpu0" in n for n in not_applied)
            assert any("mount /opt/example/lib at /usr/local/example (read-only)" in n for n in not_applied)
            assert any("annotation example.com/ids=gpu0" in n for n in not_applied)
        finally:
            plugin.stop()
