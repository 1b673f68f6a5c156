#!/usr/bin/env bash
# Installs and runs the peer broker (rocketmq-rust 1.0.0 name server + broker from the Rust package registry)
# inside a loopback-only network namespace, for side-by-side tests and benchmarks.
#
# Both peer servers detect the machine's non-loopback address and use it (the name server dials
# it every 30 s), so they run in a network namespace that has only `lo`; clients and benches
# that talk to them must run in the same namespace (`exec` / `run` below). Needs root.
#
# Usage: scripts/peer-broker.sh COMMAND [ARGS]
#   install             cargo install both binaries into the cache dir (idempotent)
#   start               install if needed, create the netns, start name server + broker, wait
#   stop                stop both servers and delete the netns
#   status              show the processes and ports
#   kill-broker         SIGKILL the broker (the name server keeps running)
#   restart-broker      start the broker again on the same store and wait until it listens
#   exec CMD [ARGS..]   run CMD inside the netns, exporting RINGMQ_IT_EXTERNAL_NAMESRV and
#                       RINGMQ_IT_EXTERNAL_KILL_CMD / _RESTART_CMD (this script's kill-broker
#                       and restart-broker), so the client tests can kill and restart the peer
#   run CMD [ARGS..]    start, exec CMD, then stop (also on failure or Ctrl-C); exit with CMD's code
#
# Environment (defaults in brackets):
#   PEER_CACHE_DIR     install root and run dir [/work/peer-cache]; or pass it with --cache DIR
#   PEER_NETNS         network namespace name [ringmq-peer]
#   PEER_NAMESRV_PORT  name server port [9876]
#   PEER_BROKER_PORT   broker port [10911] (HA port is +1)
#   PEER_KEEP_STORE    1 keeps the broker's store across starts [0: fresh store each start]
#   PEER_READY_TIMEOUT_S  seconds to wait for the servers [60]
#   PEER_BROKER_EXTRA_TOML  extra lines for the broker's [broker] table, e.g.
#                      'longPollingEnable = false' (camelCase keys, as in the Java config)
#
# Example (client integration tests against the peer):
#   scripts/peer-broker.sh run env CARGO_TARGET_DIR=$PWD/target \
#     nice -n 10 cargo test -p ringmq-client-it --offline
set -euo pipefail

PEER_VERSION=1.0.0
CACHE_DIR=${PEER_CACHE_DIR:-/work/peer-cache}
if [[ ${1:-} == --cache ]]; then
  CACHE_DIR=$2
  shift 2
fi
NETNS=${PEER_NETNS:-ringmq-peer}
NAMESRV_PORT=${PEER_NAMESRV_PORT:-9876}
BROKER_PORT=${PEER_BROKER_PORT:-10911}
HA_PORT=$((BROKER_PORT + 1))
READY_TIMEOUT_S=${PEER_READY_TIMEOUT_S:-60}
RUN_DIR=$CACHE_DIR/run
NAMESRV_BIN=$CACHE_DIR/bin/rocketmq-namesrv-rust
BROKER_BIN=$CACHE_DIR/bin/rocketmq-broker-rust
NAMESRV_ADDR=127.0.0.1:$NAMESRV_PORT

log() { printf '[peer-broker] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

install_peer() {
  mkdir -p "$CACHE_DIR"
  # A shared target dir lets the broker build reuse the name server's dependencies.
  local target=$CACHE_DIR/target
  if [[ ! -x $NAMESRV_BIN ]]; then
    log "installing rocketmq-namesrv@$PEER_VERSION into $CACHE_DIR (about 2.5 min)"
    CARGO_TARGET_DIR=$target nice -n 10 cargo install --root "$CACHE_DIR" "rocketmq-namesrv@$PEER_VERSION"
  fi
  if [[ ! -x $BROKER_BIN ]]; then
    log "installing rocketmq-broker@$PEER_VERSION into $CACHE_DIR (about 4.5 min)"
    CARGO_TARGET_DIR=$target nice -n 10 cargo install --root "$CACHE_DIR" "rocketmq-broker@$PEER_VERSION"
  fi
}

in_ns() { ip netns exec "$NETNS" "$@"; }

netns_exists() { ip netns list | awk '{print $1}' | grep -qx "$NETNS"; }

port_open() { in_ns bash -c "exec 3<>/dev/tcp/127.0.0.1/$1" 2>/dev/null; }

pid_alive() { [[ -f $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

wait_port() {
  local port=$1 what=$2 pidfile=$3 waited=0
  until port_open "$port"; do
    pid_alive "$pidfile" || { tail -n 50 "$RUN_DIR/$what.log" >&2 || true; die "$what exited"; }
    ((waited++ < READY_TIMEOUT_S * 5)) || { tail -n 50 "$RUN_DIR/$what.log" >&2 || true; die "$what not listening on $port"; }
    sleep 0.2
  done
}

write_broker_config() {
  local store=$RUN_DIR/store-a
  cat >"$RUN_DIR/broker.toml" <<EOF
[broker]
${PEER_BROKER_EXTRA_TOML:-}
namesrvAddr = "$NAMESRV_ADDR"
brokerIp1 = "127.0.0.1"
brokerIp2 = "127.0.0.1"
listenPort = $BROKER_PORT
storePathRootDir = "$store"
[broker.brokerServerConfig]
bindAddress = "127.0.0.1"
[broker.brokerIdentity]
brokerName = "broker-a"
brokerClusterName = "DefaultCluster"
brokerId = 0
[store]
storeType = "LocalFile"
brokerRole = "ASYNC_MASTER"
storePathRootDir = "$store"
haListenAddress = "127.0.0.1"
haListenPort = $HA_PORT
EOF
}

start_peer() {
  install_peer
  if pid_alive "$RUN_DIR/namesrv.pid" || pid_alive "$RUN_DIR/broker.pid"; then
    die "already running (scripts/peer-broker.sh stop first)"
  fi
  mkdir -p "$RUN_DIR/home"
  if [[ ${PEER_KEEP_STORE:-0} != 1 ]]; then
    rm -rf "$RUN_DIR/store-a" "$RUN_DIR/home"
    mkdir -p "$RUN_DIR/home"
  fi
  if ! netns_exists; then
    ip netns add "$NETNS"
  fi
  in_ns ip link set lo up
  write_broker_config
  log "starting name server on $NAMESRV_ADDR in netns $NETNS"
  HOME=$RUN_DIR/home ROCKETMQ_HOME=$RUN_DIR/home \
    ip netns exec "$NETNS" "$NAMESRV_BIN" --bindAddress 127.0.0.1 --listenPort "$NAMESRV_PORT" \
    >"$RUN_DIR/namesrv.log" 2>&1 </dev/null &
  echo $! >"$RUN_DIR/namesrv.pid"
  disown
  wait_port "$NAMESRV_PORT" namesrv "$RUN_DIR/namesrv.pid"
  start_broker
  log "ready: name server $NAMESRV_ADDR, broker 127.0.0.1:$BROKER_PORT (logs in $RUN_DIR)"
}

start_broker() {
  log "starting broker on 127.0.0.1:$BROKER_PORT"
  HOME=$RUN_DIR/home ROCKETMQ_HOME=$RUN_DIR/home ROCKETMQ_SECURITY_PROFILE=development-insecure-loopback \
    ip netns exec "$NETNS" "$BROKER_BIN" -c "$RUN_DIR/broker.toml" -n "$NAMESRV_ADDR" \
    >>"$RUN_DIR/broker.log" 2>&1 </dev/null &
  echo $! >"$RUN_DIR/broker.pid"
  disown
  wait_port "$BROKER_PORT" broker "$RUN_DIR/broker.pid"
  # The broker registers with the name server right after its listeners are up; give the
  # first REGISTER_BROKER a moment so clients find the TBW102 route.
  sleep "${PEER_REGISTER_WAIT_S:-3}"
}

kill_broker() {
  pid_alive "$RUN_DIR/broker.pid" || die "broker not running"
  local pid waited=0
  pid=$(cat "$RUN_DIR/broker.pid")
  kill -KILL "$pid"
  while kill -0 "$pid" 2>/dev/null && ((waited++ < 50)); do sleep 0.2; done
  rm -f "$RUN_DIR/broker.pid"
  log "broker (pid $pid) killed with SIGKILL"
}

restart_broker() {
  pid_alive "$RUN_DIR/broker.pid" && die "broker still running"
  netns_exists || die "netns $NETNS does not exist (start first)"
  # Same config, same store: the broker recovers its CommitLog and queues.
  start_broker
  log "broker restarted"
}

stop_pidfile() {
  local pidfile=$1 pid waited=0
  [[ -f $pidfile ]] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null && ((waited++ < 50)); do sleep 0.2; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

stop_peer() {
  stop_pidfile "$RUN_DIR/broker.pid"
  stop_pidfile "$RUN_DIR/namesrv.pid"
  if netns_exists; then
    # Anything still inside our namespace was started through this script (exec/run).
    local pid
    for pid in $(ip netns pids "$NETNS" 2>/dev/null); do
      kill -KILL "$pid" 2>/dev/null || true
    done
    ip netns delete "$NETNS" || true
  fi
  log "stopped"
}

status_peer() {
  local name
  for name in namesrv broker; do
    if pid_alive "$RUN_DIR/$name.pid"; then
      log "$name running, pid $(cat "$RUN_DIR/$name.pid")"
    else
      log "$name not running"
    fi
  done
  netns_exists && in_ns ss -ltn || log "netns $NETNS absent"
}

exec_in_ns() {
  [[ $# -gt 0 ]] || die "exec needs a command"
  netns_exists || die "netns $NETNS does not exist (start first)"
  local self
  self=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
  PEER_CACHE_DIR=$CACHE_DIR PEER_NETNS=$NETNS PEER_NAMESRV_PORT=$NAMESRV_PORT PEER_BROKER_PORT=$BROKER_PORT \
    RINGMQ_IT_EXTERNAL_NAMESRV=$NAMESRV_ADDR \
    RINGMQ_IT_EXTERNAL_KILL_CMD="$self kill-broker" \
    RINGMQ_IT_EXTERNAL_RESTART_CMD="$self restart-broker" \
    ip netns exec "$NETNS" "$@"
}

cmd=${1:-}
[[ -n $cmd ]] && shift
case $cmd in
  install) install_peer ;;
  start) start_peer ;;
  stop) stop_peer ;;
  status) status_peer ;;
  kill-broker) kill_broker ;;
  restart-broker) restart_broker ;;
  exec) exec_in_ns "$@" ;;
  run)
    trap stop_peer EXIT
    trap 'exit 130' INT TERM
    start_peer
    set +e
    exec_in_ns "$@"
    rc=$?
    set -e
    exit $rc
    ;;
  *) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 2 ;;
esac
