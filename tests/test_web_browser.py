"""The dashboard in a real browser: ``sizewatch serve`` on loopback over a store filled by a real
pipeline run, headless Chromium (Debian's, driven through its chromedriver by Selenium) follows
index -> series -> patch -> function, sorts a table, checks the chart drew its points, and leaves
screenshots in test-output/.
"""
from __future__ import annotations

import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import sizewatch_cmd

pytestmark = pytest.mark.kernel
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1400,1000", "--hide-scrollbars")


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def server(request, tmp_path_factory):
    """A real ``sizewatch serve --port 0`` on 127.0.0.1 on the example store (an sqlite file, or the
    PostgreSQL database ``sizewatch run --db postgresql://`` wrote); yields its base URL."""
    from test_web import copy_store
    if request.param == "sqlite":
        db = copy_store(request.getfixturevalue("example_store")[0],
                        tmp_path_factory.mktemp("browser") / "store.db")
    else:
        db = request.getfixturevalue("pg_server").database(
            template=request.getfixturevalue("example_pg_store")[0])
    proc = subprocess.Popen([*sizewatch_cmd(), "serve", "--db", str(db), "--host", "127.0.0.1", "--port", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()
        m = re.search(r"on (http://127\.0\.0\.1:\d+/)", line)
        assert m, f"sizewatch serve did not start: {line}{proc.stderr.read() if proc.poll() is not None else ''}"
        yield m[1].rstrip("/")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if isinstance(db, str):             # the server's page cache of a PostgreSQL store
            from web.settings import WebSettings
            WebSettings(db).page_cache.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    for exe in (CHROMIUM, CHROMEDRIVER):
        if not Path(exe).exists():
            pytest.fail(f"{exe} missing: scripts/install.sh installs chromium and chromium-driver")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver, cond, timeout: float = 20, what: str = ""):
    from selenium.webdriver.support.ui import WebDriverWait
    return WebDriverWait(driver, timeout).until(cond, message=what)


def _shot(driver, output_dir: Path, name: str) -> Path:
    path = output_dir / name
    driver.save_screenshot(str(path))
    assert path.stat().st_size > 10_000
    return path


def test_index_series_patch_function(server, browser, output_dir):
    from selenium.webdriver.common.by import By
    b = browser
    b.get(server + "/")
    assert b.title.startswith("recent series and commits")
    table = b.find_element(By.ID, "series")
    assert "gcc-12" in table.text and "clang-19" in table.text
    assert re.search(r"\d+ warning", table.text)                 # counts readable as words, not only colours
    _shot(b, output_dir, "web-index.png")

    # follow the series
    table.find_element(By.CSS_SELECTOR, 'a[href="/series/1"]').click()
    _wait(b, lambda d: d.current_url.endswith("/series/1"), what="series page")
    rows = b.find_elements(By.CSS_SELECTOR, "#patches tbody tr")
    assert len(rows) == 2 and "[PATCH 2/2]" in rows[1].text
    assert "text +" in rows[1].text and "text -" in rows[0].text
    _shot(b, output_dir, "web-series.png")

    # to patch 2's page
    rows[1].find_element(By.CSS_SELECTOR, "td.subject a").click()
    _wait(b, lambda d: "/commit/" in d.current_url, what="patch page")
    section = b.find_element(By.ID, "tc-gcc-12")
    bloat = section.find_element(By.CSS_SELECTOR, "table.bloat")
    names = [r.find_element(By.CSS_SELECTOR, "td.name").text for r in bloat.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert names[0] == "get_page_from_freelist"                   # bloat-o-meter order: largest growth first
    # sort by name with the page's own script, then by delta again
    header = bloat.find_element(By.CSS_SELECTOR, "thead th")
    header.click()
    sorted_names = [r.find_element(By.CSS_SELECTOR, "td.name").text
                    for r in bloat.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert sorted_names == sorted(names, key=str.lower) and header.get_attribute("aria-sort") == "ascending"
    header.click()
    assert [r.find_element(By.CSS_SELECTOR, "td.name").text
            for r in bloat.find_elements(By.CSS_SELECTOR, "tbody tr")] == sorted(names, key=str.lower, reverse=True)
    assert "pushed out of line" in section.text and "steal_suitable_fallback" in section.text
    assert "--param max-inline" in section.text                   # gcc's own reason
    assert "Alignment and cache-line crossings" in section.text
    b.execute_script("window.scrollTo(0, 0)")
    _shot(b, output_dir, "web-patch.png")

    # to the function page through the table's link, and check the chart drew its points
    link = bloat.find_element(By.LINK_TEXT, "get_page_from_freelist")
    link.click()
    _wait(b, lambda d: "/function/get_page_from_freelist" in d.current_url, what="function page")
    _wait(b, lambda d: d.execute_script("return !!window.sizewatchChart"), what="the chart object")
    info = b.execute_script("""
        const c = window.sizewatchChart;
        return c.data.datasets.map((ds, i) => ({label: ds.label,
            points: c.getDatasetMeta(i).data.filter(p => !p.skip && Number.isFinite(p.x) && Number.isFinite(p.y)).length,
            values: ds.data.map(p => p.y), xs: ds.data.map(p => p.x),
            decimation: c.options.plugins.decimation.enabled && c.options.parsing === false}));""")
    assert [d["label"] for d in info] == ["gcc-12"], info            # ?toolchain=gcc-12 from the link
    assert info[0]["points"] == 3 and info[0]["values"][2] - info[0]["values"][1] > 1000
    assert info[0]["xs"] == [0, 1, 2] and info[0]["decimation"]     # commit indexes, pre-parsed: decimation applies
    # the canvas has really been painted: count non-blank pixels
    painted = b.execute_script("""
        const cv = document.getElementById('history-chart');
        const px = cv.getContext('2d').getImageData(0, 0, cv.width, cv.height).data;
        let n = 0; for (let i = 3; i < px.length; i += 4) if (px[i] > 0) n++;
        return n;""")
    assert painted > 2000
    _shot(b, output_dir, "web-function-gcc-12.png")
    # all toolchains: one line each
    b.get(server + "/function/get_page_from_freelist")
    _wait(b, lambda d: d.execute_script("return !!window.sizewatchChart"), what="the chart object")
    counts = b.execute_script("""const c = window.sizewatchChart;
        return c.data.datasets.map((ds, i) => [ds.label, c.getDatasetMeta(i).data.length]);""")
    assert counts == [["gcc-12", 3], ["clang-19", 3]]
    _shot(b, output_dir, "web-function.png")
    # a point leads to its commit
    b.find_element(By.CSS_SELECTOR, "table.changes td.sha a").click()
    _wait(b, lambda d: "/commit/" in d.current_url, what="commit from the changes table")


def test_matrix_and_error_pages(server, browser, output_dir):
    from selenium.webdriver.common.by import By
    b = browser
    b.get(server + "/")
    sha = b.find_element(By.CSS_SELECTOR, "#commits td.sha a").get_attribute("href").rsplit("/", 1)[1]
    b.get(f"{server}/matrix/{sha}")
    rows = b.find_elements(By.CSS_SELECTOR, "table.matrix tbody tr")
    assert rows and "toolchain matrix" in b.title
    _shot(b, output_dir, "web-matrix.png")
    b.get(server + "/commit/deadbeefdeadbeef")
    assert "404" in b.find_element(By.TAG_NAME, "h1").text and "no commit deadbeefdeadbeef" in b.page_source
    b.get(server + "/?commits=lots")
    assert "400" in b.find_element(By.TAG_NAME, "h1").text


def test_pages_need_no_network(server):
    """Every script and stylesheet the pages load comes from the server itself."""
    import urllib.request
    for path in ("/", "/series/1", "/function/get_page_from_freelist"):
        html = urllib.request.urlopen(server + path, timeout=30).read().decode()
        for ref in re.findall(r'(?:src|href)="([^"]+)"', html):
            assert not re.match(r"^(https?:)?//", ref), (path, ref)
    assert shutil.which("chromium") or Path(CHROMIUM).exists()
