"""Kill -9 campaigns against a state directory: `numalign admit --state-dir` and `numalign serve`,
each SIGKILLed at random moments (seeded), the invariants checked after every kill as a restart reads
the directory (support.nodecheck), and nothing committed before a kill lost or changed after it.

Used by tests/integration/state/test_state_crash.py (a few kills, in CI) and scripts/soak (1,000).
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from numalign.k8s.kubeletconfig import KubeletConfig
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.machine.examples import example
from support.nodecheck import check_node, open_read_only, raw_record_uids

DATA = Path(__file__).resolve().parents[2] / "src" / "numalign" / "data"
CONFIG_FILE = DATA / "example-kubelet-config.yaml"
CLI = [sys.executable, "-m", "numalign.cli.main"]


@dataclass
class Figures:
    runs: int = 0
    kills: int = 0  # processes that were still running when killed
    checks: int = 0
    reruns: int = 0
    pods_admitted: int = 0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)

    def line(self, what: str) -> str:
        return (f"{what}: {self.kills} kills in {self.runs} runs, {self.checks} restarts checked, "
                f"{self.reruns} interrupted admits re-run, {self.pods_admitted} pods admitted, "
                f"{len(self.failures)} invariant failures, {self.seconds:.0f} s")


def _config() -> KubeletConfig:
    config = config_from_yaml(CONFIG_FILE.read_text(encoding="utf-8"), str(CONFIG_FILE))
    config.validate()
    return config


def _manifest(name: str, rng: random.Random, devices: bool, fits: bool = False) -> str:
    cpus, mem = (1, 1) if fits else (rng.randint(1, 12), rng.randint(1, 8))
    limits = f"cpu: {cpus}, memory: {mem}Gi"
    if devices and rng.random() < 0.3:
        limits += ", nvidia.com/gpu: 1"
    requests = limits if rng.random() < 0.8 else "cpu: 100m"
    return (f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n  containers:\n  - name: app\n"
            f"    resources: {{limits: {{{limits}}}, requests: {{{requests}}}}}\n")


class _Checker:
    def __init__(self, state: Path, figures: Figures) -> None:
        self.state = state
        self.figures = figures
        self.machine = example("dual-socket")
        self.config = _config()

    def check(self, committed: dict[str, Any], when: str) -> dict[str, Any]:
        """Invariants, and every pod in `committed` still held as it was; returns what is held now."""
        self.figures.checks += 1
        try:
            held = check_node(open_read_only(self.machine, self.config, self.state), self.state)
            for uid, cpus in committed.items():
                assert held.get(uid) == cpus, f"pod {uid} had {cpus} before the kill, {held.get(uid)} after"
            return held
        except AssertionError as e:
            self.figures.failures.append(f"{when}: {e}")
            return committed


def _run_killed(cmd: list[str], delay: float, figures: Figures, **kw: Any) -> subprocess.CompletedProcess[str]:
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    try:
        out, err = proc.communicate(timeout=delay)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        out, err = proc.communicate()
        figures.kills += 1
    figures.runs += 1
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def admit_campaign(work: Path, kills: int, seed: int) -> Figures:
    """`numalign admit POD --state-dir` killed at random moments; each interrupted admit is run again."""
    rng = random.Random(seed)
    figures = Figures()
    t0 = time.monotonic()
    state = work / "state"
    checker = _Checker(state, figures)
    committed: dict[str, Any] = {}
    started = time.monotonic()
    subprocess.run([*CLI, "admit", "--help"], check=True, capture_output=True)
    typical = max(time.monotonic() - started, 0.2) * 1.6  # startup plus an admission, roughly
    i = 0
    while figures.kills < kills:
        i += 1
        if i % 14 == 0:  # the machine is full by then: start a fresh node
            for p in sorted(state.rglob("*"), reverse=True):
                p.unlink() if not p.is_dir() else p.rmdir()
            committed = {}
        manifest = work / f"p{i}.yaml"
        manifest.write_text(_manifest(f"p{i}", rng, devices=True))
        cmd = [*CLI, "admit", str(manifest), "--state-dir", str(state), "--output", "json"]
        result = _run_killed(cmd, rng.uniform(0.0, typical), figures)
        committed = checker.check(committed, f"admit p{i} (exit {result.returncode})")
        uid = _uid(f"p{i}")
        if result.returncode == -signal.SIGKILL and uid not in committed:
            figures.reruns += 1
            result = subprocess.run(cmd, capture_output=True, text=True, check=False)
            figures.runs += 1
            if result.returncode != 0:
                figures.failures.append(f"re-run of admit p{i} failed: {result.stderr.strip()[:300]}")
            committed = checker.check(committed, f"re-run of admit p{i}")
        if result.returncode == 0:
            for rec in json.loads(result.stdout)["pods"]:
                if rec["result"]["admit"]:
                    figures.pods_admitted += 1
                    if rec["podUID"] not in committed:
                        figures.failures.append(f"pod {rec['pod']} reported admitted but not on disk")
        elif result.returncode != -signal.SIGKILL:
            figures.failures.append(f"admit p{i} exited {result.returncode}: {result.stderr.strip()[:300]}")
    figures.seconds = time.monotonic() - t0
    return figures


def _uid(name: str) -> str:
    from numalign.k8s.manifest import pod_uid

    return pod_uid("default", name)


def _wait_for_record(state: Path, uid: str, proc: subprocess.Popen[str]) -> bool:
    """Until the pod record on disk lists `uid` (True) or serve exits (False). No deadline: how long
    serve takes to start and admit depends on the machine's load, and the test's own timeout bounds it."""
    while proc.poll() is None:
        try:
            if uid in raw_record_uids(state):
                return True
        except (OSError, ValueError):
            pass  # not written yet (atomic writes: never half a file)
        time.sleep(0.05)
    return False


def serve_campaign(work: Path, kills: int, seed: int) -> Figures:
    """`numalign serve` killed at random moments while manifests come and go; restarted each time."""
    rng = random.Random(seed)
    figures = Figures()
    t0 = time.monotonic()
    state, manifests = work / "state", work / "manifests"
    manifests.mkdir(parents=True, exist_ok=True)
    checker = _Checker(state, figures)
    cmd = [*CLI, "serve", "--machine", "dual-socket", "--config", str(CONFIG_FILE), "--manifests", str(manifests),
           "--state-dir", str(state), "--device-plugin-dir", str(work / "dp"),
           "--pod-resources-socket", str(work / "pr" / "kubelet.sock"), "--log-level", "WARNING"]
    committed: dict[str, Any] = {}
    removed: set[str] = set()  # uids whose manifest is gone: a run may release them at any moment
    n = 0
    while figures.kills < kills:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if figures.runs == 0:
            # The precondition of the campaign, made explicit rather than assumed from timing: the first
            # serve has admitted a pod (its record is on disk) before any kill point is chosen.
            n += 1
            (manifests / f"s{n}.yaml").write_text(_manifest(f"s{n}", rng, devices=False, fits=True))
            if not _wait_for_record(state, _uid(f"s{n}"), proc):
                proc.kill()
                _, err = proc.communicate()
                figures.failures.append(f"the first serve admitted no pod (exit {proc.returncode}): "
                                        f"{err.strip()[-300:]}")
                break
            figures.pods_admitted = 1  # seen on disk; the checks after each kill count what stays held
        deadline = time.monotonic() + rng.uniform(0.3, 2.5)
        while time.monotonic() < deadline and proc.poll() is None:
            present = sorted(manifests.glob("*.yaml"))
            if present and (len(present) > 10 or rng.random() < 0.35):
                gone = rng.choice(present)
                gone.unlink()
                removed.add(_uid(gone.stem))
            else:
                n += 1
                (manifests / f"s{n}.yaml").write_text(_manifest(f"s{n}", rng, devices=False))
            time.sleep(rng.uniform(0.0, 0.3))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            figures.kills += 1
        _, err = proc.communicate()
        figures.runs += 1
        if proc.returncode not in (-signal.SIGKILL,):
            figures.failures.append(f"serve exited {proc.returncode}: {err.strip()[-300:]}")
        keep = {uid: cpus for uid, cpus in committed.items() if uid not in removed}
        committed = checker.check(keep, f"serve run {figures.runs}")
        stale = set(committed) & removed
        committed = {uid: cpus for uid, cpus in committed.items() if uid not in stale}
        figures.pods_admitted = max(figures.pods_admitted, len(committed))
    figures.seconds = time.monotonic() - t0
    return figures

