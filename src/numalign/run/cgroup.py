"""A cgroup v2 child cgroup per `numalign run`: cpuset.cpus, cpuset.mems, memory.max, hugetlb limits.

What the container runtime writes for a kubelet's container, where this process may write it: the
cgroup2 file system (found in /proc/self/mountinfo, /sys/fs/cgroup on a unified host, often
/sys/fs/cgroup/unified on a hybrid one), a parent cgroup (`<mount>/numalign` unless --cgroup-parent
names a delegated one), each needed controller enabled in every cgroup.subtree_control from the mount
down to the parent, then one child cgroup named after the pod's uid. What cannot be applied
(no cgroup2 mount, a controller held by a cgroup v1 hierarchy, no permission) is named once, with why;
the affinity and the memory policy, which need no cgroup, still hold the process.

When the command ends the child cgroup is emptied (cgroup.kill: the container's other processes end
with it, as in a container) and removed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from numalign.k8s.cpuset import format_cpuset
from numalign.run.affinity import PlacementError

MOUNTINFO = Path("/proc/self/mountinfo")
PARENT_NAME = "numalign"
_PERMISSION = (errno.EACCES, errno.EPERM, errno.EROFS)


@dataclass(frozen=True)
class CgroupLimits:
    cpus: frozenset[int]
    mems: frozenset[int] | None = None  # None: the memory manager pinned nothing, leave cpuset.mems alone
    memory_max: int | None = None
    hugetlb: Mapping[int, int] = field(default_factory=dict)  # page size in bytes -> limit in bytes

    def files(self, hugetlb_sizes: Iterable[int]) -> list[tuple[str, str, str]]:
        """(controller, file, value) in the order the runtime writes them."""
        out = [("cpuset", "cpuset.cpus", format_cpuset(self.cpus))]
        if self.mems is not None:
            out.append(("cpuset", "cpuset.mems", format_cpuset(self.mems)))
        if self.memory_max is not None:
            out.append(("memory", "memory.max", str(self.memory_max)))
        # Every size the kernel offers gets a limit, 0 where none was asked (as the kubelet's pod cgroup).
        for size in sorted(set(hugetlb_sizes) | set(self.hugetlb)):
            out.append(("hugetlb", f"hugetlb.{hugetlb_size_name(size)}.max", str(self.hugetlb.get(size, 0))))
        return out


def hugetlb_size_name(size: int) -> str:
    """The kernel's name for a huge page size in hugetlb file names (mm/hugetlb_cgroup.c mem_fmt)."""
    for unit, name in ((1 << 30, "GB"), (1 << 20, "MB")):
        if size >= unit:
            return f"{size // unit}{name}"
    return f"{size // 1024}KB"


def find_cgroup2_mount(mountinfo: Path = MOUNTINFO) -> Path | None:
    """The cgroup2 mount point, /sys/fs/cgroup first when several exist."""
    found = cgroup2_mounts(mountinfo)
    return found[0] if found else None


def cgroup2_mounts(mountinfo: Path = MOUNTINFO) -> list[Path]:
    """Every cgroup2 mount point, /sys/fs/cgroup first."""
    try:
        lines = mountinfo.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    found: list[Path] = []
    for line in lines:
        left, sep, right = line.partition(" - ")
        if sep and right.split(" ", 1)[0] == "cgroup2":
            found.append(Path(left.split(" ")[4].replace("\\040", " ")))
    found.sort(key=lambda p: (p != Path("/sys/fs/cgroup"), str(p)))
    return found


def _words(path: Path) -> set[str]:
    try:
        return set(path.read_text(encoding="ascii").split())
    except OSError:
        return set()


def _v1_controllers(proc_cgroup: Path = Path("/proc/self/cgroup")) -> set[str]:
    out: set[str] = set()
    for line in _words_lines(proc_cgroup):
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[0] != "0":
            out.update(c for c in parts[1].split(",") if c)
    return out


def _words_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="ascii", errors="replace").splitlines()
    except OSError:
        return []


@dataclass
class Cgroup:
    """A child cgroup created for one run."""

    path: Path

    def join(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(f"{pid}\n", encoding="ascii")

    def remove(self, timeout: float = 5.0) -> None:
        remove_cgroup(self.path, timeout)


def remove_cgroup(path: Path, timeout: float = 5.0) -> None:
    """End whatever still runs in the cgroup and remove it; a cgroup already gone is fine."""
    if not path.is_dir():
        return
    kill = path / "cgroup.kill"
    try:
        if kill.exists():
            kill.write_text("1\n", encoding="ascii")
        else:  # kernels before 5.14
            for pid in _words(path / "cgroup.procs"):
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
    except OSError:
        pass
    deadline = time.monotonic() + timeout
    while True:
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as e:
            # EBUSY while the killed processes are still exiting.
            if e.errno != errno.EBUSY or time.monotonic() >= deadline:
                raise PlacementError(
                    f"cannot remove cgroup {path}: {e.strerror}; its processes did not end within {timeout:g} s; "
                    f"look at {path / 'cgroup.procs'} and remove the directory once they have ended"
                ) from None
            time.sleep(0.01)


@dataclass
class CgroupSetup:
    cgroup: Cgroup | None
    applied: list[str]
    not_applied: list[str]
    reason: str = ""

    def note(self) -> str | None:
        if not self.not_applied:
            return None
        return f"cgroup: {', '.join(self.not_applied)} not applied: {self.reason}"


def create(limits: CgroupLimits, name: str, parent: Path | None, mountinfo: Path = MOUNTINFO) -> CgroupSetup:
    """Create and fill the child cgroup; what cannot be applied is returned with the reason.

    Raises PlacementError when the kernel refuses a value (not a permission): nothing is left behind."""
    mounts = cgroup2_mounts(mountinfo)
    if parent is not None:
        # The mount holding --cgroup-parent (the deepest, should mounts nest).
        holding = sorted((m for m in mounts if parent == m or m in parent.parents), key=lambda m: len(m.parts))
        if not holding:
            raise PlacementError(
                f"--cgroup-parent {parent}: not inside a cgroup2 file system (mounted: "
                f"{', '.join(map(str, mounts)) or 'none'}); pass a directory under one of them, or --no-cgroup"
            )
        mounts = holding[-1:]
    mount = mounts[0] if mounts else None
    wanted_all = limits.files([])
    if mount is None:
        return CgroupSetup(None, [], [f for _, f, _ in wanted_all],
                           "no cgroup2 file system is mounted (see /proc/self/mountinfo); mount one at "
                           "/sys/fs/cgroup or boot with systemd.unified_cgroup_hierarchy=1")
    parent = parent if parent is not None else mount / PARENT_NAME
    available = _words(mount / "cgroup.controllers")
    sizes = _hugetlb_sizes() if "hugetlb" in available else []
    wanted = limits.files(sizes)
    reasons: list[str] = []
    missing = sorted({c for c, _, _ in wanted} - available)
    if missing:
        v1 = _v1_controllers() & set(missing)
        why = (f"controller {', '.join(missing)} not offered by {mount}/cgroup.controllers"
               + (" (held by a cgroup v1 hierarchy: this host mounts cgroups in hybrid mode; boot with "
                  "systemd.unified_cgroup_hierarchy=1 to have them in cgroup v2)" if v1 else ""))
        reasons.append(why)
    usable = [c for c in ("cpuset", "memory", "hugetlb") if c in available and any(w[0] == c for w in wanted)]
    try:
        parent.mkdir(parents=True, exist_ok=True)
        parts = parent.relative_to(mount).parts
        # A controller reaches the child only when every cgroup above it enables it for its children.
        for here in [mount.joinpath(*parts[:i]) for i in range(len(parts) + 1)]:
            enabled = _words(here / "cgroup.subtree_control")
            for c in usable:
                if c not in enabled:
                    (here / "cgroup.subtree_control").write_text(f"+{c}\n", encoding="ascii")
    except OSError as e:
        where = e.filename or parent
        reasons.append(f"{where}: {e.strerror or e} (run as root, or pass --cgroup-parent a cgroup delegated to "
                       "you; or --no-cgroup)")
        return CgroupSetup(None, [], [f for _, f, _ in wanted], "; ".join(reasons))
    path = parent / name
    try:
        path.mkdir()
    except OSError as e:
        reasons.append(f"{path}: {e.strerror or e}")
        return CgroupSetup(None, [], [f for _, f, _ in wanted], "; ".join(reasons))
    applied: list[str] = []
    try:
        for controller, fname, value in wanted:
            if controller not in usable:
                continue
            (path / fname).write_text(f"{value}\n", encoding="ascii")
            applied.append(fname)
    except OSError as e:
        with contextlib.suppress(OSError):
            path.rmdir()
        raise PlacementError(
            f"cgroup {path}: writing {fname} = {value} failed: {e.strerror or e}; expected a value the parent "
            f"cgroup allows ({parent}/cpuset.cpus.effective, cpuset.mems.effective); widen the parent or pass "
            "--no-cgroup"
        ) from None
    not_applied = [f for c, f, _ in wanted if c not in usable]
    return CgroupSetup(Cgroup(path), applied, not_applied, "; ".join(reasons))


def _hugetlb_sizes() -> list[int]:
    """Huge page sizes the kernel offers, in bytes (hugetlb.<size>.max in the root lists them too)."""
    out = []
    for d in Path("/sys/kernel/mm/hugepages").glob("hugepages-*kB"):
        with contextlib.suppress(ValueError):
            out.append(int(d.name[len("hugepages-"):-2]) * 1024)
    return sorted(out)
