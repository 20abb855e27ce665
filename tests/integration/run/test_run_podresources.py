"""`numalign serve` and `numalign run` sharing a state directory: the run's pod is in PodResources List
while its command runs (serve reads the directory again once another process changed it), and gone
after it exits."""

from __future__ import annotations

import contextlib
import json
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


def test_podresources_lists_a_run_while_it_runs(tmp_path: Path) -> None:
    state, sock = tmp_path / "state", tmp_path / "pr.sock"
    with serving(state, sock, tmp_path / "dp"):
        wait_for(sock.is_socket, "the agent's PodResources socket", timeout=20)
        proc = start(state, "--cpus", "1", "--memory", "64Mi")
        seen = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
        (pod,) = json.loads((state / "numalign_pods.json").read_text())["pods"]
        key = f"default/{pod['manifest']['metadata']['name']}"
        cpus = wait_for(lambda: listed(sock).get(key), f"{key} in PodResources List", timeout=20)
        assert frozenset(cpus) == parse_cpuset(seen["cpus"])
        assert finish(proc)[0] == 0
        wait_for(lambda: key not in listed(sock), f"{key} gone from PodResources List", timeout=20)


def test_a_killed_run_leaves_podresources_without_another_write(tmp_path: Path) -> None:
    """serve notices on its own tick that a run's process ended (kill -9 of `numalign run`), releases
    the pod and stops listing it, though nobody else wrote the directory."""
    state, sock = tmp_path / "state", tmp_path / "pr.sock"
    with serving(state, sock, tmp_path / "dp"):
        wait_for(sock.is_socket, "the agent's PodResources socket", timeout=20)
        proc = start(state, "--cpus", "1", "--memory", "64Mi")
        json.loads(proc.stdout.readline())  # type: ignore[union-attr]
        (pod,) = json.loads((state / "numalign_pods.json").read_text())["pods"]
        key = f"default/{pod['manifest']['metadata']['name']}"
        wait_for(lambda: key in listed(sock), f"{key} in PodResources List", timeout=20)
        proc.kill()
        proc.communicate(timeout=30)
        wait_for(lambda: key not in listed(sock), f"{key} gone from PodResources List", timeout=20)
        assert json.loads((state / "numalign_pods.json").read_text())["pods"] == []


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
