"""A compact text picture of the NUMA nodes and what holds them, for `discover` and `pods`.

One line per NUMA node: a character per CPU (ascending ids; a letter other than `r` names the container holding it,
`r` a reserved CPU, `.` a free one; the header names the letters in use), then memory held of the
node's total and devices held of those on the node. Colour (ANSI) only when asked, which the CLI
does on a terminal without NO_COLOR; the letters carry the same information without it."""

from __future__ import annotations

from numalign.machine.render import human_bytes, no_numa_note
from numalign.report.machine_svg import Owners
from numalign.report.view import NodeView

# No `r`: it marks a reserved CPU, so an 18th container drawn as `r` beside reserved CPUs read as reserved.
_LETTERS = "abcdefghijklmnopqstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
# Containers' colours, never green: green is a free CPU's, dim a reserved one's.
_ANSI = (34, 33, 31, 35, 36, 94, 93, 91, 95, 96)
WRAP = 64


def _letter(i: int) -> str:
    return _LETTERS[i] if i < len(_LETTERS) else "#"


def _legend(owners: int) -> str:
    """The header's key for the letters actually used: a-q, s-z (`r` is a reserved CPU), then A-Z, 0-9, then #
    for the rest."""
    if not owners:
        return ""
    runs: list[str] = []  # the letters in use as runs of consecutive characters: a-q, s-z, A-Z, 0-9
    for c in _LETTERS[:owners]:
        if runs and ord(c) == ord(runs[-1][-1]) + 1:
            runs[-1] += c
        else:
            runs.append(c)
    spans = [f"{s[0]}-{s[-1]}" if len(s) > 1 else s for s in runs]
    more = ", #: more" if owners > len(_LETTERS) else ""
    return f"{', '.join(spans)}{more}: containers holding CPUs, "


def _paint(s: str, code: int | None, color: bool) -> str:
    return f"\x1b[{code}m{s}\x1b[0m" if color and code is not None else s


def _runs(cells: list[tuple[str, int | None]], color: bool) -> str:
    """One escape sequence per run of same-coloured cells, not per cell."""
    out, i = [], 0
    while i < len(cells):
        j = i
        while j < len(cells) and cells[j][1] == cells[i][1]:
            j += 1
        out.append(_paint("".join(c for c, _ in cells[i:j]), cells[i][1], color))
        i = j
    return "".join(out)


def terminal_picture(view: NodeView, *, color: bool = False) -> str:
    owners = Owners.of(view)
    m = view.machine
    width = max((len(n.cpus) for n in m.numa_nodes), default=0)
    width = min(width, WRAP)
    label_w = max((len(f"NUMA {i}") for i in m.numa_ids()), default=0)
    lines = [f"NUMA nodes of {m.name} ({_legend(len(owners.names))}"
             f"{'r: reserved, ' if view.reserved_cpus else ''}.: free)"]
    if not m.numa_nodes:
        lines.append(f"  {no_numa_note(m)}")
    for node in m.numa_nodes:
        cells: list[tuple[str, int | None]] = []
        for cpu in sorted(node.cpus):
            owner = owners.cpu.get(cpu)
            if owner is not None:
                cells.append((_letter(owner), _ANSI[owner % len(_ANSI)]))
            elif cpu in view.reserved_cpus:
                cells.append(("r", 2))  # dim
            else:
                cells.append((".", 32))  # free: green, a colour no container has
        rows = [_runs(cells[i:i + WRAP], color) for i in range(0, len(cells), WRAP)] or [""]
        widths = [len(cells[i:i + WRAP]) for i in range(0, len(cells), WRAP)] or [0]
        mem = sum(size for (n, kind), parts in owners.memory.items() if n == node.id and kind == "memory"
                  for _, size in parts)
        held = [d for d in m.devices if d.numa_nodes and node.id == min(d.numa_nodes)]
        devs: dict[str, tuple[int, int]] = {}
        for d in held:
            kind = d.resource.rsplit("/", 1)[-1]
            taken, total = devs.get(kind, (0, 0))
            devs[kind] = (taken + ((d.resource, d.id) in owners.device), total + 1)
        if view.pods:  # occupancy: held of total
            tail = f"mem {human_bytes(int(mem))}/{human_bytes(node.memory_bytes)}"
            tail += "".join(f"  {k} {t}/{n}" for k, (t, n) in sorted(devs.items()))
        else:  # a bare machine: what each NUMA node has
            tail = f"{len(node.cpus)} CPUs, mem {human_bytes(node.memory_bytes)}"
            tail += "".join(f", {n} {k}" for k, (_, n) in sorted(devs.items()))
        pad = " " * (width - widths[0])
        lines.append(f"{f'NUMA {node.id}'.rjust(label_w)}  {rows[0]}{pad}  {tail}")
        lines += [f"{' ' * label_w}  {r}" for r in rows[1:]]
    for i, name in enumerate(owners.names[:len(_LETTERS)]):
        lines.append(f"  {_paint(_letter(i), _ANSI[i % len(_ANSI)], color)}  {name}")
    # Past the letters every container is `#`: one line says how many, not one line each (830 pods on
    # numa-64 printed 770 lines of `#  hpc/svc-NNN c` under the picture); the pods table names them.
    rest = owners.names[len(_LETTERS):]
    if rest:
        more = f"{rest[0]} ... {rest[-1]}" if len(rest) > 2 else ", ".join(rest)
        lines.append(f"  #  {len(rest)} more containers ({more})")
    return "\n".join(lines) + "\n"
