"""`numalign simulate --report` in headless Chromium: the runs side by side, NUMA occupancy heat maps
per node pool, and the outcome along each swept axis, as a person sees them."""

from __future__ import annotations

import json
from pathlib import Path

from support.browser import Browser
from support.pages import boxes, disjoint, numalign, png_size


def test_simulation_report(browser: Browser, tmp_path: Path, shots: Path) -> None:
    page = tmp_path / "sim.html"
    out = numalign("simulate", "--generate", "80", "--jobs", "1", "--policy", "single-numa-node",
                   "--policy", "best-effort", "--report", str(page), "-o", "json")
    sim = json.loads(out.stdout)
    labels = [r["config"]["label"] for r in sim["runs"]]
    assert len(labels) == 6  # three schedulers x two policies
    browser.open(page, width=1400, height=1000)
    assert browser.errors() == []
    assert browser.requests() == [page.resolve().as_uri()]
    browser.screenshot(shots / "report-simulation.png")
    assert png_size(shots / "report-simulation.png")[0] >= 1000
    heads = browser.evaluate("[...document.querySelectorAll('#runs-table th')].map(e => e.textContent)")
    assert heads[1:] == labels
    placed = browser.evaluate("[...document.querySelectorAll('#runs-table tr')].find(tr => "
                              "tr.cells[0].textContent === 'placed').innerText")
    assert placed.split()[1:] == [str(r["placed"]) for r in sim["runs"]]
    # The outcome chart: one row per run, its placed bar as long as placed/pods of the full width.
    rows = browser.evaluate("[...document.querySelectorAll('#runs-outcome .row-label')].map(e => e.textContent)")
    assert rows == labels
    bars = boxes(browser, "#runs-outcome g.row rect:nth-child(2)")
    full = boxes(browser, "#runs-outcome g.row rect:nth-child(1)")
    for r, bar, whole in zip(sim["runs"], bars, full, strict=True):
        assert abs(bar["w"] / whole["w"] - r["placed"] / r["pods"]) < 0.01
    reasons = browser.evaluate("document.querySelector('#runs-rejections').textContent")
    for r in sim["runs"]:
        for reason in r["kubeletRejections"]:
            assert reason in reasons
    # One occupancy heat map per run, pools as rows, each cell a share the tooltip spells out.
    maps = boxes(browser, "#occupancy svg.heatmap")
    assert len(maps) == len(labels) and all(m["w"] > 0 and m["h"] > 0 for m in maps)
    pools = sorted(sim["runs"][0]["numaOccupancy"])
    assert browser.evaluate("[...document.querySelectorAll('#occupancy-0 text')].map(e => e.textContent)"
                            f".filter(t => {json.dumps(pools)}.includes(t))") == pools
    assert browser.evaluate("[...document.querySelectorAll('#axes svg.axis')].map(s => s.id)") == [
        "axis-scheduler", "axis-topology-manager-policy"]
    charts = boxes(browser, "svg.chart")
    for i, c in enumerate(charts):
        assert c["w"] > 0 and c["h"] > 0
        assert all(disjoint(c, d) for d in charts[i + 1:])


def test_simulation_report_says_when_dra_devices_depend_on_go_map_order(
        browser: Browser, tmp_path: Path, shots: Path) -> None:
    """Found by review: simulate's text and JSON said which placed pods' devices another pool order would
    change (kubelet 1.34/1.35's scheduler ranges over a Go map of pools), the HTML report did not."""
    from integration.test_cli_cluster_dra import MAP_ORDER_CLUSTER, MAP_ORDER_WORKLOAD

    cluster, workload, page = tmp_path / "cluster.yaml", tmp_path / "workload.yaml", tmp_path / "sim.html"
    cluster.write_text(MAP_ORDER_CLUSTER)
    workload.write_text(MAP_ORDER_WORKLOAD)
    out = numalign("simulate", "--cluster", str(cluster), str(workload), "--scheduler", "default",
                   "--report", str(page), "-o", "json")
    (run,) = json.loads(out.stdout)["runs"]
    note = run["dra"]["mapOrder"]
    browser.open(page, width=1400, height=1000)
    assert browser.errors() == []
    browser.screenshot(shots / "report-simulation-dra-map-order.png")
    shown = browser.evaluate("[...document.querySelectorAll('#dra-map-order li')].map(e => e.textContent)")
    assert shown == [f"dra map order ({run['config']['label']}): {note['pods']} placed pod(s) got devices another "
                     f"pool order would change; e.g. {note['example']}"]
    assert browser.evaluate("document.querySelector('#dra-map-order').getBoundingClientRect().height") > 0
    # 1.36 sorts its pools: no note, and no empty list drawn.
    numalign("simulate", "--cluster", str(cluster), str(workload), "--scheduler", "default", "--kubelet-version",
             "1.36", "--report", str(page))
    browser.open(page, width=1400, height=1000)
    assert browser.evaluate("document.querySelector('#dra-map-order')") is None
