#!/usr/bin/env bash
# How soon after a partition heals a real convoy_agent is back in step with its parameter server, and what a
# shard behind a partition costs the agent's exchanges with the other shard. On a cluster of network-namespace
# nodes (tests/cluster/cluster.sh): convoy_ps (or shard 0) on node 0, shard 1 on node 1 (mode shard), one
# convoy_agent on the embedded simulator on node 2. The agent's node (mode single) or shard 1's node (mode
# shard) is partitioned --partitions times for --cut seconds, silently and with its link down, and healed.
# Not a test; it prints a table and RESULT lines (docs/benchmarks.md, "Rejoin after a heal"). Needs root.
#
#   bench/cluster/rejoin_after_heal.sh [--modes=single,shard] [--kinds=silent,down] [--partitions=3]
#                                      [--cut=10] [--settle=6] [--bin=build/bin] [--name=cvrejoin]
#
# Back after a heal: the seconds from the start of the heal command to the first line of the agent's log, stamped after it, that
# says it is back: its catch-up push (pushed N minibatches learned out of step), or for shard 1 its backlog
# push (shard 1 is back), whichever comes first. Both are pushes the server answered, after which the agent
# pulls. Read from the log's own time stamps, so a loaded machine's slow polling does not count.
# Shard 0's exchanges while shard 1 is cut off: the agent's exchanges per second with shard 0 during the cut,
# over those in the --settle seconds before it (its ps_version is the sum over the shards, so it grows by two
# per exchange with both and by one with shard 0 alone), and its mean push_ms/pull_ms (intervals.csv, one row
# a second) in the same two windows.
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
CLUSTER="$ROOT/tests/cluster/cluster.sh"
MODES=single,shard
KINDS=silent,down
PARTITIONS=3
CUT=10
SETTLE=6
BIN="$ROOT/build/bin"
NAME=cvrejoin
for a in "$@"; do
  case "$a" in
    --modes=*) MODES=${a#*=} ;;
    --kinds=*) KINDS=${a#*=} ;;
    --partitions=*) PARTITIONS=${a#*=} ;;
    --cut=*) CUT=${a#*=} ;;
    --settle=*) SETTLE=${a#*=} ;;
    --bin=*) BIN=${a#*=} ;;
    --name=*) NAME=${a#*=} ;;
    *) echo "rejoin_after_heal: unknown argument '$a' (see the header of $0)" >&2; exit 2 ;;
  esac
done
[ "$(id -u)" -eq 0 ] || { echo "rejoin_after_heal: needs root (network namespaces)" >&2; exit 2; }
for b in convoy_ps convoy_agent; do
  [ -x "$BIN/$b" ] || { echo "rejoin_after_heal: $BIN/$b is not built" >&2; exit 2; }
done

T=$(mktemp -d /tmp/convoy-rejoin-bench.XXXXXX)
pids=()
stop_all() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
  pids=()
}
trap 'stop_all; "$CLUSTER" down --name="$NAME" >/dev/null 2>&1; [ -n "${CONVOY_KEEP_BENCH_DIR:-}" ] || rm -rf "$T"' EXIT
node() { "$CLUSTER" --name="$NAME" exec "$@"; }
now() { date +%s.%N; }

# The newest value of column $2 of CSV file $1, 0 before its first row.
newest() {
  [ -s "$1" ] || { echo 0; return; }
  awk -F, -v col="$2" 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == col) c = i} END {print (c && NR > 1) ? $c + 0 : 0}' "$1"
}
rows() { if [ -s "$1" ]; then wc -l <"$1"; else echo 0; fi; }
# The mean of column $2 of CSV file $1 over rows $3 < row <= $4 (the header is row 1) that had an exchange.
csv_mean() {
  awk -F, -v col="$2" -v lo="$3" -v hi="$4" '
    NR == 1 {for (i = 1; i <= NF; i++) if ($i == col) c = i; next}
    NR > lo && NR <= hi && $c > 0 {s += $c; n++}
    END {if (n) printf "%.1f", s / n; else printf "-"}' "$1"
}
# glog's stamp of now, as the agent's log lines carry it (local time).
stamp() { date +%Y%m%d' '%H:%M:%S.%6N; }
# Seconds from glog stamp $2 to the first line of log $1 stamped after it that matches $3; empty if none. (Both
# stamps of one day: a run across midnight is not measured.)
back_after() {
  awk -v since="$2" -v pattern="$3" '
    function seconds(hms, p) {split(hms, p, ":"); return p[1] * 3600 + p[2] * 60 + p[3]}
    BEGIN {split(since, s, " ")}
    /^[IWE][0-9]+ / && substr($1, 2) " " $2 > since && $0 ~ pattern {
      printf "%.2f\n", seconds($2) - seconds(s[2]); exit
    }' "$1"
}
median() { sort -g | awk '{v[NR] = $1} END {if (!NR) {print "-"; exit} print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

IFS=',' read -ra mode_list <<<"$MODES"
IFS=',' read -ra kind_list <<<"$KINDS"
table=()
declare -A heal_times=() other_ratio=() push_during=() push_before=() pull_during=() pull_before=()
for mode in "${mode_list[@]}"; do
  "$CLUSTER" down --name="$NAME" >/dev/null 2>&1
  "$CLUSTER" up 3 --link=1gbit --name="$NAME" >/dev/null 2>&1 || { echo "rejoin_after_heal: cluster up failed" >&2; exit 1; }
  servers=()
  shards=1
  [ "$mode" = shard ] && shards=2
  for ((s = 0; s < shards; s++)); do
    addr=$("$CLUSTER" --name="$NAME" addr "$s")
    node "$s" "$BIN/convoy_ps" --model=compact --bind="$addr" --port=50051 --insecure --batch_size=16 \
      --num_shards="$shards" --shard_index="$s" >"$T/ps-$mode-$s.log" 2>&1 &
    pids+=($!)
    servers+=("$addr:50051")
  done
  ps_list=$(IFS=,; echo "${servers[*]}")
  # Single: the agent's node, so that its link down fails its calls at once (a far end's link down looks
  # silent from here). Shard: shard 1's node, the agent keeping shard 0.
  if [ "$mode" = shard ]; then cut_node=1; else cut_node=2; fi
  cut_server=${servers[$((shards - 1))]}
  sleep 1
  node 2 "$BIN/convoy_agent" --ps="$ps_list" --insecure --sim=embedded --agent_id=agent-0 --min_replay_size=64 \
    --replay_memory_size=2000 --report_seconds=1 --max_minutes=30 --log_dir="$T/agent-$mode" \
    >"$T/agent-$mode.log" 2>&1 &
  pids+=($!)
  log="$T/agent-$mode.log"
  csv="$T/agent-$mode/intervals.csv"
  for _ in $(seq 600); do
    [ "$(newest "$csv" ps_version)" -ge 20 ] && break
    sleep 0.5
  done
  [ "$(newest "$csv" ps_version)" -ge 20 ] || { echo "rejoin_after_heal: the agent did not get going ($mode)" >&2; tail -n 20 "$log" >&2; exit 1; }
  if [ "$mode" = shard ]; then pattern='learned out of step with the server|shard 1 is back'; else pattern='learned out of step with the server'; fi
  for kind in "${kind_list[@]}"; do
    for ((p = 1; p <= PARTITIONS; p++)); do
      sleep "$SETTLE"
      t_a=$(now) r_a=$(rows "$csv") v_a=$(newest "$csv" ps_version)
      sleep "$SETTLE"
      t_b=$(now) r_b=$(rows "$csv") v_b=$(newest "$csv" ps_version)
      "$CLUSTER" --name="$NAME" partition "$cut_node" "$kind" >"$T/partition.out" 2>&1 ||
        { echo "rejoin_after_heal: partition $cut_node $kind failed: $(cat "$T/partition.out")" >&2; exit 1; }
      sleep "$CUT"
      t_c=$(now) r_c=$(rows "$csv") v_c=$(newest "$csv" ps_version)
      # Stamped before the heal: a link brought up is in use before the command has reshaped it and returned.
      healed=$(stamp)
      "$CLUSTER" --name="$NAME" heal "$cut_node" >"$T/partition.out" 2>&1 ||
        { echo "rejoin_after_heal: heal $cut_node failed: $(cat "$T/partition.out")" >&2; exit 1; }
      back=""
      waited=$SECONDS
      while [ $((SECONDS - waited)) -lt 30 ]; do
        back=$(back_after "$log" "$healed" "$pattern")
        [ -n "$back" ] && break
        sleep 0.2
      done
      back=${back:-">30"}
      key="$mode/$kind"
      heal_times[$key]+="$back "
      row="$(printf '%-7s %-7s %3d %9s' "$mode" "$kind" "$p" "$back")"
      if [ "$mode" = shard ]; then
        # Exchanges with shard 0 a second: two versions each before the cut, one during it.
        ratio=$(awk -v a="$v_a" -v b="$v_b" -v c="$v_c" -v ta="$t_a" -v tb="$t_b" -v tc="$t_c" \
          'BEGIN {before = (b - a) / 2 / (tb - ta); during = (c - b) / (tc - tb); if (before > 0) printf "%.2f", during / before; else print "-"}')
        pb=$(csv_mean "$csv" push_ms "$r_a" "$r_b")
        pd=$(csv_mean "$csv" push_ms "$((r_b + 1))" "$r_c")
        lb=$(csv_mean "$csv" pull_ms "$r_a" "$r_b")
        ld=$(csv_mean "$csv" pull_ms "$((r_b + 1))" "$r_c")
        other_ratio[$key]+="$ratio "
        push_before[$key]+="$pb " push_during[$key]+="$pd " pull_before[$key]+="$lb " pull_during[$key]+="$ld "
        row+="$(printf ' %12s %9s %9s %9s %9s' "$ratio" "$pb" "$pd" "$lb" "$ld")"
      fi
      table+=("$row")
      echo "$row"
    done
  done
  stop_all
done

printf '\n%-7s %-7s %3s %9s %12s %9s %9s %9s %9s\n' mode kind "#" "back s" "shard0 rate" \
  "push ms" "(cut)" "pull ms" "(cut)"
printf "%s\n" "${table[@]}"
echo
for key in "${!heal_times[@]}"; do
  k=${key//\//_}
  echo "RESULT rejoin_back_s_median_$k=$(tr ' ' '\n' <<<"${heal_times[$key]}" | grep -v '^$' | sed 's/>//' | median)"
  echo "RESULT rejoin_back_s_max_$k=$(tr ' ' '\n' <<<"${heal_times[$key]}" | grep -v '^$' | sed 's/>//' | sort -g | tail -n 1)"
  if [ -n "${other_ratio[$key]:-}" ]; then
    echo "RESULT shard0_rate_during_cut_ratio_median_$k=$(tr ' ' '\n' <<<"${other_ratio[$key]}" | grep -v '^-\?$' | median)"
    for m in push_before push_during pull_before pull_during; do
      declare -n arr=$m
      echo "RESULT ${m}_ms_median_$k=$(tr ' ' '\n' <<<"${arr[$key]}" | grep -v '^-\?$' | median)"
    done
  fi
done | sort
