#!/usr/bin/env bash
# The real deploy/slurm/convoy.sbatch, unchanged, on a three-node cluster of network namespaces
# (tests/cluster/cluster.sh) with 1 Gbit/s links and Slurm across the nodes, three jobs:
#   1. sbatch --wait --nodes=3 --ntasks-per-node=1: convoy_ps alone on the first node, an agent on each of the
#      other two, each agent driving its own convoy_sim on its node over the AirSim protocol, TLS and a
#      bearer token as a cluster run has them;
#   2. the heterogeneous layout, -N1 : -N2 (the PS component alone on one node, the agents on two others);
#   3. job 1's run directory again, requeued while it trains (scontrol requeue): it resumes from the
#      checkpoint written on SIGTERM and the version carries on, and each agent resumes its replay memory at
#      both starts; meanwhile a real Prometheus on the PS's node scrapes the server and both agents across the
#      nodes through the job's file_sd targets;
#   4. a two-minute run in which one agent's node is partitioned for 20 s silently, then for 20 s with its
#      link down (see job 4 below for what is checked);
#   5. CONVOY_PS_SHARDS=2: the PS as two convoy_ps shards on the first node, each agent pushing to both.
# Checks of each: the job succeeds; each agent ran on the node Slurm gave it (its log, its join and
# convoy_ps's GetStatus summary name that node), none beside the PS; TLS with the token; the newest
# checkpoint verifies against its manifest's SHA-256s. Of job 1: the PS node's link carried at least the bytes
# convoy_ps counted on the wire, and the agents' links as much between them.
#
#   deploy_test.sh REPO_ROOT BIN_DIR
#
# Needs root, network namespaces, slurm-wlm and munge; without them it exits 77 (CTest: Skipped).
set -uo pipefail

REPO="${1:?repository root}"
BIN="${2:?binary directory}"
HERE="$(cd "$(dirname "$0")" && pwd)"
CLUSTER="$HERE/cluster.sh"
NAME=${CONVOY_CLUSTER_TEST_NAME:-cvdeploy}  # Another name runs beside a suite that uses this one.

say() { printf 'cluster deploy_test: %s\n' "$*"; }
fail() {
  say "FAIL: $*"
  exit 1
}

# shellcheck source=tests/cluster/test_lib.sh
. "$HERE/test_lib.sh"
require_cluster slurmctld slurmd munged sbatch
for b in convoy_ps convoy_agent convoy_sim; do [ -x "$BIN/$b" ] || fail "$BIN/$b is not built"; done

T="$(mktemp -d /tmp/convoy-cluster-deploy.XXXXXX)"
chmod 0755 "$T"
cleanup() {
  local rc=$?
  # Every job's output and run logs, the failed job's among them (the newest last).
  [ "$rc" -ne 0 ] && print_tails 25 /run/convoy-cluster/"$NAME"/slurm/log/*.log \
    $(ls -tr "$T"/job*.out "$T"/run*/logs/*.log 2>/dev/null)
  end_cluster_test "$rc"
}
trap cleanup EXIT
trap 'say "stopped by a signal"; exit 1' TERM INT

fresh_cluster 3 1gbit || fail "cluster up"
SLURM_CONF="$("$CLUSTER" --name="$NAME" slurm-up)" || fail "slurm-up"
export SLURM_CONF
node_bytes() {  # Bytes both ways on node $1's link, counted at its bridge port.
  local dev="$NAME-h$1"
  echo $(($(cat /sys/class/net/"$dev"/statistics/rx_bytes) + $(cat /sys/class/net/"$dev"/statistics/tx_bytes)))
}
BEFORE=("$(node_bytes 0)" "$(node_bytes 1)" "$(node_bytes 2)")

PS_FLAGS="--checkpoint_every_updates=20 --checkpoint_every_seconds=0 --keep_checkpoints=3 --batch_size=16"
AGENT_FLAGS="--min_replay_size=64 --replay_memory_size=2000 --report_seconds=2 --max_minutes=3"
SIM_ENV="CONVOY_SIM=convoy_sim,CONVOY_SIM_BASE_PORT=41451,CONVOY_SCENARIO=empty"
job_env() {  # $1 run directory, $2 more agent flags (the later of two wins)
  echo "ALL,CONVOY_HOME=$REPO,CONVOY_BIN=$BIN,CONVOY_RUN_DIR=$1,CONVOY_MODEL=compact,CONVOY_PS_FLAGS=$PS_FLAGS,CONVOY_AGENT_FLAGS=$AGENT_FLAGS $2,$SIM_ENV"
}

newest_checkpoint() { ls "$1/checkpoints" 2>/dev/null | grep '^ckpt-' | sort | tail -n 1; }
newest_version() {
  local newest
  newest=$(newest_checkpoint "$1")
  [ -n "$newest" ] || { echo 0; return; }
  grep -m1 -o '^version: [0-9]*' "$1/checkpoints/$newest/MANIFEST" | awk '{print $2}'
}

# The newest checkpoint of run directory $1, file by file against its manifest.
verify_newest_checkpoint() {
  local newest
  newest=$(newest_checkpoint "$1")
  [ -n "$newest" ] || fail "no checkpoint in $1/checkpoints"
  python3 "$REPO/tests/support/verify_checkpoints.py" "$1/checkpoints/$newest" ||
    fail "checkpoint $newest does not verify"
}

# The checks of a finished run in directory $1 whose agents each ran $2 steps: convoy_ps on node 0 over TLS
# with the token; each agent on one of nodes 1 and 2 as its log, its join and GetStatus's summary say, both on
# different nodes, each with its own convoy_sim; the newest checkpoint verifies.
check_run() {
  local run=$1 steps=$2 ps_log="$1/logs/ps.log" status_line nodes_used=() i log node
  grep -q '(TLS, bearer token)$' "$ps_log" || fail "convoy_ps did not serve TLS with a token"
  status_line=$(grep 'final status:' "$ps_log" | tail -n 1)
  [ -n "$status_line" ] || fail "convoy_ps logged no final status"
  say "convoy_ps: ${status_line#*final status: }"
  for i in 0 1; do
    log="$run/logs/agent-$i.log"
    [ -s "$log" ] || fail "no log for agent $i ($log)"
    node=$(grep -o 'agent_task\[[0-9]*\]: node [^,]*' "$log" | tail -n 1 | awk '{print $NF}')
    [[ "$node" =~ ^$NAME-[12]$ ]] || fail "agent $i ran on '${node:-?}', not on an agent node ($NAME-1, $NAME-2)"
    grep -q "\[agent-$i\] done:.* $steps steps" "$log" || fail "agent $i did not log a finished $steps-step run"
    grep -q 'convoy_agent exited 0' "$log" || fail "agent $i did not exit 0"
    # One agent per node, so LOCAL_RANK 0 on each: its convoy_sim is on the base port of its own node.
    grep -q "sim airsim://127.0.0.1:41451\$" "$log" || fail "agent $i did not drive its own convoy_sim"
    grep -q 'convoy_agent: scenario empty:' "$log" || fail "agent $i did not take CONVOY_SCENARIO=empty"
    grep -q "agent agent-$i (index $i) joined from $node" "$ps_log" || fail "agent $i's join did not come from $node"
    [[ "$status_line" == *"agent-$i@$node ("* ]] || fail "GetStatus does not place agent $i on $node"
    nodes_used+=("$node")
  done
  [ "${nodes_used[0]}" != "${nodes_used[1]}" ] || fail "both agents ran on ${nodes_used[0]}"
  say "agents on ${nodes_used[*]}, as Slurm placed them; convoy_ps on $NAME-0"
  verify_newest_checkpoint "$run"
  STATUS_LINE=$status_line
}

# 1. A plain job: the PS on the first node, one agent on each of the other two.
RUN="$T/run"
say "job 1: sbatch --wait --nodes=3: convoy_ps on $NAME-0, an agent with its convoy_sim on $NAME-1 and $NAME-2"
start=$SECONDS
timeout 400 sbatch --wait --parsable --nodes=3 --ntasks-per-node=1 --cpus-per-task=1 --time=10 \
  --output="$T/job.out" --export="$(job_env "$RUN" --max_steps=300)" "$REPO/deploy/slurm/convoy.sbatch" >"$T/job.id"
rc=$?
[ "$rc" -eq 0 ] || fail "job 1 (sbatch --wait) exited $rc"
say "job 1 ($(cat "$T/job.id")) finished in $((SECONDS - start)) s"
grep -q "PS on $NAME-0 (10\.213\.[0-9]*\.1), 2 agents" "$T/job.out" || fail "job 1 did not put convoy_ps on $NAME-0"
check_run "$RUN" 300

# Bytes: everything convoy_ps sent and received crossed node 0's link, with TLS and TCP on top.
wire=$(sed -E 's/.*bytes in ([0-9]+) out ([0-9]+).*/\1 \2/' <<<"$STATUS_LINE" | awk '{print $1 + $2}')
link0=$(($(node_bytes 0) - BEFORE[0]))
link1=$(($(node_bytes 1) - BEFORE[1]))
link2=$(($(node_bytes 2) - BEFORE[2]))
say "bytes: convoy_ps counted $wire on the wire; links carried node0 $link0, node1 $link1, node2 $link2"
[ "$wire" -gt 0 ] || fail "convoy_ps counted no bytes"
[ "$link0" -ge "$wire" ] || fail "node 0's link carried $link0 bytes, fewer than the $wire convoy_ps counted"
[ $((link1 + link2)) -ge "$wire" ] || fail "the agents' links carried $((link1 + link2)), fewer than $wire"

# 2. The heterogeneous layout: component 0 is the PS alone on one node, component 1 the agents on two others.
RUN2="$T/run-het"
say "job 2: heterogeneous, -N1 (convoy_ps) : -N2 (agents)"
start=$SECONDS
timeout 400 sbatch --wait --parsable --time=10 --output="$T/job2.out" --export="$(job_env "$RUN2" --max_steps=300)" \
  --nodes=1 --ntasks-per-node=1 --cpus-per-task=1 : --nodes=2 --ntasks-per-node=1 --cpus-per-task=1 \
  "$REPO/deploy/slurm/convoy.sbatch" >"$T/job2.id"
rc=$?
[ "$rc" -eq 0 ] || fail "job 2 (heterogeneous, sbatch --wait) exited $rc"
say "job 2 ($(cat "$T/job2.id")) finished in $((SECONDS - start)) s"
grep -q "PS on $NAME-0 (10\.213\.[0-9]*\.1), 2 agents" "$T/job2.out" || fail "job 2 did not put convoy_ps on $NAME-0"
check_run "$RUN2" 300

# 3. Job 1's run directory again, requeued while it trains: a checkpoint on SIGTERM, a resumed start, and the
# version carries on from where the first start stopped.
V1=$(newest_version "$RUN")
say "job 3: resumes job 1's run from version $V1; requeued while training"
start=$SECONDS
# Meanwhile a real Prometheus on the PS's node scrapes the server and both agents across the nodes, at the
# addresses the job's file_sd targets give (each node's NodeAddr), rewritten by the requeued start. Each of the
# job's starts lasts about 10 s, so the job is submitted only once Prometheus answers, and requeued only once the
# check is through (or has given up), as tests/deploy/slurm_test.sh does: on a loaded machine Prometheus's own
# start took longer than the job, and the check found no target scraped.
"$CLUSTER" --name="$NAME" exec 0 /usr/bin/python3 "$REPO/tests/deploy/prometheus_harness.py" check \
  "$RUN/prometheus_targets.json" "$REPO/deploy/monitoring/convoy-alerts.yml" "$T/prometheus" convoy-ps=1 \
  convoy-agent=2 -- 'convoy_ps_version > 0' 'convoy_ps_agents_connected == 2' 'convoy_agent_train_steps_total > 0' \
  >"$T/prometheus.out" 2>&1 &
PROM_PID=$!
for _ in $(seq 120); do
  grep -q '^prometheus: ready$' "$T/prometheus.out" && break
  kill -0 "$PROM_PID" 2>/dev/null || break
  sleep 0.5
done
JOB3=$(sbatch --parsable --nodes=3 --ntasks-per-node=1 --cpus-per-task=1 --time=10 --output="$T/job3.out" \
  --export="$(job_env "$RUN" --max_steps=900)" "$REPO/deploy/slurm/convoy.sbatch") || fail "sbatch of job 3 failed"
for _ in $(seq 240); do
  [ "$(newest_version "$RUN")" -ge $((V1 + 40)) ] && ! kill -0 "$PROM_PID" 2>/dev/null && break
  sleep 0.5
done
V_BEFORE=$(newest_version "$RUN")
[ "$V_BEFORE" -ge $((V1 + 40)) ] || fail "job 3 made no progress past version $V1 in 120 s"
scontrol requeue "$JOB3" || fail "scontrol requeue $JOB3 failed"
say "requeued job $JOB3 at checkpoint version $V_BEFORE"
job_field() { scontrol show job "$JOB3" -o 2>/dev/null | grep -o "$1=[^ ]*" | head -n 1 | cut -d= -f2; }
for _ in $(seq 240); do
  state=$(job_field JobState)
  [ "$state" = RUNNING ] && [ "$(job_field Restarts)" -ge 1 ] && break
  # Slurm holds a requeued job back (BeginTime two minutes on); make it eligible once it is pending again.
  [ "$state" = PENDING ] && scontrol update jobid="$JOB3" starttime=now >/dev/null 2>&1
  sleep 0.5
done
for _ in $(seq 600); do
  state=$(job_field JobState)
  case "$state" in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) break ;; esac
  sleep 0.5
done
[ "$state" = COMPLETED ] || fail "job 3 ended ${state:-in an unknown state}"
say "job 3 finished in $((SECONDS - start)) s"
grep -q 'start 2 (SLURM_RESTART_COUNT=1)' "$T/job3.out" || fail "job 3 did not restart after the requeue"
grep -q "resumed from .* at version $V1\$" "$RUN/logs/ps.log" || fail "job 3 did not resume from version $V1"
V_RESUMED=$(grep 'resumed from' "$RUN/logs/ps.log" | tail -n 1 | grep -o '[0-9]*$')
[ "$V_RESUMED" -ge "$V_BEFORE" ] || fail "the requeued start resumed at $V_RESUMED, behind the checkpoint $V_BEFORE"
V3=$(newest_version "$RUN")
[ "$V3" -gt "$V_RESUMED" ] || fail "after the requeue the version did not grow ($V_RESUMED -> $V3)"
check_run "$RUN" 900
say "job 3: checkpoint $V_BEFORE before the requeue, resumed at $V_RESUMED, finished at $V3"
# Each agent came back with its replay memory, from the shared run directory, at both of job 3's starts.
for i in 0 1; do
  resumed=$(grep -c "agent-$i: resumed from $RUN/replay/agent-$i.replay" "$RUN/logs/agent-$i.log")
  [ "$resumed" -eq 2 ] || fail "agent $i resumed its replay memory $resumed times; expected job 3's two starts"
done
wait "$PROM_PID"
prom_rc=$?
cat "$T/prometheus.out"
case "$prom_rc" in
  0) say "job 3: Prometheus on $NAME-0 scraped the server and both agents on the other nodes" ;;
  77) say "job 3: not scraped by Prometheus (no prometheus package)" ;;
  *) fail "job 3: Prometheus did not scrape the run across the nodes (exit $prom_rc)" ;;
esac

# 4. Partitions in the middle of a run: one agent's node cut off for 20 s silently, healed, then for 20 s with
# its link down, healed. The PS and the other agent must keep going (the other agent sees the version grow
# in every 2 s sample), the cut-off agent must pull again within 20 s of each heal, and nothing may be
# applied twice (the PS's updates equal the pushes it accepted). The cut-off agent keeps acting and
# learning: its env steps/s and train steps/s over the partition are at least half of what they were in
# the 10 s before it (its exchanges with the PS run beside its loop; a silent link costs acting at most
# --sync_wait, once, and the rest is this machine's noise).
RUN4="$T/run-partitions"
say "job 4: two agents for 2 minutes; one agent's node partitioned silently, then with its link down"
JOB4=$(sbatch --parsable --nodes=3 --ntasks-per-node=1 --cpus-per-task=1 --time=10 --output="$T/job4.out" \
  --export="$(job_env "$RUN4" "--max_minutes=2 --report_seconds=1")" \
  "$REPO/deploy/slurm/convoy.sbatch") || fail "sbatch of job 4 failed"
csv_field() {  # $1 agent index, $2 column name: the newest row's value, 0 before the first
  local f="$RUN4/agents/agent-$1/intervals.csv"
  [ -s "$f" ] || { echo 0; return; }
  awk -F, -v col="$2" 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == col) c = i} END {print (c && NR > 1) ? $c + 0 : 0}' "$f"
}
for _ in $(seq 240); do
  [ "$(csv_field 0 ps_version)" -ge 10 ] && [ "$(csv_field 1 ps_version)" -ge 10 ] && break
  sleep 0.5
done
[ "$(csv_field 1 ps_version)" -ge 10 ] || fail "job 4's agents did not get going within 120 s"
cut_node=$(grep -o 'agent_task\[1\]: node [^,]*' "$RUN4/logs/agent-1.log" | tail -n 1 | awk '{print $NF}')
cut=${cut_node##*-}
[[ "$cut" =~ ^[12]$ ]] || fail "agent 1 runs on '$cut_node', not an agent node"
for kind in silent down; do
  e_before=$(csv_field 1 env_steps)
  t_before=$(csv_field 1 train_steps)
  sleep 10
  e_start=$(csv_field 1 env_steps)
  t_start=$(csv_field 1 train_steps)
  "$CLUSTER" --name="$NAME" partition "$cut" "$kind" >/dev/null 2>&1
  v_prev=$(csv_field 0 ps_version)
  for sample in $(seq 10); do
    sleep 2
    v=$(csv_field 0 ps_version)
    [ "$v" -gt "$v_prev" ] || fail "$kind partition of node $cut: the other agent saw no new version in 2 s ($v_prev -> $v, sample $sample)"
    v_prev=$v
  done
  e_end=$(csv_field 1 env_steps)
  t_end=$(csv_field 1 train_steps)
  v_cut=$(csv_field 1 ps_version)
  "$CLUSTER" --name="$NAME" heal "$cut" >/dev/null 2>&1
  healed=$SECONDS
  rejoined=""
  for _ in $(seq 40); do
    [ "$(csv_field 1 ps_version)" -gt "$v_cut" ] && { rejoined=$((SECONDS - healed)); break; }
    sleep 0.5
  done
  [ -n "$rejoined" ] || fail "$kind partition: agent 1 did not pull a new version within 20 s of the heal"
  sleep 10
  e_after=$(csv_field 1 env_steps)
  say "$kind partition of $cut_node for 20 s: the other agent saw the version grow every 2 s; agent 1 acted" \
    "at $(((e_start - e_before) / 10)) env steps/s before, $(((e_end - e_start) / 20)) during," \
    "$(((e_after - e_end) / (10 + rejoined))) after, and trained $((t_start - t_before)) minibatches in the" \
    "10 s before, $((t_end - t_start)) in the 20 s during; it pulled again ${rejoined} s after the heal"
  # Per second, doubled so that 'at least half' is integer arithmetic: during/20 >= (before/10)/2.
  [ $((e_end - e_start)) -ge $((e_start - e_before)) ] ||
    fail "$kind partition: agent 1 acted $((e_end - e_start)) steps in 20 s, less than half its rate before ($((e_start - e_before)) in 10 s)"
  [ $((t_end - t_start)) -ge $((t_start - t_before)) ] ||
    fail "$kind partition: agent 1 trained $((t_end - t_start)) steps in 20 s, less than half its rate before ($((t_start - t_before)) in 10 s)"
done
for _ in $(seq 480); do
  state=$(scontrol show job "$JOB4" -o 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
  case "$state" in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) break ;; esac
  sleep 0.5
done
[ "$state" = COMPLETED ] || fail "job 4 ended ${state:-in an unknown state}"
status_line=$(grep 'final status:' "$RUN4/logs/ps.log" | tail -n 1)
updates=$(sed -E 's/.*, updates ([0-9]+),.*/\1/' <<<"$status_line")
accepted=$(grep -o '([0-9]* pushes accepted' <<<"$status_line" | awk '{s += substr($1, 2)} END {print s + 0}')
say "job 4: ${status_line#*final status: }"
[ "$updates" -eq "$accepted" ] || fail "job 4: the PS applied $updates updates for $accepted accepted pushes"
verify_newest_checkpoint "$RUN4"

# 5. The PS as two shards (CONVOY_PS_SHARDS=2): two convoy_ps tasks on the first node, each serving half of
# the weights; each agent pushes to and pulls from both. Each shard must have every agent's pushes, apply
# exactly what it accepted, and checkpoint its own half.
RUN5="$T/run-shards"
say "job 5: CONVOY_PS_SHARDS=2: two convoy_ps shards on $NAME-0, an agent on each of $NAME-1 and $NAME-2"
timeout 400 sbatch --wait --parsable --nodes=3 --ntasks-per-node=1 --cpus-per-task=1 --time=10 \
  --output="$T/job5.out" --export="$(job_env "$RUN5" --max_steps=300),CONVOY_PS_SHARDS=2" \
  "$REPO/deploy/slurm/convoy.sbatch" >/dev/null || fail "job 5 (sbatch --wait) failed: $(tail -n 5 "$T/job5.out")"
grep -q "convoy_ps serving at 10\.213\.[0-9]*\.1:[0-9]*,10\.213\.[0-9]*\.1:[0-9]* (2 shards)" "$T/job5.out" ||
  fail "job 5 did not hand the agents both shards' addresses"
shard_updates=()
for s in 0 1; do
  log="$RUN5/logs/ps-$s.log"
  grep -q "shard $s of 2 (elements" "$log" || fail "job 5: $log is not shard $s of 2"
  line=$(grep 'final status:' "$log" | tail -n 1)
  [ -n "$line" ] || fail "job 5: shard $s logged no final status"
  say "job 5, shard $s: ${line#*final status: }"
  updates=$(sed -E 's/.*, updates ([0-9]+),.*/\1/' <<<"$line")
  accepted=$(grep -o '([0-9]* pushes accepted' <<<"$line" | awk '{s += substr($1, 2)} END {print s + 0}')
  [ "$updates" -eq "$accepted" ] || fail "job 5: shard $s applied $updates updates for $accepted accepted pushes"
  for i in 0 1; do
    [[ "$line" == *"agent-$i@$NAME-"[12]" ("[1-9]* ]] || fail "job 5: shard $s has no pushes from agent $i"
  done
  newest=$(ls "$RUN5/checkpoints/shard-$s" | grep '^ckpt-' | sort | tail -n 1)
  [ -n "$newest" ] || fail "job 5: shard $s wrote no checkpoint"
  python3 "$REPO/tests/support/verify_checkpoints.py" "$RUN5/checkpoints/shard-$s/$newest" ||
    fail "job 5: shard $s's checkpoint does not verify"
  grep -q 'num_shards: 2' "$RUN5/checkpoints/shard-$s/$newest/MANIFEST" || fail "job 5: shard $s's manifest names no split"
  shard_updates+=("$updates")
done
# Every push reaches both shards, so with nothing refused they applied the same number.
[ "${shard_updates[0]}" -eq "${shard_updates[1]}" ] ||
  fail "job 5: the shards applied ${shard_updates[0]} and ${shard_updates[1]} updates"
say "ok"
