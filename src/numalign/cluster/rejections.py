"""The kubelet's rejection messages in a simulation, kept bounded: one representative message per reason.

`simulate` counts kubelet rejections by reason (TopologyAffinityError, UnexpectedAdmissionError, ...);
the reason alone does not say why (UnexpectedAdmissionError is any Allocate failure). Keeping every
rejection's message would cost memory per pod (10,000 nodes x 200,000 pods), so the tally keeps counts
per (reason, message) for at most MESSAGES_PER_REASON distinct messages of a reason, each with the node
and pod that gave it first; rejections with a message past that cap are counted apart. The message
reported for a reason is its most frequent kept message (ties: the first seen): a cap reached means the
most frequent among the first MESSAGES_PER_REASON distinct ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

MESSAGES_PER_REASON: Final = 32
# A message is kept whole up to this many characters (the kubelet's are a line; a CPU list can be long).
MESSAGE_CHARS: Final = 2_000


@dataclass(frozen=True)
class RejectionExample:
    """One reason's representative message: `rejections` of the reason gave exactly it, `other` gave
    another message; `node` and `pod` gave it first."""

    message: str
    node: str
    pod: str
    rejections: int
    other: int

    def to_dict(self) -> dict[str, Any]:
        return {"message": self.message, "node": self.node, "pod": self.pod, "rejections": self.rejections,
                "otherMessages": self.other}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RejectionExample:
        return cls(d["message"], d["node"], d["pod"], d["rejections"], d["otherMessages"])


class RejectionTally:
    """Counts per (reason, message), bounded per reason; `examples()` gives each reason's example."""

    __slots__ = ("_kept", "_total")

    def __init__(self) -> None:
        # reason -> message -> [rejections, node, pod] (insertion order: first seen first)
        self._kept: dict[str, dict[str, list[Any]]] = {}
        self._total: dict[str, int] = {}

    def add(self, reason: str, message: str, node: str, pod: str) -> None:
        self._total[reason] = self._total.get(reason, 0) + 1
        messages = self._kept.setdefault(reason, {})
        message = message if len(message) <= MESSAGE_CHARS else message[:MESSAGE_CHARS] + "..."
        entry = messages.get(message)
        if entry is not None:
            entry[0] += 1
        elif len(messages) < MESSAGES_PER_REASON:
            messages[message] = [1, node, pod]

    def examples(self) -> dict[str, RejectionExample]:
        out: dict[str, RejectionExample] = {}
        for reason in sorted(self._kept):
            messages = self._kept[reason]
            best = max(messages, key=lambda m: messages[m][0])  # max keeps the first of equal counts
            n, node, pod = messages[best]
            out[reason] = RejectionExample(best, node, pod, n, self._total[reason] - n)
        return out
