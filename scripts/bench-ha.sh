#!/usr/bin/env bash
# Replication benchmark: W1 (send 128 B, async flush, 64 sync producers) against a master with a
# slave, ASYNC_MASTER and SYNC_MASTER side by side in one run. During each run
# scripts/ha-lag-sampler.py asks master and slave for GET_BROKER_RUNTIME_INFO (28) every
# BENCH_HA_SAMPLE_MS: replication throughput is the growth of the master's haSlaveAckOffset
# over the loaded window, lag in bytes the master's haSlaveFallBehindBytes, lag in ms each
# sample's time minus the time the master's write position reached the acked offset
# (interpolated between samples). After the run both CommitLogs are scanned: the run fails if
# the slave does not hold every byte of the master's within 60 s.
#
# Usage: scripts/bench-ha.sh
#
# Environment (defaults in brackets):
#   BENCH_DURATION_S   seconds per measured run [10]
#   BENCH_THREADS      producer threads [64]
#   BENCH_ROUNDS       rounds; each runs ASYNC_MASTER then SYNC_MASTER (order alternates) [2]
#   BENCH_HA_SAMPLE_MS how often the master and slave are sampled during the run [100]
#   BENCH_METRICS_LISTEN  both brokers' RINGMQ_METRICS_LISTEN [127.0.0.1:0: on, a free port each]
#   BENCH_OUT_DIR      where reports go [target/bench/ha-<timestamp>]
#   BENCH_SKIP_BUILD   1 = use the existing target/release binaries [0]
#   RINGMQ_BIN, RINGMQ_BENCH_BIN  binaries [target/release/ringmq, target/release/ringmq-bench]
#
# Every process listens on 127.0.0.1 only; stores are fresh temp dirs, removed afterwards.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DURATION_S=${BENCH_DURATION_S:-10}
THREADS=${BENCH_THREADS:-64}
SAMPLE_MS=${BENCH_HA_SAMPLE_MS:-100}
ROUNDS=${BENCH_ROUNDS:-2}
OUT_DIR=${BENCH_OUT_DIR:-$ROOT/target/bench/ha-$(date +%Y%m%d-%H%M%S)}
BENCH_BIN=${RINGMQ_BENCH_BIN:-$ROOT/target/release/ringmq-bench}
RINGMQ_BIN=${RINGMQ_BIN:-$ROOT/target/release/ringmq}

log() { printf '[bench-ha] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [[ ${BENCH_SKIP_BUILD:-0} != 1 ]]; then
  log "building release binaries"
  (cd "$ROOT" && nice -n 10 cargo build --release --bins)
fi
[[ -x $BENCH_BIN && -x $RINGMQ_BIN ]] || die "release binaries missing"
mkdir -p "$OUT_DIR"

# A loopback port nobody listens on whose port + 1 (the HA port) is free too.
free_port() {
  python3 - <<'EOF'
import socket
for _ in range(200):
    a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
    try:
        b = socket.socket(); b.bind(("127.0.0.1", p + 1)); b.close(); a.close(); print(p); break
    except OSError:
        a.close()
EOF
}

PIDS=()
DIRS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  for d in "${DIRS[@]}"; do rm -rf "$d"; done
  PIDS=()
  DIRS=()
}
trap cleanup EXIT

wait_log() {
  local file=$1 needle=$2 waited=0
  until grep -q "$needle" "$file" 2>/dev/null; do
    ((waited++ < 600)) || die "no '$needle' in $file"
    sleep 0.1
  done
}

# The byte after the last record of the CommitLog in $1 (fillers skipped).
commit_log_end() {
  python3 - "$1" <<'EOF'
import os, struct, sys
d = os.path.join(sys.argv[1], "commitlog")
end = 0
for name in sorted(os.listdir(d)):
    start = int(name)
    with open(os.path.join(d, name), "rb") as f:
        data = f.read()
    pos = 0
    while pos + 8 <= len(data):
        total, magic = struct.unpack_from(">iI", data, pos)
        if magic == 0xCBD43194:
            pos = len(data)
        elif magic in (0xDAA320A7, 0xDAA320AB) and total > 0:
            pos += total
        else:
            break
        end = start + pos
print(end)
EOF
}

run_role() {
  local role=$1 label=$2 ns_port m_port s_port ns_dir m_dir s_dir m_end s_end t0 scan_ms
  ns_port=$(free_port); m_port=$(free_port); s_port=$(free_port)
  ns_dir=$(mktemp -d); m_dir=$(mktemp -d); s_dir=$(mktemp -d)
  DIRS+=("$ns_dir" "$m_dir" "$s_dir")
  RINGMQ_NAMESRV_LISTEN_PORT=$ns_port "$RINGMQ_BIN" namesrv >"$ns_dir/log" 2>&1 </dev/null &
  PIDS+=($!)
  wait_log "$ns_dir/log" "name server listening"
  local common=(RINGMQ_NAMESRV_ADDR=127.0.0.1:$ns_port RINGMQ_BROKER_FAST_PORT_ENABLED=false RINGMQ_LOG_LEVEL=info "RINGMQ_METRICS_LISTEN=${BENCH_METRICS_LISTEN-127.0.0.1:0}")
  env "${common[@]}" RINGMQ_BROKER_ROLE="$role" RINGMQ_BROKER_LISTEN_PORT="$m_port" \
    RINGMQ_STORE_ROOT_DIR="$m_dir/store" "$RINGMQ_BIN" broker >"$m_dir/log" 2>&1 </dev/null &
  PIDS+=($!)
  wait_log "$m_dir/log" "ringmq broker listening"
  env "${common[@]}" RINGMQ_BROKER_ROLE=SLAVE RINGMQ_BROKER_ID=1 RINGMQ_BROKER_LISTEN_PORT="$s_port" \
    RINGMQ_STORE_ROOT_DIR="$s_dir/store" "$RINGMQ_BIN" broker >"$s_dir/log" 2>&1 </dev/null &
  PIDS+=($!)
  wait_log "$m_dir/log" "HA slave connected"
  log "$label: $role master 127.0.0.1:$m_port, slave 127.0.0.1:$s_port"
  # Samples both brokers' runtime info (code 28) every SAMPLE_MS through the run and 3 s past it.
  python3 "$ROOT/scripts/ha-lag-sampler.py" "127.0.0.1:$m_port" "127.0.0.1:$s_port" \
    "$OUT_DIR/$label.samples.tsv" $((DURATION_S + 3)) "$SAMPLE_MS" &
  local sampler=$!
  "$BENCH_BIN" producer -t BenchHa -s 128 -w "$THREADS" -d "$DURATION_S" -n "127.0.0.1:$ns_port" \
    --report "$OUT_DIR/$label.json" --label "$label" >/dev/null || log "$label: ringmq-bench exited with $?"
  wait "$sampler" || log "$label: sampler exited with $?"
  python3 "$ROOT/scripts/ha-lag-sampler.py" summarize "$OUT_DIR/$label.samples.tsv" >"$OUT_DIR/$label.repl.txt"
  t0=$(date +%s%N)
  # The slave first: its end as close to the producers' stop as the scan allows.
  s_end=$(commit_log_end "$s_dir/store")
  m_end=$(commit_log_end "$m_dir/store")
  local behind=$((m_end - s_end))
  while ((s_end < m_end)); do
    (( $(date +%s%N) - t0 < 60000000000 )) || die "slave did not catch up in 60 s"
    sleep 0.01
    s_end=$(commit_log_end "$s_dir/store")
  done
  scan_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  printf '%s\t%s\t%s\t%s\t%s\n' "$label" "$role" "$m_end" "$behind" "$scan_ms" >>"$OUT_DIR/lag.tsv"
  cleanup
}

: >"$OUT_DIR/lag.tsv"
for ((r = 1; r <= ROUNDS; r++)); do
  if ((r % 2)); then order=(ASYNC_MASTER SYNC_MASTER); else order=(SYNC_MASTER ASYNC_MASTER); fi
  for role in "${order[@]}"; do run_role "$role" "$role-r$r"; done
done
"$BENCH_BIN" summary "$OUT_DIR"/*.json
printf '\n| run | role | master CommitLog bytes | slave behind after the run (bytes) | ms until verified (scans included) |\n|---|---|---:|---:|---:|\n'
awk -F'\t' '{printf "| %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5}' "$OUT_DIR/lag.tsv"

kv() { awk -F= -v k="$2" '$1 == k {print $2}' "$1"; }
printf '\n| run | role | replication MB/s | lag bytes p50 / p99 / max | lag ms p50 / p99 / max | samples in the loaded window |\n|---|---|---:|---:|---:|---:|\n'
while IFS=$'\t' read -r label role _; do
  f=$OUT_DIR/$label.repl.txt
  printf '| %s | %s | %s | %s / %s / %s | %s / %s / %s | %s |\n' "$label" "$role" "$(kv "$f" repl_mb_s)" \
    "$(kv "$f" lag_bytes_p50)" "$(kv "$f" lag_bytes_p99)" "$(kv "$f" lag_bytes_max)" \
    "$(kv "$f" lag_ms_p50)" "$(kv "$f" lag_ms_p99)" "$(kv "$f" lag_ms_max)" "$(kv "$f" loaded_samples)"
done <"$OUT_DIR/lag.tsv"
