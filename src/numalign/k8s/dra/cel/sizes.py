"""The DRA environment's size estimates (k8s.io/dynamic-resource-allocation/cel's sizeEstimator): the
maximum sizes of what a path from `device` reaches, from the declared types' limits."""

from __future__ import annotations

from typing import Final

MAX_DRIVER_LENGTH: Final = 63  # DriverNameMaxLength
MAX_DOMAIN_LENGTH: Final = 63  # DeviceMaxDomainLength
MAX_ID_LENGTH: Final = 32  # DeviceMaxIDLength
MAX_ENTRIES: Final = 32  # ResourceSliceMaxAttributesAndCapacitiesPerDevice
MAX_ATTRIBUTE_VALUE_LENGTH: Final = 64  # DeviceAttributeMaxValueLength (also above the 48 list values)

# A declared type: (max elements, key node, element node, fields). Attribute and capacity values are leaves.
_Node = tuple[int, "object", "object", dict[str, "object"]]
_ATTRIBUTE: Final[_Node] = (MAX_ATTRIBUTE_VALUE_LENGTH, None, None, {})
_QUANTITY: Final[_Node] = (0, None, None, {})
_DOMAIN: Final[_Node] = (MAX_DOMAIN_LENGTH, None, None, {})
_ID: Final[_Node] = (MAX_ID_LENGTH, None, None, {})
_INNER_ATTRIBUTES: Final[_Node] = (MAX_ENTRIES, _ID, _ATTRIBUTE, {})
_INNER_CAPACITY: Final[_Node] = (MAX_ENTRIES, _ID, _QUANTITY, {})
_DEVICE: Final[_Node] = (0, None, None, {
    "driver": (MAX_DRIVER_LENGTH, None, None, {}),
    "allowMultipleAllocations": (1, None, None, {}),
    "attributes": (MAX_ENTRIES, _DOMAIN, _INNER_ATTRIBUTES, {}),
    "capacity": (MAX_ENTRIES, _DOMAIN, _INNER_CAPACITY, {}),
})


def dra_size(path: list[str]) -> tuple[int, int] | None:
    """sizeEstimator.EstimateSize: walk the path through the declared types."""
    if not path or path[0] != "device":
        return None
    node: _Node = _DEVICE
    for name in path[1:]:
        if name in ("@items", "@values"):
            if node[2] is None:
                return None
            node = node[2]  # type: ignore[assignment]
        elif name == "@keys":
            if node[1] is None:
                return None
            node = node[1]  # type: ignore[assignment]
        else:
            found = node[3].get(name)
            if found is None:
                # a name inside an attribute map: every attribute has the same bound
                # compared by value, not identity: mypyc (scripts/setup's compiled build) boxes a Final
                # tuple anew where it is read; no other node has this value
                if node[2] == _ATTRIBUTE:
                    node = _ATTRIBUTE
                    continue
                return None
            node = found  # type: ignore[assignment]
    return 0, node[0]
