"""`numalign plugin`: a real device plugin (API v1beta1) exposing devices with NUMA topology.

    numalign plugin --resource example.com/gpu --devices gpus.yaml
    numalign plugin --resource example.com/gpu --pci-class 0x0302 --pci-vendor 0x10de

It serves DevicePlugin on its own socket in --device-plugin-dir, registers with kubelet.sock there
(a kubelet or `numalign serve`), registers again whenever kubelet.sock is recreated, answers
GetPreferredAllocation NUMA-aware (fewest NUMA nodes, then PCIe locality, always keeping
must_include), and runs until SIGTERM/SIGINT. With --devices, the YAML file is re-read when it
changes, so editing it pushes new health or topology to the kubelet. On stdout it prints its status in
the -o format: one line once it serves, one per reloaded device list, one when it has stopped.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from numalign.cli.commands.summaries import SUMMARIES

log = logging.getLogger("numalign.cli.commands.plugin")

DEFAULT_DIR = "/var/lib/kubelet/device-plugins"
LONG_RUNNING = True  # its info lines (registration, reloads) show at -v 0


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "plugin",
        help=SUMMARIES["plugin"],
        description="Serve the kubelet device-plugin API v1beta1 for one extended resource and register "
        "with kubelet.sock in --device-plugin-dir. Runs until SIGTERM or SIGINT.",
    )
    p.add_argument("--resource", required=True, help="extended resource name, e.g. example.com/gpu")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument(
        "--devices", metavar="YAML", help="YAML list of devices: - {id: gpu0, numa: 0, health: Healthy}"
    )
    src.add_argument(
        "--pci-class", metavar="CLASS", help="expose PCI devices whose class starts with CLASS (hex)"
    )
    p.add_argument("--pci-vendor", metavar="VENDOR", help="with --pci-class: only this vendor id (hex)")
    p.add_argument("--sysfs-root", metavar="DIR", default="/sys", help="sysfs mount point (default /sys)")
    p.add_argument("--device-plugin-dir", metavar="DIR", default=DEFAULT_DIR, help=f"default {DEFAULT_DIR}")
    p.add_argument("--socket-name", metavar="NAME", help="plugin socket file name (default from --resource)")
    p.add_argument(
        "--env-var",
        metavar="NAME",
        default="NUMALIGN_DEVICES",
        help="Allocate sets this environment variable to the comma-separated device ids",
    )
    p.add_argument(
        "--poll-interval", type=float, default=1.0, help="seconds between kubelet.sock/YAML checks"
    )
    p.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                   help="deprecated: use -v N (-v 4 for DEBUG)")
    from numalign.cli.output import add_output_arg

    add_output_arg(p, help="format of the status lines on stdout: serving (resource, socket, devices), device "
                   "list reloaded, stopped (default text)")


def run(args: argparse.Namespace) -> int:
    from numalign.cli.options.paths import check_directory
    from numalign.cli.output import emit_event
    from numalign.deviceplugin import ContainerAllocateResponse, DevicePlugin
    from numalign.deviceplugin.inventory import PluginDevice, load_yaml_devices, scan_pci_devices
    from numalign.deviceplugin.preferred import preferred_allocation
    from numalign.errors import InvalidInputError

    if args.pci_vendor is not None and args.pci_class is None:
        raise InvalidInputError("--pci-vendor needs --pci-class")
    if args.poll_interval <= 0:
        raise InvalidInputError(f"--poll-interval must be > 0 seconds, got {args.poll_interval}")
    check_directory(args.device_plugin_dir, "--device-plugin-dir")

    yaml_path = Path(args.devices) if args.devices else None
    if yaml_path is not None:
        # Read once up front so an unreadable, non-UTF-8 or directory path is one clear error line.
        from numalign.adapters.textfiles import read_text_file

        read_text_file(yaml_path, "the device list", "a YAML list of devices like '- {id: gpu0, numa: 0}'")

    def load() -> list[PluginDevice]:
        if yaml_path is not None:
            return load_yaml_devices(yaml_path)
        return scan_pci_devices(args.pci_class, args.pci_vendor, Path(args.sysfs_root))

    # Taken before the first read, so an edit racing with start-up is still picked up.
    mtime = _mtime(yaml_path)
    inventory = {d.id: d for d in load()}
    if not inventory:
        log.warning("no devices found for %s; serving an empty list", args.resource)
    lock = threading.Lock()

    def preferred(available: Sequence[str], must: Sequence[str], size: int) -> list[str]:
        with lock:
            devs = dict(inventory)
        return preferred_allocation(devs, available, must, size)

    def allocate(ids: Sequence[str]) -> ContainerAllocateResponse:
        return ContainerAllocateResponse(envs={args.env_var: ",".join(ids)})

    plugin = DevicePlugin(
        args.resource,
        [d.device for d in inventory.values()],
        socket_dir=args.device_plugin_dir,
        socket_name=args.socket_name,
        get_preferred_allocation=preferred,
        allocate=allocate,
        watch_interval=args.poll_interval,
    )
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        log.info("received %s; stopping", signal.Signals(signum).name)
        stop.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        plugin.serve()
        emit_event({"event": "started", "resource": args.resource, "socket": str(plugin.socket_path),
                    "devices": sorted(inventory)}, args.output,
                   f"numalign plugin: serving {args.resource} ({len(inventory)} devices) at {plugin.socket_path}")
        try:
            plugin.register()
        except Exception as e:
            # The kubelet may not be up yet: the watcher registers as soon as kubelet.sock answers.
            log.warning("initial registration failed, will retry: %s", e)
        plugin.watch()
        while not stop.wait(args.poll_interval):
            if yaml_path is None:
                continue
            current = _mtime(yaml_path)
            if current == mtime:
                continue
            mtime = current
            try:
                fresh = {d.id: d for d in load()}
                plugin.update_devices(d.device for d in fresh.values())
            except Exception as e:
                log.error("ignoring changed device list %s: %s", yaml_path, e)
                continue
            with lock:
                inventory = fresh
            emit_event({"event": "reloaded", "resource": args.resource, "devices": sorted(fresh)}, args.output,
                       f"numalign plugin: device list reloaded: {len(fresh)} devices")
    finally:
        plugin.stop()
        for s, h in old.items():
            signal.signal(s, h)
    emit_event({"event": "stopped", "resource": args.resource}, args.output,
               f"numalign plugin: {args.resource} stopped")
    return 0


def _mtime(path: Path | None) -> int | None:
    if path is None:
        return None
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None
