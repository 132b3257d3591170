#!/usr/bin/env bash
# One install script for every entry point (make run, make test, CI, the Dockerfile):
# Debian packages through apt, then a virtualenv with sizewatch installed, then the dashboard's
# browser libraries from npm.
# Safe to run twice: apt is skipped when everything is present, pip only reinstalls on change.
#
#   scripts/install.sh [--runtime] [--only apt|venv|web] [--list]
#
#   --runtime   what the services run (dashboard, bot, build workers; the Dockerfile's image): no
#               test-only parts (browser, chromedriver, wrk, public-inbox, the [test] extras) and no
#               PostgreSQL/Redis servers (the deployment runs those elsewhere). Also
#               SIZEWATCH_INSTALL=runtime (the image sets it, so `make run` in it installs nothing more).
#   --only STEP apt: the Debian packages and QEMU's plugin header; venv: the virtualenv;
#               web: web/node_modules (npm ci). The Dockerfile runs apt before copying the source,
#               so a source edit does not redo the apt layer.
#   --list      print the Debian packages of the profile, one a line, and install nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

PROFILE=${SIZEWATCH_INSTALL:-full}
ONLY=""
LIST=""
while [ $# -gt 0 ]; do
  case "$1" in
    --runtime) PROFILE=runtime ;;
    --only) ONLY=${2:?--only takes apt, venv or web}; shift ;;
    --only=*) ONLY=${1#--only=} ;;
    --list) LIST=1 ;;
    *) echo "install: unknown option $1 (--runtime, --only apt|venv|web, --list)" >&2; exit 2 ;;
  esac
  shift
done
case "$PROFILE" in full|runtime) ;; *) echo "install: SIZEWATCH_INSTALL=$PROFILE: full or runtime" >&2; exit 2 ;; esac
case "$ONLY" in ""|apt|venv|web) ;; *) echo "install: --only $ONLY: apt, venv or web" >&2; exit 2 ;; esac
step() { [ -z "$ONLY" ] || [ "$ONLY" = "$1" ]; }

# what the services run (the dashboard, the bot, the build workers)
RUNTIME_PACKAGES=(
  # build and source
  make git xz-utils bc flex bison libelf-dev libssl-dev dwarves binutils cpio kmod
  linux-source-6.1 linux-source-6.12
  # compilers of the default matrix (kbuild LLVM=-N needs lld and llvm alongside clang)
  gcc-11 gcc-12 clang-14 clang-16 clang-19 lld-14 lld-16 lld-19 llvm-14 llvm-16 llvm-19
  # arm64 (issue 30): the cross gcc builds the arm64 test objects (clang-19 targets aarch64 itself),
  # the cross binutils are their oracles (objdump -dr, readelf -r, nm for bloat-o-meter -p) and link them
  gcc-12-aarch64-linux-gnu binutils-aarch64-linux-gnu
  # sandboxing of untrusted builds, optional compiler cache
  bubblewrap ccache
  # python; gcc + libdw-dev: the native DWARF reader (analyzer/dwarf/_libdw.c, built by pip through
  # setup.py; without them pip installs sizewatch with the pure-Python DWARF walker only)
  python3 python3-venv python3-dev gcc libdw-dev
  # the runtime measurement (issue 26): QEMU's TCG, the counting plugin built against glib and
  # the header from QEMU's own source package (below), the guest's static init (libc6-dev)
  qemu-system-x86 libglib2.0-dev pkg-config dpkg-dev libc6-dev
)
# what only the tests and benches use
TEST_PACKAGES=(
  # the dashboard: a real browser for its tests (driven through chromedriver), a load tool for its bench
  chromium chromium-driver wrk
  # the bot's tests make real public-inbox v2 inboxes with public-inbox-init/-mda (the bot itself reads
  # an inbox with git)
  public-inbox
  # the deployment mode past one machine (issue 16): the PostgreSQL store's tests start their own
  # server from postgresql-15's binaries (as the postgres user it creates), the queue's tests their
  # own redis-server; a deployment runs both servers elsewhere (compose.yaml)
  postgresql-15 redis-server
)
APT_PACKAGES=("${RUNTIME_PACKAGES[@]}")
[ "$PROFILE" = runtime ] || APT_PACKAGES+=("${TEST_PACKAGES[@]}")
if [ -n "$LIST" ]; then printf '%s\n' "${APT_PACKAGES[@]}"; exit 0; fi
web_current() { cmp -s web/package-lock.json web/node_modules/.sizewatch-lock 2>/dev/null; }
# the dashboard's chart library comes from npm (web/package.json); Debian's npm unless a node with npm is
# present, and only when web/node_modules is to be installed here
if { [ -z "$ONLY" ] || [ "$ONLY" = web ]; } && ! web_current && ! command -v npm >/dev/null 2>&1; then
  APT_PACKAGES+=(npm)
fi
EXTRA=${SIZEWATCH_EXTRA_APT:-}

SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
apt_install() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    echo "install: apt packages: ${missing[*]}"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

if step apt; then
# shellcheck disable=SC2086
apt_install "${APT_PACKAGES[@]}" $EXTRA

# QEMU's plugin header: Debian ships it in no binary package, so it is taken from the qemu source
# package of the installed QEMU (a deb-src line is added for that) and kept where
# toolchains/runtime/qemu.py looks for it, with the source version it came from.
HEADER_DIR=/usr/local/include/sizewatch
qemu_src=$(dpkg-query -W -f='${source:Version}' qemu-system-x86 2>/dev/null || true)
if [ -n "$qemu_src" ] && [ "$(cat "$HEADER_DIR/qemu-version" 2>/dev/null)" != "$qemu_src" ]; then
  if ! grep -rqs '^Types: deb-src\|^deb-src ' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    echo "install: adding a deb-src line for QEMU's plugin header"
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
      sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources | $SUDO tee /etc/apt/sources.list.d/sizewatch-src.sources >/dev/null
    else
      sed -n 's/^deb /deb-src /p' /etc/apt/sources.list | $SUDO tee /etc/apt/sources.list.d/sizewatch-src.list >/dev/null
    fi
    $SUDO apt-get update -qq
  fi
  src=$(mktemp -d)
  ( cd "$src" && { apt-get source -qq --download-only "qemu=$qemu_src" >/dev/null 2>&1 || apt-get source -qq --download-only qemu >/dev/null; } )
  orig=$(ls "$src"/qemu_*.orig.tar.* | head -1)
  tar -xf "$orig" -C "$src" --wildcards '*/include/qemu/qemu-plugin.h'
  $SUDO mkdir -p "$HEADER_DIR"
  $SUDO cp "$src"/*/include/qemu/qemu-plugin.h "$HEADER_DIR/qemu-plugin.h"
  echo "$qemu_src" | $SUDO tee "$HEADER_DIR/qemu-version" >/dev/null
  rm -rf "$src"
fi
fi

if step venv; then
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=.venv/.sizewatch-installed
extras=test,postgres
want=$(cat setup.cfg pyproject.toml setup.py analyzer/dwarf/_libdw.c | sha256sum | cut -d' ' -f1)
if [ "$PROFILE" = runtime ]; then extras=postgres; want="$want runtime"; fi
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  log=$(mktemp)
  if ! { .venv/bin/pip install -q --upgrade pip && .venv/bin/pip install -q -e ".[$extras]" --config-settings editable_mode=compat; } >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; echo "install: pip install failed" >&2; exit 1
  fi
  rm -f "$log"
  echo "$want" > "$stamp"
fi
fi

# the dashboard's browser libraries (web/package-lock.json), served by the app itself: no CDN, works offline
if step web && ! web_current; then
  command -v npm >/dev/null 2>&1 || apt_install npm
  log=$(mktemp)
  if ! (cd web && npm ci --no-audit --no-fund --loglevel=error) >"$log" 2>&1; then
    cat "$log" >&2; rm -f "$log"; echo "install: npm ci (web/) failed" >&2; exit 1
  fi
  rm -f "$log"
  cp web/package-lock.json web/node_modules/.sizewatch-lock
fi
