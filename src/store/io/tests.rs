//! Tests of the engine: io_uring against pread and against the file's known contents.

use std::fs::File;
use std::io::{self, Write};
use std::sync::Arc;

use super::*;

/// Small buffers so that modest files exercise multi-buffer ops, multi-round batches and the
/// bigger-than-all-buffers path: 8 buffers of 4 KiB = 32 KiB registered.
fn small_config() -> IoConfig {
    IoConfig {
        mode: IoMode::Uring,
        allow_pread_fallback: false,
        ring_entries: 8,
        fixed_buffer_count: 8,
        fixed_buffer_size_bytes: 4096,
        thread_rings_max: 8,
    }
}

const SMALL_REGION_BYTES: usize = 8 * 4096;

fn uring(config: IoConfig) -> IoEngine {
    let engine = IoEngine::new(config).expect("io_uring must work on the test host");
    assert_eq!(engine.mode(), IoMode::Uring);
    engine
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

fn temp_file(len_bytes: usize, seed: u64) -> (tempfile::NamedTempFile, Vec<u8>) {
    let mut rng = Rng(seed | 1);
    let data: Vec<u8> = (0..len_bytes).map(|_| rng.next() as u8).collect();
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    file.write_all(&data).expect("write temp file");
    file.flush().expect("flush temp file");
    (file, data)
}

/// Runs a batch and returns what the sink saw, checking it was called once per op in order.
fn collect(engine: &IoEngine, ops: &[ReadOp<'_>]) -> io::Result<Vec<Vec<u8>>> {
    let mut seen: Vec<Vec<u8>> = Vec::new();
    engine.read_batch(ops, &mut |index, bytes| {
        assert_eq!(index, seen.len(), "ops delivered in order");
        seen.push(bytes.to_vec());
    })?;
    assert_eq!(seen.len(), ops.len());
    Ok(seen)
}

/// Random in-file ranges: zero, small, multi-buffer, bigger than all buffers.
fn random_ops<'a>(file: &'a File, file_len: usize, rng: &mut Rng, count: usize) -> Vec<ReadOp<'a>> {
    (0..count)
        .map(|_| {
            let len = match rng.below(10) {
                0 => 0,
                1..=4 => rng.below(4096) as usize + 1,
                5..=7 => rng.below(4 * 4096) as usize + 1,
                8 => rng.below(SMALL_REGION_BYTES as u64) as usize + 1,
                _ => SMALL_REGION_BYTES + rng.below(3 * SMALL_REGION_BYTES as u64) as usize,
            };
            let offset = rng.below((file_len - len) as u64 + 1);
            ReadOp {
                file,
                offset_bytes: offset,
                len_bytes: len,
            }
        })
        .collect()
}

fn check_against(data: &[u8], ops: &[ReadOp<'_>], seen: &[Vec<u8>]) {
    for (op, bytes) in ops.iter().zip(seen) {
        if op.len_bytes == 0 {
            assert!(bytes.is_empty());
            continue;
        }
        let start = op.offset_bytes as usize;
        assert_eq!(
            bytes.as_slice(),
            &data[start..start + op.len_bytes],
            "{op:?}"
        );
    }
}

#[test]
fn uring_matches_pread_and_file_on_random_batches() {
    let file_len = 300_000;
    let (file, data) = temp_file(file_len, 7);
    let file = file.as_file();
    let uring = uring(small_config());
    let pread = IoEngine::new_pread();
    let mut rng = Rng(42);
    for round in 0..200 {
        // Batch sizes from 1 up to 3x the buffer count.
        let count = 1 + rng.below(24) as usize;
        let ops = random_ops(file, file_len, &mut rng, count);
        let from_uring = collect(&uring, &ops).expect("uring batch");
        let from_pread = collect(&pread, &ops).expect("pread batch");
        assert_eq!(from_uring, from_pread, "round {round}");
        check_against(&data, &ops, &from_uring);
    }
}

#[test]
fn default_config_reads_a_pull_sized_batch() {
    let file_len = 2 << 20;
    let (file, data) = temp_file(file_len, 11);
    let file = file.as_file();
    let engine = uring(IoConfig::default());
    // 32 ops of 1 KiB (one round) and one op of 3 MiB (bigger than the 1 MiB set).
    let mut ops: Vec<ReadOp<'_>> = (0..32u64)
        .map(|i| ReadOp {
            file,
            offset_bytes: i * 50_000,
            len_bytes: 1024,
        })
        .collect();
    ops.push(ReadOp {
        file,
        offset_bytes: 1000,
        len_bytes: file_len - 1000,
    });
    let seen = collect(&engine, &ops).expect("batch");
    check_against(&data, &ops, &seen);
}

#[test]
fn batch_larger_than_buffer_count_keeps_order() {
    let file_len = 64 * 1024;
    let (file, data) = temp_file(file_len, 3);
    let file = file.as_file();
    let engine = uring(small_config());
    // 50 one-buffer ops against 8 buffers: 7 rounds, in reverse file order to catch mixups.
    let ops: Vec<ReadOp<'_>> = (0..50u64)
        .rev()
        .map(|i| ReadOp {
            file,
            offset_bytes: i * 1000,
            len_bytes: 4096,
        })
        .collect();
    let seen = collect(&engine, &ops).expect("batch");
    check_against(&data, &ops, &seen);
}

#[test]
fn zero_length_ops_are_delivered_empty_in_order() {
    let (file, data) = temp_file(10_000, 5);
    let file = file.as_file();
    let engine = uring(small_config());
    let ops = [
        ReadOp {
            file,
            offset_bytes: 0,
            len_bytes: 0,
        },
        ReadOp {
            file,
            offset_bytes: 10,
            len_bytes: 100,
        },
        // Zero length at EOF and past EOF are fine: nothing to read.
        ReadOp {
            file,
            offset_bytes: 10_000,
            len_bytes: 0,
        },
        ReadOp {
            file,
            offset_bytes: 99_999,
            len_bytes: 0,
        },
    ];
    let seen = collect(&engine, &ops).expect("batch");
    assert!(seen[0].is_empty() && seen[2].is_empty() && seen[3].is_empty());
    check_against(&data, &ops, &seen);
    assert_eq!(collect(&engine, &[]).expect("empty batch").len(), 0);
}

fn expect_eof(engine: &IoEngine, ops: &[ReadOp<'_>], failing_index: usize) -> Vec<usize> {
    let mut delivered = Vec::new();
    let error = engine
        .read_batch(ops, &mut |index, _| delivered.push(index))
        .expect_err("read past EOF must fail");
    assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof, "{error}");
    let text = error.to_string();
    assert!(
        text.contains(&format!("read op {failing_index} ")),
        "{text}"
    );
    let inner = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<ReadOpError>())
        .expect("ReadOpError context");
    assert_eq!(inner.op_index, failing_index);
    delivered
}

#[test]
fn reads_spanning_eof_fail_with_unexpected_eof() {
    let file_len = 20_000;
    let (file, _) = temp_file(file_len, 9);
    let file = file.as_file();
    let uring = uring(small_config());
    let pread = IoEngine::new_pread();
    let ok = ReadOp {
        file,
        offset_bytes: 0,
        len_bytes: 100,
    };
    let cases = [
        // Spans EOF inside one buffer.
        ReadOp {
            file,
            offset_bytes: file_len as u64 - 10,
            len_bytes: 100,
        },
        // Spans EOF across several buffers.
        ReadOp {
            file,
            offset_bytes: 5000,
            len_bytes: 20_000,
        },
        // Starts past EOF.
        ReadOp {
            file,
            offset_bytes: file_len as u64 + 4096,
            len_bytes: 10,
        },
        // Bigger than all buffers and past EOF.
        ReadOp {
            file,
            offset_bytes: 0,
            len_bytes: SMALL_REGION_BYTES * 2,
        },
    ];
    for bad in cases {
        for engine in [&uring, &pread] {
            let delivered = expect_eof(engine, &[ok, bad], 1);
            // pread delivers op 0 before failing; uring may fail the round first.
            assert!(delivered.len() <= 1);
        }
    }
    // The ring is still usable after failed rounds.
    let seen = collect(&uring, &[ok]).expect("read after error");
    assert_eq!(seen[0].len(), 100);
}

#[test]
fn bad_fd_error_keeps_errno_and_context() {
    let (file, _) = temp_file(4096, 1);
    let write_only = File::options()
        .write(true)
        .open(file.path())
        .expect("open write-only");
    let engine = uring(small_config());
    let ops = [ReadOp {
        file: &write_only,
        offset_bytes: 0,
        len_bytes: 10,
    }];
    let error = engine
        .read_batch(&ops, &mut |_, _| panic!("no data expected"))
        .expect_err("reading a write-only fd fails");
    let inner = error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<ReadOpError>())
        .expect("ReadOpError context");
    assert_eq!(inner.source.raw_os_error(), Some(libc::EBADF));
}

#[test]
fn concurrent_read_batch_from_four_threads() {
    let file_len = 400_000;
    let (file, data) = temp_file(file_len, 13);
    let file = Arc::new(file);
    let data = Arc::new(data);
    let engine = Arc::new(uring(small_config()));
    let threads: Vec<_> = (0..4u64)
        .map(|t| {
            let (engine, file, data) = (engine.clone(), file.clone(), data.clone());
            std::thread::spawn(move || {
                let mut rng = Rng(1000 + t);
                for _ in 0..100 {
                    let count = 1 + rng.below(20) as usize;
                    let ops = random_ops(file.as_file(), file_len, &mut rng, count);
                    let seen = collect(&engine, &ops).expect("batch");
                    check_against(&data, &ops, &seen);
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("reader thread");
    }
    // Each thread's ring is closed when it exits; the probe ring of this thread remains.
    assert_eq!(engine.shared.live_rings.load(Ordering::Acquire), 1);
}

#[test]
fn thread_ring_limit_falls_back_or_fails_per_config() {
    let (file, data) = temp_file(10_000, 17);
    let path = file.path().to_owned();
    for allow_pread_fallback in [true, false] {
        let engine = Arc::new(uring(IoConfig {
            allow_pread_fallback,
            thread_rings_max: 1,
            ..small_config()
        }));
        let (engine2, path2) = (engine.clone(), path.clone());
        let result = std::thread::spawn(move || {
            let file = File::open(&path2).expect("open");
            let ops = [ReadOp {
                file: &file,
                offset_bytes: 5,
                len_bytes: 5000,
            }];
            collect(&engine2, &ops)
        })
        .join()
        .expect("thread");
        if allow_pread_fallback {
            assert_eq!(result.expect("pread fallback")[0], data[5..5005]);
        } else {
            let error = result.expect_err("no ring and no fallback");
            assert_eq!(error.kind(), io::ErrorKind::ResourceBusy);
            let text = error.to_string();
            assert!(text.contains("thread_rings_max"), "{text}");
            assert!(text.contains(diagnostics::PREAD_FALLBACK_ENV_VAR), "{text}");
        }
    }
}

#[test]
fn nested_read_batch_from_the_sink_is_served() {
    let (file, data) = temp_file(10_000, 19);
    let file = file.as_file();
    let engine = uring(small_config());
    let outer = [ReadOp {
        file,
        offset_bytes: 0,
        len_bytes: 10,
    }];
    let inner = [ReadOp {
        file,
        offset_bytes: 100,
        len_bytes: 5000,
    }];
    let mut inner_seen = Vec::new();
    engine
        .read_batch(&outer, &mut |_, _| {
            inner_seen = collect(&engine, &inner).expect("nested batch");
        })
        .expect("outer batch");
    assert_eq!(inner_seen[0], data[100..5100]);
    // The outer ring went back into its slot.
    assert_eq!(collect(&engine, &inner).expect("again")[0], data[100..5100]);
}

fn slot_count() -> usize {
    THREAD_SLOTS.with(|cell| cell.borrow().len())
}

#[test]
fn dropping_the_engine_frees_the_thread_slot() {
    let (file, _) = temp_file(4096, 23);
    let before = slot_count();
    let engine = uring(small_config());
    collect(
        &engine,
        &[ReadOp {
            file: file.as_file(),
            offset_bytes: 0,
            len_bytes: 10,
        }],
    )
    .expect("read");
    assert_eq!(slot_count(), before + 1);
    drop(engine);
    // Dead slots are pruned on this thread's next use of any engine.
    let other = IoEngine::new_pread();
    collect(&other, &[]).expect("empty");
    assert_eq!(
        slot_count(),
        before + 1,
        "only the pread engine's slot is left"
    );
}

#[test]
fn invalid_configs_are_typed_errors() {
    let cases = [
        IoConfig {
            fixed_buffer_count: 0,
            ..IoConfig::default()
        },
        IoConfig {
            fixed_buffer_size_bytes: 1000,
            ..IoConfig::default()
        },
        IoConfig {
            ring_entries: 4,
            fixed_buffer_count: 8,
            ..IoConfig::default()
        },
        IoConfig {
            thread_rings_max: 0,
            ..IoConfig::default()
        },
    ];
    for config in cases {
        assert!(matches!(
            IoEngine::new(config),
            Err(IoSetupError::InvalidConfig(_))
        ));
    }
    assert_eq!(IoConfig::default().validate(), Ok(()));
    assert_eq!(IoConfig::default().registered_bytes_per_ring(), 1 << 20);
}

#[test]
fn pread_mode_config_builds_a_pread_engine() {
    let engine = IoEngine::new(IoConfig {
        mode: IoMode::Pread,
        ..IoConfig::default()
    })
    .expect("pread engine");
    assert_eq!(engine.mode(), IoMode::Pread);
}
