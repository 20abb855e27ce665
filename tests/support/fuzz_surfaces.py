"""The input surfaces numalign's fuzz campaign attacks: for each, seeds (real inputs), Hypothesis
strategies that damage them, and a target that feeds one damaged input to numalign.

A target returns "result" or "error" (a NumalignError, whose message must be one line); anything
else it raises is a finding. Memory and time are bounded by the campaign's process (fuzz_campaign).
"""

from __future__ import annotations

import bz2
import io
import json
import os
import random
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from numalign.errors import NumalignError
from support.shared import hwloc_linux_dir, shared_dir

SRC_DATA = Path(__file__).resolve().parents[2] / "src" / "numalign" / "data"

# Inputs that broke numalign before it bounded them (issue 16), always among the candidates.
BOMBS: list[str] = [
    "[" * 1000 + "]" * 1000,
    "- " * 30_000 + "a",
    "{" + '"a":{' * 5000 + "}" * 5001,
    "a: " + "1" * 5000,
    '{"cpu": "' + "9" * 5000 + '"}',
    "kind: Deployment\nmetadata: {name: d}\nspec: {replicas: 1000000000, template: {spec: {containers: [{name: c, "
    "image: i, resources: {limits: {cpu: '1'}}}]}}}\n",
    "cpus: 0-999999999\n",
    "reservedSystemCPUs: 0-999999999\n",
]


@dataclass
class Surface:
    name: str
    inputs: st.SearchStrategy[Any]
    target: Callable[[Any, Path], str]


_STRUCTURE = ["{", "[", "]", "}", ":", "- ", "\n  ", "'", '"', "#", "&a ", "*a", "!!", "\t"]
_NUMBERS = ["-1", "1e308", "0x", "1Ei", "nan", "999999999"]


def _mutate_text(seed: str, rng: random.Random) -> str:
    """Byte-level damage: cut, duplicate, flip, insert structure characters or huge numbers."""
    s = seed
    for _ in range(rng.randint(1, 4)):
        if not s:
            s = rng.choice(BOMBS)
        i = rng.randrange(len(s))
        j = min(len(s), i + rng.randint(1, 40))
        op = rng.randrange(8)
        if op == 0:
            s = s[:i] + s[j:]
        elif op == 1:
            s = s[:j] + s[i:j] * rng.randint(2, 50) + s[j:]
        elif op == 2:
            s = s[:i] + chr(rng.randrange(1, 0x300)) + s[i + 1:]
        elif op == 3:
            s = s[:i] + rng.choice(_STRUCTURE) + s[i:]
        elif op == 4:
            s = s[:i] + rng.choice(["9" * rng.randint(5, 5000), *_NUMBERS]) + s[j:]
        elif op == 5:
            s = s[:i] + rng.choice(BOMBS) + s[j:]
        elif op == 6:
            s = s[:i] + s[j:] + s[i:j]
        else:
            s = s[:i] + "\n" + s[i:]
    return s


def _texts(seeds: list[str]) -> st.SearchStrategy[str]:
    mutated = st.builds(lambda seed, r: _mutate_text(seed, random.Random(r)), st.sampled_from(seeds),
                        st.integers(0, 2**32))
    return st.one_of(mutated, st.sampled_from(BOMBS), st.text(max_size=200))


def _json_values() -> st.SearchStrategy[Any]:
    return st.one_of(st.sampled_from([-1, 0, 1, 64, 1023, 1024, 8192, 2**63, 10**30, 1.5, float("nan"), True, None,
                                      "x", "0-999999999", [], {}, [0, 0], {"0": [10]}]),
                     st.integers(), st.text(max_size=20))


def _mutate_json(obj: Any, rng: random.Random, values: list[Any]) -> Any:
    """Replace, delete or duplicate one value somewhere in a decoded JSON document."""
    paths: list[tuple[Any, Any]] = []
    stack = [obj]
    while stack:
        v = stack.pop()
        items = v.items() if isinstance(v, dict) else enumerate(v) if isinstance(v, list) else ()
        for k, x in items:
            paths.append((v, k))
            stack.append(x)
    for _ in range(rng.randint(1, 3)):
        if not paths:
            break
        parent, key = rng.choice(paths)
        r = rng.random()
        if r < 0.15 and isinstance(parent, dict) and key in parent:
            del parent[key]
        elif r < 0.25 and isinstance(parent, list) and isinstance(key, int) and key < len(parent):
            parent.append(parent[key])
        elif (isinstance(parent, dict) and key in parent) or (isinstance(parent, list) and key < len(parent)):
            parent[key] = rng.choice(values)
    return obj


def _json_docs(seeds: list[Any]) -> st.SearchStrategy[str]:
    def build(seed: Any, r: int, values: list[Any]) -> str:
        return json.dumps(_mutate_json(json.loads(json.dumps(seed)), random.Random(r), values))
    return st.builds(build, st.sampled_from(seeds), st.integers(0, 2**32), st.lists(_json_values(), min_size=1,
                                                                                        max_size=5))


def _outcome(fn: Callable[[], object]) -> str:
    try:
        fn()
    except NumalignError as e:
        if "\n" in str(e):
            raise AssertionError(f"a numalign error of more than one line: {str(e)[:300]!r}") from e
        return "error"
    return "result"


# ---- surfaces ----------------------------------------------------------------------------------------


def manifest_surface() -> Surface:
    from numalign.k8s.manifest import pods_from_yaml

    seeds = [(SRC_DATA / n).read_text() for n in ("example-pods.yaml", "example-mix.yaml")]
    return Surface("manifests", st.one_of(_texts(seeds), _json_docs([json.loads(json.dumps(d)) for d in
                                                                    _yaml_docs(seeds)])),
                   lambda text, _: _outcome(lambda: pods_from_yaml(text, "fuzz.yaml", expand_replicas=True)))


def _yaml_docs(texts: list[str]) -> list[Any]:
    import yaml

    return [d for t in texts for d in yaml.safe_load_all(t) if d is not None]


def kubelet_config_surface() -> Surface:
    from numalign.k8s.kubeletconfig_read import config_from_yaml

    seeds = [(SRC_DATA / "example-kubelet-config.yaml").read_text()]

    def target(text: str, _: Path) -> str:
        def run() -> None:
            cfg = config_from_yaml(text, "fuzz-config.yaml")
            cfg.validate()
            cfg.reserved_cpus()
        return _outcome(run)
    return Surface("kubelet-config", st.one_of(_texts(seeds), _json_docs(_yaml_docs(seeds))), target)


def machine_surface() -> Surface:
    from numalign.adapters.sysfs import load_machine
    from numalign.machine.cadvisor import machine_to_cadvisor
    from numalign.machine.examples import EXAMPLES, example
    from numalign.machine.fileformat import machine_to_dict

    docs: list[Any] = []
    for name in ("dual-socket", "epyc-nps4"):
        docs += [machine_to_dict(example(name)), machine_to_cadvisor(example(name))]
    assert EXAMPLES

    def target(text: str, tmp: Path) -> str:
        path = tmp / "machine.json"
        path.write_text(text, encoding="utf-8", errors="replace")
        return _outcome(lambda: load_machine(str(path)))
    texts = [json.dumps(d) for d in docs]
    return Surface("machine-files", st.one_of(_json_docs(docs), _texts(texts)), target)


def replay_surface() -> Surface:
    from numalign.replay.runner import replay_lines

    seeds: list[Any] = []
    for f in sorted((shared_dir() / "oracle").glob("*.jsonl")):
        with f.open() as fh:
            seeds += [json.loads(line) for _, line in zip(range(60), fh, strict=False)]

    def target(line: str, _: Path) -> str:
        outs = list(replay_lines([line], "fuzz.jsonl"))
        if not outs:
            return "result"  # a blank line: nothing to replay
        (out,) = outs
        if out.error is not None and "\n" in out.error:
            raise AssertionError(f"a replay error of more than one line: {out.error[:300]!r}")
        return "error" if out.error is not None else "result"
    return Surface("replay-vectors", st.one_of(_json_docs(seeds), _texts([json.dumps(seeds[0])])), target)


_SYSFS_DUMP = "8ia64-2n2s2c"
_files: dict[Path, list[Path]] = {}


def _sysfs_root(tmp: Path) -> Path:
    from support.dumps import _KEEP

    dest = tmp / "sysfs-seed"
    if not dest.exists():
        data = io.BytesIO(bz2.decompress((hwloc_linux_dir() / f"{_SYSFS_DUMP}.tar.bz2").read_bytes()))
        with tarfile.open(fileobj=data) as tf:
            tf.extractall(dest, members=[m for m in tf.getmembers() if _KEEP.match(m.name)], filter="data")
    (inner,) = [p for p in dest.iterdir() if (p / "sys").is_dir()]
    return inner


def sysfs_surface() -> Surface:
    from numalign.adapters.sysfs import discover_sysfs, discover_sysfs_hwloc

    def target(damage: tuple[int, int, str], tmp: Path) -> str:
        which, how, text = damage
        root = _sysfs_root(tmp)
        files = _files.get(root)
        if files is None:
            files = _files[root] = sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
        victim = files[which % len(files)]
        original = victim.read_bytes()
        victim.unlink()
        try:
            if how == 0:
                victim.write_text(text)
            elif how == 1:
                victim.symlink_to("/dev/zero")
            elif how == 2:
                os.mkfifo(victim)
            else:
                victim.write_bytes(b"f" * (2 << 20))
            r1 = _outcome(lambda: discover_sysfs(root))
            r2 = _outcome(lambda: discover_sysfs_hwloc(root))
        finally:  # the same tree serves the next input
            victim.unlink()
            victim.write_bytes(original)
        return "result" if "result" in (r1, r2) else "error"
    damage = st.tuples(st.integers(0, 10_000), st.sampled_from([0, 0, 0, 0, 1, 2, 3]),
                       st.one_of(st.sampled_from(["", "-1", "0-999999999", "ffffffff," * 300, "9" * 5000,
                                                  "MemTotal: 99999999999999999999999 kB", "10 20", "x"]),
                                 st.text(max_size=40)))
    return Surface("sysfs-trees", damage, target)


def state_surface() -> Surface:
    from numalign.adapters.statedir.directory import state_directory
    from numalign.k8s.kubeletconfig_read import config_from_yaml
    from numalign.k8s.manifest import pods_from_yaml
    from numalign.kubelet.node import Node
    from numalign.machine.examples import example

    config = config_from_yaml((SRC_DATA / "example-kubelet-config.yaml").read_text(), "example")
    machine = example("dual-socket")
    files = ["cpu_manager_state", "memory_manager_state", "device-plugins/kubelet_internal_checkpoint",
             "numalign_pods.json"]

    def target(damage: tuple[int, int, str], tmp: Path) -> str:
        import shutil

        which, r, text = damage
        seed = tmp / "state-seed"
        if not seed.exists():
            node = Node(machine, config, store=state_directory(seed))
            for pod in pods_from_yaml((SRC_DATA / "example-pods.yaml").read_text(), "example"):
                node.admit(pod)
        state = tmp / "state"
        if state.exists():
            shutil.rmtree(state)
        shutil.copytree(seed, state)
        victim = state / files[which % len(files)]
        original = victim.read_text()
        try:
            doc = json.loads(original)
            damaged = json.dumps(_mutate_json(doc, random.Random(r), [text, 10**30, -1, None, [], {}, "0-999999999"]))
        except ValueError:
            damaged = original
        if r % 3 == 0:
            damaged = _mutate_text(original, random.Random(r))
        victim.write_text(damaged)
        return _outcome(lambda: Node(machine, config, store=state_directory(state, read_only=True)))
    damage = st.tuples(st.integers(0, 3), st.integers(0, 2**32), st.text(max_size=30))
    return Surface("state-files", damage, target)


SURFACES: dict[str, Callable[[], Surface]] = {
    "manifests": manifest_surface,
    "kubelet-config": kubelet_config_surface,
    "machine-files": machine_surface,
    "replay-vectors": replay_surface,
    "sysfs-trees": sysfs_surface,
    "state-files": state_surface,
}
