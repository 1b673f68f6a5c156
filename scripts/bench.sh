#!/usr/bin/env bash
# Canonical ringmq benchmarks: builds the release binaries, runs each workload against a fresh
# ringmq broker (new store directory, free loopback ports) and writes a Markdown table.
#
# Usage: scripts/bench.sh [W1 W2 ...]        (default: all of W1..W5)
#
# Workloads (each bounded; BENCH_DURATION_S per measured phase):
#   W1  send 128 B, async flush, 64 sync producers
#   W2  send 1 KiB, sync flush (RINGMQ_STORE_FLUSH_POLICY=sync), 64 sync producers
#   W3  e2e 1 KiB at BENCH_E2E_RATE msg/s (10000) with long-polling consumers
#   W4  catch-up consume of a BENCH_BACKLOG_BYTES backlog (8 GiB), pre-filled by async sends,
#       then a second consume of it (meter catchup_warm), when the first has read it into the
#       page cache
#   W5  many queues: 256 topics x 8 queues, e2e send + consume of 1 KiB (BENCH_W5_RATE, 0 = max)
#
# Environment (defaults in brackets):
#   BENCH_DURATION_S     seconds per workload (measured phase) [20]
#   BENCH_E2E_RATE       W3 target rate [10000]
#   BENCH_BACKLOG_BYTES  W4 backlog [8589934592: each consume phase lasts about 5 s or more at
#                        up to 1.7M msg/s; the broker's store then takes ~10.5 GB of disk]; e.g.
#                        104857600 for a quick run. Its records must stay under 40 % of the
#                        machine's RAM (accessMessageInMemoryMaxRatio): a pull further behind
#                        than that carries at most 8 messages, as in RocketMQ
#   BENCH_W5_RATE        W5 target rate, 0 = as fast as possible [0]
#   BENCH_FILL_DURATION_S  W4: longest pre-fill before consuming what is there [300]
#   BENCH_W4_CONSUME_MAX_S W4: longest consume phase (it ends when the backlog is consumed) [60]
#   BENCH_THREADS        producer threads for W1/W2 [64]
#   BENCH_FLUSH_POLICY   sync|async for every workload's broker, instead of each workload's
#                        own (W2 sync, the others async) [], e.g. to profile W2 without fsyncs
#   BENCH_OUT_DIR        where reports go [target/bench/<timestamp>]
#   BENCH_SKIP_BUILD     1 = use the existing target/release binaries [0]
#   BENCH_SERIALIZE      header encoding of the bench client, json|rocketmq [rocketmq]
#   BENCH_READY_TIMEOUT_S  seconds to wait for a broker to listen [60]
#   BENCH_METRICS_LISTEN  the broker's RINGMQ_METRICS_LISTEN [127.0.0.1:0: metrics on, a free port];
#                        empty = metrics off (docs/BENCHMARKS.md, "Metrics on and off")
#   RINGMQ_BIN, RINGMQ_BENCH_BIN  binaries to use [target/release/ringmq, target/release/ringmq-bench]
#
# Output: $BENCH_OUT_DIR/<W>.json (+ .svg) per workload, $BENCH_OUT_DIR/BENCH.md with the table,
# the command lines and the machine. Everything talks to 127.0.0.1 only.
set -euo pipefail

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_DURATION_S=${BENCH_DURATION_S:-20}
BENCH_E2E_RATE=${BENCH_E2E_RATE:-10000}
BENCH_BACKLOG_BYTES=${BENCH_BACKLOG_BYTES:-8589934592}
BENCH_W5_RATE=${BENCH_W5_RATE:-0}
BENCH_FILL_DURATION_S=${BENCH_FILL_DURATION_S:-300}
BENCH_W4_CONSUME_MAX_S=${BENCH_W4_CONSUME_MAX_S:-60}
BENCH_THREADS=${BENCH_THREADS:-64}
BENCH_SERIALIZE=${BENCH_SERIALIZE:-rocketmq}
BENCH_READY_TIMEOUT_S=${BENCH_READY_TIMEOUT_S:-60}
BENCH_BIN=${RINGMQ_BENCH_BIN:-$BENCH_ROOT/target/release/ringmq-bench}
RINGMQ_BIN=${RINGMQ_BIN:-$BENCH_ROOT/target/release/ringmq}
ALL_WORKLOADS=(W1 W2 W3 W4 W5)

blog() { printf '[bench] %s\n' "$*" >&2; }
bdie() { blog "error: $*"; exit 1; }

build_release() {
  if [[ ${BENCH_SKIP_BUILD:-0} == 1 ]]; then
    [[ -x $BENCH_BIN && -x $RINGMQ_BIN ]] || bdie "BENCH_SKIP_BUILD=1 but target/release binaries are missing"
    return
  fi
  blog "building release binaries"
  (cd "$BENCH_ROOT" && nice -n 10 cargo build --release --bins)
}

# A loopback TCP port nobody listens on (and, for a broker, port-2 too: the fast port is off
# here, but keep the range clear of it anyway).
free_port() {
  local port tries=0
  while ((tries++ < 200)); do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  bdie "no free port found"
}

# The flush policy a workload needs from the broker (BENCH_FLUSH_POLICY overrides it).
workload_flush() {
  case ${BENCH_FLUSH_POLICY:-} in
    sync | async) echo "$BENCH_FLUSH_POLICY"; return ;;
    '') ;;
    *) bdie "BENCH_FLUSH_POLICY=$BENCH_FLUSH_POLICY: must be sync or async" ;;
  esac
  case $1 in
    W2) echo sync ;;
    *) echo async ;;
  esac
}

# ringmq-bench arguments of a workload (without -n and --report).
workload_args() {
  local d=$BENCH_DURATION_S
  case $1 in
    W1) echo "producer -t BenchW1 -s 128 -w $BENCH_THREADS -d $d" ;;
    W2) echo "producer -t BenchW2 -s 1024 -w $BENCH_THREADS -d $d" ;;
    W3) echo "e2e -t BenchW3 -s 1024 -r $BENCH_E2E_RATE -w 32 -d $d" ;;
    W4) echo "catchup -t BenchW4 -s 1024 -y true -c 2 --backlog-bytes $BENCH_BACKLOG_BYTES --fill-duration $BENCH_FILL_DURATION_S -d $BENCH_W4_CONSUME_MAX_S --warm-pass true" ;;
    W5) echo "e2e -t BenchW5 --topics 256 --queues 8 -s 1024 -r $BENCH_W5_RATE -w 32 -d $d" ;;
    *) bdie "unknown workload $1 (W1..W5)" ;;
  esac
}

workload_title() {
  case $1 in
    W1) echo "send 128 B, $(workload_flush W1) flush, $BENCH_THREADS sync producers" ;;
    W2) echo "send 1 KiB, $(workload_flush W2) flush, $BENCH_THREADS sync producers" ;;
    W3) echo "e2e 1 KiB at $BENCH_E2E_RATE msg/s, long-polling consumers" ;;
    W4) echo "catch-up consume of a $BENCH_BACKLOG_BYTES-byte backlog (1 KiB messages)" ;;
    W5) echo "256 topics x 8 queues, e2e 1 KiB, rate $BENCH_W5_RATE (0 = max)" ;;
  esac
}

RINGMQ_PID=
RINGMQ_STORE=
RINGMQ_NAMESRV=
# Broker logs are moved here when a broker stops (set by the main functions).
BENCH_LOG_DIR=

# Starts a fresh ringmq broker (embedded name server) with flush policy $1; sets RINGMQ_PID and
# RINGMQ_NAMESRV. Optional $2: a command prefix (e.g. `ip netns exec NS`) to run it under.
start_ringmq() {
  local flush=$1 prefix=${2:-} broker_port namesrv_port ha_listen_port log waited=0
  broker_port=$(free_port)
  namesrv_port=$(free_port)
  while [[ $namesrv_port == "$broker_port" ]]; do namesrv_port=$(free_port); done
  # The HA port gets a free port of its own: by default it is the listen port + 1, which
  # another socket may hold (a benchmark run lost its broker so: AddrInUse on the HA port).
  ha_listen_port=$(free_port)
  while [[ $ha_listen_port == "$broker_port" || $ha_listen_port == "$namesrv_port" ]]; do ha_listen_port=$(free_port); done
  RINGMQ_STORE=$(mktemp -d "${TMPDIR:-/tmp}/ringmq-bench-store.XXXXXX")
  log=$RINGMQ_STORE.log
  # shellcheck disable=SC2086
  env RINGMQ_STORE_ROOT_DIR="$RINGMQ_STORE" \
    RINGMQ_BROKER_LISTEN_PORT="$broker_port" \
    RINGMQ_METRICS_LISTEN="${BENCH_METRICS_LISTEN-127.0.0.1:0}" \
    RINGMQ_NAMESRV_LISTEN_PORT="$namesrv_port" \
    RINGMQ_HA_LISTEN_PORT="$ha_listen_port" \
    RINGMQ_BROKER_FAST_PORT_ENABLED=false \
    RINGMQ_STORE_FLUSH_POLICY="$flush" \
    RINGMQ_LOG_LEVEL=warn \
    $prefix "$RINGMQ_BIN" broker >"$log" 2>&1 </dev/null &
  RINGMQ_PID=$!
  RINGMQ_NAMESRV=127.0.0.1:$namesrv_port
  until grep -q "ringmq broker listening" "$log" 2>/dev/null; do
    if ! kill -0 "$RINGMQ_PID" 2>/dev/null; then
      tail -n 30 "$log" >&2 || true
      bdie "ringmq exited during startup (log $log)"
    fi
    ((waited++ < BENCH_READY_TIMEOUT_S * 10)) || { tail -n 30 "$log" >&2; bdie "ringmq not listening after ${BENCH_READY_TIMEOUT_S}s"; }
    sleep 0.1
  done
  blog "ringmq ($flush flush) up: name server $RINGMQ_NAMESRV, broker 127.0.0.1:$broker_port, store $RINGMQ_STORE"
}

stop_ringmq() {
  local waited=0
  if [[ -n $RINGMQ_PID ]] && kill -0 "$RINGMQ_PID" 2>/dev/null; then
    kill -TERM "$RINGMQ_PID" 2>/dev/null || true
    while kill -0 "$RINGMQ_PID" 2>/dev/null && ((waited++ < 100)); do sleep 0.1; done
    kill -0 "$RINGMQ_PID" 2>/dev/null && kill -KILL "$RINGMQ_PID" 2>/dev/null || true
    wait "$RINGMQ_PID" 2>/dev/null || true
  fi
  RINGMQ_PID=
  if [[ -n $RINGMQ_STORE ]]; then
    rm -rf "$RINGMQ_STORE"
    if [[ -f $RINGMQ_STORE.log ]]; then
      if [[ -n $BENCH_LOG_DIR ]]; then
        mv "$RINGMQ_STORE.log" "$BENCH_LOG_DIR/ringmq-${RINGMQ_STORE##*.}.log"
      else
        rm -f "$RINGMQ_STORE.log"
      fi
    fi
  fi
  RINGMQ_STORE=
}

# Runs workload $1 against name server $2, report to $3, label $4; optional $5: command prefix.
run_workload() {
  local w=$1 namesrv=$2 report=$3 label=$4 prefix=${5:-} args
  args=$(workload_args "$w")
  blog "$label: ringmq-bench $args"
  # shellcheck disable=SC2086
  $prefix "$BENCH_BIN" $args -n "$namesrv" --serialize "$BENCH_SERIALIZE" \
    --report "$report" --label "$label" || blog "$label: ringmq-bench exited with $?"
}

machine_line() {
  local cpu cores kernel
  cpu=$(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || echo unknown)
  cores=$(nproc 2>/dev/null || echo '?')
  kernel=$(uname -r)
  echo "$cpu, $cores cores, Linux $kernel, $(awk '/MemTotal/ {printf "%.0f GiB RAM", $2/1048576}' /proc/meminfo)"
}

bench_main() {
  local workloads=("$@") out_dir w report
  ((${#workloads[@]})) || workloads=("${ALL_WORKLOADS[@]}")
  out_dir=${BENCH_OUT_DIR:-$BENCH_ROOT/target/bench/$(date +%Y%m%d-%H%M%S)}
  mkdir -p "$out_dir"
  BENCH_LOG_DIR=$out_dir
  build_release
  trap stop_ringmq EXIT
  trap 'exit 130' INT TERM
  local reports=()
  for w in "${workloads[@]}"; do
    workload_args "$w" >/dev/null
    start_ringmq "$(workload_flush "$w")"
    report=$out_dir/$w.json
    run_workload "$w" "$RINGMQ_NAMESRV" "$report" "$w"
    stop_ringmq
    [[ -f $report ]] && reports+=("$report")
  done
  ((${#reports[@]})) || bdie "no workload produced a report"
  {
    echo "# ringmq benchmarks"
    echo
    echo "- git revision: $(cd "$BENCH_ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "- machine: $(machine_line)"
    echo "- command: scripts/bench.sh ${workloads[*]} (BENCH_DURATION_S=$BENCH_DURATION_S, BENCH_E2E_RATE=$BENCH_E2E_RATE, BENCH_BACKLOG_BYTES=$BENCH_BACKLOG_BYTES, BENCH_W5_RATE=$BENCH_W5_RATE)"
    echo
    for w in "${workloads[@]}"; do
      echo "- $w: $(workload_title "$w"): \`ringmq-bench $(workload_args "$w")\`"
    done
    echo
    "$BENCH_BIN" summary "${reports[@]}"
  } >"$out_dir/BENCH.md"
  cat "$out_dir/BENCH.md"
  blog "reports in $out_dir"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  bench_main "$@"
fi
