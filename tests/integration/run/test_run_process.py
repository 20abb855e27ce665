"""`numalign run` on this host with real processes: the kernel's view of what was applied, the exit
status and signals, concurrent runs, a kill -9 of the supervisor.

The decision is made for this host (read from /sys, as `numalign discover` reads it) with the
built-in run configuration, which reserves CPU 0: every test asks for one CPU, which fits a 2-CPU
machine and any larger one. Commands report what the kernel applied to themselves (/proc/self) on
stdout, then wait on stdin, so nothing here depends on timing.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.schemas import validate

from numalign.adapters.statedir.layout import POD_RECORD_FILE
from numalign.adapters.statedir.podrecord import decode_pod_record, encode_pod_record
from numalign.cli.main import main
from numalign.k8s.cpuset import parse_cpuset

# Prints what the kernel applied to this process, then waits until stdin closes.
PROBE = r"""
import json, os, sys
status = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
policies = sorted({w for l in open("/proc/self/numa_maps") for w in l.split()[1:2]})
cgroup = next(l.split("::", 1)[1].strip() for l in open("/proc/self/cgroup") if l.startswith("0::"))
print(json.dumps({"pid": os.getpid(), "cpus": status["Cpus_allowed_list"].strip(),
                  "mems": status["Mems_allowed_list"].strip(), "policies": policies, "cgroup": cgroup,
                  "env": {k: v for k, v in os.environ.items()
                          if k.startswith(("NUMALIGN_DEVICES_", "CUDA_"))},
                  "marker": os.environ.get("NUMALIGN_RUN")}), flush=True)
sys.stdin.read()
"""


def numalign(state: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "numalign.cli.main", "run", "--state-dir", str(state), "-o", "json", *args]


def start(state: Path, *args: str, command: list[str] | None = None, **kw: Any) -> subprocess.Popen[str]:
    cmd = numalign(state, *args, "--", *(command or [sys.executable, "-c", PROBE]))
    return subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)


def decision(stderr: str) -> dict[str, Any]:
    """run -o json's document (docs/schemas/run.schema.json), validated against its schema."""
    doc: dict[str, Any] = json.loads(stderr[stderr.index("{"):])
    validate("run", doc)
    return doc


def finish(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate("", timeout=60)
    return proc.returncode, out, err


def state_pods(state: Path) -> list[dict[str, Any]]:
    path = state / "numalign_pods.json"
    return json.loads(path.read_text())["pods"] if path.exists() else []


def test_run_applies_affinity_memory_binding_and_cgroup_then_releases(tmp_path: Path) -> None:
    state = tmp_path / "state"
    proc = start(state, "--cpus", "1", "--memory", "64Mi")
    seen = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
    # While it runs, the state holds its pod with the process that holds it.
    (pod,) = state_pods(state)
    assert pod["process"]["pid"] == seen["pid"]
    assert pod["process"]["command"][:2] == [sys.executable, "-c"]
    stat = Path(f"/proc/{seen['pid']}/stat").read_text()
    assert pod["process"]["start_time"] == int(stat[stat.rindex(")") + 2:].split()[19])
    cgroup = None
    doc_err = ""
    if pod["process"].get("cgroup"):
        cgroup = Path(pod["process"]["cgroup"])
        assert cgroup.is_dir() and str(cgroup).endswith(seen["cgroup"])
        files = {f: (cgroup / f).read_text().strip() for f in ("cpuset.cpus", "cpuset.mems", "memory.max")
                 if (cgroup / f).exists()}
    code, _, err = finish(proc)
    doc_err = err
    doc = decision(doc_err)
    assert code == 0
    assert doc["decision"]["result"]["admit"] is True
    given = doc["decision"]["allocations"]["main"]
    assert given["exclusiveCPUs"] is True and len(parse_cpuset(given["cpus"])) == 1
    assert doc["summary"] == {"pod": doc["decision"]["pod"], "admitted": True, "reason": "", "message": ""}
    # What the kernel applied is what was decided.
    assert parse_cpuset(seen["cpus"]) == parse_cpuset(given["cpus"]) == frozenset(doc["placement"]["cpus"])
    nodes = sorted({n for b in given["memory"] for n in b["numaNodes"]})
    assert nodes == doc["placement"]["mems"]
    assert f"bind:{','.join(map(str, nodes))}" in seen["policies"]
    # cgroup v2: every control was applied or named as not applied, with the reason.
    info = doc["cgroup"]
    assert set(info["applied"]) | set(info["notApplied"]) >= {"cpuset.cpus", "cpuset.mems", "memory.max"}
    if info["notApplied"]:
        assert info["reason"] and any(info["reason"] in n for n in doc["notes"])
    if cgroup is not None:
        expected = {"cpuset.cpus": given["cpus"], "cpuset.mems": ",".join(map(str, nodes)),
                    "memory.max": str(64 << 20)}
        for f in info["applied"]:
            if f in expected:
                assert files[f] == expected[f]
        assert not cgroup.exists()  # removed with the run
    # Released: nothing allocated afterwards.
    assert state_pods(state) == []
    cpu_state = json.loads((state / "cpu_manager_state").read_text())
    assert "entries" not in cpu_state or not cpu_state["entries"]


def test_hugetlb_limits_in_the_cgroup_where_the_controller_is_there(tmp_path: Path) -> None:
    """Every huge page size gets a limit (0 when not asked for), as the kubelet's pod cgroup."""
    state = tmp_path / "state"
    proc = start(state, "--cpus", "1", "--memory", "64Mi")
    json.loads(proc.stdout.readline())  # type: ignore[union-attr]
    (pod,) = state_pods(state)
    values = {}
    if pod["process"].get("cgroup") and Path(pod["process"]["cgroup"]).is_dir():
        values = {p.name: p.read_text().strip() for p in Path(pod["process"]["cgroup"]).glob("hugetlb.*B.max")}
    code, _, err = finish(proc)
    info = decision(err)["cgroup"]
    hugetlb = [f for f in info["applied"] if f.startswith("hugetlb.")]
    assert code == 0
    assert sorted(hugetlb) == sorted(values)
    assert all(v == "0" for v in values.values())


def test_exit_status_is_the_commands_and_signals_are_forwarded(tmp_path: Path) -> None:
    state = tmp_path / "state"
    proc = start(state, "--cpus", "1", "--memory", "64Mi", command=["sh", "-c", "exit 7"])
    assert finish(proc)[0] == 7
    # Killed by a signal: 128 + N, as a shell reports it.
    proc = start(state, "--cpus", "1", "--memory", "64Mi", command=["sh", "-c", "kill -USR1 $$"])
    assert finish(proc)[0] == 128 + signal.SIGUSR1
    handler = ("import signal, sys\nsignal.signal(signal.SIGTERM, lambda *a: sys.exit(42))\n"
               "print('ready', flush=True)\nsignal.pause()\n")
    proc = start(state, "--cpus", "1", "--memory", "64Mi", command=[sys.executable, "-c", handler])
    assert proc.stdout.readline() == "ready\n"  # type: ignore[union-attr]
    proc.send_signal(signal.SIGTERM)  # to numalign run, which passes it on
    assert finish(proc)[0] == 42
    assert state_pods(state) == []


def test_concurrent_runs_never_share_an_exclusive_cpu(tmp_path: Path) -> None:
    state = tmp_path / "state"
    free = len(os.sched_getaffinity(0)) - 1  # CPU 0 is reserved
    procs = [start(state, "--cpus", "1", "--memory", "32Mi") for _ in range(3)]
    held: list[frozenset[int]] = []
    for p in procs:
        line = p.stdout.readline()  # type: ignore[union-attr]
        if line:
            held.append(parse_cpuset(json.loads(line)["cpus"]))
    results = [finish(p) for p in procs]
    assert len(held) == min(3, free)
    assert len(frozenset().union(*held)) == len(held)  # pairwise disjoint, one CPU each
    rejected = [decision(err) for code, _, err in results if code == 1]  # 1: rejected, nothing run
    assert len(rejected) == 3 - len(held)
    for doc in rejected:
        # The kubelet's resource fit (allocatable CPUs) refuses first; the CPU manager would too.
        assert doc["decision"]["result"]["reason"] in ("OutOfcpu", "TopologyAffinityError")
    assert state_pods(state) == []


def pods_processes(state: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    """`numalign pods --output json`'s processes: the runs sharing the directory."""
    assert main(["pods", "--state-dir", str(state), "--output", "json"]) == 0
    processes: list[dict[str, Any]] = json.loads(capsys.readouterr().out)["processes"]
    return processes


def test_kill_9_of_numalign_run_leaves_nothing_allocated_after_the_next_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = tmp_path / "state"
    proc = start(state, "--cpus", "1", "--memory", "64Mi")
    seen = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
    (pod,) = state_pods(state)
    (listed,) = pods_processes(state, capsys)
    assert (listed["pid"], listed["alive"], listed["allocation"]["cpus"]) == (seen["pid"], True, seen["cpus"])
    proc.kill()
    proc.communicate(timeout=30)
    # The command dies with its supervisor (PR_SET_PDEATHSIG), so nothing runs on the CPUs any more...
    while not process_ended(seen["pid"]):
        time.sleep(0.01)
    # ...but the state still names it until a numalign command that decides opens the directory.
    assert [p["uid"] for p in state_pods(state)] == [pod["uid"]]
    assert [p["alive"] for p in pods_processes(state, capsys)] == [False]
    nxt = subprocess.run(numalign(state, "--cpus", "1", "--memory", "64Mi", "--", "true"), capture_output=True,
                         text=True, timeout=60, check=False)
    assert nxt.returncode == 0
    doc = decision(nxt.stderr)
    assert doc["releasedEndedRuns"] == [f"default/{pod['manifest']['metadata']['name']}"]
    # The freed CPU is the lowest free one again, so the static policy gives it to the next run.
    assert parse_cpuset(doc["decision"]["allocations"]["main"]["cpus"]) == parse_cpuset(seen["cpus"])
    assert state_pods(state) == []
    if pod["process"].get("cgroup"):
        assert not Path(pod["process"]["cgroup"]).exists()


def process_ended(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat[stat.rindex(")") + 2] in "ZX"


def test_a_reused_pid_is_not_mistaken_for_the_run(tmp_path: Path) -> None:
    """A record naming a live pid with another start time is an ended run: released."""
    state = tmp_path / "state"
    proc = start(state, "--cpus", "1", "--memory", "64Mi")
    json.loads(proc.stdout.readline())  # type: ignore[union-attr]
    proc.kill()
    proc.communicate(timeout=30)
    path = state / POD_RECORD_FILE
    record = decode_pod_record(path.read_bytes())
    (entry,) = record.pods
    # Alive, but started at another time than the record says.
    assert entry.process is not None
    process = {**entry.process, "pid": os.getpid(), "start_time": entry.process["start_time"] + 1}
    entry = dataclasses.replace(entry, process=process)
    path.write_bytes(encode_pod_record(dataclasses.replace(record, pods=(entry,))))
    nxt = subprocess.run(numalign(state, "--cpus", "1", "--memory", "64Mi", "--", "true"), capture_output=True,
                         text=True, timeout=60, check=False)
    assert nxt.returncode == 0, nxt.stderr
    assert len(decision(nxt.stderr)["releasedEndedRuns"]) == 1


def test_a_manifest_container_runs_with_its_own_allocation(tmp_path: Path) -> None:
    pod = tmp_path / "pod.yaml"
    # An init container and the app container (one CPU each, so the pod needs one: fits a 2-CPU host).
    pod.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: job}\nspec:\n"
        "  initContainers:\n  - name: setup\n    resources: {limits: {cpu: '1', memory: 16Mi}}\n"
        "  containers:\n  - name: trainer\n    resources: {limits: {cpu: '1', memory: 64Mi}}\n"
    )
    bad = subprocess.run(numalign(tmp_path / "state", str(pod), "--container", "nosuch", "--", "true"),
                         capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2 and "--container nosuch: expected one of trainer; pass --container NAME" in bad.stderr
    proc = start(tmp_path / "state", str(pod), "--container", "trainer")
    seen = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
    code, _, err = finish(proc)
    doc = decision(err)
    assert code == 0
    assert parse_cpuset(seen["cpus"]) == parse_cpuset(doc["decision"]["allocations"]["trainer"]["cpus"])
    assert doc["decision"]["allocations"]["trainer"]["exclusiveCPUs"] is True


def test_device_environment_from_a_devices_file(tmp_path: Path) -> None:
    devices = tmp_path / "gpus.yaml"
    devices.write_text("- {id: gpu0, numa: 0}\n- {id: gpu1, numa: 0}\n")
    proc = start(tmp_path / "state", "--cpus", "1", "--memory", "64Mi", "--device", "example.com/gpu=1",
                 "--devices", f"example.com/gpu={devices}")
    seen = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
    code, _, err = finish(proc)
    given = decision(err)["decision"]["allocations"]["main"]["devices"]["example.com/gpu"]
    assert code == 0
    # NUMALIGN_RUN marks the command's descendants as the run's (pid.start time of the command).
    assert seen["marker"].startswith(f"{seen['pid']}.")
    assert seen["env"] == {"NUMALIGN_DEVICES_EXAMPLE_COM_GPU": ",".join(given)}
    assert len(given) == 1


@pytest.mark.parametrize(("args", "expected"), [
    (["--cpus", "4096", "--memory", "1Gi"], "asks for more CPUs than"),
    (["--cpus", "1", "--device", "example.com/nothing=1"], "example.com/nothing: no device on"),
    (["--cpus", "1", "--device", "example.com/gpu"], "--device 'example.com/gpu': expected RESOURCE=N"),
    (["--cpus", "two"], "--cpus: invalid quantity 'two'"),
])
def test_bad_requests_are_one_line_and_nothing_is_applied(tmp_path: Path, args: list[str], expected: str) -> None:
    state = tmp_path / "state"
    res = subprocess.run(numalign(state, *args, "--", "touch", str(tmp_path / "ran")), capture_output=True,
                         text=True, timeout=60, check=False)
    assert res.returncode == 2  # invalid input
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("numalign run: error: ") and expected in lines[0]
    assert not (tmp_path / "ran").exists()
    assert state_pods(state) == []


def test_no_command_is_one_line(tmp_path: Path) -> None:
    res = subprocess.run(numalign(tmp_path, "--cpus", "1"), capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 2 and "add -- and the command to run" in res.stderr


def test_top_level_options_before_run_leave_the_commands_arguments_alone(tmp_path: Path) -> None:
    # `-v 1` and `--log-format json` take values; `sh -c ...` after `--` is COMMAND's, never numalign's.
    state = tmp_path / "state"
    cmd = [sys.executable, "-m", "numalign.cli.main", "-v", "1", "--log-format", "json", "run",
           "--state-dir", str(state), "--cpus", "1", "--memory", "64Mi", "--", "sh", "-c", "echo ran $0", "x"]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "ran x\n"


def test_a_normal_exit_is_released_by_the_run_not_reported_as_a_crash(tmp_path: Path) -> None:
    # The run's own release opens the directory after COMMAND ended: that pod is not a leftover of a
    # killed run, neither in the log (-v 1) nor in the "released ..." lines a next run prints.
    state = tmp_path / "state"
    for _ in range(2):
        cmd = [sys.executable, "-m", "numalign.cli.main", "-v", "1", "run", "--state-dir", str(state),
               "--cpus", "1", "--memory", "64Mi", "--", "true"]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
        assert res.returncode == 0, res.stderr
        assert "without releasing" not in res.stderr, res.stderr
        assert state_pods(state) == []


def test_pods_reads_a_run_directory_after_every_run_ended(tmp_path: Path) -> None:
    # The README's `numalign pods --state-dir DIR` after the jobs: this host and run's configuration
    # (CPU 0 reserved), not admit's default machine, whose reserved CPUs this state would contradict.
    state = tmp_path / "state"
    ran = subprocess.run(numalign(state, "--cpus", "1", "--memory", "64Mi", "--", "true"), capture_output=True,
                         text=True, timeout=60, check=False)
    assert ran.returncode == 0, ran.stderr
    pods = subprocess.run([sys.executable, "-m", "numalign.cli.main", "pods", "--state-dir", str(state)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert pods.returncode == 0, pods.stderr
    assert pods.stdout.startswith("no pods\n")


def test_a_command_that_does_not_exist_releases_its_allocation(tmp_path: Path) -> None:
    state = tmp_path / "state"
    res = subprocess.run(numalign(state, "--cpus", "1", "--memory", "64Mi", "--", "no-such-command-here"),
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 127
    assert "numalign run: error: no-such-command-here: command not found" in res.stderr
    assert state_pods(state) == []


NOBODY = 65534


def test_a_state_directory_owned_by_someone_else_is_refused(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        state = tmp_path / "shared"
        state.mkdir(mode=0o777)
        os.chown(state, NOBODY, NOBODY)
        owner = NOBODY
    else:
        state, owner = Path("/"), 0
    before = sorted(state.iterdir())
    res = subprocess.run(numalign(state, "--cpus", "1", "--", "touch", str(tmp_path / "ran")), capture_output=True,
                         text=True, timeout=60, check=False)
    assert res.returncode == 2
    (line,) = res.stderr.strip().splitlines()
    assert f"--state-dir {state}: owned by uid {owner}, not by you (uid {os.geteuid()})" in line
    assert line.endswith("pass --state-dir DIR you own")
    assert sorted(state.iterdir()) == before and not (tmp_path / "ran").exists()


def test_where_cgroups_may_not_be_created_it_says_once_what_was_not_applied(tmp_path: Path) -> None:
    """Affinity and the memory policy still hold the process; the cgroup controls are named once as not
    applied, with why. Root may create cgroups anywhere, so as root the parent is in a read-only
    mount of the cgroup2 file system; anyone else meets the permissions of the real one."""
    extra: list[str] = []
    mounted = None
    if os.geteuid() == 0:
        mounted = tmp_path / "cgroup-ro"
        mounted.mkdir()
        subprocess.run(["mount", "-t", "cgroup2", "-o", "ro", "none", str(mounted)], check=True)
        extra = ["--cgroup-parent", str(mounted / "numalign")]
    try:
        proc = start(tmp_path / "state", "--cpus", "1", "--memory", "64Mi", *extra, "-o", "text")
        seen = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
        code, _, err = finish(proc)
    finally:
        if mounted is not None:
            subprocess.run(["umount", str(mounted)], check=True)
    assert code == 0
    (line,) = [line for line in err.splitlines() if "not applied" in line]
    assert "cpuset.cpus, cpuset.mems, memory.max" in line
    assert ("Read-only file system" if mounted else "Permission denied") in line
    assert len(parse_cpuset(seen["cpus"])) == 1 and any(p.startswith("bind:") for p in seen["policies"])


def test_a_shared_pool_run_leaves_the_cpus_another_run_is_given(tmp_path: Path) -> None:
    """As the kubelet's reconcile loop shrinks shared containers' cpusets, at once: admitting an
    exclusive run moves a running shared-pool run (every thread, children included) off its CPUs, and
    releasing it gives them back."""
    state = tmp_path / "state"
    child = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import sys; sys.stdin.read()'])"
    # Memory alone: Burstable, no CPU request, so it fits beside the exclusive run on a 2-CPU host.
    burstable = start(state, "--memory", "32Mi", command=[
        "sh", "-c", f"{sys.executable} -c \"{child}\" & {sys.executable} -c '{PROBE}'"])
    shared = json.loads(burstable.stdout.readline())  # type: ignore[union-attr]
    before = parse_cpuset(shared["cpus"])
    assert before == frozenset(os.sched_getaffinity(0))  # the whole pool: nothing is exclusive yet
    exclusive = start(state, "--cpus", "1", "--memory", "64Mi")
    given = parse_cpuset(json.loads(exclusive.stdout.readline())["cpus"])  # type: ignore[union-attr]
    sh = int(Path(f"/proc/{shared['pid']}/stat").read_text().rsplit(")", 1)[1].split()[1])
    for pid in _tree(sh):
        assert parse_cpuset(_allowed(pid)) == before - given
    assert finish(exclusive)[0] == 0
    for pid in _tree(sh):
        assert parse_cpuset(_allowed(pid)) == before
    assert finish(burstable)[0] == 0


def _allowed(pid: int) -> str:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(line.split(":", 1)[1].strip() for line in status.splitlines() if line.startswith("Cpus_allowed_list"))


def _tree(root: int) -> list[int]:
    """root and its descendants (the shell, the probe, the background child and its own child)."""
    from numalign.run.reconcile import descendants

    return descendants(root)


def test_a_machine_this_host_cannot_apply_is_refused_before_the_state_is_opened(tmp_path: Path) -> None:
    """--machine decides for another machine; CPUs this process may not use are refused before anything
    is written or run, with the --reserved-cpus that keeps the decision on usable CPUs."""
    state = tmp_path / "state"
    res = subprocess.run(numalign(state, "--machine", "dual-socket", "--cpus", "2", "--memory", "1Gi", "--",
                                  "touch", str(tmp_path / "ran")), capture_output=True, text=True, timeout=60,
                         check=False)
    assert res.returncode == 2
    (line,) = res.stderr.strip().splitlines()
    usable = parse_cpuset(",".join(map(str, os.sched_getaffinity(0))))
    assert line.startswith("numalign run: error: machine dual-socket: CPUs ")
    reserved = parse_cpuset(line.rsplit("--reserved-cpus ", 1)[1])
    assert reserved == (frozenset(range(128)) - usable) | {0}  # dual-socket has CPUs 0-127; 0 stays reserved
    assert not (tmp_path / "ran").exists()
    assert not state.exists()  # the state directory was never opened


def test_command_starts_with_default_signal_dispositions(tmp_path: Path) -> None:
    """Python ignores SIGPIPE; COMMAND must not inherit that (a pipeline's writer ends on a closed pipe)."""
    show = "grep -E '^Sig(Ign|Blk)' /proc/self/status"
    proc = start(tmp_path / "state", "--cpus", "1", "--memory", "64Mi", command=["sh", "-c", show])
    code, out, _ = finish(proc)
    fields = dict(line.split(":\t") for line in out.splitlines())
    assert code == 0
    pipe_bit = 1 << (signal.SIGPIPE - 1)
    assert int(fields["SigIgn"], 16) & pipe_bit == 0
    assert int(fields["SigBlk"], 16) == 0


def test_no_cgroup_leaves_the_command_in_numaligns_cgroup(tmp_path: Path) -> None:
    proc = start(tmp_path / "state", "--cpus", "1", "--memory", "64Mi", "--no-cgroup")
    seen = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
    code, _, err = finish(proc)
    mine = next(line.split("::", 1)[1].strip() for line in Path("/proc/self/cgroup").read_text().splitlines()
                if line.startswith("0::"))
    assert code == 0 and seen["cgroup"] == mine
    doc = decision(err)
    assert doc["cgroup"]["path"] is None and doc["notes"] == []
    assert len(parse_cpuset(seen["cpus"])) == 1  # pinned all the same
