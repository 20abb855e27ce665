"""`numalign run`'s command line read once, at the top, into one typed request (RunRequest): COMMAND,
the state directory (checked), the kubelet configuration (--config and flags over the built-in run
configuration), the kubelet version and previews (the directory's recorded version first), the pod's
flags and how the run is placed and told. Below it nothing reads the argparse namespace."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from numalign.cli.options.runargs import PodFlags

if TYPE_CHECKING:
    from numalign.k8s.kubeletconfig import KubeletConfig
    from numalign.k8s.previews import Previews
    from numalign.k8s.version import KubeletVersion


@dataclass(frozen=True)
class RunRequest:
    command: tuple[str, ...]
    state_dir: Path
    config: KubeletConfig
    config_path: str  # --config, else the built-in run configuration's file (numalign_node.json names it)
    flags: tuple[tuple[str, str], ...]  # the kubelet flags, in command-line order
    kubelet_version: KubeletVersion
    previews: Previews
    version_notes: tuple[str, ...]  # how the version was chosen (said with -v 1)
    machine: str | None  # --machine, else this host
    devices: tuple[str, ...]  # --devices RESOURCE=FILE
    device_env: tuple[str, ...]  # --device-env RESOURCE=NAME
    pod: PodFlags
    cgroup_parent: Path | None
    no_cgroup: bool
    quiet: bool
    detail: bool  # -v 1 or more: numalign's own bookkeeping is said too
    output: str

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunRequest:
        """In the order run always settled them: COMMAND, the state directory, the configuration, the
        version; the first that is wrong is one line (InvalidInputError)."""
        from numalign.adapters.kubeletversion import choose
        from numalign.adapters.statedir.layout import NODE_RECORD_FILE
        from numalign.cli.options.kubeletflags import FLAGS_DEST
        from numalign.cli.options.noderecord import recorded_version
        from numalign.cli.options.runargs import RUN_CONFIG, check_state_dir, default_state_dir, run_config
        from numalign.cli.options.versionargs import node_previews
        from numalign.errors import InvalidInputError
        from numalign.paths import DATA_DIR

        command = tuple(getattr(args, "command_argv", None) or ())
        if not command:
            raise InvalidInputError("no COMMAND; expected `numalign run [requests] -- COMMAND [ARGS...]`; "
                                    "add -- and the command to run")
        state_dir = args.state_dir or default_state_dir()
        check_state_dir(state_dir)
        config = run_config(args)
        record = state_dir / NODE_RECORD_FILE  # the version earlier runs or admit decided the directory with
        recorded = recorded_version(record) if record.is_file() else None
        notes: list[str] = []
        version = choose(getattr(args, "kubelet_version", None), recorded, notes)
        previews = node_previews(args, notes)
        return cls(command, state_dir, config, args.kubelet_config or str(DATA_DIR / RUN_CONFIG),
                   tuple(getattr(args, FLAGS_DEST, None) or ()), version, previews, tuple(notes), args.machine,
                   tuple(args.devices), tuple(args.device_env), PodFlags.from_args(args), args.cgroup_parent,
                   args.no_cgroup, args.quiet, (getattr(args, "verbosity", 0) or 0) >= 1, args.output)
