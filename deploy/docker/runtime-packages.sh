#!/usr/bin/env bash
# Prints, one a line, the Debian packages that hold the shared libraries the given binaries load: the runtime
# image installs exactly these. Libraries no package holds (a LibTorch unpacked under /opt) are listed on stderr.
#
#   deploy/docker/runtime-packages.sh build/bin/convoy_ps build/bin/convoy_agent ...
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }

mapfile -t libs < <(for bin in "$@"; do
  ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'
done | sort -u)

# /lib is a link to /usr/lib on Debian 12, and dpkg knows each file under one of the two names: ask for all.
variants() {
  local real
  real="$(readlink -f "$1")"
  printf '%s\n' "$1" "$real" "/usr$1" "/usr$real" "${1#/usr}" "${real#/usr}" | sort -u
}
declare -A owner_of=()
while IFS= read -r line; do
  pkg="${line%%: *}"
  owner_of["${line#*: }"]="${pkg%%:*}"
done < <(for lib in "${libs[@]}"; do variants "$lib"; done | xargs dpkg-query -S 2>/dev/null | grep -v '^diversion')

for lib in "${libs[@]}"; do
  found=""
  while IFS= read -r v; do
    if [ -n "${owner_of[$v]:-}" ]; then found="${owner_of[$v]}"; break; fi
  done < <(variants "$lib")
  if [ -n "$found" ]; then echo "$found"; else echo "not from a package: $lib" >&2; fi
done | sort -u
