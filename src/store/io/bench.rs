//! Read throughput benchmark of the engine, for the bench binary and
//! `bench/io_read.rs`.
//!
//! Reads `op_size_bytes` ranges at pseudo-random op-aligned offsets of a file whose pages are
//! in the page cache (the file is read once before timing), `batch_ops` ops per `read_batch`,
//! until `total_bytes` were read. This measures the per-op cost of each engine (syscalls,
//! copies), not the disk.

use std::fs::File;
use std::hint::black_box;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::Instant;

use super::{IoConfig, IoEngine, IoMode, ReadOp};

/// Chunk used to pull the file into the page cache before timing.
const WARM_CHUNK_BYTES: usize = 1 << 20;

/// What one benchmark run did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BenchResult {
    pub bytes: u64,
    /// Wall-clock time of the timed loop.
    pub seconds: f64,
    pub ops: u64,
    /// CPU time (user + system) of the calling thread in the timed loop. On a shared machine this
    /// is the steadier measure: hot-cache reads run inline in the caller for both engines (an
    /// io_uring read that would block goes to a kernel worker and is not counted here, which
    /// cannot happen with the page cache hot).
    pub cpu_seconds: f64,
}

impl BenchResult {
    pub fn mib_per_second(&self) -> f64 {
        self.bytes as f64 / (1024.0 * 1024.0) / self.seconds
    }

    /// CPU cost of one op in nanoseconds.
    pub fn cpu_ns_per_op(&self) -> f64 {
        self.cpu_seconds * 1e9 / self.ops as f64
    }
}

/// CPU time of the calling thread.
fn thread_cpu_seconds() -> io::Result<f64> {
    let mut time = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes only into `time`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut time) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(time.tv_sec as f64 + time.tv_nsec as f64 * 1e-9)
}

/// Benchmarks `mode` with the default engine sizing (see [`read_throughput_bench_with`]).
pub fn read_throughput_bench(
    path: &Path,
    total_bytes: u64,
    op_size_bytes: usize,
    batch_ops: usize,
    mode: IoMode,
) -> io::Result<BenchResult> {
    let config = IoConfig {
        mode,
        ..IoConfig::default()
    };
    read_throughput_bench_with(path, total_bytes, op_size_bytes, batch_ops, config)
}

/// Benchmarks an engine built from `config` (the pread fallback is never taken: a host without
/// io_uring fails the io_uring run instead of timing pread under its name).
pub fn read_throughput_bench_with(
    path: &Path,
    total_bytes: u64,
    op_size_bytes: usize,
    batch_ops: usize,
    config: IoConfig,
) -> io::Result<BenchResult> {
    let file = File::open(path)?;
    let file_len_bytes = file.metadata()?.len();
    if op_size_bytes == 0 || batch_ops == 0 || file_len_bytes < op_size_bytes as u64 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "need op_size_bytes > 0, batch_ops > 0 and a file of at least one op \
                 (op {op_size_bytes}, batch {batch_ops}, file {file_len_bytes})"
            ),
        ));
    }
    warm_page_cache(&file, file_len_bytes)?;
    let engine = IoEngine::new(IoConfig {
        allow_pread_fallback: false,
        ..config
    })
    .map_err(io::Error::other)?;

    let slots = file_len_bytes / op_size_bytes as u64;
    let mut rng_state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut ops: Vec<ReadOp<'_>> = Vec::with_capacity(batch_ops);
    let mut checksum: u64 = 0;
    let mut bytes: u64 = 0;
    let mut op_count: u64 = 0;
    let started = Instant::now();
    let cpu_started = thread_cpu_seconds()?;
    while bytes < total_bytes {
        ops.clear();
        for _ in 0..batch_ops {
            let slot = xorshift(&mut rng_state) % slots;
            ops.push(ReadOp {
                file: &file,
                offset_bytes: slot * op_size_bytes as u64,
                len_bytes: op_size_bytes,
            });
        }
        engine.read_batch(&ops, &mut |_, data| {
            checksum = checksum
                .wrapping_add(u64::from(data[0]))
                .wrapping_add(u64::from(data[data.len() - 1]));
        })?;
        bytes += (batch_ops * op_size_bytes) as u64;
        op_count += batch_ops as u64;
    }
    let seconds = started.elapsed().as_secs_f64();
    let cpu_seconds = thread_cpu_seconds()? - cpu_started;
    black_box(checksum);
    Ok(BenchResult {
        bytes,
        seconds,
        ops: op_count,
        cpu_seconds,
    })
}

fn warm_page_cache(file: &File, file_len_bytes: u64) -> io::Result<()> {
    let mut buf = vec![0u8; WARM_CHUNK_BYTES];
    let mut offset = 0;
    while offset < file_len_bytes {
        let read = file.read_at(&mut buf, offset)?;
        if read == 0 {
            break;
        }
        offset += read as u64;
    }
    Ok(())
}

fn xorshift(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    x
}
