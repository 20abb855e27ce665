"""scripts/conformance's releases: a minor (its committed newest patch, what CI runs) or any released patch
(`--versions 1.34.2`, `--all-patches`), whose harness conformance/build writes a modfile for on the fly."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest
from conformance.kubelet_options import CPU_MANAGER_POLICY_OPTIONS

from conformance import harness, run, versions
from numalign.kubelet.versions import option_maturity

# `go list -m -versions k8s.io/kubernetes` on the module proxy here (2026-11-28).
SERVED = ("v1.13.0 v1.29.6 v1.30.4 v1.31.0 v1.32.13 v1.33.6 v1.33.13 v1.34.0 v1.34.2 v1.34.3 v1.34.4 v1.35.4 "
          "v1.36.1 v1.36.3 v1.37.2 v1.38.0-beta.0")


def test_a_minor_and_its_committed_patch_name_the_minors_harness() -> None:
    committed = harness.committed()
    assert set(committed) == {"1.33", "1.34", "1.35", "1.36", "1.37"}
    for minor, patch in committed.items():
        assert harness.target(minor) == minor
        assert harness.target(patch) == minor
        assert harness.target(f"v{patch}") == minor
        assert harness.version_of(minor) == patch


def test_another_patch_has_its_own_harness() -> None:
    assert harness.target("1.34.2") == "1.34.2"
    assert harness.version_of("1.34.2") == "1.34.2"
    assert harness.minor_of("1.34.2") == "1.34"
    assert harness.binary("1.34.2").name == "harness-1.34.2"


def test_a_minor_without_a_harness_is_refused_naming_the_minors() -> None:
    with pytest.raises(SystemExit, match=r"no harness for 1\.39\.0 \(minors: 1\.33, 1\.34"):
        harness.target("1.39.0")


def test_released_patches_are_the_proxys_releases_of_supported_minors(monkeypatch: pytest.MonkeyPatch) -> None:
    def fake(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        assert cmd == ["go", "list", "-m", "-versions", "k8s.io/kubernetes"]
        return subprocess.CompletedProcess(cmd, 0, stdout=f"k8s.io/kubernetes {SERVED}\n", stderr="")

    monkeypatch.setattr(subprocess, "run", fake)
    assert harness.released_patches() == ["1.33.6", "1.33.13", "1.34.0", "1.34.2", "1.34.3", "1.34.4", "1.35.4",
                                          "1.36.1", "1.36.3", "1.37.2"]


@pytest.mark.parametrize("patch", ["1.33.6", "1.34.0", "1.34.2", "1.34.3", "1.36.1"])
def test_numalign_decides_as_each_released_patch_itself(patch: str) -> None:
    version = versions.kubelet_version(patch)
    assert str(version) == patch and version.reported is None


def test_all_patches_and_versions_are_one_or_the_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        run.main(["--all-patches", "--versions", "1.34"])
    assert stop.value.code == 2
    assert "--all-patches and --versions: give one of them" in capsys.readouterr().err


def test_the_134_capacity_index_panic_is_a_named_deliberate_difference() -> None:
    _, matches = run.DELIBERATE["dra-134-capacity-index"]
    case = {"gate_overrides": {"DRAConsumableCapacity": True}}
    panic = {"harness_error": "panic: runtime error: index out of range [2] with length 2"}
    ours = {"outcome": "unschedulable", "message": "cannot allocate all claims"}
    assert matches("dra-alloc", "1.34.4", case, ours, panic)
    assert matches("dra-alloc", "1.34.0", case, ours, {"map_order": [ours, panic]})
    assert not matches("dra-alloc", "1.35.4", case, ours, panic)
    assert not matches("dra-alloc", "1.34.4", {"gate_overrides": {}}, ours, panic)
    assert not matches("dra-alloc", "1.34.4", case, ours, {"outcome": "ok", "claims": []})


def test_a_patch_harness_names_the_staging_modules_taken_at_another_patch(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "mod").mkdir()
    (tmp_path / "mod" / "go.1.33.6.mod").write_text(
        "module numalign.local/conformance\n"
        "// substituted: k8s.io/cri-client v0.33.6 is refused by the module proxy; v0.33.12 instead\n"
        "replace k8s.io/cri-client => k8s.io/cri-client v0.33.12\n")
    monkeypatch.setattr(harness, "BUILD", tmp_path)
    assert harness.substitutions("1.33.6") == [
        "k8s.io/cri-client v0.33.6 is refused by the module proxy; v0.33.12 instead"]
    assert harness.substitutions("1.33") == []


_ALL_WITH_COUNTERS = {
    "slices": [{"spec": {"devices": [{"name": "nic-11", "consumesCounters": [{"counterSet": "set-0"}]}]}}],
    "claims": [{"spec": {"devices": {"requests": [
        {"name": "r0", "exactly": {"deviceClassName": "nic", "allocationMode": "All"}}]}}}],
}


def test_the_1361_all_counters_panic_is_a_named_deliberate_difference() -> None:
    _, matches = run.DELIBERATE["dra-1361-all-counters-panic"]
    panic = {"harness_error": "panic: runtime error: invalid memory address or nil pointer dereference"}
    ours = {"outcome": "unschedulable", "message": "cannot allocate all claims"}
    case = _ALL_WITH_COUNTERS
    assert matches("dra-alloc", "1.36.1", case, ours, panic)
    assert not matches("dra-alloc", "1.36.3", case, ours, panic)
    assert not matches("dra-alloc", "1.36.1", case, ours, {"outcome": "ok", "claims": []})
    assert not matches("dra-alloc", "1.36.1", {**case, "slices": []}, ours, panic)  # another nil pointer


def test_the_135_all_counters_panic_is_a_named_deliberate_difference() -> None:
    # seed 2's dra-alloc-689 at 1.35.4, cut to what the predicate reads: a request for All devices and a
    # device consuming counters, with the alpha gate on
    _, matches = run.DELIBERATE["dra-135-all-counters-panic"]
    case = {
        "gate_overrides": {"DRAPartitionableDevices": True},
        "slices": [{"spec": {"devices": [{"name": "nic-11", "consumesCounters": [{"counterSet": "set-0"}]}]}}],
        "claims": [{"spec": {"devices": {"requests": [
            {"name": "r1", "firstAvailable": [{"name": "s0", "deviceClassName": "nic", "allocationMode": "All"}]}]}}}],
    }
    panic = {"harness_error": "panic: runtime error: invalid memory address or nil pointer dereference"}
    ours = {"outcome": "unschedulable", "message": "cannot allocate all claims"}
    assert matches("dra-alloc", "1.35.4", case, ours, panic)
    assert not matches("dra-alloc", "1.34.4", case, ours, panic)
    assert not matches("dra-alloc", "1.35.4", {**case, "gate_overrides": {}}, ours, panic)
    assert not matches("dra-alloc", "1.35.4", {**case, "slices": []}, ours, panic)
    exact = {"claims": [{"spec": {"devices": {"requests": [{"name": "r0", "exactly": {"count": 1}}]}}}]}
    assert not matches("dra-alloc", "1.35.4", {**case, **exact}, ours, panic)
    assert not matches("dra-alloc", "1.35.4", case, ours, {"harness_error": "panic: runtime error: index out of range"})


@pytest.mark.parametrize("version", ["1.33.13", "1.34.4", "1.35.4", "1.36.3", "1.37.2"])
def test_the_areas_generate_every_cpu_manager_option_numalign_models(version: str) -> None:
    # one list for the admit and cpu areas (conformance/kubelet_options.py); an option numalign models that
    # no area generates would go unchecked against the real code
    maturity = option_maturity("cpu", versions.kubelet_version(version))
    assert set(CPU_MANAGER_POLICY_OPTIONS) == set(maturity)


def test_the_work_bound_is_a_named_deliberate_difference_only_where_upstream_answered() -> None:
    _, matches = run.DELIBERATE["dra-work-bound"]
    ours = {"outcome": "timeout", "message": "timed out trying to allocate devices", "stoppedBy": "work"}
    answered = {"outcome": "unschedulable", "message": "cannot allocate all claims"}
    timed_out = {"outcome": "timeout", "message": "timed out trying to allocate devices"}
    assert matches("dra-alloc", "1.35.4", {}, ours, answered)
    assert matches("dra-alloc", "1.35.4", {}, ours, {"map_order": [timed_out, answered]})
    assert not matches("dra-alloc", "1.35.4", {}, ours, {"map_order": [timed_out]})
    assert not matches("dra-alloc", "1.37.2", {}, {k: v for k, v in ours.items() if k != "stoppedBy"}, answered)
    assert not matches("dra-cel", "1.37.2", {}, ours, answered)
