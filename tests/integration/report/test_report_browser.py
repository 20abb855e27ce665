"""Node reports as a person sees them: each page rendered by headless Chromium, checked for console
errors, network fetches, the labels in the rendered DOM, the picture's size, and the layout relations
of its main parts (a golden structure, not golden pixels); a screenshot of each is written."""

from __future__ import annotations

from pathlib import Path

from support.browser import Browser
from support.pages import boxes, disjoint, inside, numalign, png_size

MAX_BYTES = 5 * 1024 * 1024


def _check_page(b: Browser, page: Path, shot: Path) -> None:
    """What every report must do: open from disk alone, with no error, and be drawn at a real size."""
    b.open(page)
    assert b.errors() == []
    assert b.requests() == [page.resolve().as_uri()]  # nothing fetched but the page itself
    machine = boxes(b, "svg#machine")
    assert len(machine) == 1 and machine[0]["w"] > 100 and machine[0]["h"] > 100
    b.screenshot(shot)
    width, height = png_size(shot)
    assert width >= machine[0]["w"] and height >= machine[0]["h"]


def _texts(b: Browser, selector: str) -> list[str]:
    got = b.evaluate(f"[...document.querySelectorAll({selector!r})].map(e => e.textContent)")
    assert isinstance(got, list)
    return got


def _structure(b: Browser) -> None:
    """The golden structure: NUMA nodes inside their socket, sockets apart, cells inside their node,
    the legend and the distance map under the picture, the decision records beside it."""
    sockets = boxes(b, "g.socket")
    for i, s in enumerate(sockets):
        assert all(disjoint(s, t) for t in sockets[i + 1:])
    per_socket = b.evaluate("[...document.querySelectorAll('g.socket')].map(s => s.querySelectorAll('g.numa').length)")
    numa = boxes(b, "g.numa")
    k = 0
    for s, count in zip(sockets, per_socket, strict=True):
        for n in numa[k:k + count]:
            assert inside(n, s)
        k += count
    assert k == len(numa)
    node0 = boxes(b, "#numa-0")[0]
    assert all(inside(c, node0) for c in boxes(b, "#numa-0 g.cpu"))
    machine, legend, distances = boxes(b, "svg#machine")[0], boxes(b, "#legend")[0], boxes(b, "svg#distances")[0]
    assert legend["y"] >= machine["y"] + machine["h"] - 0.5
    assert distances["y"] >= legend["y"] + legend["h"] - 0.5
    decisions = boxes(b, "#decisions")[0]
    assert decisions["x"] >= machine["x"] + machine["w"]  # beside the picture at 1400 px
    assert decisions["y"] < machine["y"] + machine["h"]


def test_admit_report_dual_socket(browser: Browser, tmp_path: Path, shots: Path) -> None:
    page = tmp_path / "node.html"
    out = numalign("admit", "--report", str(page))
    assert "4/5 pods admitted" in out.stdout
    _check_page(browser, page, shots / "report-node.png")
    _structure(browser)
    assert _texts(browser, ".socket-label") == ["socket 0", "socket 1"]
    assert _texts(browser, ".numa-label") == [f"NUMA node {i}" for i in range(4)]
    assert sorted(map(int, _texts(browser, ".cpu-label"))) == list(range(128))
    legend = browser.evaluate("document.querySelector('#legend').innerText")
    for pod in ("ml/inference-gpu", "net/dpdk-router", "default/db", "reserved CPUs 0,64"):
        assert pod in legend
    # The colour a person matches: CPU 1 (inference-gpu's) is filled with its legend swatch's colour.
    fill = browser.evaluate("getComputedStyle(document.querySelector('g.cpu[data-cpu=\"1\"] rect')).fill")
    swatch = browser.evaluate("[...document.querySelectorAll('#legend li.owner')].find(li => "
                              "li.innerText.includes('ml/inference-gpu')).querySelector('.swatch')"
                              ".style.backgroundColor")
    assert fill == swatch and fill != "rgb(255, 255, 255)"
    assert browser.evaluate("document.querySelector('g.cpu[data-cpu=\"0\"]').classList.contains('reserved')")
    decisions = browser.evaluate("document.querySelector('#decisions').innerText")
    assert "ml/training-4gpu" in decisions and "TopologyAffinityError" in decisions
    assert "cannot be satisfied" in decisions and "merged hint" in decisions and "why:" in decisions
    # Admitted pods are drawn and listed with their alignment, without a decision record.
    assert browser.evaluate("document.querySelectorAll(\"section.record[data-pod='ml/inference-gpu']\").length") == 0
    assert "ml/inference-gpu: aligned" in decisions
    # Printable: in print media the decision records move under the picture, and the browser prints it.
    browser.send("Emulation.setEmulatedMedia", {"media": "print"})
    machine, decisions_box = boxes(browser, "svg#machine")[0], boxes(browser, "#decisions")[0]
    assert decisions_box["y"] >= machine["y"] + machine["h"] - 0.5
    pdf = browser.print_pdf()
    assert pdf.startswith(b"%PDF-") and len(pdf) > 10_000
    browser.send("Emulation.setEmulatedMedia", {"media": ""})
    assert browser.errors() == []


def test_numa_64_report_stays_readable(browser: Browser, tmp_path: Path, shots: Path) -> None:
    pods = tmp_path / "pods.yaml"
    pods.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: big, namespace: ml}\nspec:\n  containers:\n  - name: main\n"
        "    resources: {limits: {cpu: '12', memory: 24Gi, nvidia.com/gpu: '1'}}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: wide, namespace: ml}\nspec:\n  containers:\n  - name: main\n"
        "    resources: {limits: {cpu: '40', memory: 40Gi}}\n", encoding="utf-8")
    page = tmp_path / "numa64.html"
    numalign("admit", str(pods), "--machine", "numa-64", "--policy-option", "max-allowable-numa-nodes=64",
             "--reserved-cpus", "0-1", "--report", str(page))
    assert page.stat().st_size < MAX_BYTES
    _check_page(browser, page, shots / "report-numa-64.png")
    _structure(browser)
    assert len(_texts(browser, ".numa-label")) == 64
    assert sorted(map(int, _texts(browser, ".cpu-label"))) == list(range(1024))
    # Legible: a CPU cell is never drawn smaller than its label needs.
    cell = boxes(browser, "g.cpu[data-cpu='1023'] rect")[0]
    label = boxes(browser, "g.cpu[data-cpu='1023'] text")[0]
    assert label["w"] <= cell["w"] and cell["h"] >= 10
    assert boxes(browser, "svg#distances")[0]["w"] >= 64 * 7
    assert "ml/wide" in browser.evaluate("document.querySelector('#decisions').innerText")


def test_discover_report_of_a_machine_with_memory_only_nodes(browser: Browser, tmp_path: Path, shots: Path) -> None:
    page = tmp_path / "gb200.html"
    numalign("discover", "--machine", "gb200", "--report", str(page))
    assert page.stat().st_size < MAX_BYTES
    _check_page(browser, page, shots / "report-gb200.png")
    # The 32 GPU memory nodes sit under their GPU, in the socket of the GPU's CPU node.
    assert _texts(browser, ".socket-label") == ["socket 0", "socket 1"]
    strips = _texts(browser, ".strip-label")
    assert strips == ["gpu 0008:01:00.0 memory (NUMA 2-9)", "gpu 0009:01:00.0 memory (NUMA 10-17)",
                      "gpu 0018:01:00.0 memory (NUMA 18-25)", "gpu 0019:01:00.0 memory (NUMA 26-33)"]
    assert len(_texts(browser, ".numa-label")) == 34
    assert browser.evaluate("document.querySelectorAll('g.cpu.owned').length") == 0
    assert "no pods" in browser.evaluate("document.querySelector('#decisions').innerText")


def test_admit_report_of_gb200_fits_the_screen_with_its_answers(browser: Browser, tmp_path: Path, shots: Path) -> None:
    page = tmp_path / "gb200-admit.html"
    numalign("admit", "--machine", "gb200", "--policy-option", "max-allowable-numa-nodes=34", "--report", str(page))
    _check_page(browser, page, shots / "report-gb200-admit.png")
    _structure(browser)
    # Fits a 1,400 px screen: nothing wider than the window, the rejected pod beside the picture.
    assert browser.evaluate("document.documentElement.scrollWidth") <= 1400
    record = boxes(browser, "section.record[data-pod='ml/training-4gpu']")[0]
    assert record["x"] + record["w"] <= 1400 and record["y"] < 1000
    # Memory-only nodes are small boxes grouped under their GPUs, never a NUMA node's full size.
    full = boxes(browser, "#numa-0")[0]
    for mini in boxes(browser, "g.numa.memory-only"):
        assert mini["h"] < full["h"] / 3 and mini["w"] < full["w"] / 3
    # The answers: free capacity, the verified "would fit if", each admitted pod's alignment.
    decisions = browser.evaluate("document.querySelector('#decisions').innerText")
    assert "free now" in decisions and "would fit if" in decisions
    assert "container trainer requested nvidia.com/gpu: 2" in decisions
    assert "default/db: aligned" in decisions


def test_discover_report_of_this_host(browser: Browser, tmp_path: Path, shots: Path) -> None:
    """The README's promise: this host's own node, read from /sys, drawn in three commands."""
    import json

    machine = json.loads(numalign("discover", "-o", "json").stdout)
    page = tmp_path / "host.html"
    numalign("discover", "--report", str(page))
    _check_page(browser, page, shots / "report-host.png")
    assert _texts(browser, ".numa-label") == [f"NUMA node {n['id']}" for n in machine["numaNodes"]]
    cpus = sorted(c for n in machine["numaNodes"] for c in n["cpus"])
    assert sorted(map(int, _texts(browser, ".cpu-label"))) == cpus
    assert "no pods" in browser.evaluate("document.querySelector('#decisions').innerText")
