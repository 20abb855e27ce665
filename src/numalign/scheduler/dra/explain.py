"""Why a pod's claims cannot be allocated on a node, after the allocator answered `cannot allocate all
claims` (upstream says no more). Computed apart from the search, from the same objects: it decides
nothing, and the allocator's answer stays upstream's text.

Each request still to allocate (each subrequest of a `firstAvailable` one) is followed through the
filters the allocator applies to a device, counting what each leaves:

    devices on the node (the pools the allocator gathers for it)
    -> each selector of the request's DeviceClass, in order  -> each selector of the request
    -> usable: per-device node selection, binding conditions and partitions where their gate is off,
       not held by another claim (unless admin access), taints tolerated, consumable capacity left

A request with fewer usable devices than it needs is short ("needs 2, 1 usable"). When every request
has enough on its own, each constraint is tried on the usable devices of the requests it names:
`matchAttribute` needs one value that enough of each request's devices share (the devices without the
attribute are named), `distinctAttribute` as many different values as devices. When none of these
explains it, the requests (and claims) together need more devices than they can share, or the
devices' counters (partitions) run out: said so, with the figures.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from numalign.k8s.dra.types import Device, DeviceAttribute, DeviceClass, DeviceSubRequest, ResourceClaim, ResourceSlice
from numalign.limits import go_quote
from numalign.scheduler.dra.allocator import CEL_COST_PER_WORK, DEFAULT_WORK_BOUND, AllocatedState, DeviceID
from numalign.scheduler.dra.capacity import CapacityNotDefinedError, CapacityRequestError, request_fits
from numalign.scheduler.dra.constraints import matches_request
from numalign.scheduler.dra.features import Features
from numalign.scheduler.dra.pools import NodeInfo, Pool, gather_pools, node_matches

# Devices named in one line at most (the rest counted), and the selector text shown.
_NAMED: Final = 4
_EXPRESSION: Final = 120


@dataclass(frozen=True)
class Step:
    """One filter a request's devices pass through: how many it was tried on and how many it left."""

    what: str  # "class h100 selector #0", "request selector #1", "free", ...
    tried: int
    left: int
    expression: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.what, "tried": self.tried, "matched": self.left}
        if self.expression:
            out["expression"] = self.expression
        return out


@dataclass(frozen=True)
class RequestFinding:
    """One request (or subrequest) of a claim on this node."""

    claim: str
    request: str  # "gpus", or "gpus/big" for a subrequest
    device_class: str
    mode: str  # ExactCount | All
    need: int  # devices needed (All: every selected device)
    on_node: int
    steps: tuple[Step, ...]
    usable: tuple[DeviceID, ...]
    held: int = 0  # selected devices other claims hold
    tainted: int = 0
    no_capacity: int = 0
    other: int = 0  # node selection, binding conditions, partitions with their gate off
    pools_left_out: bool = False  # the node has pools, all incomplete or invalid (the allocator skips them)

    @property
    def selected(self) -> int:
        return self.steps[-1].left if self.steps else self.on_node

    @property
    def satisfied(self) -> bool:
        if self.mode == "All":
            return len(self.usable) == self.selected
        return len(self.usable) >= self.need

    def reason(self) -> str:
        head = f"claim {self.claim}, request {self.request}"
        if self.on_node == 0 and self.pools_left_out:
            return f"{head}: no device on the node to try (every pool with devices for this node is left out, below)"
        if self.on_node == 0:
            return f"{head}: no device on the node to try (no ResourceSlice for this node publishes one)"
        for step in self.steps:
            if step.left == 0:
                shown = f": {_short(step.expression)}" if step.expression else ""
                return f"{head}: {step.what} matched none of the {step.tried} device(s) it was tried on{shown}"
        path = ", ".join([f"{self.on_node} on the node", *(f"{s.what} matched {s.left}" for s in self.steps),
                          *self._lost()])
        if self.mode == "All":
            return (f"{head}: asks for all {self.selected} device(s) its selectors match, "
                    f"{self.selected - len(self.usable)} of them cannot be taken: {path}")
        return f"{head}: needs {self.need} device(s), {len(self.usable)} usable: {path}"

    def _lost(self) -> list[str]:
        return [f"{n} {what}" for n, what in ((self.held, "held by other claims"), (self.tainted, "tainted"),
                                              (self.no_capacity, "without the capacity asked"),
                                              (self.other, "not selectable on this node or with these gates"))
                if n]

    def summary(self) -> str:
        """Every step with its count, for --details."""
        need = "all" if self.mode == "All" else str(self.need)
        path = ", ".join([f"{self.on_node} on the node", *(f"{s.what} matched {s.left}" for s in self.steps),
                          *self._lost(), f"{len(self.usable)} usable"])
        return f"claim {self.claim}, request {self.request} (class {self.device_class}): needs {need}: {path}"

    def to_dict(self) -> dict[str, Any]:
        return {"claim": self.claim, "request": self.request, "deviceClass": self.device_class,
                "allocationMode": self.mode, "need": self.need, "devicesOnNode": self.on_node,
                "steps": [s.to_dict() for s in self.steps], "selected": self.selected, "usable": len(self.usable),
                "heldByOtherClaims": self.held, "tainted": self.tainted, "withoutCapacity": self.no_capacity,
                "notSelectable": self.other, "satisfied": self.satisfied}


@dataclass(frozen=True)
class ConstraintFinding:
    """One claim constraint tried on the usable devices of the requests it names."""

    claim: str
    index: int
    kind: str  # matchAttribute | distinctAttribute
    attribute: str
    requests: tuple[str, ...]
    satisfied: bool
    missing: tuple[str, ...] = ()  # usable devices without the attribute
    values: tuple[tuple[str, tuple[tuple[str, int], ...]], ...] = ()  # value -> (request, devices) ...
    needs: tuple[tuple[str, int], ...] = ()

    def reason(self) -> str:
        head = (f"claim {self.claim}, {self.kind} {self.attribute} (constraint #{self.index} over "
                f"{', '.join(self.requests)})")
        if self.satisfied:
            return f"{head}: holds on the usable devices"
        needs = ", ".join(f"{r} needs {n}" for r, n in self.needs)
        # Devices without the attribute first: the usual cause (a driver that does not publish it).
        missing = f"missing on {_devices(self.missing)}; " if self.missing else ""
        if self.kind == "distinctAttribute":
            total = sum(n for _, n in self.needs)
            return f"{head}: {missing}{len(self.values)} different value(s) on the usable devices, {total} needed"
        if not self.values:
            return f"{head}: {missing}no usable device has the attribute ({needs})"
        shown = "; ".join(f"{value}: " + ", ".join(f"{r} {n}" for r, n in counts)
                          for value, counts in self.values[:_NAMED])
        more = f"; {len(self.values) - _NAMED} more value(s)" if len(self.values) > _NAMED else ""
        return f"{head}: {missing}no value is on enough usable devices ({needs}): {shown}{more}"

    def to_dict(self) -> dict[str, Any]:
        return {"claim": self.claim, "constraint": self.index, "kind": self.kind, "attribute": self.attribute,
                "requests": list(self.requests), "satisfied": self.satisfied,
                "missingOn": list(self.missing),
                "values": [{"value": v, "devices": dict(counts)} for v, counts in self.values],
                "needs": dict(self.needs)}


@dataclass(frozen=True)
class Explanation:
    """Why the claims do not fit on `node`: the reasons found (each one line), and every finding."""

    node: str
    reasons: tuple[str, ...]
    requests: tuple[RequestFinding, ...] = ()
    constraints: tuple[ConstraintFinding, ...] = ()

    def lines(self, details: bool = False) -> list[str]:
        """The reasons; with `details`, every request's counts and every constraint after them."""
        out = list(self.reasons)
        if details:
            out += [r.summary() for r in self.requests]
            out += [c.reason() for c in self.constraints if c.reason() not in self.reasons]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "reasons": list(self.reasons),
                "requests": [r.to_dict() for r in self.requests],
                "constraints": [c.to_dict() for c in self.constraints]}


def explain(
    claims: Sequence[ResourceClaim],
    slices: Sequence[ResourceSlice],
    classes: Mapping[str, DeviceClass],
    node: NodeInfo,
    allocated: AllocatedState,
    features: Features,
    cel_cost_limit: int | None = None,
) -> Explanation:
    """Why `claims` (a pod's, those without status.allocation to allocate) do not fit on `node`, given what
    `allocated` holds. Bounded by the devices of the node's pools times the requests' selectors, and the
    selectors' evaluations by EXPLAIN_CEL_COST (`cel_cost_limit`: another; past it, one reason saying so)."""
    limit = EXPLAIN_CEL_COST if cel_cost_limit is None else cel_cost_limit
    try:
        return _explain(claims, slices, classes, node, allocated, features, limit)
    except _TooCostlyError:
        return Explanation(node.name, (
            f"numalign stopped explaining after {limit} units of CEL cost (the selectors cost too "
            "much to evaluate on every device; its bound, as on allocating, keeps an answer inside about 10 s)",))


# What explain spends on CEL at most: as much as one allocation may (DEFAULT_WORK_BOUND, in cost units).
EXPLAIN_CEL_COST: Final = DEFAULT_WORK_BOUND * CEL_COST_PER_WORK


class _TooCostlyError(Exception):
    """The selectors' evaluations passed EXPLAIN_CEL_COST."""


def _explain(
    claims: Sequence[ResourceClaim],
    slices: Sequence[ResourceSlice],
    classes: Mapping[str, DeviceClass],
    node: NodeInfo,
    allocated: AllocatedState,
    features: Features,
    cel_cost_limit: int,
) -> Explanation:
    pools = _pools(slices, node, features)
    devices = [(s, d) for p in pools if not (p.is_incomplete or p.is_invalid) for s in p.slices for d in s.devices]
    held = _held(allocated, claims)
    evaluator = _Selectors(features, cel_cost_limit)
    findings: list[RequestFinding] = []
    for claim in claims:
        if claim.allocation is not None:
            continue
        for request in claim.spec.requests:
            subs = [request.exactly] if request.exactly is not None else list(request.first_available)
            for sub in subs:
                if sub is None:
                    continue
                name = sub.name if request.exactly is not None else f"{request.name}/{sub.name}"
                findings.append(_request(claim, name, sub, classes.get(sub.device_class_name), devices, node,
                                         allocated, held, features, evaluator))
    bad = [p for p in pools if p.is_incomplete or p.is_invalid]
    if bad and not devices:
        findings = [replace(f, pools_left_out=True) for f in findings]
    reasons = [f.reason() for f in findings if not f.satisfied and not _alternative_fits(f, findings)]
    constraints = _constraints(claims, findings, devices, features)
    if not reasons:
        reasons = [c.reason() for c in constraints if not c.satisfied]
    if not reasons:
        reasons = [_together(findings, devices)]
    if bad:
        reasons.append("pool(s) left out as the allocator leaves them out: " + ", ".join(
            f"{p.pool_id} ({'incomplete' if p.is_incomplete else p.invalid_reason or 'invalid'})" for p in bad))
    return Explanation(node.name, tuple(reasons), tuple(findings), tuple(constraints))


def _pools(slices: Sequence[ResourceSlice], node: NodeInfo, features: Features) -> list[Pool]:
    """The pools the allocator gathers for the node (Allocator.__init__'s slicesForNode, then GatherPools)."""
    everywhere = features.generation.counter_slices_for_every_node and features.partitionable_devices
    gathered = [s for s in slices if s.node_name == node.name or not s.node_name
                or (everywhere and s.shared_counters)]
    return gather_pools(gathered, node, features, slices)


def _held(allocated: AllocatedState, claims: Sequence[ResourceClaim]) -> Callable[[DeviceID], bool]:
    """Whether another claim holds a device whole: the ledger's, and the pod's own allocated claims'
    (allocate_claims counts those too)."""
    own = {r.device_id for c in claims if c.allocation is not None for r in c.allocation.results
           if not r.admin_access and not r.share_id}
    return lambda device_id: device_id in allocated.devices or device_id in own


class _Selectors:
    """CEL selectors evaluated once per expression and device (a runtime error counts as no match: the
    allocator would have stopped with it, so it does not reach here)."""

    def __init__(self, features: Features, cel_cost_limit: int) -> None:
        self.features = replace(features.cel, minor=features.minor)
        self.results: dict[tuple[str, DeviceID], bool] = {}
        self.variables: dict[DeviceID, dict[str, Any]] = {}
        self.cost = 0  # the evaluations' CEL cost, bounded by cel_cost_limit
        self.limit = cel_cost_limit

    def matches(self, expression: str, driver: str, device: Device, device_id: DeviceID) -> bool:
        key = (expression, device_id)
        found = self.results.get(key)
        if found is None:
            from numalign.k8s.dra.cel import selector as cel

            compiled = cel.compile_selector(expression, self.features)
            variables = self.variables.get(device_id)
            if variables is None:
                variables = cel.device_variables(driver, device.attributes, device.capacity,
                                                 device.allow_multiple_allocations, self.features)
                self.variables[device_id] = variables
            cost = 0
            try:
                if compiled.error is None:
                    found, cost = cel.matches_costed(compiled, variables)
                else:
                    found = False
            except cel.CELRuntimeError as exc:
                found, cost = False, exc.cost
            self.cost += cost
            if self.cost > self.limit:
                raise _TooCostlyError
            self.results[key] = found
        return found


def _request(
    claim: ResourceClaim, name: str, sub: DeviceSubRequest, cls: DeviceClass | None,
    devices: Sequence[tuple[ResourceSlice, Device]], node: NodeInfo, allocated: AllocatedState,
    held: Callable[[DeviceID], bool], features: Features, evaluator: _Selectors,
) -> RequestFinding:
    left = list(devices)
    steps: list[Step] = []
    selectors = [(f"class {sub.device_class_name} selector #{i}", s.expression)
                 for i, s in enumerate(cls.selectors if cls is not None else ())]
    selectors += [(f"request selector #{i}", s.expression) for i, s in enumerate(sub.selectors)]
    for what, expression in selectors:
        kept = [(s, d) for s, d in left if evaluator.matches(expression, s.driver, d, (s.driver, s.pool.name, d.name))]
        steps.append(Step(what, len(left), len(kept), expression))
        left = kept
    usable: list[DeviceID] = []
    n_held = n_tainted = n_capacity = n_other = 0
    admin = bool(sub.admin_access)
    for s, d in left:
        device_id = (s.driver, s.pool.name, d.name)
        if (s.per_device_node_selection and not node_matches(node, d.node_name, d.all_nodes, d.node_selector)) or (
                not features.device_binding_and_status and d.binding_conditions) or (
                not features.partitionable_devices and d.consumes_counters
                and features.generation.counters_off_rejects_device):
            n_other += 1
        elif not admin and held(device_id):
            n_held += 1
        elif features.device_taints and _tainted(d, sub):
            n_tainted += 1
        elif features.consumable_capacity and not _capacity_fits(sub, d, allocated.capacity.get(device_id, {}),
                                                                 features):
            n_capacity += 1
        else:
            usable.append(device_id)
    need = sub.count if sub.allocation_mode == "ExactCount" else len(left)
    return RequestFinding(claim.key, name, sub.device_class_name, sub.allocation_mode, need, len(devices),
                          tuple(steps), tuple(usable), n_held, n_tainted, n_capacity, n_other)


def _tainted(device: Device, sub: DeviceSubRequest) -> bool:
    return any(t.effect in ("NoExecute", "NoSchedule") and not any(tol.tolerates(t) for tol in sub.tolerations)
               for t in device.taints)


def _capacity_fits(sub: DeviceSubRequest, device: Device, consumed: Mapping[str, Any], features: Features) -> bool:
    try:
        return request_fits(consumed, sub.capacity.requests if sub.capacity else None, device.capacity, None,
                            features.capacity_rules)
    except (CapacityNotDefinedError, CapacityRequestError):
        return False


def _alternative_fits(finding: RequestFinding, findings: Sequence[RequestFinding]) -> bool:
    """A subrequest that is short while another subrequest of the same firstAvailable request is not:
    the request is not short."""
    base, sep, _ = finding.request.partition("/")
    return bool(sep) and any(f.claim == finding.claim and f.request.startswith(base + "/") and f.satisfied
                             for f in findings)


def _constraints(
    claims: Sequence[ResourceClaim], findings: Sequence[RequestFinding],
    devices: Sequence[tuple[ResourceSlice, Device]], features: Features,
) -> list[ConstraintFinding]:
    by_id = {(s.driver, s.pool.name, d.name): (s.driver, d) for s, d in devices}
    out: list[ConstraintFinding] = []
    for claim in claims:
        if claim.allocation is not None:
            continue
        mine = [f for f in findings if f.claim == claim.key and f.satisfied]
        for i, c in enumerate(claim.spec.constraints):
            attribute = c.match_attribute or c.distinct_attribute
            if attribute is None:
                continue
            names = frozenset(c.requests)
            # A request counts once: with subrequests, the first one that has enough devices (the allocator
            # tries them in order).
            chosen: dict[str, RequestFinding] = {}
            for f in mine:
                base, _, sub = f.request.partition("/")
                if matches_request(names, base, sub) and base not in chosen:
                    chosen[base] = f
            if not chosen:
                continue
            values: dict[str, dict[str, int]] = {}
            missing: list[str] = []
            for base, f in chosen.items():
                for device_id in f.usable:
                    driver, device = by_id[device_id]
                    attr = device.attribute(driver, attribute)
                    if attr is None:
                        if "/".join(device_id) not in missing:
                            missing.append("/".join(device_id))
                        continue
                    for value in _values(attr, features.list_types_in_constraints):
                        counts = values.setdefault(value, {})
                        counts[base] = counts.get(base, 0) + 1
            needs = tuple((base, f.need) for base, f in chosen.items())
            if c.match_attribute is not None:
                ok = any(all(counts.get(base, 0) >= n for base, n in needs) for counts in values.values())
                kind = "matchAttribute"
            else:
                ok = len(values) >= sum(n for _, n in needs)
                kind = "distinctAttribute"
            ordered = tuple((v, tuple((base, counts.get(base, 0)) for base, _ in needs))
                            for v, counts in sorted(values.items()))
            out.append(ConstraintFinding(claim.key, i, kind, attribute, tuple(chosen), ok, tuple(missing), ordered,
                                         needs))
    return out


def _values(attr: DeviceAttribute, list_types: bool) -> Iterable[str]:
    """The values a device offers a constraint, as text: one scalar, or (with list types) each value."""
    if attr.is_list and not list_types:
        return ()  # a list never equals a scalar before list types reach the constraints
    return tuple(go_quote(v) if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)
                 for v in attr.values)


def _together(findings: Sequence[RequestFinding], devices: Sequence[tuple[ResourceSlice, Device]]) -> str:
    """Every request has enough devices and every constraint a value on its own: the requests compete."""
    wanted: set[DeviceID] = set()
    need = 0
    for f in findings:
        base, sep, _ = f.request.partition("/")
        if sep and any(g.claim == f.claim and g.request.startswith(base + "/") and g is not f
                       and findings.index(g) < findings.index(f) for g in findings):
            continue  # one subrequest of a firstAvailable request counts
        wanted.update(f.usable)
        need += f.need
    counters = any(d.consumes_counters for _, d in devices)
    text = (f"each request has enough usable devices and each constraint a shared value on its own, but together "
            f"the requests need {need} device(s) of {len(wanted)} usable ones")
    if need <= len(wanted):
        text = (f"each request has enough usable devices ({need} needed of {len(wanted)}) and each constraint a shared "
                "value on its own, but no combination satisfies all of them at once")
    if counters:
        text += "; the devices consume shared counters (partitions), which may run out first"
    return text



def _devices(ids: Sequence[str]) -> str:
    """Device ids (driver/pool/device) grouped by pool: `gpu.example.com/node-a: gpu-0, gpu-1`, at most
    _NAMED named."""
    pools: dict[str, list[str]] = {}
    for device_id in ids[:_NAMED]:
        pool, _, name = device_id.rpartition("/")
        pools.setdefault(pool, []).append(name)
    named = "; ".join(f"{pool}: {', '.join(names)}" for pool, names in pools.items())
    return named + (f" and {len(ids) - _NAMED} more" if len(ids) > _NAMED else "")


def _short(expression: str) -> str:
    return expression if len(expression) <= _EXPRESSION else expression[:_EXPRESSION - 3] + "..."
