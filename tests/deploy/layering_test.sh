#!/usr/bin/env bash
# The library layering is a fact of the build (CMakeLists.txt: convoy_forbid_links), checked three ways:
#   1. the built binaries need (DT_NEEDED) none of what their layer forbids: convoy_sim and the simulator
#      tests no LibTorch, gRPC, OpenSSL or Protobuf; the parameter-server core's tests no gRPC; the metrics
#      tests no LibTorch and no gRPC;
#   2. the configure step refuses a forbidden edge (a probe links gRPC into convoy_base and must fail);
#   3. docs/architecture.md shows the graph the build generates (build/library_graph.mmd).
# Usage: layering_test.sh SOURCE_DIR BUILD_DIR CONVOY_SIM SIM_TEST PS_CORE_TEST METRICS_TEST
set -euo pipefail
src=$1 build=$2 sim=$3 sim_test=$4 ps_core_test=$5 metrics_test=$6
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

# $1 binary, $2 what its layer forbids, $3 the regular expression of those libraries.
forbid() {
  local found
  found=$(needed "$1" | grep -E "$3" || true)
  if [ -n "$found" ]; then
    fail "$(basename "$1") must not link $2, but needs: $(echo "$found" | tr '\n' ' ')"
  else
    echo "ok: $(basename "$1") needs no $2"
  fi
}
# Sanity: the expression does find what is there (a binary that does link them).
needed "$sim" | grep -q '^libglog' || fail "readelf shows no libglog in $(basename "$sim"): the check cannot see"

torch='^lib(torch|c10)' grpc='^lib(grpc|gpr)' openssl='^lib(ssl|crypto)\.' protobuf='^libprotobuf'
for binary in "$sim" "$sim_test"; do
  forbid "$binary" LibTorch "$torch"
  forbid "$binary" gRPC "$grpc"
  forbid "$binary" OpenSSL "$openssl"
  forbid "$binary" Protobuf "$protobuf"
done
forbid "$ps_core_test" gRPC "$grpc"
forbid "$metrics_test" LibTorch "$torch"
forbid "$metrics_test" gRPC "$grpc"

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
