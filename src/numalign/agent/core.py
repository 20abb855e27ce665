"""What every part of the agent shares: the Node and the pod book, the ONE lock every touch of them
holds (the kubelet serialises its managers the same way; the DeviceManager is not thread-safe), the
stop flag, the fault counters, and what is published after each change (PodResources, CPU gauges, the
NodeResourceTopology file, the status file).

Nothing a plugin or a manifest does may take the agent down: every callback and loop iteration
catches, logs and counts its failure (`faults`, shown in the status file and as
numalign_agent_faults_total on /metrics).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter, deque
from pathlib import Path
from typing import Any

from numalign import metrics as m
from numalign.adapters.grpc.podresources import SnapshotPodResourcesSource
from numalign.adapters.statedir.files import write_atomic
from numalign.agent.book import PodBook
from numalign.agent.options import AgentOptions
from numalign.agent.snapshot import allocatable_view, inactive_view, pods_view
from numalign.agent.status import machine_document, plugin_documents, pods_document, write_status
from numalign.errors import NumalignError
from numalign.k8s.pod import Pod
from numalign.kubelet.devicemanager.endpoint import Endpoint
from numalign.kubelet.node import Node
from numalign.kubelet.nodestate import Transaction
from numalign.run.records import RunProcesses

log = logging.getLogger("numalign.agent")

FAULT_LOG_SIZE = 50


class NodeReader:
    """The pod book's NodeView of a Node (read under the agent's lock)."""

    def __init__(self, node: Node) -> None:
        self.node = node

    def held(self, uid: str) -> Pod | None:
        res = self.node.reserved.get(uid)
        return res.pod if res is not None else self.node.pods.get(uid)

    def plugin_connected(self, resource: str) -> bool:
        info = self.node.devices.endpoints.get(resource)
        return info is not None and info.endpoint is not None and not info.stopped


class AgentCore:
    def __init__(self, options: AgentOptions) -> None:
        self.options = options
        self.metrics = m.Metrics()
        self.faults: Counter[str] = Counter()
        self.fault_log: deque[str] = deque(maxlen=FAULT_LOG_SIZE)
        self.lock = threading.RLock()
        self.stopping = threading.Event()
        self.source = SnapshotPodResourcesSource()
        self.dra: Any = None  # agent.dra.AgentDRA once the agent starts
        self.endpoints: dict[str, Endpoint] = {}  # connected plugins, as registered with the node
        self.node: Node | None = None
        self.runs: RunProcesses | None = None  # `numalign run` processes sharing the state directory
        self.book: PodBook | None = None
        self._t0 = time.monotonic()
        self._machine_doc: dict[str, Any] | None = None
        self._nrt_written = b""

    def now(self) -> float:
        """Seconds since start: the device manager's clock (restored endpoints are stopped at 0)."""
        return time.monotonic() - self._t0

    def require_node(self) -> Node:
        if self.node is None:
            raise RuntimeError("the agent is not started")
        return self.node

    def require_runs(self) -> RunProcesses:
        if self.runs is None:
            raise RuntimeError("the agent is not started")
        return self.runs

    def require_book(self) -> PodBook:
        if self.book is None:
            raise RuntimeError("the agent is not started")
        return self.book

    def fault(self, kind: str, message: str) -> None:
        log.error("%s: %s", kind, message)
        with self.lock:
            self.faults[kind] += 1
            self.fault_log.append(f"{kind}: {message}")

    def check(self, tx: Transaction, what: str) -> None:
        if tx.failure is not None:
            self.fault("state_write_error", f"{what}: {tx.failure} (retried at the next change or tick)")

    # -- after every change (lock held) -------------------------------------------------------------

    def after_change(self) -> None:
        self.publish()
        self.write_status()

    def publish(self) -> None:
        node = self.require_node()
        if self.dra is not None:  # DRA claims of the manifests' pods (agent/dra.py)
            self.dra.refresh(list(node.pods.values()), self.fault)
        runs = self.require_runs().of(node.pods)
        self.source.publish(pods=pods_view(node, self.dra, runs=runs), allocatable=allocatable_view(node, runs),
                            inactive=inactive_view(self.require_book().inactive_pods()))
        node.cm.sync_metrics()  # the managers' counters and gauges, as the kubelet's after each change
        if self.options.nrt_file is not None:
            self._write_nrt(node, self.options.nrt_file)

    def write_status(self) -> None:
        node, book = self.require_node(), self.require_book()
        if self._machine_doc is None:  # the machine never changes: rendered once
            self._machine_doc = machine_document(node)
        doc = {**pods_document(book, node), **plugin_documents(node, book, self.endpoints),
               "faults": dict(sorted(self.faults.items())), "fault_log": list(self.fault_log),
               **({"draUnallocatable": self.dra.unallocatable()} if self.dra is not None and self.dra.failed else {}),
               **({"draAllocating": waiting} if self.dra is not None and (waiting := self.dra.allocating()) else {}),
               **self._machine_doc, "kubeletVersion": str(node.kubelet_version),
               **({"previews": node.previews.to_dict()} if node.previews else {})}
        try:
            write_status(self.options.state_dir, doc)
        except NumalignError as e:
            log.error("cannot write the status file: %s", e)

    def _write_nrt(self, node: Node, path: Path) -> None:
        from numalign.cluster.nrt_export import node_resource_topology

        data = (json.dumps(node_resource_topology(node, self.options.node_name).to_dict(), indent=2) + "\n").encode()
        if data == self._nrt_written:
            return
        try:
            write_atomic(path, data, mode=0o644)
            self._nrt_written = data
        except NumalignError as e:
            log.error("cannot write the NodeResourceTopology file: %s", e)
