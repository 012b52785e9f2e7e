#!/usr/bin/env bash
# The library layering is declared once (common/layering.cmake: convoy_forbid_links) and checked three ways:
#   1. the built binaries need (DT_NEEDED) none of what their rule forbids: the configure step lists each
#      executable's checks in BUILD_DIR/layering_checks.txt ("binary<TAB>rule<TAB>expression");
#   2. the configure step refuses a forbidden edge (a probe links gRPC into convoy_base and must fail);
#   3. docs/architecture.md shows the graph the build generates (build/library_graph.mmd).
# Usage: layering_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

checks="$build/layering_checks.txt"
[ -s "$checks" ] || fail "$checks is missing or empty: the configure step writes it"
checked=0
while IFS=$'\t' read -r binary rule expression; do
  [ -n "$binary" ] || continue
  # Sanity: readelf does see what a binary links (every convoy binary links glog).
  needed "$binary" | grep -q '^libglog' || fail "readelf shows no libglog in $(basename "$binary"): the check cannot see"
  found=$(needed "$binary" | grep -E "$expression" || true)
  if [ -n "$found" ]; then
    fail "$(basename "$binary") must not link $rule, but needs: $(echo "$found" | tr '\n' ' ')"
  else
    echo "ok: $(basename "$binary") needs no $rule"
  fi
  checked=$((checked + 1))
done < <(cat "$checks" 2>/dev/null || true)
# The rules name convoy_sim (4 rules), the simulator's and the metrics' tests and the core's tests.
[ "$checked" -ge 15 ] || fail "only $checked binary checks in $checks; common/layering.cmake declares 15"

probe=$(mktemp -d /tmp/convoy_layering.XXXXXX)
trap 'rm -rf "$probe"' EXIT
if cmake -S "$src" -B "$probe" -DCONVOY_LAYERING_PROBE=ON >"$probe/configure.log" 2>&1; then
  fail "configuring with gRPC linked into convoy_base succeeded; the layering check did not run"
elif grep -q "layering: convoy_base must not link grpc" "$probe/configure.log"; then
  echo "ok: the configure step refuses convoy_base -> gRPC"
else
  fail "the probe configure failed for another reason:"; tail -20 "$probe/configure.log"
fi

generated="$build/library_graph.mmd"
documented=$(sed -n '/<!-- library-graph:begin -->/,/<!-- library-graph:end -->/p' "$src/docs/architecture.md" |
             sed '1,2d;$d' | sed '$d')
if [ ! -s "$generated" ]; then
  fail "$generated is missing: the configure step writes it"
elif [ "$documented" != "$(cat "$generated")" ]; then
  fail "docs/architecture.md's library graph differs from the build's; put $generated between its markers:"
  diff <(echo "$documented") "$generated" || true
else
  echo "ok: docs/architecture.md shows the build's library graph"
fi

[ "$failures" -eq 0 ]
