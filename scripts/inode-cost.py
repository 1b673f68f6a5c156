#!/usr/bin/env python3
"""What a new queue's directory and file cost on this file system, before and after a deletion.

Usage: scripts/inode-cost.py [DIR]   (default: target/; the trees are made and removed in it)

Makes the ConsumeQueue layout of W5 (256 topic directories, 8 queue directories each, one
sparse 6,000,000-byte file in each: 2,048 queues) three times, removing each tree before the
next, and prints the wall time per queue of each round. The first round runs in a tree with no
deletion just before it; the later ones right after one, as a bench run follows the last run's
removed data directory (ext4 without a journal then checks candidate inodes for a recent
deletion, `recently_deleted` in a profile). Bounded: 6,144 directories and files, no data.
"""
import os
import shutil
import sys
import tempfile
import time

TOPICS = 256
QUEUES_PER_TOPIC = 8
QUEUE_FILE_BYTES = 6_000_000
ROUNDS = 3


def make_tree(root: str) -> float:
    """Seconds to make every queue's directory and sparse file under `root`."""
    started = time.perf_counter()
    for topic in range(TOPICS):
        topic_dir = os.path.join(root, f"Topic{topic}")
        os.mkdir(topic_dir)
        for queue in range(QUEUES_PER_TOPIC):
            queue_dir = os.path.join(topic_dir, str(queue))
            os.mkdir(queue_dir)
            fd = os.open(os.path.join(queue_dir, "0" * 20), os.O_CREAT | os.O_RDWR, 0o644)
            try:
                os.ftruncate(fd, QUEUE_FILE_BYTES)
            finally:
                os.close(fd)
    return time.perf_counter() - started


def main() -> None:
    directory = sys.argv[1] if len(sys.argv) > 1 else "target"
    os.makedirs(directory, exist_ok=True)
    queues = TOPICS * QUEUES_PER_TOPIC
    print("| round | after a deletion | µs per queue (mkdir + create + ftruncate) |")
    print("| ---: | --- | ---: |")
    for round_index in range(1, ROUNDS + 1):
        root = tempfile.mkdtemp(prefix="inode-cost-", dir=directory)
        try:
            seconds = make_tree(root)
        finally:
            shutil.rmtree(root)
        after = "no" if round_index == 1 else "yes"
        print(f"| {round_index} | {after} | {seconds / queues * 1e6:.0f} |")


if __name__ == "__main__":
    main()
