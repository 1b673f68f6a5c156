#!/usr/bin/env bash
# Runs every cargo-fuzz target of tests/fuzz for a set time and prints the executions of each.
#
# Usage: scripts/fuzz.sh [seconds per target, default 60] [target ...]
#
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`). The fuzz crate is its
# own workspace (the root workspace excludes it), so stable builds and `cargo test --workspace`
# never need nightly. Each target starts from its committed seeds (tests/fuzz/seeds/<target>,
# taken from the golden tests and fixtures) plus the corpus earlier runs grew
# (tests/fuzz/corpus/<target>, not committed). A crash leaves its input in
# tests/fuzz/artifacts/<target>/ and makes this script exit non-zero.
#
# FUZZ_DEV=1 builds the targets without optimizations (cargo fuzz --dev): a build that a
# loaded machine finishes in minutes, at far fewer executions per second.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
shift || true
if ! [[ "$seconds" =~ ^[0-9]+$ ]] || (( seconds < 1 || seconds > 86400 )); then
    echo "usage: $0 [seconds 1..86400] [target ...]" >&2
    exit 2
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    echo "$0: needs the nightly toolchain and cargo-fuzz (cargo install cargo-fuzz)" >&2
    exit 2
fi
fuzz_dir=tests/fuzz
profile=()
if [[ "${FUZZ_DEV:-0}" == 1 ]]; then
    profile=(--dev)
fi
targets=("$@")
if (( ${#targets[@]} == 0 )); then
    mapfile -t targets < <(cargo +nightly fuzz list --fuzz-dir "$fuzz_dir")
fi
logs=$(mktemp -d)
failed=0
printf '%-16s %14s %10s\n' target executions exec/s
for target in "${targets[@]}"; do
    corpus="$fuzz_dir/corpus/$target"
    mkdir -p "$corpus"
    set +e
    cargo +nightly fuzz run "${profile[@]}" --fuzz-dir "$fuzz_dir" "$target" "$corpus" \
        "$fuzz_dir/seeds/$target" \
        -- -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 \
        >"$logs/$target.log" 2>&1
    status=$?
    set -e
    runs=$(grep -Eo 'Done [0-9]+ runs' "$logs/$target.log" | grep -Eo '[0-9]+' | tail -1 || true)
    if (( status != 0 )) || [[ -z "$runs" ]]; then
        failed=1
        printf '%-16s %14s %10s  (exit %d, log %s)\n' "$target" "-" "-" "$status" \
            "$logs/$target.log"
        continue
    fi
    printf '%-16s %14s %10s\n' "$target" "$runs" "$(( runs / seconds ))"
done
exit "$failed"
