"""Regression cases for what `scripts/fuzz` found: each input once gave a traceback or a two-line error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support.fuzz_surfaces import _sysfs_root
from support.shared import shared_dir

from numalign.adapters.sysfs import discover_sysfs, load_machine
from numalign.errors import NumalignError
from numalign.k8s.kubeletconfig_read import config_from_yaml
from numalign.machine.cadvisor import machine_to_cadvisor
from numalign.machine.examples import example
from numalign.replay.runner import replay_lines


def _holders(obj: Any, key: str) -> list[dict[str, Any]]:
    """Every object inside `obj` that has `key`."""
    if isinstance(obj, dict):
        return ([obj] if key in obj else []) + [h for v in obj.values() for h in _holders(v, key)]
    if isinstance(obj, list):
        return [h for v in obj for h in _holders(v, key)]
    return []


def _one_line_error(fn: object) -> str:
    assert callable(fn)
    with pytest.raises(NumalignError) as e:
        fn()
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 2000, msg[:500]
    return msg


@pytest.mark.parametrize("text", ["9" * 5000, "1\n2"])
def test_a_core_id_of_5000_digits_or_two_lines_is_one_line(tmp_path: Path, text: str) -> None:
    root = _sysfs_root(tmp_path)
    (core_id,) = list(root.glob("sys/devices/system/cpu/cpu0/topology/core_id"))
    core_id.write_text(text)
    msg = _one_line_error(lambda: discover_sysfs(root))
    assert "core_id" in msg


def test_a_string_cache_level_in_cadvisor_json_is_one_line(tmp_path: Path) -> None:
    doc = machine_to_cadvisor(example("dual-socket"))
    _holders(doc, "level")[0]["level"] = "three"
    path = tmp_path / "machine.json"
    path.write_text(json.dumps(doc))
    msg = _one_line_error(lambda: load_machine(str(path)))
    assert "level" in msg


def test_a_newline_in_reserved_system_cpus_stays_one_line() -> None:
    config = config_from_yaml(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        'reservedSystemCPUs: "0\\n1"\n', "kubelet.yaml"
    )
    msg = _one_line_error(config.reserved_cpus)
    assert "reservedSystemCPUs" in msg


def test_a_replay_line_whose_reusable_is_not_a_list_is_named() -> None:
    with (shared_dir() / "oracle" / "provider_vectors.jsonl").open() as f:
        vectors = [json.loads(line) for line in f]
    vector = next(v for v in vectors if _holders(v, "reusable"))
    _holders(vector, "reusable")[0]["reusable"] = 7
    bad = json.dumps(vector)
    (out,) = list(replay_lines([bad], "fuzz.jsonl"))
    assert out.error is not None and "reusable" in out.error and "\n" not in out.error
