#!/usr/bin/env bash
# Builds the CRuby test matrix from Debian source packages into a cache
# outside the checkout ($RBPEEK_RUBIES, default /var/cache/rbpeek/rubies).
# Each build lands in <cache>/<name>/ and is stamped with its recipe (source,
# configure options, compiler flags). A build whose stamp matches is never
# redone; an interrupted one, or one made by another recipe, is.
#
# The builds run in two lanes at once, each `make -j$(nproc)`: configure and
# `make install` are mostly serial, so one build's serial parts run while the
# other compiles and neither CPU idles. Each build's wall time is printed.
#
# Compiler flags (docs/test-budget.md says what they change for the tests):
# Debian's own -O2 -g for all but 3.4.5, which keeps upstream's default -O3
# (what rbenv, ruby-build and asdf users run), both with plain -g: DWARF with
# types, without -ggdb3's macro tables that nothing reads. The shared 3.3.8
# and 3.4.5 are built with YJIT (Rust, compiled by rustc alone), as the
# Rubies that production Rails runs are: a test enables it with --yjit, and
# without it they interpret as before. The static 3.3.8 stays without.
#
# usage: build-rubies.sh [name ...]   names: 2.7.4 3.1.2 3.3.8 3.4.5 3.3.8-static
set -euo pipefail

CACHE=${RBPEEK_RUBIES:-/var/cache/rbpeek/rubies}
SRC=$CACHE/src
mkdir -p "$CACHE" "$SRC"

# name -> "source-package-spec tarball-prefix optflags configure-extra..."
O2="-O2 -fno-fast-math"
O3="-O3 -fno-fast-math"
declare -A SPEC=(
  [2.7.4]="ruby2.7=2.7.4-1+deb11u1 ruby2.7_2.7.4 O2 --enable-shared --with-out-ext=openssl"
  [3.1.2]="ruby3.1 ruby3.1_3.1.2 O2 --enable-shared"
  [3.3.8]="ruby3.3=3.3.8-2 ruby3.3_3.3.8 O2 --enable-shared --enable-yjit"
  [3.4.5]="ruby3.4=3.4.5-1~exp1 ruby3.4_3.4.5 O3 --enable-shared --enable-yjit"
  [3.3.8-static]="ruby3.3=3.3.8-2 ruby3.3_3.3.8 O2 --disable-shared --disable-yjit"
)
# Longest first, so that the two lanes end close together.
ALL=(3.4.5 3.3.8 3.3.8-static 3.1.2 2.7.4)

build_one() {
    local name=$1 spec pkg tarball opt extra prefix work recipe t0
    spec=${SPEC[$name]:?unknown ruby $name}
    read -r pkg tarball opt extra <<<"$spec"
    opt=${!opt}
    prefix=$CACHE/$name
    recipe="$pkg optflags=$opt debugflags=-g $extra --disable-install-doc"
    if [ -f "$prefix/.rbpeek-complete" ] && [ "$(cat "$prefix/.rbpeek-complete")" = "$recipe" ]; then
        echo "ruby $name: cached at $prefix"; return 0
    fi
    t0=$(date +%s)
    # apt-get source is not safe to run twice at once in one folder.
    (flock 9; ls "$SRC/$tarball".orig.tar.* >/dev/null 2>&1 || \
        (cd "$SRC" && apt-get source --download-only "$pkg" >/dev/null)) 9>"$SRC/.lock"
    rm -rf "$prefix"
    work=$(mktemp -d "$CACHE/build-$name.XXXX")
    tar -C "$work" -xf "$SRC/$tarball".orig.tar.* --strip-components=1
    echo "ruby $name: building in $work (log: $work/build.log)"
    # Each step chained with &&: the subshell's status is tested (||), and
    # bash ignores set -e in a tested context, so a failed step would
    # otherwise go on to the next one and the build be counted done.
    # shellcheck disable=SC2086  # $extra is a list of options
    (
        cd "$work" &&
        ./configure --prefix="$prefix" $extra --disable-install-doc \
            optflags="$opt" debugflags=-g &&
        make -j"$(nproc)" HAVE_BASERUBY=no &&
        # 2.7.4 stops at the default gems (they need openssl); ruby, libruby
        # and the standard library are installed by then, which is enough.
        { make install-nodoc HAVE_BASERUBY=no || [ -x "$prefix/bin/ruby" ]; } &&
        # The CPU the build took (its children's user and system time, the
        # second line of times; not in a pipe, whose subshell has no
        # children): on a loaded machine the wall time says little, this
        # says what it costs.
        times > "$work/cpu"
    ) > "$work/build.log" 2>&1 || { echo "ruby $name: build failed, see $work/build.log"; return 1; }
    if ! "$prefix/bin/ruby" -e 'exit(RUBY_VERSION.empty? ? 1 : 0)'; then
        echo "ruby $name: built, but $prefix/bin/ruby does not run; see $work/build.log"; return 1
    fi
    echo "$recipe" > "$prefix/.rbpeek-complete"
    echo "ruby $name: installed at $prefix in $(( $(date +%s) - t0 )) s (CPU user, system: $(sed -n 2p "$work/cpu"))"
    rm -rf "$work"
}

names=("$@"); [ ${#names[@]} -gt 0 ] || names=("${ALL[@]}")
# Two lanes: each takes the next name from the list as it finishes one.
queue=$(mktemp); printf '%s\n' "${names[@]}" > "$queue"
lane() {
    local rc=0 n
    while n=$( (flock 8; n=$(head -n1 "$queue"); sed -i 1d "$queue"; echo "$n") 8>"$queue.lock"); [ -n "$n" ]; do
        build_one "$n" || rc=1
    done
    return $rc
}
t0=$(date +%s)
rc=0
lane & l1=$!
lane & l2=$!
wait $l1 || rc=1
wait $l2 || rc=1
rm -f "$queue" "$queue.lock"
echo "ruby matrix: $(( $(date +%s) - t0 )) s"
exit $rc
