"""The eviction manager's admit handler (pkg/kubelet/eviction/eviction_manager.go Admit), the first of
the kubelet's admit handlers.

The eviction manager raises node conditions from observed pressure (memory.available, nodefs,
imagefs, pid.available against the eviction thresholds). numalign observes no usage, so the user
states the conditions (`numalign admit --node-condition MemoryPressure`). With none, every pod passes.
With MemoryPressure alone, only BestEffort pods are rejected; with any other condition (DiskPressure,
PIDPressure), every pod is. Reason "Evicted", message "The node had condition: [MemoryPressure]. ".

Not modelled (pods carry neither): critical pods (static pods, priority >= 2000000000), which pass
under any pressure, and BestEffort pods tolerating node.kubernetes.io/memory-pressure:NoSchedule.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from typing import Final

from numalign.core.decision import AdmitResult
from numalign.errors import InvalidInputError
from numalign.k8s.pod import Pod
from numalign.k8s.qos import QOSClass, get_pod_qos

EVICTED: Final = "Evicted"


class NodeCondition(StrEnum):
    """The pressure conditions the eviction manager sets (v1.NodeConditionType)."""

    MEMORY_PRESSURE = "MemoryPressure"
    DISK_PRESSURE = "DiskPressure"
    PID_PRESSURE = "PIDPressure"

    @classmethod
    def parse(cls, text: str, where: str = "--node-condition") -> NodeCondition:
        for c in cls:
            if c.value.lower() == text.strip().lower():
                return c
        raise InvalidInputError(
            f"{where}: unknown node condition {text!r}; expected one of {', '.join(c.value for c in cls)}"
        )


def eviction_admit(pod: Pod, conditions: Sequence[NodeCondition]) -> AdmitResult:
    if not conditions:
        return AdmitResult.admitted()
    if list(conditions) == [NodeCondition.MEMORY_PRESSURE] and get_pod_qos(pod) != QOSClass.BEST_EFFORT:
        return AdmitResult.admitted()
    # Go's %v of a []NodeConditionType: "[MemoryPressure DiskPressure]".
    return AdmitResult(False, EVICTED, f"The node had condition: [{' '.join(c.value for c in conditions)}]. ")
