"""Issue 27 §3: the deployment as users run it, on this machine: the Dockerfile built, compose.yaml
brought up (1 web + 2 workers on Redis and PostgreSQL), the example series run through the queue,
the report and a page read back, zombies counted. Prints the figures.

    python bench/container_run.py [--compose podman-compose] [--no-cache] [--keep]

Needs podman (Debian's, as root; runc + cgroupfs in /etc/containers/containers.conf where crun
refuses the host's cgroups) and podman-compose (PyPI; 1.6 ignores ``condition: service_healthy`` on
podman 4.3, so the services' own bounded waits are what orders the start here). No registry is
needed: the base image ``debian:bookworm`` is made with debootstrap when missing (its apt sources as
the official image has them: bookworm, -updates, -security), and Redis and PostgreSQL are stand-in
images built from Debian's packages (``redis-server``, ``postgresql-15``) that behave as the official
``redis:7-bookworm`` / ``postgres:15-bookworm`` do for compose.yaml (POSTGRES_* variables, /data,
/var/lib/postgresql/data, redis-cli/pg_isready health checks); a compose override file points the two
services at them, compose.yaml itself runs unchanged.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE = "debian:bookworm"
PROJECT = "swbench"
SERIES = "toolchains/examples/rmqueue-always-inline.mbox"
TOOLCHAINS = "gcc-12,clang-19"
REDIS_IMAGE = "localhost/sizewatch-standin-redis:7"
PG_IMAGE = "localhost/sizewatch-standin-postgres:15"

DEBIAN_SOURCES = """\
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""

REDIS_DOCKERFILE = """\
FROM debian:bookworm
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends redis-server \\
    && rm -rf /var/lib/apt/lists/* && mkdir -p /data
WORKDIR /data
# as the official image's entrypoint: without a config file, listen on every address unprotected
# (the container network is the boundary)
RUN printf '#!/bin/sh\\nif [ "$1" = redis-server ]; then shift; set -- redis-server --protected-mode no "$@"; fi\\nexec "$@"\\n' \\
    > /usr/local/bin/entrypoint && chmod +x /usr/local/bin/entrypoint
ENTRYPOINT ["/usr/local/bin/entrypoint"]
CMD ["redis-server"]
EXPOSE 6379
"""

PG_ENTRYPOINT = r"""#!/bin/sh
# the official postgres image's contract, the part compose.yaml uses: POSTGRES_USER/PASSWORD/DB,
# data in $PGDATA, initialised on first start, listening on every address with passwords
set -e
PGDATA=${PGDATA:-/var/lib/postgresql/data}
BIN=/usr/lib/postgresql/15/bin
mkdir -p "$PGDATA" /var/run/postgresql
chown -R postgres:postgres "$PGDATA" /var/run/postgresql
chmod 700 "$PGDATA"
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  pw=$(mktemp); echo "${POSTGRES_PASSWORD:?}" > "$pw"; chown postgres "$pw"
  su postgres -c "$BIN/initdb -D '$PGDATA' -U '${POSTGRES_USER:-postgres}' --pwfile='$pw' -A scram-sha-256 -E UTF8 >/dev/null"
  rm -f "$pw"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  su postgres -c "$BIN/pg_ctl -D '$PGDATA' -o '-c listen_addresses=' -w start >/dev/null"
  if [ "${POSTGRES_DB:-postgres}" != postgres ]; then
    su postgres -c "PGPASSWORD='$POSTGRES_PASSWORD' psql -q -U '${POSTGRES_USER:-postgres}' -d postgres -c 'CREATE DATABASE \"$POSTGRES_DB\"'"
  fi
  su postgres -c "$BIN/pg_ctl -D '$PGDATA' -m fast -w stop >/dev/null"
fi
exec su postgres -c "exec $BIN/postgres -D '$PGDATA' -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql"
"""

PG_DOCKERFILE = """\
FROM debian:bookworm
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-15 \\
    && rm -rf /var/lib/apt/lists/*
COPY entrypoint /usr/local/bin/entrypoint
RUN chmod +x /usr/local/bin/entrypoint && ln -s /usr/lib/postgresql/15/bin/pg_isready /usr/local/bin/pg_isready
ENTRYPOINT ["/usr/local/bin/entrypoint"]
EXPOSE 5432
"""


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def sh(argv: list[str], check: bool = True, capture: bool = True, timeout: float | None = None,
       **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(argv, text=True, capture_output=capture, timeout=timeout, **kw)
    if check and proc.returncode != 0:
        out = ((proc.stdout or "") + (proc.stderr or ""))[-3000:]
        raise SystemExit(f"failed ({proc.returncode}): {' '.join(argv)}\n{out}")
    return proc


def image_exists(name: str) -> bool:
    return sh(["podman", "image", "exists", name], check=False).returncode == 0


def image_size(name: str) -> int:
    return int(sh(["podman", "image", "inspect", "--format", "{{.Size}}", name]).stdout.strip())


def make_base() -> float | None:
    """debian:bookworm from debootstrap when there is none; seconds taken, or None when it was there."""
    if image_exists(BASE):
        return None
    if shutil.which("debootstrap") is None:
        raise SystemExit("no debian:bookworm image and no debootstrap: apt-get install debootstrap")
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="swbase-", dir="/var/tmp") as tmp:
        root = Path(tmp) / "rootfs"
        log(f"base image: debootstrap --variant=minbase bookworm {root}")
        sh(["debootstrap", "--variant=minbase", "bookworm", str(root), "http://deb.debian.org/debian"])
        (root / "etc/apt/sources.list").unlink(missing_ok=True)
        (root / "etc/apt/sources.list.d/debian.sources").write_text(DEBIAN_SOURCES)
        sh(["chroot", str(root), "apt-get", "clean"])
        for p in (root / "var/lib/apt/lists").glob("*"):
            if p.is_file():
                p.unlink()
        tar = subprocess.Popen(["tar", "-C", str(root), "-c", "."], stdout=subprocess.PIPE)
        sh(["podman", "import", "-", BASE], stdin=tar.stdout)
        tar.wait()
    return time.monotonic() - t0


def build_standin(name: str, dockerfile: str, files: dict[str, str] | None = None) -> float | None:
    if image_exists(name):
        return None
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="swstandin-") as tmp:
        (Path(tmp) / "Dockerfile").write_text(dockerfile)
        for fname, text in (files or {}).items():
            (Path(tmp) / fname).write_text(text)
        log(f"stand-in image {name} from Debian's packages")
        sh(["podman", "build", "-q", "-t", name, tmp])
    return time.monotonic() - t0


def build_image(tag: str, no_cache: bool, ca_bundle: str | None, logfile: Path) -> float:
    argv = ["podman", "build", "-t", tag]
    if no_cache:
        argv.append("--no-cache")
    if ca_bundle:
        argv += ["--secret", f"id=ca_bundle,src={ca_bundle}"]
    log(f"image: {' '.join(argv)} {ROOT} (log: {logfile})")
    t0 = time.monotonic()
    with open(logfile, "w") as out:
        rc = subprocess.run(argv + [str(ROOT)], stdout=out, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        raise SystemExit(f"image build failed ({rc}): see {logfile}")
    return time.monotonic() - t0


def build_image_once_again(tag: str, no_cache: bool, ca_bundle: str | None, out: Path) -> tuple[float, str]:
    """The build, tried a second time (its finished layers reused) when the first fails: an archive
    or a proxy connection that stalls is this machine's, not the Dockerfile's. Seconds and a note."""
    try:
        return build_image(tag, no_cache, ca_bundle, out / "build.log"), ""
    except SystemExit as e:
        log(f"{e}; building again")
        secs = build_image(tag, False, ca_bundle, out / "build-again.log")
        return secs, f"; the first build failed ({out / 'build.log'}), this is the second, its layers reused"


def containers(project: str) -> dict[str, list[str]]:
    """service -> running container names of the compose project."""
    out = sh(["podman", "ps", "--filter", f"label=io.podman.compose.project={project}", "--format", "json"]).stdout
    found: dict[str, list[str]] = {}
    for c in json.loads(out or "[]"):
        svc = (c.get("Labels") or {}).get("com.docker.compose.service", "?")
        found.setdefault(svc, []).append(c["Names"][0])
    return {k: sorted(v) for k, v in sorted(found.items())}


def zombies(name: str) -> tuple[str, int, int]:
    """(PID 1's command, processes, zombies) in a container, from /proc (no ps in the image)."""
    code = ("import os\n"
            "pids=[p for p in os.listdir('/proc') if p.isdigit()]\n"
            "z=0\n"
            "for p in pids:\n"
            "    try: st=open(f'/proc/{p}/stat').read()\n"
            "    except OSError: continue\n"
            "    z += st[st.rindex(')')+2] == 'Z'\n"
            "print(open('/proc/1/comm').read().strip(), len(pids), z)\n")
    out = sh(["podman", "exec", name, "python3", "-c", code]).stdout.split()
    return out[0], int(out[1]), int(out[2])


def http_get(url: str, timeout: float = 30) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode("utf-8", "replace")


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def probe_under(image: str, opts: list[str]) -> str:
    """The sandbox probe in a throw-away container of the image under these --security-opt values."""
    argv = ["podman", "run", "--rm"] + [f"--security-opt={o}" for o in opts] + [
        image, "python3", "-c", "from toolchains.sandbox import unavailable; print(unavailable() or 'ok')"]
    p = sh(argv, check=False)
    return (p.stdout.strip() or p.stderr.strip()).splitlines()[-1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compose", default=shutil.which("podman-compose") or "podman-compose",
                    help="the podman-compose executable")
    ap.add_argument("--no-cache", action="store_true", help="build the image from nothing (else layers are reused)")
    ap.add_argument("--ca-bundle", default="/etc/ssl/certs/ca-certificates.crt" if Path(
        "/etc/ssl/certs/ca-certificates.crt").is_file() else "",
        help="CA bundle given to the build as the ca_bundle secret (a TLS-intercepting proxy); '' for none")
    ap.add_argument("--toolchains", default=TOOLCHAINS, help=f"the run's toolchains (default {TOOLCHAINS})")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("/var/tmp/sizewatch-container-run"), help="logs and outputs")
    ap.add_argument("--keep", action="store_true", help="leave the services running at the end")
    args = ap.parse_args()
    if shutil.which("podman") is None:
        raise SystemExit("podman is not installed (apt-get install podman)")
    args.out.mkdir(parents=True, exist_ok=True)
    fig: dict[str, object] = {}
    t_all = time.monotonic()

    made = make_base()
    fig["base image"] = f"made with debootstrap in {made:.0f} s" if made is not None else "present"
    r = build_standin(REDIS_IMAGE, REDIS_DOCKERFILE)
    p = build_standin(PG_IMAGE, PG_DOCKERFILE, {"entrypoint": PG_ENTRYPOINT})
    fig["stand-ins"] = ", ".join(f"{n} {'built in %.0f s' % t if t is not None else 'present'}"
                                 for n, t in ((REDIS_IMAGE, r), (PG_IMAGE, p)))

    tag = "sizewatch:local"                                  # compose.yaml's image: up uses it, builds nothing
    secs, note = build_image_once_again(tag, args.no_cache, args.ca_bundle or None, args.out)
    fig["image build"] = f"{secs:.0f} s ({'--no-cache' if args.no_cache else 'layer cache allowed'}{note})"
    fig["image size"] = f"{image_size(tag) / 1e9:.2f} GB"

    # the sandbox probe under the engine's options, in throw-away containers of the image
    fig["probe, default security"] = probe_under(tag, [])
    fig["probe, seccomp+apparmor unconfined"] = probe_under(tag, ["seccomp=unconfined", "apparmor=unconfined"])
    fig["probe, systempaths=unconfined only"] = probe_under(tag, ["systempaths=unconfined"])

    override = args.out / "standins.yaml"
    override.write_text(f"services:\n  redis:\n    image: {REDIS_IMAGE}\n  postgres:\n    image: {PG_IMAGE}\n")
    port = free_port()
    env = dict(os.environ, SIZEWATCH_WORKERS=str(args.workers), SIZEWATCH_WEB_PORT=str(port))
    compose = [args.compose, "-p", PROJECT, "-f", str(ROOT / "compose.yaml"), "-f", str(override)]
    sh(compose + ["down", "-v"], check=False, env=env, timeout=600)         # from nothing: no volumes kept
    log(f"compose up: 1 web + {args.workers} workers on Redis and PostgreSQL (web on port {port})")
    t0 = time.monotonic()
    up = sh(compose + ["up", "-d"], check=False, env=env, timeout=900)
    (args.out / "up.log").write_text(up.stdout + up.stderr)
    if up.returncode != 0:
        raise SystemExit(f"compose up failed: see {args.out / 'up.log'}")
    # up when the dashboard answers and every worker is listening on the queue
    running: dict[str, list[str]] = {}
    status = 0
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        running = containers(PROJECT)
        try:
            status, _ = http_get(f"http://127.0.0.1:{port}/api/", timeout=5)
        except OSError:
            status = 0
        listening = sum("listening on" in sh(["podman", "logs", c], check=False).stderr
                        for c in running.get("worker", []))
        if status == 200 and listening == args.workers:
            break
        time.sleep(2)
    fig["services up"] = (f"{sum(map(len, running.values()))} containers ("
                          + ", ".join(f"{k} x{len(v)}" for k, v in running.items())
                          + f"), dashboard {status}, in {time.monotonic() - t0:.0f} s after up")
    if status != 200:
        raise SystemExit(f"the services did not come up: {running}")
    fig["restarts"] = ", ".join(
        f"{c} {sh(['podman', 'inspect', '--format', '{{.RestartCount}}', c]).stdout.strip()}"
        for names in running.values() for c in names)
    for svc in ("web", "worker"):
        c = running[svc][0]
        first = [ln for ln in sh(["podman", "logs", c], check=False).stderr.splitlines() if ln.startswith(("sizewatch:", "worker "))]
        fig[f"{svc} start lines"] = " | ".join(first[:3]) or "(none)"
    web = running["web"][0]
    fig["probe in a worker"] = sh(["podman", "exec", running["worker"][0], "python3", "-c",
                                   "from toolchains.sandbox import unavailable; print(unavailable() or 'ok')"]).stdout.strip()

    run = ["podman", "exec", web, "sizewatch", "run", "--series", SERIES, "--toolchains", args.toolchains,
           "--targets", "mm/page_alloc.o", "--queue", "redis://redis:6379/0"]
    log(f"the example series through the queue: {' '.join(run[3:])}")
    t0 = time.monotonic()
    first = sh(run, check=False, timeout=3 * 3600)
    fig["series run"] = f"exit {first.returncode} in {time.monotonic() - t0:.0f} s; {first.stderr.strip().splitlines()[-1:]}"
    (args.out / "report.txt").write_text(first.stdout)
    (args.out / "run.stderr").write_text(first.stderr)
    t0 = time.monotonic()
    again = sh(run, check=False, timeout=600)
    fig["report read back"] = (f"second run exit {again.returncode} in {time.monotonic() - t0:.1f} s, "
                               f"{'identical' if again.stdout == first.stdout and first.stdout else 'DIFFERENT'} "
                               f"report ({len(first.stdout.splitlines())} lines); "
                               f"{again.stderr.strip().splitlines()[-1:]}")
    st, api = http_get(f"http://127.0.0.1:{port}/api/")
    series = json.loads(api).get("series") or [] if st == 200 else []
    if series:
        sid = series[0]["id"]
        st1, html = http_get(f"http://127.0.0.1:{port}/series/{sid}")
        st2, txt = http_get(f"http://127.0.0.1:{port}/series/{sid}.txt")
        fig["page"] = (f"/series/{sid} {st1} ({len(html)} bytes, subject {'shown' if series[0]['subject'] in html else 'MISSING'}), "
                       f"/series/{sid}.txt {st2} ({len(txt.splitlines())} lines)")
        (args.out / "series.txt").write_text(txt)
    else:
        fig["page"] = f"/api/ {st}: no series listed"
    qs = sh(["podman", "exec", web, "sizewatch", "queue", "status", "--redis", "redis://redis:6379/0"], check=False)
    (args.out / "queue-status.txt").write_text(qs.stdout + qs.stderr)

    zs = []
    for svc in ("web", "worker"):
        for c in running.get(svc, []):
            init, procs, z = zombies(c)
            zs.append(f"{c}: PID 1 {init}, {procs} processes, {z} zombies")
    fig["zombies"] = "; ".join(zs)

    bot = sh(compose + ["--profile", "bot", "up", "-d", "--no-deps", "bot"], check=False,
             env=dict(env, SIZEWATCH_LIST=str(args.out / "no-such-list")), timeout=300)
    said = [ln for ln in (bot.stdout + bot.stderr).splitlines() if "does not exist" in ln or "rror" in ln]
    fig["bot without a list"] = f"exit {bot.returncode}: {said[-1].strip() if said else '(nothing said)'}"

    for svc, names in running.items():
        for c in names:
            (args.out / f"{c}.log").write_text(sh(["podman", "logs", c], check=False).stderr)
    if not args.keep:
        sh(compose + ["down"], check=False, env=env, timeout=1800)
    fig["total"] = f"{time.monotonic() - t_all:.0f} s"
    width = max(map(len, fig))
    for k, v in fig.items():
        print(f"{k:<{width}}  {v}")
    print(f"(logs, report and page text in {args.out})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
