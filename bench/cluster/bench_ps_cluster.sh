#!/usr/bin/env bash
# Push+pull cycles/s of a parameter server across real (shaped) links: convoy_ps on the first nodes of a
# cluster of network-namespace nodes (tests/cluster/cluster.sh), one shard per node (--ps_nodes, each a
# --num_shards list entry), convoy_bench_ps clients spread over the other nodes, at link rates where the PS
# nodes' links and not this machine's cores are the bound. Beside each figure, the limit the links set and
# the fraction of it reached. Not a test; it prints a table and RESULT lines (docs/benchmarks.md, "Across
# links"). Needs root.
#
#   bench/cluster/bench_ps_cluster.sh [--links=1gbit,2.5gbit] [--ps_nodes=1] [--clients=4,8,16]
#                                     [--client_nodes=4] [--client_link=RATE] [--seconds=5]
#                                     [--model=cookbook] [--bin=build/bin]
#
# The limit: every cycle pushes a gradient and pulls the weights, each shard's range over its node's link,
# so a PS node's link carries 1/N of each cycle once each way. The links are full duplex (tbf shapes each
# direction at the rate), so limit = N * link bytes/s / max(push bytes, pull bytes). The PS nodes' links
# are shaped at --links; the client nodes' at --client_link (default: the same), which should give the
# clients together more than all the shards have.
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
CLIENT_LINK=""
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
    --client_link=*) CLIENT_LINK=${a#*=} ;;
    *) echo "bench_ps_cluster: unknown argument '$a' (see the header of $0)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench_ps_cluster: needs root (network namespaces)" >&2; exit 2; }
for b in convoy_ps convoy_bench_ps; do [ -x "$BIN/$b" ] || { echo "bench_ps_cluster: $BIN/$b is not built" >&2; exit 2; }; done

T=$(mktemp -d /tmp/convoy-bench-cluster.XXXXXX)
trap '"$CLUSTER" down --name="$NAME" >/dev/null 2>&1; rm -rf "$T"' EXIT
IFS=',' read -ra link_list <<<"$LINKS"
IFS=',' read -ra client_list <<<"$CLIENTS"
IFS=',' read -ra shard_list <<<"$PS_NODES"
node() { "$CLUSTER" --name="$NAME" exec "$@"; }

results=()
declare -A measured=()
ps_link_bytes() {  # Bytes both ways so far on the first $1 nodes' links, counted at their bridge ports.
  local s total=0
  for ((s = 0; s < $1; s++)); do
    total=$((total + $(cat /sys/class/net/"$NAME-h$s"/statistics/rx_bytes) + $(cat /sys/class/net/"$NAME-h$s"/statistics/tx_bytes)))
  done
  echo "$total"
}
printf '\n%-8s %6s %7s %6s %11s %12s %9s %10s %9s\n' link shards clients nodes cycles/s "limit c/s" fraction "p50 ms" \
  "PS links"
for link in "${link_list[@]}"; do
  link_bits=$(python3 -c "
import re, sys
m = re.fullmatch(r'([0-9.]+)(bit|kbit|mbit|gbit)', sys.argv[1])
print(int(float(m.group(1)) * {'bit': 1, 'kbit': 1e3, 'mbit': 1e6, 'gbit': 1e9}[m.group(2)]))" "$link")
  for shards in "${shard_list[@]}"; do
    "$CLUSTER" down --name="$NAME" >/dev/null 2>&1
    "$CLUSTER" up $((CLIENT_NODES + shards)) --link="${CLIENT_LINK:-$link}" --name="$NAME" >/dev/null 2>&1
    ps_pids=()
    servers=()
    for ((s = 0; s < shards; s++)); do
      "$CLUSTER" --name="$NAME" link "$s" "$link" >/dev/null 2>&1
      addr=$("$CLUSTER" --name="$NAME" addr "$s")
      node "$s" "$BIN/convoy_ps" --model="$MODEL" --bind="$addr" --port=50051 --port_file="$T/ps-$s.port" \
        --insecure --num_shards="$shards" --shard_index="$s" >"$T/ps-$link-$shards-$s.log" 2>&1 &
      ps_pids+=($!)
      servers+=("$addr:50051")
    done
    for ((s = 0; s < shards; s++)); do
      for _ in $(seq 600); do [ -s "$T/ps-$s.port" ] && break; sleep 0.1; done
      [ -s "$T/ps-$s.port" ] || { echo "bench_ps_cluster: convoy_ps shard $s did not start (see $T)" >&2; exit 1; }
    done
    ps_list=$(IFS=,; echo "${servers[*]}")
    for clients in "${client_list[@]}"; do
      # Clients spread over the client nodes, as evenly as they go; a node given none sits this one out.
      pids=()
      used=0
      # Every client process measures the same seconds: joining and warm-up first, then the window.
      measure_at=$(python3 -c "import time; print(f'{time.time() + 8:.3f}')")
      for ((j = 1; j <= CLIENT_NODES; j++)); do
        share=$(((clients + CLIENT_NODES - j) / CLIENT_NODES))
        [ "$share" -gt 0 ] || continue
        used=$((used + 1))
        node $((shards + j - 1)) "$BIN/convoy_bench_ps" --ps="$ps_list" --insecure --model="$MODEL" \
          --clients="$share" --encodings=fp32 --seconds="$SECONDS_EACH" --warmup_seconds=1 \
          --measure_at_unix_seconds="$measure_at" \
          --tcp_bytes=$((64 << 20)) --tcp_repeats=1 --apply_seconds=0.2 \
          >"$T/client-$link-$shards-$clients-$j.out" 2>&1 &
        pids+=($!)
      done
      # The PS links' bytes over the measured window (sampled at its ends), as a check on the cycles.
      sleep "$(python3 -c "import time; print(max(0, $measure_at - time.time()))")"
      before=$(ps_link_bytes "$shards")
      sleep "$SECONDS_EACH"
      after=$(ps_link_bytes "$shards")
      for pid in "${pids[@]}"; do wait "$pid" || { echo "bench_ps_cluster: a client failed" >&2; exit 1; }; done
      busy=$(python3 -c "print(($after - $before) / $SECONDS_EACH / (2 * $shards * $link_bits / 8))")
      read -r cycles p50 bytes_push bytes_pull < <(python3 - "$T" "$link-$shards-$clients" <<'PY'
import glob, re, statistics, sys
t, key = sys.argv[1:]
cycles, p50s = 0.0, []
push = pull = 0.0
for path in sorted(glob.glob(f"{t}/client-{key}-*.out")):
    text = open(path).read()
    r = dict(re.findall(r"^RESULT (\S+)=(\S+)$", text, re.M))
    share = [k for k in r if k.startswith("cycles_per_s_")][0]
    cycles += float(r[share])
    p50s.append(float(r["p50_ms_" + share.rsplit("_", 1)[1]]))
    push = pull = float(r["parameters"]) * 4
print(cycles, statistics.median(p50s), push, pull)
PY
)
      limit=$(python3 -c "print($shards * $link_bits / 8 / max($bytes_push, $bytes_pull))")
      fraction=$(python3 -c "print($cycles / $limit)")
      printf '%-8s %6d %7d %6d %11.1f %12.1f %9.3f %10.1f %9.3f\n' "$link" "$shards" "$clients" "$used" \
        "$cycles" "$limit" "$fraction" "$p50" "$busy"
      key=$(echo "$link" | tr -d '.')
      measured[$key-$shards-$clients]=$cycles
      suffix=$([ "$shards" = 1 ] && echo "${key}_${clients}" || echo "${key}_${shards}shards_${clients}")
      results+=("RESULT cycles_per_s_${suffix}=$(printf %.4g "$cycles")"
        "RESULT fraction_of_limit_${suffix}=$(printf %.3f "$fraction")")
      if [ "$shards" != 1 ] && [ -n "${measured[$key-1-$clients]:-}" ]; then
        results+=("RESULT speedup_${shards}shards_vs_1_${key}_${clients}=$(python3 -c \
          "print(f'{$cycles / ${measured[$key-1-$clients]}:.2f}')")")
      fi
    done
    for pid in "${ps_pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    for pid in "${ps_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -f "$T"/ps-*.port
    "$CLUSTER" down --name="$NAME" >/dev/null 2>&1
  done
done
echo
printf '%s\n' "${results[@]}" | sort -u
