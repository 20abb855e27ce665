"""The recorded allocation of numalign_pods.json: a recorded entry the reader cannot take (a wrong shape,
an unparsable CPU set, unsorted ids) leads to the pod being admitted again, as a lost kubelet file does;
a CPU set keeps the spelling it was written with, so a directory that did not change is not rewritten."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from support.configs import static_node_config

from numalign.adapters.statedir.directory import StateDirectory
from numalign.adapters.statedir.podrecord import decode_pod_record, encode_pod_record
from numalign.k8s.pod import Container, Pod
from numalign.k8s.quantity import Quantity
from numalign.kubelet.node import Node
from numalign.machine.examples import example

Q = Quantity.parse
MACHINE = example("dual-socket")
CONFIG = static_node_config(reserved="0,64")
RECORD = "numalign_pods.json"


def pod(name: str, cpus: int = 4, gpus: int = 0) -> Pod:
    limits = {"cpu": Q(str(cpus)), "memory": Q("2Gi")}
    if gpus:
        limits["nvidia.com/gpu"] = Q(str(gpus))
    return Pod(name=name, uid=f"uid-{name}", containers=(Container("app", requests=dict(limits), limits=limits),))


def files(state: Path) -> dict[str, bytes]:
    return {str(p.relative_to(state)): p.read_bytes() for p in sorted(state.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock")}


def admitted(state: Path) -> Node:
    n = Node(MACHINE, CONFIG, store=StateDirectory(state))
    n.admit(pod("a", cpus=4, gpus=1))
    return n


def recorded(state: Path) -> dict[str, Any]:
    """uid-a's recorded allocation as the file holds it (JSON)."""
    import json

    (entry,) = [p for p in json.loads((state / RECORD).read_text())["pods"] if p["uid"] == "uid-a"]
    return dict(entry["allocation"])


def rewrite(state: Path, allocation: Any) -> None:
    """uid-a's recorded allocation replaced, the record's checksum made to match (as numalign writes it)."""
    from numalign.adapters.statedir import podrecord

    record = decode_pod_record((state / RECORD).read_bytes())
    raw = [{**e.to_dict(), "allocation": allocation} for e in record.pods]
    body = {"generation": record.generation, "pods": raw, "claims": [], "version": podrecord.POD_RECORD_VERSION}
    import json

    (state / RECORD).write_text(json.dumps({**body, "checksum": podrecord._checksum(body)}, indent=1,
                                           sort_keys=True) + "\n")


def test_a_directory_that_did_not_change_is_not_rewritten(tmp_path: Path) -> None:
    admitted(tmp_path)
    before = files(tmp_path)
    n = Node(MACHINE, CONFIG, store=StateDirectory(tmp_path))
    n.save()
    assert files(tmp_path) == before
    record = decode_pod_record(before[RECORD])
    assert encode_pod_record(record) == before[RECORD]  # decode + encode is the identity


def test_a_cpu_set_keeps_its_spelling(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    admitted(tmp_path)
    alloc = recorded(tmp_path)
    cpus = alloc["app"]["cpus"]
    from numalign.k8s.cpuset import parse_cpuset

    spelled = ",".join(str(c) for c in sorted(parse_cpuset(cpus)))  # "1,2,3,65" for "1-3,65"
    assert spelled != cpus
    rewrite(tmp_path, {**alloc, "app": {**alloc["app"], "cpus": spelled}})
    before = files(tmp_path)
    with caplog.at_level(logging.WARNING, logger="numalign.kubelet.node"):
        n = Node(MACHINE, CONFIG, store=StateDirectory(tmp_path))
        n.save()
    assert not caplog.records  # the same CPUs: nothing to repair
    assert files(tmp_path) == before  # and the spelling as written
    n.admit(pod("b"))  # a change rewrites the record, uid-a's spelling kept
    assert recorded(tmp_path)["app"]["cpus"] == spelled


MALFORMED: list[tuple[str, Any]] = [
    ("a container entry that is not an object", lambda a: {**a, "app": "1-3"}),
    ("an unparsable CPU set", lambda a: {**a, "app": {**a["app"], "cpus": "three"}}),
    ("a CPU set that is not a string", lambda a: {**a, "app": {**a["app"], "cpus": ["1-3"]}}),
    ("other CPUs", lambda a: {**a, "app": {**a["app"], "cpus": "10-13"}}),
    ("an unknown key", lambda a: {**a, "app": {**a["app"], "gpus": 1}}),
    ("a container the pod does not have", lambda a: {**a, "sidecar": a["app"]}),
    ("an empty container entry", lambda a: {**a, "app": {}}),
    ("memory that is not a list", lambda a: {**a, "app": {**a["app"], "memory": {"size": 1}}}),
    ("a memory block without its size", lambda a: {**a, "app": {**a["app"], "memory": [
        {k: v for k, v in b.items() if k != "size"} for b in a["app"]["memory"]]}}),
    ("an empty memory list", lambda a: {**a, "app": {**a["app"], "memory": []}}),
    ("devices that are not an object", lambda a: {**a, "app": {**a["app"], "devices": ["nvidia.com/gpu"]}}),
    ("device ids that are not strings", lambda a: {**a, "app": {**a["app"], "devices": {"nvidia.com/gpu": [0]}}}),
    ("other devices", lambda a: {**a, "app": {**a["app"], "devices": {"nvidia.com/gpu": ["none"]}}}),
    ("nothing recorded for a container holding CPUs", lambda a: {}),
]


@pytest.mark.parametrize(("what", "damage"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_recorded_entry_admits_the_pod_again(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                         what: str, damage: Any) -> None:
    admitted(tmp_path)
    good = recorded(tmp_path)
    rewrite(tmp_path, damage(good))
    with caplog.at_level(logging.WARNING, logger="numalign.kubelet.node"):
        n = Node(MACHINE, CONFIG, store=StateDirectory(tmp_path))
    assert any("admitted pod default/a (uid uid-a) again" in r.getMessage() for r in caplog.records), what
    assert sorted(n.pods) == ["uid-a"]
    assert recorded(tmp_path) == good  # written again as numalign writes it (admission is deterministic)


def test_a_recorded_allocation_that_is_not_an_object_is_refused(tmp_path: Path) -> None:
    from numalign.errors import CheckpointError

    admitted(tmp_path)
    rewrite(tmp_path, ["app"])
    with pytest.raises(CheckpointError, match=r"pods\[0\]\.allocation is a list"):
        Node(MACHINE, CONFIG, store=StateDirectory(tmp_path))


def test_restarted_nodes_keep_the_recorded_allocations(tmp_path: Path) -> None:
    n = admitted(tmp_path)
    again = Node(MACHINE, CONFIG, store=StateDirectory(tmp_path))
    assert [a.allocation for a in again.state().pods] == [a.allocation for a in n.state().pods]
    assert n.state().pods[0].allocation  # recorded: the node has a store
