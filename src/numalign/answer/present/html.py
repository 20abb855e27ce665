"""`numalign admit --report`: an AdmitDocument as a self-contained HTML page (report/ draws it): the
machine with every container's CPUs, memory and devices, and each rejected pod's decision record."""

from __future__ import annotations

from collections.abc import Callable

from numalign.answer.present.admit import AdmitDocument
from numalign.kubelet.node import Node
from numalign.report import NodeView, node_report, node_view_from_records


def admit_html(node: Node, doc: AdmitDocument, decorate: Callable[[NodeView], NodeView] | None = None) -> str:
    """The page of `doc`, decided on `node`. `decorate`: adds what the document's DRA part draws (the DRA
    devices on their NUMA nodes with their claims' holders)."""
    config = doc.config
    pods = [p.pod for p in doc.pods]
    order = {p.key: [c.name for c in p.all_containers()] for p in pods}
    config_line = (f"kubelet {node.kubelet_version}, topologyManagerPolicy {config.topology_manager_policy}, "
                   f"scope {config.topology_manager_scope}, "
                   f"cpuManagerPolicy {config.cpu_manager_policy}, memoryManagerPolicy {config.memory_manager_policy}")
    view = node_view_from_records(node.machine, [p.to_dict() for p in doc.pods], reserved_cpus=node.cpu.reserved_cpus,
                                  title=f"numalign admit: {node.machine.name}", notes=[config_line, *doc.notes],
                                  container_order=order)
    return node_report(decorate(view) if decorate is not None else view)
