#!/usr/bin/env bash
# The socket queues of every loopback TCP connection of a server port, sampled over a window:
# where a connection's bytes wait. For each connection, seen from the server's end and from the
# client's, p50, p99 and the maximum of Recv-Q (bytes arrived that the process has not read
# yet) and Send-Q (bytes written that the peer has not yet acknowledged, which on loopback
# means bytes the peer's receive queue holds).
#
# Usage: scripts/socket-queues.sh SECONDS PORT
# Takes SECONDS x 100 samples of `ss -tnH state established`, 10 ms apart plus the time `ss`
# takes, so the window runs a little longer than SECONDS. Run it while a workload drives the
# server on 127.0.0.1:PORT, e.g. W5 against a broker on a free port.
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 SECONDS PORT" >&2; exit 2; }
window_s=$1 port=$2
[[ $window_s =~ ^[0-9]+$ && $window_s -ge 1 && $window_s -le 100 ]] ||
  { echo "$0: SECONDS must be 1 to 100, not '$window_s'" >&2; exit 2; }
[[ $port =~ ^[0-9]+$ && $port -ge 1 && $port -le 65535 ]] ||
  { echo "$0: PORT must be 1 to 65535, not '$port'" >&2; exit 2; }
command -v ss >/dev/null || { echo "$0: needs ss (Debian: apt-get install -y iproute2)" >&2; exit 2; }

samples=$((window_s * 100))
for ((i = 0; i < samples; i++)); do
  ss -tnH state established "( sport = :$port or dport = :$port )"
  sleep 0.01
done | python3 -c '
import sys
port = sys.argv[1]
queues = {}
for line in sys.stdin:
    fields = line.split()
    if len(fields) < 4:
        continue
    recv_q, send_q, local, peer = int(fields[0]), int(fields[1]), fields[2], fields[3]
    end = "server" if local.endswith(":" + port) else "client"
    queues.setdefault((end, local, peer), []).append((recv_q, send_q))

def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * q))]

print("| end | local | peer | samples | Recv-Q p50 / p99 / max | Send-Q p50 / p99 / max |")
print("| --- | --- | --- | ---: | --- | --- |")
for (end, local, peer), rows in sorted(queues.items()):
    recv = [r for r, _ in rows]
    send = [s for _, s in rows]
    cell = lambda v: "%d / %d / %d" % (pct(v, 0.5), pct(v, 0.99), max(v))
    print("| %s | %s | %s | %d | %s | %s |" % (end, local, peer, len(rows), cell(recv), cell(send)))
' "$port"
