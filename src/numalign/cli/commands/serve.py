"""`numalign serve`: the node agent. Device plugins register with it, static-pod manifests are
admitted by it, PodResources clients read its allocations, all over the kubelet's own sockets.

Runs until SIGTERM or SIGINT, then stops its servers and saves the state. What it prints on stdout is
its status: one line once it serves (where, what) and one when it has stopped, in the -o format (text,
a JSON line each, or a YAML document each); everything else is logging on stderr (-v, --log-format).
"""

from __future__ import annotations

import argparse
import logging
import signal
import socket
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from numalign.cli.commands.summaries import SUMMARIES

if TYPE_CHECKING:
    from numalign.agent import Agent
    from numalign.machine.topology import Machine

LONG_RUNNING = True  # its info lines (start-up, pods admitted, plugins registered) show at -v 0


def register(sub: Any) -> None:
    from numalign.cli.options.kubeletflags import add_kubelet_flags
    from numalign.paths import (
        DEFAULT_DEVICE_PLUGIN_DIR,
        DEFAULT_POD_RESOURCES_SOCKET,
        DEFAULT_STATE_DIR,
        ENDPOINT_STOP_GRACE_PERIOD,
    )

    p: argparse.ArgumentParser = sub.add_parser(
        "serve",
        help=SUMMARIES["serve"],
        description="Run numalign as the kubelet's resource-management side: serve device-plugin Registration "
        "and PodResources v1 on unix sockets, admit the pods of a manifest directory, keep the kubelet's "
        "state files. Stops cleanly on SIGTERM/SIGINT.",
    )
    p.add_argument("--machine", metavar="FILE|NAME", help="machine file, sysfs dump, cadvisor JSON or a built-in "
                   "name (default: this host, read from /sys as the kubelet does; `numalign discover` shows it)")
    p.add_argument("--device-plugin-dir", metavar="DIR", type=Path, default=DEFAULT_DEVICE_PLUGIN_DIR,
                   help="where kubelet.sock is served and plugins put their sockets "
                   f"(default {DEFAULT_DEVICE_PLUGIN_DIR})")
    p.add_argument("--pod-resources-socket", metavar="PATH", type=Path, default=DEFAULT_POD_RESOURCES_SOCKET,
                   help=f"PodResources v1 socket (default {DEFAULT_POD_RESOURCES_SOCKET})")
    p.add_argument("--manifests", metavar="DIR", type=Path,
                   help="static-pod manifest directory to watch (*.yaml, *.yml, *.json; default: none)")
    p.add_argument("--state-dir", metavar="DIR", type=Path, default=DEFAULT_STATE_DIR,
                   help=f"kubelet state files and numalign_status.json (default {DEFAULT_STATE_DIR})")
    p.add_argument("--metrics-address", metavar="HOST:PORT",
                   help="serve Prometheus metrics on http://HOST:PORT/metrics (default: off, no TCP listener)")
    p.add_argument("--socket-group", metavar="GROUP",
                   help="make the sockets 0660 owned by this group (default: 0600)")
    p.add_argument("--endpoint-grace-period", metavar="SECONDS", type=float, default=ENDPOINT_STOP_GRACE_PERIOD,
                   help="drop a vanished plugin's resource after this long (kubelet: 300)")
    p.add_argument("--wait-for-device-plugins", action="store_true",
                   help="NOT the kubelet's behaviour (opt-in): hold a pod pending until every device plugin for "
                   "its extended resources is connected and has reported its devices. By default a pod is "
                   "admitted at once, as the kubelet admits it: without devices no plugin has reported yet, "
                   "rejected if its plugin went away or has too few")
    p.add_argument("--no-wait-for-device-plugins", dest="wait_for_device_plugins", action="store_false",
                   help=argparse.SUPPRESS)  # the default since pods no longer wait; kept for old scripts
    p.add_argument("--parallel-allocate", action="store_true",
                   help="NOT the kubelet's behaviour (opt-in): make device plugins' Allocate calls without holding "
                   "up other pods' admission, so a hung plugin delays only its own pods (their resources stay "
                   "taken meanwhile). By default pods are admitted one at a time, as the kubelet admits them: a "
                   "plugin hung in Allocate holds up every later admission until its deadline")
    p.add_argument("--keep-static-pod-names", action="store_true",
                   help="NOT the kubelet's behaviour (opt-in): keep static pods' manifest names. By default they "
                   "are named <name>-<node name> as the kubelet names them (and their mirror pods)")
    p.add_argument("--nrt-file", metavar="FILE", type=Path,
                   help="keep this node's NodeResourceTopology (v1alpha2, JSON) in FILE, replaced atomically after "
                   "every change, as the NFD topology-updater would publish it (see `numalign nrt`)")
    p.add_argument("--hostname-override", "--node-name", dest="node_name", metavar="NAME",
                   help="the node's name, as the kubelet's flag: suffix of static pods' names and metadata.name of "
                   "the --nrt-file object (default: this host's name, lower-cased)")
    p.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                   help="deprecated: use -v N (-v 4 for DEBUG)")
    from numalign.cli.output import add_output_arg

    add_output_arg(p, help="format of the status lines on stdout: one when serving starts (machine, node, sockets, "
                   "state, manifests, metrics), one when it has stopped (default text)")
    add_kubelet_flags(p)
    from numalign.cli.options.versionargs import add_version_args

    add_version_args(p)


def run(args: argparse.Namespace) -> int:
    from numalign.adapters.sysfs import load_machine
    from numalign.agent import Agent, AgentOptions
    from numalign.cli.options.kubeletflags import config_from_args
    from numalign.cli.options.paths import check_directory, check_parent_directory
    from numalign.cli.output import emit_event
    from numalign.errors import InvalidInputError

    if args.endpoint_grace_period < 0:
        raise InvalidInputError(f"--endpoint-grace-period {args.endpoint_grace_period:g}: expected seconds >= 0")
    # Before anything starts: the servers mkdir these paths only once they run.
    check_directory(args.device_plugin_dir, "--device-plugin-dir")
    check_directory(args.state_dir, "--state-dir")
    check_parent_directory(args.pod_resources_socket, "--pod-resources-socket")
    if args.nrt_file is not None:
        check_parent_directory(args.nrt_file, "--nrt-file")
    if args.manifests is not None:
        _check_manifests(args.manifests)
    config = config_from_args(args)
    from numalign.cli.options.versionargs import node_previews, node_version

    notes: list[str] = []
    version, previews = node_version(args, notes), node_previews(args, notes)
    for line in notes:
        logging.getLogger("numalign.serve").info("%s", line)
    agent = Agent(AgentOptions(
        machine=load_machine(args.machine) if args.machine else _this_host(),
        config=config,
        device_plugin_dir=args.device_plugin_dir,
        pod_resources_socket=args.pod_resources_socket,
        manifests=args.manifests,
        state_dir=args.state_dir,
        metrics_address=args.metrics_address,
        socket_group=args.socket_group,
        endpoint_grace_period=args.endpoint_grace_period,
        wait_for_device_plugins=args.wait_for_device_plugins,
        parallel_allocate=args.parallel_allocate,
        nrt_file=args.nrt_file,
        mirror_pod_names=not args.keep_static_pod_names,
        node_name=(args.node_name or socket.gethostname()).lower(),
        kubelet_version=version,
        previews=previews,
    ))
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        logging.getLogger("numalign.serve").info("got signal %d, shutting down", signum)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        agent.start()
        try:
            _started(agent, args.output)
            while not stop.wait(0.5):
                pass
        finally:
            agent.stop()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    emit_event({"event": "stopped"}, args.output, "numalign serve: stopped; state saved in "
               f"{args.state_dir}")
    return 0


def _started(agent: Agent, output: str) -> None:
    from numalign.cli.output import emit_event

    o = agent.options
    metrics = agent.metrics_server.url if agent.metrics_server is not None else None
    # docs/schemas/serve-event.schema.json: field names in the documents' camelCase
    event = {"event": "started", "machine": o.machine.name, "nodeName": o.node_name,
             "kubeletSocket": str(agent.registration.socket_path), "podResourcesSocket": str(o.pod_resources_socket),
             "stateDir": str(o.state_dir), "manifests": None if o.manifests is None else str(o.manifests),
             "metrics": metrics, "nrtFile": None if o.nrt_file is None else str(o.nrt_file)}
    emit_event(event, output, f"numalign serve: serving machine {o.machine.name} as node {o.node_name}; device "
               f"plugins register at {event['kubeletSocket']}; PodResources at {o.pod_resources_socket}; state in "
               f"{o.state_dir}; manifests {o.manifests or 'none'}; metrics {metrics or 'off'}")


def _this_host() -> Machine:
    """The machine the kubelet would manage here: this host, read from /sys as `numalign discover` does.

    Never a built-in example: serve writes the kubelet's state files (by default into
    /var/lib/kubelet), and state for a machine that is not this one would mislead every reader.
    """
    from numalign.adapters.sysfs import discover_sysfs
    from numalign.errors import DiscoveryError

    try:
        return discover_sysfs("/")
    except (DiscoveryError, OSError) as e:
        raise DiscoveryError(
            f"cannot read this host's topology from /sys ({e}); serve manages the machine it runs on, so "
            "it needs that; pass --machine FILE|NAME (a machine file, sysfs dump, cadvisor JSON or a built-in "
            "name such as dual-socket) to serve a described machine instead"
        ) from None


def _check_manifests(directory: Path) -> None:
    """A file is refused; a directory that does not exist yet is watched (as the kubelet's file source
    does), but said once, so a typo in the path does not look like an empty directory."""
    from numalign.errors import InvalidInputError

    if directory.is_dir():
        return
    if directory.exists():
        raise InvalidInputError(
            f"--manifests {directory}: is a file, not a directory; expected the static-pod manifest directory "
            "(every *.yaml, *.yml, *.json in it is a pod); pass the directory that holds the manifest"
        )
    logging.getLogger("numalign.serve").warning(
        "--manifests %s: the directory does not exist yet; it is watched, and pods put there once it is "
        "created are admitted (check the path if that is not what you meant)", directory,
    )
