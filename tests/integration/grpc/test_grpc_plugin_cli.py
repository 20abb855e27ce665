"""`numalign plugin` as a subprocess registering with our RegistrationServer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from numalign.deviceplugin.testing import FakeKubelet
from numalign.k8s.deviceplugin import Device

GPU = "example.com/gpu"
YAML = """\
- {id: gpu0, numa: 0, pci: '0000:3b:00.0'}
- {id: gpu1, numa: 0, pci: '0000:3b:00.1'}
- {id: gpu2, numa: 1, pci: '0000:af:00.0'}
- {id: gpu3, numa: 1, pci: '0000:b0:00.0'}
"""


@pytest.fixture
def plugin_proc(sock_dir: Path, kubelet: FakeKubelet) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    devices = sock_dir / "devices.yaml"
    devices.write_text(YAML)
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "numalign.cli.main", "plugin",
            "--resource", GPU, "--devices", str(devices),
            "--device-plugin-dir", str(sock_dir), "--poll-interval", "0.05",
        ],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        yield proc, devices
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)


def test_grpc_cli_plugin_registers_prefers_numa_and_stops_on_sigterm(
    kubelet: FakeKubelet, plugin_proc: tuple[subprocess.Popen[str], Path]
) -> None:
    proc, devices = plugin_proc
    kubelet.wait_for(lambda: kubelet.last_devices(GPU) is not None, "the plugin's devices", timeout=20)
    assert kubelet.last_devices(GPU) == [
        Device("gpu0", "Healthy", (0,)),
        Device("gpu1", "Healthy", (0,)),
        Device("gpu2", "Healthy", (1,)),
        Device("gpu3", "Healthy", (1,)),
    ]
    endpoint = kubelet.endpoint(GPU)
    assert endpoint.options.get_preferred_allocation_available
    assert endpoint.get_preferred_allocation(["gpu0", "gpu1", "gpu2", "gpu3"], [], 2) == ["gpu0", "gpu1"]
    assert endpoint.get_preferred_allocation(["gpu0", "gpu1", "gpu2", "gpu3"], ["gpu3"], 2) == [
        "gpu3",
        "gpu2",
    ]
    assert dict(endpoint.allocate(["gpu2"]).envs) == {"NUMALIGN_DEVICES": "gpu2"}

    # Editing the YAML pushes the new health.
    devices.write_text(YAML.replace("{id: gpu2, numa: 1,", "{id: gpu2, numa: 1, health: Unhealthy,"))
    # A distinct mtime even on coarse-timestamp filesystems.
    os.utime(devices, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    kubelet.wait_for(
        lambda: (kubelet.last_devices(GPU) or [Device("x")] * 3)[2].health == "Unhealthy", "health change"
    )

    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == 0, out
    assert "stopped" in out
    kubelet.wait_for(lambda: kubelet.disconnected == [GPU], "disconnect on plugin exit")
    assert not (Path(kubelet.server.directory) / "example-com_gpu.sock").exists()


def test_grpc_cli_plugin_crash_and_kubelet_restart(
    sock_dir: Path, kubelet: FakeKubelet, plugin_proc: tuple[subprocess.Popen[str], Path]
) -> None:
    proc, _ = plugin_proc
    kubelet.wait_for(lambda: len(kubelet.registered) == 1, "registration", timeout=20)
    # The first snapshot must be in before the restart, or "two snapshots" below races the stop.
    kubelet.wait_for(lambda: len(kubelet.devices) == 1, "first snapshot", timeout=20)
    # The kubelet restarts: stale sockets (the plugin's) go, kubelet.sock comes back; the plugin
    # notices and registers again on a fresh socket.
    kubelet.stop()
    kubelet.start()
    kubelet.wait_for(lambda: len(kubelet.registered) == 2, "re-registration after kubelet restart", timeout=20)
    kubelet.wait_for(lambda: len(kubelet.devices) >= 2, "devices after re-registration", timeout=20)
    # The plugin crashes: the kubelet side sees the stream break.
    proc.kill()
    proc.wait(timeout=10)
    kubelet.wait_for(lambda: kubelet.disconnected == [GPU], "disconnect after a crash", timeout=20)
    assert kubelet.server.resources() == []


def test_grpc_cli_plugin_bad_input_is_an_error_not_a_traceback(sock_dir: Path) -> None:
    bad = sock_dir / "bad.yaml"
    bad.write_text("- {id: a, numa: -3}\n")
    res = subprocess.run(
        [sys.executable, "-m", "numalign.cli.main", "plugin", "--resource", GPU, "--devices", str(bad),
         "--device-plugin-dir", str(sock_dir)],
        capture_output=True, text=True, timeout=20,
    )  # fmt: skip
    assert res.returncode == 2  # invalid input
    assert "numa must be a NUMA node id >= 0" in res.stderr
    assert "Traceback" not in res.stderr
    res = subprocess.run(
        [sys.executable, "-m", "numalign.cli.main", "plugin", "--resource", "gpu", "--devices", str(bad)],
        capture_output=True, text=True, timeout=20,
    )  # fmt: skip
    assert res.returncode == 2  # invalid input
    assert "Traceback" not in res.stderr


def test_grpc_cli_plugin_from_sysfs_pci(sock_dir: Path, kubelet: FakeKubelet) -> None:
    sysfs = sock_dir / "sys"
    base = sysfs / "bus" / "pci" / "devices"
    base.mkdir(parents=True)
    for addr, cls, numa in [
        ("0000:3b:00.0", "0x030200", 0),
        ("0000:af:00.0", "0x030200", -1),
        ("0000:18:00.0", "0x020000", 0),
    ]:
        d = base / addr
        d.mkdir()
        (d / "class").write_text(cls + "\n")
        (d / "vendor").write_text("0x10de\n")
        (d / "numa_node").write_text(f"{numa}\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "numalign.cli.main", "plugin", "--resource", GPU, "--pci-class", "0x0302",
         "--pci-vendor", "10de", "--sysfs-root", str(sysfs), "--device-plugin-dir", str(sock_dir)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        kubelet.wait_for(lambda: kubelet.last_devices(GPU) is not None, "PCI devices", timeout=20)
        assert kubelet.last_devices(GPU) == [
            Device("0000:3b:00.0", "Healthy", (0,)),
            Device("0000:af:00.0", "Healthy", None),
        ]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=10)
