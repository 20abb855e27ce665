"""`--kubelet-version` and `--preview`, shared by every command that builds a node (admit, pods, nrt,
remove, run, serve, replay) and, repeatable as axes, by simulate and capacity.

Which version a command decides with (adapters/kubeletversion.choose): the flag, else what its input
records (a snapshot's kubelet version, a state directory's numalign_node.json), else numalign's
default, the newest modelled patch of the current minor. Previews are never implied by a version.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from numalign.k8s.previews import Previews
    from numalign.k8s.version import KubeletVersion

VERSION_HELP = ("the kubelet version to decide as, X.Y (the newest patch numalign models of that minor) or "
                "X.Y.Z (docs/kubelet-versions.md lists the supported ones); default: what the input records "
                "(a --node snapshot, a --state-dir admit wrote), else the newest modelled version; the flag "
                "wins over the input, with a note when they disagree")
AXIS_HELP = ("kubelet version axis, X.Y or X.Y.Z (repeat for several, side by side); without it each pool keeps "
             "its own (cluster.yaml kubeletVersion, a nodes dump's status.nodeInfo.kubeletVersion)")


def add_version_args(p: argparse.ArgumentParser, *, axis: bool = False) -> None:
    from numalign.k8s.previews import preview_help

    g = p.add_argument_group("kubelet version and previews")
    if axis:
        g.add_argument("--kubelet-version", dest="kubelet_versions", action="append", default=[],
                       metavar="X.Y[.Z]", help=AXIS_HELP)
        g.add_argument("--preview", dest="previews", action="append", default=[], metavar="NAME[=VALUE]",
                       help=preview_help() + ". Several --preview values form one set; to compare with and "
                       "without, give --preview-axis SET (repeat; '' for none) instead")
        g.add_argument("--preview-axis", dest="preview_axis", action="append", default=[],
                       metavar="NAME=VALUE[;NAME=VALUE]", help="one set of previews per use, side by side ('' "
                       "for none: upstream's behaviour)")
    else:
        g.add_argument("--kubelet-version", metavar="X.Y[.Z]", help=VERSION_HELP)
        g.add_argument("--preview", dest="previews", action="append", default=[], metavar="NAME[=VALUE]",
                       help=preview_help())


def node_version(args: argparse.Namespace, notes: list[str]) -> KubeletVersion:
    """The version to decide with (see the module doc); notes say where it came from when not the flag."""
    from numalign.adapters.kubeletversion import choose

    found = None
    snap = getattr(args, "node_snapshot", None)
    if snap is not None:
        found = snap.kubelet_version()
    if found is None:
        found = getattr(args, "recorded_kubelet_version", None)
    return choose(getattr(args, "kubelet_version", None), found, notes)


def node_previews(args: argparse.Namespace, notes: list[str]) -> Previews:
    """The previews asked for; each one that is on adds a "preview: NAME=VALUE" note."""
    from numalign.k8s.previews import Previews

    previews = Previews.parse(getattr(args, "previews", None) or [])
    notes.extend(previews.labels())
    return previews


def version_fields(version: KubeletVersion, previews: Previews) -> dict[str, Any]:
    """What JSON/YAML output carries about them (answer/present/versions.py)."""
    from numalign.answer.present.versions import version_fields as fields

    return fields(version, previews)


def version_text(version: KubeletVersion, previews: Previews) -> str:
    """The text header's words: "kubelet 1.37.1" (and "; preview: ..." for each preview on)."""
    from numalign.answer.present.versions import version_text as text

    return text(version, previews)


def preview_sets(args: argparse.Namespace) -> list[str]:
    """The preview axis of simulate and capacity: each --preview-axis value, or the one set of --preview
    (none given: no axis, each pool keeps its own). Items of a set are joined by ';'."""
    from numalign.errors import InvalidInputError
    from numalign.k8s.previews import Previews

    if args.previews and args.preview_axis:
        raise InvalidInputError("--preview and --preview-axis both given; expected one: --preview NAME=VALUE for "
                                "one set of previews, or --preview-axis SET (repeat) to compare sets side by side")
    sets = list(args.preview_axis) if args.preview_axis else ([";".join(args.previews)] if args.previews else [])
    for s in sets:  # one line for a bad name now, before any run starts
        Previews.parse([p for p in s.split(";") if p.strip()], "--preview-axis" if args.preview_axis else "--preview")
    return sets
