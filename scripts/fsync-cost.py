#!/usr/bin/env python3
"""What one fdatasync costs on this disk, by records per call.

Usage: scripts/fsync-cost.py [DIR]   (default: target/; a 1 GiB sparse file is made and removed)

For k in 1, 4, 8, 16, 32, 64: writes k records of 1 KiB with pwrite, then fdatasync, repeated
(at least 200 times, about 20,000 records per k), and prints the wall time of each fdatasync and
the process's system CPU (getrusage) per fdatasync and per record. Bounded: about 150,000
records and 150 MiB written in all.
"""
import os
import resource
import sys
import tempfile
import time

RECORD_BYTES = 1024


def main() -> None:
    directory = sys.argv[1] if len(sys.argv) > 1 else "target"
    os.makedirs(directory, exist_ok=True)
    fd, path = tempfile.mkstemp(prefix="fsync-cost-", dir=directory)
    try:
        os.ftruncate(fd, 1 << 30)
        record = b"x" * RECORD_BYTES
        offset = 0
        print("| records per fdatasync | wall per fdatasync | system CPU per fdatasync | system CPU per record |")
        print("| ---: | ---: | ---: | ---: |")
        for k in (1, 4, 8, 16, 32, 64):
            rounds = max(200, 20000 // k)
            before = resource.getrusage(resource.RUSAGE_SELF)
            wall = 0.0
            for _ in range(rounds):
                for _ in range(k):
                    os.pwrite(fd, record, offset)
                    offset += RECORD_BYTES
                started = time.perf_counter()
                os.fdatasync(fd)
                wall += time.perf_counter() - started
            after = resource.getrusage(resource.RUSAGE_SELF)
            system = after.ru_stime - before.ru_stime
            print(f"| {k} | {wall / rounds * 1e6:.0f} µs | {system / rounds * 1e6:.0f} µs "
                  f"| {system / rounds / k * 1e6:.1f} µs |")
    finally:
        os.close(fd)
        os.unlink(path)


if __name__ == "__main__":
    main()
