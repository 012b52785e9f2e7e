#!/usr/bin/env bash
# deploy/scripts/apt_sources.sh's apt_deb_src_sources: the deb-src entries of the TSan Abseil build come from
# the machine's own apt sources, one-line and deb822 alike, and neither ./convoy, its scripts nor the
# Dockerfile names an archive's host.
# Usage: apt_sources_test.sh <repository root>
set -euo pipefail
ROOT="$1"
# shellcheck source=/dev/null
source "$ROOT/convoy"
source "$ROOT/deploy/scripts/apt_sources.sh"

T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
failures=0
check() {  # check NAME EXPECTED ACTUAL
  if [ "$2" != "$3" ]; then
    echo "FAIL: $1"
    diff <(printf '%s\n' "$2") <(printf '%s\n' "$3") || true
    failures=$((failures + 1))
  else
    echo "ok: $1"
  fi
}

cat >"$T/sources.list" <<'LIST'
# A comment, and a deb-src line that is left alone.
deb file:/srv/archive/debian bookworm main contrib   # trailing comment
deb-src file:/srv/archive/debian bookworm main
  deb [arch=amd64 signed-by=/usr/share/keyrings/site.gpg] file:/srv/mirror/debian bookworm-updates main
deb [ trusted=yes ] file:/srv/local-repo ./
#deb file:/srv/disabled/debian bookworm main
LIST
check "one-line entries become deb-src with their URI, suite, components and signed-by" \
"Types: deb-src
URIs: file:/srv/archive/debian
Suites: bookworm
Components: main contrib

Types: deb-src
URIs: file:/srv/mirror/debian
Suites: bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/site.gpg

Types: deb-src
URIs: file:/srv/local-repo
Suites: ./
Trusted: yes" "$(apt_deb_src_sources "$T/sources.list")"

cat >"$T/site.sources" <<'SOURCES'
Types: deb
# A comment inside a stanza.
URIs: file:/srv/archive/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb deb-src
URIs: file:/srv/proxy/debian-security
Suites: bookworm-security
Components: main non-free-firmware
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 mQINBF
 -----END PGP PUBLIC KEY BLOCK-----

Types: deb-src
URIs: file:/srv/only-source/debian
Suites: bookworm
Components: main

Types: deb
Enabled: no
URIs: file:/srv/off/debian
Suites: bookworm
Components: main
SOURCES
check "deb822 stanzas with deb become deb-src, fields (a multi-line key too) kept" \
"Types: deb-src
URIs: file:/srv/archive/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: file:/srv/proxy/debian-security
Suites: bookworm-security
Components: main non-free-firmware
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 mQINBF
 -----END PGP PUBLIC KEY BLOCK-----" "$(apt_deb_src_sources "$T/site.sources")"

check "missing files (an unmatched glob) are skipped" "" \
  "$(apt_deb_src_sources "$T/none.list" "$T/parts/*.sources")"

# The same machine's archive for another release (the Debian 13 root): only the release's own suites, renamed.
RELEASE=bookworm
check "deb entries of this release become the other release's, other suites and sources left out" \
"Types: deb
URIs: file:/srv/archive/debian
Suites: trixie
Components: main contrib

Types: deb
URIs: file:/srv/mirror/debian
Suites: trixie-updates
Components: main
Signed-By: /usr/share/keyrings/site.gpg

Types: deb
URIs: file:/srv/archive/debian
Suites: trixie trixie-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: file:/srv/proxy/debian-security
Suites: trixie-security
Components: main non-free-firmware
Signed-By:
 -----BEGIN PGP PUBLIC KEY BLOCK-----
 .
 mQINBF
 -----END PGP PUBLIC KEY BLOCK-----" "$(apt_release_sources trixie "$T/sources.list" "$T/site.sources")"
check "debootstrap's mirror is the entry holding the release itself" "file:/srv/archive/debian" \
  "$(apt_release_sources trixie "$T/sources.list" "$T/site.sources" | apt_release_mirror trixie)"

# A private apt state like build_tsan_abseil's reads what the function writes: apt parses it and would fetch
# the source indexes of each entry (--print-uris fetches nothing).
if command -v apt-get >/dev/null; then
  mkdir -p "$T/parts" "$T/lists/partial" "$T/cache/archives/partial"
  apt_deb_src_sources "$T/sources.list" "$T/site.sources" >"$T/parts/deb-src.sources"
  apt_opts=(-o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$T/parts"
    -o "Dir::State::Lists=$T/lists" -o "Dir::Cache=$T/cache")
  if [ "$(id -u)" -eq 0 ]; then apt_opts+=(-o APT::Sandbox::User=root); fi
  uris="$(apt-get "${apt_opts[@]}" --print-uris update 2>&1 || true)"
  for want in "/srv/archive/debian/dists/bookworm/main/source/Sources" \
              "/srv/mirror/debian/dists/bookworm-updates/main/source/Sources" \
              "/srv/proxy/debian-security/dists/bookworm-security/non-free-firmware/source/Sources"; do
    check "apt reads the derived entry for $want" "yes" "$(grep -q "$want" <<<"$uris" && echo yes || echo "no: $uris")"
  done
fi

# No archive or registry host in the build scripts or the image's recipe: apt uses the machine's sources.
if grep -nE 'https?://' "$ROOT/convoy" "$ROOT"/deploy/scripts/*.sh "$ROOT/deploy/docker/Dockerfile"; then
  echo "FAIL: ./convoy, its scripts or the Dockerfile name a host"; failures=$((failures + 1))
else
  echo "ok: ./convoy, its scripts and the Dockerfile name no host"
fi

[ "$failures" -eq 0 ]
