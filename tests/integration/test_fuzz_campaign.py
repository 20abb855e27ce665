"""The fuzz campaign, short and seeded (the long one is `scripts/fuzz --minutes 10`): damaged inputs on
every surface give a result or one numalign error line, in a process whose address space is capped.
Plus the inputs that crashed or exhausted numalign before it bounded them, through the real CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support.fuzz_surfaces import SURFACES

TESTS = Path(__file__).resolve().parents[1]
EXAMPLES = 25


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_fuzz_surface_gives_results_or_one_line_errors(surface: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "support.fuzz_campaign", "--surface", surface, "--examples", str(EXAMPLES),
         "--seed", "16"],
        cwd=TESTS, capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:] + proc.stdout
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.strip().startswith(surface)]
    tried, results, errors = (int(w) for w in line.split()[1::2][:3])
    assert tried == EXAMPLES and results + errors == tried


def _cli(*args: str, limit: int = 1 << 30) -> subprocess.CompletedProcess[str]:
    code = (
        f"import resource, sys; resource.setrlimit(resource.RLIMIT_AS, ({limit}, {limit})); "
        "from numalign.cli.main import main; sys.exit(main(sys.argv[1:]))"
    )
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=60,
                          check=False)


@pytest.mark.parametrize(("name", "text", "words"), [
    ("deep.yaml", "- " * 30_000 + "a\n", "nested 30001 levels deep"),  # segfaulted PyYAML's C loader
    ("deep.json", "[" * 1000 + "]" * 1000, "nested 1000 levels deep"),  # RecursionError
    ("digits.yaml", "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {limits: {cpu: '"
     + "9" * 4400 + "'}}}]}\n", "longer than 256 characters"),  # ValueError from the int-str limit
    ("replicas.yaml", "kind: Deployment\nmetadata: {name: d}\nspec: {replicas: 1000000000, template: {spec: "
     "{containers: [{name: c, resources: {limits: {cpu: '1'}}}]}}}\n", "more than numalign admits on one node"),
])
def test_cli_bombs_give_one_line(tmp_path: Path, name: str, text: str, words: str) -> None:
    path = tmp_path / name
    path.write_text(text)
    proc = _cli("admit", str(path))  # a workload's spec.replicas pods are admitted by default
    assert proc.returncode in (2, 3), proc.stderr[-2000:]
    (line,) = proc.stderr.splitlines()
    assert line.startswith("numalign admit: error: ") and words in line


def test_machine_file_with_a_billion_cpus_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text("format: numalign.machine/v1\nname: m\nnuma_nodes: [{id: 0, cpus: 0-999999999}]\ncpus: []\n")
    proc = _cli("discover", "--machine", str(path))
    assert proc.returncode in (2, 3), proc.stderr[-2000:]
    (line,) = proc.stderr.splitlines()
    assert "names CPU id '999999999'" in line and "from 0 to 8191" in line


def test_endless_manifest_is_cut_at_the_limit() -> None:
    proc = _cli("admit", "/dev/zero", limit=2 << 30)
    assert proc.returncode in (2, 3), proc.stderr[-2000:]
    (line,) = proc.stderr.splitlines()
    assert "/dev/zero: cannot read the manifest" in line and "larger than the limit of 32 MiB" in line


def test_replay_of_an_endless_stream_ends() -> None:
    """/dev/zero is one endless line of NULs: it spun for ever skipping to a line end that never comes."""
    proc = _cli("replay", "/dev/zero")
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.splitlines()
    assert "replay: /dev/zero:1: binary data (a NUL byte); expected a JSON-lines file of scenarios" in line


def test_replay_line_without_an_end_is_given_up_on() -> None:
    import io

    from numalign.errors import InvalidInputError
    from numalign.replay.runner import MAX_SKIPPED_CHUNKS, LineTooLong, bounded_lines

    # a long line that ends is skipped and reported; one longer than the skip bound stops the run
    ended = list(bounded_lines(io.StringIO("a" * 50 + "\n{}\n"), limit=10, name="x"))
    assert isinstance(ended[0], LineTooLong) and ended[1] == "{}\n"
    with pytest.raises(InvalidInputError, match=r"replay: x:1: a line of more than 16 x 10 characters and no end"):
        list(bounded_lines(io.StringIO("a" * 10 * (MAX_SKIPPED_CHUNKS + 2)), limit=10, name="x"))


def test_devices_json_50000_deep_gives_one_line(tmp_path: Path) -> None:
    """--devices FILE.json went to json.loads unchecked: "internal error: RecursionError"."""
    path = tmp_path / "deep.json"
    path.write_text("[" * 50_000 + "]" * 50_000)
    proc = _cli("admit", "--devices", str(path))
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.splitlines()
    assert f"--devices {path}: nested 50000 levels deep, more than the limit of 100" in line


def test_timeline_line_50000_deep_gives_one_line(tmp_path: Path) -> None:
    pod = tmp_path / "p.yaml"
    pod.write_text("kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {limits: {cpu: '1'}}}]}\n")
    timeline = tmp_path / "t.jsonl"
    timeline.write_text("{" + '"a":[' * 50_000 + "\n")
    proc = _cli("simulate", str(pod), "--timeline", str(timeline), "-j", "1")
    assert proc.returncode == 2, proc.stderr[-2000:]
    (line,) = proc.stderr.splitlines()
    assert f"{timeline}:1: not a JSON object" in line
