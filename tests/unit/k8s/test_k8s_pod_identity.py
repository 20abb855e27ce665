"""Pod.with_identity: a copy under another name or uid keeps the memos worked out from the spec, and
they are the copy's own answers (the same as a pod built afresh with that name and uid)."""

from __future__ import annotations

import dataclasses

from numalign.cluster.resources import pod_shape, shape_key
from numalign.k8s.pod import Container, Pod
from numalign.k8s.qos import QOSClass, compute_pod_qos
from numalign.k8s.quantity import Quantity
from numalign.kubelet.admission.predicate import held_requests


def _pod() -> Pod:
    res = {"cpu": Quantity.parse("2"), "memory": Quantity.parse("1Gi"), "nvidia.com/gpu": Quantity.parse("1")}
    side = Container("log", {"cpu": Quantity.parse("500m"), "memory": Quantity.parse("64Mi")},
                     {"cpu": Quantity.parse("500m"), "memory": Quantity.parse("64Mi")}, "Always", True)
    return Pod("train", uid="u-1", init_containers=(side,), containers=(Container("main", res, res),))


def test_a_copy_keeps_the_spec_memos_and_they_are_its_own_answers() -> None:
    pod = _pod()
    qos, requests, shape = compute_pod_qos(pod), held_requests(pod), pod_shape(pod)
    copy = pod.with_identity(name="train-7", uid="u-7")
    assert (copy.name, copy.uid, copy.namespace) == ("train-7", "u-7", "default")
    assert dataclasses.replace(copy, name=pod.name, uid=pod.uid) == pod
    # Handed on, not worked out again ...
    assert copy.memo.qos is qos
    assert held_requests(copy) is requests
    assert pod_shape(copy) is shape
    # ... and equal to what a pod built afresh with the copy's identity answers.
    fresh = dataclasses.replace(pod, name="train-7", uid="u-7")
    assert (fresh.memo.qos, fresh.memo.fit, fresh.memo.shape) == (None, None, None)
    assert compute_pod_qos(fresh) is QOSClass.GUARANTEED is qos
    assert dict(held_requests(fresh)) == dict(requests) == {"cpu": 2500, "memory": (1 << 30) + (64 << 20),
                                                           "nvidia.com/gpu": 1}
    assert shape_key(fresh) == shape


def test_only_the_name_or_only_the_uid_changes() -> None:
    pod = _pod()
    assert pod.with_identity(uid="u-2") == dataclasses.replace(pod, uid="u-2")
    assert pod.with_identity(name="other") == dataclasses.replace(pod, name="other")
    # Without memos on the original there is nothing to hand on: the copy works its own out.
    bare = pod.with_identity(uid="u-3").memo
    assert (bare.qos, bare.fit, bare.shape) == (None, None, None)
