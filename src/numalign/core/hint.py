"""TopologyHint and the shapes providers return.

Three levels of "nothing" are kept apart, exactly as upstream does:
- a provider map that is None or {}: the provider has no preference at all;
- a resource mapped to None: no preference for that resource (Go nil slice);
- a resource mapped to []: that resource cannot be satisfied (Go empty, non-nil slice);
and inside a hint, mask None ("any NUMA node", Go nil affinity) is not the empty mask 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from numalign.core.bitmask import BitMask, bits_of, is_narrower, mask_of
from numalign.errors import InvalidInputError


@dataclass(frozen=True, slots=True)
class TopologyHint:
    """A NUMA affinity a provider can satisfy, and whether it is the provider's preference.

    `mask` is the NUMA node set as an int (bit i = node i), or None for a nil affinity.
    """

    mask: int | None
    preferred: bool

    @classmethod
    def of(cls, nodes: Iterable[int] | None, preferred: bool) -> TopologyHint:
        return cls(None if nodes is None else mask_of(nodes), preferred)

    @property
    def numa_node_affinity(self) -> BitMask | None:
        return None if self.mask is None else BitMask(self.mask)

    def nodes(self) -> list[int] | None:
        return None if self.mask is None else bits_of(self.mask)

    def less_than(self, other: TopologyHint) -> bool:
        """Upstream TopologyHint.LessThan: preferred first, then narrower (non-nil masks only)."""
        if self.preferred != other.preferred:
            return self.preferred
        if self.mask is None or other.mask is None:
            raise InvalidInputError("TopologyHint.less_than needs non-nil masks on both sides")
        return is_narrower(self.mask, other.mask)

    def to_dict(self) -> dict[str, Any]:
        return {"mask": self.nodes(), "preferred": self.preferred}

    @classmethod
    def from_dict(cls, obj: Any, where: str = "hint") -> TopologyHint:
        if not isinstance(obj, Mapping) or "preferred" not in obj:
            raise InvalidInputError(
                f"{where}: expected an object {{'mask': [ids] | null, 'preferred': bool}}, got {obj!r}"
            )
        pref = obj["preferred"]
        if not isinstance(pref, bool):
            raise InvalidInputError(f"{where}.preferred: expected true or false, got {pref!r}")
        raw = obj.get("mask", obj.get("bits"))
        if raw is None:
            return cls(None, pref)
        if not isinstance(raw, list) or not all(isinstance(b, int) and not isinstance(b, bool) for b in raw):
            raise InvalidInputError(f"{where}.mask: expected a list of NUMA ids or null, got {raw!r}")
        return cls(mask_of(raw), pref)

    def __str__(self) -> str:
        nodes = "any" if self.mask is None else ",".join(map(str, bits_of(self.mask)))  # "{}": the empty mask
        return f"{{{nodes}}}{'P' if self.preferred else ''}"


_HINTS: dict[tuple[int | None, bool], TopologyHint] = {}
_HINTS_KEPT = 1 << 16


def hint_of(mask: int | None, preferred: bool) -> TopologyHint:
    """TopologyHint(mask, preferred), one shared instance per value (a hint is immutable): hint providers
    build the same few hints at every admission, and a frozen instance costs more to make than to find."""
    hint = _HINTS.get((mask, preferred))
    if hint is None:
        if len(_HINTS) >= _HINTS_KEPT:
            _HINTS.clear()
        hint = _HINTS[(mask, preferred)] = TopologyHint(mask, preferred)
    return hint


# upstream's filterProvidersHints stand-ins: a nil list (don't care) and an empty one (cannot satisfy)
DONT_CARE = TopologyHint(None, True)
CANNOT_SATISFY = TopologyHint(None, False)

# A provider's answer: None/{} = no preference; resource -> None = don't care; -> [] = cannot satisfy.
ResourceHints = Mapping[str, Sequence[TopologyHint] | None]
ProviderHints = ResourceHints | None


def provider_hints_from_json(obj: Any, where: str) -> dict[str, list[TopologyHint] | None] | None:
    """Parse one provider entry of the vector format, keeping None / {} / [] distinctions."""
    if obj is None:
        return None
    if not isinstance(obj, Mapping):
        raise InvalidInputError(f"{where}: expected an object resource -> hints or null, got {obj!r}")
    out: dict[str, list[TopologyHint] | None] = {}
    for res, hints in obj.items():
        if hints is None:
            out[str(res)] = None
        elif isinstance(hints, list):
            out[str(res)] = [TopologyHint.from_dict(h, f"{where}.{res}[{i}]") for i, h in enumerate(hints)]
        else:
            raise InvalidInputError(f"{where}.{res}: expected a list of hints or null, got {hints!r}")
    return out


def provider_hints_to_json(hints: ProviderHints) -> dict[str, Any] | None:
    if hints is None:
        return None
    return {r: None if hs is None else [h.to_dict() for h in hs] for r, hs in hints.items()}
