#!/usr/bin/env bash
# The aarch64 (arm64) build of rbpeek on this x86-64 machine (issue 39):
# configures BUILD (default build-arm64/ in the source tree) with
# cmake/toolchain-aarch64.cmake, builds it, runs its unit tests under
# qemu-aarch64 (ctest -L unit: ctest puts the emulator before each test
# executable) and packs the arm64 .deb (cpack -G DEB), then checks the
# package: its architecture, that every ELF file in it is aarch64's, the
# libraries' sonames, and that its Depends names the package of every
# library its objects need (dpkg-shlibdeps, which cpack runs, is told to
# carry on when it finds none).
#
#   scripts/build-arm64.sh [--build DIR] [--no-tests] [--no-deb] [-j N]
#
# Not part of ctest's suite (a few minutes of build on 2 CPUs; scripts/test.sh
# runs it after ctest):
# exits 77 (skip) naming what is missing when the cross compiler, qemu-user
# or the arm64 sysroot is not there; scripts/install-arm64.sh --build
# installs them. Run it niced on a shared machine: nice -n 10 scripts/build-arm64.sh.
set -euo pipefail

SRC=$(cd "$(dirname "$0")/.." && pwd)
BUILD=$SRC/build-arm64
TESTS=1
DEB=1
JOBS=2
while [ $# -gt 0 ]; do
    case "$1" in
        --build) BUILD=$(realpath -m "$2"); shift 2 ;;
        --no-tests) TESTS=0; shift ;;
        --no-deb) DEB=0; shift ;;
        -j) JOBS=$2; shift 2 ;;
        *) echo "usage: $0 [--build DIR] [--no-tests] [--no-deb] [-j N]" >&2; exit 2 ;;
    esac
done
SYSROOT=${RBPEEK_ARM64_BUILD_SYSROOT:-/var/cache/rbpeek/arm64-build-sysroot}
export RBPEEK_ARM64_BUILD_SYSROOT=$SYSROOT

missing=()
command -v aarch64-linux-gnu-gcc >/dev/null || missing+=("aarch64-linux-gnu-gcc (gcc-aarch64-linux-gnu)")
command -v qemu-aarch64 >/dev/null || missing+=("qemu-aarch64 (qemu-user)")
[ -f "$SYSROOT/var/lib/dpkg/status" ] || missing+=("the arm64 build sysroot $SYSROOT")
if [ ${#missing[@]} -gt 0 ]; then
    echo "skipped: the aarch64 build needs $(IFS=,; echo "${missing[*]}" | sed 's/,/, /g'); scripts/install-arm64.sh --build installs them"
    exit 77
fi

# check_deb DEB: the package is arm64's through and through (see the top).
check_deb() {
    local deb=$1 root f m bad=0 elves=0 needed="" so lib pkg
    root=$(mktemp -d)
    dpkg-deb -x "$deb" "$root"
    [ "$(dpkg-deb -f "$deb" Architecture)" = arm64 ] || { echo "FAIL: Architecture is not arm64"; bad=1; }
    while IFS= read -r f; do
        [ "$(head -c4 "$f" 2>/dev/null | tail -c3)" = ELF ] || [ "${f%.a}" != "$f" ] || continue
        elves=$((elves + 1))
        m=$(aarch64-linux-gnu-readelf -h "$f" | sed -n 's/^ *Machine: *//p' | sort -u)
        [ "$m" = AArch64 ] || { echo "FAIL: ${f#$root} is not aarch64's: $m"; bad=1; }
        [ "${f%.a}" = "$f" ] || continue
        needed+=" $(aarch64-linux-gnu-readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
        so=$(aarch64-linux-gnu-readelf -d "$f" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
        [ -z "$so" ] || echo "  ${f#$root}: SONAME $so"
    done < <(find "$root" -type f | sort)
    echo "  $elves ELF files and archives, all aarch64's: $([ $bad = 0 ] && echo yes || echo NO)"
    local depends
    depends=$(dpkg-deb -f "$deb" Depends)
    echo "  Depends: $depends"
    for so in $(echo "$needed" | tr ' ' '\n' | sort -u); do
        lib=$SYSROOT/usr/lib/aarch64-linux-gnu/$so
        [ -e "$lib" ] || lib=$SYSROOT/lib/aarch64-linux-gnu/$so
        pkg=$(DPKG_ADMINDIR=$SYSROOT/var/lib/dpkg dpkg-query --search "$lib" 2>/dev/null | sed 's/:.*//' | head -1) || true
        if [ -z "$pkg" ]; then echo "FAIL: no package of the sysroot has $so"; bad=1
        elif ! echo ", $depends," | grep -q ", $pkg[ ,]"; then echo "FAIL: $so ($pkg) is needed but not in Depends"; bad=1
        else echo "  $so: $pkg, in Depends"
        fi
    done
    rm -rf "$root"
    echo "  $(basename "$deb"): $(du -k "$deb" | cut -f1) KiB, $(dpkg-deb -c "$deb" | grep -vc '/$') files"
    [ $bad = 0 ] || exit 1
}

step() { printf '\n== %s (%s, load %s)\n' "$1" "$(date -u +%H:%M:%S)" "$(cut -d' ' -f1-3 /proc/loadavg)"; }

step "configure $BUILD"
mkdir -p "$BUILD"
cmake -S "$SRC" -B "$BUILD" -DCMAKE_TOOLCHAIN_FILE="$SRC/cmake/toolchain-aarch64.cmake" \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$BUILD/configure.log" 2>&1 || { cat "$BUILD/configure.log"; exit 1; }
step "build (-j$JOBS)"
start=$(date +%s)
cmake --build "$BUILD" -j"$JOBS" >"$BUILD/build.log" 2>&1 || { tail -40 "$BUILD/build.log"; exit 1; }
echo "built in $(( $(date +%s) - start )) s (log: $BUILD/build.log)"
grep -E "warning:" "$BUILD/build.log" | sort -u | head -20 || true

if [ $TESTS = 1 ]; then
    step "unit tests under qemu-aarch64 (ctest -L unit)"
    (cd "$BUILD" && ctest -L unit -j"$JOBS" --output-on-failure)
fi

if [ $DEB = 1 ]; then
    step "the arm64 .deb (cpack -G DEB)"
    (cd "$BUILD" && cpack -G DEB >cpack.log 2>&1) || { cat "$BUILD/cpack.log"; exit 1; }
    deb=$(ls "$BUILD"/rbpeek_*_arm64.deb)
    check_deb "$deb"
fi
