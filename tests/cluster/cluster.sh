#!/usr/bin/env bash
# A cluster made of this one machine: N nodes, each a network namespace with its own hostname (a UTS
# namespace), its own address and a veth into a bridge this script creates, every link shaped with tc.
# Usable by hand and by the cluster tests (docs/testing.md, "The cluster harness").
#
# Run it without arguments for its commands (usage below).
#
# Rules it keeps: it never adds an address or a route to an interface it did not create and never changes
# the host's own network settings; the only addresses it uses are in a /24 that no route of the host's
# overlaps, on its own bridge; the only traffic is between its namespaces and the bridge's root-namespace end.
# `down` removes what an earlier run of the same NAME left behind, even without its state file, by name.
#
# Latency and loss: netem is the tool for them, and `up` applies --delay/--loss with it where the kernel has
# the netem qdisc. A kernel without netem (tc says "Specified qdisc kind is unknown") gets bandwidth only,
# and `up` says so.
set -euo pipefail

NAME=cvc
RATE=1gbit
DELAY=""
LOSS=""
STATE_ROOT=/run/convoy-cluster
# shellcheck source=../support/slurm_policy.sh
. "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/../support/slurm_policy.sh"

say() { printf 'cluster: %s\n' "$*" >&2; }

usage() {
  cat >&2 <<'USAGE'
cluster.sh: a cluster of network-namespace nodes on this machine.

  cluster.sh up N [--link=RATE] [--delay=T --loss=P] [--name=NAME]
                                      make nodes NAME-0 .. NAME-(N-1) (RATE in tc units: 1gbit, 500mbit)
  cluster.sh down [--name=NAME]       remove every namespace, link and bridge of NAME
  cluster.sh exec NODE CMD...         run CMD on node NODE (0-based), in its network and UTS namespaces
  cluster.sh addr NODE                print node NODE's address
  cluster.sh partition NODE down      its link down: its peers get errors at once
  cluster.sh partition NODE silent    its packets vanish, as when a switch dies
  cluster.sh heal NODE                the link up and shaped as before (at --link)
  cluster.sh link NODE RATE           reshape node NODE's link, both ways, at RATE (a heal goes back to --link)
  cluster.sh check-links [SECONDS]    iperf3 node 1 -> node 0; fails outside +-15% of RATE
  cluster.sh status                   the nodes, their addresses and qdiscs
  cluster.sh slurm-up                 munged, slurmctld (root namespace, on the bridge) and one slurmd per
                                      node (NodeName/NodeAddr each); prints the SLURM_CONF to export
  cluster.sh slurm-down               stops them (down does too)

NAME defaults to cvc. Needs root.
USAGE
}
die() {
  say "$*"
  exit 1
}

need_root() { [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, veths, tc)"; }

# Names: the kernel allows 15 characters for an interface.
bridge_name() { echo "${NAME}-br"; }
host_veth() { echo "${NAME}-h$1"; }
node_veth() { echo "${NAME}-n$1"; }
netns_name() { echo "${NAME}-$1"; }
uts_file() { echo "$STATE_ROOT/$NAME/uts-$1"; }
state_file() { echo "$STATE_ROOT/$NAME/state"; }

load_state() {
  [ -f "$(state_file)" ] || die "no cluster '$NAME' is up (no $(state_file))"
  # shellcheck disable=SC1090
  . "$(state_file)"
}

# A 10.x.y.0/24 that no route of the host's overlaps: 10.213.y, the first y free of any route in 10/8.
pick_subnet() {
  local routes y
  routes=$(ip -4 route show table all 2>/dev/null | awk '{print $1}')
  for y in $(seq 0 255); do
    if ! grep -qE "^10\.213\.$y\.|^10\.213\.0\.0/16|^10\.0\.0\.0/8" <<<"$routes"; then
      echo "10.213.$y"
      return
    fi
  done
  die "no free 10.213.y.0/24 for the cluster's bridge"
}

# tbf wants a bucket of at least rate/HZ bytes; a few ms of the rate, and never under 32 KiB.
burst_for() {
  local bits
  bits=$(tc_rate_bits "$1")
  local bytes=$((bits / 8 / 200))
  [ "$bytes" -lt 32768 ] && bytes=32768
  echo "$bytes"
}

# A tc rate ("1gbit", "500mbit", "2.5gbit", "800kbit", "10000bit") in bits per second.
tc_rate_bits() {
  python3 - "$1" <<'PY'
import re, sys
m = re.fullmatch(r"([0-9]*\.?[0-9]+)(bit|kbit|mbit|gbit)", sys.argv[1].lower())
if not m:
    sys.exit(f"cluster: --link={sys.argv[1]}: expected a rate such as 100mbit, 1gbit or 2.5gbit")
print(int(float(m.group(1)) * {"bit": 1, "kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[m.group(2)]))
PY
}

have_netem() {
  # Probed on a dummy link of our own, never on a real interface.
  local probe="${NAME}-probe"
  ip link add "$probe" type dummy 2>/dev/null || return 1
  local ok=1
  tc qdisc add dev "$probe" root netem delay 1ms 2>/dev/null && ok=0
  ip link del "$probe" 2>/dev/null || true
  return $ok
}

# Shapes one interface's egress (run inside the namespace for the node's end).
shape() {
  local run=("$@")
  local dev="${run[-1]}"
  unset 'run[-1]'
  "${run[@]}" tc qdisc replace dev "$dev" root handle 1: tbf rate "$RATE" burst "$(burst_for "$RATE")" \
    latency 100ms
  if [ -n "$DELAY$LOSS" ] && [ "${NETEM:-0}" = 1 ]; then
    "${run[@]}" tc qdisc replace dev "$dev" parent 1:1 handle 10: netem \
      ${DELAY:+delay "$DELAY"} ${LOSS:+loss "$LOSS"}
  fi
}

# A silent link: a token bucket of one packet refilled at 8 bit/s, with room for one packet in its queue:
# nothing more gets through, and nothing says so.
silence() {
  local run=("$@")
  local dev="${run[-1]}"
  unset 'run[-1]'
  "${run[@]}" tc qdisc replace dev "$dev" root handle 1: tbf rate 8bit burst 1600 limit 1
}

cmd_up() {
  local n=${1:?"usage: cluster.sh up N [--link=RATE]"}
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 32 ] || die "N must be 1..32, got '$n'"
  need_root
  tc_rate_bits "$RATE" >/dev/null
  if [ -f "$(state_file)" ]; then die "cluster '$NAME' is already up; 'cluster.sh down --name=$NAME' first"; fi
  cmd_down_quiet
  NETEM=0
  if [ -n "$DELAY$LOSS" ]; then
    if have_netem; then
      NETEM=1
    else
      say "this kernel has no netem qdisc: --delay/--loss are not applied, links are shaped for bandwidth only"
    fi
  fi
  local subnet br
  subnet=$(pick_subnet)
  br=$(bridge_name)
  mkdir -p "$STATE_ROOT/$NAME"
  # The state is written first, so that a failure half-way is cleaned up by `down`.
  cat >"$(state_file)" <<EOF
NODES=$n
SUBNET=$subnet
RATE=$RATE
NETEM=$NETEM
DELAY=$DELAY
LOSS=$LOSS
EOF
  ip link add "$br" type bridge
  ip addr add "$subnet.254/24" dev "$br"
  ip link set "$br" up
  local i
  for ((i = 0; i < n; i++)); do
    local ns hv nv uts
    ns=$(netns_name "$i") hv=$(host_veth "$i") nv=$(node_veth "$i") uts=$(uts_file "$i")
    ip netns add "$ns"
    ip link add "$hv" type veth peer name "$nv"
    ip link set "$nv" netns "$ns"
    ip link set "$hv" master "$br"
    ip link set "$hv" up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev "$nv"
    ip -n "$ns" link set "$nv" up
    # Its own hostname: a UTS namespace kept alive by a bind mount on a file of ours.
    touch "$uts"
    unshare --uts="$uts" hostname "$ns"
    shape "$hv"
    shape ip netns exec "$ns" "$nv"
  done
  say "up: $n nodes $(netns_name 0)..$(netns_name $((n - 1))) on $subnet.0/24, links $RATE each way"
}

# Removes everything named for NAME, whether or not a state file says it exists.
cmd_down_quiet() {
  slurm_stop
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${NAME}-[0-9]+$" || true); do
    # Processes still running on a node would keep its namespaces; they belong to the cluster.
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -KILL 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  local link
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' |
    grep -E "^${NAME}-(h[0-9]+|br|probe)$" || true); do
    ip link del "$link" 2>/dev/null || true
  done
  if [ -d "$STATE_ROOT/$NAME" ]; then
    local f
    for f in "$STATE_ROOT/$NAME"/uts-*; do
      [ -e "$f" ] || continue
      umount "$f" 2>/dev/null || true
      rm -f "$f"
    done
    rm -f "$(state_file)"
    rmdir "$STATE_ROOT/$NAME" 2>/dev/null || true
  fi
}

cmd_down() {
  need_root
  cmd_down_quiet
  say "down: nothing of '$NAME' is left"
}

node_index() {
  local i=${1:?node index}
  [[ "$i" =~ ^[0-9]+$ ]] && [ "$i" -lt "$NODES" ] || die "no node $i (the cluster has $NODES)"
  echo "$i"
}

cmd_exec() {
  load_state
  local i
  i=$(node_index "${1:-}")
  shift
  exec nsenter --net="/run/netns/$(netns_name "$i")" --uts="$(uts_file "$i")" -- "$@"
}

cmd_addr() {
  load_state
  local i
  i=$(node_index "${1:-}")
  echo "$SUBNET.$((i + 1))"
}

cmd_partition() {
  load_state
  need_root
  local i kind
  i=$(node_index "${1:-}")
  kind=${2:?"usage: cluster.sh partition NODE down|silent"}
  case "$kind" in
    down)
      ip link set "$(host_veth "$i")" down
      ip -n "$(netns_name "$i")" link set "$(node_veth "$i")" down
      ;;
    silent)
      silence "$(host_veth "$i")"
      silence ip netns exec "$(netns_name "$i")" "$(node_veth "$i")"
      ;;
    *) die "partition kind must be down or silent, got '$kind'" ;;
  esac
  say "node $i partitioned ($kind)"
}

cmd_heal() {
  load_state
  need_root
  local i ns nv
  i=$(node_index "${1:-}")
  ns=$(netns_name "$i") nv=$(node_veth "$i")
  ip link set "$(host_veth "$i")" up
  ip -n "$ns" link set "$nv" up
  # The address's route goes with the link; it comes back with it, but say it again for certainty.
  ip -n "$ns" route replace "$SUBNET.0/24" dev "$nv" 2>/dev/null || true
  shape "$(host_veth "$i")"
  shape ip netns exec "$ns" "$nv"
  say "node $i healed"
}

cmd_link() {
  load_state
  need_root
  local i ns
  i=$(node_index "${1:-}")
  RATE=${2:?"usage: cluster.sh link NODE RATE"}
  [[ "$RATE" =~ ^[0-9.]+(bit|kbit|mbit|gbit)$ ]] || die "RATE must be in tc units (500mbit, 1gbit), got '$RATE'"
  ns=$(netns_name "$i")
  shape "$(host_veth "$i")"
  shape ip netns exec "$ns" "$(node_veth "$i")"
  say "node $i's link shaped at $RATE"
}

# Waits until something listens on TCP `port` on node `node` (up to 5 s).
wait_listening() {
  local node=$1 port=$2
  for _ in $(seq 50); do
    if ip netns exec "$(netns_name "$node")" ss -Hltn "sport = :$port" | grep -q .; then return 0; fi
    sleep 0.1
  done
  return 1
}

# iperf3 from node 1 to node 0 for SECONDS; prints the measured and configured rates (and a RESULT line)
# and fails when the measurement is outside +-15% of the configured one.
cmd_check_links() {
  load_state
  local seconds=${1:-3}
  [ "$NODES" -ge 2 ] || die "check-links needs two nodes"
  command -v iperf3 >/dev/null || die "check-links needs iperf3 (Debian: iperf3)"
  local server_pid json
  json=$(mktemp)
  ip netns exec "$(netns_name 0)" timeout $((seconds + 30)) iperf3 --server --one-off \
    --bind "$SUBNET.1" >/dev/null 2>&1 &
  server_pid=$!
  if ! wait_listening 0 5201; then
    kill "$server_pid" 2>/dev/null || true
    rm -f "$json"
    die "iperf3 on node 0 did not start listening"
  fi
  local rc=0
  ip netns exec "$(netns_name 1)" timeout $((seconds + 20)) iperf3 --client "$SUBNET.1" \
    --time "$seconds" --omit 1 --json >"$json" || rc=$?
  wait "$server_pid" 2>/dev/null || true
  if [ "$rc" -ne 0 ]; then
    rm -f "$json"
    die "iperf3 from node 1 to node 0 failed (exit $rc)"
  fi
  rc=0
  python3 - "$RATE" "$(tc_rate_bits "$RATE")" "$json" <<'PY' || rc=$?
import json, sys
with open(sys.argv[3]) as f:
    result = json.load(f)
measured = result["end"]["sum_received"]["bits_per_second"]
configured = float(sys.argv[2])
ratio = measured / configured
print(f"link node1 -> node0: measured {measured / 1e6:.1f} Mbit/s, configured {sys.argv[1]} "
      f"({configured / 1e6:.1f} Mbit/s): {ratio:.3f} of it")
print(f"RESULT link_measured_mbit={measured / 1e6:.1f} link_configured_mbit={configured / 1e6:.1f} "
      f"link_ratio={ratio:.3f}")
sys.exit(0 if 0.85 <= ratio <= 1.15 else 1)
PY
  rm -f "$json"
  return "$rc"
}

slurm_dir() { echo "$STATE_ROOT/$NAME/slurm"; }

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'
}

# Stops what slurm-up started, by the pid files it wrote, then anything still running with a path of the
# cluster's slurm directory on its command line (a killed run's daemons). Node daemons also go with their
# namespaces.
slurm_stop() {
  local dir pidfile pid
  dir=$(slurm_dir)
  [ -d "$dir" ] || return 0
  for pidfile in "$dir"/slurmd-*.pid "$dir/slurmctld.pid" "$dir/munge/munged.pid"; do
    [ -f "$pidfile" ] || continue
    pid=$(cat "$pidfile" 2>/dev/null)
    [ -n "$pid" ] || continue
    kill -TERM "$pid" 2>/dev/null || continue
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  done
  pkill -KILL -f -- "$dir/" 2>/dev/null || true
  rm -rf "$dir"
}

# The partition's node list: NAME-0,NAME-1,...
node_list() {
  local i list=""
  for ((i = 0; i < NODES; i++)); do list+="${list:+,}$(netns_name "$i")"; done
  echo "$list"
}

write_slurm_conf() {
  local dir=$1
  cat <<CONF
ClusterName=$NAME
SlurmctldHost=$(hostname -s)($SUBNET.254)
SlurmctldPort=$(free_port)
SlurmdPort=6818
AuthInfo=socket=$dir/munge/socket
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
CONF
  convoy_slurm_policy
  local i
  for ((i = 0; i < NODES; i++)); do
    echo "NodeName=$(netns_name "$i") NodeAddr=$SUBNET.$((i + 1)) CPUs=$(nproc) State=UNKNOWN"
  done
  echo "PartitionName=$NAME Nodes=$(node_list) Default=YES MaxTime=INFINITE State=UP"
}

cmd_slurm_up() {
  load_state
  need_root
  command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null ||
    die "slurm-up needs slurmctld, slurmd and munged (Debian: slurm-wlm, munge)"
  local dir conf i
  dir=$(slurm_dir)
  conf="$dir/slurm.conf"
  [ -e "$conf" ] && die "slurm is already up on '$NAME' (SLURM_CONF=$conf)"
  mkdir -p "$dir/munge" "$dir/log" "$dir/state" "$dir/spool"
  chmod 0755 "$dir/munge"
  # munge: a key and a socket of the cluster's own. The socket is a path, so every namespace sees it.
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 0400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/socket" \
    --pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/seed" --log-file="$dir/log/munged.log" ||
    die "munged did not start ($dir/log/munged.log)"
  for _ in $(seq 100); do [ -S "$dir/munge/socket" ] && break; sleep 0.1; done
  [ -S "$dir/munge/socket" ] || die "munged made no socket"
  write_slurm_conf "$dir" >"$conf"
  # slurmctld in the root namespace, which the nodes reach at the bridge's address; a slurmd on every node,
  # in the node's namespaces and named as the node.
  SLURM_CONF="$conf" slurmctld -i -f "$conf" >"$dir/log/slurmctld.out" 2>&1 ||
    die "slurmctld did not start ($dir/log/slurmctld.log)"
  for ((i = 0; i < NODES; i++)); do
    mkdir -p "$dir/spool/$(netns_name "$i")"
    nsenter --net="/run/netns/$(netns_name "$i")" --uts="$(uts_file "$i")" -- \
      env SLURM_CONF="$conf" slurmd -f "$conf" -N "$(netns_name "$i")" >"$dir/log/slurmd-$i.out" 2>&1 ||
      die "slurmd on node $i did not start ($dir/log/slurmd-$(netns_name "$i").log)"
  done
  local idle=0
  for _ in $(seq 120); do
    idle=$(SLURM_CONF="$conf" sinfo -h -t idle -o %D 2>/dev/null | awk '{s += $1} END {print s + 0}')
    [ "$idle" = "$NODES" ] && break
    sleep 0.5
  done
  [ "$idle" = "$NODES" ] || die "only $idle of $NODES nodes came up idle (logs in $dir/log)"
  say "slurm up: slurmctld on $SUBNET.254, a slurmd on each of $NODES nodes; export SLURM_CONF=$conf"
  echo "$conf"
}

cmd_slurm_down() {
  need_root
  slurm_stop
  say "slurm down on '$NAME'"
}

cmd_status() {
  load_state
  echo "cluster $NAME: $NODES nodes on $SUBNET.0/24, links $RATE (netem: $NETEM)"
  local i
  for ((i = 0; i < NODES; i++)); do
    printf '  node %d  %-8s %s  %s\n' "$i" "$(netns_name "$i")" "$SUBNET.$((i + 1))" \
      "$(tc qdisc show dev "$(host_veth "$i")" | head -1)"
  done
}

main() {
  local args=()
  for a in "$@"; do
    case "$a" in
      --name=*) NAME=${a#--name=} ;;
      --link=*) RATE=${a#--link=} ;;
      --delay=*) DELAY=${a#--delay=} ;;
      --loss=*) LOSS=${a#--loss=} ;;
      *) args+=("$a") ;;
    esac
  done
  [[ "$NAME" =~ ^[a-z][a-z0-9]{0,7}$ ]] || die "--name must be 1-8 lower-case letters and digits, got '$NAME'"
  set -- "${args[@]}"
  local command=${1:-}
  [ $# -gt 0 ] && shift
  case "$command" in
    up) cmd_up "$@" ;;
    down) cmd_down ;;
    exec) cmd_exec "$@" ;;
    addr) cmd_addr "$@" ;;
    partition) cmd_partition "$@" ;;
    heal) cmd_heal "$@" ;;
    link) cmd_link "$@" ;;
    check-links) cmd_check_links "$@" ;;
    status) cmd_status ;;
    slurm-up) cmd_slurm_up ;;
    slurm-down) cmd_slurm_down ;;
    *)
      usage
      exit 2
      ;;
  esac
}

main "$@"
