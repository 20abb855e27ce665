"""The node report: one HTML page with the machine picture, a legend, the distance heat map and, beside
them, the decision record of every rejected pod (hints per hint provider and resource, merged hint, why)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

from numalign.k8s.cpuset import format_cpuset
from numalign.machine.render import human_bytes, no_numa_note
from numalign.report import colors
from numalign.report.heatmap import distance_svg
from numalign.report.machine_svg import machine_svg
from numalign.report.style import CSS
from numalign.report.verdict import marked
from numalign.report.view import ContainerView, NodeView, PodView

MAX_HINTS = 16  # per list; a 64-node machine's lists run to thousands (the JSON output keeps them all)


def html_page(title: str, body: Iterable[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(title)}</title><style>{CSS}</style></head><body>"
            + "".join(body) + "<footer>numalign report: self-contained, nothing is fetched.</footer></body></html>\n")


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _summary(view: NodeView) -> str:
    m = view.machine
    sockets = len(m.sockets())
    parts = [_n(sockets, "socket"), _n(len(m.numa_nodes), "NUMA node"), _n(len(m.physical_cores()), "core"),
             _n(len(m.online_cpus()), "CPU"), f"{human_bytes(sum(n.memory_bytes for n in m.numa_nodes))} memory",
             _n(len(m.devices), "device")]
    pods = (f"; {len(view.admitted)} pod(s) admitted, {len(view.rejected)} rejected" if view.pods else "")
    return f"<p class=\"summary\">machine <b>{escape(m.name)}</b>: {escape(', '.join(parts))}{escape(pods)}</p>"


def _what(c: ContainerView) -> str:
    pool = "exclusive" if c.exclusive else "shared pool"
    parts = [f"cpus {format_cpuset(sorted(c.cpus))} ({pool})"] if c.cpus else []
    for b in c.memory:
        parts.append(f"{b.type} {human_bytes(b.size)} on NUMA {','.join(map(str, b.numa_nodes))}")
    for res, ids in c.devices.items():
        if ids:
            parts.append(f"{res} {' '.join(ids)}")
    return "; ".join(parts)


def legend(view: NodeView) -> str:
    items = []
    for i, (pod, c) in enumerate(view.owners()):
        items.append(f"<li class=\"owner\"><span class=\"swatch\" style=\"background:{colors.owner_colour(i)}\">"
                     f"</span><b>{escape(pod.key)}</b> {escape(c.name)} <span class=\"detail\">{escape(_what(c))}"
                     "</span></li>")
    held = {id(c) for _, c in view.owners()}
    shared = [(p, c) for p in view.admitted for c in p.containers if id(c) not in held]
    if shared:
        names = ", ".join(f"{p.key} {c.name}" for p, c in shared)
        items.append(f"<li><span class=\"swatch\" style=\"background:{colors.FREE}\"></span>free CPUs: the shared "
                     f"pool, where {escape(names)} run{'s' * (len(shared) == 1)}</li>")
    else:
        items.append(f"<li><span class=\"swatch\" style=\"background:{colors.FREE}\"></span>free (shared pool)</li>")
    if view.reserved_cpus:
        items.append(f"<li><span class=\"swatch reserved\"></span>reserved CPUs {format_cpuset(view.reserved_cpus)}"
                     "</li>")
    return "<h2>Legend</h2><ul class=\"legend\" id=\"legend\">" + "".join(items) + "</ul>"


def _hint(h: Mapping[str, Any]) -> str:
    mask = h.get("mask")
    nodes = "any" if mask is None else ",".join(map(str, mask)) or ""
    return "{" + nodes + "}" + ("P" if h.get("preferred") else "")


def hints_text(hs: Any) -> str:
    """A hint provider's hints for one resource, in the words `numalign admit` prints."""
    if hs is None:
        return "don't care"
    if isinstance(hs, Mapping):  # an implicit list (large machines): described, not listed
        nodes = hs.get("nodes") or []
        pref = hs.get("preferred_counts")
        listed = " ".join(_hint(h) for h in hs.get("listed") or [])
        text = f"any mask of nodes {{{_ranges(nodes)}}} that can hold the request" if nodes else ""
        text = f"{text}, and {listed}" if text and listed else text or listed
        return (f"{text} (narrowest: {hs.get('narrowest_count')} node(s); preferred: "
                + ("masks spanning the fewest sockets" if pref is None else
                   "masks of " + " or ".join(map(str, pref)) + " node(s)") + ")")
    if not hs:
        return "cannot be satisfied ([])"
    shown = " ".join(_hint(h) for h in hs[:MAX_HINTS])
    return shown if len(hs) <= MAX_HINTS else f"{shown} ... (+{len(hs) - MAX_HINTS} more)"


def _ranges(ids: Sequence[int]) -> str:
    return format_cpuset(ids)


def decision_record(pod: PodView) -> str:
    rec = pod.record or {}
    out = [f"<section class=\"record\" data-pod=\"{escape(pod.key)}\"><h3>{escape(pod.key)}</h3>",
           f"<p class=\"verdict\">rejected: {escape(pod.reason)}: {escape(pod.message)}</p>"]
    if rec.get("policy"):
        out.append(f"<p class=\"detail\">policy {escape(str(rec['policy']))}, scope {escape(str(rec.get('scope')))}"
                   "</p>")
    for d in rec.get("decisions") or []:
        who = f"container {d['container']}" if d.get("container") else "pod (all containers)"
        merged = "not merged" if d.get("merged") is None else _hint(d["merged"])
        rows = []
        for p in d.get("providers") or []:
            hints = p.get("hints")
            if not hints:
                rows.append(f"<tr><td>{escape(p['provider'])}</td><td>-</td>"
                            "<td class=\"hints\">no preference</td></tr>")
                continue
            for res in sorted(hints):
                rows.append(f"<tr><td>{escape(p['provider'])}</td><td>{escape(res)}</td>"
                            f"<td class=\"hints\">{escape(hints_text(hints[res]))}</td></tr>")
        out.append(f"<p><b>{escape(who)}</b>: merged hint <code>{escape(merged)}</code> -&gt; "
                   f"{'admit' if d.get('admit') else 'reject'}</p>")
        out.append("<table><thead><tr><th>hint provider</th><th>resource</th><th>hints</th></tr></thead><tbody>"
                   + "".join(rows) + "</tbody></table>")
        whys = [*(d.get("explanation") or []),
                *([f"allocation failed: {d['allocation_error']}"] if d.get("allocation_error") else [])]
        if whys:
            out.append("<ul class=\"why\">" + "".join(f"<li>why: {escape(w)}</li>" for w in whys) + "</ul>")
    # A TopologyAffinityError's why is the record's own explanation, shown above.
    out += _answer(pod.answer, with_why=pod.reason != "TopologyAffinityError")
    out.append("</section>")
    return "".join(out)


MAX_FREE_ROWS = 12


def _amount(resource: str, value: int, numa: Any) -> str:
    if resource == "cpu":
        return f"{value} CPUs" if numa is not None else f"{value}m CPU"
    if resource == "memory" or resource.startswith("hugepages-"):
        return human_bytes(value)
    return str(value)


def _answer(answer: Mapping[str, Any] | None, with_why: bool) -> list[str]:
    """A rejected pod's free capacity (what it could use, where) and its verified "would fit if"."""
    if not answer:
        return []
    out: list[str] = []
    if with_why and answer.get("why"):
        out.append("<ul class=\"why\">" + "".join(f"<li>why: {escape(str(w))}</li>" for w in answer["why"]) + "</ul>")
    rows = [f for f in answer.get("free") or () if f.get("allocatable") or f.get("heldBy")]
    if rows:
        cells = []
        for f in rows[:MAX_FREE_ROWS]:
            where = "node" if f.get("numaNode") is None else f"NUMA {f['numaNode']}"
            res = str(f.get("resource"))
            held = ", ".join(f"{h.get('pod')}{'/' + h['container'] if h.get('container') else ''}"
                             for h in (f.get("heldBy") or [])[:3])
            cells.append(f"<tr><td>{escape(where)}</td><td>{escape(res)}</td>"
                         f"<td>{escape(_amount(res, int(f.get('free') or 0), f.get('numaNode')))} of "
                         f"{escape(_amount(res, int(f.get('allocatable') or 0), f.get('numaNode')))}</td>"
                         f"<td>{escape(held)}</td></tr>")
        more = len(rows) - MAX_FREE_ROWS
        out.append("<details class=\"free\"><summary>free now</summary><table><thead><tr><th>where</th>"
                   "<th>resource</th><th>free</th><th>held by</th></tr></thead><tbody>" + "".join(cells)
                   + "</tbody></table>" + (f"<p>{more} more rows in -o json</p>" if more > 0 else "") + "</details>")
    fits = answer.get("wouldFitIf") or []
    if fits:
        out.append("<p class=\"fit\"><b>would fit if</b> (each checked by admitting again):</p><ul class=\"fit\">"
                   + "".join(f"<li>{escape(str(s.get('change')))}: {escape(str(s.get('outcome')))}</li>" for s in fits)
                   + "</ul>")
    elif "wouldFitIf" in answer:
        out.append("<p class=\"fit\">would fit if: no change numalign tries admits it</p>")
    return out


def _marked(alignment: Mapping[str, Any]) -> bool:
    """A pod marked misaligned: its verdict NOT aligned (report/verdict.py); a source without verdicts
    (an older status file) by its `aligned` flag."""
    if "verdict" in alignment:
        return marked(alignment["verdict"])
    return not alignment.get("aligned", True)


def admitted_list(view: NodeView) -> str:
    """Admitted pods with their alignment, misaligned ones first and marked."""
    pods = view.admitted
    if not pods:
        return ""
    def key(p: PodView) -> tuple[bool, str]:
        return (not _marked(p.alignment or {}), p.key)
    items = []
    for p in sorted(pods, key=key):
        al = p.alignment or {}
        cls = "misaligned" if _marked(al) else "aligned"
        mark = "" if cls == "aligned" else "&#9888; "
        items.append(f"<li class=\"{cls}\" data-pod=\"{escape(p.key)}\">{mark}<b>{escape(p.key)}</b>: "
                     f"{escape(str(al.get('summary') or 'admitted'))}</li>")
    return f"<h2>Admitted pods ({len(pods)})</h2><ul class=\"admitted\">" + "".join(items) + "</ul>"


def node_report(view: NodeView) -> str:
    """The whole page, as text."""
    m = view.machine
    body = [f"<h1>{escape(view.title)}</h1>", _summary(view)]
    if view.notes:
        body.append("<ul class=\"notes\">" + "".join(f"<li>{escape(n)}</li>" for n in view.notes) + "</ul>")
    if m.numa_nodes:
        pictures = [machine_svg(view), legend(view)]
    else:  # nothing to draw: say what the kubelet sees instead of an empty picture
        pictures = [f"<h2>Machine</h2><p class=\"no-numa\">{escape(no_numa_note(m))}</p>"]
    distances = distance_svg(m)
    pictures.append("<h2>NUMA distances</h2>" + (distances or "<p>the machine reports no distances</p>"))
    body.append("<div class=\"layout\"><div class=\"pictures\">" + "".join(pictures) + "</div>")
    rejected = view.rejected
    aside = ["<aside id=\"decisions\">"]
    if not view.pods:
        aside.append("<h2>Pods</h2><p>no pods: the machine as the kubelet would find it</p>")
    else:
        aside.append(f"<h2>Rejected pods ({len(rejected)})</h2>")
        aside += [decision_record(p) for p in rejected] or ["<p>none: every pod was admitted</p>"]
    aside.append(admitted_list(view))
    pending = [p for p in view.pods if p.status not in ("admitted", "rejected")]
    if pending:
        aside.append("<h2>Pending pods</h2><ul>" + "".join(
            f"<li>{escape(p.key)} {escape(p.reason)} {escape(p.message)}</li>" for p in pending) + "</ul>")
    aside.append("</aside>")
    body.append("".join(aside) + "</div>")
    return html_page(view.title, body)
