#!/usr/bin/env bash
# One convoy_ps task of deploy/slurm/convoy.sbatch. With CONVOY_PS_SHARDS=N above 1 the PS step runs N of
# these, and task SLURM_PROCID serves shard SLURM_PROCID of N (convoy_ps --num_shards): its port file is
# $CONVOY_RUN_DIR/ps-<i>.port and its checkpoints $CONVOY_CKPT_DIR/shard-<i>. With one shard: ps.port and
# $CONVOY_CKPT_DIR itself, as a run without shards has them. The other flags come from convoy.sbatch.
set -euo pipefail
shards="${CONVOY_PS_SHARDS:-1}"
index="${SLURM_PROCID:-0}"
base="${CONVOY_PS_PORT:-0}"
port=0
[ "$base" -eq 0 ] || port=$((base + index))  # N shards on one node: a port each.
# Prometheus metrics on a free port, published for convoy.sbatch's file_sd targets (CONVOY_METRICS_DIR).
metrics=()
[ -z "${CONVOY_METRICS_DIR:-}" ] ||
  metrics=(--metrics_address=0.0.0.0:0 --metrics_port_file="$CONVOY_METRICS_DIR/ps-$index.port")
if [ "$shards" -gt 1 ]; then
  exec "$CONVOY_BIN/convoy_ps" --num_shards="$shards" --shard_index="$index" --port="$port" \
    --port_file="$CONVOY_RUN_DIR/ps-$index.port" --checkpoint_dir="$CONVOY_CKPT_DIR/shard-$index" \
    "${metrics[@]}" "$@"
fi
exec "$CONVOY_BIN/convoy_ps" --port="$port" --port_file="$CONVOY_RUN_DIR/ps.port" \
  --checkpoint_dir="$CONVOY_CKPT_DIR" "${metrics[@]}" "$@"
