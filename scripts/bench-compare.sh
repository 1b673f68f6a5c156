#!/usr/bin/env bash
# Side-by-side benchmark: the canonical workloads of scripts/bench.sh, in one run, against
#   1. ringmq (fresh store per workload),
#   2. the peer broker: rocketmq-rust 1.0.0 name server + broker from the Rust package registry,
#   3. the echo ceiling: `ringmq-bench echo-server`, which acknowledges sends without storing
#      (the most any broker could reach with this client on this machine).
# Prints each figure and the ratios ringmq/peer and ringmq/ceiling, and writes the table into
# docs/BENCHMARKS.md between the bench-compare markers.
#
# Usage: scripts/bench-compare.sh [W1 W2 ... W6 WHA]  (default: all of W1..W5)
#
# WHA is replication: W1 (`producer -s 128 -w BENCH_THREADS`, async flush) against a master
# with one slave, ASYNC_MASTER then SYNC_MASTER, for ringmq (master with its embedded name
# server, slave finding it there) and the peer (name server, master, slave with
# haMasterAddress), while scripts/ha-lag-sampler.py samples both brokers' runtime info (28)
# every HA_SAMPLE_MS [100]: replication MB/s and lag in bytes and ms (see that script). No echo
# column (the echo server has no slave). Its table goes between the bench-compare-ha markers.
#
# W6 is the real-client workload: the `w6` binary of tests/client-it (rocketmq-client-rust
# 1.0: an open-loop producer at each of W6_RATES msg/s plus a push consumer, e2e latency from
# the intended send time) against each target; its table goes between the bench-compare-w6
# markers. W6_RATES [1000 5000], W6_DURATION_S [15], W6_BODY_BYTES [1024] and W6_QUEUES [8]
# apply; W6_BIN names a prebuilt driver (with BENCH_SKIP_BUILD=1).
#
# The peer servers detect the machine's non-loopback address and dial it, so every server and
# the bench client run inside a network namespace that has only `lo` (needs root and `ip`).
#
# Environment (besides the BENCH_* variables of scripts/bench.sh):
#   COMPARE_PEER        0 skips the peer broker [1]
#   COMPARE_NETNS       network namespace name [ringmq-bench]
#   PEER_CACHE_DIR      where the peer binaries are installed [/work/peer-cache]
#   COMPARE_DOC         Markdown file to update [docs/BENCHMARKS.md]; empty = do not write
#   COMPARE_ECHO_QUEUES queues per topic the echo route announces [8]
#   COMPARE_ECHO_MODELS echo server models the ceiling is the best of [per-connection pool]:
#                       each workload runs against a fresh echo server of each model, and the
#                       ceiling column shows the better run (W3 and W5: the lower e2e p99;
#                       W1, W2, W4: the higher msg/s), named in the table's header. W6 uses
#                       the first model.
#   COMPARE_NOTE        a sentence added to the table's header (e.g. which ringmq build ran)
#   HA_SAMPLE_MS        WHA: how often master and slave are sampled [100]
#   HA_PEER_STORE_DIR   WHA: where the peer's stores go [$TMPDIR or /tmp]; the peer refuses
#                       sends on a file system 90 % used (statvfs), e.g. /dev/shm then
#   HA_PEER_START_ATTEMPTS  WHA: tries to start the peer master + slave [3]
set -euo pipefail

# shellcheck source=scripts/bench.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench.sh"

COMPARE_PEER=${COMPARE_PEER:-1}
COMPARE_NETNS=${COMPARE_NETNS:-ringmq-bench}
PEER_CACHE_DIR=${PEER_CACHE_DIR:-/work/peer-cache}
COMPARE_DOC=${COMPARE_DOC-$BENCH_ROOT/docs/BENCHMARKS.md}
COMPARE_ECHO_QUEUES=${COMPARE_ECHO_QUEUES:-8}
COMPARE_ECHO_MODELS=${COMPARE_ECHO_MODELS:-per-connection pool}
PEER_VERSION=1.0.0
PEER_NAMESRV_BIN=$PEER_CACHE_DIR/bin/rocketmq-namesrv-rust
PEER_BROKER_BIN=$PEER_CACHE_DIR/bin/rocketmq-broker-rust
PEER_RUN_DIR=
PEER_PIDS=()
ECHO_PID=
NS_PREFIX=
# The peer's ports inside the private namespace (nothing else listens there).
PEER_NAMESRV_PORT=9876
PEER_BROKER_PORT=10911

install_peer() {
  if [[ -x $PEER_NAMESRV_BIN && -x $PEER_BROKER_BIN ]]; then
    return
  fi
  if [[ -x $BENCH_ROOT/scripts/peer-broker.sh ]]; then
    PEER_CACHE_DIR=$PEER_CACHE_DIR "$BENCH_ROOT/scripts/peer-broker.sh" install
    return
  fi
  # Same steps as scripts/peer-broker.sh (shared target dir so the broker reuses the name
  # server's dependencies); about 7 minutes on 2 cores.
  mkdir -p "$PEER_CACHE_DIR"
  blog "installing rocketmq-namesrv@$PEER_VERSION and rocketmq-broker@$PEER_VERSION into $PEER_CACHE_DIR"
  CARGO_TARGET_DIR=$PEER_CACHE_DIR/target nice -n 10 cargo install --root "$PEER_CACHE_DIR" "rocketmq-namesrv@$PEER_VERSION"
  CARGO_TARGET_DIR=$PEER_CACHE_DIR/target nice -n 10 cargo install --root "$PEER_CACHE_DIR" "rocketmq-broker@$PEER_VERSION"
}

setup_netns() {
  if [[ $(id -u) != 0 ]] || ! command -v ip >/dev/null; then
    if [[ $COMPARE_PEER == 1 ]]; then
      bdie "the peer broker must run in a loopback-only network namespace: run as root with iproute2, or set COMPARE_PEER=0"
    fi
    blog "not root: running ringmq and the echo server on the host loopback"
    NS_PREFIX=
    return
  fi
  if ! ip netns list | awk '{print $1}' | grep -qx "$COMPARE_NETNS"; then
    ip netns add "$COMPARE_NETNS"
  fi
  ip netns exec "$COMPARE_NETNS" ip link set lo up
  NS_PREFIX="ip netns exec $COMPARE_NETNS"
}

teardown_netns() {
  if [[ -n $NS_PREFIX ]]; then
    ip netns delete "$COMPARE_NETNS" 2>/dev/null || true
  fi
}

ns_port_open() { $NS_PREFIX bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

wait_ns_port() {
  local port=$1 pid=$2 log=$3 waited=0
  until ns_port_open "$port"; do
    kill -0 "$pid" 2>/dev/null || { tail -n 30 "$log" >&2 || true; bdie "process for port $port exited (log $log)"; }
    ((waited++ < BENCH_READY_TIMEOUT_S * 10)) || { tail -n 30 "$log" >&2; bdie "nothing listens on $port"; }
    sleep 0.1
  done
}

# Starts the peer name server and broker with flush policy $1 (async|sync).
start_peer() {
  local flush=$1 flush_type=ASYNC_FLUSH store
  [[ $flush == sync ]] && flush_type=SYNC_FLUSH
  PEER_RUN_DIR=$(mktemp -d "${TMPDIR:-/tmp}/ringmq-bench-peer.XXXXXX")
  store=$PEER_RUN_DIR/store-a
  mkdir -p "$PEER_RUN_DIR/home"
  cat >"$PEER_RUN_DIR/broker.toml" <<EOF
[broker]
namesrvAddr = "127.0.0.1:$PEER_NAMESRV_PORT"
brokerIp1 = "127.0.0.1"
brokerIp2 = "127.0.0.1"
listenPort = $PEER_BROKER_PORT
storePathRootDir = "$store"
[broker.brokerServerConfig]
bindAddress = "127.0.0.1"
[broker.brokerIdentity]
brokerName = "broker-a"
brokerClusterName = "DefaultCluster"
brokerId = 0
[store]
storeType = "LocalFile"
brokerRole = "ASYNC_MASTER"
flushDiskType = "$flush_type"
storePathRootDir = "$store"
haListenAddress = "127.0.0.1"
haListenPort = $((PEER_BROKER_PORT + 1))
EOF
  HOME=$PEER_RUN_DIR/home ROCKETMQ_HOME=$PEER_RUN_DIR/home \
    $NS_PREFIX "$PEER_NAMESRV_BIN" --bindAddress 127.0.0.1 --listenPort "$PEER_NAMESRV_PORT" \
    >"$PEER_RUN_DIR/namesrv.log" 2>&1 </dev/null &
  PEER_PIDS=($!)
  wait_ns_port "$PEER_NAMESRV_PORT" "${PEER_PIDS[0]}" "$PEER_RUN_DIR/namesrv.log"
  HOME=$PEER_RUN_DIR/home ROCKETMQ_HOME=$PEER_RUN_DIR/home ROCKETMQ_SECURITY_PROFILE=development-insecure-loopback \
    $NS_PREFIX "$PEER_BROKER_BIN" -c "$PEER_RUN_DIR/broker.toml" -n "127.0.0.1:$PEER_NAMESRV_PORT" \
    >"$PEER_RUN_DIR/broker.log" 2>&1 </dev/null &
  PEER_PIDS+=($!)
  wait_ns_port "$PEER_BROKER_PORT" "${PEER_PIDS[1]}" "$PEER_RUN_DIR/broker.log"
  # Let the first REGISTER_BROKER reach the name server so the TBW102 route exists.
  sleep "${PEER_REGISTER_WAIT_S:-3}"
  blog "peer ($flush_type) up in $PEER_RUN_DIR"
}

stop_pid() {
  local pid=$1 waited=0
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null && ((waited++ < 100)); do sleep 0.1; done
  kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}

stop_peer() {
  local i
  for ((i = ${#PEER_PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${PEER_PIDS[i]}"; done
  PEER_PIDS=()
  if [[ -n $PEER_RUN_DIR ]]; then
    cp "$PEER_RUN_DIR"/*.log "$OUT_DIR/" 2>/dev/null || true
    rm -rf "$PEER_RUN_DIR"
  fi
  PEER_RUN_DIR=
}

ECHO_ADDR=
# Starts an echo server of model $1 (`--echo-model`; the first of COMPARE_ECHO_MODELS if none).
start_echo() {
  local model=${1:-${COMPARE_ECHO_MODELS%% *}} waited=0 port
  local log=$OUT_DIR/echo-$model.log
  port=$(free_port)
  $NS_PREFIX "$BENCH_BIN" echo-server --listen "127.0.0.1:$port" -d 600 \
    --echo-queues "$COMPARE_ECHO_QUEUES" --echo-model "$model" >>"$log" 2>&1 </dev/null &
  ECHO_PID=$!
  until grep -q "echo-server listening" "$log" 2>/dev/null; do
    kill -0 "$ECHO_PID" 2>/dev/null || { cat "$log" >&2; bdie "echo-server exited"; }
    ((waited++ < 100)) || bdie "echo-server did not start"
    sleep 0.1
  done
  ECHO_ADDR=127.0.0.1:$port
}

stop_echo() {
  [[ -n $ECHO_PID ]] && stop_pid "$ECHO_PID"
  ECHO_PID=
}

cleanup() {
  stop_ha
  stop_ringmq
  stop_peer
  stop_echo
  teardown_netns
}

# Runs workload $1 against a fresh echo server of each of COMPARE_ECHO_MODELS and keeps the
# better report's path in ECHO_REPORTS[$1] (W3, W5: lower e2e p99; others: higher msg/s);
# appends "<workload> <model>" to ECHO_PICKS.
ECHO_PICKS=
declare -A ECHO_REPORTS=()
run_echo_ceiling() {
  local w=$1 meter col model v best= best_v= lower=0
  meter=$(main_meter "$w")
  case $w in
    W3 | W5) col=8 lower=1 ;;
    *) col=4 ;;
  esac
  for model in $COMPARE_ECHO_MODELS; do
    start_echo "$model"
    run_workload "$w" "$ECHO_ADDR" "$OUT_DIR/$w-echo-$model.json" "$w-echo-$model" "$NS_PREFIX"
    stop_echo
    v=$(metric "$OUT_DIR/$w-echo-$model.json" "$meter" $col)
    [[ $v == - ]] && continue
    if [[ -z $best ]] || awk -v a="$v" -v b="$best_v" -v l=$lower 'BEGIN { exit !(l ? a < b : a > b) }'; then
      best=$model best_v=$v
    fi
  done
  if [[ -n $best ]]; then
    ECHO_REPORTS[$w]=$OUT_DIR/$w-echo-$best.json
    ECHO_PICKS+="${ECHO_PICKS:+, }$w $best"
  fi
}

# The meter that carries a workload's headline figures.
main_meter() {
  case $1 in
    W1 | W2) echo send ;;
    W3 | W5) echo e2e ;;
    W4) echo catchup ;;
  esac
}

# The meters with rows in the table: the main one, then W4's warm pass (its second consume
# of the same backlog, from the page cache).
table_meters() {
  main_meter "$1"
  if [[ $1 == W4 ]]; then echo catchup_warm; fi
}

# Field $3 (tsv column: 4 msg/s, 5 MB/s, 6 failures, 8 p99 µs, 11 e2e not consumed) of meter $2
# in report $1, or "-".
metric() {
  local report=$1 meter=$2 col=$3
  [[ -f $report ]] || { echo -; return; }
  "$BENCH_BIN" summary --format tsv "$report" | awk -F'\t' -v m="$meter" -v c="$col" '$3 == m {print $c; found=1} END {if (!found) print "-"}'
}

ratio() {
  awk -v a="$1" -v b="$2" 'BEGIN { if (a == "-" || b == "-" || b + 0 == 0) print "-"; else printf "%.2f", a / b }'
}

fmt_us() {
  awk -v v="$1" 'BEGIN { if (v == "-") print "-"; else if (v < 1000) printf "%d µs", v; else printf "%.2f ms", v / 1000 }'
}

# W6 against target $1 (name server address) as $2: the w6 lines into $OUT_DIR/W6-$2.txt.
run_w6() {
  local namesrv=$1 name=$2
  blog "W6 against $name"
  # shellcheck disable=SC2086
  W6_DURATION_S=${W6_DURATION_S:-15} W6_BODY_BYTES=${W6_BODY_BYTES:-1024} W6_QUEUES=${W6_QUEUES:-8} \
    timeout $((${W6_DURATION_S:-15} * 4 + 240)) $NS_PREFIX "$W6_BIN" "$namesrv" ${W6_RATES:-1000 5000} \
    >"$OUT_DIR/W6-$name.txt" 2>"$OUT_DIR/W6-$name.log" || blog "W6 against $name failed (see $OUT_DIR/W6-$name.log)"
}

# Field $3 (p50_us, p99_us, ...) of the W6 line for rate $2 in $OUT_DIR/W6-$1.txt, or "-".
w6_field() {
  local file=$OUT_DIR/W6-$1.txt
  [[ -f $file ]] || { echo -; return; }
  awk -v r="rate=$2" -v f="$3" '$2 == r { for (i = 3; i <= NF; i++) { split($i, kv, "="); if (kv[1] == f) { print kv[2]; found = 1 } } } END { if (!found) print "-" }' "$file"
}

compare_w6() {
  local rate table row r p e field
  W6_BIN=${W6_BIN:-$BENCH_ROOT/target/release/w6}
  if [[ ${BENCH_SKIP_BUILD:-0} != 1 ]]; then
    blog "building the W6 driver (tests/client-it, release)"
    (cd "$BENCH_ROOT" && nice -n 10 cargo build --release -p ringmq-client-it --bin w6)
  fi
  [[ -x $W6_BIN ]] || bdie "$W6_BIN missing"
  start_ringmq async "$NS_PREFIX"
  run_w6 "$RINGMQ_NAMESRV" ringmq
  stop_ringmq
  if [[ $COMPARE_PEER == 1 ]]; then
    start_peer async
    run_w6 "127.0.0.1:$PEER_NAMESRV_PORT" peer
    stop_peer
  fi
  start_echo
  run_w6 "$ECHO_ADDR" echo
  stop_echo
  table="| W6 rate | metric | ringmq | rocketmq-rust 1.0.0 | echo ceiling | ringmq/peer | ringmq/ceiling |
|---|---|---:|---:|---:|---:|---:|"
  for rate in ${W6_RATES:-1000 5000}; do
    for field in acked consumed p50_us p99_us p999_us max_us; do
      r=$(w6_field ringmq "$rate" $field)
      p=$(w6_field peer "$rate" $field)
      e=$(w6_field echo "$rate" $field)
      case $field in
        acked | consumed) row="| $rate msg/s | $field | $r | $p | $e | | |" ;;
        *) row="| $rate msg/s | e2e ${field%_us} | $(fmt_us "$r") | $(fmt_us "$p") | $(fmt_us "$e") | $(ratio "$r" "$p") | $(ratio "$r" "$e") |" ;;
      esac
      table+=$'\n'"$row"
    done
  done
  local header
  header="Run: \`scripts/bench-compare.sh W6\` (W6_RATES=${W6_RATES:-1000 5000}, W6_DURATION_S=${W6_DURATION_S:-15}, W6_BODY_BYTES=${W6_BODY_BYTES:-1024}, W6_QUEUES=${W6_QUEUES:-8}, COMPARE_PEER=$COMPARE_PEER) at git $(cd "$BENCH_ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown) on $(date -u +%Y-%m-%d), load average $(cut -d' ' -f1-3 /proc/loadavg) at the end.
Machine: $(machine_line). Client: rocketmq-client-rust 1.0 (\`tests/client-it/src/bin/w6.rs\`). Reports: $OUT_DIR."
  printf '%s\n\n%s\n' "$header" "$table" | tee "$OUT_DIR/W6.md"
  if [[ -n $COMPARE_DOC ]]; then
    update_doc "$COMPARE_DOC" "$header" "$table" bench-compare-w6
    blog "updated $COMPARE_DOC"
  fi
}

# ---- WHA: master + slave ----

HA_SAMPLE_MS=${HA_SAMPLE_MS:-100}
HA_PIDS=()
HA_DIRS=()

# Prints a free port that is at least 3 away from each of the ports given.
ha_port() {
  local p q ok tries=0
  while ((tries++ < 100)); do
    p=$(free_port)
    ok=1
    for q in "$@"; do ((p > q - 3 && p < q + 3)) && ok=0; done
    ((ok)) && { echo "$p"; return; }
  done
  bdie "no free port found"
}

wait_grep() {
  local file=$1 needle=$2 pid=$3 waited=0
  until grep -q "$needle" "$file" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || { tail -n 30 "$file" >&2 || true; bdie "process exited before '$needle' (log $file)"; }
    ((waited++ < BENCH_READY_TIMEOUT_S * 10)) || { tail -n 30 "$file" >&2; bdie "no '$needle' in $file"; }
    sleep 0.1
  done
}

stop_ha() {
  local i d
  for ((i = ${#HA_PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${HA_PIDS[i]}"; done
  HA_PIDS=()
  for d in "${HA_DIRS[@]}"; do
    cp "$d"/*.log "$OUT_DIR/" 2>/dev/null || true
    rm -rf "$d"
  done
  HA_DIRS=()
}

# ringmq master of role $1 (embedded name server) + slave; sets HA_NAMESRV, HA_MASTER, HA_SLAVE.
start_ringmq_ha() {
  local role=$1 dir ns m s
  dir=$(mktemp -d "${TMPDIR:-/tmp}/ringmq-bench-ha.XXXXXX")
  HA_DIRS+=("$dir")
  ns=$(ha_port)
  m=$(ha_port "$ns")
  s=$(ha_port "$ns" "$m")
  local common=(RINGMQ_BROKER_FAST_PORT_ENABLED=false RINGMQ_LOG_LEVEL=info RINGMQ_STORE_FLUSH_POLICY=async
    "RINGMQ_METRICS_LISTEN=${BENCH_METRICS_LISTEN-127.0.0.1:0}")
  # shellcheck disable=SC2086
  env "${common[@]}" RINGMQ_NAMESRV_LISTEN_PORT="$ns" RINGMQ_BROKER_ROLE="$role" \
    RINGMQ_BROKER_LISTEN_PORT="$m" RINGMQ_STORE_ROOT_DIR="$dir/master" \
    $NS_PREFIX "$RINGMQ_BIN" broker >"$dir/ringmq-$role-master.log" 2>&1 </dev/null &
  HA_PIDS+=($!)
  wait_grep "$dir/ringmq-$role-master.log" "ringmq broker listening" "${HA_PIDS[0]}"
  # shellcheck disable=SC2086
  env "${common[@]}" RINGMQ_NAMESRV_ADDR="127.0.0.1:$ns" RINGMQ_BROKER_ROLE=SLAVE RINGMQ_BROKER_ID=1 \
    RINGMQ_BROKER_LISTEN_PORT="$s" RINGMQ_STORE_ROOT_DIR="$dir/slave" \
    $NS_PREFIX "$RINGMQ_BIN" broker >"$dir/ringmq-$role-slave.log" 2>&1 </dev/null &
  HA_PIDS+=($!)
  wait_grep "$dir/ringmq-$role-master.log" "HA slave connected" "${HA_PIDS[1]}"
  HA_NAMESRV=127.0.0.1:$ns HA_MASTER=127.0.0.1:$m HA_SLAVE=127.0.0.1:$s
  blog "ringmq $role master $HA_MASTER + slave $HA_SLAVE up in $dir"
}

# A peer broker config: role $1, id $2, port $3, store $4, then extra [store] lines.
peer_ha_toml() {
  local role=$1 id=$2 port=$3 store=$4 line
  shift 4
  cat <<TOML
[broker]
namesrvAddr = "127.0.0.1:$PEER_NAMESRV_PORT"
brokerIp1 = "127.0.0.1"
brokerIp2 = "127.0.0.1"
listenPort = $port
storePathRootDir = "$store"
brokerRole = "$role"
[broker.brokerServerConfig]
bindAddress = "127.0.0.1"
[broker.brokerIdentity]
brokerName = "broker-a"
brokerClusterName = "DefaultCluster"
brokerId = $id
[store]
storeType = "LocalFile"
brokerRole = "$role"
flushDiskType = "ASYNC_FLUSH"
storePathRootDir = "$store"
haListenAddress = "127.0.0.1"
haListenPort = $((port + 1))
TOML
  for line in "$@"; do echo "$line"; done
}

# The peer broker sometimes gives up during startup ("Service lifecycle operation failed",
# rolling back after it registered): up to HA_PEER_START_ATTEMPTS [3] tries, each logged.
start_peer_ha() {
  local role=$1 attempt
  for ((attempt = 1; attempt <= ${HA_PEER_START_ATTEMPTS:-3}; attempt++)); do
    if (start_peer_ha_once "$role"); then
      # The subshell's processes keep running; find them again by their run dir.
      HA_DIRS+=("$(cat "$OUT_DIR/.peer-ha-dir")")
      read -r -a HA_PIDS <"$OUT_DIR/.peer-ha-pids"
      HA_NAMESRV=127.0.0.1:$PEER_NAMESRV_PORT HA_MASTER=127.0.0.1:$PEER_BROKER_PORT
      HA_SLAVE=127.0.0.1:$((PEER_BROKER_PORT + 4))
      return
    fi
    blog "peer $role master + slave failed to start (attempt $attempt); see $OUT_DIR/peer-$role-*.log.$attempt"
    local log
    for log in "$OUT_DIR"/peer-"$role"-*.log; do [[ -f $log ]] && mv "$log" "$log.$attempt"; done
  done
  bdie "peer $role master + slave did not start in ${HA_PEER_START_ATTEMPTS:-3} attempts"
}

# One try, in a subshell: on failure it stops what it started (its EXIT trap) and copies the
# logs; on success it leaves the pids and run dir in $OUT_DIR/.peer-ha-{pids,dir}.
start_peer_ha_once() {
  local role=$1 dir slave_port=$((PEER_BROKER_PORT + 4)) env_run
  HA_PIDS=()
  HA_DIRS=()
  trap stop_ha EXIT
  # The peer marks its store not writeable (sends answer SERVICE_NOT_AVAILABLE) once its file
  # system is 90 % used by statvfs (its warning ratio is clamped to 90 %); HA_PEER_STORE_DIR
  # puts its stores elsewhere, e.g. on a tmpfs, when the bench disk is that full.
  dir=$(mktemp -d "${HA_PEER_STORE_DIR:-${TMPDIR:-/tmp}}/ringmq-bench-peer-ha.XXXXXX")
  HA_DIRS+=("$dir")
  mkdir -p "$dir/home"
  peer_ha_toml "$role" 0 "$PEER_BROKER_PORT" "$dir/store-m" >"$dir/master.toml"
  peer_ha_toml SLAVE 1 "$slave_port" "$dir/store-s" \
    "haMasterAddress = \"127.0.0.1:$((PEER_BROKER_PORT + 1))\"" >"$dir/slave.toml"
  env_run=(env HOME="$dir/home" ROCKETMQ_HOME="$dir/home")
  # shellcheck disable=SC2086
  $NS_PREFIX "${env_run[@]}" "$PEER_NAMESRV_BIN" --bindAddress 127.0.0.1 --listenPort "$PEER_NAMESRV_PORT" \
    >"$dir/peer-$role-namesrv.log" 2>&1 </dev/null &
  HA_PIDS+=($!)
  wait_ns_port "$PEER_NAMESRV_PORT" "${HA_PIDS[0]}" "$dir/peer-$role-namesrv.log"
  env_run+=(ROCKETMQ_SECURITY_PROFILE=development-insecure-loopback)
  # shellcheck disable=SC2086
  $NS_PREFIX "${env_run[@]}" "$PEER_BROKER_BIN" -c "$dir/master.toml" -n "127.0.0.1:$PEER_NAMESRV_PORT" \
    >"$dir/peer-$role-master.log" 2>&1 </dev/null &
  HA_PIDS+=($!)
  wait_ns_port "$PEER_BROKER_PORT" "${HA_PIDS[1]}" "$dir/peer-$role-master.log"
  # shellcheck disable=SC2086
  $NS_PREFIX "${env_run[@]}" "$PEER_BROKER_BIN" -c "$dir/slave.toml" -n "127.0.0.1:$PEER_NAMESRV_PORT" \
    >"$dir/peer-$role-slave.log" 2>&1 </dev/null &
  HA_PIDS+=($!)
  wait_ns_port "$slave_port" "${HA_PIDS[2]}" "$dir/peer-$role-slave.log"
  wait_grep "$dir/peer-$role-master.log" "HAService accepted a new connection" "${HA_PIDS[1]}"
  # Let the first REGISTER_BROKER reach the name server so the TBW102 route exists.
  sleep "${PEER_REGISTER_WAIT_S:-3}"
  local pid
  for pid in "${HA_PIDS[@]}"; do kill -0 "$pid" 2>/dev/null || { blog "peer process $pid exited"; exit 1; }; done
  echo "${HA_PIDS[*]}" >"$OUT_DIR/.peer-ha-pids"
  echo "$dir" >"$OUT_DIR/.peer-ha-dir"
  blog "peer $role master 127.0.0.1:$PEER_BROKER_PORT + slave 127.0.0.1:$slave_port up in $dir"
  trap - EXIT
}

# W1 against the running master + slave as label $1, sampled; writes $1.json and $1.repl.txt.
run_ha() {
  local label=$1 sampler
  # shellcheck disable=SC2086
  $NS_PREFIX python3 "$BENCH_ROOT/scripts/ha-lag-sampler.py" "$HA_MASTER" "$HA_SLAVE" \
    "$OUT_DIR/$label.samples.tsv" $((BENCH_DURATION_S + 3)) "$HA_SAMPLE_MS" &
  sampler=$!
  run_workload W1 "$HA_NAMESRV" "$OUT_DIR/$label.json" "$label" "$NS_PREFIX"
  wait "$sampler" || blog "$label: sampler exited with $?"
  python3 "$BENCH_ROOT/scripts/ha-lag-sampler.py" summarize "$OUT_DIR/$label.samples.tsv" >"$OUT_DIR/$label.repl.txt"
}

ha_kv() {
  local v
  v=$(awk -F= -v k="$2" '$1 == k {print $2}' "$OUT_DIR/$1.repl.txt" 2>/dev/null) || true
  echo "${v:--}"
}

# One table row for label $1 (target $2).
ha_row() {
  local label=$1 name=$2 report=$OUT_DIR/$1.json
  printf '| %s | %s | %s | %s | %s | %s | %s | %s / %s / %s | %s / %s / %s | %s |' "$name" "${label##*-}" \
    "$(metric "$report" send 4)" "$(fmt_us "$(metric "$report" send 7)")" "$(fmt_us "$(metric "$report" send 8)")" \
    "$(metric "$report" send 6)" "$(ha_kv "$label" repl_mb_s)" \
    "$(ha_kv "$label" lag_bytes_p50)" "$(ha_kv "$label" lag_bytes_p99)" "$(ha_kv "$label" lag_bytes_max)" \
    "$(ha_kv "$label" lag_ms_p50)" "$(ha_kv "$label" lag_ms_p99)" "$(ha_kv "$label" lag_ms_max)" \
    "$(ha_kv "$label" loaded_samples)"
}

compare_ha() {
  local role target label table name
  for role in ASYNC_MASTER SYNC_MASTER; do
    start_ringmq_ha "$role"
    run_ha "WHA-ringmq-$role"
    stop_ha
    if [[ $COMPARE_PEER == 1 ]]; then
      start_peer_ha "$role"
      run_ha "WHA-peer-$role"
      stop_ha
    fi
  done
  table="| target | role | send msg/s | p50 | p99 | failures | replication MB/s | lag bytes p50 / p99 / max | lag ms p50 / p99 / max | samples |
|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
  for target in ringmq peer; do
    name=ringmq
    [[ $target == peer ]] && name="rocketmq-rust $PEER_VERSION"
    for role in ASYNC_MASTER SYNC_MASTER; do
      label=WHA-$target-$role
      [[ -f $OUT_DIR/$label.json ]] || continue
      table+=$'\n'"$(ha_row "$label" "$name")"
    done
  done
  local header
  header="Run: \`scripts/bench-compare.sh WHA\` (BENCH_DURATION_S=$BENCH_DURATION_S, BENCH_THREADS=$BENCH_THREADS, HA_SAMPLE_MS=$HA_SAMPLE_MS, COMPARE_PEER=$COMPARE_PEER) at git $(cd "$BENCH_ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown) on $(date -u +%Y-%m-%d), load average $(cut -d' ' -f1-3 /proc/loadavg) at the end.
Machine: $(machine_line). Command: \`ringmq-bench $(workload_args W1)\` against the master. Reports: $OUT_DIR."
  printf '%s\n\n%s\n' "$header" "$table" | tee "$OUT_DIR/WHA.md"
  if [[ -n $COMPARE_DOC ]]; then
    update_doc "$COMPARE_DOC" "$header" "$table" bench-compare-ha
    blog "updated $COMPARE_DOC"
  fi
}

compare_main() {
  local workloads=() w target report w6=0 wha=0
  for w in "$@"; do
    case $w in
      W6) w6=1 ;;
      WHA) wha=1 ;;
      *) workloads+=("$w") ;;
    esac
  done
  ((${#workloads[@]} || w6 || wha)) || workloads=("${ALL_WORKLOADS[@]}")
  for w in "${workloads[@]}"; do workload_args "$w" >/dev/null; done
  OUT_DIR=${BENCH_OUT_DIR:-$BENCH_ROOT/target/bench/compare-$(date +%Y%m%d-%H%M%S)}
  mkdir -p "$OUT_DIR"
  BENCH_LOG_DIR=$OUT_DIR
  build_release
  [[ $COMPARE_PEER == 1 ]] && install_peer
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  setup_netns
  ((w6)) && compare_w6
  ((wha)) && compare_ha
  ((${#workloads[@]})) || return 0
  for w in "${workloads[@]}"; do
    start_ringmq "$(workload_flush "$w")" "$NS_PREFIX"
    run_workload "$w" "$RINGMQ_NAMESRV" "$OUT_DIR/$w-ringmq.json" "$w-ringmq" "$NS_PREFIX"
    stop_ringmq
    if [[ $COMPARE_PEER == 1 ]]; then
      start_peer "$(workload_flush "$w")"
      run_workload "$w" "127.0.0.1:$PEER_NAMESRV_PORT" "$OUT_DIR/$w-peer.json" "$w-peer" "$NS_PREFIX"
      stop_peer
    fi
    run_echo_ceiling "$w"
  done

  local table row meter main r p e col title
  table="| workload | metric | ringmq | rocketmq-rust 1.0.0 | echo ceiling | ringmq/peer | ringmq/ceiling |
|---|---|---:|---:|---:|---:|---:|"
  for w in "${workloads[@]}"; do
    main=$(main_meter "$w")
    for meter in $(table_meters "$w"); do
      # The workload's title heads its main meter's rows only.
      title=
      if [[ $meter == "$main" ]]; then title=" $(workload_title "$w")"; fi
      for target in msgs mb p99 failures lost; do
        case $target in
          msgs) col=4 ;;
          mb) col=5 ;;
          p99) col=8 ;;
          failures) col=6 ;;
          lost) [[ $meter == e2e ]] || continue; col=11 ;;
        esac
        r=$(metric "$OUT_DIR/$w-ringmq.json" "$meter" $col)
        p=$(metric "$OUT_DIR/$w-peer.json" "$meter" $col)
        e=$(metric "${ECHO_REPORTS[$w]:-$OUT_DIR/$w-echo.json}" "$meter" $col)
        case $target in
          msgs) row="| $w$title | $meter msg/s | $r | $p | $e | $(ratio "$r" "$p") | $(ratio "$r" "$e") |" ;;
          mb) row="| $w | $meter MB/s | $r | $p | $e | $(ratio "$r" "$p") | $(ratio "$r" "$e") |" ;;
          p99) row="| $w | $meter p99 | $(fmt_us "$r") | $(fmt_us "$p") | $(fmt_us "$e") | $(ratio "$r" "$p") | $(ratio "$r" "$e") |" ;;
          failures) row="| $w | $meter failures | $r | $p | $e | | |" ;;
          lost) row="| $w | sent, not consumed | $r | $p | $e | | |" ;;
        esac
        table+=$'\n'"$row"
      done
    done
  done

  local header
  header="Run: \`scripts/bench-compare.sh ${workloads[*]}\` (BENCH_DURATION_S=$BENCH_DURATION_S, BENCH_E2E_RATE=$BENCH_E2E_RATE, BENCH_BACKLOG_BYTES=$BENCH_BACKLOG_BYTES, BENCH_W5_RATE=$BENCH_W5_RATE, COMPARE_PEER=$COMPARE_PEER) at git $(cd "$BENCH_ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown) on $(date -u +%Y-%m-%d).
Machine: $(machine_line). All processes on one machine, loopback only$([[ -n $NS_PREFIX ]] && echo ", inside a loopback-only network namespace").
Commands: $(for w in "${workloads[@]}"; do printf '%s `ringmq-bench %s`; ' "$w" "$(workload_args "$w")"; done)
Echo ceiling: the better of \`echo-server --echo-model\` $COMPARE_ECHO_MODELS per workload (W3, W5: lower e2e p99; W1, W2, W4: higher msg/s): ${ECHO_PICKS:-none}.
Reports: $OUT_DIR.${COMPARE_NOTE:+
$COMPARE_NOTE}"
  printf '%s\n\n%s\n' "$header" "$table" | tee "$OUT_DIR/COMPARE.md"
  {
    echo
    echo "All reports:"
    echo
    "$BENCH_BIN" summary "$OUT_DIR"/W*-*.json
  } >>"$OUT_DIR/COMPARE.md"

  if [[ -n $COMPARE_DOC ]]; then
    update_doc "$COMPARE_DOC" "$header" "$table"
    blog "updated $COMPARE_DOC"
  fi
}

# Replaces the text between the bench-compare markers of $1 (appends a section if missing).
update_doc() {
  local doc=$1 header=$2 table=$3 marker=${4:-bench-compare}
  local begin="<!-- $marker:begin -->" end="<!-- $marker:end -->" block
  block=$(printf '%s\n%s\n\n%s\n%s' "$begin" "$header" "$table" "$end")
  if [[ -f $doc ]] && grep -qF "$begin" "$doc"; then
    BLOCK=$block awk -v b="$begin" -v e="$end" '
      $0 == b { print ENVIRON["BLOCK"]; skip = 1; next }
      $0 == e { skip = 0; next }
      !skip { print }' "$doc" >"$doc.tmp"
    mv "$doc.tmp" "$doc"
  else
    printf '\n## Latest comparison\n\n%s\n' "$block" >>"$doc"
  fi
}

compare_main "$@"
