"""The Prometheus text exposition of numalign.metrics, rendered through prometheus_client.

prometheus-client renames counters (it appends `_total`), but kubelet names such as
`kubelet_container_aligned_compute_resources_count` are counters without that suffix. So the values live
in numalign.metrics and a custom collector exposes them verbatim. Imported only by the agent, which serves
/metrics: nothing else pays for prometheus_client.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from numalign.metrics import Metrics


def render_text(metrics: Metrics) -> bytes:
    """The text format (version 0.0.4) of every family, with the kubelet's names and types."""
    reg = CollectorRegistry(auto_describe=False)
    reg.register(_Adapter(metrics))
    text = generate_latest(reg)
    # The kubelet's counters whose names lack `_total` are counters there too (client_golang writes the
    # name as given). prometheus-client would rename them, so they are collected as untyped (see _family)
    # and only their TYPE line is put right here: same samples, kubelet's type.
    for fam in metrics.families():
        if fam.kind == "counter" and not fam.name.endswith("_total"):
            text = text.replace(f"# TYPE {fam.name} untyped\n".encode(), f"# TYPE {fam.name} counter\n".encode())
    return text


def collect(metrics: Metrics) -> Iterator[Metric]:
    for name, kind, doc, buckets, values, hist in metrics.families():
        if not (hist if kind == "histogram" else values):
            continue  # a labelled family without a series (or one the release lacks): client_golang omits it
        m = _family(name, kind, f"[ALPHA] {doc}")
        if kind == "histogram":
            for key, h in hist.items():
                labels = dict(key)
                for i, bound in enumerate(buckets):
                    m.add_sample(f"{name}_bucket", {**labels, "le": _fmt(bound)}, h[i])
                m.add_sample(f"{name}_bucket", {**labels, "le": "+Inf"}, h[-1])
                m.add_sample(f"{name}_sum", labels, h[-2])
                m.add_sample(f"{name}_count", labels, h[-1])
        else:
            for key, v in values.items():
                m.add_sample(name, dict(key), v)
        yield m


class _Adapter(Collector):
    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics

    def collect(self) -> Iterable[Metric]:
        return list(collect(self._m))

    def describe(self) -> Sequence[Any]:
        return []


def _family(name: str, kind: str, doc: str) -> Metric:
    """prometheus-client's text format writes a counter family as `<family>_total`. Kubelet counters
    ending in `_total` map onto that exactly; the few that do not (e.g. ..._aligned_compute_resources_count)
    are exposed untyped so their sample names stay the kubelet's, which is what queries match on."""
    if kind == "counter":
        if name.endswith("_total"):
            return Metric(name[: -len("_total")], doc, "counter")
        return Metric(name, doc, "unknown")
    return Metric(name, doc, kind)


def _fmt(bound: float) -> str:
    return repr(float(bound))
