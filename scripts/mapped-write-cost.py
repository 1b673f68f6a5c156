#!/usr/bin/env python3
"""What CommitLog-like appends cost the disk written with pwrite or through a shared mapping.

Usage: scripts/mapped-write-cost.py [DIR] [FILE_MIB] [RECORDS]
       (default: target/, 1024 (a CommitLog segment's size) and 30000; the file is made and
       removed)

The file is allocated with posix_fallocate, as the store allocates its segments. Then, once
with pwrite and once through a MAP_SHARED writable mapping of the whole file, RECORDS records of
1 KiB are written at consecutive offsets with an fdatasync after every 6, as sync flush's group
commit does in W2. For each way it prints the bytes the process dirtied for the disk
(/proc/self/io write_bytes), the wall time per fdatasync, and the bytes the file's block device
wrote meanwhile (/proc/diskstats; other writers on that device count too). Bounded: RECORDS
is at most RECORDS_MAX (100,000 records, 98 MiB of data each way) and must fit in the file.
"""
import mmap
import os
import sys
import tempfile
import time

RECORD_BYTES = 1024
RECORDS_DEFAULT = 30_000
RECORDS_MAX = 100_000
RECORDS_PER_FDATASYNC = 6


def dirtied_bytes() -> int:
    with open("/proc/self/io") as io:
        for line in io:
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    raise RuntimeError("no write_bytes in /proc/self/io")


def device_written_bytes(path: str) -> int | None:
    """Bytes written by the block device holding `path` (whole device), None if not found."""
    dev = os.stat(path).st_dev
    major, minor = os.major(dev), os.minor(dev)
    with open("/proc/diskstats") as stats:
        for line in stats:
            f = line.split()
            if int(f[0]) == major and int(f[1]) == minor:
                return int(f[9]) * 512
    return None


def run(way: str, directory: str, file_bytes: int, records: int) -> None:
    fd, path = tempfile.mkstemp(prefix="mapped-write-cost-", dir=directory)
    mapping = None
    try:
        os.posix_fallocate(fd, 0, file_bytes)
        os.fsync(fd)
        if way == "mapping":
            mapping = mmap.mmap(fd, file_bytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        record = b"x" * RECORD_BYTES
        dirtied0, device0 = dirtied_bytes(), device_written_bytes(path)
        sync_s = 0.0
        for i in range(records):
            offset = i * RECORD_BYTES
            if mapping is not None:
                mapping[offset : offset + RECORD_BYTES] = record
            else:
                os.pwrite(fd, record, offset)
            if i % RECORDS_PER_FDATASYNC == RECORDS_PER_FDATASYNC - 1:
                t0 = time.perf_counter()
                os.fdatasync(fd)
                sync_s += time.perf_counter() - t0
        os.fdatasync(fd)
        dirtied, device = dirtied_bytes() - dirtied0, device_written_bytes(path)
        mib = 1 << 20
        device_text = "-" if device is None or device0 is None else f"{(device - device0) / mib:.0f}"
        fsyncs = max(1, records // RECORDS_PER_FDATASYNC)
        print(
            f"| {way} | {records * RECORD_BYTES / mib:.1f} | {dirtied / mib:.1f} | "
            f"{device_text} | {sync_s / fsyncs * 1e6:.0f} |"
        )
    finally:
        if mapping is not None:
            mapping.close()
        os.close(fd)
        os.unlink(path)


def main() -> None:
    directory = sys.argv[1] if len(sys.argv) > 1 else "target"
    file_mib = int(sys.argv[2]) if len(sys.argv) > 2 else 1024
    records = int(sys.argv[3]) if len(sys.argv) > 3 else RECORDS_DEFAULT
    if not 0 < records <= RECORDS_MAX or records * RECORD_BYTES > file_mib << 20:
        sys.exit(f"RECORDS={records}: must be 1..{RECORDS_MAX} and fit in the {file_mib} MiB file")
    os.makedirs(directory, exist_ok=True)
    print(f"file {file_mib} MiB in {directory}, {records} records")
    print("| written by | data MiB | dirtied MiB (write_bytes) | device wrote MiB | µs per fdatasync |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for way in ("pwrite", "mapping"):
        run(way, directory, file_mib << 20, records)


if __name__ == "__main__":
    main()
