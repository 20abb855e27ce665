"""scripts/conformance answers case by case (harness.stream, run.Tally): the requests are generated only as
the harness reads them, a hang restarts the harness with what it was sent and did not answer, and a run
keeps one case per class of difference, so a long run's memory does not grow with its cases."""

from __future__ import annotations

import io
import itertools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance import harness, run

# A stand-in for the Go harness, speaking its protocol (conformance/main.go): one answer line per request,
# {"hang": true} and exit 3 for a case that hangs, and its process id in each answer (which run answered).
FAKE = """\
import json, os, sys
for line in sys.stdin:
    r = json.loads(line)
    if r["case"].get("hang"):
        print(json.dumps({"id": r["id"], "answer": {"hang": True}}), flush=True)
        sys.exit(3)
    if r["case"].get("error"):
        print(json.dumps({"id": r["id"], "error": "harness: no such area"}), flush=True)
        continue
    print(json.dumps({"id": r["id"], "answer": {"n": r["case"]["n"], "pid": os.getpid()}}), flush=True)
"""


@pytest.fixture
def fake_harness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "harness-fake"
    script.write_text(f"#!{sys.executable}\n{FAKE}")
    script.chmod(0o755)
    monkeypatch.setattr(harness, "binary", lambda target: script)


def _requests(cases: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for i, c in enumerate(cases):
        yield {"id": f"fake-{i}", "area": "fake", "case": c}


@pytest.mark.usefixtures("fake_harness")
def test_each_request_comes_back_with_its_answer_in_order() -> None:
    got = list(harness.stream("fake", _requests([{"n": i} for i in range(50)])))
    assert [req["id"] for req, _ in got] == [f"fake-{i}" for i in range(50)]
    assert all(ans["id"] == req["id"] and ans["answer"]["n"] == req["case"]["n"] for req, ans in got)
    assert len({ans["answer"]["pid"] for _, ans in got}) == 1  # one harness for them all


@pytest.mark.usefixtures("fake_harness")
def test_a_hang_restarts_the_harness_with_the_requests_it_left_unanswered() -> None:
    cases = [{"n": 0}, {"n": 1, "hang": True}, *({"n": i} for i in range(2, 40)), {"n": 40, "hang": True}, {"n": 41}]
    got = list(harness.stream("fake", _requests(cases)))
    assert [req["id"] for req, _ in got] == [f"fake-{i}" for i in range(42)]
    assert got[1][1]["answer"] == {"hang": True} and got[40][1]["answer"] == {"hang": True}
    pids = [ans["answer"].get("pid") for _, ans in got]
    # the cases after each hang were answered by the next harness, none lost nor answered twice
    assert pids[0] != pids[2] and len(set(pids[2:40])) == 1 and pids[41] not in (pids[0], pids[2])
    assert [ans["answer"].get("n") for _, ans in got if "n" in ans["answer"]] == [0, *range(2, 40), 41]
    # the list form answers the same
    assert [a["id"] for a in harness.answer("fake", list(_requests(cases)))] == [f"fake-{i}" for i in range(42)]


@pytest.mark.usefixtures("fake_harness")
def test_requests_are_drawn_as_the_harness_reads_them_and_an_early_stop_ends_it() -> None:
    endless = ({"id": f"fake-{i}", "area": "fake", "case": {"n": i}} for i in itertools.count())
    answers = harness.stream("fake", endless)
    first = list(itertools.islice(answers, 3))  # an endless series would never return if drawn all at once
    answers.close()  # kills this harness and its writer: close() returning is the check
    assert [req["case"]["n"] for req, _ in first] == [0, 1, 2]


@pytest.mark.usefixtures("fake_harness")
def test_a_failing_generator_is_raised_after_what_was_answered() -> None:
    def broken() -> Iterator[dict[str, Any]]:
        yield from _requests([{"n": 0}, {"n": 1}])
        raise ValueError("the generator's own bug")

    seen: list[str] = []
    with pytest.raises(ValueError, match="the generator's own bug"):
        for req, _ in harness.stream("fake", broken()):
            seen.append(req["id"])
    assert seen == ["fake-0", "fake-1"]


def test_a_tally_keeps_the_smallest_case_of_each_class_and_counts_the_rest() -> None:
    tally = run.Tally(version="1.37.2", area="fake")
    for i, (size, where) in enumerate([(9, "a"), (3, "a"), (5, "a"), (7, "b")]):
        ours, theirs = {where: 1, "i": i}, {where: 2, "i": i}
        tally.add_difference(run.Difference("fake", "1.37.2", f"fake-{i}", {"i": i}, ours, theirs, size))
    assert tally.different == 4
    assert {w: (c.count, c.smallest.case_id) for w, c in tally.classes.items()} == {".a": (3, "fake-1"),
                                                                                    ".b": (1, "fake-3")}
    out = io.StringIO()
    assert run.report([tally], out) == 1
    text = out.getvalue()
    assert "difference: fake at 1.37.2, first at .a: 3 cases\n  smallest (fake-1): " in text
    assert "4 different" in text


def _fake_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sources: str, calls: list[list[str]]) -> None:
    """A conformance directory of one Go source, whose `build` writes .build/harness-TARGET holding the
    sources' text (as conformance/build writes the binary), recording each call."""
    go_dir = tmp_path / "conformance"
    go_dir.mkdir(exist_ok=True)
    (go_dir / "main.go").write_text(sources)
    (go_dir / "build").write_text("#!/bin/sh\n")  # read into the digest; never run (subprocess.run is faked)
    monkeypatch.setattr(harness, "GO_DIR", go_dir)
    monkeypatch.setattr(harness, "BUILD", go_dir / ".build")
    harness._DIGESTS.clear()

    def run(argv: list[str], check: bool) -> None:
        calls.append(argv[1:])
        for target in argv[1:]:
            (go_dir / ".build" / f"harness-{target}").write_text((go_dir / "main.go").read_text())

    monkeypatch.setattr(subprocess, "run", run)


def test_checkouts_with_other_sources_keep_their_own_harnesses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # worktrees sharing one .build (symlinked) rebuilt it over each other whenever their Go sources differed
    calls: list[list[str]] = []
    _fake_build(tmp_path, monkeypatch, "package main // old", calls)
    harness.ensure_built(["1.37", "1.33"])
    old = harness.binary("1.37")
    assert calls == [["1.37", "1.33"]] and old.read_text() == "package main // old"
    harness.ensure_built(["1.37"])
    assert len(calls) == 1  # built from these sources already
    _fake_build(tmp_path, monkeypatch, "package main // new", calls)  # another checkout's sources
    harness.ensure_built(["1.37"])
    new = harness.binary("1.37")
    assert new != old and new.read_text() == "package main // new" and old.read_text() == "package main // old"
    assert calls == [["1.37", "1.33"], ["1.37"]]
    _fake_build(tmp_path, monkeypatch, "package main // old", calls)  # the first sources again: nothing to build
    assert harness.binary("1.37") == old
    harness.ensure_built(["1.37", "1.33"])
    assert calls == [["1.37", "1.33"], ["1.37"]]
