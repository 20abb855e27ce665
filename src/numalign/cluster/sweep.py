"""A sweep: every combination of schedulers x Topology Manager policies, scopes and options x CPU and
memory manager settings, each an independent run, executed here, in local worker processes or on a
Dask cluster. Runs are pure functions of (cluster, workload, spec, seed), so where they run never
changes a result; results come back in sweep order.

Sweep file (YAML), every axis optional (absent: the cluster's own setting):

    kind: Sweep
    schedulers: [default, exact, nrt]
    scoring: {exact: LeastNUMANodes}        # per scheduler; default LeastAllocated
    topologyManagerPolicies: [single-numa-node, restricted]
    topologyManagerScopes: [container, pod]
    topologyManagerPolicyOptions: ["", "prefer-closest-numa-nodes=true"]
    cpuManagerPolicyOptions: ["", "full-pcpus-only=true"]
    memoryManagerPolicies: [Static]
    kubeletVersions: ["1.35", "1.36.2"]      # X.Y or X.Y.Z; absent: each pool keeps its own version
    previews: ["", "numa-allocation-strategy=most-allocated"]   # sets of previews joined by ';'; '' = none
"""

from __future__ import annotations

import copyreg
import functools
import hashlib
import importlib.util
import itertools
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numalign.cluster.model import Cluster
from numalign.cluster.result import RunResult
from numalign.cluster.simulate import SCHEDULERS, SCORING, RunSpec, run_one
from numalign.cluster.workload import Workload
from numalign.errors import InvalidInputError
from numalign.validation import expect_list


def _mappingproxy(d: dict[Any, Any]) -> types.MappingProxyType[Any, Any]:
    return types.MappingProxyType(d)


def _reduce_mappingproxy(m: types.MappingProxyType[Any, Any]) -> tuple[Any, tuple[dict[Any, Any]]]:
    return _mappingproxy, (dict(m),)


# Machines keep read-only mappings (MappingProxyType), which pickle cannot send to a worker process
# or a Dask worker; they travel as plain dicts and are wrapped again on arrival.
copyreg.pickle(types.MappingProxyType, _reduce_mappingproxy)

AXES = {
    "topologyManagerPolicies": "--topology-manager-policy",
    "topologyManagerScopes": "--topology-manager-scope",
    "topologyManagerPolicyOptions": "--topology-manager-policy-options",
    "cpuManagerPolicies": "--cpu-manager-policy",
    "cpuManagerPolicyOptions": "--cpu-manager-policy-options",
    "memoryManagerPolicies": "--memory-manager-policy",
}
# Axes that are not kubelet flags: the kubelet version the pools run, and sets of previews.
VERSION_AXIS = "kubeletVersions"
PREVIEW_AXIS = "previews"
NODE_AXES = (VERSION_AXIS, PREVIEW_AXIS)
POLICIES = ("none", "best-effort", "restricted", "single-numa-node")


@dataclass
class Sweep:
    schedulers: list[str] = field(default_factory=lambda: ["default", "exact"])
    scoring: dict[str, str] = field(default_factory=dict)
    axes: dict[str, list[str]] = field(default_factory=dict)  # sweep-file key -> values

    def specs(self, where: str = "the sweep") -> list[RunSpec]:
        self.check(where)
        names = list(self.axes)
        combos = itertools.product(*(self.axes[n] for n in names)) if names else [()]
        specs = []
        for combo in combos:
            flags: list[tuple[str, str]] = []
            node: dict[str, str] = {}
            for name, value in zip(names, combo, strict=True):
                if name in NODE_AXES:
                    node[name] = value
                else:
                    flags += _flags(name, value)
            for s in self.schedulers:
                specs.append(RunSpec(s, self.scoring.get(s, "LeastAllocated"), tuple(flags),
                                     node.get(VERSION_AXIS), node.get(PREVIEW_AXIS)))
        return specs

    def check(self, where: str) -> None:
        if not self.schedulers:
            raise InvalidInputError(f"{where}: schedulers: empty; expected some of {', '.join(SCHEDULERS)}")
        for s in self.schedulers:
            RunSpec(s, self.scoring.get(s, "LeastAllocated")).check(f"{where}: schedulers")
        for s, strategy in self.scoring.items():
            if s not in self.schedulers:
                raise InvalidInputError(f"{where}: scoring.{s}: scheduler {s!r} is not in schedulers "
                                        f"{self.schedulers}; add it or drop its scoring")
            RunSpec(s, strategy).check(f"{where}: scoring.{s}")
        for name, values in self.axes.items():
            if name not in AXES and name not in NODE_AXES:
                raise InvalidInputError(f"{where}: {name}: unknown axis; expected one of "
                                        f"{', '.join([*AXES, *NODE_AXES])}")
            if not values:
                raise InvalidInputError(f"{where}: {name}: empty; give at least one value or leave the axis out")
            dupes = sorted({v for v in values if values.count(v) > 1})
            if dupes:
                raise InvalidInputError(f"{where}: {name}: {dupes[0]!r} is listed twice; each value once")
        policies = self.axes.get("topologyManagerPolicies", [])
        bad = [p for p in policies if p not in POLICIES]
        if bad:
            raise InvalidInputError(f"{where}: topologyManagerPolicies: {bad[0]!r}; expected {', '.join(POLICIES)}")
        if policies == ["none"] and any(o for o in self.axes.get("topologyManagerPolicyOptions", [])):
            raise InvalidInputError(f"{where}: topologyManagerPolicyOptions given but the only policy is none, which "
                                    "ignores them (the kubelet's Topology Manager reads no options under none), so "
                                    "the axis changes nothing; add a policy or drop the options")


    def check_against(self, cluster: Cluster, where: str) -> None:
        """Start every pool's kubelet under each combination now, so that a value the kubelet refuses is
        named with its file here instead of failing inside a worker process."""
        for name, values in self.axes.items():
            for value in values:
                bad = [kv for kv in _options(value) if "=" not in kv] if name.endswith("Options") else []
                if bad:
                    raise InvalidInputError(f"{where}: {name}: {value!r}: {bad[0]!r} is not KEY=VALUE; expected "
                                            'pairs joined by commas, e.g. "prefer-closest-numa-nodes=true"')
        for spec in dict.fromkeys(RunSpec("default", "LeastAllocated", s.kubelet_flags, s.kubelet_version, s.previews)
                                  for s in self.specs(where)):
            try:
                for pool in spec.cluster(cluster).pools:
                    pool.new_node()
            except InvalidInputError as e:
                combo = " ".join([*(f"{flag} {value}" for flag, value in spec.kubelet_flags),
                                  *([f"kubelet {spec.kubelet_version}"] if spec.kubelet_version else []),
                                  *([f"previews {spec.previews!r}"] if spec.previews is not None else [])])
                raise InvalidInputError(f"{where}: the run with {combo}: {e}") from None


def _flags(name: str, value: str) -> list[tuple[str, str]]:
    flag = AXES[name]
    return [(flag, kv) for kv in _options(value)] if name.endswith("Options") else [(flag, value)]


def _options(value: str) -> list[str]:
    return [kv.strip() for kv in value.split(",") if kv.strip()]


def load_sweep(path: Path) -> Sweep:
    from numalign.adapters.textfiles import load_document

    obj = load_document(path, "the sweep file", "kind: Sweep with axes (docs/cluster-format.md)")
    return sweep_from_dict(obj, str(path))


def sweep_from_dict(obj: Any, where: str) -> Sweep:
    if not isinstance(obj, Mapping) or obj.get("kind", "Sweep") != "Sweep":
        raise InvalidInputError(f"{where}: expected kind: Sweep with axes such as topologyManagerPolicies")
    known = {"kind", "schedulers", "scoring", *AXES, *NODE_AXES}
    unknown = sorted(set(obj) - known)
    if unknown:
        raise InvalidInputError(f"{where}: {unknown[0]}: unknown field; expected one of {', '.join(sorted(known))}")
    sweep = Sweep()
    if "schedulers" in obj:
        schedulers = expect_list(obj["schedulers"], f"{where}: schedulers", required=True)
        sweep.schedulers = [str(s) for s in schedulers]
    scoring = obj.get("scoring") or {}
    if not isinstance(scoring, Mapping):
        raise InvalidInputError(f"{where}: scoring: expected scheduler: strategy, e.g. {{exact: LeastNUMANodes}}")
    sweep.scoring = {str(k): str(v) for k, v in scoring.items()}
    for name in (*AXES, *NODE_AXES):
        if name in obj:
            values = expect_list(obj[name], f"{where}: {name}", required=True)
            for i, v in enumerate(values):
                if isinstance(v, (Mapping, list)):
                    example = {"topologyManagerPolicyOptions": '"prefer-closest-numa-nodes=true"',
                               "cpuManagerPolicyOptions": '"full-pcpus-only=true"'}.get(name, "a name")
                    raise InvalidInputError(f"{where}: {name}[{i}]: expected a string, got {v!r}; write it as "
                                            f"{example}" + (" (KEY=VALUE pairs joined by commas)"
                                                            if name.endswith("Options") else ""))
            sweep.axes[name] = ["" if v is None else str(v) for v in values]
    sweep.check(where)
    return sweep


# A worker process's end of the progress channel (set by _init_worker when the caller follows progress).
_CHANNEL: Any = None
# How many progress messages a run sends at most (one per this share of its pods).
PROGRESS_STEPS = 200


def _init_worker(channel: Any) -> None:
    global _CHANNEL
    _CHANNEL = channel


def _run(args: tuple[Cluster, Workload, RunSpec, int, int, int]) -> RunResult:
    cluster, workload, spec, seed, max_retries, index = args
    channel = _CHANNEL
    if channel is None:
        return run_one(cluster, workload, spec, seed, max_retries)
    step = max(1, workload.pod_count() // PROGRESS_STEPS)
    # A SimpleQueue writes to its pipe before put() returns (no feeder thread), so the parent reads a
    # run's messages before its result: the start is always shown, however short the run.
    channel.put((index, 0))

    def report(placed: int) -> None:
        if placed % step == 0:
            channel.put((index, placed))

    return run_one(cluster, workload, spec, seed, max_retries, progress=report)


def _relay(channel: Any, placed: Callable[[int, int], None] | None) -> None:
    while channel is not None and not channel.empty():
        index, count = channel.get()
        if placed is not None:
            placed(index, count)


def _run_shared(cluster: Cluster, workload: Workload, spec: RunSpec, seed: int, max_retries: int,
                index: int = 0, channel: str | None = None) -> RunResult:
    """One run on a Dask worker. `channel`: the name of a distributed.Queue the client follows, which
    gets [index, pods placed] at the start and every 1/PROGRESS_STEPS of the pods, as from local workers.
    Queue.put returns once the scheduler holds the message, so it is there before the run's result."""
    if channel is None:
        return run_one(cluster, workload, spec, seed, max_retries)
    from distributed import Queue

    queue = Queue(channel)  # type: ignore[no-untyped-call]  # distributed is untyped
    step = max(1, workload.pod_count() // PROGRESS_STEPS)
    queue.put([index, 0])  # type: ignore[no-untyped-call]

    def report(placed: int) -> None:
        if placed % step == 0:
            queue.put([index, placed])  # type: ignore[no-untyped-call]

    return run_one(cluster, workload, spec, seed, max_retries, progress=report)


def run_sweep(cluster: Cluster, workload: Workload, specs: Sequence[RunSpec], seed: int, max_retries: int, *,
              jobs: int = 1, dask: str | None = None, connect_timeout: float = 10.0,
              done: Callable[[int, RunResult], None] | None = None,
              placed: Callable[[int, int], None] | None = None) -> list[RunResult]:
    """Every run, in `specs` order. jobs > 1: local worker processes; dask: a dask.distributed scheduler.
    `done(i, result)` follows finished runs; `placed(i, pods)` the pods placed so far in a run, from
    this process, from the local workers or from the Dask workers (every 1/PROGRESS_STEPS of the pods,
    a run's start always before its result)."""
    tasks = [(cluster, workload, spec, seed, max_retries) for spec in specs]
    results: list[RunResult | None] = [None] * len(tasks)

    def finished(i: int, r: RunResult) -> None:
        results[i] = r
        if done is not None:
            done(i, r)

    if dask is not None:
        _on_dask(dask, tasks, finished, connect_timeout, placed)
    elif jobs > 1 and len(tasks) > 1:
        # Imported here: a run in this process (--jobs 1, the default for one run) needs no worker pool.
        import multiprocessing
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

        context = multiprocessing.get_context()
        channel = context.SimpleQueue() if placed is not None else None
        with ProcessPoolExecutor(max_workers=min(jobs, len(tasks)), mp_context=context,
                                 initializer=_init_worker, initargs=(channel,)) as pool:
            futures = {pool.submit(_run, (*t, i)): i for i, t in enumerate(tasks)}
            running = set(futures)
            while running:
                ended, running = wait(running, timeout=0.2 if channel is not None else None,
                                      return_when=FIRST_COMPLETED)
                _relay(channel, placed)
                for f in sorted(ended, key=lambda f: futures[f]):
                    finished(futures[f], f.result())
    else:
        for i, (c, w, spec, s, retries) in enumerate(tasks):
            def step(n: int, i: int = i) -> None:
                if placed is not None:
                    placed(i, n)

            finished(i, run_one(c, w, spec, s, retries, progress=step if placed is not None else None))
    return [r for r in results if r is not None]


# Dask is an extra (`numalign[dask]`): a node-only install has no dask.distributed.
DASK_MISSING = ("--dask needs dask.distributed, which is not installed here; expected numalign's Dask extra: "
                "pip install 'numalign[dask]'")


def check_dask_installed() -> None:
    """Refuse --dask before any work when the Dask extra is missing (one line naming the fix)."""
    if importlib.util.find_spec("distributed") is None:
        raise InvalidInputError(DASK_MISSING)


@functools.cache
def numalign_version() -> str:
    """This process's numalign: the release and a digest of the package's source, so two checkouts of
    one release that differ still tell apart (a worker deciding with other code would give other
    results under the same seed)."""
    import importlib.metadata  # asked only of --dask runs: importing it is 30-80 ms of every command's start

    try:
        release = importlib.metadata.version("numalign")
    except importlib.metadata.PackageNotFoundError:
        release = "unreleased"
    package = Path(__file__).resolve().parents[1]  # the numalign package: cluster/sweep.py sits in it
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
    return f"{release} (source {digest.hexdigest()[:12]})"


def _check_workers(client: Any, address: str) -> None:
    """Refuse a Dask cluster whose workers run another numalign than this client (one line)."""
    mine = numalign_version()
    theirs: dict[str, str] = client.run(numalign_version)
    for worker, version in sorted(theirs.items()):
        if version != mine:
            raise InvalidInputError(
                f"--dask {address}: worker {worker} runs numalign {version}, this client numalign {mine}; "
                "expected the same numalign on every worker: install this version on the workers")


def _on_dask(address: str, tasks: Iterable[tuple[Cluster, Workload, RunSpec, int, int]],
             finished: Callable[[int, RunResult], None], connect_timeout: float,
             placed: Callable[[int, int], None] | None = None) -> None:
    try:
        from distributed import Client, Queue, wait
    except ImportError:
        raise InvalidInputError(DASK_MISSING) from None
    try:
        client = Client(address, timeout=connect_timeout)  # type: ignore[no-untyped-call]  # distributed is untyped
    except (OSError, TimeoutError) as e:
        raise InvalidInputError(f"--dask {address}: cannot reach a Dask scheduler there ({e}); expected the "
                                "address of a running scheduler, e.g. tcp://10.0.0.5:8786") from None
    try:
        task_list = list(tasks)
        if not task_list:
            return
        _check_workers(client, address)
        # Progress travels through a queue the scheduler keeps (a random name: one per sweep).
        channel = Queue(client=client) if placed is not None else None  # type: ignore[no-untyped-call]
        # The cluster and the workload are the same for every run: sent to each worker once, not per run.
        cluster, workload = task_list[0][0], task_list[0][1]
        shared = client.scatter([cluster, workload], broadcast=True)  # type: ignore[no-untyped-call]
        futures = [client.submit(_run_shared, shared[0], shared[1], spec, seed, retries, i,
                                 None if channel is None else channel.name, pure=False)
                   for i, (_c, _w, spec, seed, retries) in enumerate(task_list)]
        index = {f.key: i for i, f in enumerate(futures)}
        running = set(futures)
        while running:
            try:
                ended, running = wait(running, timeout=0.2 if channel is not None else None,  # type: ignore[no-untyped-call]
                                      return_when="FIRST_COMPLETED")
            except TimeoutError:
                ended = set()
            if channel is not None and placed is not None:
                # Drained before the results: a run's messages are shown before it is done.
                for i, n in channel.get(batch=True):  # type: ignore[no-untyped-call]
                    placed(int(i), int(n))
            for f in sorted(ended, key=lambda f: index[f.key]):
                finished(index[f.key], f.result())
    finally:
        client.close()  # type: ignore[no-untyped-call]


def specs_from_args(schedulers: Sequence[str], scoring: Mapping[str, str],
                    axes: Mapping[str, Sequence[str]]) -> list[RunSpec]:
    """Runs of command-line axes; `axes` keys are sweep-file names (AXES, kubeletVersions, previews)."""
    sweep = Sweep(list(schedulers) or ["default", "exact"], dict(scoring),
                  {k: list(v) for k, v in axes.items() if v})
    return sweep.specs("the command line")


__all__ = [
    "AXES",
    "DASK_MISSING",
    "NODE_AXES",
    "PREVIEW_AXIS",
    "SCHEDULERS",
    "SCORING",
    "VERSION_AXIS",
    "Sweep",
    "check_dask_installed",
    "load_sweep",
    "numalign_version",
    "run_sweep",
    "specs_from_args",
]
