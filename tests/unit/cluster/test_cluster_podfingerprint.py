"""The pod-set fingerprint (podfingerprint v001) against its upstream golden vectors and XXH64's."""

from __future__ import annotations

import random

from numalign.cluster.podfingerprint import fingerprint, xxh64

# k8stopologyawareschedwg/podfingerprint testdata/compat-small-10pods-3ns.{txt,sign}
SMALL = [("analytics", "controller-69dkj"), ("kube-public", "subscriber-tq6v7"), ("kube-public", "transformer-hfbng"),
         ("kube-public", "validator-c6pn5"), ("kube-system", "proxy-wszrd"), ("middleware", "processor-jkrl4"),
         ("network", "gateway-vsll5"), ("network", "importer-kzdfr"), ("network", "importer-q5vt9"),
         ("staging", "prometheus-bwgbn")]


def test_xxh64_reference_values() -> None:
    # The xxHash specification's values: the empty input, and seeded / multi-stripe inputs.
    assert xxh64(b"") == 0xEF46DB3751D8E999
    assert xxh64(b"a") == 0xD24EC4F1A98C6E5B
    assert xxh64(b"abc") == 0x44BC2CF5AD770999
    assert xxh64(b"", 1) != xxh64(b"")


def test_golden_signatures_in_any_order() -> None:
    assert fingerprint(SMALL) == "pfp0v001567144e4a561bb5a"
    shuffled = SMALL[:]
    random.Random(12345).shuffle(shuffled)
    assert fingerprint(shuffled) == "pfp0v001567144e4a561bb5a"
    tiny = [("production", "jaeger-dpgjk"), ("production", "nginx-rt684"), ("production", "envoy-g9m22")]
    assert fingerprint(tiny) == "pfp0v001607b76a0e9d3aeb4"
    # namespace and name are not interchangeable
    assert fingerprint([("a", "b")]) != fingerprint([("b", "a")])
