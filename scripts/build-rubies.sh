#!/usr/bin/env bash
# Builds the CRuby test matrix from Debian source packages into a cache
# outside the checkout ($RBPEEK_RUBIES, default /var/cache/rbpeek/rubies).
# Each build lands in <cache>/<name>/ and is marked complete with a stamp
# file, so an interrupted build is redone and a finished one is never redone.
#
# usage: build-rubies.sh [name ...]   names: 2.7.4 3.1.2 3.3.8 3.4.5 3.3.8-static
set -euo pipefail

CACHE=${RBPEEK_RUBIES:-/var/cache/rbpeek/rubies}
SRC=$CACHE/src
mkdir -p "$CACHE" "$SRC"

# name -> "source-package-spec tarball-prefix configure-extra"
declare -A SPEC=(
  [2.7.4]="ruby2.7=2.7.4-1+deb11u1 ruby2.7_2.7.4 --enable-shared --with-out-ext=openssl"
  [3.1.2]="ruby3.1 ruby3.1_3.1.2 --enable-shared"
  [3.3.8]="ruby3.3=3.3.8-2 ruby3.3_3.3.8 --enable-shared"
  [3.4.5]="ruby3.4=3.4.5-1~exp1 ruby3.4_3.4.5 --enable-shared"
  [3.3.8-static]="ruby3.3=3.3.8-2 ruby3.3_3.3.8 --disable-shared"
)
ALL=(3.1.2 3.4.5 3.3.8 2.7.4 3.3.8-static)

build_one() {
    local name=$1 spec pkg tarball extra prefix work
    spec=${SPEC[$name]:?unknown ruby $name}
    read -r pkg tarball extra <<<"$spec"
    prefix=$CACHE/$name
    [ -f "$prefix/.rbpeek-complete" ] && { echo "ruby $name: cached at $prefix"; return 0; }
    ls "$SRC/$tarball".orig.tar.* >/dev/null 2>&1 || \
        (cd "$SRC" && apt-get source --download-only "$pkg" >/dev/null)
    work=$(mktemp -d "$CACHE/build-$name.XXXX")
    tar -C "$work" -xf "$SRC/$tarball".orig.tar.* --strip-components=1
    echo "ruby $name: building in $work (log: $work/build.log)"
    (
        cd "$work"
        ./configure --prefix="$prefix" $extra --disable-install-doc
        make -j"$(nproc)" HAVE_BASERUBY=no
        # 2.7.4 stops at the default gems (they need openssl); ruby, libruby
        # and the standard library are installed by then, which is enough.
        make install-nodoc HAVE_BASERUBY=no || [ -x "$prefix/bin/ruby" ]
    ) > "$work/build.log" 2>&1 || { echo "ruby $name: build failed, see $work/build.log"; return 1; }
    "$prefix/bin/ruby" -e 'exit(RUBY_VERSION.empty? ? 1 : 0)'
    touch "$prefix/.rbpeek-complete"
    rm -rf "$work"
    echo "ruby $name: installed at $prefix"
}

names=("$@"); [ ${#names[@]} -gt 0 ] || names=("${ALL[@]}")
rc=0
for n in "${names[@]}"; do build_one "$n" || rc=1; done
exit $rc
