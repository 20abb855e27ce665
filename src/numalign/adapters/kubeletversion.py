"""Where a node's kubelet version comes from, outside the command line: the text a kubelet or the API
server reports (`kubelet --version`, a Node's status.nodeInfo.kubeletVersion, a snapshot, a state
directory's node record), read into the version numalign models (numalign.kubelet.versions).

Reported versions carry more than X.Y.Z: a `v`, a pre-release (`-rc.1`), a distribution's build
suffix (`-eks-4f7ae1e`, `+k3s1`, `-gke.1200`). The kubelet's decisions are those of its X.Y.Z, so the
suffix is kept for notes but not used. Precedence, in one place (`choose`): --kubelet-version, then
what the input says, then numalign's default; a flag that disagrees with the input gets a note.

A patch newer than the newest numalign has checked (a node reporting v1.37.5) is decided as that newest
one; `resolve_noted` says so on stderr, once per version a process meets, however many nodes report it.
"""

from __future__ import annotations

import logging
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from numalign.errors import InvalidInputError
from numalign.k8s.version import DEFAULT, KubeletVersion, resolve

# "Kubernetes v1.36.2", "v1.36.2-eks-4f7ae1e", "1.36", "v1.37.0-rc.1+k3s1" (ASCII digits only)
_REPORTED = re.compile(r"^(?:Kubernetes\s+)?v?(?P<core>[0-9]+\.[0-9]+(?:\.[0-9]+)?)(?P<suffix>[-+][0-9A-Za-z.+_-]*)?$",
                       re.ASCII)
_LOG = logging.getLogger("numalign.version")
_NOTED: set[str] = set()
_VERSION_TIMEOUT_S = 10.0
_OUTPUT_LIMIT = 4096


def note_once(text: str) -> None:
    """One stderr warning per distinct text in this process (a dump of 1,000 v1.37.5 nodes says it once)."""
    if text not in _NOTED:
        _NOTED.add(text)
        _LOG.warning("%s", text)


def resolve_noted(text: str | None, where: str = "--kubelet-version") -> KubeletVersion:
    """k8s.version.resolve, saying on stderr (once) when a newer patch is decided as the newest checked one."""
    version = resolve(text, where)
    note = version.newer_patch_note()
    if note is not None:
        note_once(note)
    return version


@dataclass(frozen=True)
class ReportedVersion:
    """A version some input states, before it is checked against what numalign models."""

    text: str  # as reported, e.g. "v1.36.2-eks-4f7ae1e"
    where: str  # which input said it, for notes and errors

    @property
    def core(self) -> str:
        """X.Y.Z (or X.Y) without the `v` and any suffix."""
        m = _REPORTED.match(self.text.strip())
        if m is None:
            raise InvalidInputError(f"{self.where}: kubelet version {self.text!r} is not a version; expected "
                                    "vX.Y.Z as `kubelet --version` reports it (e.g. v1.36.2); give "
                                    "--kubelet-version X.Y[.Z] to decide with another")
        return m.group("core")

    @property
    def spec(self) -> str:
        """The text without `Kubernetes `: what KubeletVersion.parse reads (the suffix names a preview)."""
        return self.text.strip().removeprefix("Kubernetes").strip()

    def resolve(self, noted: bool = True) -> KubeletVersion:
        """The modelled version, or one line naming this input, the supported range and the fix.
        `noted`: a newer patch decided as the newest checked one is said on stderr (else the caller says it)."""
        self.core  # noqa: B018  # one line for a text that is not a version at all
        try:
            # the whole text, not only core: `v1.38.0-beta.0` names the preview, `v1.38.0` does not
            return (resolve_noted if noted else resolve)(self.spec, self.where)
        except InvalidInputError as e:
            raise InvalidInputError(f"{e} (the version {self.where} records is {self.text}; give "
                                    "--kubelet-version X.Y[.Z] to decide as a supported kubelet)") from None


def parse_reported(text: str, where: str) -> ReportedVersion:
    """A reported version text, checked for shape only (resolve() checks that it is supported)."""
    rv = ReportedVersion(text.strip(), where)
    rv.core  # noqa: B018  # raises on a text that is not a version at all
    return rv


def from_node_object(node: Mapping[str, Any], where: str) -> ReportedVersion | None:
    """status.nodeInfo.kubeletVersion of a Node object (None when the object has none)."""
    info = (node.get("status") or {}).get("nodeInfo") if isinstance(node.get("status"), Mapping) else None
    text = info.get("kubeletVersion") if isinstance(info, Mapping) else None
    if not isinstance(text, str) or not text.strip():
        return None
    return parse_reported(text, f"{where}: status.nodeInfo.kubeletVersion")


def from_kubelet_binary(executable: Path, where: str | None = None) -> ReportedVersion | None:
    """`EXECUTABLE --version` ("Kubernetes v1.36.2"); None when it cannot be run or says something else."""
    try:
        done = subprocess.run([str(executable), "--version"], capture_output=True, timeout=_VERSION_TIMEOUT_S,
                              check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    out = done.stdout[:_OUTPUT_LIMIT].decode("utf-8", errors="replace").strip()
    if done.returncode != 0 or _REPORTED.match(out) is None:
        return None
    return ReportedVersion(out.removeprefix("Kubernetes").strip(), where or f"`{executable} --version`")


def from_kubectl(node_name: str) -> ReportedVersion | None:
    """The Node object's kubeletVersion through `kubectl get node NAME -o json`, when kubectl is installed
    and can reach the API server; None otherwise (a snapshot then notes the version as missing)."""
    import json

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None
    try:
        done = subprocess.run([kubectl, "get", "node", node_name, "-o", "json"], capture_output=True,
                              timeout=_VERSION_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL)
        obj = json.loads(done.stdout[: 4 << 20]) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    if not isinstance(obj, dict):
        return None
    try:
        return from_node_object(obj, f"`kubectl get node {node_name}`")
    except InvalidInputError:
        return None


def choose(flag: str | None, found: ReportedVersion | None, notes: list[str] | None = None) -> KubeletVersion:
    """The version to decide with: --kubelet-version, else what the input says, else the default.
    A flag that disagrees with the input wins, with a note saying so."""
    if flag is not None:
        chosen = resolve_noted(flag, "--kubelet-version")
        if found is not None and notes is not None:
            try:
                said: KubeletVersion | str = resolve(found.spec, found.where)
            except InvalidInputError:
                said = found.text
            if said != chosen:
                notes.append(f"kubelet version: {chosen} from --kubelet-version, although {found.where} says "
                             f"{found.text}")
        return chosen
    if found is not None:
        chosen = found.resolve()
        if notes is not None:
            notes.append(f"kubelet version: {chosen}, as {found.where} says ({found.text})")
        return chosen
    return DEFAULT
