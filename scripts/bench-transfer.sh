#!/usr/bin/env bash
# Pull response transfer benchmark: copy vs zerocopy vs auto (RINGMQ_TRANSFER_MODE), measured with
# `ringmq-bench catchup --broker-pid` (broker CPU seconds per GiB served, user and system).
#
# Usage: scripts/bench-transfer.sh
#
# For each layout and body size (a "point"):
#   1. a broker (mode auto) on a fresh data dir; `ringmq-bench catchup` fills the backlog with async
#      sends, then consumes it once: that consume is the untimed warm-up (the page cache holds the
#      whole backlog afterwards, for every mode alike); the broker stops.
#   2. TRANSFER_REPS rounds; in each, every mode in turn (the first mode rotates per round): start
#      a broker on the same data dir with RINGMQ_TRANSFER_MODE=<mode>, wait until it listens, run
#      `catchup --skip-fill --broker-pid <pid>` (fresh group, offset 0 to the end, maxMsgNums 32,
#      one pull in flight per queue like the Java push consumer), stop the broker.
#   3. the data dir is deleted.
# Layouts:
#   single  1 topic x 1 queue: a queue's records are contiguous in the CommitLog
#   many    TRANSFER_MANY_TOPICS topics x 1 queue, filled round robin by one async sender: every
#           record of a queue is separate from the next one (interleaved)
#
# Environment (defaults in brackets):
#   TRANSFER_LAYOUTS        layouts to run ["single many"]
#   TRANSFER_SIZES          body sizes in bytes ["128 4096 65536 1048576"]
#   TRANSFER_MODES          modes ["copy zerocopy auto"]
#   TRANSFER_REPS           measured rounds per point [5]
#   TRANSFER_SMALL_BACKLOG_BYTES  backlog of bodies for sizes < 4096 [134217728 = 128 MiB]
#   TRANSFER_BACKLOG_BYTES  backlog of bodies for the other sizes [2147483648 = 2 GiB]
#   TRANSFER_MANY_TOPICS    topics of the many layout [64]
#   TRANSFER_RUN_LIMIT_S    longest fill and longest consume of one run, at most 600 [300]
#   TRANSFER_READY_TIMEOUT_S  seconds to wait for a broker to listen [120]
#   TRANSFER_OUT_DIR        reports and the result table [target/bench-transfer/<timestamp>]
#   TRANSFER_DATA_DIR       where the broker data dirs go [$TMPDIR or /tmp]
#   TRANSFER_SKIP_BUILD     1 = use the existing target/release binaries [0]
#   RINGMQ_BIN, RINGMQ_BENCH_BIN  binaries [target/release/ringmq, target/release/ringmq-bench]
#
# Output: $TRANSFER_OUT_DIR/<layout>-<size>-<mode>-r<rep>.json per measured run, runs.tsv (one
# line per run) and TRANSFER.md (the table). Everything talks to 127.0.0.1 only; the brokers
# this script starts are stopped on exit (trap), whatever happens.
# The broker's RINGMQ_METRICS_LISTEN is BENCH_METRICS_LISTEN [127.0.0.1:0]; empty = metrics off.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TRANSFER_LAYOUTS=${TRANSFER_LAYOUTS:-"single many"}
TRANSFER_SIZES=${TRANSFER_SIZES:-"128 4096 65536 1048576"}
TRANSFER_MODES=${TRANSFER_MODES:-"copy zerocopy auto"}
TRANSFER_REPS=${TRANSFER_REPS:-5}
TRANSFER_SMALL_BACKLOG_BYTES=${TRANSFER_SMALL_BACKLOG_BYTES:-134217728}
TRANSFER_BACKLOG_BYTES=${TRANSFER_BACKLOG_BYTES:-2147483648}
TRANSFER_MANY_TOPICS=${TRANSFER_MANY_TOPICS:-64}
TRANSFER_RUN_LIMIT_S=${TRANSFER_RUN_LIMIT_S:-300}
TRANSFER_READY_TIMEOUT_S=${TRANSFER_READY_TIMEOUT_S:-120}
TRANSFER_DATA_DIR=${TRANSFER_DATA_DIR:-${TMPDIR:-/tmp}}
BENCH_BIN=${RINGMQ_BENCH_BIN:-$ROOT/target/release/ringmq-bench}
RINGMQ_BIN=${RINGMQ_BIN:-$ROOT/target/release/ringmq}
# Java DefaultMQPushConsumer.pullBatchSize.
PULL_BATCH=32
# Bytes of bodies in flight while filling (async sends), so 1 MiB bodies do not queue 1 GiB.
FILL_INFLIGHT_BYTES=$((64 * 1024 * 1024))

tlog() { printf '[bench-transfer %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
tdie() { tlog "error: $*"; exit 1; }

for v in TRANSFER_REPS TRANSFER_SMALL_BACKLOG_BYTES TRANSFER_BACKLOG_BYTES TRANSFER_MANY_TOPICS \
  TRANSFER_RUN_LIMIT_S TRANSFER_READY_TIMEOUT_S; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || tdie "$v=${!v} is not a positive integer"
done
((TRANSFER_RUN_LIMIT_S <= 600)) || tdie "TRANSFER_RUN_LIMIT_S is at most 600 (ringmq-bench's cap)"
((TRANSFER_REPS <= 20)) || tdie "TRANSFER_REPS is at most 20"
command -v jq >/dev/null || tdie "jq is needed to read the JSON reports"

# A loopback TCP port nobody listens on. The broker binds with SO_REUSEPORT, so a second broker
# could silently share a port: probe by connecting, and keep port-2 clear (fast port, off here).
free_port() {
  local port tries=0
  while ((tries++ < 200)); do
    port=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null &&
      ! (exec 3<>"/dev/tcp/127.0.0.1/$((port - 2))") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
  tdie "no free port found"
}

BROKER_PID=
BROKER_NAMESRV=
BROKER_LOG=
POINT_DIR=

stop_broker() {
  local waited=0
  if [[ -n $BROKER_PID ]] && kill -0 "$BROKER_PID" 2>/dev/null; then
    kill -TERM "$BROKER_PID" 2>/dev/null || true
    while kill -0 "$BROKER_PID" 2>/dev/null && ((waited++ < 150)); do sleep 0.1; done
    if kill -0 "$BROKER_PID" 2>/dev/null; then
      tlog "broker $BROKER_PID ignored SIGTERM for 15 s; killing it"
      kill -KILL "$BROKER_PID" 2>/dev/null || true
    fi
    wait "$BROKER_PID" 2>/dev/null || true
  fi
  BROKER_PID=
}

cleanup() {
  stop_broker
  if [[ -n $POINT_DIR && -d $POINT_DIR ]]; then rm -rf "$POINT_DIR"; fi
}

# Starts a broker with transfer mode $1 on store $2; logs to $3. Sets BROKER_PID, BROKER_NAMESRV.
start_broker() {
  local mode=$1 store=$2 log=$3 broker_port namesrv_port waited=0
  broker_port=$(free_port)
  namesrv_port=$(free_port)
  while ((namesrv_port >= broker_port - 2 && namesrv_port <= broker_port)); do namesrv_port=$(free_port); done
  BROKER_LOG=$log
  env RINGMQ_STORE_ROOT_DIR="$store" \
    RINGMQ_BROKER_LISTEN_PORT="$broker_port" \
    RINGMQ_METRICS_LISTEN="${BENCH_METRICS_LISTEN-127.0.0.1:0}" \
    RINGMQ_NAMESRV_LISTEN_PORT="$namesrv_port" \
    RINGMQ_BROKER_FAST_PORT_ENABLED=false \
    RINGMQ_TRANSFER_MODE="$mode" \
    RINGMQ_LOG_LEVEL=warn \
    "$RINGMQ_BIN" broker >"$log" 2>&1 </dev/null &
  BROKER_PID=$!
  BROKER_NAMESRV=127.0.0.1:$namesrv_port
  until grep -q "ringmq broker listening" "$log" 2>/dev/null; do
    if ! kill -0 "$BROKER_PID" 2>/dev/null; then
      tail -n 30 "$log" >&2 || true
      BROKER_PID=
      tdie "broker exited during startup (log $log)"
    fi
    ((waited++ < TRANSFER_READY_TIMEOUT_S * 10)) || { tail -n 30 "$log" >&2; tdie "broker not listening after ${TRANSFER_READY_TIMEOUT_S}s"; }
    sleep 0.1
  done
}

backlog_bytes_for() { if (($1 < 4096)); then echo "$TRANSFER_SMALL_BACKLOG_BYTES"; else echo "$TRANSFER_BACKLOG_BYTES"; fi; }

topic_args_for() {
  case $1 in
    single) echo "-t XferS --topics 1 --queues 1" ;;
    many) echo "-t XferM --topics $TRANSFER_MANY_TOPICS --queues 1" ;;
    *) tdie "unknown layout $1 (single, many)" ;;
  esac
}

human_size() {
  local b=$1
  if ((b >= 1048576 && b % 1048576 == 0)); then echo "$((b / 1048576)) MiB"
  elif ((b >= 1024 && b % 1024 == 0)); then echo "$((b / 1024)) KiB"
  else echo "$b B"; fi
}

# One TSV line of a measured report: layout size mode rep MiB/s user_s/GiB sys_s/GiB total_s/GiB
# (MiB/s and per GiB are of the records received: pull response bodies, served_record_bytes).
report_line() {
  local report=$1 layout=$2 size=$3 mode=$4 rep=$5
  jq -r --arg l "$layout" --arg s "$size" --arg m "$mode" --arg r "$rep" '
    if .error != null then error("run failed: \(.error)") else . end
    | if .extra.complete != true then error("the backlog was not consumed completely") else . end
    | [$l, $s, $m, $r,
       (.extra.served_record_bytes / .results.catchup.elapsed_s / 1048576),
       .extra.broker_cpu_user_s_per_gib, .extra.broker_cpu_sys_s_per_gib,
       .extra.broker_cpu_total_s_per_gib, .extra.pull_requests, .extra.served_record_bytes]
    | @tsv' "$report"
}

run_point() {
  local layout=$1 size=$2 out_dir=$3 backlog store topic_args inflight fill_report rep i mode report
  local -a modes
  read -r -a modes <<<"$TRANSFER_MODES"
  backlog=$(backlog_bytes_for "$size")
  topic_args=$(topic_args_for "$layout")
  inflight=$((FILL_INFLIGHT_BYTES / size))
  if ((inflight > 1024)); then inflight=1024; fi
  if ((inflight < 8)); then inflight=8; fi
  POINT_DIR=$(mktemp -d "$TRANSFER_DATA_DIR/ringmq-bench-transfer.XXXXXX")
  store=$POINT_DIR/store
  fill_report=$out_dir/$layout-$size-fill.json
  tlog "$layout $(human_size "$size"): filling $backlog bytes of bodies (and one warm-up consume)"
  start_broker auto "$store" "$out_dir/$layout-$size-fill.log"
  # shellcheck disable=SC2086
  "$BENCH_BIN" catchup -n "$BROKER_NAMESRV" $topic_args -s "$size" -y true --inflight "$inflight" \
    --backlog-bytes "$backlog" --fill-duration "$TRANSFER_RUN_LIMIT_S" -d "$TRANSFER_RUN_LIMIT_S" \
    --pull-batch "$PULL_BATCH" --progress false --report "$fill_report" --svg /dev/null >/dev/null ||
    tdie "fill of $layout $size failed (see $fill_report)"
  stop_broker
  jq -e '.extra.fill.complete == true and .extra.complete == true' "$fill_report" >/dev/null ||
    tdie "$layout $size: the fill did not complete within ${TRANSFER_RUN_LIMIT_S}s (raise TRANSFER_RUN_LIMIT_S or lower the backlog)"
  for ((rep = 1; rep <= TRANSFER_REPS; rep++)); do
    for ((i = 0; i < ${#modes[@]}; i++)); do
      # Rotate the first mode each round, so no mode always runs first or last.
      mode=${modes[$(((i + rep - 1) % ${#modes[@]}))]}
      report=$out_dir/$layout-$size-$mode-r$rep.json
      start_broker "$mode" "$store" "$out_dir/$layout-$size-$mode-r$rep.log"
      # shellcheck disable=SC2086
      "$BENCH_BIN" catchup -n "$BROKER_NAMESRV" $topic_args -s "$size" --skip-fill \
        --broker-pid "$BROKER_PID" -d "$TRANSFER_RUN_LIMIT_S" --pull-batch "$PULL_BATCH" \
        --progress false --label "$layout-$size-$mode-r$rep" --report "$report" --svg /dev/null \
        >"$out_dir/$layout-$size-$mode-r$rep.out" 2>&1 ||
        { cat "$out_dir/$layout-$size-$mode-r$rep.out" >&2; tdie "$layout $size $mode round $rep failed"; }
      stop_broker
      report_line "$report" "$layout" "$size" "$mode" "$rep" >>"$out_dir/runs.tsv"
      tlog "$layout $(human_size "$size") $mode r$rep: $(tail -n 1 "$out_dir/runs.tsv" | cut -f5-8 |
        awk -F'\t' '{printf "%.0f MiB/s, user %.3f sys %.3f total %.3f s/GiB", $1, $2, $3, $4}')"
    done
  done
  rm -rf "$POINT_DIR"
  POINT_DIR=
}

# The Markdown table of runs.tsv: medians per (layout, size, mode), the spread of the total, and
# whether auto's median total CPU is within the better fixed mode's spread (at most its worst run).
render_table() {
  awk -F'\t' -v modes="$TRANSFER_MODES" '
    function median(list, n,   a, i, j, t) {
      split(list, a, " ")
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
      return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    function human(b) { return b >= 1048576 ? b / 1048576 " MiB" : (b >= 1024 ? b / 1024 " KiB" : b " B") }
    {
      point = $1 SUBSEP $2
      if (!(point in seen)) { seen[point] = 1; points[++npoints] = point }
      k = point SUBSEP $3
      n[k]++; mib[k] = mib[k] " " $5; usr[k] = usr[k] " " $6; sys[k] = sys[k] " " $7; tot[k] = tot[k] " " $8
      if (!(k in lo) || $8 + 0 < lo[k]) lo[k] = $8 + 0
      if (!(k in hi) || $8 + 0 > hi[k]) hi[k] = $8 + 0
      pulls[k] += $9; bytes[k] += $10
    }
    END {
      nmodes = split(modes, mode, " ")
      print "| layout | body | mode | MiB/s | user s/GiB | sys s/GiB | total s/GiB | total min-max | avg pull KiB | auto vs the better fixed mode |"
      print "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
      for (k in n) med[k] = median(tot[k], n[k])
      for (i = 1; i <= npoints; i++) {
        split(points[i], p, SUBSEP)
        for (m = 1; m <= nmodes; m++) {
          k = points[i] SUBSEP mode[m]
          if (!(k in n)) continue
          check = ""
          c = points[i] SUBSEP "copy"; z = points[i] SUBSEP "zerocopy"
          if (mode[m] == "auto" && (c in med) && (z in med)) {
            best = (med[c] <= med[z]) ? "copy" : "zerocopy"
            b = points[i] SUBSEP best
            verdict = (med[k] <= hi[b]) ? "ok" : "WORSE"
            check = sprintf("%s (%s; %+.0f%%)", verdict, best, (med[k] / med[b] - 1) * 100)
          }
          printf "| %s | %s | %s | %.0f | %.3f | %.3f | %.3f | %.3f-%.3f | %.0f | %s |\n", p[1], human(p[2]), mode[m],
            median(mib[k], n[k]), median(usr[k], n[k]), median(sys[k], n[k]), med[k], lo[k], hi[k],
            bytes[k] / pulls[k] / 1024, check
        }
      }
    }' "$1"
}

transfer_main() {
  local out_dir layout size started
  out_dir=${TRANSFER_OUT_DIR:-$ROOT/target/bench-transfer/$(date +%Y%m%d-%H%M%S)}
  mkdir -p "$out_dir"
  out_dir=$(cd "$out_dir" && pwd)
  if [[ ${TRANSFER_SKIP_BUILD:-0} == 1 ]]; then
    [[ -x $BENCH_BIN && -x $RINGMQ_BIN ]] || tdie "TRANSFER_SKIP_BUILD=1 but the release binaries are missing"
  else
    tlog "building release binaries"
    (cd "$ROOT" && nice -n 10 cargo build --release --bin ringmq --bin ringmq-bench)
  fi
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  : >"$out_dir/runs.tsv"
  started=$(date +%s)
  for layout in $TRANSFER_LAYOUTS; do
    topic_args_for "$layout" >/dev/null
    for size in $TRANSFER_SIZES; do
      [[ $size =~ ^[1-9][0-9]*$ ]] || tdie "body size $size is not a positive integer"
      run_point "$layout" "$size" "$out_dir"
    done
  done
  {
    echo "# ringmq pull transfer: copy vs zerocopy vs auto"
    echo
    echo "- git revision: $(cd "$ROOT" && git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "- machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores, Linux $(uname -r)"
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'), $(($(date +%s) - started)) s; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "- command: TRANSFER_LAYOUTS=\"$TRANSFER_LAYOUTS\" TRANSFER_SIZES=\"$TRANSFER_SIZES\" TRANSFER_MODES=\"$TRANSFER_MODES\" TRANSFER_REPS=$TRANSFER_REPS TRANSFER_SMALL_BACKLOG_BYTES=$TRANSFER_SMALL_BACKLOG_BYTES TRANSFER_BACKLOG_BYTES=$TRANSFER_BACKLOG_BYTES TRANSFER_MANY_TOPICS=$TRANSFER_MANY_TOPICS scripts/bench-transfer.sh"
    echo "- each figure: median of $TRANSFER_REPS runs; MiB/s and s/GiB are of whole records received (pull response bodies)"
    echo "- auto check: ok when auto's median total CPU is at most the worst run of the better fixed mode"
    echo
    render_table "$out_dir/runs.tsv"
  } >"$out_dir/TRANSFER.md"
  cat "$out_dir/TRANSFER.md"
  tlog "reports in $out_dir"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  transfer_main "$@"
fi
