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
for cmd in train test bench build help; do
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

# Every ctest call of the script refuses a selection that matches nothing.
calls="$(grep -c 'ctest --output-on-failure' "$REPO/convoy")"
refusing="$(grep -c 'ctest --output-on-failure --no-tests=error' "$REPO/convoy")"
[ "$calls" -ge 3 ] && [ "$calls" -eq "$refusing" ] || fail "$refusing of $calls ctest calls pass --no-tests=error"

[ "$failures" -eq 0 ] && echo "convoy_script_test: 1 passed, 0 failed" || exit 1
