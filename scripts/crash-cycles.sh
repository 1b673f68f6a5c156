#!/usr/bin/env bash
# SIGKILL cycles under sync flush while producing and consuming: runs
# tests/crash_cycles.rs with CRASH_CYCLES=N against the real `ringmq` binary.
#
# Usage: scripts/crash-cycles.sh [N]     (N cycles, default 100, at most 10000)
#
# Each cycle: a producer sends to 4 queues (RINGMQ_STORE_FLUSH_POLICY=sync) and records every
# acknowledged message, a consumer pulls and commits its offsets, the broker gets SIGKILL after a
# random 200-700 ms and restarts. After every restart the test checks that every acknowledged
# message is served at its queue offset with its body, and that no committed offset went
# backwards. Prints one summary line with the counts and the time taken.
set -euo pipefail
cd "$(dirname "$0")/.."
cycles="${1:-100}"
if ! [[ "$cycles" =~ ^[0-9]+$ ]] || (( cycles < 1 || cycles > 10000 )); then
    echo "usage: $0 [cycles 1..10000]" >&2
    exit 2
fi
# Not RINGMQ_*: the broker refuses unknown RINGMQ_ variables, and it inherits this environment.
start=$(date +%s)
set +e
CRASH_CYCLES="$cycles" cargo test --test crash_cycles -- --nocapture --test-threads=1 \
    2>&1 | grep -E -A3 "crash cycles:|panicked|FAILED|test result"
status=${PIPESTATUS[0]}
set -e
echo "crash-cycles: $cycles cycles, exit $status, $(( $(date +%s) - start )) s wall"
exit "$status"
