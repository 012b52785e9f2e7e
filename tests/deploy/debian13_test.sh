#!/usr/bin/env bash
# convoy on Debian 13 (trixie): a root made with debootstrap from the archive of this machine's own apt sources,
# ./convoy's Debian 13 package set installed there by ./convoy itself, the tree built there (LibTorch 2.6,
# Catch2 v3, GCC 14, -Werror) and its tests run there.
#
#   debian13_test.sh <repository root> [ctest args]     build, then ctest (the default selection below)
#   debian13_test.sh <repository root> --run CMD...    build, then run CMD in the root's /src instead
#
# The default selection is every test that needs neither root networking, Slurm nor podman: all but the `cluster`,
# `slurm` and `containers` labels, the fuzz run (the sanitizer builds have their own entry points) and this test.
#
# Cached between runs under $CONVOY_DEBIAN13_CACHE (default /var/cache/convoy/debian13), so only the first
# run downloads: the minbase root as a tarball, the root with the packages installed as a second one (named by
# the hash of the package list, so a changed table makes a new one), and a ccache of the root's compiler.
# Each run unpacks a fresh root from the cache and removes it at the end; the root's mounts live in a private
# mount namespace and its processes in a PID namespace, so none outlives the test. Exit 77 (CTest: skipped),
# naming why, where the root cannot be made: not root, no debootstrap or unshare, no Debian apt sources,
# too little disk, or the archive unreachable.
set -euo pipefail
REPO="$(cd "$1" && pwd)"
shift
CACHE="${CONVOY_DEBIAN13_CACHE:-/var/cache/convoy/debian13}"
SUITE=trixie

skip() { echo "debian13_test: SKIPPED: $*"; exit 77; }

[ "$(id -u)" -eq 0 ] || skip "needs root (debootstrap, chroot, mount namespaces)"
for tool in debootstrap unshare chroot tar git; do
  command -v "$tool" >/dev/null || skip "no $tool on this machine (Debian: apt-get install $tool)"
done
mkdir -p "$CACHE"
free_gb=$(($(df -Pk "$CACHE" | awk 'NR == 2 { print $4 }') / 1024 / 1024))
[ "$free_gb" -ge 12 ] || skip "only ${free_gb} GB free under $CACHE; the root, its packages and a build need 12"

# shellcheck source=/dev/null
source "$REPO/convoy"
source "$REPO/deploy/scripts/apt_sources.sh"
log() { echo "debian13_test: [$((SECONDS / 60))m$((SECONDS % 60))s] $*"; }
list=/etc/apt/sources.list
parts=/etc/apt/sources.list.d/
eval "$(apt-config shell list Dir::Etc::SourceList/f parts Dir::Etc::SourceParts/d)"
SOURCES="$(apt_release_sources "$SUITE" "$list" "$parts"*.list "$parts"*.sources)"
MIRROR="$(apt_release_mirror "$SUITE" <<<"$SOURCES")"
[ -n "$MIRROR" ] || skip "this machine's apt sources ($list, $parts) have no Debian $RELEASE entry to derive $SUITE's from"
PACKAGES="$(packages_for "$SUITE" build train test)"
PACKAGES_KEY="$(printf '%s\n%s\n' "$SOURCES" "$PACKAGES" | sha256sum | cut -c1-16)"

T="$(mktemp -d "$CACHE/run.XXXXXX")"
cleanup() {
  # The mounts were private to the namespace and died with it; what is left is files.
  rm -rf --one-file-system "$T"
}
trap cleanup EXIT

# Runs "$@" chrooted in root $1, in new mount and PID namespaces: /proc, /sys, /dev and the ccache mounted
# there, the host's resolver for apt, nothing left mounted or running afterwards.
in_root() {
  local root="$1"
  shift
  mkdir -p "$CACHE/ccache" "$root/ccache"
  cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
  unshare --mount --pid --fork --kill-child --propagation private bash -c '
    set -e
    root="$1"; ccache="$2"; shift 2
    # The root a mount point of its own, as / is on a machine: ip netns (the cluster harness) needs that.
    mount --bind "$root" "$root"
    mount -t proc proc "$root/proc"
    mount --rbind /sys "$root/sys"
    mount --rbind /dev "$root/dev"
    mount --bind "$ccache" "$root/ccache"
    mount -t tmpfs -o size=4g tmpfs "$root/tmp"
    # A CUDA toolkit of the host, read-only, for the compile check of the CUDA path (agent/learning/CMakeLists.txt).
    if [ -d /usr/local/cuda/include ]; then
      mkdir -p "$root/usr/local/cuda"
      mount --rbind -o ro "$(readlink -f /usr/local/cuda)" "$root/usr/local/cuda"
    fi
    exec chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
      CCACHE_DIR=/ccache CONVOY_JOBS="${CONVOY_JOBS:-}" "$@"' in_root "$root" "$CACHE/ccache" "$@"
}

# The cached tarballs are made under a lock, so two runs do not make them at once.
exec 9>"$CACHE/.lock"
flock 9
BASE="$CACHE/minbase-$SUITE.tar"
if [ ! -f "$BASE" ]; then
  status=0
  make_minbase_tar "$SUITE" "$BASE" || status=$?
  [ "$status" -eq 0 ] || skip "debootstrap of $SUITE from $MIRROR failed (the archive unreachable?); its log ends above"
fi
ROOTFS="$CACHE/convoy-$SUITE-$PACKAGES_KEY.tar"
if [ ! -f "$ROOTFS" ]; then
  log "installing ./convoy's $SUITE packages in the root (once per package list)"
  root="$T/packages"
  mkdir -p "$root"
  tar -C "$root" -xf "$BASE"
  # A / of 0700 (tarballs cached before make_minbase_tar set 0755) shuts every user but root out of the root:
  # munge's set-up then fails to run /bin/sh as munge, and the install with it.
  chmod 755 "$root"
  mkdir -p "$root/src"
  cp "$REPO/convoy" "$root/src/convoy"
  if ! in_root "$root" bash -c 'source /src/convoy && install_missing train test'; then
    skip "apt could not install ./convoy's $SUITE packages in the root (the archive unreachable?)"
  fi
  rm -rf "$root/src" "$root/var/cache/apt/archives/"*.deb "$root/var/lib/apt/lists/"*_Packages
  tar -C "$root" -cf "$ROOTFS.part" . && mv "$ROOTFS.part" "$ROOTFS"
  find "$CACHE" -maxdepth 1 -name "convoy-$SUITE-*.tar" ! -name "$(basename "$ROOTFS")" -delete
  rm -rf --one-file-system "$root"
fi
flock -u 9

log "a fresh root from $(basename "$ROOTFS"), the tree as it is in /src"
root="$T/root"
mkdir -p "$root"
tar -C "$root" -xf "$ROOTFS"
chmod 755 "$root"
mkdir -p "$root/src"
(cd "$REPO" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf -) | tar -C "$root/src" -xf -
grep -q "VERSION_CODENAME=$SUITE" "$root/etc/os-release" || { echo "debian13_test: the root is not $SUITE"; exit 1; }

if [ "${1:-}" = "--run" ]; then
  shift
  log "in the root: $*"
  in_root "$root" bash -c 'cd /src && "$@"' run "$@"
  exit
fi
log "building in the root (./convoy build, -Werror)"
in_root "$root" bash -c 'cd /src && CONVOY_BUILD_DIR=/build ./convoy build -DCONVOY_WERROR=ON >/build.log 2>&1' ||
  { tail -n 80 "$root/build.log"; echo "debian13_test: the build failed in the $SUITE root"; exit 1; }
grep -E 'convoy: (LibTorch|Catch2)' "$root/build.log" || true
log "built; the tests"
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(-LE '^(cluster|slurm|containers)$' -E '^(fuzz:|deploy: Debian 13)')
in_root "$root" bash -c 'cd /build && ctest --output-on-failure --no-tests=error --timeout 1500 \
  -j "${CONVOY_JOBS:-2}" "$@"' ctest "${args[@]}"
log "done"
