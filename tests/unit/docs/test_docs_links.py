"""The README and docs/ stay true: every relative link resolves (files and #anchors), every `numalign ...`
command they show uses only subcommands and options its `--help` lists, and docs/commands.md names
every command and every long option."""

from __future__ import annotations

import argparse
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest

from numalign.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[3]
COMMANDS_PAGE = ROOT / "docs" / "commands.md"
# Pages the README links to that other work is writing; once one exists it is checked like any other.
PENDING_PAGES = {"docs/kubelet-versions.md", "docs/dra.md"}

_FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.M | re.S)
_INLINE_CODE = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_SHELL_BLOCKS = {"sh", "bash", "shell", "console"}
_GLOBAL_WITH_VALUE = {"-v", "--v", "--log-format"}
_GLOBAL_FLAGS = {"--debug", "-h", "--help", "--version"}


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _rel(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


# ---- links --------------------------------------------------------------------------------------------


def _without_code(text: str) -> str:
    text = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    return _INLINE_CODE.sub("``", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """The anchors a page's headings make (GitHub numbers repeated headings -1, -2, ...)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for m in re.finditer(r"^#{1,6}\s+(.*?)\s*#*\s*$", _FENCE.sub("", text), re.M):
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def broken_links(page: Path, text: str | None = None) -> list[str]:
    """`text` stands for the page's content when given (the page need not exist)."""
    text = page.read_text(encoding="utf-8") if text is None else text
    problems = []
    for m in _LINK.finditer(_without_code(text)):
        target = m.group(1)
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        where = f"{_rel(page)}: link {target}"
        if not path_part:
            if anchor not in anchors(text):
                problems.append(f"{where}: no heading #{anchor} here")
            continue
        dest = (page.parent / path_part).resolve()
        if not dest.exists():
            if dest.relative_to(ROOT).as_posix() not in PENDING_PAGES or anchor:
                problems.append(f"{where}: {path_part} does not exist")
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest.read_text(encoding="utf-8"))):
            problems.append(f"{where}: no heading #{anchor} in {_rel(dest)}")
    return problems


@pytest.mark.parametrize("page", pages(), ids=_rel)
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_readme_links_every_docs_page() -> None:
    readme = _without_code((ROOT / "README.md").read_text(encoding="utf-8"))
    linked = {(ROOT / t.partition("#")[0]).resolve() for t in _LINK.findall(readme)}
    unlinked = [_rel(p) for p in sorted((ROOT / "docs").glob("*.md")) if p.resolve() not in linked]
    assert unlinked == []


def test_the_readme_is_short_with_its_two_commands_first_and_the_fleet_question_on_its_first_screen() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 200
    first_block = _FENCE.search("\n".join(lines))
    assert first_block is not None
    assert [ln.split()[0] for ln in first_block.group(2).splitlines()] == ["scripts/run", "scripts/test"]
    fleet = next(i for i, ln in enumerate(lines) if "which policy for my fleet" in ln.lower())
    assert fleet < 60
    assert "scripts/test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


# ---- commands -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shown:
    where: str
    tokens: tuple[str, ...]


def _logical_lines(block: str) -> Iterator[tuple[int, str]]:
    start, parts = 0, list[str]()
    for i, line in enumerate(block.splitlines()):
        if not parts:
            start = i
        if line.endswith("\\"):
            parts.append(line[:-1])
            continue
        parts.append(line)
        yield start, " ".join(parts)
        parts = []
    if parts:
        yield start, " ".join(parts)


def _numalign_tokens(text: str) -> list[list[str]]:
    """Each `numalign ...` invocation on a shell line: its arguments up to the next shell operator."""
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    found = []
    for i, tok in enumerate(tokens):
        if tok == "numalign" or tok.endswith("/numalign"):
            args = []
            for t in tokens[i + 1:]:
                if t and all(c in "();<>|&" for c in t):
                    break
                args.append(t)
            found.append(args)
    return found


def shown_commands(page: Path) -> list[Shown]:
    text = page.read_text(encoding="utf-8")
    shown: list[Shown] = []
    for m in _FENCE.finditer(text):
        if m.group(1) not in _SHELL_BLOCKS:
            continue
        first_line = text.count("\n", 0, m.start(2)) + 1
        for offset, line in _logical_lines(m.group(2)):
            if not re.search(r"(^|[\s/])numalign\s", line):
                continue
            where = f"{_rel(page)}:{first_line + offset}"
            try:
                invocations = _numalign_tokens(line)
            except ValueError as e:
                raise AssertionError(f"{where}: cannot read the shell line ({e}): {line}") from None
            shown += [Shown(where, tuple(args)) for args in invocations]
    for m in _INLINE_CODE.finditer(_FENCE.sub("", text)):
        span = m.group(1)
        if re.match(r"(\S*/)?numalign\s", span):
            # An upper-case word in place of the command (`numalign CMD: error:`) is a placeholder.
            args = _numalign_tokens(span)[0]
            if args and re.fullmatch(r"[A-Z_]+:?", args[0]):
                continue
            shown.append(Shown(f"{_rel(page)}: `{span}`", tuple(args)))
    return shown


@cache
def _parser() -> argparse.ArgumentParser:
    return build_parser()


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    for action in _parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("numalign's parser has no subcommands")


def listed_options(parser: argparse.ArgumentParser) -> set[str]:
    """The option strings `--help` prints (suppressed ones are not listed)."""
    return {s for a in parser._actions if a.help != argparse.SUPPRESS for s in a.option_strings}


def command_problems(shown: Shown) -> list[str]:
    args = list(shown.tokens)
    while args and args[0] in _GLOBAL_FLAGS | _GLOBAL_WITH_VALUE:
        args = args[2:] if args[0] in _GLOBAL_WITH_VALUE else args[1:]
    if not args:
        return []
    command, rest = args[0], args[1:]
    subs = _subparsers()
    if command not in subs:
        return [f"{shown.where}: `numalign {command}` is not a command (numalign --help lists {sorted(subs)})"]
    known = listed_options(subs[command])
    problems = []
    for tok in rest:
        if tok == "--":
            break  # what follows is COMMAND's (numalign run -- COMMAND ...)
        if tok.startswith("-") and tok != "-" and not tok.startswith("-- "):
            name = tok.split("=", 1)[0]
            if name not in known:
                problems.append(f"{shown.where}: `numalign {command} --help` lists no {name}")
    return problems


@pytest.mark.parametrize("page", pages(), ids=_rel)
def test_every_command_shown_is_one_numalign_accepts(page: Path) -> None:
    problems = [p for shown in shown_commands(page) for p in command_problems(shown)]
    assert problems == []


def test_the_readme_shows_the_five_questions_commands() -> None:
    shown = {s.tokens[0] for s in shown_commands(ROOT / "README.md") if s.tokens}
    assert {"admit", "simulate", "capacity", "snapshot", "pods", "run", "serve"} <= shown


def test_commands_page_names_every_command_and_long_option() -> None:
    page = COMMANDS_PAGE.read_text(encoding="utf-8")
    missing = []
    for name, sub in _subparsers().items():
        if not re.search(rf"^## {name}$", page, re.M):
            missing.append(f"a '## {name}' section")
        for opt in sorted(listed_options(sub)):
            named = re.search(rf"(?<![\w-]){re.escape(opt)}(?![\w-])", page)
            if opt.startswith("--") and opt != "--help" and not named:
                missing.append(f"numalign {name} {opt}")
    assert missing == [], f"document these in docs/commands.md: {missing}"


# ---- the checks themselves fail on what they are meant to catch ----------------------------------------


def test_the_link_check_catches_a_missing_file_and_anchor() -> None:
    page = ROOT / "docs" / "no-such-page.md"
    text = ("# Title\n\n[a](commands.md#no-such-heading) [b](nowhere.md) [c](#title) [d](#other) `[e](x.md)`\n"
            "[f](commands.md#admit) [g](../README.md) [h](img/report-node.png) [i](https://example.com/x)\n"
            "```sh\n[j](y.md)\n```\n")
    assert broken_links(page, text) == [
        "docs/no-such-page.md: link commands.md#no-such-heading: no heading #no-such-heading in docs/commands.md",
        "docs/no-such-page.md: link nowhere.md: nowhere.md does not exist",
        "docs/no-such-page.md: link #other: no heading #other here",
    ]


def test_the_command_check_catches_an_unknown_command_and_option() -> None:
    assert command_problems(Shown("x", ("admit", "pod.yaml", "--policy", "restricted", "--dry-run"))) == []
    assert command_problems(Shown("x", ("-v", "4", "run", "--cpus", "2", "--", "taskset", "--bogus"))) == []
    assert command_problems(Shown("x", ("admit", "--no-such-flag"))) == [
        "x: `numalign admit --help` lists no --no-such-flag"]
    assert command_problems(Shown("x", ("simulte",)))[0].startswith("x: `numalign simulte` is not a command")
    assert _numalign_tokens("kubectl get pod p -o yaml | .venv/bin/numalign admit - > out.txt") == [["admit", "-"]]


def test_slugs_match_githubs() -> None:
    assert slug("One pod at a time, and the opt-in differences") == "one-pod-at-a-time-and-the-opt-in-differences"
    assert slug("`numalign plugin` and the device-plugin SDK") == "numalign-plugin-and-the-device-plugin-sdk"
