"""The DRA parts of a pod manifest: spec.resourceClaims and containers' resources.claims, read with the
manifest reader's wording (k8s/manifest.py calls these), and the claims a pod uses, found among the
objects read beside it (`claims_for_pod`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from numalign.errors import InvalidInputError
from numalign.k8s.dra.names import dns_label_problem, dns_subdomain_problem
from numalign.k8s.dra.types import ContainerClaim, DRAObjects, PodResourceClaim, ResourceClaim
from numalign.limits import go_quote, quote

if TYPE_CHECKING:
    from numalign.k8s.pod import Container, Pod


def _type_name(obj: object) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}.get(type(obj), type(obj).__name__)


def _mapping(obj: object, where: str, path: str) -> Mapping[str, Any]:
    if not isinstance(obj, Mapping):
        raise InvalidInputError(f"{where}: {path}: expected a mapping, got {_type_name(obj)}")
    return obj


def _optional_str(obj: object, where: str, path: str) -> str | None:
    if obj is None:
        return None
    if not isinstance(obj, str):
        raise InvalidInputError(f"{where}: {path}: expected a string, got {_type_name(obj)} {quote(obj)}")
    return obj


def pod_resource_claims(obj: object, path: str, where: str) -> tuple[PodResourceClaim, ...]:
    """spec.resourceClaims (DRA): each names a ResourceClaim or a ResourceClaimTemplate, not both."""
    if obj is None:
        return ()
    if not isinstance(obj, list):
        raise InvalidInputError(f"{where}: {path}: expected a list, got {_type_name(obj)}")
    claims: list[PodResourceClaim] = []
    for i, raw in enumerate(obj):
        item = _mapping(raw, where, f"{path}[{i}]")
        name = _optional_str(item.get("name"), where, f"{path}[{i}].name")
        if not name:
            raise InvalidInputError(f"{where}: {path}[{i}].name: Required value (every pod claim needs a name)")
        _check_name(name, where, f"{path}[{i}].name", dns_label_problem)
        if any(c.name == name for c in claims):
            raise InvalidInputError(f"{where}: {path}[{i}].name: Duplicate value: {name!r}")
        claim = _optional_str(item.get("resourceClaimName"), where, f"{path}[{i}].resourceClaimName")
        template = _optional_str(item.get("resourceClaimTemplateName"), where,
                                 f"{path}[{i}].resourceClaimTemplateName")
        for value, field in ((claim, "resourceClaimName"), (template, "resourceClaimTemplateName")):
            if value:
                _check_name(value, where, f"{path}[{i}].{field}", dns_subdomain_problem)
        if bool(claim) == bool(template):
            raise InvalidInputError(
                f"{where}: {path}[{i}]: Invalid value: must specify one of: `resourceClaimName`, "
                "`resourceClaimTemplateName`"
            )
        claims.append(PodResourceClaim(name=name, resource_claim_name=claim, resource_claim_template_name=template))
    return tuple(claims)


def _check_name(value: str, where: str, path: str, problem: Callable[[str], str | None]) -> None:
    """The pod's validation of a claim name, in the API server's words."""
    found = problem(value)
    if found is not None:
        raise InvalidInputError(f"{where}: {path}: Invalid value: {go_quote(value)}: {found}")


def check_container_claims(
    containers: tuple[Container, ...], claims: tuple[PodResourceClaim, ...], path: str, where: str
) -> None:
    names = {c.name for c in claims}
    for c in containers:
        for claim in c.claims:
            if claim.name not in names:
                raise InvalidInputError(
                    f"{where}: {path}: container {c.name!r}: resources.claims: Unsupported value: {claim.name!r}: "
                    f"must be one of the names in pod.spec.resourceClaims ({', '.join(sorted(names)) or 'none'})"
                )


def container_claims(obj: object, path: str, where: str) -> tuple[ContainerClaim, ...]:
    if obj is None:
        return ()
    if not isinstance(obj, list):
        raise InvalidInputError(f"{where}: {path}: expected a list, got {_type_name(obj)}")
    out = []
    for i, raw in enumerate(obj):
        item = _mapping(raw, where, f"{path}[{i}]")
        name = _optional_str(item.get("name"), where, f"{path}[{i}].name")
        if not name:
            raise InvalidInputError(f"{where}: {path}[{i}].name: Required value")
        out.append(ContainerClaim(name=name, request=_optional_str(item.get("request"), where,
                                                                   f"{path}[{i}].request") or ""))
    return tuple(out)



def generated_claim_name(pod: Pod, claim: PodResourceClaim) -> str:
    """The name of the claim the resource claim controller creates from a template for a pod:
    "<pod>-<claim>" (upstream appends a random suffix; numalign keeps names deterministic)."""
    return f"{pod.name}-{claim.name}"


def claims_for_pod(pod: Pod, objects: DRAObjects) -> list[ResourceClaim]:
    """The ResourceClaims a pod uses, in spec.resourceClaims order: a named claim from `objects`, a
    template's claim as the controller would create it (or the one already read under that name, which
    keeps its status.allocation). A missing claim or template is an InvalidInputError with the
    scheduler's wording."""
    out: list[ResourceClaim] = []
    for claim in pod.resource_claims:
        if claim.resource_claim_name:
            found = objects.claims.get(f"{pod.namespace}/{claim.resource_claim_name}")
            if found is None:
                raise InvalidInputError(
                    f"{pod.source or pod.key}: pod {pod.key}: resourceclaim {quote(claim.resource_claim_name)} not "
                    "found; add the ResourceClaim to the input (kubectl get resourceclaim -o yaml)"
                )
            out.append(found)
            continue
        name = generated_claim_name(pod, claim)
        existing = objects.claims.get(f"{pod.namespace}/{name}")
        if existing is not None:
            out.append(existing)
            continue
        template = objects.templates.get(f"{pod.namespace}/{claim.resource_claim_template_name}")
        if template is None:
            raise InvalidInputError(
                f"{pod.source or pod.key}: pod {pod.key}: resourceclaimtemplate "
                f"{quote(claim.resource_claim_template_name)} not found; add the ResourceClaimTemplate to the input"
            )
        out.append(ResourceClaim(name=name, namespace=pod.namespace, spec=template.spec, source=template.source))
    return out
