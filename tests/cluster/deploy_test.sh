#!/usr/bin/env bash
# The real deploy/slurm/convoy.sbatch, unchanged, on a three-node cluster of network namespaces
# (tests/cluster/cluster.sh) with 1 Gbit/s links and Slurm across the nodes:
#   sbatch --wait --nodes=3 --ntasks-per-node=1: convoy_ps alone on the first node, an agent on each of the
#   other two, each agent driving its own convoy_sim on its node over the AirSim protocol, TLS and a bearer
#   token as a cluster run has them.
# Checks: the job succeeds; each agent ran on the node Slurm gave it (its log, and convoy_ps's GetStatus
# summary, name that node) and no agent on the PS's node; the agents joined over TLS with the token; the
# newest checkpoint verifies against its manifest's SHA-256s; the PS node's link carried at least the bytes
# convoy_ps counted on the wire, and each agent node's link carried traffic.
#
#   deploy_test.sh REPO_ROOT BIN_DIR
#
# Needs root, network namespaces, slurm-wlm and munge; without them it exits 77 (CTest: Skipped).
set -uo pipefail

REPO="${1:?repository root}"
BIN="${2:?binary directory}"
HERE="$(cd "$(dirname "$0")" && pwd)"
CLUSTER="$HERE/cluster.sh"
NAME=cvdeploy
SKIP=77
PATH="$PATH:/usr/sbin:/sbin"

say() { printf 'cluster deploy_test: %s\n' "$*"; }
fail() {
  say "FAIL: $*"
  exit 1
}

if [ "$(id -u)" -ne 0 ]; then
  say "SKIP: needs root, for network namespaces and the Slurm daemons"
  exit $SKIP
fi
for tool in slurmctld slurmd munged sbatch; do
  command -v "$tool" >/dev/null || { say "SKIP: $tool is not installed (Debian: slurm-wlm, munge)"; exit $SKIP; }
done
if ! ip netns add "${NAME}-probe" 2>/dev/null; then
  say "SKIP: this machine cannot make network namespaces (ip netns add failed)"
  exit $SKIP
fi
ip netns del "${NAME}-probe"
for b in convoy_ps convoy_agent convoy_sim; do [ -x "$BIN/$b" ] || fail "$BIN/$b is not built"; done

T="$(mktemp -d /tmp/convoy-cluster-deploy.XXXXXX)"
chmod 0755 "$T"
cleanup() {
  local rc=$?
  if [ "$rc" -ne 0 ]; then
    for f in /run/convoy-cluster/"$NAME"/slurm/log/slurmctld.log "$T"/job.out "$T"/run/logs/*.log; do
      [ -f "$f" ] && { say "---- $f (last 25 lines)"; tail -n 25 "$f"; }
    done
  fi
  "$CLUSTER" down --name="$NAME" >/dev/null 2>&1
  if [ -n "${CONVOY_KEEP_TEST_DIR:-}" ]; then say "kept $T"; else rm -rf "$T"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'say "stopped by a signal"; exit 1' TERM INT

"$CLUSTER" down --name="$NAME" >/dev/null 2>&1  # What a killed earlier run left.
"$CLUSTER" up 3 --link=1gbit --name="$NAME" || fail "cluster up"
SLURM_CONF="$("$CLUSTER" --name="$NAME" slurm-up)" || fail "slurm-up"
export SLURM_CONF
node_bytes() {  # Bytes both ways on node $1's link, counted at its bridge port.
  local dev="$NAME-h$1"
  echo $(($(cat /sys/class/net/"$dev"/statistics/rx_bytes) + $(cat /sys/class/net/"$dev"/statistics/tx_bytes)))
}
BEFORE=("$(node_bytes 0)" "$(node_bytes 1)" "$(node_bytes 2)")

RUN="$T/run"
PS_FLAGS="--checkpoint_every_updates=20 --checkpoint_every_seconds=0 --keep_checkpoints=3 --batch_size=16"
AGENT_FLAGS="--min_replay_size=64 --replay_memory_size=2000 --report_seconds=2 --max_minutes=3 --max_steps=300"
say "sbatch --wait --nodes=3: convoy_ps on $NAME-0, an agent with its convoy_sim on $NAME-1 and $NAME-2"
start=$SECONDS
timeout 400 sbatch --wait --parsable --nodes=3 --ntasks-per-node=1 --cpus-per-task=1 --time=10 \
  --output="$T/job.out" \
  --export="ALL,CONVOY_HOME=$REPO,CONVOY_BIN=$BIN,CONVOY_RUN_DIR=$RUN,CONVOY_MODEL=compact,CONVOY_PS_FLAGS=$PS_FLAGS,CONVOY_AGENT_FLAGS=$AGENT_FLAGS,CONVOY_SIM=convoy_sim,CONVOY_SIM_BASE_PORT=41451" \
  "$REPO/deploy/slurm/convoy.sbatch" >"$T/job.id"
rc=$?
[ "$rc" -eq 0 ] || fail "the job (sbatch --wait) exited $rc"
say "job $(cat "$T/job.id") finished in $((SECONDS - start)) s"

grep -q "PS on $NAME-0 (10\.213\.[0-9]*\.1), 2 agents" "$T/job.out" || fail "the job did not put convoy_ps on $NAME-0"
PS_LOG="$RUN/logs/ps.log"
grep -q '(TLS, bearer token)$' "$PS_LOG" || fail "convoy_ps did not serve TLS with a token"
status_line=$(grep 'final status:' "$PS_LOG" | tail -n 1)
[ -n "$status_line" ] || fail "convoy_ps logged no final status"
say "convoy_ps: ${status_line#*final status: }"
nodes_used=()
for i in 0 1; do
  log="$RUN/logs/agent-$i.log"
  [ -s "$log" ] || fail "no log for agent $i ($log)"
  node=$(grep -o 'agent_task\[[0-9]*\]: node [^,]*' "$log" | head -n 1 | awk '{print $NF}')
  [[ "$node" =~ ^$NAME-[12]$ ]] || fail "agent $i ran on '${node:-?}', not on one of the agent nodes $NAME-1, $NAME-2"
  grep -q "\[agent-$i\] done:.* 300 steps" "$log" || fail "agent $i did not log a finished 300-step run"
  grep -q 'convoy_agent exited 0' "$log" || fail "agent $i did not exit 0"
  # One agent per node, so LOCAL_RANK 0 on each: its convoy_sim is on the base port of its own node.
  grep -q "sim airsim://127.0.0.1:41451\$" "$log" || fail "agent $i did not drive its own convoy_sim"
  grep -q "convoy_sim listening on 127.0.0.1:41451" "$log" || fail "agent $i's convoy_sim did not start"
  grep -q "agent agent-$i (index $i) joined from $node" "$PS_LOG" || fail "agent $i's join did not come from $node"
  [[ "$status_line" == *"agent-$i@$node ("* ]] || fail "GetStatus does not place agent $i on $node"
  nodes_used+=("$node")
done
[ "${nodes_used[0]}" != "${nodes_used[1]}" ] || fail "both agents ran on ${nodes_used[0]}"
say "agents on ${nodes_used[*]}, as Slurm placed them; convoy_ps on $NAME-0"

# The newest checkpoint, file by file against its manifest.
newest=$(ls "$RUN/checkpoints" | grep '^ckpt-' | sort | tail -n 1)
[ -n "$newest" ] || fail "no checkpoint in $RUN/checkpoints"
python3 - "$RUN/checkpoints/$newest" <<'PY' || fail "checkpoint $newest does not verify"
import hashlib, os, re, sys
d = sys.argv[1]
text = open(os.path.join(d, "MANIFEST")).read()
files = re.findall(r'files\s*\{\s*name:\s*"([^"]+)"\s*size:\s*(\d+)\s*sha256:\s*"([0-9a-f]+)"\s*\}', text)
assert {f[0] for f in files} >= {"weights.pt", "target.pt", "optimizer.pt"}, files
for name, size, digest in files:
    data = open(os.path.join(d, name), "rb").read()
    assert len(data) == int(size), (name, len(data), size)
    assert hashlib.sha256(data).hexdigest() == digest, name
print(f"cluster deploy_test: {os.path.basename(d)}: {len(files)} files match their manifest")
PY

# Bytes: everything convoy_ps sent and received crossed node 0's link, with TLS and TCP on top.
wire=$(sed -E 's/.*bytes in ([0-9]+) out ([0-9]+).*/\1 \2/' <<<"$status_line" | awk '{print $1 + $2}')
link0=$(($(node_bytes 0) - BEFORE[0]))
link1=$(($(node_bytes 1) - BEFORE[1]))
link2=$(($(node_bytes 2) - BEFORE[2]))
say "bytes: convoy_ps counted $wire on the wire; links carried node0 $link0, node1 $link1, node2 $link2"
[ "$wire" -gt 0 ] || fail "convoy_ps counted no bytes"
[ "$link0" -ge "$wire" ] || fail "node 0's link carried $link0 bytes, fewer than the $wire convoy_ps counted"
[ $((link1 + link2)) -ge "$wire" ] || fail "the agents' links carried $((link1 + link2)), fewer than $wire"
say "ok"
