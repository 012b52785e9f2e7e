#!/usr/bin/env bash
# The chaos run with the agents users run (chaos_test.sh's schedule, on production code): on a four-node
# cluster of network namespaces (cluster.sh), a sharded convoy_ps, shard 0 on node 0 and shard 1 on node 1,
# and a convoy_agent on each of nodes 2 and 3 (the embedded simulator, the tiny model, one CPU thread each),
# every agent pushing to and pulling from both shards. For CONVOY_CHAOS_SECONDS (default 90) a seeded random
# schedule of faults, every kind at least once:
#   a shard SIGKILLed and started again with --resume (each checkpoints every 40 updates);  an agent
#   SIGKILLed and started again;  an agent's node or a shard's node partitioned silently (packets vanish)
#   or with its link down, for 2-6 s, then healed;  and all along each shard --fault_lose_replies loses 3%
#   of the replies to the pushes it applied.
# Then a calm period, the agents get SIGTERM (their final sync) and must end in step, and the shards get
# SIGTERM (their final checkpoints). Checked (chaos_agents_check.py, from each shard's --apply_log and each
# agent's --push_log): no push applied twice on a shard; every minibatch an agent trained applied once in
# the lineage its shard's final weights descend from, or accounted for: lost by design (applied by a killed
# shard after its last checkpoint: counted, bounded), refused (counted by reason), or trained by a SIGKILLed
# agent before it could push (counted, bounded); versions never backwards within an incarnation; every
# checkpoint verifies; the agents end in step. Then the checker must fail on copies of the run's logs with a
# doubled apply and with a dropped minibatch (chaos_mutate.py). The seed is printed first:
# CONVOY_CHAOS_SEED=S replays the same schedule.
#
#   chaos_agents_test.sh REPO_ROOT BIN_DIR
#
# Needs root and network namespaces; without them it exits 77 (CTest: Skipped).
set -uo pipefail

REPO="${1:?repository root}"
BIN="${2:?binary directory}"
HERE="$(cd "$(dirname "$0")" && pwd)"
CLUSTER="$HERE/cluster.sh"
NAME=${CONVOY_CHAOS_CLUSTER_NAME:-cvchaosa}
SEED=${CONVOY_CHAOS_SEED:-$(( $(date +%s) % 100000 ))}
DURATION=${CONVOY_CHAOS_SECONDS:-90}
CHECKPOINT_EVERY=40
CALM=8           # Seconds without faults before the agents stop: every agent back in step.
STOP_WITHIN=40   # An agent's final sync (final_sync_for, 10 s) and a shard's shutdown end well within it.
SHARDS=(0 1)     # Shard s on node s.
AGENTS=(1 2)     # Agent a on node a + 1.

say() { printf 'cluster chaos_agents_test: %s\n' "$*"; }
fail() {
  say "FAIL: $* (seed $SEED: CONVOY_CHAOS_SEED=$SEED replays this schedule)"
  exit 1
}

say "seed $SEED, $DURATION s of faults"
# shellcheck source=tests/cluster/test_lib.sh
. "$HERE/test_lib.sh"
require_cluster
for b in convoy_ps convoy_agent; do
  [ -x "$BIN/$b" ] || fail "$BIN/$b is not built"
done

T="$(mktemp -d /tmp/convoy-chaos-agents.XXXXXX)"
chmod 0755 "$T"
SHARD_PID=("" "")
AGENT_PID=("" "" "")
cleanup() {
  local rc=$? pid
  for pid in "${SHARD_PID[@]}" "${AGENT_PID[@]}"; do [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; done
  wait 2>/dev/null
  [ "$rc" -ne 0 ] && print_tails 20 "$T"/ps-*.log "$T"/agent-*.log "$T"/schedule.log
  end_cluster_test "$rc"
}
trap cleanup EXIT
trap 'say "stopped by a signal"; exit 1' TERM INT

fresh_cluster 4 1gbit >/dev/null || fail "cluster up"
ADDR=()
for node in 0 1 2 3; do ADDR[$node]="$("$CLUSTER" --name="$NAME" addr "$node")"; done
PS_LIST="${ADDR[0]}:50051,${ADDR[1]}:50051"

start_shard() {  # $1: shard; $2: --resume or nothing
  "$CLUSTER" --name="$NAME" exec "$1" "$BIN/convoy_ps" --model=tiny --bind="${ADDR[$1]}" --port=50051 \
    --insecure --num_shards=2 --shard_index="$1" --batch_size=16 \
    --checkpoint_dir="$T/ckpt-$1" --keep_checkpoints=100000 \
    --checkpoint_every_updates=$CHECKPOINT_EVERY --checkpoint_every_seconds=0 \
    --apply_log="$T/apply-$1.log" --fault_lose_replies=0.03 --seed="$SEED" --shutdown_grace_seconds=5 \
    $2 >>"$T/ps-$1.log" 2>&1 &
  SHARD_PID[$1]=$!
  wait_node_listening "$1" 50051 "${SHARD_PID[$1]}" 10 || fail "shard $1 did not listen within 10 s"
}
start_agent() {  # $1: agent
  "$CLUSTER" --name="$NAME" exec "$(($1 + 1))" "$BIN/convoy_agent" --ps="$PS_LIST" --insecure \
    --agent_id="chaos-$1" --agent_index="$(($1 - 1))" --seed="$((SEED + $1))" --sim=embedded \
    --torch_threads=1 --min_replay_size=64 --replay_memory_size=2000 --replay_ratio=2 \
    --report_seconds=10 --push_log="$T/pushes-$1.log" >>"$T/agent-$1.log" 2>&1 &
  AGENT_PID[$1]=$!
}

for s in "${SHARDS[@]}"; do start_shard "$s" ""; done
for a in "${AGENTS[@]}"; do start_agent "$a"; done
RANDOM=$SEED
# The events: 0 a shard's SIGKILL and resume, 1 an agent's SIGKILL and restart, 2 and 3 an agent's node
# partitioned silently or with its link down, 4 and 5 a shard's node so, 6 a quiet spell. The first six
# are 0-5 in a seeded order, so that every kind of fault happens in every run; then they are drawn at random.
first=(0 1 2 3 4 5)
for ((i = 5; i > 0; i--)); do j=$((RANDOM % (i + 1))); t=${first[i]}; first[i]=${first[j]}; first[j]=$t; done
declare -A count=()
shard_starts=(1 1)
n=0
end=$((SECONDS + DURATION))
while [ $SECONDS -lt $end ]; do
  sleep "$((1 + RANDOM % 3)).$((RANDOM % 10))"
  event=$((RANDOM % 7))
  [ $n -lt 6 ] && event=${first[n]}
  n=$((n + 1))
  shard=$((RANDOM % 2))
  agent=$((1 + RANDOM % 2))
  hold=$((2 + RANDOM % 5))
  detail=""
  case $event in
    0)
      kill -9 "${SHARD_PID[$shard]}"; wait "${SHARD_PID[$shard]}" 2>/dev/null
      sleep "0.$((RANDOM % 10))"
      start_shard "$shard" --resume
      shard_starts[$shard]=$((shard_starts[shard] + 1))
      what="shard $shard SIGKILLed and resumed" ;;
    1)
      kill -9 "${AGENT_PID[$agent]}"; wait "${AGENT_PID[$agent]}" 2>/dev/null
      start_agent "$agent"
      what="agent $agent SIGKILLed and started again" ;;
    2 | 3 | 4 | 5)
      kind=$([ $((event % 2)) -eq 0 ] && echo silent || echo down)
      if [ $event -le 3 ]; then node=$((agent + 1)) who="agent $agent"; else node=$shard who="shard $shard"; fi
      "$CLUSTER" --name="$NAME" partition "$node" "$kind" >/dev/null 2>&1 || fail "partition $node $kind"
      sleep "$hold"
      "$CLUSTER" --name="$NAME" heal "$node" >/dev/null 2>&1 || fail "heal $node"
      what="$who's node partitioned ($kind)"
      detail=" for $hold s" ;;
    6) what="quiet" ;;
  esac
  count[$what]=$((${count[$what]:-0} + 1))
  echo "$SECONDS s: $what$detail" >>"$T/schedule.log"
done
say "faults by kind:"
for w in "${!count[@]}"; do say "  ${count[$w]} x $w"; done | sort -k2
say "starts per shard: shard 0: ${shard_starts[0]}, shard 1: ${shard_starts[1]}"

# Calm: every agent back in step; then they stop (their final sync), then the shards (final checkpoints).
# An agent started late may still be loading (LibTorch takes seconds on a busy machine): SIGTERM goes to
# agents whose newest process trains, so that it meets the signal handler, not the default action.
sleep $CALM
training() {  # $1: agent. Its running process (by pid) has logged a minibatch trained.
  awk -v pid="pid=${AGENT_PID[$1]}" '/^start/ { mine = $3 == pid } /^trained/ && mine { trained = 1 }
    END { exit !trained }' "$T/pushes-$1.log" 2>/dev/null
}
for a in "${AGENTS[@]}"; do
  for _ in $(seq 600); do training "$a" && break; sleep 0.1; done
  training "$a" || fail "agent $a's newest process did not train within $CALM + 60 s of its start"
  kill -0 "${AGENT_PID[$a]}" 2>/dev/null || fail "agent $a exited during the run"
  kill -TERM "${AGENT_PID[$a]}"
done
for a in "${AGENTS[@]}"; do
  wait_exit_within "${AGENT_PID[$a]}" $STOP_WITHIN
  AGENT_PID[$a]=""
  [ "$EXIT_STATUS" -eq 0 ] || fail "agent $a exited $EXIT_STATUS on SIGTERM (124: not within $STOP_WITHIN s)"
  grep "done:" "$T/agent-$a.log" | tail -n 1 | sed 's/^/cluster chaos_agents_test: /'
done
for s in "${SHARDS[@]}"; do
  kill -TERM "${SHARD_PID[$s]}"
  wait_exit_within "${SHARD_PID[$s]}" $STOP_WITHIN
  SHARD_PID[$s]=""
  [ "$EXIT_STATUS" -eq 0 ] || fail "shard $s exited $EXIT_STATUS on SIGTERM"
done

for s in "${SHARDS[@]}"; do
  python3 "$REPO/tests/support/verify_checkpoints.py" "$T/ckpt-$s" >/dev/null ||
    fail "a checkpoint of shard $s does not verify"
done
say "every checkpoint of both shards verifies"
check() {  # $1 $2: the apply logs; the rest: the push logs
  local shard0=$1 shard1=$2
  shift 2
  python3 "$HERE/chaos_agents_check.py" "$@" --apply_log="$shard0" --apply_log="$shard1" \
    --checkpoint_every=$CHECKPOINT_EVERY
}
check "$T/apply-0.log" "$T/apply-1.log" "$T/pushes-1.log" "$T/pushes-2.log" || fail "an invariant does not hold"

# The checks can fail: a doubled apply, and a minibatch trained and never pushed.
python3 "$HERE/chaos_mutate.py" double_apply "$T/apply-1.log" "$T/doubled-apply-1.log" || fail "mutation"
out=$(check "$T/apply-0.log" "$T/doubled-apply-1.log" "$T/pushes-1.log" "$T/pushes-2.log") &&
  fail "the checker passed an apply log with a push applied twice"
grep -q "FAIL: .*more than once" <<<"$out" || fail "a doubled apply failed for another reason: $out"
say "a doubled apply fails the check: ${out##*FAIL: }"
python3 "$HERE/chaos_mutate.py" drop_minibatch "$T/pushes-2.log" "$T/dropped-pushes-2.log" || fail "mutation"
out=$(check "$T/apply-0.log" "$T/apply-1.log" "$T/pushes-1.log" "$T/dropped-pushes-2.log") &&
  fail "the checker passed a push log with a minibatch trained and never pushed"
grep -q "FAIL: .*1 dropped" <<<"$out" || fail "a dropped minibatch failed for another reason: $out"
say "a dropped minibatch fails the check: ${out##*FAIL: }"
say "ok (seed $SEED)"
