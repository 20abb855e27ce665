"""The terminal picture: letters carry the occupancy with or without colour; colour only on a terminal
without NO_COLOR, checked through a real pseudo-terminal for `discover` and `pods`."""

from __future__ import annotations

import dataclasses
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from support.configs import static_node_config

from numalign.agent.status import write_status
from numalign.k8s.manifest import pod_from_dict
from numalign.kubelet.node import Node
from numalign.machine.examples import example
from numalign.machine.fileformat import machine_to_dict
from numalign.report import NodeView, node_view_from_records, terminal_picture

EXE = [sys.executable, "-m", "numalign.cli.main"]
ESC = "\x1b["


def _pod(name: str, cpu: str) -> Any:
    spec = {"containers": [{"name": "c", "resources": {"limits": {"cpu": cpu, "memory": "1Gi"}}}]}
    return pod_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "t"},
                          "spec": spec}, "test")


def _node_with_pods() -> tuple[Node, list[Any]]:
    node = Node(example("dual-socket"), static_node_config(reserved="0"))
    records = [node.admit(_pod("a", "4")), node.admit(_pod("b", "2")), node.admit(_pod("too-big", "40"))]
    return node, records


def test_letters_show_who_holds_each_cpu_without_colour() -> None:
    node, records = _node_with_pods()
    view = node_view_from_records(node.machine, [r.to_dict() for r in records], reserved_cpus=[0])
    text = terminal_picture(view, color=False)
    assert ESC not in text
    lines = text.splitlines()
    node0 = next(line for line in lines if line.startswith("NUMA 0"))
    cells = node0.split()[2]
    assert len(cells) == 32  # one character per CPU of NUMA node 0
    assert cells[0] == "r" and cells.count("a") == 4 and cells.count("b") == 2
    assert "mem 2 GiB/256 GiB" in node0
    assert "  a  t/a c" in lines and "  b  t/b c" in lines
    assert not any("too-big" in line for line in lines)  # rejected pods hold nothing


def test_colour_wraps_letters_only_when_asked() -> None:
    node, records = _node_with_pods()
    view = node_view_from_records(node.machine, [r.to_dict() for r in records], reserved_cpus=[0])
    coloured = terminal_picture(view, color=True)
    assert ESC in coloured
    stripped = coloured
    for code in ("\x1b[0m", *(f"\x1b[{n}m" for n in range(1, 100))):
        stripped = stripped.replace(code, "")
    assert stripped == terminal_picture(view, color=False)


def test_large_nodes_wrap() -> None:
    text = terminal_picture(NodeView(example("gb200"), "gb200"))
    first = next(line.strip() for line in text.splitlines() if line.strip().startswith("NUMA 0 "))
    assert "72 CPUs" in first and first.split()[2] == "." * 64


def _run_in_pty(args: list[str], env: dict[str, str]) -> str:
    """Run the CLI with stdout on a pseudo-terminal; everything it printed, once it exits."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([*EXE, *args], stdout=follower, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    os.close(follower)
    out = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1.0)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            out += chunk
        elif proc.poll() is not None:
            break
    os.close(leader)
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    return out.decode()


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(extra)
    return env


def test_discover_colours_on_a_terminal_and_not_with_no_color() -> None:
    tty = _run_in_pty(["discover", "--machine", "dual-socket"], _env())
    assert "NUMA nodes of dual-socket" in tty
    assert f"{ESC}32m{'.' * 32}{ESC}0m" in tty  # a bare machine: every CPU free, in green
    plain = _run_in_pty(["discover", "--machine", "dual-socket"], _env(NO_COLOR="1"))
    assert "NUMA nodes of dual-socket" in plain and ESC not in plain


def _status_dir(tmp_path: Path) -> Path:
    node, records = _node_with_pods()
    pods = {}
    for rec in records:
        ns, name = rec.pod.split("/")
        pods[rec.pod_uid] = {"namespace": ns, "name": name, "uid": rec.pod_uid,
                             "status": "admitted" if rec.result.admit else "rejected",
                             "reason": rec.result.reason, "message": rec.result.message,
                             "record": rec.to_dict(), "allocations": rec.to_dict()["allocations"]}
    state = tmp_path / "state"
    state.mkdir()
    write_status(state, {"pods": pods, "manifests": {}, "resources": {}, "faults": {},
                         "machine": machine_to_dict(node.machine), "reserved_cpus": "0"})
    return state


def test_pods_colours_on_a_terminal_plain_otherwise(tmp_path: Path) -> None:
    state = _status_dir(tmp_path)
    tty = _run_in_pty(["pods", "--state-dir", str(state)], _env())
    assert "NUMA nodes of dual-socket" in tty
    assert f"{ESC}34ma{ESC}0m" in tty  # the first container's letter, coloured
    no_color = _run_in_pty(["pods", "--state-dir", str(state)], _env(NO_COLOR="1"))
    assert "NUMA nodes of dual-socket" in no_color and ESC not in no_color
    piped = subprocess.run([*EXE, "pods", "--state-dir", str(state)], capture_output=True, text=True, check=True,
                           env=_env(), timeout=60)
    assert ESC not in piped.stdout
    assert piped.stdout.splitlines()[-2:] == ["  a  t/a c", "  b  t/b c"]


def test_admit_shows_progress_on_a_terminal_only() -> None:
    leader, follower = pty.openpty()
    proc = subprocess.Popen([*EXE, "admit"], stdout=subprocess.PIPE, stderr=follower, stdin=subprocess.DEVNULL,
                            env=_env())
    os.close(follower)
    err = b""
    while True:
        ready, _, _ = select.select([leader], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(leader, 65536)
        except OSError:
            break
        if not chunk:
            break
        err += chunk
    os.close(leader)
    out = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 0
    assert "admit: 5 pod(s) on dual-socket" in err.decode() and "\x1b[2K" in err.decode()
    assert ESC not in out  # the answer on stdout (a pipe) stays plain
    piped = subprocess.run([*EXE, "admit"], capture_output=True, text=True, env=_env(), timeout=60, check=True)
    assert piped.stderr == ""


def test_the_header_names_every_letter_in_use_and_no_container_is_green() -> None:
    from numalign.report.terminal import _ANSI

    node = Node(example("numa-64"), static_node_config(options="max-allowable-numa-nodes: \"64\"", reserved="0"))
    records = [node.admit(_pod(f"p{i}", "2")) for i in range(30)]
    view = node_view_from_records(node.machine, [r.to_dict() for r in records])
    header = terminal_picture(view).splitlines()[0]
    assert "(a-q, s-z, A-E: containers holding CPUs" in header  # 30 containers: past z
    # `r` is a reserved CPU's alone: the 18th container is `s`, not a letter the reserved CPU 0 also shows.
    lines = terminal_picture(dataclasses.replace(view, reserved_cpus=frozenset({0}))).splitlines()
    legend = {line.split()[0]: line.split()[1] for line in lines if line.startswith("  ")}
    assert "r" not in legend and legend["s"] == "t/p17"
    assert lines[1].split()[2][0] == "r" and "r: reserved" in lines[0]  # CPU 0, reserved
    assert 32 not in _ANSI and 92 not in _ANSI  # green is a free CPU's colour only


def test_pods_of_a_state_directory_mark_reserved_cpus_and_draw_app_containers_over_init_ones(
    tmp_path: Path,
) -> None:
    from numalign.cli.main import main

    state = tmp_path / "state"
    assert main(["admit", "--state-dir", str(state), "-o", "json"]) == 0
    out = _run_in_pty(["pods", "--state-dir", str(state)], _env(NO_COLOR="1"))
    lines = out.replace("\r", "").splitlines()
    numa0 = next(line for line in lines if line.startswith("NUMA 0 "))
    cells = numa0.split()[2]
    # The built-in example reserves CPU 0's core (0 and 64 on dual-socket): marked r, as serve's view marks them.
    assert cells[0] == "r" and "r: reserved" in lines[lines.index(numa0) - 1]
    # net/dpdk-router's init container `setup` ran on CPU 5, which its app container `router` reuses: the
    # picture gives CPU 5 to router, as the text does.
    router = next(line.split()[0] for line in lines if line.strip().endswith("net/dpdk-router router"))
    assert cells[5] == router


def test_containers_past_the_letters_share_one_legend_line() -> None:
    """Past the 61 letters every container is drawn `#`: the legend said so once per container (830 pods
    on numa-64: 770 lines of `#  hpc/svc-NNN c`); one line now counts them and names the first and last."""
    node = Node(example("numa-64"), static_node_config(options="max-allowable-numa-nodes: \"64\"", reserved="0"))
    records = [node.admit(_pod(f"p{i:03d}", "2")) for i in range(70)]
    view = node_view_from_records(node.machine, [r.to_dict() for r in records])
    lines = terminal_picture(view).splitlines()
    legend = [line for line in lines if line.startswith("  ") and not line.startswith("  NUMA")]
    assert len(legend) == 62 and legend[-2] == "  9  t/p060 c"
    assert legend[-1] == "  #  9 more containers (t/p061 c ... t/p069 c)"
    cells = [line.split()[2] for line in lines[1:] if line.strip().startswith("NUMA")]
    assert "#: more" in lines[0] and any("#" in c for c in cells)


def test_pods_of_a_serve_draw_its_plugins_devices_not_the_machine_files(tmp_path: Path) -> None:
    # serve's devices are its plugins' (status file `plugin_devices`): the picture counts those per NUMA node
    # (held of reported), and none of the machine file's own devices (newcomer F8)
    node = Node(example("dual-socket"), static_node_config(reserved="0"))
    spec = {"containers": [{"name": "c", "resources": {"limits": {"cpu": "2", "memory": "1Gi",
                                                                   "nvidia.com/gpu": "1"}}}]}
    rec = node.admit(pod_from_dict({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "g", "namespace": "t"},
                                    "spec": spec}, "test"))
    assert rec.result.admit
    given = node.devices.get_container_devices(rec.pod_uid, "c")
    assert given is not None
    (held,) = given["nvidia.com/gpu"]
    state = tmp_path / "state"
    state.mkdir()
    pods = {rec.pod_uid: {"namespace": "t", "name": "g", "uid": rec.pod_uid, "status": "admitted",
                          "allocations": rec.to_dict()["allocations"]}}
    write_status(state, {"pods": pods, "manifests": {}, "resources": {}, "faults": {},
                         "machine": machine_to_dict(node.machine), "reserved_cpus": "0",
                         # the held one on NUMA 1, another on 1 and 9 (no such node), one without topology
                         "plugin_devices": {"nvidia.com/gpu": {held: [1], "other": [1, 9], "loose": None}}})
    out = subprocess.run([*EXE, "pods", "--state-dir", str(state)], capture_output=True, text=True, check=True,
                         env=_env(), timeout=60).stdout
    lines = {line.split("  ")[0]: line for line in out.splitlines() if line.startswith("NUMA ")}
    assert lines["NUMA 1"].endswith("gpu 1/2")
    assert [k for k, v in lines.items() if "gpu" in v or "sriov" in v] == ["NUMA 1"]
