"""A pod named on the command line (`remove POD`, `resize POD`): a UID, namespace/name, or a name in
the default namespace."""

from __future__ import annotations

from typing import TYPE_CHECKING

from numalign.errors import InvalidInputError

if TYPE_CHECKING:
    from numalign.k8s.pod import Pod
    from numalign.kubelet.node import Node


def find_pod(node: Node, ref: str, command: str, where: object) -> Pod:
    """The pod `ref` names on `node`; else one line naming the command, the place searched (`where`)
    and some of the pods there."""
    if ref in node.pods:
        return node.pods[ref]
    key = ref if "/" in ref else f"default/{ref}"
    for pod in node.pods.values():
        if pod.key == key:
            return pod
    known = ", ".join(sorted(p.key for p in node.pods.values())[:8]) or "none"
    raise InvalidInputError(f"{command} {ref}: no pod {key} (nor UID {ref}) in {where}; expected one of its pods "
                            f"({known}); `numalign pods --state-dir` lists them")
