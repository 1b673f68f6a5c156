#!/usr/bin/env python3
"""An independent peer for RocketMQ's classic HA stream (Java DefaultHAService), written from
the protocol description in docs/PROTOCOL.md ("HA stream") and the CommitLog layout in
docs/FORMAT.md, not from ringmq's code. Python 3 standard library only.

Protocol, all integers big-endian:
  slave -> master: its CommitLog max offset, 8 bytes, on connect, after appending bytes, and
                   every heartbeat interval;
  master -> slave: frames [phyOffset int64][bodySize int32][body]; bodySize 0 is a heartbeat.
  The master starts at the slave's offset, or, for a slave at 0, at the start of the master's
  last CommitLog file. A frame never crosses a CommitLog file end.

Modes (each prints one JSON line with what happened, then exits):
  slave  --master HOST:PORT --out FILE [--offset N] [--until N] [--ack|--no-ack]
         [--heartbeat-ms N] [--timeout-s N]
      Connects, reports --offset, writes every body to FILE (the first frame's offset is the
      file's start), checks that each frame continues the previous one, and reports its new
      offset after each frame (unless --no-ack). Stops when its offset reaches --until, when
      the master closes, or after --timeout-s.
  master --port N --commitlog DIR --file-size N [--batch N] [--heartbeat-ms N] [--linger-s N]
      Serves the CommitLog files of DIR (named by their 20-digit start offset) to one slave;
      the data ends at the last valid record (scanned here). Stops once the slave acknowledged
      the end and --linger-s passed.
  master --port N --mute [--timeout-s N]
      Accepts one slave and never sends anything; counts the slave's offset reports and stops
      when the slave closes the connection (or after --timeout-s).
"""

import argparse
import json
import os
import socket
import struct
import sys
import time

MAGIC_V1 = 0xDAA320A7
MAGIC_V2 = 0xDAA320AB
MAGIC_BLANK = 0xCBD43194
HEADER = struct.Struct(">qi")
OFFSET = struct.Struct(">q")


def read_exact(sock, n):
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def run_slave(args):
    host, port = args.master.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=5)
    sock.settimeout(0.2)
    offset = args.offset
    sock.sendall(OFFSET.pack(offset))
    last_report = time.monotonic()
    start = None
    frames = heartbeats = 0
    gap = None
    buf = b""
    deadline = time.monotonic() + args.timeout_s
    closed_by_master = False
    with open(args.out, "wb") as out:
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(1 << 20)
                if not chunk:
                    closed_by_master = True
                    break
                buf += chunk
            except socket.timeout:
                pass
            while len(buf) >= HEADER.size:
                phy, size = HEADER.unpack_from(buf)
                if len(buf) < HEADER.size + size:
                    break
                body = buf[HEADER.size:HEADER.size + size]
                buf = buf[HEADER.size + size:]
                if size == 0:
                    heartbeats += 1
                    continue
                if start is None:
                    start = phy
                    if offset == 0:
                        # A slave with nothing takes the master's start point.
                        offset = phy
                if phy != offset:
                    gap = {"expected": offset, "got": phy}
                    break
                out.write(body)
                offset += size
                frames += 1
                if args.ack:
                    sock.sendall(OFFSET.pack(offset))
                    last_report = time.monotonic()
            if gap is not None:
                break
            if args.ack and time.monotonic() - last_report >= args.heartbeat_ms / 1000:
                sock.sendall(OFFSET.pack(offset))
                last_report = time.monotonic()
            if args.until is not None and offset >= args.until:
                break
    sock.close()
    print(json.dumps({"start": start, "end": offset, "frames": frames,
                      "heartbeats": heartbeats, "gap": gap,
                      "closed_by_master": closed_by_master}))
    return 0 if gap is None else 1


def commitlog_files(directory):
    names = sorted(n for n in os.listdir(directory) if n.isdigit() and len(n) == 20)
    return [(int(n), os.path.join(directory, n)) for n in names]


def data_end(files, file_size):
    """The offset after the last valid record of the last files (BLANK fillers skipped)."""
    end = files[0][0] if files else 0
    for start, path in files:
        with open(path, "rb") as f:
            data = f.read()
        pos = 0
        while pos + 8 <= file_size:
            total, magic = struct.unpack_from(">iI", data, pos)
            if magic == MAGIC_BLANK and total == file_size - pos:
                pos = file_size
                end = start + pos
                break
            if magic in (MAGIC_V1, MAGIC_V2) and 0 < total <= file_size - pos:
                pos += total
                end = start + pos
                continue
            return end
    return end


def read_range(files, file_size, offset, size):
    for start, path in files:
        if start <= offset < start + file_size:
            with open(path, "rb") as f:
                f.seek(offset - start)
                return f.read(size)
    return b""


def run_mute_master(args):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(1)
    listener.settimeout(30)
    print(json.dumps({"listening": args.port}), flush=True)
    conn, _ = listener.accept()
    accepted = time.monotonic()
    conn.settimeout(0.05)
    received = 0
    closed_by_slave = False
    while time.monotonic() - accepted < args.timeout_s:
        try:
            data = conn.recv(4096)
        except socket.timeout:
            continue
        except ConnectionResetError:
            closed_by_slave = True
            break
        if not data:
            closed_by_slave = True
            break
        received += len(data)
    elapsed = time.monotonic() - accepted
    conn.close()
    print(json.dumps({"reports": received // 8, "closed_by_slave": closed_by_slave,
                      "elapsed_s": elapsed}))
    return 0


def run_master(args):
    if args.mute:
        return run_mute_master(args)
    files = commitlog_files(args.commitlog)
    end = data_end(files, args.file_size)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", args.port))
    listener.listen(1)
    listener.settimeout(30)
    print(json.dumps({"listening": args.port, "end": end}), flush=True)
    conn, _ = listener.accept()
    conn.settimeout(0.05)
    requested = None
    acked = -1
    pending = b""
    while requested is None:
        try:
            data = conn.recv(8 - len(pending))
        except socket.timeout:
            continue
        if not data:
            return 1
        pending += data
        if len(pending) == 8:
            requested = OFFSET.unpack(pending)[0]
            acked = requested
            pending = b""
    if requested == 0:
        nxt = end - end % args.file_size
    else:
        nxt = requested
    first = nxt
    frames = heartbeats = 0
    last_write = time.monotonic()
    done_at = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if nxt < end:
            room = args.file_size - nxt % args.file_size
            size = min(args.batch, end - nxt, room)
            body = read_range(files, args.file_size, nxt, size)
            conn.sendall(HEADER.pack(nxt, len(body)) + body)
            nxt += len(body)
            frames += 1
            last_write = time.monotonic()
        elif time.monotonic() - last_write >= args.heartbeat_ms / 1000:
            conn.sendall(HEADER.pack(nxt, 0))
            heartbeats += 1
            last_write = time.monotonic()
        try:
            data = conn.recv(4096)
            if not data:
                break
            pending += data
            while len(pending) >= 8:
                acked = OFFSET.unpack_from(pending)[0]
                pending = pending[8:]
        except socket.timeout:
            pass
        if acked >= end and done_at is None:
            done_at = time.monotonic()
        if done_at is not None and time.monotonic() - done_at >= args.linger_s:
            break
    conn.close()
    print(json.dumps({"requested": requested, "start": first, "end": end, "acked": acked,
                      "frames": frames, "heartbeats": heartbeats}))
    return 0 if acked >= end else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("slave")
    s.add_argument("--master", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--offset", type=int, default=0)
    s.add_argument("--until", type=int)
    s.add_argument("--ack", dest="ack", action="store_true", default=True)
    s.add_argument("--no-ack", dest="ack", action="store_false")
    s.add_argument("--heartbeat-ms", type=int, default=5000)
    s.add_argument("--timeout-s", type=float, default=30)
    m = sub.add_parser("master")
    m.add_argument("--port", type=int, required=True)
    m.add_argument("--commitlog")
    m.add_argument("--file-size", type=int)
    m.add_argument("--mute", action="store_true")
    m.add_argument("--timeout-s", type=float, default=20)
    m.add_argument("--batch", type=int, default=32 * 1024)
    m.add_argument("--heartbeat-ms", type=int, default=5000)
    m.add_argument("--linger-s", type=float, default=1.0)
    args = p.parse_args()
    return run_slave(args) if args.mode == "slave" else run_master(args)


if __name__ == "__main__":
    sys.exit(main())
