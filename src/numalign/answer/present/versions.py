"""The kubelet version and previews a document was decided at, as every command's output names them."""

from __future__ import annotations

from typing import Any

from numalign.k8s.previews import Previews
from numalign.k8s.version import KubeletVersion


def version_fields(version: KubeletVersion, previews: Previews) -> dict[str, Any]:
    """What JSON/YAML output carries about them: kubeletVersion, and previews when any is on."""
    out: dict[str, Any] = {"kubeletVersion": str(version)}
    if previews:
        out["previews"] = previews.to_dict()
    return out


def version_text(version: KubeletVersion, previews: Previews) -> str:
    """The text header's words: "kubelet 1.37.1" (and "; preview: ..." for each preview on)."""
    return "; ".join([f"kubelet {version}", *previews.labels()])
