"""`numalign serve` and `numalign run` sharing a state directory: the run's pod is in PodResources List
while its command runs (serve reads the directory again once another process changed it), and gone
after it exits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import grpc
from integration.agent.conftest import wait_for
from integration.run.test_run_process import finish, start

from numalign.adapters.grpc.gen.podresources.v1 import api_pb2 as pr
from numalign.adapters.grpc.gen.podresources.v1 import api_pb2_grpc as pr_grpc
from numalign.machine.cpuset import parse_cpuset

RUN_CONFIG = Path(__file__).resolve().parents[3] / "src" / "numalign" / "data" / "run-kubelet-config.yaml"


def listed(socket: Path) -> dict[str, list[int]]:
    with grpc.insecure_channel(f"unix://{socket}") as ch:
        resp = pr_grpc.PodResourcesListerStub(ch).List(pr.ListPodResourcesRequest(), timeout=5)
    return {f"{p.namespace}/{p.name}": sorted(c.cpu_ids[0] for c in p.containers if c.cpu_ids)
            for p in resp.pod_resources}


def test_podresources_lists_a_run_while_it_runs(tmp_path: Path) -> None:
    state, sock = tmp_path / "state", tmp_path / "pr.sock"
    serve = subprocess.Popen(
        [sys.executable, "-m", "numalign.cli.main", "serve", "--config", str(RUN_CONFIG), "--state-dir", str(state),
         "--device-plugin-dir", str(tmp_path / "dp"), "--pod-resources-socket", str(sock)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(sock.is_socket, "the agent's PodResources socket", timeout=20)
        proc = start(state, "--cpus", "1", "--memory", "64Mi")
        seen = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
        (pod,) = json.loads((state / "numalign_pods.json").read_text())["pods"]
        key = f"default/{pod['manifest']['metadata']['name']}"
        cpus = wait_for(lambda: listed(sock).get(key), f"{key} in PodResources List", timeout=20)
        assert frozenset(cpus) == parse_cpuset(seen["cpus"])
        assert finish(proc)[0] == 0
        wait_for(lambda: key not in listed(sock), f"{key} gone from PodResources List", timeout=20)
    finally:
        serve.terminate()
        serve.wait(timeout=30)


def test_a_killed_run_leaves_podresources_without_another_write(tmp_path: Path) -> None:
    """serve notices on its own tick that a run's process ended (kill -9 of `numalign run`), releases
    the pod and stops listing it, though nobody else wrote the directory."""
    state, sock = tmp_path / "state", tmp_path / "pr.sock"
    serve = subprocess.Popen(
        [sys.executable, "-m", "numalign.cli.main", "serve", "--config", str(RUN_CONFIG), "--state-dir", str(state),
         "--device-plugin-dir", str(tmp_path / "dp"), "--pod-resources-socket", str(sock)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
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
    finally:
        serve.terminate()
        serve.wait(timeout=30)
