"""The process each `numalign run` pod runs as, kept beside the node's state.

A run's pod is a pod of the node like any other; what makes it a run's is the process it runs as (pid
and start time, the pair that tells a reused pid apart; its command, container, cgroup, and the
allocation `numalign pods` shows beside it). The kubelet's Node knows pods and allocations only, so
these records live beside its state: the state directory reads them with every load and writes them
with every commit (an entry's `process` in numalign_pods.json, adapters/statedir), so a record changes
in the same transaction as its pod. This module is what reads them for what they mean.

A run killed with -9 never releases its pod. Every load of the directory asks `ended` (the Node's
`ended_pods`, under the directory's lock) which pods' processes ended, and the Node releases them in
that same load, as the kubelet's HandlePodCleanups releases pods that terminated.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from numalign.k8s.pod import Pod
from numalign.run.leftovers import process_alive, process_alive_reclaiming

if TYPE_CHECKING:  # annotations only: `admit` without --state-dir loads no state-directory code
    from numalign.adapters.statedir.directory import StateDirectory
    from numalign.kubelet.node import Node

log = logging.getLogger("numalign.run")

Alive = Callable[[Mapping[str, Any]], bool]


class RunProcesses:
    """The run processes of one state directory, by pod uid. `alive` judges a record's process (None:
    every one counts as alive, nothing is released); `reclaimed` lists the pods the last load released,
    with their records."""

    def __init__(self, store: StateDirectory, alive: Alive | None = None) -> None:
        self.store = store
        self.alive = alive
        self.reclaimed: list[tuple[Pod, Mapping[str, Any]]] = []

    @property
    def records(self) -> dict[str, Mapping[str, Any]]:
        """The records as loaded and changed since; a change is written with the next commit (a record
        whose pod is not admitted is dropped then)."""
        return self.store.processes

    def of(self, pods: Mapping[str, Pod]) -> dict[str, Mapping[str, Any]]:
        """The records of the pods the node holds."""
        return {uid: r for uid, r in self.records.items() if uid in pods}

    def ended(self, pods: Mapping[str, Pod]) -> list[str]:
        """The node's `ended_pods`: the pods whose run process ended, which the node releases."""
        self.reclaimed = []
        return self._ended(pods)

    def _ended(self, pods: Mapping[str, Pod]) -> list[str]:
        uids = []
        for uid, record in self.of(pods).items():
            if self.alive is not None and not self.alive(record):
                log.info("state %s: released %s: its numalign run process %s ended without releasing it",
                         self.store.name, pods[uid].key, record.get("pid"))
                self.reclaimed.append((pods[uid], record))
                uids.append(uid)
        return uids

    def release_ended(self, node: Node) -> bool:
        """Release, in a transaction, the pods of runs that ended since the last load (a long-lived agent
        asks on its tick); True when there were any."""
        if self.alive is None or all(self.alive(r) for r in self.of(node.pods).values()):
            return False
        with node.transaction():
            ended = self._ended(node.pods)  # the records as the transaction sees them (it may read again)
            for uid in ended:
                node.remove(uid)  # joins the transaction
        return bool(ended)


def ended_runs(store: StateDirectory | None, *, writing: bool) -> Callable[[Mapping[str, Pod]], list[str]] | None:
    """The Node's `ended_pods` for a command's --state-dir (None: no directory, no runs). `writing`: the
    command writes the directory, so an ended run's leftovers are ended and its pod released for good
    (process_alive_reclaiming); a reader (--dry-run, `pods`, `nrt`) only counts it as holding nothing."""
    if store is None:
        return None
    return RunProcesses(store, process_alive_reclaiming if writing else process_alive).ended


def refuse_a_running_run(what: str, record: Mapping[str, Any] | None, fix: str = "") -> None:
    """`what` (e.g. "remove default/a") would free the pod of a `numalign run` whose process `record` says
    still runs: refused in one line. A run's pod is released when its process ends (or by the next command
    after a kill -9); freeing it before would give CPUs the process still runs pinned on to the next pod,
    and the kubelet never frees a deleted pod's CPUs before its containers stopped. `fix`: another way out
    than ending the process, if the command has one."""
    if record is None:
        return
    from numalign.errors import InvalidInputError, NumalignError
    from numalign.run.leftovers import holds
    from numalign.run.process import ProcessRef, describe

    try:
        ref = ProcessRef.from_dict(record, "numalign_pods.json")
    except NumalignError:
        return  # not a record numalign run wrote: the pod is freed as asked
    if holds(record):
        raise InvalidInputError(
            f"{what}: it is the pod of a running `numalign run` (pid {ref.pid}: {describe(ref.command)}), "
            "which still runs on its CPUs; expected a pod no process holds; fix: end that process (kill "
            f"{ref.pid}): its pod is released when it ends{fix}")
