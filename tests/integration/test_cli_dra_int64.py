"""DRA objects with an integer beyond Go's int64 (spec.pool.resourceSliceCount, generation, a request's
count, an int attribute) are refused as the API server refuses them: its JSON decoder cannot store the
number, so the object is rejected before validation, in one line (newcomer finding 3: a
resourceSliceCount of 99999999999999999999 was taken as a number and the pool called incomplete)."""

from __future__ import annotations

from pathlib import Path

import pytest

from numalign.cli.main import main
from numalign.cli.output import EXIT_INVALID

EXAMPLE = (Path(__file__).resolve().parents[2] / "docs" / "examples" / "four-gpus.yaml").read_text()
BIG = "99999999999999999999"
INT64_MAX = str((1 << 63) - 1)


def admit_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> str:
    path = tmp_path / "dra.yaml"
    path.write_text(text)
    assert main(["admit", str(path)]) == EXIT_INVALID
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert out.out == "" and len(lines) == 1 and "Traceback" not in out.err, out.err
    assert lines[0].startswith(f"numalign admit: error: {path}: document ")
    return lines[0]


@pytest.mark.parametrize(("old", "new", "expected"), [
    ("resourceSliceCount: 1", f"resourceSliceCount: {BIG}",
     'document 1: ResourceSlice in version "v1" cannot be handled as a ResourceSlice: json: cannot unmarshal '
     f"number {BIG} into Go struct field ResourcePool.spec.pool.resourceSliceCount of type int64"),
    ("generation: 1", f"generation: -{BIG}",
     f"number -{BIG} into Go struct field ResourcePool.spec.pool.generation of type int64"),
    ("count: 2", f"count: {BIG}",
     'document 3: ResourceClaim in version "v1" cannot be handled as a ResourceClaim: json: cannot unmarshal '
     f"number {BIG} into Go struct field ExactDeviceRequest.spec.devices.requests.exactly.count of type int64"),
    ("resource.kubernetes.io/numaNode: {int: 0}", f"resource.kubernetes.io/numaNode: {{int: {BIG}}}",
     f"number {BIG} into Go struct field DeviceAttribute.spec.devices.attributes.int of type int64"),
])
def test_an_integer_beyond_int64_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            old: str, new: str, expected: str) -> None:
    assert old in EXAMPLE
    line = admit_error(tmp_path, capsys, EXAMPLE.replace(old, new, 1))
    assert expected in line and line.endswith(f"(write an integer from -{1 << 63} to {INT64_MAX})")


def test_v1beta1_is_named_in_its_own_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    claim = ("apiVersion: resource.k8s.io/v1beta1\nkind: ResourceClaim\nmetadata: {name: c}\nspec:\n  devices:\n"
             f"    requests:\n    - name: r\n      deviceClassName: h100\n      count: {BIG}\n")
    line = admit_error(tmp_path, capsys, claim)
    assert ('ResourceClaim in version "v1beta1" cannot be handled as a ResourceClaim: json: cannot unmarshal '
            f"number {BIG} into Go struct field DeviceRequest.spec.devices.requests.count of type int64") in line


def test_int64_max_itself_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The largest int64 decodes; a pool claiming that many slices is incomplete, so nothing is allocated."""
    path = tmp_path / "dra.yaml"
    path.write_text(EXAMPLE.replace("resourceSliceCount: 1", f"resourceSliceCount: {INT64_MAX}", 1))
    assert main(["admit", str(path)]) == 0
    assert "gpu.example.com/node-a (incomplete)" in capsys.readouterr().out
