"""The pod book's vocabulary: the events it takes and the effects it returns (numalign.agent.book).

The book makes no call, opens no file and starts no thread; the Agent turns what happens (a manifest
scan, a plugin's gRPC stream, a pool thread's answer) into events, and carries out the effects on the
Node, its pools and its sockets, feeding each outcome back as an event. Every effect and event about one
admission carries the serial of the PodEntry it was made for, so an outcome that arrives after the pod
was removed or replaced is dropped by the book.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from numalign.core.decision import DecisionRecord
from numalign.errors import PluginError
from numalign.k8s.pod import Pod
from numalign.kubelet.plan import Plan

# -- events (what happened) ------------------------------------------------------------------------


@dataclass(frozen=True)
class ManifestLoaded:
    """A manifest file appeared or changed; `pods` as its documents define them, in order."""

    path: str
    pods: Sequence[Pod]


@dataclass(frozen=True)
class ManifestInvalid:
    """A manifest file appeared or changed but could not be read; `error` says why."""

    path: str
    error: str


@dataclass(frozen=True)
class ManifestRemoved:
    path: str


@dataclass(frozen=True)
class PluginRegistered:
    """A device plugin connected for `resource` (its devices are not reported yet)."""

    resource: str


@dataclass(frozen=True)
class DevicesReported:
    """The plugin for `resource` answered ListAndWatch, and the device manager holds the answer."""

    resource: str


@dataclass(frozen=True)
class Admitted:
    """An Admit (or Complete) effect's decision, admitting or rejecting the pod."""

    uid: str
    serial: int
    record: DecisionRecord


@dataclass(frozen=True)
class AdmissionFailed:
    """An Admit effect raised: the pod is invalid here (a NumalignError), or a provider or plugin failed."""

    uid: str
    serial: int
    error: str


@dataclass(frozen=True)
class Reserved:
    """An Admit effect with `reserve` took the pod's resources; its plugins' Allocate calls are due."""

    uid: str
    serial: int
    reservation: Plan


@dataclass(frozen=True)
class AllocateAnswered:
    """An Allocate effect's calls are made: one response per call, up to the first error."""

    uid: str
    serial: int
    reservation: Plan
    responses: Sequence[Any]
    error: PluginError | None


@dataclass(frozen=True)
class ReservationLost:
    """A Complete effect found its reservation gone: the state was read again meanwhile."""

    uid: str
    serial: int


@dataclass(frozen=True)
class ContainersStarted:
    """A Start effect's outcome: the error of each container that failed, none when all started."""

    uid: str
    serial: int
    errors: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StartCrashed:
    """A Start effect raised something other than a container's own failure (a bug, a failed save)."""

    uid: str
    serial: int
    error: str


@dataclass(frozen=True)
class Released:
    """A Release effect went through (`removed` False: the node no longer held the pod anyway)."""

    uid: str
    removed: bool


@dataclass(frozen=True)
class ReleaseFailed:
    """A Release effect could not write the removal: the pod still holds its resources."""

    uid: str
    error: str
    retry: bool


@dataclass(frozen=True)
class Resumed:
    """The agent started and made its first manifest scan: restored pods whose containers had not
    all started are started again."""


@dataclass(frozen=True)
class Tick:
    """The periodic reconcile tick: removals that could not be written are tried again."""


Event = (ManifestLoaded | ManifestInvalid | ManifestRemoved | PluginRegistered | DevicesReported | Admitted
         | AdmissionFailed | Reserved | AllocateAnswered | ReservationLost | ContainersStarted | StartCrashed
         | Released | ReleaseFailed | Resumed | Tick)


# -- effects (what the agent is to do) -------------------------------------------------------------


@dataclass(frozen=True)
class Admit:
    """Run the kubelet's admission for `pod` (Node.admit), or with `reserve` decide and take its
    resources leaving the plugins' Allocate calls for later (Node.reserve)."""

    pod: Pod
    serial: int
    reserve: bool = False


@dataclass(frozen=True)
class Allocate:
    """Make a reservation's device-plugin Allocate calls off the agent's lock, then report them."""

    reservation: Plan
    serial: int


@dataclass(frozen=True)
class Complete:
    """Settle a reservation with its calls' outcome (Node.complete)."""

    reservation: Plan
    serial: int
    responses: Sequence[Any]
    error: PluginError | None


@dataclass(frozen=True)
class Start:
    """Start an admitted pod's containers (PreStartContainer, run options), after `delay` seconds."""

    uid: str
    serial: int
    delay: float = 0.0


@dataclass(frozen=True)
class Release:
    """Release the pod `uid` holds, reserved or admitted (Node.cancel, Node.remove); `retry` for a
    removal that failed to be written before. `key` names the pod in the log ("" when unknown)."""

    uid: str
    key: str = ""
    retry: bool = False


@dataclass(frozen=True)
class Fault:
    """Something the agent survived: counted by kind, logged, shown in the status file and /metrics."""

    kind: str
    message: str


Effect = Admit | Allocate | Complete | Start | Release | Fault
