"""Archives are checked entry by entry before anything is written: entry count, one file's size, the
total, special entries and names or links that leave the directory; each refusal is one line naming
the archive and the entry."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from numalign.adapters import archive
from numalign.adapters.archive import ArchiveError, extract_archive
from numalign.limits import MAX_ARCHIVE_MEMBER_BYTES

EXPECTED = "a test archive"


def _tar(path: Path, *entries: tarfile.TarInfo, data: dict[str, bytes] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tf:
        for info in entries:
            body = (data or {}).get(info.name)
            tf.addfile(info, io.BytesIO(body) if body is not None else None)
    return path


def _file(name: str, size: int = 3) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = size
    return info


def _entry(name: str, kind: bytes, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, link
    return info


def _extract(path: Path, dest: Path) -> None:
    extract_archive(path, dest, f"--node {path}", EXPECTED)


def test_a_well_formed_archive_extracts_with_its_inner_links(tmp_path: Path) -> None:
    src = _tar(tmp_path / "ok.tgz", _entry("sys", tarfile.DIRTYPE), _file("sys/a"),
               _entry("sys/b", tarfile.SYMTYPE, "a"), _entry("sys/c", tarfile.LNKTYPE, "sys/a"),
               data={"sys/a": b"abc"})
    _extract(src, tmp_path / "out")
    assert (tmp_path / "out/sys/b").read_text() == "abc" and (tmp_path / "out/sys/c").read_text() == "abc"


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        (_entry("dev/sda", tarfile.BLKTYPE), "entry 'dev/sda' is a device"),
        (_entry("sys/null", tarfile.CHRTYPE), "entry 'sys/null' is a device"),
        (_entry("sys/pipe", tarfile.FIFOTYPE), "entry 'sys/pipe' is a FIFO"),
        (_file("../../etc/cron.d/x"), "entry '../../etc/cron.d/x' leaves the extraction directory"),
        (_file("/etc/passwd"), "entry '/etc/passwd' leaves the extraction directory"),
        (_entry("sys/up", tarfile.SYMTYPE, "../../../etc"), "entry 'sys/up' is a link to '../../../etc', outside"),
        (_entry("sys/abs", tarfile.SYMTYPE, "/etc/shadow"), "entry 'sys/abs' is a link to '/etc/shadow', outside"),
        (_entry("sys/hard", tarfile.LNKTYPE, "../x"), "entry 'sys/hard' is a hard link to '../x', outside"),
    ],
    ids=["block-device", "char-device", "fifo", "dotdot", "absolute", "symlink-up", "symlink-absolute",
         "hardlink-up"],
)
def test_special_and_escaping_entries_are_refused_before_anything_is_written(
    tmp_path: Path, entry: tarfile.TarInfo, said: str
) -> None:
    src = _tar(tmp_path / "bad.tgz", _file("sys/first"), entry, data={"sys/first": b"abc"})
    with pytest.raises(ArchiveError) as e:
        _extract(src, tmp_path / "out")
    assert str(e.value).startswith(f"--node {src}: {said}") and "\n" not in str(e.value)
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_one_file_past_the_member_limit_is_refused_by_its_header(tmp_path: Path) -> None:
    # The header alone declares the size: the refusal comes before its data is read or written.
    big = _file("state/cpu_manager_state", MAX_ARCHIVE_MEMBER_BYTES + 1)
    src = tmp_path / "big.tar"
    with tarfile.open(src, "w") as tf:
        tf.addfile(big)
    with pytest.raises(ArchiveError, match=r"entry 'state/cpu_manager_state' is 67,108,865 bytes, more than the "
                                           r"limit of 64 MiB for one file"):
        _extract(src, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_total_and_the_entry_count_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Lowered limits, the same checks: three 10-byte files against a total of 25 and a count of 2.
    data = {f"sys/f{i}": b"0123456789" for i in range(3)}
    src = _tar(tmp_path / "three.tgz", *(_file(n, 10) for n in data), data=data)
    monkeypatch.setattr(archive, "MAX_ARCHIVE_BYTES", 25)
    total = r"more than 25 bytes of files in all \(the limit\), reached at entry 'sys/f2'"
    with pytest.raises(ArchiveError, match=total):
        _extract(src, tmp_path / "a")
    monkeypatch.setattr(archive, "MAX_ARCHIVE_BYTES", 1 << 20)
    monkeypatch.setattr(archive, "MAX_ARCHIVE_MEMBERS", 2)
    with pytest.raises(ArchiveError, match=r"more than 2 entries \(the limit\)"):
        _extract(src, tmp_path / "b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.parametrize("damage", ["not an archive", "cut short"])
def test_damaged_archives_are_one_line_of_invalid_input(tmp_path: Path, damage: str) -> None:
    good = _tar(tmp_path / "ok.tgz", *(_file(f"sys/f{i}", 4096) for i in range(20)),
                data={f"sys/f{i}": bytes(range(256)) * 16 for i in range(20)})
    src = tmp_path / "bad.tgz"
    src.write_bytes(b"hello, world\n" * 10 if damage == "not an archive" else good.read_bytes()[:300])
    with pytest.raises(ArchiveError) as e:
        _extract(src, tmp_path / "out")
    assert str(e.value).startswith(f"--node {src}: ") and "\n" not in str(e.value)
