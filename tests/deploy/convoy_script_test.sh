#!/usr/bin/env bash
# ./convoy's own interface, offline: help and unknown commands, and an unknown benchmark name, which is refused
# before anything is installed or built. (A test selection matching nothing is ctest's --no-tests=error.)
set -uo pipefail
REPO="$1"
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
failures=0
fail() { echo "convoy_script_test: FAIL: $*" >&2; failures=$((failures + 1)); }

"$REPO/convoy" help >"$T/help" 2>&1 || fail "./convoy help exited $?"
for cmd in train test bench build packages image help; do
  grep -q "\./convoy $cmd" "$T/help" || fail "./convoy help does not describe '$cmd'"
done
grep -q '^#' "$T/help" && fail "./convoy help prints comment lines of the script"

"$REPO/convoy" no_such_command >"$T/out" 2>"$T/err"
code=$?
[ "$code" -eq 2 ] || fail "an unknown command exited $code, not 2"
grep -q "unknown command 'no_such_command'" "$T/err" || fail "an unknown command is not named on stderr"
grep -q '\./convoy test' "$T/err" || fail "an unknown command does not print the usage"

"$REPO/convoy" bench no_such_bench >"$T/out" 2>"$T/err"
code=$?
[ "$code" -eq 2 ] || fail "an unknown benchmark exited $code, not 2"
grep -q "no benchmark matches 'no_such_bench'" "$T/err" || fail "an unknown benchmark is not named"
for b in convoy_bench_ps convoy_bench_sim convoy_bench_learn; do
  grep -q "$b" "$T/err" || fail "the list of benchmarks lacks $b"
done
grep -q "installing\|building" "$T/err" && fail "an unknown benchmark installed or built something first"

# The package table: each release's column, and a release it does not know named, with what to install by hand.
os_release() { printf 'PRETTY_NAME="%s"\nID=debian\nVERSION_CODENAME=%s\n' "$1" "$2" >"$T/os-release"; }
packages() { CONVOY_OS_RELEASE="$T/os-release" "$REPO/convoy" packages "$@" >"$T/out" 2>"$T/err"; }
os_release "Debian GNU/Linux 12 (bookworm)" bookworm
packages || fail "./convoy packages exited $? on bookworm"
grep -qw "clang-14" "$T/out" && grep -qw "libtorch-dev" "$T/out" || fail "bookworm's packages: $(cat "$T/out")"
[ -s "$T/err" ] && fail "./convoy packages warned on bookworm: $(cat "$T/err")"
grep -qw "python3-grpcio" "$T/out" && fail "the build packages include a test package"
packages test || fail "./convoy packages test exited $?"
grep -qw "python3-grpcio" "$T/out" && grep -qw "libtorch-dev" "$T/out" || fail "test packages: $(cat "$T/out")"
os_release "Debian GNU/Linux 13 (trixie)" trixie
packages || fail "./convoy packages exited $? on trixie"
grep -qw "clang-19" "$T/out" && grep -qw "libclang-rt-19-dev" "$T/out" || fail "trixie's packages: $(cat "$T/out")"
grep -qw "clang-14" "$T/out" && fail "trixie's packages name clang-14"
os_release "Debian GNU/Linux forky/sid" forky
packages || fail "./convoy packages exited $? on a release it does not know"
grep -q "Debian GNU/Linux forky/sid (forky)" "$T/err" || fail "an unknown release is not named: $(cat "$T/err")"
grep -q "trying trixie's package names" "$T/err" || fail "an unknown release does not say what it tries"
grep -q "install these or their equivalents by hand" "$T/err" || fail "an unknown release does not say what to install"
grep -qw "clang-19" "$T/out" || fail "an unknown release does not list the newest release's packages"
packages no_such_kind
code=$?
[ "$code" -eq 2 ] || fail "an unknown package kind exited $code, not 2"
grep -q "unknown package kind 'no_such_kind'" "$T/err" || fail "an unknown package kind is not named"

# ./convoy image refuses an unknown engine or release before building anything.
"$REPO/convoy" image --engine=no_such_engine >"$T/out" 2>"$T/err"
code=$?
[ "$code" -eq 2 ] || fail "an unknown image engine exited $code, not 2"
grep -q "unknown engine 'no_such_engine' (podman or docker)" "$T/err" || fail "an unknown engine is not named"
if command -v podman >/dev/null || command -v docker >/dev/null; then
  "$REPO/convoy" image --release=no_such_release >"$T/out" 2>"$T/err"
  code=$?
  [ "$code" -eq 2 ] || fail "an unknown image release exited $code, not 2"
  grep -q "no image for release 'no_such_release'" "$T/err" || fail "an unknown image release is not named"
fi
grep -q "build of\|importing\|debootstrap" "$T/err" && fail "a refused ./convoy image built or imported something"

# Every ctest call of the script refuses a selection that matches nothing.
calls="$(grep -c 'ctest --output-on-failure' "$REPO/convoy")"
refusing="$(grep -c 'ctest --output-on-failure --no-tests=error' "$REPO/convoy")"
[ "$calls" -ge 3 ] && [ "$calls" -eq "$refusing" ] || fail "$refusing of $calls ctest calls pass --no-tests=error"

[ "$failures" -eq 0 ] && echo "convoy_script_test: 1 passed, 0 failed" || exit 1
