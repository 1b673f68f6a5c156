#!/usr/bin/env bash
# A/B of two ringmq builds (or of one build under two environments), alternating, so both
# sides see the same machine: for each pair and workload, one run of each side (A first in odd
# pairs, B first in even ones, so neither side always follows the other), each on a fresh
# broker started as scripts/bench.sh starts it. Per run it records the bench's figures, the
# broker's CPU time per message consumed (or sent, for send-only workloads) from
# /proc/<pid>/stat, its resident memory (idle after start, VmHWM at the end), the bytes it
# dirtied for the disk (/proc/<pid>/io write_bytes) and the mean CommitLog flush (fsync) time
# from its metrics endpoint. Then a table of medians per side.
#
# Usage: scripts/bench-ab.sh A_BIN B_BIN [W ...]     (default workloads: W5 W3)
#   e.g. scripts/bench-ab.sh /tmp/old/ringmq target/release/ringmq W5 W3
#        AB_A_ENV=RINGMQ_LONGPOLL_WAKE_INLINE_PARKED_MAX=0 \
#        AB_B_ENV=RINGMQ_LONGPOLL_WAKE_INLINE_PARKED_MAX=4 \
#          scripts/bench-ab.sh target/release/ringmq target/release/ringmq W5
#
# Environment (defaults in brackets; the BENCH_* variables of scripts/bench.sh apply too, and
# BENCH_DURATION_S defaults to 10 here):
#   AB_PAIRS       how many A/B pairs [3]
#   AB_A_ENV, AB_B_ENV  extra `VAR=value` words set for that side's broker only []
#   AB_OUT_DIR     reports, logs and AB.md [target/bench/ab-<timestamp>]
#   AB_DSTATE      1 = also count, every 2 ms, the broker threads found in uninterruptible sleep
#                  (state D) and keep their kernel stacks (/proc/<pid>/task/<tid>/stack: root) [0]
# Needs python3 (reads the bench's JSON reports and the broker's metrics). The bench client is target/release's
# ringmq-bench for both sides (RINGMQ_BENCH_BIN to change it). Loopback only.
set -euo pipefail

# shellcheck source=scripts/bench.sh
source "$(dirname "${BASH_SOURCE[0]}")/bench.sh"

AB_PAIRS=${AB_PAIRS:-3}
AB_A_ENV=${AB_A_ENV:-}
AB_B_ENV=${AB_B_ENV:-}
AB_DSTATE=${AB_DSTATE:-0}
BENCH_DURATION_S=${BENCH_DURATION_S:-10}

alog() { printf '[ab] %s\n' "$*" >&2; }

# Until SIGTERM: every 2 ms, the threads of broker $1 in uninterruptible sleep (state D); writes
# the count per thread and the most frequent kernel stacks to $2.
dstate_sampler() {
  exec python3 - "$1" "$2" <<'PY'
import collections, os, signal, sys, time
pid, out = sys.argv[1], sys.argv[2]
by_thread, stacks, running = collections.Counter(), collections.Counter(), [True]
signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
while running[0]:
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        break
    for tid in tids:
        try:
            stat = open(f"/proc/{pid}/task/{tid}/stat").read()
            if stat[stat.rindex(")") + 2] != "D":
                continue
            comm = stat[stat.index("(") + 1 : stat.rindex(")")]
            try:
                frames = [l.split()[1] for l in open(f"/proc/{pid}/task/{tid}/stack") if len(l.split()) > 1]
            except OSError:
                frames = ["(stack not readable)"]
        except (OSError, ValueError, IndexError):
            continue
        by_thread[comm] += 1
        stacks[comm + ": " + " < ".join(frames[:10])] += 1
    time.sleep(0.002)
with open(out, "w") as f:
    f.write("samples in state D, by thread\n")
    for comm, n in by_thread.most_common():
        f.write(f"{n} {comm}\n")
    f.write("\nkernel stacks (innermost first)\n")
    for stack, n in stacks.most_common(20):
        f.write(f"{n} {stack}\n")
PY
}

# Mean seconds of one CommitLog flush (the metrics' histogram sum over its count) at
# http://$1/metrics, or -1 when none ran or the endpoint did not answer.
flush_mean_s() {
  python3 - "$1" <<'PY' || echo -1
import re, sys, urllib.request
text = urllib.request.urlopen(f"http://{sys.argv[1]}/metrics", timeout=5).read().decode()
total = re.search(r"^ringmq_commitlog_flush_latency_seconds_sum (\S+)", text, re.M)
count = re.search(r"^ringmq_commitlog_flush_latency_seconds_count (\S+)", text, re.M)
n = float(count.group(1)) if count else 0
print(float(total.group(1)) / n if n else -1)
PY
}

# The table of runs and the medians per side, from $1/runs.txt and the reports; $2 = clock ticks.
ab_table() {
  python3 - "$1" "$2" <<'PY'
import json, statistics, sys
out_dir, tick = sys.argv[1], int(sys.argv[2])
rows, by_side = [], {}
for line in open(f"{out_dir}/runs.txt"):
    pair, w, side, idle_kib, hwm_kib, ticks, written, flush_s = line.split()
    with open(f"{out_dir}/{w}-{side}-{pair}.json") as f:
        results = json.load(f)["results"]
    meter = results.get("e2e") or results.get("catchup") or results.get("send")
    lat, msgs = meter["latency_us"], max(1, meter["messages"])
    cpu_us = int(ticks) / tick * 1e6 / msgs
    row = (meter["messages_per_s"], lat["p50"] / 1e3, lat["p99"] / 1e3, lat["p99_9"] / 1e3,
           cpu_us, int(idle_kib) / 1024, int(hwm_kib) / 1024, int(written) / 2**20,
           float(flush_s) * 1e3 if float(flush_s) >= 0 else float("nan"))
    rows.append((pair, w, side, row))
    by_side.setdefault((w, side), []).append(row)
head = ("| {} | msg/s | p50 ms | p99 ms | p99.9 ms | broker CPU per message µs | RSS idle MiB"
        " | peak RSS MiB | disk writes MiB | CommitLog flush mean ms |")
rule = "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
cells = lambda r: "{:,.0f} | {:.2f} | {:.2f} | {:.2f} | {:.1f} | {:.1f} | {:.1f} | {:,.0f} | {:.3f}".format(*r)
print(head.format("pair, workload, side")); print(rule)
for pair, w, side, r in rows:
    print(f"| {pair}, {w}, {side} | {cells(r)} |")
print(); print("Medians per side:"); print()
print(head.format("workload, side")); print(rule)
for (w, side), rs in sorted(by_side.items()):
    med = tuple(statistics.median(col) for col in zip(*rs))
    print(f"| {w}, {side} | {cells(med)} |")
PY
}

# Runs workload $1 on a fresh broker of binary $2 with extra env words $3; side label $4, pair $5.
ab_run() {
  local w=$1 bin=$2 extra=$3 side=$4 pair=$5 name idle sampler='' var metrics
  name=$w-$side-$pair
  local saved_bin=$RINGMQ_BIN
  RINGMQ_BIN=$bin
  for var in $extra; do export "${var?}"; done
  metrics=127.0.0.1:$(free_port)
  BENCH_METRICS_LISTEN=$metrics start_ringmq "$(workload_flush "$w")"
  for var in $extra; do unset "${var%%=*}"; done
  RINGMQ_BIN=$saved_bin
  sleep 1
  idle=$(awk '/^VmRSS/ {print $2}' "/proc/$RINGMQ_PID/status")
  if [[ $AB_DSTATE == 1 ]]; then
    dstate_sampler "$RINGMQ_PID" "$AB_OUT_DIR/$name.dstate.txt" &
    sampler=$!
  fi
  run_workload "$w" "$RINGMQ_NAMESRV" "$AB_OUT_DIR/$name.json" "$name" >/dev/null
  local hwm cpu_ticks written flush_s
  hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$RINGMQ_PID/status")
  cpu_ticks=$(awk '{print $14 + $15}' "/proc/$RINGMQ_PID/stat")
  written=$(awk '/^write_bytes/ {print $2}' "/proc/$RINGMQ_PID/io" 2>/dev/null || echo 0)
  flush_s=$(flush_mean_s "$metrics")
  [[ -n $sampler ]] && { kill -TERM "$sampler" 2>/dev/null || true; wait "$sampler" 2>/dev/null || true; }
  stop_ringmq
  echo "$pair $w $side $idle $hwm $cpu_ticks ${written:-0} $flush_s" >>"$AB_OUT_DIR/runs.txt"
}

# One side's run of workload $1 in pair $2: side $3, binary $4, extra environment $5.
ab_side() {
  alog "pair $2, $1: $3 ($4 $5)"
  ab_run "$1" "$4" "$5" "$3" "$2"
}

ab_main() {
  (($# >= 2)) || bdie "usage: scripts/bench-ab.sh A_BIN B_BIN [W ...]"
  local a_bin=$1 b_bin=$2 w pair
  shift 2
  local workloads=("$@")
  ((${#workloads[@]})) || workloads=(W5 W3)
  [[ -x $a_bin && -x $b_bin ]] || bdie "A_BIN and B_BIN must be ringmq binaries"
  command -v python3 >/dev/null || bdie "python3 is needed to read the reports"
  AB_OUT_DIR=${AB_OUT_DIR:-$BENCH_ROOT/target/bench/ab-$(date +%Y%m%d-%H%M%S)}
  mkdir -p "$AB_OUT_DIR"
  : >"$AB_OUT_DIR/runs.txt"
  BENCH_LOG_DIR=$AB_OUT_DIR
  [[ -x $BENCH_BIN ]] || bdie "no bench client at $BENCH_BIN: cargo build --release --bins"
  trap stop_ringmq EXIT
  trap 'exit 130' INT TERM
  for ((pair = 1; pair <= AB_PAIRS; pair++)); do
    for w in "${workloads[@]}"; do
      workload_args "$w" >/dev/null
      # Odd pairs run A first, even pairs B first, so whatever favours the run that comes
      # first or second in a pair does not land on one side: a series whose B differed from
      # A only by an option that turned out to be a no-op had B lower in all 5 pairs, by as
      # much as the change it was meant to measure (docs/BENCHMARKS.md, "The thread cache
      # option was a no-op").
      if ((pair % 2)); then
        ab_side "$w" "$pair" A "$a_bin" "$AB_A_ENV"
        ab_side "$w" "$pair" B "$b_bin" "$AB_B_ENV"
      else
        ab_side "$w" "$pair" B "$b_bin" "$AB_B_ENV"
        ab_side "$w" "$pair" A "$a_bin" "$AB_A_ENV"
      fi
    done
  done
  {
    echo "# A/B: A = $a_bin $AB_A_ENV, B = $b_bin $AB_B_ENV"
    echo
    echo "- machine: $(machine_line)"
    echo "- command: scripts/bench-ab.sh $a_bin $b_bin ${workloads[*]} (AB_PAIRS=$AB_PAIRS, BENCH_DURATION_S=$BENCH_DURATION_S)"
    echo
    ab_table "$AB_OUT_DIR" "$(getconf CLK_TCK)"
  } >"$AB_OUT_DIR/AB.md"
  cat "$AB_OUT_DIR/AB.md"
  alog "reports in $AB_OUT_DIR"
}

ab_main "$@"
