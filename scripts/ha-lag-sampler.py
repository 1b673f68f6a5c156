#!/usr/bin/env python3
"""Samples a master and its slave with GET_BROKER_RUNTIME_INFO (request code 28) during a run.

Usage: ha-lag-sampler.py MASTER_ADDR SLAVE_ADDR OUT_TSV DURATION_S [INTERVAL_MS]

Every INTERVAL_MS (default 100) it asks the slave, then the master, for its runtime table and
writes one line: wall time (ms), the slave's `commitLogMaxOffset`, the master's
`commitLogMaxOffset`, and the master's `haSlaveAckOffset` / `haSlaveFallBehindBytes` ("-" when
the master does not report them). The slave is asked first, so a master/slave difference
overstates the lag by at most the bytes the master wrote during one loopback round trip.

`summarize OUT_TSV` prints the replication figures of a sampled run as key=value lines (see
`summarize`). Speaks the remoting protocol with JSON headers (serializeTypeCurrentRPC set, as
strict brokers require); loopback only, bounded in samples and time.
"""
import json
import socket
import struct
import sys
import time

# The bound on samples per run (one per interval; 10 minutes at 100 ms).
MAX_SAMPLES = 6000
# The bound on one response frame.
MAX_FRAME_BYTES = 4 << 20
GET_BROKER_RUNTIME_INFO = 28


class Peer:
    def __init__(self, addr):
        host, port = addr.rsplit(":", 1)
        self.addr = (host, int(port))
        self.sock = None
        self.opaque = 0

    def _connect(self):
        self.sock = socket.create_connection(self.addr, timeout=2)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _read_exact(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return bytes(buf)

    def runtime_info(self):
        """The broker's runtime table, or None when it cannot be read now."""
        try:
            if self.sock is None:
                self._connect()
            self.opaque += 1
            header = json.dumps({
                "code": GET_BROKER_RUNTIME_INFO, "language": "RUST", "version": 0,
                "opaque": self.opaque, "flag": 0, "extFields": {},
                "serializeTypeCurrentRPC": "JSON",
            }).encode()
            self.sock.sendall(struct.pack(">ii", 4 + len(header), len(header)) + header)
            while True:
                (total,) = struct.unpack(">i", self._read_exact(4))
                if total < 4 or total > MAX_FRAME_BYTES:
                    raise ConnectionError(f"frame of {total} bytes")
                frame = self._read_exact(total)
                header_len = struct.unpack(">i", frame[:4])[0] & 0xFFFFFF
                head = json.loads(frame[4:4 + header_len])
                if head.get("opaque") == self.opaque:
                    break
            body = frame[4 + header_len:]
            if head.get("code") != 0 or not body:
                return None
            return json.loads(body).get("table", {})
        except (OSError, ValueError, ConnectionError):
            if self.sock is not None:
                self.sock.close()
            self.sock = None
            return None


def timed(peer):
    """The peer's runtime table and the wall time (ms) halfway through the request."""
    before = time.time()
    table = peer.runtime_info()
    return table, (before + time.time()) * 500.0


def sample(master_addr, slave_addr, out, duration_s, interval_ms):
    master, slave = Peer(master_addr), Peer(slave_addr)
    deadline = time.monotonic() + duration_s
    with open(out, "w") as f:
        f.write("t_slave_ms\tslave_max\tt_master_ms\tmaster_max\tha_ack\tha_behind\n")
        for _ in range(MAX_SAMPLES):
            if time.monotonic() >= deadline:
                break
            started = time.monotonic()
            s, t_s = timed(slave)
            m, t_m = timed(master)
            if s is not None and m is not None:
                f.write("%.1f\t%s\t%.1f\t%s\t%s\t%s\n" % (
                    t_s, s.get("commitLogMaxOffset", "-"), t_m, m.get("commitLogMaxOffset", "-"),
                    m.get("haSlaveAckOffset", "-"), m.get("haSlaveFallBehindBytes", "-")))
                f.flush()
            rest = interval_ms / 1000.0 - (time.monotonic() - started)
            if rest > 0:
                time.sleep(rest)


def master_reached(history, offset):
    """The time (ms) the master's write position reached `offset`, interpolated between
    samples, or None when it is before the first sample."""
    prev = None
    for t, m in history:
        if m >= offset:
            if prev is None:
                return None if m > offset else t
            pt, pm = prev
            return pt + (t - pt) * (offset - pm) / (m - pm) if m > pm else t
        prev = (t, m)
    return None


def master_at(history, t):
    """The master's write position at time `t`, interpolated, or None outside the samples."""
    for (pt, pm), (nt, nm) in zip(history, history[1:]):
        if pt <= t <= nt:
            return pm + (nm - pm) * (t - pt) / (nt - pt) if nt > pt else nm
    return None


def summarize(path):
    """Replication throughput (the replicated offset's growth while the master's grew: the
    master's haSlaveAckOffset when present, else the slave's commitLogMaxOffset), lag in bytes
    (master-reported when present, else master - slave) and lag in ms: for each sample, now
    minus the interpolated time the master's write position reached the slave's offset."""
    rows = []
    with open(path) as f:
        next(f, None)
        for line in f:
            t_s, s, t_m, m, ack, behind = line.rstrip("\n").split("\t")
            if s == "-" or m == "-":
                continue
            if ack != "-":
                # The master's view of its slave (same instant as its own write position).
                rows.append((float(t_m), int(ack), float(t_m), int(m), behind))
            else:
                rows.append((float(t_s), int(s), float(t_m), int(m), behind))
    # The loaded window: from the first sample where the master grew to the last one.
    grow = [i for i in range(1, len(rows)) if rows[i][3] > rows[i - 1][3]]
    if not grow:
        print("samples=%d" % len(rows))
        print("loaded_samples=0")
        return
    window = rows[grow[0] - 1:grow[-1] + 1]
    t0, s0 = window[0][:2]
    t1, s1 = window[-1][:2]
    history = [(tm, m) for _, _, tm, m, _ in rows]
    # Without the master's own figure: its write position interpolated at the slave's sample
    # time, minus the slave's end (the two requests are not simultaneous).
    behind = []
    for t, s, _, _, b in window:
        if b != "-":
            behind.append((t, s, int(b)))
        elif (m := master_at(history, t)) is not None:
            behind.append((t, s, max(0, round(m - s))))
    lag_bytes = sorted(b for _, _, b in behind)
    # A slave that holds all the master had is 0 ms behind; else the time since the master
    # wrote the slave's end.
    lag_ms = sorted(0.0 if b == 0 else max(0.0, t - r) for t, s, b in behind
                    if b == 0 or (r := master_reached(history, s)) is not None)

    def pct(v, p):
        return v[min(len(v) - 1, int(len(v) * p))] if v else "-"

    secs = (t1 - t0) / 1000.0
    print("samples=%d" % len(rows))
    print("loaded_samples=%d" % len(window))
    print("window_s=%.2f" % secs)
    print("repl_mb_s=%.2f" % ((s1 - s0) / secs / 1e6 if secs > 0 else 0))
    print("lag_bytes_p50=%s" % pct(lag_bytes, 0.5))
    print("lag_bytes_p99=%s" % pct(lag_bytes, 0.99))
    print("lag_bytes_max=%s" % (lag_bytes[-1] if lag_bytes else "-"))
    fmt = lambda v: "-" if v == "-" else "%.1f" % v
    print("lag_ms_p50=%s" % fmt(pct(lag_ms, 0.5)))
    print("lag_ms_p99=%s" % fmt(pct(lag_ms, 0.99)))
    print("lag_ms_max=%s" % fmt(lag_ms[-1] if lag_ms else "-"))
    print("lag_source=%s" % ("master haSlaveAckOffset/haSlaveFallBehindBytes"
                             if window[0][4] != "-" else "master - slave commitLogMaxOffset"))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "summarize":
        summarize(sys.argv[2])
    elif len(sys.argv) in (5, 6):
        sample(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]),
               float(sys.argv[5]) if len(sys.argv) == 6 else 100.0)
    else:
        sys.exit(__doc__)
