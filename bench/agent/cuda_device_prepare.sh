#!/usr/bin/env bash
# Prepares, on a Debian 12 machine with network access, what bench/agent/cuda_device_run.sh needs on a GPU
# machine that has a CUDA LibTorch (pip's torch) but none of convoy's other dependencies and no network:
#   debs/  the Debian 12 packages of Abseil, glog (with gflags and libunwind), Catch2, OpenSSL's libcrypto
#          and ISA-L, for the run script to unpack into a prefix (they are Debian's builds, so they work where
#          the GPU machine's glibc is as new as Debian 12's and its torch uses the C++11 string ABI);
#   src/   Abseil's and glog's sources at the same versions, Debian's patches applied, for the run script to
#          build where the packages do not work (an older glibc, or a torch built with the old string ABI).
# Everything comes through this machine's own apt configuration: the packages with `apt-get download`, the
# sources with `apt-get source` from the deb-src counterparts of its apt sources (./convoy's
# apt_deb_src_sources), read through a private apt state under the output directory, so the system's apt
# configuration and state are not touched. No archive is named here.
#
# Usage: bench/agent/cuda_device_prepare.sh [OUTPUT_DIR]   (default build-device/, ignored by git)
# At its end it prints the paths to carry to the GPU machine and the command to run there.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# ./convoy's helpers (os_release_field, apt_deb_src_sources, log); sourcing it runs nothing.
# shellcheck source=/dev/null
source "$REPO/convoy"
source "$REPO/deploy/scripts/apt_sources.sh"
OUTPUT="${1:-$REPO/build-device}"
# What the GPU machine may receive in all (the device tool's limit on carried paths).
CARRY_LIMIT_BYTES=$((64 * 1024 * 1024))

# The packages: Abseil and glog with what glog's CMake package needs (gflags, libunwind, and liblzma below
# libunwind), Catch2 v2 (headers and CMake files), and libcrypto's headers and library (convoy_digest).
PACKAGES=(libabsl-dev libabsl20220623 libgoogle-glog-dev libgoogle-glog0v6 libgflags-dev libgflags2.2
  libunwind-dev libunwind8 liblzma5 catch2 libssl-dev libssl3 libisal-dev libisal2)
# The source packages built when the binary packages do not work there: glog without gflags and libunwind.
SOURCE_OF=(libabsl-dev libgoogle-glog-dev)

release="$(os_release_field VERSION_CODENAME)"
if [ "$release" != bookworm ]; then
  log "this machine is '${release:-unknown}', not Debian 12 (bookworm): the packages above are bookworm's names,"
  log "and the run script expects bookworm's versions (Abseil 20220623, glog 0.6, Catch2 2.13, OpenSSL 3.0)"
  exit 1
fi
for tool in apt-get apt-config dpkg-deb dpkg-source; do
  command -v "$tool" >/dev/null || { log "$tool is missing (dpkg-dev has dpkg-source)"; exit 1; }
done

rm -rf "$OUTPUT/debs" "$OUTPUT/src" "$OUTPUT/apt"
mkdir -p "$OUTPUT/debs" "$OUTPUT/src" "$OUTPUT/apt/lists/partial" "$OUTPUT/apt/cache/archives/partial"
apt_root=()
# As root, apt would hand the download to its _apt user, which cannot write under the output directory.
if [ "$(id -u)" -eq 0 ]; then apt_root=(-o APT::Sandbox::User=root); fi

log "downloading ${#PACKAGES[@]} Debian packages into $OUTPUT/debs"
(cd "$OUTPUT/debs" && apt-get "${apt_root[@]}" -qq download "${PACKAGES[@]}")

# The deb-src entries of this machine's apt sources, read by a private apt state (./convoy does the same for
# its ThreadSanitizer Abseil).
list=/etc/apt/sources.list parts=/etc/apt/sources.list.d/
eval "$(apt-config shell list Dir::Etc::SourceList/f parts Dir::Etc::SourceParts/d)"
apt_deb_src_sources "$list" "$parts"*.list "$parts"*.sources >"$OUTPUT/apt/deb-src.sources"
if [ ! -s "$OUTPUT/apt/deb-src.sources" ]; then
  log "no deb entries in $list or $parts to fetch the sources from"
  exit 1
fi
apt_private=("${apt_root[@]}" -o Dir::Etc::SourceList=/dev/null -o "Dir::Etc::SourceParts=$OUTPUT/apt"
  -o "Dir::State::Lists=$OUTPUT/apt/lists" -o "Dir::Cache=$OUTPUT/apt/cache")
apt-get "${apt_private[@]}" -qq update

for package in "${SOURCE_OF[@]}"; do
  deb=$(ls "$OUTPUT/debs/${package}_"*.deb)
  version=$(dpkg-deb -f "$deb" Version)
  # The Source field is absent when the source package has the binary's name, and may carry a version.
  source=$(dpkg-deb -f "$deb" Source | awk '{print $1}')
  source=${source:-$package}
  log "fetching the source of $source $version (of $package)"
  work="$OUTPUT/apt/source-$source"
  mkdir -p "$work"
  # apt checks every file against the signed index as it downloads it; dpkg-source then applies Debian's
  # patches, without its own check of the maintainer's signature (the keyring is not installed here).
  (cd "$work" && apt-get "${apt_private[@]}" -qq source --download-only "$source=$version" >/dev/null)
  dsc=$(ls "$work"/*.dsc)
  (cd "$work" && dpkg-source --no-check -x "$dsc" tree >/dev/null)
  upstream=${version#*:}
  upstream=${upstream%-*}
  # The patched tree, as the run script unpacks it with tar alone (no dpkg-source or patch there).
  tar -C "$work" --transform "s,^tree,$source-$upstream," --exclude=tree/.pc -czf \
    "$OUTPUT/src/$source-$upstream.tar.gz" tree
  cp "$dsc" "$OUTPUT/src/"
done
rm -rf "$OUTPUT/apt"

{
  echo "# What bench/agent/cuda_device_prepare.sh fetched on $(date -u +%Y-%m-%dT%H:%MZ) ($(os_release_field PRETTY_NAME))"
  for deb in "$OUTPUT"/debs/*.deb; do
    echo "deb $(dpkg-deb -f "$deb" Package) $(dpkg-deb -f "$deb" Version)"
  done
  for tarball in "$OUTPUT"/src/*.tar.gz; do echo "src $(basename "$tarball")"; done
  echo "# sha256"
  (cd "$OUTPUT" && sha256sum debs/* src/*)
} >"$OUTPUT/MANIFEST"

bytes=$(du -sb "$OUTPUT" | cut -f1)
log "$OUTPUT holds $((bytes / 1024)) KiB: $(find "$OUTPUT/debs" -name '*.deb' | wc -l) packages, $(find "$OUTPUT/src" -name '*.tar.gz' | wc -l) source trees"
if [ "$bytes" -ge "$CARRY_LIMIT_BYTES" ]; then
  log "that is over the $((CARRY_LIMIT_BYTES / 1024 / 1024)) MiB a GPU machine may receive"
  exit 1
fi
relative=${OUTPUT#"$REPO"/}
if [ "$relative" = "$OUTPUT" ]; then
  log "note: $OUTPUT is outside the checkout; the run script finds it through CONVOY_DEVICE_DEPS"
fi
echo "carry: [\"$relative\"]"
echo "command: bash bench/agent/cuda_device_run.sh"
