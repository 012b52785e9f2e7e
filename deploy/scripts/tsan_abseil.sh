# shellcheck shell=bash
# Abseil built with ThreadSanitizer for ./convoy test --sanitize=thread (docs/testing.md).
# Sourced by ./convoy (which defines log, ROOT, RELEASE, KNOWN_RELEASES, JOBS and CLANG_VERSION); defines
# functions only.

# Abseil built with ThreadSanitizer, for build-tsan. Debian's libabsl is not instrumented, so TSan would not
# see the happens-before edges absl::Mutex creates. This builds the same source as the installed libabsl-dev
# (Debian's orig tarball and patches, fetched with a private apt state under the build tree from the deb-src
# counterparts of the machine's own apt sources; the system's apt configuration is not touched) with clang and
# -fsanitize=thread, static, into $1/_deps/absl-tsan. It is rebuilt only when libabsl-dev's version changes.
build_tsan_abseil() {
  local deps="$1/_deps" version
  local prefix="$deps/absl-tsan" src="$deps/absl-src"
  version="$(dpkg-query -W -f='${Version}' libabsl-dev)"
  if [ -f "$prefix/.built" ] && [ "$(cat "$prefix/.built")" = "$version" ]; then return 0; fi
  log "building Abseil $version with ThreadSanitizer into $prefix (once)"
  rm -rf "$src" "$deps/absl-build" "$prefix"
  mkdir -p "$src/lists/partial" "$src/cache/archives/partial"
  # Where this machine's apt reads its sources (apt-config knows any override of the defaults).
  local list=/etc/apt/sources.list parts=/etc/apt/sources.list.d/
  eval "$(apt-config shell list Dir::Etc::SourceList/f parts Dir::Etc::SourceParts/d)"
  apt_deb_src_sources "$list" "$parts"*.list "$parts"*.sources >"$src/deb-src.sources"
  if [ ! -s "$src/deb-src.sources" ]; then
    log "no deb entries in $list or $parts to fetch Abseil's source from"
    exit 1
  fi
  local apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$src"
    -o "Dir::State::Lists=$src/lists" -o "Dir::Cache=$src/cache")
  # As root, apt would try its _apt download user, which cannot write under the build tree, and warn.
  if [ "$(id -u)" -eq 0 ]; then apt_opts+=(-o APT::Sandbox::User=root); fi
  apt-get "${apt_opts[@]}" -qq update
  # Verified by apt against the signed index; dpkg-source unpacks it and applies Debian's patches.
  if ! (cd "$src" && apt-get "${apt_opts[@]}" -qq source "abseil=$version" >/dev/null); then
    log "Debian's archive no longer has the source of abseil $version: upgrade libabsl-dev and run this again"
    exit 1
  fi
  local tree
  tree="$(find "$src" -mindepth 1 -maxdepth 1 -type d -name 'abseil-*' | head -n 1)"
  [ -n "$tree" ] || { log "apt-get source abseil=$version unpacked nothing"; exit 1; }
  cmake -S "$tree" -B "$deps/absl-build" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_COMPILER="clang++-$CLANG_VERSION" -DCMAKE_CXX_FLAGS=-fsanitize=thread \
    -DCMAKE_CXX_STANDARD=17 -DABSL_PROPAGATE_CXX_STD=ON \
    -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DBUILD_TESTING=OFF -DABSL_BUILD_TESTING=OFF -DABSL_ENABLE_INSTALL=ON \
    -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
  cmake --build "$deps/absl-build" -j "$JOBS"
  cmake --install "$deps/absl-build" >/dev/null
  echo "$version" >"$prefix/.built"
}
