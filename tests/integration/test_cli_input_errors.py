"""What a new user sees for wrong files and values: one line naming what, where, what was expected and
the fix, exit code 2 (invalid input), never a traceback (numalign.cli.main.main in-process, with capsys)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from numalign.cli.main import main
from numalign.cli.output import EXIT_ERROR, EXIT_INVALID
from numalign.machine.examples import EXAMPLES

POD = (
    "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n"
    "    resources:\n      limits: {cpu: '2', memory: 1Gi}\n"
)
CONFIG = (
    "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
    "cpuManagerPolicy: static\nreservedSystemCPUs: '0'\ntopologyManagerPolicy: best-effort\n"
)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {
        "pod": tmp_path / "pod.yaml",
        "config": tmp_path / "kubelet.yaml",
        "binary": tmp_path / "bin.yaml",
        "dir": tmp_path / "a-directory",
        "unreadable": tmp_path / "unreadable.yaml",
        "broken": tmp_path / "broken.yaml",
        "empty": tmp_path / "empty.yaml",
    }
    out["pod"].write_text(POD)
    out["config"].write_text(CONFIG)
    out["binary"].write_bytes(b"a: \xff\xfe\n")
    out["dir"].mkdir()
    out["unreadable"].write_text(CONFIG)
    out["broken"].write_text("a: [1\nb: 2\n")
    out["empty"].write_text("")
    return out


def error_of(capsys: pytest.CaptureFixture[str], *args: str, status: int = EXIT_INVALID) -> str:
    """Run the CLI; it must fail with `status` and exactly one line on stderr."""
    code = main(list(args))
    err = capsys.readouterr().err
    assert code == status, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"numalign {args[0]}: error: "), err
    assert "Traceback" not in err and '"<unicode string>"' not in err
    return lines[0]


# ---- 1. files that cannot be read ---------------------------------------------------------------


def test_discover_sysfs_root_missing_or_a_file(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "nonexistent"
    msg = error_of(capsys, "discover", "--sysfs-root", str(missing))
    assert f"{missing}: no such directory" in msg and "expected a sysfs root" in msg and "check the path" in msg
    a_file = tmp_path / "hostname"
    a_file.write_text("box\n")
    msg = error_of(capsys, "discover", "--sysfs-root", str(a_file))
    assert f"{a_file}: is a file, not a directory" in msg and "use --machine" in msg


@pytest.mark.parametrize("command", ["admit", "serve"])
def test_config_not_utf8_or_a_directory(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], command: str
) -> None:
    msg = error_of(capsys, command, "--config", str(files["binary"]))
    assert f"{files['binary']}: cannot read the kubelet config file: not UTF-8 text" in msg
    assert "expected UTF-8 text (a KubeletConfiguration" in msg and "iconv" in msg
    msg = error_of(capsys, command, "--config", str(files["dir"]))
    assert f"{files['dir']}: cannot read the kubelet config file: Is a directory" in msg
    assert "pass the file itself, not a directory" in msg


@pytest.mark.parametrize(("command", "option", "what"), [
    ("admit", "--config", "the kubelet config file"), ("serve", "--config", "the kubelet config file"),
    ("admit", "--machine", "the machine file"), ("discover", "--machine", "the machine file"),
    ("admit", "", "the manifest"),
])
def test_unreadable_file(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                         files: dict[str, Path], command: str, option: str, what: str) -> None:
    """Root (as here and in CI) reads mode-0 files, so the kernel's answer is faked for that file."""
    target = files["unreadable"]
    real_open = os.open

    def deny(path: Any, *args: Any, **kwargs: Any) -> int:
        if Path(path) == target:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", deny)
    msg = error_of(capsys, command, *([option] if option else []), str(target))
    assert f"{target}: cannot read {what}: Permission denied; expected " in msg
    assert msg.endswith("; make it readable by this user (chmod/chown) or run as a user who can read it")


@pytest.mark.parametrize("command", ["admit", "discover", "serve"])
def test_machine_not_utf8_or_a_plain_directory(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], command: str
) -> None:
    msg = error_of(capsys, command, "--machine", str(files["binary"]))
    assert f"{files['binary']}: cannot read the machine file: not UTF-8 text" in msg
    msg = error_of(capsys, command, "--machine", str(files["dir"]))
    assert f"{files['dir']}: no sys/ directory inside; expected a sysfs root" in msg


def test_pod_file_not_utf8_or_missing(capsys: pytest.CaptureFixture[str], files: dict[str, Path],
                                      tmp_path: Path) -> None:
    msg = error_of(capsys, "admit", str(files["binary"]))
    assert f"{files['binary']}: cannot read the manifest: not UTF-8 text" in msg
    missing = tmp_path / "pod-missing.yaml"
    msg = error_of(capsys, "admit", str(missing))
    assert msg.endswith("; check the path")
    assert f"{missing}: cannot read the manifest: No such file or directory; expected Kubernetes manifests" in msg


@pytest.mark.parametrize("which", ["binary", "dir"])
def test_plugin_device_list_unreadable(capsys: pytest.CaptureFixture[str], files: dict[str, Path],
                                       which: str, tmp_path: Path) -> None:
    msg = error_of(capsys, "plugin", "--resource", "example.com/gpu", "--devices", str(files[which]),
                   "--device-plugin-dir", str(tmp_path))
    assert f"{files[which]}: cannot read the device list" in msg and "expected" in msg


# ---- 2. malformed YAML --------------------------------------------------------------------------


@pytest.mark.parametrize(("option", "expected"), [
    ("--config", "expected a KubeletConfiguration"),
    ("--machine", "expected a machine file"),
])
def test_malformed_yaml_names_line_and_column(
    capsys: pytest.CaptureFixture[str], files: dict[str, Path], option: str, expected: str
) -> None:
    msg = error_of(capsys, "admit", option, str(files["broken"]))
    assert f"{files['broken']}: line 2, column 2: expected ',' or ']'" in msg
    assert expected in msg and "fix the syntax" in msg


def test_malformed_pod_manifest_uses_the_same_words(capsys: pytest.CaptureFixture[str],
                                                    files: dict[str, Path]) -> None:
    msg = error_of(capsys, "admit", str(files["broken"]))
    assert f"{files['broken']}: line 2, column 2: " in msg and "expected ',' or ']'" in msg
    assert "(not valid YAML or JSON); expected Kubernetes manifests" in msg and "fix the syntax" in msg


@pytest.mark.parametrize(("text", "where", "escape"), [
    # YAML: go-yaml (and libyaml) refuse every surrogate escape, a pair too; PyYAML's pure loader took
    # each half as a character, and printing the pod's annotation (or a CEL selector) then crashed.
    ('apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  annotations: {a: "x\\ud83c\\udf89"}\n', "line 5, column 22",
     "\\ud83c"),
    # JSON joins a pair into one character; an unpaired half is refused where it is, not at the pair
    ('{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": {"a": "\\ud83d\\ude00", '
     '"b": "\\udc00"}}}', "line 1, column 106", "\\udc00"),
])
def test_a_surrogate_escape_is_refused_in_one_line_naming_where(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, where: str, escape: str
) -> None:
    pod = tmp_path / "pod.json"
    pod.write_text(text + POD.split("metadata: {name: p}\n", 1)[1] if text.startswith("api") else text)
    for command in (["admit", str(pod)], ["admit", "--machine", str(pod)], ["nrt", str(pod)]):
        msg = error_of(capsys, *command)
        assert f"{pod}: {where}: found invalid Unicode character escape code {escape} (a UTF-16 surrogate" in msg
        assert "write the character itself (UTF-8)" in msg
    # a JSON pair is one character, read as such
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": {
        "a": "\U0001F600"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}, ensure_ascii=True))
    assert "\\ud83d\\ude00" in ok.read_text()
    assert main(["admit", str(ok), "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["admitted"] == 1


def test_the_surrogate_check_walks_each_yaml_alias_once(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Nine anchors of nine aliases each are 9**9 strings walked alias by alias (the check hung on such a
    file holding any \\u escape); each shared list is walked once, and the file gets its own error."""
    levels = ["a: &a [x, x, x, x, x, x, x, x, x]"] + [
        f"{b}: &{b} [{', '.join(['*' + a] * 9)}]" for a, b in zip("abcdefgh", "bcdefghi", strict=True)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join([*levels, 'j: "\\u00e9"', ""]))
    msg = error_of(capsys, "admit", str(bomb))
    assert "document 1: kind: the document has no kind" in msg


# ---- 3. a manifest given as a machine ----------------------------------------------------------


def test_pod_manifest_given_as_machine(capsys: pytest.CaptureFixture[str], files: dict[str, Path]) -> None:
    msg = error_of(capsys, "admit", "--machine", str(files["pod"]))
    assert "looks like a Kubernetes manifest (apiVersion 'v1', kind 'Pod')" in msg
    assert "--machine expects a machine file" in msg and "cadvisor MachineInfo JSON" in msg
    assert "sysfs dump" in msg and all(name in msg for name in EXAMPLES)
    assert "unknown keys" not in msg


# ---- 4, 5. warnings, and the run goes on -------------------------------------------------------


def test_unknown_config_field_warns_and_continues(capsys: pytest.CaptureFixture[str],
                                                  files: dict[str, Path]) -> None:
    files["config"].write_text(CONFIG + "cpuManagerPolicyTypo: x\nclusterDNS: [10.0.0.10]\n")
    assert main(["admit", str(files["pod"]), "--config", str(files["config"])]) == 0
    out, err = capsys.readouterr()
    assert err.splitlines() == [
        f'warning: {files["config"]}: unknown field "cpuManagerPolicyTypo" in the KubeletConfiguration (the '
        'kubelet ignores it with a strict-decoding warning, so it has no effect); did you mean "cpuManagerPolicy"?'
    ]  # clusterDNS is a kubelet field numalign does not read: no warning
    assert "1/1 pods admitted" in out


def test_unknown_feature_gates_warn_and_continue(capsys: pytest.CaptureFixture[str],
                                                 files: dict[str, Path]) -> None:
    files["config"].write_text(CONFIG + "featureGates: {FileGate: true, CPUManagerPolicyAlphaOptions: true}\n")
    code = main(["admit", str(files["pod"]), "--config", str(files["config"]),
                 "--feature-gates", "Nope=true,TopologyManagerPolicyBetaOptions=true"])
    out, err = capsys.readouterr()
    assert code == 0, err
    lines = err.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f'warning: {files["config"]}: featureGates: feature gate "FileGate" is not modelled '
                               "by numalign and has no effect here (numalign models CPUManagerPolicyAlphaOptions")
    assert lines[1].startswith('warning: --feature-gates: feature gate "Nope" is not modelled by numalign')
    assert "unrecognized" not in err and "refuses" not in err
    assert "1/1 pods admitted" in out


# ---- 6. no pods ---------------------------------------------------------------------------------


@pytest.mark.parametrize("which", ["empty", "devnull"])
def test_file_without_pods_is_an_error(capsys: pytest.CaptureFixture[str], files: dict[str, Path],
                                       which: str) -> None:
    path = os.devnull if which == "devnull" else str(files["empty"])
    msg = error_of(capsys, "admit", str(files["pod"]), path)
    assert f"{path}: no Pod (or workload with a pod template) found" in msg
    assert "expected a manifest of kind Pod, List" in msg and "Deployment" in msg


# ---- 7. kubelet texts kept, the fix added ------------------------------------------------------


@pytest.mark.parametrize(("args", "kubelet_text", "hint"), [
    (["--policy-option", "foo=1"], 'unknown Topology Manager Policy option: "foo"',
     "; known options: max-allowable-numa-nodes, prefer-closest-numa-nodes"),
    (["--cgroups-per-qos", "maybe"],
     'invalid argument "maybe" for "--cgroups-per-qos" flag: strconv.ParseBool: parsing "maybe": invalid syntax',
     "; expected true or false"),
    (["--policy-option", "foo"],
     'invalid argument "foo" for "--topology-manager-policy-options" flag: malformed pair, expect string=string',
     "; expected one KEY=VALUE per use, e.g. prefer-closest-numa-nodes=true"),
    (["--kube-reserved", "memory"],
     'invalid argument "memory" for "--kube-reserved" flag: malformed pair, expect string=string',
     "; expected KEY=VALUE[,KEY=VALUE...], e.g. cpu=1,memory=1Gi"),
    (["--feature-gates", "A=maybe"], 'invalid value of A: maybe, err: strconv.ParseBool: parsing "maybe": invalid '
     "syntax", "; expected NAME=true|false[,NAME=true|false...], e.g. CPUManagerPolicyAlphaOptions=true"),
    (["--reserved-cpus", "abc"],
     'unable to parse reservedSystemCPUs (--reserved-cpus) abc, error: strconv.Atoi: parsing "abc": invalid syntax',
     "; expected a CPU list like 0-1,64"),
    (["--policy-option", "prefer-closest-numa-nodes=maybe"],
     'bad value for option "prefer-closest-numa-nodes": strconv.ParseBool: parsing "maybe": invalid syntax',
     "; expected true or false"),
])
def test_kubelet_text_then_the_fix(capsys: pytest.CaptureFixture[str], files: dict[str, Path],
                                   args: list[str], kubelet_text: str, hint: str) -> None:
    msg = error_of(capsys, "admit", str(files["pod"]), *args)
    assert kubelet_text + hint in msg


def test_reserved_memory_mismatch_shows_the_sum(capsys: pytest.CaptureFixture[str], files: dict[str, Path]) -> None:
    files["config"].write_text(CONFIG + "memoryManagerPolicy: Static\nkubeReserved: {memory: 1Gi}\n"
                               "reservedMemory: [{numaNode: 0, limits: {memory: 1Gi}}]\n")
    msg = error_of(capsys, "admit", str(files["pod"]), "--config", str(files["config"]))
    assert ('the total amount "1Gi" of type "memory" is not equal to the value "1124Mi" determined by Node '
            "Allocatable feature; fix: reservedMemory (--reserved-memory) limits of type memory, summed over all "
            "NUMA nodes, must equal kube-reserved + system-reserved + eviction-hard for memory = 1124Mi") in msg


def test_state_path_of_the_wrong_kind(capsys: pytest.CaptureFixture[str], files: dict[str, Path],
                                      tmp_path: Path) -> None:
    a_file = tmp_path / "state-file"
    a_file.write_text("")
    # A state-file error (CheckpointError, as the kubelet's own), not a flag error: exit 3.
    msg = error_of(capsys, "admit", str(files["pod"]), "--state-dir", str(a_file), status=EXIT_ERROR)
    assert f"{a_file} is a file; expected a directory holding cpu_manager_state" in msg
    assert "permissions" not in msg
    state = tmp_path / "state"
    (state / "cpu_manager_state").mkdir(parents=True)
    msg = error_of(capsys, "admit", str(files["pod"]), "--state-dir", str(state), status=EXIT_ERROR)
    assert f"{state / 'cpu_manager_state'} is a directory; expected the kubelet state file" in msg
    assert "permissions" not in msg


# ---- 8. the built-in example configuration is the base without --config -----------------------


def test_flags_override_the_builtin_example_with_pods(capsys: pytest.CaptureFixture[str],
                                                      files: dict[str, Path]) -> None:
    assert main(["admit", str(files["pod"]), "--policy", "restricted", "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kubeletConfig"] == {
        "topologyManagerPolicy": "restricted", "topologyManagerScope": "container",
        "topologyManagerPolicyOptions": {}, "cpuManagerPolicy": "static", "cpuManagerPolicyOptions": {},
        "memoryManagerPolicy": "Static",
    }
    assert any(n.startswith("kubelet config: built-in example example-kubelet-config.yaml")
               and n.endswith("overridden by --topology-manager-policy") for n in doc["notes"])


def test_the_large_machine_refusal_hint_works_as_printed(capsys: pytest.CaptureFixture[str]) -> None:
    msg = error_of(capsys, "admit", "--machine", "snc-16")
    assert "raise the limit with the topology manager policy option max-allowable-numa-nodes=16" in msg
    assert "--policy-option max-allowable-numa-nodes=16" in msg  # what to type
    assert "the built-in example example-kubelet-config.yaml" in msg and "--policy-option KEY=VALUE" in msg
    assert main(["admit", "--machine", "snc-16", "--policy-option", "max-allowable-numa-nodes=16"]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0]
    from numalign.k8s.version import DEFAULT

    assert header == (f"machine snc-16; kubelet {DEFAULT}; topologyManagerPolicy single-numa-node, scope container, "
                      "cpuManagerPolicy static, memoryManagerPolicy Static")
    assert "overridden by --topology-manager-policy-options" in out


def test_capacitys_large_machine_refusal_names_the_pool_and_the_cluster_file_fix(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """capacity has no --policy-option, which the refusal told to use: it names the pool and what to write
    under it in the cluster file, and that works as printed."""
    pod = tmp_path / "pod.yaml"
    pod.write_text(POD)
    pools = "kind: Cluster\nname: two\npools:\n- {name: small, count: 1, machine: dual-socket}\n" \
        "- name: big\n  count: 1\n  machine: snc-16\n"
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(pools)
    msg = error_of(capsys, "capacity", str(pod), "--cluster", str(cluster))
    assert msg == ("numalign capacity: error: unsupported on machines with more than 8 NUMA Nodes; pool big (machine "
                   "of 16 NUMA nodes) needs the topology manager policy option max-allowable-numa-nodes=16: in the "
                   "cluster file, under the pool, write `kubelet: {topologyManagerPolicyOptions: "
                   '{max-allowable-numa-nodes: "16"}}` (docs/cluster-format.md)')
    cluster.write_text(pools + '  kubelet: {topologyManagerPolicyOptions: {max-allowable-numa-nodes: "16"}}\n')
    assert main(["capacity", str(pod), "--cluster", str(cluster)]) == 0
    assert "max-allowable-numa-nodes=16" in capsys.readouterr().out


def test_config_file_replaces_the_builtin_example(capsys: pytest.CaptureFixture[str],
                                                  files: dict[str, Path]) -> None:
    assert main(["admit", str(files["pod"]), "--config", str(files["config"]), "--output", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kubeletConfig"]["topologyManagerPolicy"] == "best-effort"
    assert doc["kubeletConfig"]["memoryManagerPolicy"] == "None"  # the kubelet default, not the example's
    assert f"kubelet config: {files['config']}" in doc["notes"]


def test_serve_keeps_kubelet_defaults_without_config() -> None:
    """serve models a kubelet: without --config it starts from the kubelet's defaults."""
    import argparse

    from numalign.cli.options.kubeletflags import config_from_args
    from numalign.k8s.kubeletconfig import KubeletConfig

    assert config_from_args(argparse.Namespace()) == KubeletConfig()
    serve_py = Path(__file__).resolve().parents[2] / "src" / "numalign" / "cli" / "commands" / "serve.py"
    serve_source = serve_py.read_text()
    assert "example-kubelet-config" not in serve_source and "base=" not in serve_source


@pytest.mark.parametrize(("content", "found"), [("", "nothing (the file is empty)"), ("[1, 2]\n", "a list")])
def test_machine_file_that_is_not_a_mapping(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                            content: str, found: str) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(content)
    msg = error_of(capsys, "discover", "--machine", str(path))
    assert f"{path}: found {found}; --machine expects a machine file" in msg


def test_replay_file_not_utf8_or_a_directory(capsys: pytest.CaptureFixture[str], files: dict[str, Path]) -> None:
    msg = error_of(capsys, "replay", str(files["binary"]))
    assert f"replay: {files['binary']}: not UTF-8 text" in msg and "expected a JSON-lines file" in msg
    msg = error_of(capsys, "replay", str(files["dir"]))
    assert "is a directory; expected a JSON-lines file of scenarios" in msg


# ---- 9. what the trial found: each message says what, where, expected and the fix ---------------


def test_reserved_memory_on_a_missing_node_names_the_nodes(capsys: pytest.CaptureFixture[str],
                                                           files: dict[str, Path]) -> None:
    msg = error_of(capsys, "admit", str(files["pod"]), "--reserved-memory", "9:memory=1Gi")
    assert "references a NUMA node 9 that does not exist on this machine; machine dual-socket has NUMA nodes " \
           "0,1,2,3; reserve memory only on those (--reserved-memory 0:memory=SIZE" in msg


def test_dry_run_without_state_dir_says_it_has_no_effect(capsys: pytest.CaptureFixture[str],
                                                         files: dict[str, Path]) -> None:
    assert main(["admit", str(files["pod"]), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "# note: --dry-run has no effect without --state-dir" in out and "add --state-dir DIR" in out
    assert main(["admit", str(files["pod"]), "--dry-run", "--state-dir", str(files["dir"])]) == 0
    assert "has no effect" not in capsys.readouterr().out


def test_dry_run_of_a_state_dir_that_is_not_there_is_a_wrong_path(capsys: pytest.CaptureFixture[str],
                                                                  files: dict[str, Path]) -> None:
    # Not an empty node that fits everything: "would it fit there now?" of a mistyped path.
    missing = files["dir"] / "kubelet"
    msg = error_of(capsys, "admit", str(files["pod"]), "--dry-run", "--state-dir", str(missing), "--exit-code")
    assert f"--state-dir {missing}: no such directory" in msg and "check the path" in msg
    assert not missing.exists()


def test_pod_given_as_config_is_one_error_without_field_warnings(capsys: pytest.CaptureFixture[str],
                                                                  files: dict[str, Path]) -> None:
    msg = error_of(capsys, "admit", "--config", str(files["pod"]))  # exactly one line: no warnings first
    assert f"{files['pod']}: not a KubeletConfiguration: got apiVersion 'v1', kind 'Pod'" in msg
    assert "pass the kubelet's config file" in msg


def test_replay_of_no_scenarios_is_an_error(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    for extra in (["--check"], []):
        msg = error_of(capsys, "replay", str(empty), *extra)
        assert f"replay: {empty}: no scenarios (the input is empty or holds only blank lines)" in msg
        assert "check that this is the file you meant" in msg
        assert "0/0" not in capsys.readouterr().out


def test_replay_of_a_file_that_is_no_json_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A manifest given to replay printed an error and a result line per line of it (700,000 for a large
    one): a file whose first 20 lines, or all lines, are not JSON is refused in one line, nothing printed."""
    manifest = tmp_path / "pods.yaml"
    manifest.write_text(POD * 10)
    for extra in (["--check"], [], ["-o", "json"]):
        msg = error_of(capsys, "replay", str(manifest), *extra)
        assert msg == (f"numalign replay: error: replay: {manifest}: its first 20 lines are not JSON (line 1: "
                       'Expecting value at column 1); expected a JSON-lines file of scenarios, one {"scenario": '
                       '..., "result": ...} per line; check that this is the file you meant')
        assert capsys.readouterr().out == ""
    short = tmp_path / "short.yaml"
    short.write_text(POD)
    assert "replay: " + str(short) + ": none of its 8 lines is JSON (line 1:" in error_of(capsys, "replay", str(short))
    # a bad line among scenarios is still named on its own, and the rest still runs
    mixed = tmp_path / "mixed.jsonl"
    line = (Path(os.environ.get("NUMALIGN_SHARED", "../shared")) / "oracle" / "merge_vectors.jsonl")
    scenario = line.read_text().splitlines()[0] if line.is_file() else '{"kind": "merge", "policy": "none", ' \
        '"numa_nodes": [0], "providers": []}'
    mixed.write_text("not json\n" + scenario + "\n")
    assert main(["replay", str(mixed)]) == EXIT_INVALID
    captured = capsys.readouterr()
    assert captured.err.count("error:") == 1 and f"{mixed}:1: not valid JSON" in captured.err
    assert len(captured.out.splitlines()) == 2


def test_replay_refuses_a_scenario_key_written_twice(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """json.loads kept the last of a key written twice (review 4 L4): that line is named, the rest still runs."""
    scenario = '{"kind": "merge", "policy": "none", "numa_nodes": [0], "providers": []}'
    twice = scenario.replace('"policy": "none"', '"policy": "none", "policy": "single-numa-node"')
    nested = scenario.replace('"providers": []', '"providers": [{"cpu": [], "cpu": []}]')
    path = tmp_path / "twice.jsonl"
    path.write_text(twice + "\n" + scenario + "\n" + nested + "\n")
    assert main(["replay", str(path)]) == EXIT_INVALID
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.strip()]
    assert len(errors) == 2 and "Traceback" not in captured.err
    assert f'{path}:1: duplicate field "policy": a key written twice' in errors[0]
    assert f'{path}:3: duplicate field "cpu": a key written twice' in errors[1]
    assert "expected one JSON scenario per line, each key once" in errors[0]
    results = [json.loads(line)["result"] for line in captured.out.splitlines()]
    assert len(results) == 3 and "input_error" in results[0] and "input_error" in results[2]
    assert results[1].get("admit") is True  # the good line between them replayed

def test_machine_tarball_that_is_not_an_archive(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    fake = tmp_path / "x.tar.gz"
    fake.write_text("not an archive\n")
    msg = error_of(capsys, "discover", "--machine", str(fake))
    assert msg == (f"numalign discover: error: --machine {fake}: not a tar archive (plain, gzip, bzip2 or xz), or a "
                   "damaged one; expected a sysfs dump tarball holding sys/ (and proc/); check the file, or give a "
                   "machine file a .json/.yaml name")


def test_already_admitted_names_the_cli_fixes(capsys: pytest.CaptureFixture[str], files: dict[str, Path],
                                              tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert main(["admit", str(files["pod"]), "--state-dir", str(state)]) == 0
    capsys.readouterr()
    msg = error_of(capsys, "admit", str(files["pod"]), "--state-dir", str(state))
    assert "pod default/p (uid " in msg and f"is already admitted in the state of {state}" in msg
    assert "add --replace to admit the new version in its place, give the pod another name (or metadata.uid) " \
        "for a copy, use a fresh --state-dir, or use --dry-run" in msg
    assert "Node.remove" not in msg
    msg = error_of(capsys, "admit", str(files["pod"]), "--state-dir", str(state), "--dry-run")
    assert "another name (or metadata.uid) to ask about a copy" in msg and "--replace" in msg and "Node." not in msg
    msg = error_of(capsys, "admit", str(files["pod"]), str(files["pod"]))
    assert "already admitted earlier in this run" in msg and "Node." not in msg


@pytest.mark.parametrize("command", ["pods", "admit"])
def test_node_given_a_directory_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    """`--node DIR` (a snapshot someone extracted) said "no such file" of a directory that is there."""
    extracted = tmp_path / "node"
    extracted.mkdir()
    line = error_of(capsys, command, "--node", str(extracted))
    assert line == (f"numalign {command}: error: --node {extracted}: a directory; expected a tarball written by "
                    "`numalign snapshot` (snapshot.json, sys/, kubelet/, state/); pass the tarball itself (a sysfs "
                    "dump directory goes to --machine DIR)")
    line = error_of(capsys, command, "--node", str(tmp_path / "none.tgz"))
    assert line.endswith("none.tgz: no such file; expected a tarball written by `numalign snapshot` (snapshot.json, "
                         "sys/, kubelet/, state/); take one with `numalign snapshot FILE` on the node")
