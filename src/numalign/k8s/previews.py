"""The previews numalign models: open upstream proposals, each with the values it accepts and the revision
of its PR or KEP it follows. Pure data and parsing (kubelet/previews implements them), so that the
command line can list them in --help without loading the kubelet.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from numalign.errors import InvalidInputError
from numalign.limits import flat, quote

NUMA_ALLOCATION_STRATEGY = "numa-allocation-strategy"
NUMA_SCORE_WEIGHTS = "numa-score-weights"
RESTRICT_TO_CPU_NUMA_NODES = "restrict-to-cpu-numa-nodes"
INPLACE_RESIZE_EXCLUSIVE_CPUS = "inplace-resize-exclusive-cpus"
DRA_TOPOLOGY_HINTS = "dra-topology-hints"


@dataclass(frozen=True)
class Preview:
    name: str
    values: tuple[str, ...]  # the accepted values; () when any value its own check accepts is allowed
    default: str  # the value `--preview NAME` alone means
    follows: str  # the proposal revision modelled
    summary: str


PREVIEWS: Mapping[str, Preview] = MappingProxyType({p.name: p for p in (
    Preview(NUMA_ALLOCATION_STRATEGY, ("none", "most-allocated", "least-allocated"), "most-allocated",
            "KEP-6007 as in kubernetes/enhancements PR #6332 (2026-09-21 review round) and its implementation "
            "kubernetes/kubernetes PR #142226 (WIP, 2026-09-18, with numa-score-weights; scores from PR #141796)",
            "among equally fit NUMA masks (same width, same distance), prefer the most or least allocated"),
    Preview(NUMA_SCORE_WEIGHTS, (), "",
            "KEP-6007 (kubernetes/enhancements PR #6332): per-resource weights, resource=weight in [0, 100]",
            "weights of the resources' scores for numa-allocation-strategy, e.g. cpu=3,nvidia.com/gpu=6"),
    Preview(RESTRICT_TO_CPU_NUMA_NODES, ("true", "false"), "true",
            "kubernetes/kubernetes PR #138172 (opened 2026-04-02) and its draft KEP kubernetes/enhancements "
            "PR #5992 (KEP-5726 CPU-attached NUMA filter, 2026-04-02)",
            "hints only over NUMA nodes with CPUs; devices on other nodes projected onto the nearest by distance"),
    Preview(INPLACE_RESIZE_EXCLUSIVE_CPUS, ("true", "false"), "true",
            "KEP-5554 as in kubernetes/enhancements PR #6330 (alpha in 1.38, 2026-09-21 review round), code "
            "kubernetes/kubernetes PR #140629 (2026-07-20 review round) with the checkpoint of merged PR #140314",
            "`numalign resize`: in-place resize of containers with exclusive CPUs (gate "
            "InPlacePodVerticalScalingExclusiveCPUs), baseline CPUs kept"),
    Preview(DRA_TOPOLOGY_HINTS, ("true", "false"), "true",
            "the design of kubernetes/kubernetes PR #139982 (\"DRA: Fix Numa hinting for Topology Manager\", "
            "opened 2026-06-24, closed unmerged)",
            "DRA devices with a NUMA node as Topology Manager hints: each claim's devices give one preferred hint, "
            "their NUMA nodes"),
)})


@dataclass(frozen=True)
class Previews:
    """The previews switched on, NAME -> value (absent: off, upstream's behaviour)."""

    values: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, specs: Iterable[str], where: str = "--preview") -> Previews:
        """`NAME[=VALUE]` items (repeatable, comma-free); one line naming what is wrong and the choices."""
        out: dict[str, str] = {}
        for spec in specs:
            name, sep, value = spec.strip().partition("=")
            preview = PREVIEWS.get(name)
            # The value is named once, cut to a few dozen characters (quote): a 100,000-character value
            # is not echoed back in full.
            if preview is None:
                raise InvalidInputError(
                    f"{where} {flat(name)}: no preview named {quote(name)}; expected one of {', '.join(PREVIEWS)} "
                    "(`numalign admit --help` lists them); check the spelling")
            value = value if sep else preview.default
            if preview.values and value not in preview.values:
                raise InvalidInputError(
                    f"{where} {name}: {quote(value)} is not a value of preview {name}; expected one of "
                    f"{', '.join(preview.values)}")
            if name == NUMA_SCORE_WEIGHTS:
                parse_weights(value, f"{where} {name}")
            out[name] = value
        if NUMA_SCORE_WEIGHTS in out and out.get(NUMA_ALLOCATION_STRATEGY, "none") == "none":
            raise InvalidInputError(
                f"{where} {NUMA_SCORE_WEIGHTS}={out[NUMA_SCORE_WEIGHTS]}: weights only act with "
                f"{NUMA_ALLOCATION_STRATEGY} most-allocated or least-allocated (KEP-6007); add "
                f"--preview {NUMA_ALLOCATION_STRATEGY}=most-allocated or drop the weights")
        return cls(MappingProxyType(out))

    def __deepcopy__(self, memo: dict[int, object]) -> Previews:
        return self  # immutable (a read-only mapping, which deepcopy refuses): a node's copy shares it

    def on(self, name: str) -> bool:
        """Is the preview switched on (present with a value other than its off value)."""
        return self.values.get(name, "none") not in ("none", "false", "")

    def value(self, name: str) -> str | None:
        return self.values.get(name)

    def labels(self) -> list[str]:
        """"preview: NAME=VALUE" for each preview that is on, as output shows them."""
        return [f"preview: {k}={v}" for k, v in sorted(self.values.items()) if self.on(k) or k == NUMA_SCORE_WEIGHTS]

    def to_dict(self) -> dict[str, str]:
        return dict(sorted(self.values.items()))

    def __bool__(self) -> bool:
        return any(self.on(k) for k in self.values)


NO_PREVIEWS = Previews()


def preview_help() -> str:
    """The --preview help text: every preview, its values and the revision it follows."""
    parts = []
    for p in PREVIEWS.values():
        values = "|".join(p.values) if p.values else "VALUE"
        parts.append(f"{p.name}={values} ({p.summary}; follows {p.follows})")
    return ("PREVIEW of an open upstream proposal, not in any kubelet release; repeat for several: "
            + "; ".join(parts))


_WEIGHT_MIN, _WEIGHT_MAX = 0, 100


def parse_weights(raw: str, where: str) -> dict[str, int]:
    """numa-score-weights: `resource=weight,...`, weights whole numbers in [0, 100]; empty entries skipped."""
    weights: dict[str, int] = {}
    for pair in raw.split(","):
        pair = pair.strip()
        if not pair:
            continue
        resource, sep, text = pair.partition("=")
        resource = resource.strip()
        if not sep:
            raise InvalidInputError(f"{where}: invalid weight entry {quote(pair)}: expected resource=weight")
        if not resource:
            raise InvalidInputError(f"{where}: empty resource name in weight entry {quote(pair)}; "
                                    "expected resource=weight")
        try:
            weight = int(text.strip())
        except ValueError:
            raise InvalidInputError(f"{where}: invalid weight value for {quote(resource)}: {quote(text.strip())}; "
                                    "expected "
                                    f"a whole number in [{_WEIGHT_MIN}, {_WEIGHT_MAX}]") from None
        if not _WEIGHT_MIN <= weight <= _WEIGHT_MAX:
            raise InvalidInputError(f"{where}: weight for {quote(resource)} must be in range [{_WEIGHT_MIN}, "
                                    f"{_WEIGHT_MAX}], got {weight}")
        weights[resource] = weight
    return weights
