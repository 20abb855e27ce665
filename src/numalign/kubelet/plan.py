"""An admission decided and not yet settled: what Node.decide hands back and Node.commit takes.

The one path every admission takes (numalign.kubelet.podadmission): decide takes the pod's resources
and builds its decision record; the device plugins' Allocate calls the decision needs (the device
manager decides them without making them) are made next (in `admit`'s transaction, or with the lock
released by the agent and `numalign run`), and commit settles the plan with their answers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from numalign.core.decision import DecisionRecord
from numalign.errors import PluginError
from numalign.k8s.pod import Pod
from numalign.kubelet.devicemanager.manager import AllocateCall


@dataclass(frozen=True)
class Plan:
    """An admission decided (Node.decide): its decision record, what the pod takes, and the device
    plugins' Allocate calls still to make, in the kubelet's order.

    Admitted with calls left, the pod holds everything it was given (other admissions see it taken) but
    is not recorded until Node.commit. Rejected, it holds nothing, and the calls are those the kubelet
    made before the rejection: a failing one is the answer. Without calls the plan is settled."""

    pod: Pod
    record: DecisionRecord
    calls: tuple[AllocateCall, ...] = ()
    reloads: int = 0  # the node's reload count at the decision: a reload since drops the plan
    # whether the Topology Manager's handler admitted the pod (a failing call is then its admission error)
    topology_admitted: bool = False

    @property
    def settled(self) -> bool:
        return not self.calls

    def make_calls(
        self,
        stopped: Callable[[], bool] = lambda: False,
        unexpected: Callable[[Exception], None] | None = None,
    ) -> tuple[list[Any], str | None]:
        """The Allocate calls in the kubelet's order, up to the first failure, whose text is the answer
        (Node.commit). `unexpected`, when given, sees any other exception, which then fails the pod too;
        without it such an exception propagates."""
        responses: list[Any] = []
        for call in self.calls:
            if stopped():
                break
            try:
                responses.append(call.endpoint.allocate(list(call.device_ids)))
            except PluginError as e:
                return responses, str(e)
            except Exception as e:
                if unexpected is None:
                    raise
                unexpected(e)
                return responses, str(e)
        return responses, None
