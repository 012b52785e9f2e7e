#!/usr/bin/env bash
# deploy/slurm/convoy.sbatch on a real one-node Slurm cluster, set up on this machine for the test.
#
#   slurm_test.sh REPO_ROOT BIN_DIR
#
# Installs slurm-wlm and munge from Debian when they are missing, starts munged, slurmctld and slurmd as root
# with a configuration of their own in a temporary directory (their own ports, key, socket, spool and state), and:
#   1. submits the batch script with `sbatch --wait` for a short run with 2 agents, each with its own convoy_sim
#      (CONVOY_SIM=convoy_sim, the AirSim path): the job succeeds, convoy_ps wrote checkpoints, each agent
#      logged its run and its metrics, and everything ran over TLS with a generated token that no log shows;
#   2. submits it again (embedded simulators, a bearer token in CONVOY_AUTH_TOKEN) on the same run directory and
#      requeues it while it trains (`scontrol requeue`, the way a preemption stops a job): convoy_ps requires
#      the token and writes a checkpoint on SIGTERM, both starts resume (--resume) from the newest checkpoint,
#      and the version only grows; each agent resumes its replay memory at both starts (its first start in job 1
#      found none); meanwhile a real Prometheus scrapes the server and both agents through the file_sd targets
#      the job writes, and the job removes them when it ends.
# It stops the daemons it started. It needs root; without root it exits 77, which CTest reports as skipped.
set -uo pipefail

REPO="${1:?repository root}"
BIN="${2:?binary directory}"
SKIP=77
# shellcheck source=../support/slurm_policy.sh
. "$(dirname "$0")/../support/slurm_policy.sh"

say() { printf 'slurm_test: %s\n' "$*"; }
fail() {
  say "FAIL: $*"
  exit 1
}

if [ "$(id -u)" -ne 0 ]; then
  say "SKIP: needs root, to install slurm-wlm and munge and to run munged, slurmctld and slurmd"
  exit $SKIP
fi
for b in convoy_ps convoy_agent; do [ -x "$BIN/$b" ] || fail "$BIN/$b is not built"; done

export DEBIAN_FRONTEND=noninteractive
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v sbatch >/dev/null ||
  ! command -v munged >/dev/null; then
  say "installing slurm-wlm and munge from Debian"
  timeout 600 apt-get update -qq || fail "apt-get update failed"
  timeout 600 apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null ||
    fail "apt-get install slurm-wlm munge failed"
fi
PATH="$PATH:/usr/sbin:/sbin"

T="$(mktemp -d /tmp/convoy-slurm-test.XXXXXX)"
chmod 0700 "$T"
PIDS=()
cleanup() {
  local rc=$?
  # Stop only what this test started, newest first; slurmd before slurmctld before munged.
  if [ -n "${SLURM_CONF:-}" ] && command -v scancel >/dev/null; then scancel --full --quiet -u root 2>/dev/null; fi
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
    kill -TERM "${PIDS[i]}" 2>/dev/null
    for _ in $(seq 50); do kill -0 "${PIDS[i]}" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "${PIDS[i]}" 2>/dev/null
    wait "${PIDS[i]}" 2>/dev/null
  done
  if [ "$rc" -ne 0 ]; then
    for f in "$T"/log/*.log "$T"/job*.out; do
      [ -f "$f" ] && { say "---- $f (last 30 lines)"; tail -n 30 "$f"; }
    done
    for f in "$T"/run*/logs/*.log; do
      [ -f "$f" ] && { say "---- $f (last 15 lines)"; tail -n 15 "$f"; }
    done
  fi
  if [ -n "${CONVOY_KEEP_TEST_DIR:-}" ]; then say "kept $T"; else rm -rf "$T"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'say "stopped by a signal"; exit 1' TERM INT
# Clean up before CTest's TIMEOUT (900 s) would kill this script and leave the daemons running. (A trapped
# signal waits for the running command, sbatch --wait included, which its own timeout bounds at 300 s.)
(
  trap 'kill "$sleeper" 2>/dev/null; exit 0' TERM
  sleep "${CONVOY_SLURM_TEST_DEADLINE:-540}" &
  sleeper=$!
  wait "$sleeper" && kill -TERM $$
) >/dev/null 2>&1 &
PIDS+=($!)

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

mkdir -p "$T/munge" "$T/log" "$T/state" "$T/spool"
chmod 0755 "$T/munge"

# munge: a key and a socket of our own, so a munged already on this machine is left alone.
dd if=/dev/urandom of="$T/munge/munge.key" bs=1024 count=1 status=none
chmod 0400 "$T/munge/munge.key"
munged -F --force --key-file="$T/munge/munge.key" --socket="$T/munge/socket" \
  --pid-file="$T/munge/munged.pid" --seed-file="$T/munge/seed" --log-file="$T/log/munged.log" &
PIDS+=($!)
for _ in $(seq 100); do [ -S "$T/munge/socket" ] && break; sleep 0.1; done
[ -S "$T/munge/socket" ] || fail "munged did not start"

HOST="$(hostname -s)"
CTLD_PORT="$(free_port)"
SLURMD_PORT="$(free_port)"
cat >"$T/slurm.conf" <<EOF
ClusterName=convoytest
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
AuthInfo=socket=$T/munge/socket
StateSaveLocation=$T/state
SlurmdSpoolDir=$T/spool
SlurmctldPidFile=$T/slurmctld.pid
SlurmdPidFile=$T/slurmd.pid
SlurmctldLogFile=$T/log/slurmctld.log
SlurmdLogFile=$T/log/slurmd.log
EOF
convoy_slurm_policy >>"$T/slurm.conf"
cat >>"$T/slurm.conf" <<EOF
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=2 State=UNKNOWN
PartitionName=convoytest Nodes=$HOST Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$T/slurm.conf"

slurmctld -D -i -f "$SLURM_CONF" >"$T/log/slurmctld.out" 2>&1 &
PIDS+=($!)
slurmd -D -f "$SLURM_CONF" -N "$HOST" >"$T/log/slurmd.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 120); do
  state="$(sinfo -h -o %T 2>/dev/null)"
  [ "$state" = idle ] && break
  sleep 0.5
done
[ "${state:-}" = idle ] || fail "the node did not come up idle (sinfo: ${state:-nothing})"
say "one-node cluster up: $HOST, CPUs=2, slurmctld :$CTLD_PORT, slurmd :$SLURMD_PORT"

RUN="$T/run"
COMMON_ENV="ALL,CONVOY_HOME=$REPO,CONVOY_BIN=$BIN,CONVOY_RUN_DIR=$RUN,CONVOY_MODEL=compact"
PS_FLAGS="--checkpoint_every_updates=20 --checkpoint_every_seconds=0 --keep_checkpoints=3 --batch_size=16"
AGENT_FLAGS="--min_replay_size=64 --replay_memory_size=2000 --report_seconds=2 --max_minutes=3"

newest_version() {
  local newest
  newest="$(ls "$RUN/checkpoints" 2>/dev/null | grep '^ckpt-' | sort | tail -n 1)"
  [ -n "$newest" ] || { echo 0; return; }
  grep -m1 -o '^version: [0-9]*' "$RUN/checkpoints/$newest/MANIFEST" | awk '{print $2}'
}

# 1. A short run, start to finish, each agent driving its own convoy_sim over the AirSim protocol.
SIM_PORT="$(free_port)"
SIM_ENV="CONVOY_SIM=convoy_sim,CONVOY_SIM_BASE_PORT=$SIM_PORT"
say "job 1: sbatch --wait, 2 agents with a convoy_sim each, 300 steps each"
start=$SECONDS
timeout 300 sbatch --wait --parsable --nodes=1 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1 --time=10 \
  --output="$T/job1.out" \
  --export="$COMMON_ENV,CONVOY_PS_FLAGS=$PS_FLAGS,CONVOY_AGENT_FLAGS=$AGENT_FLAGS --max_steps=300,$SIM_ENV" \
  "$REPO/deploy/slurm/convoy.sbatch" >"$T/job1.id"
rc=$?
[ "$rc" -eq 0 ] || fail "job 1 (sbatch --wait) exited $rc"
say "job 1 ($(cat "$T/job1.id")) finished in $((SECONDS - start)) s"
[ ! -e "$RUN/prometheus_targets.json" ] || fail "job 1 left its Prometheus targets behind"

ls "$RUN/checkpoints" | grep -q '^ckpt-' || fail "no checkpoint in $RUN/checkpoints"
V1="$(newest_version)"
[ "$V1" -gt 0 ] || fail "the newest checkpoint is at version $V1; the agents' pushes were not applied"
grep -q 'final checkpoint' "$RUN/logs/ps.log" || fail "convoy_ps logged no final checkpoint"
for i in 0 1; do
  log="$RUN/logs/agent-$i.log"
  [ -s "$log" ] || fail "no log for agent $i ($log)"
  grep -q "\[agent-$i\] done:.* 300 steps" "$log" || fail "agent $i did not log a finished 300-step run"
  grep -q 'convoy_agent exited 0' "$log" || fail "agent $i did not exit 0"
  grep -q "sim airsim://127.0.0.1:$((SIM_PORT + i))\$" "$log" || fail "agent $i did not drive its convoy_sim"
  [ -s "$RUN/agents/agent-$i/episodes.csv" ] || fail "agent $i wrote no episodes.csv"
  grep -q "agent agent-$i (index $i) joined" "$RUN/logs/ps.log" || fail "agent $i never joined the PS"
done
# Secure by default: the batch script generated a certificate and a token in the run directory, and the PS served
# TLS and required the token; the token never reached a log.
for f in tls.crt tls.key ca.crt auth_token; do [ -s "$RUN/auth/$f" ] || fail "no $f in $RUN/auth"; done
for f in tls.key auth_token; do
  [ "$(stat -c %a "$RUN/auth/$f")" = 600 ] || fail "$RUN/auth/$f is mode $(stat -c %a "$RUN/auth/$f"), not 600"
done
grep -q '(TLS, bearer token)$' "$RUN/logs/ps.log" || fail "job 1's convoy_ps did not serve TLS with a token"
if grep -rqF "$(cat "$RUN/auth/auth_token")" "$RUN/logs" "$T/job1.out"; then fail "the token appears in a log"; fi
say "job 1: checkpoints up to version $V1, both agents ran 300 steps on their simulators over TLS and logged them"

# 2. The same run directory again, requeued mid-run like a preempted job.
# The bearer token reaches the PS and every agent through the job's environment.
TOKEN_ENV="CONVOY_AUTH_TOKEN=slurm-test-$RANDOM$RANDOM"
say "job 2: resumes from version $V1, with a bearer token; requeued while training"
start=$SECONDS
# While it runs, a real Prometheus scrapes it through the file_sd file the batch script writes (rewritten by the
# requeued start): the server and both agents scraped, the server's version and the agents' train steps counted
# (tests/deploy/prometheus_harness.py). The job's two starts last about 10 s each, so the job is submitted only once
# Prometheus answers, and requeued only once the check is through (or has given up): on a loaded machine
# Prometheus's own start took longer than the whole job.
/usr/bin/python3 "$REPO/tests/deploy/prometheus_harness.py" check "$RUN/prometheus_targets.json" \
  "$REPO/deploy/monitoring/convoy-alerts.yml" "$T/prometheus" convoy-ps=1 convoy-agent=2 -- \
  'convoy_ps_version > 0' 'convoy_ps_agents_connected == 2' 'convoy_agent_train_steps_total > 0' \
  >"$T/prometheus.out" 2>&1 &
PROM_PID=$!
for _ in $(seq 120); do
  grep -q '^prometheus: ready$' "$T/prometheus.out" && break
  kill -0 "$PROM_PID" 2>/dev/null || break
  sleep 0.5
done
JOB2="$(sbatch --parsable --nodes=1 --ntasks=2 --ntasks-per-node=2 --cpus-per-task=1 --time=10 --output="$T/job2.out" \
  --export="$COMMON_ENV,CONVOY_PS_FLAGS=$PS_FLAGS,CONVOY_AGENT_FLAGS=$AGENT_FLAGS --max_steps=900,$TOKEN_ENV" \
  "$REPO/deploy/slurm/convoy.sbatch")" || fail "sbatch of job 2 failed"
for _ in $(seq 240); do
  [ "$(newest_version)" -ge $((V1 + 40)) ] && ! kill -0 "$PROM_PID" 2>/dev/null && break
  sleep 0.5
done
V_BEFORE="$(newest_version)"
[ "$V_BEFORE" -ge $((V1 + 40)) ] || fail "job 2 made no progress past version $V1 in 120 s"
scontrol requeue "$JOB2" || fail "scontrol requeue $JOB2 failed"
say "requeued job $JOB2 at checkpoint version $V_BEFORE"
# Slurm holds a requeued job back (BeginTime two minutes on); make it eligible as soon as it is pending again.
job_field() { scontrol show job "$JOB2" -o 2>/dev/null | grep -o "$1=[^ ]*" | cut -d= -f2; }
for _ in $(seq 120); do
  state="$(job_field JobState)"
  [ "$state" = RUNNING ] && [ "$(job_field Restarts)" -ge 1 ] && break
  if [ "$state" = PENDING ]; then
    scontrol update jobid="$JOB2" starttime=now >>"$T/log/scontrol.log" 2>&1
  fi
  sleep 0.5
done
for _ in $(seq 480); do
  state="$(scontrol show job "$JOB2" -o 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)"
  case "$state" in COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY) break ;; esac
  sleep 0.5
done
[ "$state" = COMPLETED ] || fail "job 2 ended $state"
say "job 2 finished in $((SECONDS - start)) s"

# Job 1's start and job 2's two starts, all TLS with a token (job 2's from CONVOY_AUTH_TOKEN).
[ "$(grep -c '(TLS, bearer token)$' "$RUN/logs/ps.log")" -eq 3 ] || fail "job 2's convoy_ps starts did not serve TLS with the token"
grep -q 'the bearer token from CONVOY_AUTH_TOKEN' "$T/job2.out" || fail "job 2 did not take its token from CONVOY_AUTH_TOKEN"
if grep -rqF "${TOKEN_ENV#CONVOY_AUTH_TOKEN=}" "$RUN/logs" "$T/job2.out"; then fail "job 2's token appears in a log"; fi
restarts="$(grep -c 'resumed from' "$RUN/logs/ps.log")"
[ "$restarts" -ge 2 ] || fail "convoy_ps resumed $restarts times; expected job 2's first start and its requeued start"
grep -q 'start 2 (SLURM_RESTART_COUNT=1)' "$T/job2.out" || fail "job 2 did not restart after the requeue"
grep -q "resumed from .* at version $V1\$" "$RUN/logs/ps.log" || fail "job 2 did not resume from version $V1"
V2="$(newest_version)"
[ "$V2" -gt "$V_BEFORE" ] || fail "after the requeue the version did not grow ($V_BEFORE -> $V2)"
V_RESUMED="$(grep 'resumed from' "$RUN/logs/ps.log" | tail -n 1 | grep -o '[0-9]*$')"
[ "$V_RESUMED" -ge "$V_BEFORE" ] || fail "the requeued start resumed at $V_RESUMED, before the requeue's $V_BEFORE"
say "job 2: resumed at $V1, requeued at $V_BEFORE, resumed again and ended at $V2"
# Each agent came back with its replay memory: job 2's first start from job 1's end, its requeued start from what
# the requeue's SIGTERM saved; --max_steps counts over all three (job 1's 300 steps included).
for i in 0 1; do
  log="$RUN/logs/agent-$i.log"
  grep -q "agent-$i: no replay checkpoint at $RUN/replay/agent-$i.replay" "$log" ||
    fail "agent $i's first start in job 1 did not start with an empty replay memory"
  resumed="$(grep -c "agent-$i: resumed from $RUN/replay/agent-$i.replay" "$log")"
  [ "$resumed" -eq 2 ] || fail "agent $i resumed its replay memory $resumed times; expected job 2's two starts"
  steps="$(grep "agent-$i: resumed from" "$log" | tail -n 1 | grep -o '[0-9]* steps' | grep -o '[0-9]*')"
  [ "${steps:-0}" -gt 300 ] || fail "agent $i's requeued start resumed at ${steps:-no} steps, not past job 1's 300"
  grep -q "\[agent-$i\] done:.* 900 steps" "$log" || fail "agent $i did not end job 2 at 900 steps in all"
done
say "job 2: both agents resumed their replay memories at both starts and ended at 900 steps in all"
wait "$PROM_PID"
prom_rc=$?
cat "$T/prometheus.out"
case "$prom_rc" in
  0) say "job 2: Prometheus scraped its server and both agents through the job's file_sd targets" ;;
  77) say "job 2: not scraped by Prometheus (no prometheus package)" ;;
  *) fail "job 2: Prometheus did not scrape it through its file_sd targets (exit $prom_rc)" ;;
esac
[ ! -e "$RUN/prometheus_targets.json" ] || fail "job 2 left its Prometheus targets behind"
say "PASS"
