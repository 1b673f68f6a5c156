//! Compares the store's io_uring engine (ReadFixed into registered buffers) with pread(2) on a
//! hot page cache.
//!
//! `nice cargo bench --bench io_read -- [file_mib] [repeats]`
//!
//! Writes a temp file of `file_mib` MiB (default 256), then for each op size and batch size
//! runs both engines `repeats` times (default 3) and prints the run of each with the least CPU per
//! op (wall-clock MiB/s of that run alongside), then a sweep of registered-buffer sizings.

use std::io::Write;
use std::path::Path;

use ringmq::store::io::bench::{read_throughput_bench, read_throughput_bench_with, BenchResult};
use ringmq::store::io::{IoConfig, IoMode};

const OP_SIZES_BYTES: [usize; 5] = [1024, 4096, 16 * 1024, 64 * 1024, 256 * 1024];
const BATCH_OPS: [usize; 2] = [1, 32];
/// Enough work per run to dwarf setup: at least this many bytes and this many ops.
const RUN_MIN_BYTES: u64 = 256 << 20;
const RUN_MIN_OPS: u64 = 200_000;

fn best_of(repeats: usize, mut run: impl FnMut() -> BenchResult) -> BenchResult {
    (0..repeats)
        .map(|_| run())
        .min_by(|a, b| a.cpu_ns_per_op().total_cmp(&b.cpu_ns_per_op()))
        .expect("repeats >= 1")
}

fn total_bytes_for(op_size_bytes: usize) -> u64 {
    RUN_MIN_BYTES.max(RUN_MIN_OPS * op_size_bytes as u64)
}

/// A hot file of `file_mib` MiB of pseudo-random bytes.
fn hot_file(file_mib: usize) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    let chunk: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i.wrapping_mul(2654435761) >> 24) as u8)
        .collect();
    for _ in 0..file_mib {
        file.write_all(&chunk).expect("write");
    }
    file.flush().expect("flush");
    file
}

/// io_uring against pread at each op size and batch size.
fn compare_engines(path: &Path, repeats: usize) {
    println!(
        "{:>8} {:>6} {:>12} {:>12} {:>13} {:>13} {:>14}",
        "op",
        "batch",
        "uring MiB/s",
        "pread MiB/s",
        "uring cpu ns",
        "pread cpu ns",
        "cpu pread/uring"
    );
    for op_size_bytes in OP_SIZES_BYTES {
        for batch_ops in BATCH_OPS {
            let total = total_bytes_for(op_size_bytes);
            let uring = best_of(repeats, || {
                read_throughput_bench(path, total, op_size_bytes, batch_ops, IoMode::Uring)
                    .expect("uring run")
            });
            let pread = best_of(repeats, || {
                read_throughput_bench(path, total, op_size_bytes, batch_ops, IoMode::Pread)
                    .expect("pread run")
            });
            println!(
                "{:>8} {:>6} {:>12.0} {:>12.0} {:>13.0} {:>13.0} {:>14.2}",
                op_size_bytes,
                batch_ops,
                uring.mib_per_second(),
                pread.mib_per_second(),
                uring.cpu_ns_per_op(),
                pread.cpu_ns_per_op(),
                pread.cpu_ns_per_op() / uring.cpu_ns_per_op()
            );
        }
    }
}

/// Registered-buffer count and size against throughput and CPU.
fn sweep_buffer_sizing(path: &Path, repeats: usize) {
    println!("registered-buffer sizing sweep (io_uring, batch 32)");
    println!(
        "{:>8} {:>8} {:>10} {:>10} {:>12} {:>12}",
        "op", "buffers", "buf KiB", "total KiB", "MiB/s", "cpu ns/op"
    );
    let sizings: [(usize, usize); 5] = [
        (32, 16 * 1024),
        (32, 32 * 1024),
        (16, 64 * 1024),
        (32, 128 * 1024),
        (64, 64 * 1024),
    ];
    for op_size_bytes in [4096, 64 * 1024] {
        for (count, size) in sizings {
            let config = IoConfig {
                mode: IoMode::Uring,
                ring_entries: count as u32,
                fixed_buffer_count: count,
                fixed_buffer_size_bytes: size,
                ..IoConfig::default()
            };
            let total = total_bytes_for(op_size_bytes);
            let result = best_of(repeats, || {
                read_throughput_bench_with(path, total, op_size_bytes, 32, config)
                    .expect("uring run")
            });
            println!(
                "{:>8} {:>8} {:>10} {:>10} {:>12.0} {:>12.0}",
                op_size_bytes,
                count,
                size / 1024,
                count * size / 1024,
                result.mib_per_second(),
                result.cpu_ns_per_op()
            );
        }
    }
}

fn main() {
    // `cargo bench` appends `--bench`; only the positional arguments are ours.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let file_mib: usize = args.first().map_or(256, |a| a.parse().expect("file_mib"));
    let repeats: usize = args.get(1).map_or(3, |a| a.parse().expect("repeats"));
    assert!(repeats >= 1);
    let file = hot_file(file_mib);
    println!(
        "file {file_mib} MiB (page cache hot), least-CPU run of {repeats}, default sizing {:?}",
        IoConfig::default()
    );
    compare_engines(file.path(), repeats);
    println!();
    sweep_buffer_sizing(file.path(), repeats);
}
