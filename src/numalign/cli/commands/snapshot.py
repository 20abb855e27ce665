"""`numalign snapshot FILE`: collect a node (sysfs topology, kubelet config, state files, PodResources
answers) into one tarball that `--node FILE` reads on any machine."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from numalign.cli.commands.summaries import SUMMARIES
from numalign.paths import DEFAULT_DEVICE_PLUGIN_DIR, DEFAULT_POD_RESOURCES_SOCKET
from numalign.paths import DEFAULT_STATE_DIR as DEFAULT_STATE

# Where kubeadm (and most installers) write the kubelet's configuration file.
DEFAULT_CONFIG = DEFAULT_STATE / "config.yaml"
DEFAULT_SOCKET = DEFAULT_POD_RESOURCES_SOCKET


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "snapshot",
        help=SUMMARIES["snapshot"],
        description="Write FILE (a gzip tarball): the sysfs files numalign's discovery reads, the kubelet config, "
        "the state files (cpu_manager_state, memory_manager_state, device-plugins/kubelet_internal_checkpoint, "
        "numalign_pods.json) and, when the PodResources socket answers, its allocatable resources and pods. "
        "Then `numalign admit POD.yaml --node FILE` (and pods, nrt) asks about that node anywhere, read only. "
        "Missing files are noted, not errors. Reads need the kubelet's permissions (root on a node).",
    )
    p.add_argument("file", metavar="FILE", type=Path, help="the tarball to write (e.g. node.tgz)")
    p.add_argument("--sysfs-root", metavar="DIR", type=Path, default=Path("/"),
                   help="the directory holding sys/ and proc/ (default /; an extracted sysfs dump works too)")
    p.add_argument("--config", metavar="FILE", type=Path,
                   help="the kubelet's KubeletConfiguration file (default: the running kubelet's --config, else "
                   f"{DEFAULT_CONFIG})")
    p.add_argument("--state-dir", metavar="DIR", type=Path,
                   help="the kubelet's root directory holding its state files (default: the running kubelet's "
                   f"--root-dir, else {DEFAULT_STATE})")
    p.add_argument("--device-plugin-dir", metavar="DIR", type=Path,
                   help="where the device checkpoint is (default: STATE_DIR/device-plugins when it holds one, else "
                   "/var/lib/kubelet/device-plugins, the kubelet's fixed device-plugin directory whatever its "
                   "--root-dir)")
    p.add_argument("--proc-root", metavar="DIR", type=Path, default=Path("/proc"),
                   help="where to find the running kubelet's command line (default /proc; its resource-manager "
                   "flags are recorded and applied with --node, as they override the config file)")
    p.add_argument("--pod-resources-socket", metavar="PATH", type=Path, default=DEFAULT_SOCKET,
                   help=f"the PodResources socket to ask, if it answers (default {DEFAULT_SOCKET})")
    p.add_argument("--node-name", metavar="NAME", help="the node's name (default: the host name)")
    p.add_argument("--dra-objects", metavar="FILE", type=Path,
                   help="DRA: a `kubectl get resourceslices,deviceclasses,resourceclaims -A -o json` dump to keep in "
                   "the snapshot; `admit --node` reads its slices, classes and claims beside the pods")
    p.add_argument("--kubelet-version", metavar="X.Y[.Z]",
                   help="record this kubelet version instead of asking the running kubelet's binary "
                   "(`kubelet --version`) or, failing that, the Node object (`kubectl get node`)")
    from numalign.cli.output import add_output_arg

    add_output_arg(p, help="how to print what was collected (default text)")


def run(args: argparse.Namespace) -> int:
    from numalign.adapters.snapshot_collect import collect
    from numalign.adapters.statedir.layout import DEVICE_PLUGINS_DIR
    from numalign.errors import InvalidInputError

    if args.file.is_dir():
        raise InvalidInputError(f"{args.file} is a directory; expected the path of the tarball to write, e.g. node.tgz")
    if not args.file.parent.is_dir():
        raise InvalidInputError(f"{args.file}: directory {args.file.parent} does not exist; create it or write "
                                "the snapshot elsewhere")
    from numalign.adapters.kubelet_process import find_kubelet

    kubelet = find_kubelet(args.proc_root)
    config = args.config or Path(kubelet.config if kubelet and kubelet.config else DEFAULT_CONFIG)
    state_dir = args.state_dir or Path(kubelet.root_dir if kubelet and kubelet.root_dir else DEFAULT_STATE)
    plugin_dir = args.device_plugin_dir
    if plugin_dir is None and not (state_dir / DEVICE_PLUGINS_DIR).is_dir():
        plugin_dir = DEFAULT_DEVICE_PLUGIN_DIR
    from numalign.adapters.kubeletversion import parse_reported
    from numalign.adapters.snapshot_collect import snapshot_version
    from numalign.cli.options.clusterargs import Progress

    given = None
    if args.kubelet_version is not None:
        given = parse_reported(args.kubelet_version, "--kubelet-version")
        given.resolve()  # one line now for a version numalign does not model, not at --node time
    progress = Progress(f"snapshot {args.file}")  # drawn only when stderr is a terminal
    try:
        import os

        live = args.sysfs_root.resolve() == Path("/")
        node_name = args.node_name or (os.uname().nodename if live else None)
        progress.note("asking the kubelet its version")
        version = snapshot_version(kubelet, node_name, args.proc_root, given)
        result = collect(args.file, sysfs_root=args.sysfs_root, config=config, state_dir=state_dir,
                         pod_resources_socket=args.pod_resources_socket, node_name=args.node_name,
                         dra_objects=args.dra_objects,
                         kubelet=kubelet, device_plugin_dir=plugin_dir, progress=progress.note,
                         kubelet_version=version)
    finally:
        progress.close()
    if args.output != "text":
        from numalign.cli.output import emit

        # docs/schemas/snapshot.schema.json: the summary first, keys in the documents' camelCase
        emit({"schemaVersion": 1, "summary": {"file": str(result.path), "nodeName": result.node_name,
                                              "included": len(result.included), "missing": len(result.missing)},
              **result.to_dict()}, args.output)
    else:
        print(f"wrote {result.path}: node {result.node_name}")
        for item in result.included:
            print(f"  included: {item}")
        for item in result.missing:
            print(f"  missing:  {item}")
        print(f"next: numalign admit POD.yaml --node {result.path}")
    return 0
