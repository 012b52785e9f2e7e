#!/usr/bin/env bash
# A chaos run in the style of Jepsen, on a three-node cluster of network namespaces (cluster.sh):
# convoy_ps on node 0, a synthetic agent on each of nodes 1 and 2 pushing replayable gradients
# (convoy_synthetic_agent --replayable) every 20 ms, and for CONVOY_CHAOS_SECONDS (default 75) a
# seeded random schedule of faults:
#   convoy_ps SIGKILLed and started again with --resume;  an agent SIGKILLed and started again (a new
#   push session);  an agent's node partitioned silently (packets vanish) or with its link down, for
#   2-6 s, then healed;  and all along, convoy_ps --fault_lose_replies loses 3% of the replies to the
#   pushes it applied (the agents retry them).
# Then the faults stop, the agents run on for a few seconds and are killed, convoy_ps is stopped with
# SIGTERM (its final checkpoint), and the run is checked (chaos_check.py, convoy_chaos_replay): no push
# applied twice; every push an agent saw accepted applied once in the lineage the final weights descend
# from, except those a killed server had applied after its last checkpoint (counted, bounded); versions
# never backwards within an incarnation; every checkpoint verifies; and the final weights equal the
# replay of the lineage's pushes with SGD, bit for bit. The seed is printed first: CONVOY_CHAOS_SEED=S
# replays the same schedule.
#
#   chaos_test.sh REPO_ROOT BIN_DIR
#
# Needs root and network namespaces; without them it exits 77 (CTest: Skipped).
set -uo pipefail

REPO="${1:?repository root}"
BIN="${2:?binary directory}"
HERE="$(cd "$(dirname "$0")" && pwd)"
CLUSTER="$HERE/cluster.sh"
NAME=${CONVOY_CHAOS_CLUSTER_NAME:-cvchaos}
SEED=${CONVOY_CHAOS_SEED:-$(( $(date +%s) % 100000 ))}
DURATION=${CONVOY_CHAOS_SECONDS:-75}
CHECKPOINT_EVERY=40
LR=0.0625

say() { printf 'cluster chaos_test: %s\n' "$*"; }
fail() {
  say "FAIL: $* (seed $SEED: CONVOY_CHAOS_SEED=$SEED replays this schedule)"
  exit 1
}

say "seed $SEED, $DURATION s of faults"
# shellcheck source=tests/cluster/test_lib.sh
. "$HERE/test_lib.sh"
require_cluster
for b in convoy_ps convoy_synthetic_agent convoy_chaos_replay; do
  [ -x "$BIN/$b" ] || fail "$BIN/$b is not built"
done

T="$(mktemp -d /tmp/convoy-chaos.XXXXXX)"
chmod 0755 "$T"
PS_PID=""
AGENT_PID=("" "" "")
cleanup() {
  local rc=$?
  for pid in $PS_PID "${AGENT_PID[@]}"; do [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; done
  wait 2>/dev/null
  [ "$rc" -ne 0 ] && print_tails 20 "$T"/ps.log "$T"/agent-1.log "$T"/agent-2.log "$T"/schedule.log
  end_cluster_test "$rc"
}
trap cleanup EXIT
trap 'say "stopped by a signal"; exit 1' TERM INT

fresh_cluster 3 1gbit >/dev/null || fail "cluster up"
PS_ADDR="$("$CLUSTER" --name="$NAME" addr 0)"

start_ps() {  # $1: --resume or nothing
  "$CLUSTER" --name="$NAME" exec 0 "$BIN/convoy_ps" --model=tiny --bind="$PS_ADDR" --port=50051 --insecure \
    --checkpoint_dir="$T/ckpt" --keep_checkpoints=100000 \
    --checkpoint_every_updates=$CHECKPOINT_EVERY --checkpoint_every_seconds=0 \
    --optimizer=sgd --momentum=0 --learning_rate=$LR --apply_log="$T/apply.log" \
    --fault_lose_replies=0.03 --seed="$SEED" --shutdown_grace_seconds=5 $1 >>"$T/ps.log" 2>&1 &
  PS_PID=$!
  for _ in $(seq 100); do
    ip netns exec "$NAME-0" ss -Hltn "sport = :50051" 2>/dev/null | grep -q . && return 0
    kill -0 "$PS_PID" 2>/dev/null || fail "convoy_ps exited at start"
    sleep 0.1
  done
  fail "convoy_ps did not listen within 10 s"
}
start_agent() {  # $1: 1 or 2
  "$CLUSTER" --name="$NAME" exec "$1" "$BIN/convoy_synthetic_agent" --ps="$PS_ADDR:50051" --model=tiny \
    --agent_id="chaos-$1" --insecure --replayable --push_log="$T/pushes-$1.log" --push_every=20ms \
    --seconds=100000 --call_timeout=3s --retry_for=2s --report_seconds=10 >>"$T/agent-$1.log" 2>&1 &
  AGENT_PID[$1]=$!
}

start_ps ""
start_agent 1
start_agent 2
RANDOM=$SEED
kills=0
declare -A count=()
end=$((SECONDS + DURATION))
while [ $SECONDS -lt $end ]; do
  sleep "$((1 + RANDOM % 3)).$((RANDOM % 10))"
  event=$((RANDOM % 5))
  node=$((1 + RANDOM % 2))
  hold=$((2 + RANDOM % 5))
  case $event in
    0)
      kill -9 "$PS_PID"; wait "$PS_PID" 2>/dev/null
      sleep "0.$((RANDOM % 10))"
      start_ps --resume
      kills=$((kills + 1))
      what="convoy_ps SIGKILLed and resumed" ;;
    1)
      kill -9 "${AGENT_PID[$node]}"; wait "${AGENT_PID[$node]}" 2>/dev/null
      start_agent "$node"
      what="agent $node SIGKILLed and started again" ;;
    2 | 3)
      kind=$([ $event -eq 2 ] && echo silent || echo down)
      "$CLUSTER" --name="$NAME" partition "$node" "$kind" >/dev/null 2>&1 || fail "partition $node $kind"
      sleep "$hold"
      "$CLUSTER" --name="$NAME" heal "$node" >/dev/null 2>&1 || fail "heal $node"
      what="node $node partitioned ($kind) for $hold s" ;;
    4) what="quiet" ;;
  esac
  count[$what]=$((${count[$what]:-0} + 1))
  echo "$SECONDS s: $what" >>"$T/schedule.log"
done
for w in "${!count[@]}"; do say "  ${count[$w]} x $w"; done

# Calm: the agents catch up, then stop; the server drains and writes its final checkpoint.
sleep 5
for i in 1 2; do
  kill -0 "${AGENT_PID[$i]}" 2>/dev/null || fail "agent $i exited during the run"
  kill -9 "${AGENT_PID[$i]}"; wait "${AGENT_PID[$i]}" 2>/dev/null
  AGENT_PID[$i]=""
done
kill -TERM "$PS_PID"
wait "$PS_PID"
rc=$?
PS_PID=""
[ "$rc" -eq 0 ] || fail "convoy_ps exited $rc on SIGTERM"

python3 "$REPO/tests/support/verify_checkpoints.py" "$T/ckpt" || fail "a checkpoint does not verify"
python3 "$HERE/chaos_check.py" "$T/apply.log" "$T"/pushes-*.log --lineage="$T/lineage.txt" \
  --checkpoint_every=$CHECKPOINT_EVERY --kills=$kills || fail "an invariant does not hold"
newest=$(ls "$T/ckpt" | grep '^ckpt-' | sort | tail -n 1)
"$BIN/convoy_chaos_replay" --model=tiny --seed="$SEED" --lineage="$T/lineage.txt" \
  --final="$T/ckpt/$newest" --learning_rate=$LR || fail "the final weights are not the replay of the lineage"
say "ok (seed $SEED)"
