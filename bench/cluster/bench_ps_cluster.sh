#!/usr/bin/env bash
# Push+pull cycles/s of one convoy_ps across real (shaped) links: convoy_ps on node 0 of a cluster of
# network-namespace nodes (tests/cluster/cluster.sh), convoy_bench_ps clients spread over the other nodes,
# at link rates where the link and not this machine's cores is the bound. Beside each figure, the limit the
# links set and the fraction of it reached. Not a test; it prints a table and RESULT lines
# (docs/benchmarks.md, "Across links"). Needs root.
#
#   bench/cluster/bench_ps_cluster.sh [--links=1gbit,2.5gbit] [--clients=4,8,16] [--client_nodes=4]
#                                     [--seconds=5] [--model=cookbook] [--bin=build/bin]
#
# The limit: every cycle pushes a gradient into node 0 and pulls the weights out of it, so node 0's link
# carries each cycle once each way. The links are full duplex (tbf shapes each direction at the rate), so
# limit = link bytes/s / max(push bytes, pull bytes). With a sharded server (more PS nodes) each shard's link
# carries its slice: --ps_nodes is where that goes; today convoy_ps is one process, and only 1 is accepted.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
CLUSTER="$ROOT/tests/cluster/cluster.sh"
LINKS=1gbit,2.5gbit
CLIENTS=4,8,16
CLIENT_NODES=4
SECONDS_EACH=5
MODEL=cookbook
BIN="$ROOT/build/bin"
PS_NODES=1
NAME=cvbench
for a in "$@"; do
  case "$a" in
    --links=*) LINKS=${a#*=} ;;
    --clients=*) CLIENTS=${a#*=} ;;
    --client_nodes=*) CLIENT_NODES=${a#*=} ;;
    --seconds=*) SECONDS_EACH=${a#*=} ;;
    --model=*) MODEL=${a#*=} ;;
    --bin=*) BIN=${a#*=} ;;
    --ps_nodes=*) PS_NODES=${a#*=} ;;
    *) echo "bench_ps_cluster: unknown argument '$a' (see the header of $0)" >&2; exit 2 ;;
  esac
done
[ "$PS_NODES" = 1 ] || { echo "bench_ps_cluster: --ps_nodes=$PS_NODES: convoy_ps is one server today" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || { echo "bench_ps_cluster: needs root (network namespaces)" >&2; exit 2; }
for b in convoy_ps convoy_bench_ps; do [ -x "$BIN/$b" ] || { echo "bench_ps_cluster: $BIN/$b is not built" >&2; exit 2; }; done

T=$(mktemp -d /tmp/convoy-bench-cluster.XXXXXX)
trap '"$CLUSTER" down --name="$NAME" >/dev/null 2>&1; rm -rf "$T"' EXIT
IFS=',' read -ra link_list <<<"$LINKS"
IFS=',' read -ra client_list <<<"$CLIENTS"
node() { "$CLUSTER" --name="$NAME" exec "$@"; }

results=()
printf '\n%-8s %7s %6s %11s %12s %9s %10s\n' link clients nodes cycles/s "limit c/s" fraction "p50 ms"
for link in "${link_list[@]}"; do
  "$CLUSTER" down --name="$NAME" >/dev/null 2>&1
  "$CLUSTER" up $((CLIENT_NODES + 1)) --link="$link" --name="$NAME" >/dev/null 2>&1
  addr=$("$CLUSTER" --name="$NAME" addr 0)
  node 0 "$BIN/convoy_ps" --model="$MODEL" --bind="$addr" --port=50051 --port_file="$T/ps.port" --insecure \
    >"$T/ps-$link.log" 2>&1 &
  ps_pid=$!
  for _ in $(seq 600); do [ -s "$T/ps.port" ] && break; sleep 0.1; done
  [ -s "$T/ps.port" ] || { echo "bench_ps_cluster: convoy_ps did not start (see $T/ps-$link.log)" >&2; exit 1; }
  link_bits=$(python3 -c "
import re, sys
m = re.fullmatch(r'([0-9.]+)(bit|kbit|mbit|gbit)', sys.argv[1])
print(int(float(m.group(1)) * {'bit': 1, 'kbit': 1e3, 'mbit': 1e6, 'gbit': 1e9}[m.group(2)]))" "$link")
  for clients in "${client_list[@]}"; do
    # Clients spread over the client nodes, as evenly as they go; a node given none sits this one out.
    pids=()
    used=0
    for ((j = 1; j <= CLIENT_NODES; j++)); do
      share=$(((clients + CLIENT_NODES - j) / CLIENT_NODES))
      [ "$share" -gt 0 ] || continue
      used=$((used + 1))
      node "$j" "$BIN/convoy_bench_ps" --ps="$addr:50051" --insecure --model="$MODEL" --clients="$share" \
        --encodings=fp32 --seconds="$SECONDS_EACH" --warmup_seconds=1 --tcp_bytes=$((64 << 20)) \
        --tcp_repeats=1 --apply_seconds=0.2 >"$T/client-$link-$clients-$j.out" 2>&1 &
      pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || { echo "bench_ps_cluster: a client failed" >&2; exit 1; }; done
    read -r cycles p50 bytes_push bytes_pull < <(python3 - "$T" "$link" "$clients" <<'PY'
import glob, re, statistics, sys
t, link, clients = sys.argv[1:]
cycles, p50s = 0.0, []
push = pull = 0.0
for path in sorted(glob.glob(f"{t}/client-{link}-{clients}-*.out")):
    text = open(path).read()
    r = dict(re.findall(r"^RESULT (\S+)=(\S+)$", text, re.M))
    share = [k for k in r if k.startswith("cycles_per_s_")][0]
    cycles += float(r[share])
    p50s.append(float(r["p50_ms_" + share.rsplit("_", 1)[1]]))
    push = float(r.get("push_bytes", r.get("bytes_per_push", 0)) or 0)
    pull = float(r.get("pull_bytes", r.get("bytes_per_pull", 0)) or 0)
    if not push:
        params = float(r["parameters"])
        push = pull = params * 4
print(cycles, statistics.median(p50s), push, pull)
PY
)
    limit=$(python3 -c "print($link_bits / 8 / max($bytes_push, $bytes_pull))")
    fraction=$(python3 -c "print($cycles / $limit)")
    printf '%-8s %7d %6d %11.1f %12.1f %9.3f %10.1f\n' "$link" "$clients" "$used" "$cycles" "$limit" \
      "$fraction" "$p50"
    key=$(echo "$link" | tr -d '.')
    results+=("RESULT cycles_per_s_${key}_${clients}=$(printf %.4g "$cycles")"
      "RESULT limit_${key}=$(printf %.4g "$limit")"
      "RESULT fraction_of_limit_${key}_${clients}=$(printf %.3f "$fraction")")
  done
  kill -TERM "$ps_pid" 2>/dev/null
  wait "$ps_pid" 2>/dev/null || true
  rm -f "$T/ps.port"
  "$CLUSTER" down --name="$NAME" >/dev/null 2>&1
done
echo
printf '%s\n' "${results[@]}" | sort -u
