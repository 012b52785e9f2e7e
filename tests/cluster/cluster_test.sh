#!/usr/bin/env bash
# The cluster harness itself (tests/cluster/cluster.sh), on three nodes with 200 Mbit/s links:
#   - each node has its own hostname and address, and reaches the others through the bridge;
#   - iperf3 between two nodes measures the configured rate within +-15% (check-links);
#   - a link taken down fails a transfer at once on the cut-off node; a silent one makes it hang until its
#     deadline with nothing said; after each, heal brings the transfer back;
#   - down removes every namespace, link, mount and state file, also what a killed run left without its
#     state file.
#   - Slurm on the nodes (slurm-up): sinfo shows them idle; srun from this namespace runs on each and its
#     output comes back; a step runs in its node's namespaces; a batch job's srun reaches its other node;
#     slurm-down leaves no daemon.
# Needs root; without it, network namespaces, iperf3, slurm-wlm or munge it exits 77 (CTest: Skipped), saying
# why.
set -uo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
CLUSTER="$HERE/cluster.sh"
PROBE="$HERE/probe.py"
NAME=cvtest

say() { printf 'cluster_test: %s\n' "$*"; }
failures=0
check() {
  if eval "$2"; then say "ok: $1"; else say "FAIL: $1"; failures=$((failures + 1)); fi
}

# shellcheck source=tests/cluster/test_lib.sh
. "$HERE/test_lib.sh"
require_cluster iperf3 slurmctld slurmd munged

LISTENER=""
cleanup() {
  local rc=$?
  [ -n "$LISTENER" ] && kill "$LISTENER" 2>/dev/null
  if [ "$rc" -ne 0 ]; then
    print_tails 20 /run/convoy-cluster/"$NAME"/slurm/log/*
  fi
  "$CLUSTER" down --name="$NAME" >/dev/null 2>&1
  exit "$rc"
}
trap cleanup EXIT

# What is left of NAME on this machine: namespaces, links, state. Empty when nothing is.
leftovers() {
  {
    ip netns list | awk '{print $1}' | grep -E "^${NAME}-" || true
    ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -E "^${NAME}-" || true
    [ -e "/run/convoy-cluster/$NAME" ] && echo "/run/convoy-cluster/$NAME"
    grep -F "/run/convoy-cluster/$NAME/" /proc/self/mountinfo || true
  } 2>/dev/null
}

"$CLUSTER" down --name="$NAME" >/dev/null 2>&1  # An earlier, killed run of this test.
"$CLUSTER" up 3 --link=200mbit --name="$NAME" || { say "FAIL: up"; exit 1; }
node() { "$CLUSTER" --name="$NAME" exec "$@"; }
A0=$("$CLUSTER" --name="$NAME" addr 0)

check "every node has its own hostname" \
  '[ "$(node 0 hostname)" = "$NAME-0" ] && [ "$(node 1 hostname)" = "$NAME-1" ] && [ "$(node 2 hostname)" = "$NAME-2" ] && [ "$(hostname)" != "$NAME-0" ]'
check "every node has its own address, and only its veth and lo" \
  '[ "$(node 2 ip -4 -o addr show | awk "{print \$4}" | sort | tr "\n" " ")" = "$("$CLUSTER" --name="$NAME" addr 2)/24 127.0.0.1/8 " ]'

ip netns exec "$NAME-0" python3 "$PROBE" listen "$A0" 7000 &
LISTENER=$!
for _ in $(seq 50); do ip netns exec "$NAME-0" ss -Hltn "sport = :7000" | grep -q . && break; sleep 0.1; done

send() { node "$1" python3 "$PROBE" send "$A0" 7000 1000000 "$2"; }
field() { python3 -c "import json,sys; print(json.loads(sys.argv[1])[sys.argv[2]])" "$1" "$2"; }

r=$(send 2 10)
check "a megabyte crosses from node 2 to node 0 ($r)" '[ "$(field "$r" delivered)" = 1000000 ]'

links=$("$CLUSTER" --name="$NAME" check-links 3 2>&1)
rc=$?
echo "$links"
check "iperf3 measures the configured 200 Mbit/s within 15%" '[ $rc -eq 0 ]'

"$CLUSTER" --name="$NAME" partition 1 down
r=$(send 1 10)
check "a link taken down fails node 1's transfer at once ($r)" \
  '[ "$(field "$r" delivered)" = 0 ] && [ -n "$(field "$r" error)" ] && [ "$(field "$r" error)" != "timed out" ] && python3 -c "import sys; sys.exit(float(sys.argv[1]) >= 2)" "$(field "$r" seconds)"'
r=$(send 2 10)
check "node 2 is not affected ($r)" '[ "$(field "$r" delivered)" = 1000000 ]'
"$CLUSTER" --name="$NAME" heal 1
r=$(send 1 10)
check "healed, node 1's transfer gets through ($r)" '[ "$(field "$r" delivered)" = 1000000 ]'

"$CLUSTER" --name="$NAME" partition 1 silent
r=$(send 1 4)
check "a silent link makes node 1's transfer hang to its deadline, nothing said ($r)" \
  '[ "$(field "$r" delivered)" = 0 ] && [ "$(field "$r" error)" = "timed out" ]'
"$CLUSTER" --name="$NAME" heal 1
r=$(send 1 10)
check "healed, node 1's transfer gets through again ($r)" '[ "$(field "$r" delivered)" = 1000000 ]'

kill "$LISTENER" 2>/dev/null
wait "$LISTENER" 2>/dev/null
LISTENER=""

# Slurm across the nodes: slurmctld in this namespace, a slurmd in each node's.
if conf=$("$CLUSTER" --name="$NAME" slurm-up); then
  export SLURM_CONF="$conf"
  check "sinfo shows the three nodes idle" '[ "$(sinfo -h -t idle -o %D)" = 3 ]'
  out=$(timeout 60 srun --nodes=3 --ntasks-per-node=1 hostname 2>&1 | sort | tr '\n' ' ')
  check "srun from here runs on every node and its output comes back ($out)" \
    '[ "$out" = "$NAME-0 $NAME-1 $NAME-2 " ]'
  out=$(timeout 60 srun --nodelist="$NAME-2" bash -c 'hostname; ip -4 -o addr show | grep -c "$0"' \
    "$("$CLUSTER" --name="$NAME" addr 2)/" 2>&1 | tr '\n' ' ')
  check "a step on node 2 runs in node 2's namespaces ($out)" '[ "$out" = "$NAME-2 1 " ]'
  # A batch job's own srun starts on its first node, in that node's namespace, and reaches the others.
  job_out=$(mktemp)
  timeout 120 sbatch --wait --nodes=2 --ntasks-per-node=1 --output="$job_out" \
    --wrap='echo "batch on $(hostname)"; srun hostname | sort' >/dev/null 2>&1
  rc=$?
  out=$(tr '\n' ' ' <"$job_out")
  rm -f "$job_out"
  check "sbatch --wait on two nodes: the step's srun reaches both from the first ($out)" \
    '[ $rc -eq 0 ] && [ "$out" = "batch on $NAME-0 $NAME-0 $NAME-1 " ]'
  "$CLUSTER" --name="$NAME" slurm-down >/dev/null 2>&1
  check "slurm-down stops every daemon it started" \
    '! pgrep -f "/run/convoy-cluster/$NAME/slurm/" >/dev/null'
else
  say "FAIL: slurm-up"
  failures=$((failures + 1))
fi

"$CLUSTER" down --name="$NAME" >/dev/null
check "down leaves nothing ($(leftovers | tr '\n' ' '))" '[ -z "$(leftovers)" ]'

# A run killed half-way: its state file is gone, its namespaces, links and mounts are not.
"$CLUSTER" up 2 --link=100mbit --name="$NAME" >/dev/null 2>&1
umount /run/convoy-cluster/$NAME/uts-0 2>/dev/null; rm -f /run/convoy-cluster/$NAME/state
"$CLUSTER" down --name="$NAME" >/dev/null
check "down by name removes a killed run's leftovers ($(leftovers | tr '\n' ' '))" '[ -z "$(leftovers)" ]'

[ "$failures" -eq 0 ]
