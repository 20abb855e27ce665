"""A sweep on a real dask.distributed LocalCluster (a scheduler and two worker processes) gives exactly
the results of the same sweep run here."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.terminal import run_on_a_terminal

from numalign.cluster.examples import example_cluster, example_workload
from numalign.cluster.sweep import DASK_MISSING, Sweep, run_sweep
from numalign.errors import InvalidInputError


def test_sweep_on_a_local_dask_cluster_matches_the_local_run() -> None:
    from distributed import LocalCluster

    cluster, workload = example_cluster(), example_workload(5, count=80)
    specs = Sweep(["default", "nrt", "exact"], {}, {"topologyManagerScopes": ["container", "pod"]}).specs()
    here = run_sweep(cluster, workload, specs, 5, 2, jobs=1)
    # ":0": the scheduler binds its HTTP routes (/metrics) even without a dashboard, by default on 8787,
    # which another test run on this machine may hold.
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      scheduler_port=0) as dask_cluster:  # type: ignore[no-untyped-call]  # untyped library
        seen: list[int] = []
        there = run_sweep(cluster, workload, specs, 5, 2, dask=dask_cluster.scheduler_address,
                          done=lambda i, r: seen.append(i))
    assert there == here
    assert sorted(seen) == list(range(len(specs)))
    assert [r.config.topology_manager_scope for r in there] == ["container"] * 3 + ["pod"] * 3


def test_unreachable_dask_scheduler_is_one_clear_error() -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on: bound, never listened to
        s.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
        with pytest.raises(InvalidInputError, match="cannot reach a Dask scheduler there"):
            run_sweep(example_cluster(), example_workload(1, count=5), Sweep(["default"]).specs(), 1, 1,
                      dask=address, connect_timeout=1.0)


def _without_dask(tmp_path: Path) -> dict[str, str]:
    """An environment whose Python cannot import dask.distributed, as a node-only install without the
    extra: a sitecustomize marks the module absent before numalign starts."""
    shim = tmp_path / "no-dask"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text("import sys\nsys.modules['distributed'] = None\n", encoding="utf-8")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(shim), os.environ.get("PYTHONPATH", "")])}


def test_dask_without_the_extra_is_one_line_naming_the_pip_command(tmp_path: Path) -> None:
    env = _without_dask(tmp_path)
    probe = subprocess.run([sys.executable, "-c", "import distributed"], env=env, capture_output=True, text=True,
                           check=False)
    assert probe.returncode != 0 and "ModuleNotFoundError" in probe.stderr  # the shim really hides it
    done = subprocess.run([sys.executable, "-m", "numalign.cli.main", "simulate", "--generate", "5",
                           "--dask", "tcp://127.0.0.1:8786"], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 2
    assert done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert line == f"numalign simulate: error: {DASK_MISSING}"
    assert "pip install 'numalign[dask]'" in line
    # Everything else still runs without it.
    local = subprocess.run([sys.executable, "-m", "numalign.cli.main", "simulate", "--generate", "5", "-j", "1",
                            "--scheduler", "default", "-o", "json"], env=env, capture_output=True, text=True,
                           timeout=120, check=False)
    assert local.returncode == 0, local.stderr


def test_run_sweep_on_dask_without_the_extra_is_invalid_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(InvalidInputError) as e:
        run_sweep(example_cluster(), example_workload(1, count=5), Sweep(["default"]).specs(), 1, 1,
                  dask="tcp://127.0.0.1:8786")
    assert str(e.value) == DASK_MISSING


def test_workers_running_another_numalign_are_refused_in_one_line(tmp_path: Path) -> None:
    """A LocalCluster with one worker running this numalign and one real worker process importing a
    changed copy of the package (as an older install on a remote worker would): the sweep is refused
    before any run, in one line naming that worker."""
    import shutil

    from distributed import Client, LocalCluster

    import numalign
    from numalign.cluster.sweep import numalign_version

    other = tmp_path / "other"
    shutil.copytree(Path(numalign.__file__).parent, other / "numalign",
                    ignore=shutil.ignore_patterns("__pycache__"))
    changed = other / "numalign" / "limits.py"
    changed.write_text(changed.read_text(encoding="utf-8") + "\n# another checkout\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(other), os.environ.get("PYTHONPATH", "")])}
    cluster, workload = example_cluster(), example_workload(1, count=5)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0",
                      scheduler_port=0) as dask_cluster:  # type: ignore[no-untyped-call]  # untyped library
        address = dask_cluster.scheduler_address
        accepted = run_sweep(cluster, workload, Sweep(["default"]).specs(), 1, 1, dask=address)
        assert accepted == run_sweep(cluster, workload, Sweep(["default"]).specs(), 1, 1)
        stranger = subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                                     "--no-nanny", "--no-dashboard"], env=env, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        try:
            with Client(address) as client:  # type: ignore[no-untyped-call]
                client.wait_for_workers(2)
            with pytest.raises(InvalidInputError) as refused:
                run_sweep(cluster, workload, Sweep(["default"]).specs(), 1, 1, dask=address)
        finally:
            stranger.terminate()
            stranger.wait()
    message = str(refused.value)
    assert "\n" not in message
    assert f"this client numalign {numalign_version()}" in message
    assert "expected the same numalign on every worker" in message
    stranger_version = message.split(" runs numalign ")[1].split(", this client")[0]
    assert stranger_version.startswith("0.") and stranger_version != numalign_version()


def test_dask_runs_report_their_progress_as_local_workers_do() -> None:
    """Each run on a Dask worker reports its start and its pods placed, and every message of a run is
    relayed before its result, as with --jobs (the same results as the run here)."""
    from distributed import LocalCluster

    cluster, workload = example_cluster(), example_workload(5, count=80)
    specs = Sweep(["default", "exact"]).specs()
    events: list[tuple[str, int, int]] = []
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      scheduler_port=0) as dask_cluster:  # type: ignore[no-untyped-call]  # untyped library
        there = run_sweep(cluster, workload, specs, 5, 2, dask=dask_cluster.scheduler_address,
                          done=lambda i, r: events.append(("done", i, r.placed)),
                          placed=lambda i, n: events.append(("placed", i, n)))
    assert there == run_sweep(cluster, workload, specs, 5, 2, jobs=1)
    for i, result in enumerate(there):
        mine = [(kind, n) for kind, j, n in events if j == i]
        assert mine[0] == ("placed", 0) and mine[-1] == ("done", result.placed)  # start first, result last
        counts = [n for kind, n in mine if kind == "placed"]
        assert counts == sorted(counts) and len(counts) > 2 and counts[-1] <= result.placed


def test_simulate_with_dask_shows_progress_on_a_terminal_only() -> None:
    """`simulate --dask` draws the same progress as `--jobs` on a terminal (stderr on a real
    pseudo-terminal); piped, nothing is written to stderr and stdout is the same."""
    import json

    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                      scheduler_port=0) as dask_cluster:  # type: ignore[no-untyped-call]  # untyped library
        cmd = [sys.executable, "-m", "numalign.cli.main", "simulate", "--generate", "40", "--dask",
               dask_cluster.scheduler_address, "--scheduler", "default", "--scheduler", "exact", "-o", "json"]
        proc, shown = run_on_a_terminal(cmd, timeout=300)
        piped = subprocess.run(cmd, capture_output=True, check=True, timeout=300)
    assert "run 1/2: " in shown and "run 2/2: " in shown and "/40 pods placed" in shown
    assert "2 done" in shown and shown.endswith("\x1b[2K")
    assert piped.stderr == b"" and json.loads(piped.stdout)["runs"] == json.loads(proc.stdout)["runs"]
