"""The dashboard with arm64 and x86_64 builds of the same commits (issue 30): a column per toolchain
and arch, ``?arch=``/``?lto=`` filters, one toolchain matrix per arch, a re-run that keeps ``--arch``,
and the bot's reproduce lines naming the config, arch and LTO mode it built.

The store is made by real ``sizewatch run`` on the fake kernel (tests/fakekernel; arm64's gcc-12 is
Debian's cross ``aarch64-linux-gnu-gcc-12``); sizes are checked against ``nm``/``size`` of the built
objects (the cross binutils for arm64), build ids against the store's own rows."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from buildtrees import commit_on, edit, fake_tree
from conftest import sizewatch_cmd

TOKEN = "arch-token"
TCS = "gcc-12,clang-19"


@pytest.fixture(scope="module")
def fake_store(tmp_path_factory):
    """A fake tree base → one → two built for x86_64 and arm64 into one store:
    (store, commits, cache, tmp dir)."""
    tmp = tmp_path_factory.mktemp("webarch")
    tree, base = fake_tree(tmp / "linux-fake")
    c = {"base": base}
    c["one"] = commit_on(tree, base, {"mm/page_alloc.c": edit(tree, base, "mm/page_alloc.c", "* 3 + 1", "* 5 + 2")},
                         "mm: one")
    c["two"] = commit_on(tree, c["one"], {"mm/page_alloc.c": edit(tree, base, "mm/page_alloc.c", "* 3 + 1",
                                                                  "* 7 + 2")}, "mm: two")
    db, cache = tmp / "store.db", tmp / "cache"
    for arch in ("x86_64", "arm64"):
        p = subprocess.run([*sizewatch_cmd(), "run", "--tree", str(tree), f"{c['base']}..{c['two']}", "--toolchains",
                            TCS, "--arch", arch, "--db", str(db)], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "SIZEWATCH_CACHE": str(cache)})
        assert p.returncode == 0, p.stderr
    return db, c, cache, tmp


@pytest.fixture(scope="module")
def client(fake_store):
    from web.app import create_app
    from web.settings import WebSettings
    db, _, _, tmp = fake_store
    return create_app(WebSettings(db, token=TOKEN, jobs_dir=tmp / "jobs")).test_client()


def get_json(client, path: str) -> dict:
    r = client.get(path)
    assert r.status_code == 200, (path, r.data[:300])
    return r.get_json()


def store_builds(db: Path, sha: str) -> dict[tuple[str, str], int]:
    """(toolchain, config arch) -> build id of the commit, from the store's rows."""
    conn = sqlite3.connect(db)
    try:
        return {(tc, arch): bid for bid, tc, arch in conn.execute(
            "SELECT b.id, tc.name, cf.arch FROM builds b JOIN commits c ON c.id = b.commit_id "
            "JOIN toolchains tc ON tc.id = b.toolchain_id JOIN configs cf ON cf.id = b.config_id WHERE c.sha = ?",
            (sha,))}
    finally:
        conn.close()


def build_object(cache: Path, toolchain: str, arch: str, sha: str) -> Path:
    """The commit's mm/page_alloc.o as built under (toolchain, arch), from the object cache."""
    (d,) = [d for d in (cache / "objects" / toolchain).iterdir() if ("-arm64-" in d.name) == (arch == "arm64")]
    return d / sha / "mm" / "page_alloc.o"


def nm_sizes(obj: Path, arch: str) -> dict[str, int]:
    """Function sizes by binutils' nm (the cross nm for arm64)."""
    nm = "aarch64-linux-gnu-nm" if arch == "arm64" else "nm"
    out = subprocess.run([nm, "-S", "--size-sort", str(obj)], capture_output=True, text=True, check=True).stdout
    return {f[3]: int(f[1], 16) for f in (ln.split() for ln in out.splitlines()) if len(f) == 4 and f[2] in "tT"}


def size_text(obj: Path, arch: str) -> int:
    """size(1)'s text column (the cross size for arm64)."""
    size = "aarch64-linux-gnu-size" if arch == "arm64" else "size"
    out = subprocess.run([size, str(obj)], capture_output=True, text=True, check=True).stdout
    return int(out.splitlines()[1].split()[0])



def finished_job(client, job: dict, timeout: float = 300) -> dict:
    """The dashboard job's status once it stopped running (or after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        st = client.get(f"/api/jobs/{job['id']}", headers={"Authorization": f"Bearer {TOKEN}"}).get_json()
        if st["state"] != "running" or time.monotonic() > deadline:
            return st
        time.sleep(0.3)

def test_a_column_per_toolchain_and_arch(fake_store, client):
    db, c, cache, _ = fake_store
    d = get_json(client, "/api/")
    assert d["toolchains"] == ["gcc-12", "gcc-12 arm64", "clang-19", "clang-19 arm64"]
    (row,) = [x for x in d["commits"] if x["sha"] == c["two"]]
    ids = store_builds(db, c["two"])
    assert {label: cell["build_ids"] for label, cell in row["toolchains"].items()} == {
        "gcc-12": [ids[("gcc-12", "x86_64")]], "gcc-12 arm64": [ids[("gcc-12", "arm64")]],
        "clang-19": [ids[("clang-19", "x86_64")]], "clang-19 arm64": [ids[("clang-19", "arm64")]]}
    for arch, col in (("x86_64", "gcc-12"), ("arm64", "gcc-12 arm64")):
        assert row["toolchains"][col]["text"] == size_text(build_object(cache, "gcc-12", arch, c["two"]), arch), col
    html = client.get("/").get_data(as_text=True)
    assert '<th class="tc">gcc-12 arm64</th>' in html
    assert f'href="/commit/{c["two"]}#tc-gcc-12-arm64"' in html


def test_arch_and_lto_filters(fake_store, client):
    _, c, _, _ = fake_store
    assert get_json(client, "/api/?arch=arm64")["toolchains"] == ["gcc-12 arm64", "clang-19 arm64"]
    assert get_json(client, "/api/?arch=x86_64&lto=none")["toolchains"] == ["gcc-12", "clang-19"]
    assert get_json(client, "/api/?lto=thin")["toolchains"] == []
    (series_less,) = [x for x in get_json(client, "/api/?arch=arm64")["commits"] if x["sha"] == c["one"]]
    assert sorted(series_less["toolchains"]) == ["clang-19 arm64", "gcc-12 arm64"]
    page = get_json(client, f"/api/commit/{c['two']}?arch=arm64")
    assert [(t["label"], t["arch"], t["lto"]) for t in page["toolchains"]] == [
        ("gcc-12 arm64", "arm64", "none"), ("clang-19 arm64", "arm64", "none")]
    assert all(t["config"].startswith("defconfig-arm64-") for t in page["toolchains"])
    both = get_json(client, f"/api/commit/{c['two']}")
    assert [t["label"] for t in both["toolchains"]] == ["gcc-12", "gcc-12 arm64", "clang-19", "clang-19 arm64"]
    assert both["arches"] == ["x86_64", "arm64"]
    html = client.get(f"/commit/{c['two']}?arch=arm64").get_data(as_text=True)
    assert '<section class="toolchain" id="tc-gcc-12-arm64">' in html and 'id="tc-gcc-12"' not in html
    assert '<a href="?arch=arm64&amp;lto=thin">thin</a>' in html and "<strong>arm64</strong>" in html
    text = client.get(f"/commit/{c['two']}.txt?arch=arm64").get_data(as_text=True)
    assert text.count("[defconfig-arm64-") == 2 and "[defconfig-83" not in text
    for path, what in ((f"/api/?arch=mips", "arch='mips'"), (f"/api/commit/{c['two']}?lto=full", "lto='full'"),
                       (f"/api/matrix/{c['two']}?arch=x", "arch='x'")):
        r = client.get(path)
        assert r.status_code == 400 and what in r.get_json()["error"], (path, r.data[:200])


def test_one_matrix_per_arch(fake_store, client):
    _, c, cache, _ = fake_store
    for arch, q in (("x86_64", ""), ("arm64", "?arch=arm64")):
        d = get_json(client, f"/api/matrix/{c['two']}{q}?all=1".replace("?arch=arm64?", "?arch=arm64&"))
        assert d["arch"] == arch and d["toolchains"] == ["gcc-12", "clang-19"], d["toolchains"]
        assert d["links"]["arches"] == {a: f"/matrix/{c['two']}?arch={a}" for a in ("x86_64", "arm64")}
        want = {tc: nm_sizes(build_object(cache, tc, arch, c["two"]), arch) for tc in ("gcc-12", "clang-19")}
        got = {r["function"]: {tc: x["size"] for tc, x in r["cells"].items()} for r in d["rows"]}
        assert got["alloc_pages"] == {tc: want[tc]["alloc_pages"] for tc in want}, arch
        sized = {f for f, cells in got.items() if any(v is not None for v in cells.values())}   # inlined: no copy
        assert sized == set(want["gcc-12"]) | set(want["clang-19"]), arch


def test_history_has_a_line_per_toolchain_and_arch(fake_store, client):
    """The function page and ``sizewatch history``: an arm64 point is never on an x86_64 line; each line's
    sizes are nm's (the cross nm for arm64) of that commit's object."""
    db, c, cache, _ = fake_store
    d = get_json(client, "/api/function/alloc_pages")
    shas = d["chart"]["commits"]["sha"]
    assert shas == [c["base"], c["one"], c["two"]]
    lines = {ln["label"]: ln["size"] for ln in d["chart"]["lines"]}
    assert list(lines) == ["gcc-12", "gcc-12 arm64", "clang-19", "clang-19 arm64"]
    for col, size in lines.items():
        tc, arch = col.split(" ")[0], "arm64" if col.endswith(" arm64") else "x86_64"
        assert size == [nm_sizes(build_object(cache, tc, arch, sha), arch)["alloc_pages"] for sha in shas], col
    p = subprocess.run([*sizewatch_cmd(), "history", "alloc_pages", "--db", str(db)], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    rows = [ln.split() for ln in p.stdout.splitlines()[1:]]
    arm = [r for r in rows if r[1:3] == ["gcc-12", "arm64"]]
    assert [(r[0], int(r[3])) for r in arm] == [(sha[:12], lines["gcc-12 arm64"][i]) for i, sha in enumerate(shas)]
    assert len(rows) == 12


def test_inlined_history_keeps_the_arches_apart(fake_store, client):
    """``history --inlined`` and the function page's inlined copies: per toolchain, arch and target, each
    line's first point without a delta (an arm64 point is never compared with an x86_64 one)."""
    import json
    db, c, _, _ = fake_store
    p = subprocess.run([*sizewatch_cmd(), "history", "--inlined", "rmqueue_smallest", "--db", str(db), "--json"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    points = json.loads(p.stdout)
    assert sorted({(x["toolchain"], x["arch"], x["lto"]) for x in points}) == [
        ("clang-19", "arm64", ""), ("clang-19", "x86_64", ""), ("gcc-12", "arm64", ""), ("gcc-12", "x86_64", "")]
    text = subprocess.run([*sizewatch_cmd(), "history", "--inlined", "rmqueue_smallest", "--db", str(db)],
                          capture_output=True, text=True, timeout=60).stdout.splitlines()[1:]
    for line in ("gcc-12", "gcc-12 arm64", "clang-19", "clang-19 arm64"):
        mine = [ln for ln in text if ln[14:].split("mm/page_alloc.o")[0].strip() == line]
        assert [ln[:12] for ln in mine] == [c["base"][:12], c["one"][:12], c["two"][:12]], (line, text)
        inst, size, third = mine[0].split("mm/page_alloc.o")[1].split()[:3]
        assert not third.startswith(("+", "-")), (line, mine[0])          # a line's first point: no delta
        assert all(ln.split("mm/page_alloc.o")[1].split()[2].startswith(("+", "-")) for ln in mine[1:]), mine
    d = get_json(client, "/api/function/rmqueue_smallest")
    assert sorted(x["line"] for x in d["inlined"]["current"]) == ["clang-19", "clang-19 arm64", "gcc-12",
                                                                  "gcc-12 arm64"]


def test_rerun_keeps_the_arch(fake_store, client, monkeypatch):
    """The re-run form sends the page's arch: a commit built for both arches is re-run for arm64 with
    ``--arch arm64`` (everything is stored: the job builds nothing); the argument mapping itself as
    the ThinLTO test checks it."""
    from types import SimpleNamespace as B

    from toolchains.kbuild import preset
    from web.pages.actions import _config_args
    _, c, cache, _ = fake_store
    arm = preset("allocator", arch="arm64")
    assert _config_args([B(config_key=arm.key)]) == ["--config", "allocator", "--arch", "arm64"]
    assert _config_args([B(config_key=preset("allocator", arch="arm64", lto="thin").key)]) == [
        "--config", "allocator", "--arch", "arm64", "--lto", "thin"]
    assert _config_args([B(config_key=preset("defconfig", arch="arm64").key)]) == ["--arch", "arm64"]
    assert _config_args([B(config_key=preset("defconfig").key), B(config_key=arm.key)]) == []
    html = client.get(f"/commit/{c['two']}?arch=arm64").get_data(as_text=True)
    assert '<select name="arch"><option>x86_64</option><option selected>arm64</option></select>' in html
    monkeypatch.setenv("SIZEWATCH_CACHE", str(cache))
    r = client.post(f"/api/commit/{c['two']}/rerun", headers={"Authorization": f"Bearer {TOKEN}"},
                    data={"arch": "arm64"})
    assert r.status_code == 202, r.data
    job = r.get_json()["job"]
    argv = job["argv"]
    assert argv[argv.index("--arch") + 1] == "arm64" and argv[argv.index("--toolchains") + 1] == "clang-19,gcc-12"
    st = finished_job(client, job)
    assert st["state"] == "done", st["log"][-2000:]
    assert "0 built, 0 re-analyzed, 4 already stored" in st["log"]        # the arm64 builds, stored
    r = client.post(f"/api/commit/{c['two']}/rerun", headers={"Authorization": f"Bearer {TOKEN}"},
                    data={"arch": "sparc"})
    assert r.status_code == 400 and "arch='sparc'" in r.get_json()["error"]
    # the function page's bisect form: the arch of the line to bisect, passed on as --arch
    html = client.get("/function/alloc_pages").get_data(as_text=True)
    assert '<select name="arch"><option>x86_64</option><option>arm64</option></select>' in html
    r = client.post("/api/function/alloc_pages/bisect", headers={"Authorization": f"Bearer {TOKEN}"},
                    data={"range": f"{c['base']}..{c['two']}", "toolchain": "gcc-12", "condition": "grew_by",
                          "bytes": "1", "arch": "arm64"})
    assert r.status_code == 202, r.data
    job = r.get_json()["job"]
    assert job["argv"][job["argv"].index("--arch") + 1] == "arm64"
    st = finished_job(client, job)
    assert st["state"] == "done", st["log"][-2000:]
    old, new = (nm_sizes(build_object(cache, "gcc-12", "arm64", c[k]), "arm64")["alloc_pages"] for k in ("one", "two"))
    assert "(gcc-12: aarch64-linux-gnu-gcc-12 " in st["log"] and f"{c['two']} mm: two" in st["log"]
    assert f"{'alloc_pages':40} {old:>7} {new:>7} {new - old:>+7}" in st["log"], st["log"]      # the cross nm's sizes


def test_bot_reproduce_lines_name_the_config_arch_and_lto():
    from ci.bot.reply import TestContext, reproduce_block
    from db.botstore import BotMessage
    from toolchains.kbuild import Config, preset
    head = BotMessage("<s@x>", "patch")
    for config, flags in ((preset("allocator", arch="arm64"), "      --config allocator --arch arm64"),
                          (preset("allocator", arch="arm64", lto="thin"),
                           "      --config allocator --arch arm64 --lto thin"),
                          (preset("defconfig", arch="arm64"), "      --arch arm64")):
        ctx = TestContext("linux-6.1", "6.1", "a" * 40, "base-commit", 1, [("clang-19", "clang-19 1.0")],
                          ["vmlinux"], config)
        lines = reproduce_block(ctx, head, None, ["clang-19"])
        assert lines[-2:] == ["      --toolchains clang-19 --targets vmlinux \\", flags], lines
    ctx = TestContext("linux-6.1", "6.1", "a" * 40, "base-commit", 1, [("gcc-12", "gcc-12 1.0")],
                      ["mm/page_alloc.o"], Config())
    assert reproduce_block(ctx, head, None, ["gcc-12"])[-1] == "      --toolchains gcc-12 --targets mm/page_alloc.o"
