#!/usr/bin/env bash
# CPU and context switches of every thread of the given processes over a window, threads of one
# name summed (a bench's 32 producer threads are one row).
#
# Usage: scripts/thread-cpu.sh SECONDS PID [PID ...]
# Prints, per process and thread name: cores used (user + system ticks over the window) and
# voluntary / involuntary context switches per second, from /proc/<pid>/task/*/{stat,status}.
set -euo pipefail
[[ $# -ge 2 ]] || { echo "usage: $0 SECONDS PID [PID ...]" >&2; exit 2; }
window_s=$1; shift
[[ $window_s =~ ^[0-9]+$ && $window_s -ge 1 && $window_s -le 600 ]] ||
  { echo "$0: SECONDS must be 1 to 600, not '$window_s'" >&2; exit 2; }
ticks_per_s=$(getconf CLK_TCK)

snapshot() {
  for pid in "$@"; do
    for task in /proc/"$pid"/task/*; do
      [[ -r $task/stat ]] || continue
      local name cpu vol invol
      name=$(tr ' ' _ <"$task"/comm)
      cpu=$(awk '{print $14 + $15}' "$task"/stat 2>/dev/null) || continue
      vol=$(awk '/^voluntary_ctxt_switches/ {print $2}' "$task"/status 2>/dev/null) || continue
      invol=$(awk '/^nonvoluntary_ctxt_switches/ {print $2}' "$task"/status 2>/dev/null) || continue
      echo "$pid/$name $cpu $vol $invol"
    done
  done | awk '{c[$1] += $2; v[$1] += $3; n[$1] += $4} END {for (k in c) print k, c[k], v[k], n[k]}' | sort
}

before=$(snapshot "$@")
sleep "$window_s"
after=$(snapshot "$@")
printf '| process/thread | cores | voluntary switches/s | involuntary switches/s |\n| --- | ---: | ---: | ---: |\n'
join <(echo "$before") <(echo "$after") |
  awk -v s="$window_s" -v hz="$ticks_per_s" '{
    cores = ($5 - $2) / hz / s
    if (cores >= 0.005 || ($6 - $3 + $7 - $4) / s >= 1) printf "| %s | %.2f | %.0f | %.0f |\n", $1, cores, ($6 - $3) / s, ($7 - $4) / s
  }'
