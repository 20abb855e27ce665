"""The published JSON Schemas of numalign's documents (docs/schemas/<command>.schema.json), with the
shared parts they refer to (pool.schema.json) resolved from the same directory."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource

SCHEMAS = Path(__file__).resolve().parents[2] / "docs" / "schemas"


@cache
def _registry() -> Registry[Any]:
    pairs = []
    for path in sorted(SCHEMAS.glob("*.schema.json")):
        resource = Resource.from_contents(json.loads(path.read_text(encoding="utf-8")))
        pairs += [(path.name, resource), (str(resource.id()), resource)]
    return Registry().with_resources(pairs)


def has_schema(command: str) -> bool:
    return (SCHEMAS / f"{command}.schema.json").is_file()


@cache
def validator(command: str) -> jsonschema.protocols.Validator:
    schema = json.loads((SCHEMAS / f"{command}.schema.json").read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, registry=_registry())


def validate(command: str, doc: Any) -> None:
    """Raises jsonschema.ValidationError naming the first place `doc` breaks the command's schema."""
    validator(command).validate(doc)


def snake_keys(value: Any, path: str = "", data_maps: frozenset[str] = frozenset()) -> list[str]:
    """Field names with an underscore. Data keys are left out: resource names with a domain
    (intel.com/sriov_netdevice), and every key of a map named in `data_maps` (reasons, pools)."""
    if isinstance(value, dict):
        name = path.rsplit(".", 1)[-1]
        own = [] if name in data_maps else [f"{path}.{k}" for k in value if "_" in k and "/" not in k]
        return own + [bad for k, v in value.items() for bad in snake_keys(v, f"{path}.{k}", data_maps)]
    if isinstance(value, list):
        return [bad for v in value for bad in snake_keys(v, f"{path}[]", data_maps)]
    return []
