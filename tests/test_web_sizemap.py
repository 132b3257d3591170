"""The size map in a real browser: ``sizewatch serve`` over the example store, headless Chromium opens
the treemap of a build and of patch 2's change, reads what ECharts laid out, and clicks into it.

Oracles: ``size`` (binutils) on the build's object for the total, ``nm`` for each function's bytes,
the kernel's scripts/bloat-o-meter for the change map's deltas.
"""
from __future__ import annotations

import json
import subprocess
import urllib.request

import pytest

from test_web_browser import _shot, _wait, browser, server  # noqa: F401  (fixtures)

pytestmark = pytest.mark.kernel

LAYOUT = """
var chart = window.sizemapChart, model = chart.getModel().getSeriesByIndex(0);
var out = [];
model.getData().tree.root.eachNode(function (n) {
  var l = n.getLayout(), shown = !!(l && l.isInView);
  out.push({name: n.name, depth: n.depth, value: n.getValue(), leaf: !n.children || !n.children.length,
            shown: shown, w: shown ? l.width : 0, h: shown ? l.height : 0});
});
return {nodes: out, root: model.getViewRoot().name};
"""


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def _size_text(path) -> int:
    out = subprocess.run(["size", str(path)], check=True, capture_output=True, text=True).stdout
    return int(out.splitlines()[1].split()[0])


def test_build_map_sums_to_size_text_and_drills_down(server, browser, example_series, output_dir):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    stock, patch1, patch2 = example_series("gcc-12")
    b = browser
    # from patch 2's page, its gcc-12 section links the map of the build
    b.get(f"{server}/commit/{patch2.commit}")
    link = b.find_element(By.CSS_SELECTOR, "#tc-gcc-12 a.maplink")
    link.click()
    _wait(b, lambda d: "/map/build/" in d.current_url, what="build map")
    _wait(b, lambda d: d.execute_script("return !!window.sizemapChart"), what="chart drawn")
    api = _get(server + "/api" + b.current_url.split(server, 1)[1])
    want = _size_text(patch2.object_path)
    assert api["text"] == want and api["total"] == want

    lay = b.execute_script(LAYOUT)
    nodes = lay["nodes"]
    leaves = [n for n in nodes if n["leaf"]]
    assert sum(n["value"] for n in leaves) == want                  # the areas' values add up to size's text
    tops = [n for n in nodes if n["depth"] == 1]
    assert all(n["shown"] for n in tops)
    assert {n["name"] for n in tops} >= {"mm", "(not in a function)"}
    area = sum(n["w"] * n["h"] for n in tops)
    for n in tops:                                                  # each area in proportion to its bytes
        share = n["w"] * n["h"] / area
        assert abs(share - n["value"] / want) < 0.02, (n, share)
    # every function's bytes are nm's size of its symbol
    nm = {}
    for line in subprocess.run(["nm", "-S", str(patch2.object_path)], check=True, capture_output=True,
                               text=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwW":
            nm[parts[3]] = int(parts[1], 16)
    fn = {n["name"]: n["value"] for n in leaves if n["name"] in nm}
    assert fn and all(fn[k] == nm[k] for k in fn) and len(fn) >= 100
    _shot(b, output_dir, "web-sizemap-build.png")

    # click into the largest top-level rectangle (mm, showing its file page_alloc.c): the map drills into it
    canvas = b.find_element(By.CSS_SELECTOR, "#sizemap canvas")
    mm = b.execute_script("""
      var m = window.sizemapChart.getModel().getSeriesByIndex(0), r = null;
      m.getData().tree.root.eachNode(function (n) { if (n.depth === 1 && n.name === 'mm') r = n.getLayout(); });
      return {x: r.x, y: r.y, w: r.width, h: r.height};""")
    ActionChains(b).move_to_element_with_offset(canvas, int(mm["x"] + mm["w"] / 2 - canvas.size["width"] / 2),
                                                int(mm["y"] + mm["h"] / 2 - canvas.size["height"] / 2)).click().perform()
    _wait(b, lambda d: d.execute_script(LAYOUT)["root"] != lay["root"], what="zoomed in")
    zoomed = b.execute_script(LAYOUT)
    assert zoomed["root"] == "page_alloc.c"
    shown = {n["name"] for n in zoomed["nodes"] if n["shown"] and n["leaf"]}
    assert {"get_page_from_freelist", "rmqueue_bulk"} <= shown
    import time
    time.sleep(1.5)                                                 # the drill-down's transition, for the picture
    _shot(b, output_dir, "web-sizemap-zoomed.png")


def test_change_map_is_bloat_o_meter(server, browser, example_series, bloat_o_meter, output_dir):
    from selenium.webdriver.common.by import By
    stock, patch1, patch2 = example_series("gcc-12")
    b = browser
    b.get(f"{server}/commit/{patch2.commit}")
    b.find_elements(By.CSS_SELECTOR, "#tc-gcc-12 a.maplink")[1].click()
    _wait(b, lambda d: "/map/commit/" in d.current_url, what="change map")
    _wait(b, lambda d: d.execute_script("return !!window.sizemapChart"), what="chart drawn")
    d = _get(f"{server}/api/map/commit/{patch2.commit}?toolchain=gcc-12")
    assert d["text_delta"] == _size_text(patch2.object_path) - _size_text(patch1.object_path)
    assert d["tree"]["delta"] == d["text_delta"]                    # the deltas add up to size's text change

    def leaves(n):
        return [n] if "children" not in n else [x for c in n["children"] for x in leaves(c)]
    fns = {n["name"]: n["delta"] for n in leaves(d["tree"]) if n["kind"] == "function"}
    rows = bloat_o_meter(patch1.object_path, patch2.object_path).stdout.decode().splitlines()
    want = {}
    for line in rows[2:-1]:
        name, _, _, delta = line.split()
        want[name] = int(delta)
    from analyzer.clones import strip_number
    assert len(fns) >= 5 and all(want[strip_number(k)] == v for k, v in fns.items()), (fns, want)
    assert fns["get_page_from_freelist"] == 1545 and fns["__rmqueue_fallback"] == -1177
    # drawn: red where it grew, green where it shrank
    colours = b.execute_script("""
      var m = window.sizemapChart.getModel().getSeriesByIndex(0), out = {};
      m.getData().tree.root.eachNode(function (n) {
        if (!n.children || !n.children.length) out[n.name] = n.getVisual('style').fill; });
      return out;""")
    assert colours["get_page_from_freelist"] == "#c0392b" and colours["__rmqueue_fallback"] == "#27ae60"
    _shot(b, output_dir, "web-sizemap-change.png")


def test_map_bad_input(server):
    import urllib.error
    for path, code in (("/api/map/build/999999", 404), ("/api/map/commit/zzzz", 400),
                       ("/api/map/commit/ffffffffffff", 404), ("/map/build/x", 404)):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(server + path, timeout=10)
        assert e.value.code == code, path
