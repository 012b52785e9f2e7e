# Sourced by the cluster tests: the checks that decide SKIP, and the log dump of a failed run. A caller
# defines say() and NAME (its cluster's name) first.
PATH="$PATH:/usr/sbin:/sbin"

# Exits 77 (CTest: Skipped), saying why, unless this is root, each named tool is installed and network
# namespaces can be made.
require_cluster() {
  if [ "$(id -u)" -ne 0 ]; then
    say "SKIP: needs root, for network namespaces, veths and tc"
    exit 77
  fi
  local tool
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null; then
      say "SKIP: $tool is not installed (Debian: iperf3, slurm-wlm, munge; ./convoy test installs them)"
      exit 77
    fi
  done
  if ! ip netns add "${NAME}-probe" 2>/dev/null; then
    say "SKIP: this machine cannot make network namespaces (ip netns add failed)"
    exit 77
  fi
  ip netns del "${NAME}-probe"
}

# The last $1 lines of each of the other arguments that is a file.
print_tails() {
  local lines=$1 f
  shift
  for f in "$@"; do
    [ -f "$f" ] && { say "---- $f (last $lines lines)"; tail -n "$lines" "$f"; }
  done
}

# Cluster NAME up with $1 nodes and links of $2, after removing what a killed earlier run left.
fresh_cluster() {
  "$CLUSTER" down --name="$NAME" >/dev/null 2>&1
  "$CLUSTER" up "$1" --link="$2" --name="$NAME"
}

# The end of an EXIT trap: cluster NAME down, the test directory $T removed (kept, and said so, with
# CONVOY_KEEP_TEST_DIR set), exit $1.
end_cluster_test() {
  "$CLUSTER" down --name="$NAME" >/dev/null 2>&1
  if [ -n "${CONVOY_KEEP_TEST_DIR:-}" ]; then say "kept $T"; else rm -rf "$T"; fi
  exit "$1"
}

# Waits up to $4 s until something listens on TCP port $2 on node $1 of cluster NAME, while process $3 runs.
# Fails (returns 1) when the process exits first or the time runs out.
wait_node_listening() {
  local node=$1 port=$2 pid=$3 tries=$(($4 * 10))
  for _ in $(seq "$tries"); do
    ip netns exec "$NAME-$node" ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# Waits up to $2 s for process $1 (a child of this shell) to exit, and sets EXIT_STATUS to its exit
# status; past that it is SIGKILLed and EXIT_STATUS is 124. (Not for $(...): a subshell cannot wait.)
wait_exit_within() {
  local pid=$1 tries=$(($2 * 10))
  for _ in $(seq "$tries"); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    EXIT_STATUS=124
    return
  fi
  wait "$pid"
  EXIT_STATUS=$?
}
