#!/usr/bin/env bash
# Runs every fuzz harness of tests/fuzz/ for SECONDS each (default 60),
# starting from the committed seed corpora, in a clang-16 build with
# libFuzzer, ASan and UBSan (-fno-sanitize-recover=undefined). Prints each
# harness's executions and findings; exits 1 on any finding (a crash, a
# sanitizer report, a leak, an input slower than 60 s, memory over 2 GiB),
# 77 when clang-16 or its libFuzzer runtime (libclang-rt-16-dev) is missing.
#
#   bash scripts/fuzz.sh [--build DIR] [--only NAME] [--parallel] [--prebuilt] [SECONDS]
#
# --parallel runs the harnesses side by side (a long run); FUZZ_NICE sets
# their niceness (default 10). --prebuilt runs the executables already in
# DIR/fuzz/ without building (a long run from a copy of them, while the
# tree changes).
#
# FUZZ_TIMEOUT (default 60) is libFuzzer's per-input limit in seconds. It is
# wall-clock time: on a loaded machine an input that takes 0.3 s of CPU can
# wait 10 s for it, so a lower limit reports the machine, not a hang (the
# hangs this catches, unbounded walks, take minutes to hours).
# FUZZ_RUNS=N ends each harness after N executions (libFuzzer's -runs), or
# at SECONDS, whichever comes first: a recorded run of 10^6.
# FUZZ_SEED=N fixes libFuzzer's random seed (CI's smoke run does, so that
# it explores the same inputs each time); unset, each run differs.
# DIR (default build-fuzz) keeps the build, the grown corpora (DIR/corpus/
# NAME, reused by the next run) and any finding (DIR/findings/NAME/, with
# the harness's log). Reproduce a finding with
#   DIR/fuzz/fuzz_NAME DIR/findings/NAME/crash-...
# and RBPEEK_FUZZ_VERBOSE=1 to see what each operation returned.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build-fuzz
ONLY=""
PARALLEL=""
PREBUILT=""
while [ $# -gt 0 ]; do
    case "$1" in
    --build) BUILD=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    --parallel) PARALLEL=1; shift ;;
    --prebuilt) PREBUILT=1; shift ;;
    *) break ;;
    esac
done
SECONDS_EACH=${1:-60}
# The per-operation harnesses (snapshot, sample, objects, heappage) replay
# every recorded image; fuzz_native drives the native unwinder (issue 25).
HARNESSES=(memimage core layout dwarf snapshot sample objects heappage native)
[ -n "$ONLY" ] && HARNESSES=("$ONLY")

CC=${FUZZ_CC:-clang-16}
if ! command -v "$CC" >/dev/null 2>&1; then
    echo "fuzz: SKIPPED: $CC is not installed (bash scripts/install-deps.sh installs clang-16 and libclang-rt-16-dev)"
    exit 77
fi
if [ ! -f "$("$CC" -print-file-name=libclang_rt.fuzzer-x86_64.a)" ] &&
   [ ! -f "$("$CC" -print-runtime-dir 2>/dev/null)/libclang_rt.fuzzer.a" ]; then
    echo "fuzz: SKIPPED: $CC has no libFuzzer runtime (install libclang-rt-16-dev: bash scripts/install-deps.sh)"
    exit 77
fi

if [ -z "$PREBUILT" ]; then
    echo "fuzz: building the harnesses in $BUILD ($CC, libFuzzer + ASan + UBSan)"
    CC=$CC cmake -S . -B "$BUILD" -DRBPEEK_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$BUILD.cmake.log" 2>&1 ||
        { cat "$BUILD.cmake.log"; exit 2; }
    rm -f "$BUILD.cmake.log"
    targets=()
    for h in "${HARNESSES[@]}"; do targets+=("fuzz_$h"); done
    cmake --build "$BUILD" -j"$(nproc)" --target "${targets[@]}" >"$BUILD/build.log" 2>&1 ||
        { tail -40 "$BUILD/build.log"; exit 2; }
fi

# Input sizes: patch lists and edit lists stay short; layout files and
# ELF files as big as the seeds need. -len_control=0 lets inputs reach
# that size at once: libFuzzer otherwise grows the limit with the number
# of executions, and at tens a second fuzz_memimage's inputs stayed under
# 8 + 12 bytes, its header and one patch, for an hour.
declare -A MAXLEN=([memimage]=512 [core]=256 [layout]=16384 [dwarf]=32768 [snapshot]=512 [sample]=512
                   [objects]=1024 [heappage]=1024 [native]=8192)
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1:abort_on_error=0:malloc_context_size=5:quarantine_size_mb=32}
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && command -v llvm-symbolizer >/dev/null 2>&1; then
    export ASAN_SYMBOLIZER_PATH=$(command -v llvm-symbolizer)
fi
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The recorded image must still carry every page today's readers touch,
# else the harnesses fuzz only the first steps of each operation.
if [[ " ${HARNESSES[*]} " == *" memimage "* ]]; then
    # (Each operation's status line says "ok" or its failure; the values
    # an operation printed, "inspect" and "dumped", are not statuses.)
    stale=$(RBPEEK_FUZZ_VERBOSE=1 "$BUILD/fuzz/fuzz_memimage" tests/fuzz/corpus/memimage/all 2>&1 |
            grep '^fuzz: ' | grep -v ' ok ' | grep -Ev '^fuzz: (inspect|dumped) ' || true)
    if [ -n "$stale" ]; then
        echo "fuzz: WARNING: the recorded image no longer serves every operation; make it again with"
        echo "      bash scripts/fuzz-record.sh (and commit tests/fuzz/data/ruby3.1.img.gz):"
        echo "$stale" | sed 's/^/      /'
    fi
fi

# The objects seeds build values as Ruby holds them: each must still print
# exactly, else the builder (objbuild.c) or a printer changed and the
# harness no longer reaches what it was made for.
if [[ " ${HARNESSES[*]} " == *" objects "* ]]; then
    # one process for all of them (libFuzzer names each file it runs)
    # (not the regress-* ones, which build what cannot print exactly)
    inexact=$(RBPEEK_FUZZ_VERBOSE=1 "$BUILD/fuzz/fuzz_objects" $(ls -d tests/fuzz/corpus/objects/* |
              grep -v '/regress-') 2>&1 |
              awk '/^Running: /{f=$2; n[f]=0} /^fuzz: p /{if (index($0, "\"exact\": true")) n[f]=1}
                   END{for (f in n) if (!n[f]) {sub(".*/", "", f); printf " %s", f}}')
    if [ -n "$inexact" ]; then
        echo "fuzz: WARNING: these objects seeds no longer print exactly (RBPEEK_FUZZ_VERBOSE=1 shows what they print):"
        echo "     $inexact"
    fi
fi

# Known defects being fixed elsewhere (see the file) are not findings.
SUPP=tests/fuzz/known-defects.supp
if grep -q '^[a-z]' "$SUPP" 2>/dev/null; then
    export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$PWD/$SUPP:print_suppressions=0}
    echo "fuzz: known defects not counted as findings: $(grep '^[a-z]' "$SUPP" | tr '\n' ' ')"
fi
total=0
failed=0
run_one() {
    local h=$1 corpus=$BUILD/corpus/$1 findings=$BUILD/findings/$1
    mkdir -p "$corpus" "$findings"
    # The grown corpus first (new inputs are written there), then the
    # committed seeds, which are only read.
    # Its exit status is the finding's first sign: taken with || so that
    # set -e does not end this (sub)shell before it is written down.
    local rc=0
    nice -n "${FUZZ_NICE:-10}" "$BUILD/fuzz/fuzz_$h" -max_total_time="$SECONDS_EACH" -timeout="${FUZZ_TIMEOUT:-60}" -rss_limit_mb=2048 \
        -max_len="${MAXLEN[$h]}" -len_control=0 -seed="${FUZZ_SEED:-0}" -runs="${FUZZ_RUNS:--1}" -print_final_stats=1 -artifact_prefix="$findings/" \
        "$corpus" "tests/fuzz/corpus/$h" >"$findings/fuzz.log" 2>&1 || rc=$?
    echo "$rc" >"$findings/exit"
}
if [ -n "$PARALLEL" ]; then
    for h in "${HARNESSES[@]}"; do run_one "$h" & done
    wait
else
    for h in "${HARNESSES[@]}"; do run_one "$h"; done
fi
for h in "${HARNESSES[@]}"; do
    findings=$BUILD/findings/$h
    log=$findings/fuzz.log
    rc=$(cat "$findings/exit" 2>/dev/null || echo "unknown")
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    execs=${execs:-0}
    total=$((total + execs))
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    # slow-unit-* files are libFuzzer's notes of inputs over 10 s of wall clock
    # (a loaded machine makes them): kept, but not findings; timeout-* are.
    found=$(find "$findings" -maxdepth 1 -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \
        -o -name 'oom-*' \) | wc -l)
    if [ "$rc" = 72 ] && [ "$found" -eq 0 ]; then
        # libFuzzer's status when SIGINT or SIGTERM stopped it early
        echo "fuzz: $h: $execs executions (${rate:-?}/s), stopped early (interrupted), no findings"
    elif [ "$rc" != 0 ] || [ "$found" -ne 0 ]; then
        failed=1
        echo "fuzz: $h: $execs executions (${rate:-?}/s), FINDING (exit $rc, $found input(s) in $findings):"
        grep -E "ERROR: |SUMMARY: |runtime error|Test unit written" "$log" | head -8 | sed 's/^/    /'
    else
        echo "fuzz: $h: $execs executions (${rate:-?}/s), no findings, corpus $(ls "$BUILD/corpus/$h" | wc -l) inputs"
    fi
done
echo "fuzz: $total executions in total; $([ $failed = 0 ] && echo "no findings" || echo "FINDINGS, see $BUILD/findings/")"
exit $failed
