#!/usr/bin/env bash
# One convoy agent as one Slurm task; convoy.sbatch starts N of these with srun. Not meant to be run by hand.
#
# From Slurm's environment: SLURM_PROCID (the task's rank in the step) becomes --agent_index and the seed offset;
# SLURM_LOCALID (its rank on the node) becomes LOCAL_RANK, which --device=auto maps to a GPU (with
# --gpus-per-task=1 each task sees only its own GPU, and the agent uses it). From convoy.sbatch: CONVOY_BIN,
# CONVOY_RUN_DIR, CONVOY_PS_ADDRESS, CONVOY_SCENARIO (the driving task, default traffic, given to the agent and
# its convoy_sim), and the PS's security: CONVOY_AUTH_DIR (ca.crt, auth_token), CONVOY_TLS_SERVER_NAME,
# CONVOY_INSECURE, CONVOY_AUTH_TOKEN (when set, read by convoy_agent itself), CONVOY_METRICS_DIR (where its
# metrics port is published; unset: no metrics), CONVOY_REPLAY_DIR (where it keeps its replay checkpoint; empty:
# none). The run settings, the model among them, come from the PS on Join.
#
# With CONVOY_REPLAY_DIR every start, first or requeued, runs convoy_agent with --resume: a requeued agent of rank
# R continues from $CONVOY_REPLAY_DIR/agent-R.replay, which it wrote when the requeue's SIGTERM stopped it (or
# last every --replay_checkpoint_every), on whichever node it lands; a first start finds none and starts empty.
#
# The simulator, per agent (CONVOY_SIM):
#   embedded    in-process (the default)
#   convoy_sim  convoy's AirSim-protocol server on 127.0.0.1:$((CONVOY_SIM_BASE_PORT + SLURM_LOCALID))
#   airsim      an AirSim (or Colosseum) binary, $CONVOY_AIRSIM_BINARY, on the same port, rendering off screen on
#               a GPU (add -graphicsadapter=N through CONVOY_AIRSIM_FLAGS where a node has several); its
#               settings.json is written to the agent's directory with that ApiServerPort.
# CONVOY_SIM_BASE_PORT defaults to 41451 (AirSim's port), so agents on one node use 41451, 41452, ...
set -uo pipefail

INDEX="${SLURM_PROCID:?run under srun}"
LOCAL="${SLURM_LOCALID:-0}"
# Its log, named by its rank, in the directory convoy.sbatch gives (appended to across requeues).
if [ -n "${CONVOY_AGENT_LOG_DIR:-}" ]; then exec >>"$CONVOY_AGENT_LOG_DIR/agent-$INDEX.log" 2>&1; fi
AGENT_DIR="$CONVOY_RUN_DIR/agents/agent-$INDEX"
mkdir -p "$AGENT_DIR"
export LOCAL_RANK="$LOCAL"
log() { printf '%s agent_task[%s]: %s\n' "$(date -u +%FT%TZ)" "$INDEX" "$*" >&2; }

SCENARIO="${CONVOY_SCENARIO:-traffic}"
SIM=embedded
SIM_PID=""
SIM_PORT=$((${CONVOY_SIM_BASE_PORT:-41451} + LOCAL))
case "${CONVOY_SIM:-embedded}" in
  embedded) ;;
  convoy_sim)
    "$CONVOY_BIN/convoy_sim" --port="$SIM_PORT" --bind=127.0.0.1 --seed="$INDEX" --scenario="$SCENARIO" &
    SIM_PID=$!
    SIM="airsim://127.0.0.1:$SIM_PORT"
    ;;
  airsim)
    [ -x "${CONVOY_AIRSIM_BINARY:-}" ] || { log "CONVOY_SIM=airsim needs CONVOY_AIRSIM_BINARY"; exit 2; }
    cat >"$AGENT_DIR/settings.json" <<EOF
{"SettingsVersion": 1.2, "SimMode": "Car", "ApiServerPort": $SIM_PORT, "ViewMode": "NoDisplay"}
EOF
    read -ra AIRSIM_FLAGS <<<"${CONVOY_AIRSIM_FLAGS:-}"
    "$CONVOY_AIRSIM_BINARY" -RenderOffscreen -nosound -settings="$AGENT_DIR/settings.json" \
      "${AIRSIM_FLAGS[@]}" >"$AGENT_DIR/airsim.log" 2>&1 &
    SIM_PID=$!
    SIM="airsim://127.0.0.1:$SIM_PORT"
    ;;
  *) log "CONVOY_SIM=${CONVOY_SIM}: expected embedded, convoy_sim or airsim"; exit 2 ;;
esac

# The simulator must accept connections before the agent starts (an Unreal binary takes a while to load).
if [ -n "$SIM_PID" ]; then
  for ((i = 0; i < 1200; i++)); do
    (exec 3<>"/dev/tcp/127.0.0.1/$SIM_PORT") 2>/dev/null && break
    kill -0 "$SIM_PID" 2>/dev/null || { log "the simulator exited: see $AGENT_DIR"; exit 1; }
    sleep 0.25
  done
fi

read -ra EXTRA_AGENT <<<"${CONVOY_AGENT_FLAGS:-}"
AGENT_ARGS=(
  --ps="$CONVOY_PS_ADDRESS"
  --sim="$SIM"
  --scenario="$SCENARIO"
  --agent_id="agent-$INDEX"
  --agent_index="$INDEX"
  --seed=$((1 + INDEX))
  --device=auto
  --torch_threads="${SLURM_CPUS_PER_TASK:-0}"
  --log_dir="$AGENT_DIR"
)
if [ -n "${CONVOY_REPLAY_DIR:-}" ]; then
  mkdir -p "$CONVOY_REPLAY_DIR"
  AGENT_ARGS+=(--replay_checkpoint_dir="$CONVOY_REPLAY_DIR" --resume)
fi
# Prometheus metrics on a free port: the port in agent-<rank>.port, this node's address in agent-<rank>.host, for
# convoy.sbatch's file_sd targets.
if [ -n "${CONVOY_METRICS_DIR:-}" ]; then
  NODE_ADDR="$(scontrol show node "${SLURMD_NODENAME:-$(hostname)}" -o 2>/dev/null | grep -o 'NodeAddr=[^ ]*' |
    cut -d= -f2)"
  echo "${NODE_ADDR:-$(hostname)}" >"$CONVOY_METRICS_DIR/agent-$INDEX.host.tmp" &&
    mv "$CONVOY_METRICS_DIR/agent-$INDEX.host.tmp" "$CONVOY_METRICS_DIR/agent-$INDEX.host"
  rm -f "$CONVOY_METRICS_DIR/agent-$INDEX.port"
  AGENT_ARGS+=(--metrics_address=0.0.0.0:0 --metrics_port_file="$CONVOY_METRICS_DIR/agent-$INDEX.port")
fi
if [ "${CONVOY_INSECURE:-0}" = 1 ]; then
  AGENT_SECURITY=(
    --insecure
  )
else
  AGENT_SECURITY=(
    --tls_ca="$CONVOY_AUTH_DIR/ca.crt"
    --tls_server_name="${CONVOY_TLS_SERVER_NAME:-convoy-ps}"
  )
  [ -n "${CONVOY_AUTH_TOKEN:-}" ] || AGENT_SECURITY+=(--auth_token_file="$CONVOY_AUTH_DIR/auth_token")
fi
log "node $(hostname), LOCAL_RANK=$LOCAL_RANK, CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-}, scenario $SCENARIO, sim $SIM"
"$CONVOY_BIN/convoy_agent" "${AGENT_ARGS[@]}" "${AGENT_SECURITY[@]}" "${EXTRA_AGENT[@]}" &
AGENT_PID=$!
trap 'kill -TERM "$AGENT_PID" 2>/dev/null' TERM INT
while true; do
  wait "$AGENT_PID"
  RC=$?
  kill -0 "$AGENT_PID" 2>/dev/null || break
done
if [ -n "$SIM_PID" ]; then
  kill -TERM "$SIM_PID" 2>/dev/null
  wait "$SIM_PID" 2>/dev/null
fi
log "convoy_agent exited $RC"
exit "$RC"
