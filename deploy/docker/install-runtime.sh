#!/bin/sh
# The runtime stage's packages: installs the Debian packages listed in $1 (those whose libraries the binaries
# load, from runtime-packages.sh), then removes what apt pulled in beside them that the binaries never load:
# every package that was not in the base image, is not listed and is not Essential. Debian's libtorch1.13, for
# one, depends on OpenCV, Qt, GDAL, Mesa and LLVM, which convoy's binaries do not load; removing them with
# dpkg --force-depends leaves their names as unmet dependencies of the listed packages (`apt-get -f install`
# in a derived image puts them back). Then every binary's libraries must resolve, or the build fails.
set -eu
listed="$1"
work="$(mktemp -d)"
dpkg-query -Wf '${Package}\n' | sort -u >"$work/base"
apt-get update
xargs -a "$listed" apt-get install -y --no-install-recommends
dpkg-query -Wf '${Package} ${Essential}\n' | awk '$2 != "yes" { print $1 }' | sort -u >"$work/installed"
sort -u "$work/base" "$listed" >"$work/keep"
comm -23 "$work/installed" "$work/keep" >"$work/unloaded"
if [ -s "$work/unloaded" ]; then
  echo "removing $(wc -l <"$work/unloaded") packages the binaries do not load: $(tr '\n' ' ' <"$work/unloaded")"
  xargs -a "$work/unloaded" dpkg --purge --force-depends
fi
rm -rf "$work" /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb /var/log/apt \
  /var/log/dpkg.log
