#!/usr/bin/env bash
# CPU profile of the ringmq broker (and of the bench client beside it) under one canonical
# workload of scripts/bench.sh.
#
# Usage: scripts/profile.sh W1|W2|W3|W4|W5
#
# Starts a fresh release broker on free loopback ports (same settings as scripts/bench.sh), runs
# the workload with ringmq-bench, waits PROFILE_WARMUP_S, then samples both processes for
# PROFILE_SECONDS with the software event cpu-clock (hardware counters are not available on
# the VMs this was written on):
#   perf record -e cpu-clock -F $PROFILE_FREQ_HZ -g -p <pid> -- sleep $PROFILE_SECONDS
# and writes, per process, `perf report --stdio --no-children` (flat, by symbol) plus the split
# by thread (comm) and by DSO (kernel vs ringmq vs libc).
#
# Environment (defaults in brackets; the BENCH_* variables of scripts/bench.sh apply too):
#   PROFILE_SECONDS    sampling window [10]
#   PROFILE_WARMUP_S   seconds of workload before sampling starts [3]
#   PROFILE_FREQ_HZ    sampling frequency [999]
#   PROFILE_OUT_DIR    output directory [target/profile/<W>-<timestamp>]
#   PROFILE_CALLGRAPH  perf --call-graph mode [fp]; "dwarf" gives deeper Rust stacks, bigger files
# Needs perf (Debian: apt-get install -y linux-perf) and permission to attach to the processes
# (root, or kernel.perf_event_paranoid <= 1).
set -euo pipefail

# shellcheck source=scripts/bench.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench.sh"

PROFILE_SECONDS=${PROFILE_SECONDS:-10}
PROFILE_WARMUP_S=${PROFILE_WARMUP_S:-3}
PROFILE_FREQ_HZ=${PROFILE_FREQ_HZ:-999}
PROFILE_CALLGRAPH=${PROFILE_CALLGRAPH:-fp}
BENCH_CLIENT_PID=

plog() { printf '[profile] %s\n' "$*" >&2; }

profile_cleanup() {
  if [[ -n $BENCH_CLIENT_PID ]] && kill -0 "$BENCH_CLIENT_PID" 2>/dev/null; then
    kill -TERM "$BENCH_CLIENT_PID" 2>/dev/null || true
    wait "$BENCH_CLIENT_PID" 2>/dev/null || true
  fi
  BENCH_CLIENT_PID=
  stop_ringmq
}

# One line per thread name of process $1: name, voluntary and involuntary context switches,
# CPU ticks (threads of one name summed).
thread_switches() {
  local t name
  for t in /proc/"$1"/task/*; do
    name=$(tr -c 'A-Za-z0-9.\n-' '_' <"$t/comm" 2>/dev/null) || continue
    printf '%s %s %s\n' "$name" \
      "$(awk '/^voluntary_ctxt/ { v = $2 } /^nonvoluntary_ctxt/ { n = $2 } END { print v + 0, n + 0 }' "$t/status" 2>/dev/null)" \
      "$(sed 's/.*) //' "$t/stat" 2>/dev/null | awk '{ print $12 + $13 }')"
  done | awk 'NF == 4 { v[$1] += $2; n[$1] += $3; c[$1] += $4 } END { for (k in v) print k, v[k], n[k], c[k] }' | sort
}

# Per thread name, context switches per second and CPU between two thread_switches snapshots
# $1 and $2 taken $3 seconds apart.
switches_table() {
  local hz
  hz=$(getconf CLK_TCK)
  echo "thread, voluntary switches/s, involuntary switches/s, CPU %:"
  join "$1" "$2" | awk -v s="$3" -v hz="$hz" '($5 - $2) + ($6 - $3) + ($7 - $4) > 0 {
    printf "  %-18s %8.0f %8.0f %6.1f\n", $1, ($5 - $2) / s, ($6 - $3) / s, ($7 - $4) * 100 / hz / s }'
}

# Writes the flat report, the per-thread split and the per-DSO split of perf data $1 to $2.txt.
report_profile() {
  local data=$1 out=$2
  # `head` closes the pipes early; perf's SIGPIPE is not a failure (it ended the script before
  # the callers' report and the bench client's).
  local -
  set +o pipefail
  {
    echo "## by thread (comm)"
    perf report -i "$data" --stdio --no-children --sort comm -g none 2>/dev/null | grep -v '^$' | head -30
    echo
    echo "## by DSO"
    perf report -i "$data" --stdio --no-children --sort dso -g none 2>/dev/null | grep -v '^$' | head -30
    echo
    echo "## flat, by symbol (no children)"
    perf report -i "$data" --stdio --no-children --sort symbol -g none 2>/dev/null | grep -v '^$' | head -80
  } >"$out.txt"
  # The call-graph version, for reading who calls the hot symbols.
  perf report -i "$data" --stdio --no-children 2>/dev/null | head -400 >"$out.callers.txt"
}

profile_main() {
  local w=${1:-} out_dir args total_s
  [[ -n $w ]] || bdie "usage: scripts/profile.sh W1|W2|W3|W4|W5"
  command -v perf >/dev/null || bdie "perf not found (Debian: apt-get install -y linux-perf)"
  workload_args "$w" >/dev/null
  out_dir=${PROFILE_OUT_DIR:-$BENCH_ROOT/target/profile/$w-$(date +%Y%m%d-%H%M%S)}
  mkdir -p "$out_dir"
  BENCH_LOG_DIR=$out_dir
  # The workload must outlast warm-up + sampling (W4's fill phase comes on top of this).
  total_s=$((PROFILE_WARMUP_S + PROFILE_SECONDS + 5))
  if ((BENCH_DURATION_S < total_s)); then BENCH_DURATION_S=$total_s; fi
  build_release
  trap profile_cleanup EXIT
  trap 'exit 130' INT TERM

  start_ringmq "$(workload_flush "$w")"
  args=$(workload_args "$w")
  plog "$w: ringmq-bench $args"
  # shellcheck disable=SC2086
  "$BENCH_BIN" $args -n "$RINGMQ_NAMESRV" --serialize "$BENCH_SERIALIZE" \
    --report "$out_dir/$w.json" --label "$w-profiled" >"$out_dir/bench.log" 2>&1 &
  BENCH_CLIENT_PID=$!
  sleep "$PROFILE_WARMUP_S"
  kill -0 "$BENCH_CLIENT_PID" 2>/dev/null || { tail -n 20 "$out_dir/bench.log" >&2; bdie "ringmq-bench exited early"; }

  plog "sampling broker pid $RINGMQ_PID and bench pid $BENCH_CLIENT_PID for ${PROFILE_SECONDS}s"
  perf record -e cpu-clock -F "$PROFILE_FREQ_HZ" --call-graph "$PROFILE_CALLGRAPH" \
    -p "$RINGMQ_PID" -o "$out_dir/broker.perf.data" -- sleep "$PROFILE_SECONDS" \
    2>"$out_dir/perf-broker.err" &
  local perf_broker=$!
  perf record -e cpu-clock -F "$PROFILE_FREQ_HZ" --call-graph "$PROFILE_CALLGRAPH" \
    -p "$BENCH_CLIENT_PID" -o "$out_dir/bench.perf.data" -- sleep "$PROFILE_SECONDS" \
    2>"$out_dir/perf-bench.err" &
  local perf_bench=$!
  # CPU time of each process over the same window (utime+stime from /proc, in clock ticks).
  local hz t0b t0c t1b t1c
  hz=$(getconf CLK_TCK)
  t0b=$(awk '{print $14+$15}' "/proc/$RINGMQ_PID/stat")
  t0c=$(awk '{print $14+$15}' "/proc/$BENCH_CLIENT_PID/stat")
  thread_switches "$RINGMQ_PID" >"$out_dir/broker.switches0"
  thread_switches "$BENCH_CLIENT_PID" >"$out_dir/bench.switches0"
  wait "$perf_broker" "$perf_bench"
  thread_switches "$RINGMQ_PID" >"$out_dir/broker.switches1"
  thread_switches "$BENCH_CLIENT_PID" >"$out_dir/bench.switches1"
  t1b=$(awk '{print $14+$15}' "/proc/$RINGMQ_PID/stat" 2>/dev/null || echo "$t0b")
  t1c=$(awk '{print $14+$15}' "/proc/$BENCH_CLIENT_PID/stat" 2>/dev/null || echo "$t0c")
  {
    echo "workload: $w: $(workload_title "$w")"
    echo "bench: ringmq-bench $args"
    echo "window: ${PROFILE_SECONDS}s after ${PROFILE_WARMUP_S}s warm-up; machine: $(machine_line)"
    awk -v b=$((t1b - t0b)) -v c=$((t1c - t0c)) -v hz="$hz" -v s="$PROFILE_SECONDS" \
      'BEGIN { printf "cpu: broker %.2f cores, bench client %.2f cores (of %d)\n", b/hz/s, c/hz/s, '"$(nproc)"' }'
    echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "broker $(switches_table "$out_dir/broker.switches0" "$out_dir/broker.switches1" "$PROFILE_SECONDS")"
    echo "bench client $(switches_table "$out_dir/bench.switches0" "$out_dir/bench.switches1" "$PROFILE_SECONDS")"
  } >"$out_dir/summary.txt"

  wait "$BENCH_CLIENT_PID" || plog "ringmq-bench exited with $?"
  BENCH_CLIENT_PID=
  stop_ringmq
  report_profile "$out_dir/broker.perf.data" "$out_dir/broker"
  report_profile "$out_dir/bench.perf.data" "$out_dir/bench"
  tail -n 12 "$out_dir/bench.log" >>"$out_dir/summary.txt"
  cat "$out_dir/summary.txt"
  echo
  head -n 60 "$out_dir/broker.txt"
  plog "profiles in $out_dir (broker.txt, bench.txt, *.callers.txt, *.perf.data)"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  profile_main "$@"
fi
