"""What `numalign simulate` was asked, read from its flags once (SimulateRequest.from_args), so the
command and what it calls see one typed value instead of the argparse namespace."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from numalign.cli.options.clusterargs import ClusterSource, WorkloadSource
from numalign.errors import InvalidInputError


@dataclass(frozen=True)
class SimulateRequest:
    """The cluster and workload, the sweep (a --sweep file, or the schedulers, their scoring and the axes of
    the command line keyed by sweep-file names), how to run it and what to print."""

    cluster: ClusterSource
    workload: WorkloadSource
    sweep: Path | None = None
    schedulers: tuple[str, ...] = ()
    scoring: Mapping[str, str] = field(default_factory=dict)
    axes: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    kubelet_versions: tuple[str, ...] = ()
    max_retries: int = 3
    jobs: int = 0
    dask: str | None = None
    output: str = "text"
    report: Path | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SimulateRequest:
        """Every flag checked here, before anything is loaded: one line for the first that is wrong."""
        from numalign.cli.options.versionargs import preview_sets
        from numalign.cluster.sweep import AXES, PREVIEW_AXIS, VERSION_AXIS

        if args.max_retries < 0:
            raise InvalidInputError(f"--max-retries {args.max_retries}: expected a whole number >= 0")
        axis_flags = (args.policies, args.scopes, args.tm_options, args.cpu_policies, args.cpu_options,
                      args.memory_policies)
        if args.sweep is not None and (any(axis_flags) or args.scheduler or args.kubelet_versions or args.previews
                                       or args.preview_axis):
            raise InvalidInputError("--sweep and axis flags (--scheduler, --policy, --scope, ...) both given; "
                                    "expected one of them; put every axis in the sweep file")
        scoring: dict[str, str] = {}
        for item in args.scoring:
            name, sep, strategy = item.partition("=")
            if not sep:
                raise InvalidInputError(f"--scoring {item!r}: expected SCHEDULER=STRATEGY, e.g. exact=LeastNUMANodes")
            scoring[name] = strategy
        values = [*axis_flags, args.kubelet_versions, [] if args.sweep is not None else preview_sets(args)]
        axes = {k: tuple(v) for k, v in zip([*AXES, VERSION_AXIS, PREVIEW_AXIS], values, strict=True)}
        return cls(ClusterSource.from_args(args), WorkloadSource.from_args(args), args.sweep,
                   tuple(args.scheduler or ()), scoring, axes, tuple(args.kubelet_versions), args.max_retries,
                   args.jobs, args.dask, args.output, args.report)
