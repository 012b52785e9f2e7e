#!/usr/bin/env bash
# Push+pull cycles/s of a parameter server across real (shaped) links: convoy_ps on the first nodes of a
# cluster of network-namespace nodes (tests/cluster/cluster.sh), one shard per node (--ps_nodes, each a
# --num_shards list entry), convoy_bench_ps clients spread over the other nodes, at link rates where the PS
# nodes' links and not this machine's cores are the bound. Beside each figure, the limit the links set, the
# raw transfer the same links carried in the same run, and the fraction of each reached. Not a test; it
# prints a table and RESULT lines (docs/benchmarks.md, "Across links"). Needs root and iperf3.
#
#   bench/cluster/bench_ps_cluster.sh [--links=1gbit,2.5gbit] [--ps_nodes=1] [--clients=4,8,16]
#                                     [--client_nodes=4] [--client_link=RATE] [--seconds=5]
#                                     [--model=cookbook] [--bin=build/bin] [--repeats=1]
#                                     [--client_flags="..."] [--server_flags="..."]
#                                     [--congestion=system,reno]
#
# The limit: every cycle pushes a gradient and pulls the weights, each shard's range over its node's link,
# so a PS node's link carries 1/N of each cycle once each way. The links are full duplex (tbf shapes each
# direction at the rate), so limit = N * link bytes/s / max(push bytes, pull bytes). The PS nodes' links
# are shaped at --links; the client nodes' at --client_link (default: the same), which should give the
# clients together more than all the shards have.
#
# Two raw transfers over the same links with the same flows (one TCP connection per client and shard, from
# the same client nodes), for the same measured seconds, in the same run:
#   - iperf3, once per configuration, each flow carrying both directions at once: what TCP through this
#     harness's tbf queues moves when every flow is always busy, counted at the PS nodes' bridge ports, each
#     direction on its own;
#   - tcp_cycles.py, right before every repeat of convoy's cycles: bare TCP in the cycles' own pattern, each
#     flow sending a push's bytes up and then reading a pull's bytes down, all shards at once, with no gRPC
#     and no apply. What TCP moves in this direction mix; convoy's cycles are reported as a fraction of it.
#
# --congestion: the TCP congestion control of the cluster's traffic, a list measured in turn: `system` leaves
# the host's default (this machine's is bbr), any other name is set on the cluster subnet's route inside
# every node (`ip route change ... congctl NAME`, the nodes' own routes only), for convoy and the raw
# transfers alike. Flows that alternate direction, as push+pull cycles do, fare very differently under
# each (docs/benchmarks.md, "The transport at the link's limit").
#
# --repeats runs every configuration (bare TCP, then convoy's cycles) that many times and reports the
# medians and the spread (min-max) of the fractions. --server_flags are passed to every convoy_ps (e.g.
# --max_pushes_per_step=1 to compare one step per push). --client_flags are passed to every
# convoy_bench_ps client (to compare transport settings).
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
REPEATS=1
CLIENT_FLAGS=""
SERVER_FLAGS=""
CONGESTION=system
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
    --repeats=*) REPEATS=${a#*=} ;;
    --client_flags=*) CLIENT_FLAGS=${a#*=} ;;
    --server_flags=*) SERVER_FLAGS=${a#*=} ;;
    --congestion=*) CONGESTION=${a#*=} ;;
    *) echo "bench_ps_cluster: unknown argument '$a' (see the header of $0)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "bench_ps_cluster: needs root (network namespaces)" >&2; exit 2; }
command -v iperf3 >/dev/null || { echo "bench_ps_cluster: needs iperf3 (Debian: iperf3) for the raw transfer" >&2; exit 2; }
for b in convoy_ps convoy_bench_ps; do [ -x "$BIN/$b" ] || { echo "bench_ps_cluster: $BIN/$b is not built" >&2; exit 2; }; done
[[ "$REPEATS" =~ ^[1-9][0-9]*$ ]] || { echo "bench_ps_cluster: --repeats=$REPEATS: expected a count >= 1" >&2; exit 2; }

T=$(mktemp -d /tmp/convoy-bench-cluster.XXXXXX)
trap '"$CLUSTER" down --name="$NAME" >/dev/null 2>&1; rm -rf "$T"' EXIT
IFS=',' read -ra link_list <<<"$LINKS"
IFS=',' read -ra client_list <<<"$CLIENTS"
IFS=',' read -ra shard_list <<<"$PS_NODES"
IFS=',' read -ra congestion_list <<<"$CONGESTION"
for cc in "${congestion_list[@]}"; do
  [ "$cc" = system ] || grep -qw "$cc" /proc/sys/net/ipv4/tcp_available_congestion_control ||
    { echo "bench_ps_cluster: --congestion=$cc: not one of this kernel's ($(cat /proc/sys/net/ipv4/tcp_available_congestion_control)) or system" >&2; exit 2; }
done
read -ra client_flags <<<"$CLIENT_FLAGS"
read -ra server_flags <<<"$SERVER_FLAGS"
node() { "$CLUSTER" --name="$NAME" exec "$@"; }

# Bytes so far on the first $1 nodes' links, counted at their bridge ports: "in" (towards the PS nodes,
# the bridge port's tx) and "out" (from them, its rx).
ps_link_bytes() {
  local s in=0 out=0
  for ((s = 0; s < $1; s++)); do
    in=$((in + $(cat /sys/class/net/"$NAME-h$s"/statistics/tx_bytes)))
    out=$((out + $(cat /sys/class/net/"$NAME-h$s"/statistics/rx_bytes)))
  done
  echo "$in $out"
}
# Sleeps until Unix time $1.
sleep_until() { sleep "$(python3 -c "import time; print(max(0, $1 - time.time()))")"; }
# The PS links' busy fractions (in out) over a window of $SECONDS_EACH starting at Unix time $2, for $1
# shards; with $3 = cpu, also the CPU seconds the convoy_ps processes used in it (in out cpu).
measure_busy() {
  local shards=$1 at=$2 with_cpu=${3:-} before after cpu_before=0 cpu_after=0
  sleep_until "$at"
  read -r -a before < <(ps_link_bytes "$shards")
  [ "$with_cpu" != cpu ] || cpu_before=$(ps_cpu_seconds)
  sleep "$SECONDS_EACH"
  read -r -a after < <(ps_link_bytes "$shards")
  [ "$with_cpu" != cpu ] || cpu_after=$(ps_cpu_seconds)
  python3 -c "
full = $SECONDS_EACH * $shards * $link_bits / 8
line = f'{(${after[0]} - ${before[0]}) / full:.4f} {(${after[1]} - ${before[1]}) / full:.4f}'
print(line + (f' {$cpu_after - $cpu_before:.3f}' if '$with_cpu' == 'cpu' else ''))"
}

# The CPU seconds (user + system) the convoy_ps processes of this run have used so far, all shards.
ps_cpu_seconds() {
  local pid total=0 ticks
  ticks=$(getconf CLK_TCK)
  for pid in $(pgrep -f -- "--port_file=$T/ps-" || true); do
    # Fields 14 and 15 of /proc/PID/stat, counted after the command's closing parenthesis.
    total=$((total + $({ sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null || true; } |
      awk '{print $12 + $13} END {if (NR == 0) print 0}')))
  done
  python3 -c "print($total / $ticks)"
}

# The raw transfer for $1 shards and $2 clients: iperf3 with the cycles' flows, both directions at once.
# Prints the in and out busy fractions of the PS links.
iperf_transfer() {
  local shards=$1 clients=$2 s j share pids=() port busy
  local run_for=$((SECONDS_EACH + 4))
  for ((s = 0; s < shards; s++)); do
    for ((j = 1; j <= CLIENT_NODES; j++)); do
      node "$s" timeout $((run_for + 30)) iperf3 --server --one-off --port $((5200 + j)) \
        --bind "$("$CLUSTER" --name="$NAME" addr "$s")" >/dev/null 2>&1 &
      pids+=($!)
    done
  done
  sleep 0.5
  local start_at
  start_at=$(python3 -c "import time; print(f'{time.time() + 2.5:.3f}')")
  local clients_pids=()
  for ((j = 1; j <= CLIENT_NODES; j++)); do
    share=$(((clients + CLIENT_NODES - j) / CLIENT_NODES))
    [ "$share" -gt 0 ] || continue
    for ((s = 0; s < shards; s++)); do
      node $((shards + j - 1)) timeout $((run_for + 20)) iperf3 --client \
        "$("$CLUSTER" --name="$NAME" addr "$s")" --port $((5200 + j)) --parallel "$share" --bidir \
        --time "$run_for" >"$T/iperf-$s-$j.out" 2>&1 &
      clients_pids+=($!)
    done
  done
  busy=$(measure_busy "$shards" "$start_at")
  for p in "${clients_pids[@]}"; do wait "$p" || { echo "bench_ps_cluster: iperf3 failed (see $T)" >&2; exit 1; }; done
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  echo "$busy"
}

# Sets the congestion control $2 (or the system's, for "system") on the cluster subnet's route in each of the
# first $1 nodes: the route inside the node's own namespace, never the host's.
set_congestion() {
  local i route
  for ((i = 0; i < $1; i++)); do
    route=$(node "$i" ip route show scope link | head -1 | sed 's/ proto kernel//; s/ congctl [a-z]*//; s/ *$//')
    [ -n "$route" ] || { echo "bench_ps_cluster: node $i has no subnet route" >&2; exit 1; }
    if [ "$2" = system ]; then
      node "$i" ip route change $route proto kernel
    else
      node "$i" ip route change $route proto kernel congctl "$2"
    fi
  done
}

# Bare TCP in the cycles' pattern (tcp_cycles.py) for $1 shards and $2 clients on port $TCP_PORT; prints its
# cycles/s. Its servers end by themselves (timeout), not when this returns: each call needs a port of its own.
tcp_cycles() {
  local shards=$1 clients=$2 s j share servers=() pids=()
  for ((s = 0; s < shards; s++)); do
    node "$s" timeout $((SECONDS_EACH + 30)) python3 "$ROOT/bench/cluster/tcp_cycles.py" serve \
      --bind="$("$CLUSTER" --name="$NAME" addr "$s")" --port="$TCP_PORT" --bytes=$((PUSH_BYTES / shards)) \
      >"$T/tcp-serve-$s.out" 2>&1 &
    servers+=("$("$CLUSTER" --name="$NAME" addr "$s"):$TCP_PORT")
  done
  sleep 0.5
  local at
  # The clients start up to a second apart (bare TCP's fair sharing would otherwise keep them in lockstep,
  # every client pushing at once and then pulling at once), and the window opens 3 s after the last.
  at=$(python3 -c "import time; print(f'{time.time() + 5:.3f}')")
  for ((j = 1; j <= CLIENT_NODES; j++)); do
    share=$(((clients + CLIENT_NODES - j) / CLIENT_NODES))
    [ "$share" -gt 0 ] || continue
    node $((shards + j - 1)) timeout $((SECONDS_EACH + 60)) python3 "$ROOT/bench/cluster/tcp_cycles.py" cycles \
      --servers="$(IFS=,; echo "${servers[*]}")" --clients="$share" --bytes="$PUSH_BYTES" \
      --measure_at="$at" --seconds="$SECONDS_EACH" --stagger=1 \
      >"$T/tcp-cycles-$j.out" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do
    wait "$p" || { echo "bench_ps_cluster: tcp_cycles.py failed: $(cat "$T"/tcp-cycles-*.out | tail -3)" >&2; exit 1; }
  done
  cat "$T"/tcp-cycles-*.out | sed -n 's/^RESULT cycles_per_s=//p' | python3 -c "import sys; print(sum(float(x) for x in sys.stdin))"
  rm -f "$T"/tcp-cycles-*.out
}

TCP_PORT=5300
results=()
rows=()
printf '\n%-7s %-8s %6s %7s %6s %4s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s %9s\n' tcp link shards clients nodes \
  rep "cycles/s" "limit c/s" "fraction" "p50 ms" "TCP c/s" "iperf in" "iperf out" "PS in" "PS out" "PS ms/c" "in/cycle"
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
        --insecure --num_shards="$shards" --shard_index="$s" "${server_flags[@]}" \
        >"$T/ps-$link-$shards-$s.log" 2>&1 &
      ps_pids+=($!)
      servers+=("$addr:50051")
    done
    for ((s = 0; s < shards; s++)); do
      for _ in $(seq 600); do [ -s "$T/ps-$s.port" ] && break; sleep 0.1; done
      [ -s "$T/ps-$s.port" ] || { echo "bench_ps_cluster: convoy_ps shard $s did not start (see $T)" >&2; exit 1; }
    done
    ps_list=$(IFS=,; echo "${servers[*]}")
    # A push's bytes (fp32, the whole model): the parameters every shard says it serves, summed.
    PUSH_BYTES=$(cat "$T/ps-$link-$shards-"*.log |
      sed -n 's/.*serving model .*[,:] \([0-9]*\) parameters, .*/\1/p' | awk '{s += $1} END {print s * 4}')
    for cc in "${congestion_list[@]}"; do
      set_congestion "$((CLIENT_NODES + shards))" "$cc"
      for clients in "${client_list[@]}"; do
        # What the links carry with every flow busy both ways, once per configuration.
        read -r raw_in raw_out < <(iperf_transfer "$shards" "$clients")
        for ((rep = 1; rep <= REPEATS; rep++)); do
          TCP_PORT=$((TCP_PORT + 1))
        tcp=$(tcp_cycles "$shards" "$clients")
          # Clients spread over the client nodes, as evenly as they go; a node given none sits this one out.
          pids=()
          used=0
          # Every client process measures the same seconds: each says when its clients are warm
          # (joined, 3 cycles done) in the window directory, and once all have, the window opens for
          # all of them at once.
          window="$T/window-$cc-$link-$shards-$clients-$rep"
          mkdir -p "$window"
          for ((j = 1; j <= CLIENT_NODES; j++)); do
            share=$(((clients + CLIENT_NODES - j) / CLIENT_NODES))
            [ "$share" -gt 0 ] || continue
            used=$((used + 1))
            node $((shards + j - 1)) "$BIN/convoy_bench_ps" --ps="$ps_list" --insecure --model="$MODEL" \
              --clients="$share" --encodings=fp32 --seconds="$SECONDS_EACH" --warmup_seconds=1 \
              --window_dir="$window" --repeats=1 "${client_flags[@]}" \
              >"$T/client-$cc-$link-$shards-$clients-$rep-$j.out" 2>&1 &
            pids+=($!)
          done
          for _ in $(seq 1200); do
            [ "$(find "$window" -name 'warm.*' | wc -l)" -lt "$used" ] || break
            sleep 0.1
          done
          [ "$(find "$window" -name 'warm.*' | wc -l)" -ge "$used" ] ||
            { echo "bench_ps_cluster: the clients were not all warm after 120 s (see $T)" >&2; exit 1; }
          measure_at=$(python3 -c "import time; print(f'{time.time() + 0.5:.6f}')")
          python3 -c "print(round($measure_at * 1e6))" >"$window/go.tmp" && mv "$window/go.tmp" "$window/go"
          # The PS links' bytes over the measured window, as a check on the cycles.
          read -r busy_in busy_out ps_cpu < <(measure_busy "$shards" "$measure_at" cpu)
          for pid in "${pids[@]}"; do wait "$pid" || { echo "bench_ps_cluster: a client failed (see $T)" >&2; exit 1; }; done
          counted=$(python3 - "$T" "$cc-$link-$shards-$clients-$rep" "$shards" "$link_bits" <<'PY'
import glob, re, statistics, sys
t, key, shards, link_bits = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
cycles, p50s, parameters = 0.0, [], 0.0
for path in sorted(glob.glob(f"{t}/client-{key}-*.out")):
    text = open(path).read()
    r = dict(re.findall(r"^RESULT (\S+)=(\S+)$", text, re.M))
    shares = [k for k in r if re.fullmatch(r"cycles_per_s_\d+", k)]
    if not shares:
        sys.exit(f"bench_ps_cluster: {path} measured nothing:\n" + "\n".join(l for l in text.splitlines() if "fail" in l))
    share = shares[0]
    cycles += float(r[share])
    p50s.append(float(r["p50_ms_" + share.rsplit("_", 1)[1]]))
    parameters = float(r["parameters"])
# Push and pull are both fp32: each PS link carries 1/shards of each, once each way.
print(cycles, statistics.median(p50s), shards * link_bits / 8 / (parameters * 4))
PY
) || exit 1
          read -r cycles p50 limit <<<"$counted"
          fraction=$(python3 -c "print($cycles / $limit)")
          # The servers' CPU per cycle over the same window (all shards together).
          ps_ms=$(python3 -c "print(1e3 * $ps_cpu / ($cycles * $SECONDS_EACH) if $cycles > 0 else 0)")
          # The check on the count: the bytes the PS links carried towards the servers in the window,
          # per counted cycle, in models (a push is one; headers add a few percent).
          per_cycle=$(python3 -c "print($busy_in / $fraction if $fraction > 0 else 0)")
          printf '%-7s %-8s %6d %7d %6d %4d %9.2f %9.2f %9.3f %9.1f %9.2f %9.3f %9.3f %9.3f %9.3f %9.2f %9.3f\n' \
            "$cc" "$link" "$shards" "$clients" "$used" "$rep" "$cycles" "$limit" "$fraction" "$p50" "$tcp" \
            "$raw_in" "$raw_out" "$busy_in" "$busy_out" "$ps_ms" "$per_cycle"
          rows+=("$cc $link $shards $clients $cycles $limit $p50 $raw_in $raw_out $busy_in $busy_out $tcp $ps_ms $per_cycle")
        done
      done
    done
    for pid in "${ps_pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    for pid in "${ps_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -f "$T"/ps-*.port
    "$CLUSTER" down --name="$NAME" >/dev/null 2>&1
  done
done

# The medians over the repeats, and the RESULT lines.
printf '%s\n' "${rows[@]}" >"$T/rows"
python3 - "$T/rows" <<'PY'
import collections, statistics, sys
rows = collections.OrderedDict()
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault((f[0], f[1], int(f[2]), int(f[3])), []).append([float(x) for x in f[4:]])
CYCLES, LIMIT, P50, IPERF_IN, IPERF_OUT, BUSY_IN, BUSY_OUT, TCP, PS_MS, PER_CYCLE = range(10)
print()
print("Medians over the repeats. fraction: of the links' nominal limit; iperf3: its busy fraction (the less busy")
print("direction); TCP cycles: bare TCP in the cycles' pattern, as a fraction of the limit; of TCP: convoy over it;")
print("in/cycle: the PS links' bytes towards the servers per counted cycle, in models (about 1.03 with headers).")
print(f"{'tcp':<7} {'link':<8} {'shards':>6} {'clients':>7} {'cycles/s':>9} {'limit':>7} {'fraction':>9} "
      f"{'spread':>13} {'iperf3':>7} {'TCP cyc':>8} {'of TCP':>7} {'PS busy':>8} {'p50 ms':>8} {'x one':>6} "
      f"{'PS ms/c':>8} {'in/cycle':>8}")
results, one = [], {}
for (cc, link, shards, clients), reps in rows.items():
    med = lambda values: statistics.median(values)
    fractions = [r[CYCLES] / r[LIMIT] for r in reps]
    iperf = [min(r[IPERF_IN], r[IPERF_OUT]) for r in reps]
    tcp = [r[TCP] / r[LIMIT] for r in reps]
    of_tcp = [r[CYCLES] / r[TCP] for r in reps]
    busy = [min(r[BUSY_IN], r[BUSY_OUT]) for r in reps]
    cycles = med([r[CYCLES] for r in reps])
    if shards == 1:
        one[(cc, link, clients)] = cycles
    speedup = cycles / one[(cc, link, clients)] if (cc, link, clients) in one else float("nan")
    print(f"{cc:<7} {link:<8} {shards:>6} {clients:>7} {cycles:>9.2f} {reps[0][LIMIT]:>7.2f} {med(fractions):>9.3f} "
          f"{min(fractions):>6.3f}-{max(fractions):<6.3f} {med(iperf):>7.3f} {med(tcp):>8.3f} {med(of_tcp):>7.3f} "
          f"{med(busy):>8.3f} {med([r[P50] for r in reps]):>8.1f} {speedup:>6.2f} "
          f"{med([r[PS_MS] for r in reps]):>8.2f} {med([r[PER_CYCLE] for r in reps]):>8.3f}")
    key = link.replace(".", "")
    suffix = f"{key}_{clients}" if shards == 1 else f"{key}_{shards}shards_{clients}"
    if cc != "system":
        suffix += f"_{cc}"
    results += [f"RESULT cycles_per_s_{suffix}={cycles:.4g}",
                f"RESULT fraction_of_limit_{suffix}={med(fractions):.3f}",
                f"RESULT iperf3_fraction_{suffix}={med(iperf):.3f}",
                f"RESULT tcp_cycles_fraction_{suffix}={med(tcp):.3f}",
                f"RESULT fraction_of_tcp_cycles_{suffix}={med(of_tcp):.3f}",
                f"RESULT server_cpu_ms_per_cycle_{suffix}={med([r[PS_MS] for r in reps]):.3f}",
                f"RESULT link_models_in_per_cycle_{suffix}={med([r[PER_CYCLE] for r in reps]):.3f}"]
    if shards != 1 and (cc, link, clients) in one:
        cc_suffix = "" if cc == "system" else f"_{cc}"
        results.append(f"RESULT speedup_{shards}shards_vs_1_{key}_{clients}{cc_suffix}={speedup:.2f}")
print()
print("\n".join(sorted(set(results))))
PY

