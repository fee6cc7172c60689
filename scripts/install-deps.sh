#!/usr/bin/env bash
# Installs the Debian packages rbpeek needs to build, test and demo, and the
# deb-src entries used to fetch CRuby sources for the test matrix. Idempotent:
# it only calls apt when something is missing, so re-running it is cheap.
set -euo pipefail

PKGS=(build-essential cmake pkg-config gdb lldb-16 python3-lldb-16 clang-16 libclang-rt-16-dev
      libdwarf-dev libelf-dev libdw-dev libcunit1-dev ruby3.1 ruby3.1-dev ruby-stackprof
      valgrind dpkg-dev autoconf bison libssl-dev libyaml-dev libffi-dev
      zlib1g-dev libgdbm-dev libreadline-dev chromium libxml2-utils
      libprotobuf-c-dev protobuf-c-compiler golang-go libgmp-dev
      file   # file: cpack -G DEB (dpkg-shlibdeps) finds the ELF files with it
      tmux puma ruby-sinatra)  # it.top (a terminal), it.puma (a clustered server)

# Extra deb-src suites carrying the CRuby versions in the test matrix. They
# reuse the URI and keyring of the machine's existing Debian sources file.
SRC_LIST=/etc/apt/sources.list.d/rbpeek-src.sources
want_src() {
    [ -f "$SRC_LIST" ] && return 1
    local uri keyring
    uri=$(awk '/^URIs:/ && /debian$/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    keyring=$(awk '/^Signed-By:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    uri=${uri:-http://deb.debian.org/debian}
    keyring=${keyring:-/usr/share/keyrings/debian-archive-keyring.gpg}
    cat > "$SRC_LIST" <<SRC
Types: deb-src
URIs: $uri
Suites: bullseye bookworm trixie experimental
Components: main
Signed-By: $keyring
SRC
    return 0
}

missing=()
# rustc builds YJIT into the shared 3.3.8 and 3.4.5 (scripts/build-rubies.sh);
# Debian's (1.63) is new enough. A rustc already on PATH (rustup's) serves.
command -v rustc >/dev/null 2>&1 || PKGS+=(rustc)
for p in "${PKGS[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
updated=0
if want_src; then apt-get update -qq; updated=1; fi
if [ ${#missing[@]} -gt 0 ]; then
    [ $updated = 1 ] || apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
