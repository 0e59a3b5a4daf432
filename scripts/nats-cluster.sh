#!/usr/bin/env bash
# A local NATS cluster on loopback ports: routes between every node, JetStream on each,
# its own store directory per node. For the multi-node e2e tests and for trying a shared
# metadata bucket by hand. Processes are started and stopped by PID, never by name.
#
# usage:
#   scripts/nats-cluster.sh start DIR [NODES]   start NODES (default 3) nodes; state in DIR
#   scripts/nats-cluster.sh stop DIR            stop every node (SIGTERM, then SIGKILL)
#   scripts/nats-cluster.sh stop-node DIR I     stop node I (1-based), keeping its store
#   scripts/nats-cluster.sh kill-node DIR I     SIGKILL node I (a crash)
#   scripts/nats-cluster.sh start-node DIR I    start node I again on its ports and store
#   scripts/nats-cluster.sh urls DIR            the client URLs, comma-separated
#
# DIR/cluster.env holds the ports (NODE_i_CLIENT, NODE_i_ROUTE, NODE_i_HTTP: the monitoring
# endpoint, where /jsz names the JetStream meta leader; NODES); DIR/node-i.pid the
# PIDs; DIR/node-i.log each node's log. Ports are picked free on 127.0.0.1.
set -euo pipefail

die() { echo "nats-cluster: $*" >&2; exit 1; }
command -v nats-server >/dev/null || die "nats-server is not installed (npm test installs it)"

# A free port below the kernel's ephemeral range: a port the kernel picked for listen(0)
# comes from that range, where any outgoing connection may take it before nats-server
# binds it (a node then failed to start, in CI, under the suites' traffic).
free_port() {
  node -e "
    const low = Number(require('fs').readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').split(/\s+/)[0]) || 32768;
    const s = require('net').createServer();
    const tryPort = () => s.listen(10000 + Math.floor(Math.random() * (low - 10000)), '127.0.0.1');
    s.on('error', tryPort);
    s.on('listening', () => { console.log(s.address().port); s.close(); });
    tryPort();
  "
}

wait_port() { # port, seconds
  local deadline=$((SECONDS + $2))
  until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.1
  done
}

node_conf() { # dir, i
  local dir=$1 i=$2 routes="" j
  # shellcheck disable=SC1091
  source "$dir/cluster.env"
  for ((j = 1; j <= NODES; j++)); do
    [ "$j" = "$i" ] && continue
    local port_var="NODE_${j}_ROUTE"
    routes+="    nats-route://127.0.0.1:${!port_var}\n"
  done
  local client_var="NODE_${i}_CLIENT" route_var="NODE_${i}_ROUTE" http_var="NODE_${i}_HTTP"
  printf 'server_name: n%s\nlisten: 127.0.0.1:%s\nhttp: 127.0.0.1:%s\nmax_payload: 8388608\nmax_pending: 67108864\ncluster {\n  name: epd-local\n  listen: 127.0.0.1:%s\n  routes: [\n%b  ]\n}\n' \
    "$i" "${!client_var}" "${!http_var}" "${!route_var}" "$routes" > "$dir/node-$i.conf"
}

start_node() { # dir, i
  local dir=$1 i=$2
  # shellcheck disable=SC1091
  source "$dir/cluster.env"
  local pidfile="$dir/node-$i.pid"
  if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then return 0; fi
  node_conf "$dir" "$i"
  mkdir -p "$dir/store-$i"
  nats-server -c "$dir/node-$i.conf" -js -sd "$dir/store-$i" >>"$dir/node-$i.log" 2>&1 &
  echo $! > "$pidfile"
  local client_var="NODE_${i}_CLIENT"
  wait_port "${!client_var}" 10 || die "node $i did not start: $(tail -n 5 "$dir/node-$i.log")"
}

stop_node() { # dir, i, signal
  local pidfile="$1/node-$2.pid" pid
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile")
  if kill -0 "$pid" 2>/dev/null; then
    kill "-$3" "$pid" 2>/dev/null || true
    for _ in $(seq 1 80); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

cmd=${1:-}; dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || die "usage: $0 start|stop|stop-node|kill-node|start-node|urls DIR [N]"
case "$cmd" in
  start)
    nodes=${3:-3}
    mkdir -p "$dir"
    {
      echo "NODES=$nodes"
      for ((i = 1; i <= nodes; i++)); do
        echo "NODE_${i}_CLIENT=$(free_port)"
        echo "NODE_${i}_ROUTE=$(free_port)"
        echo "NODE_${i}_HTTP=$(free_port)"
      done
    } > "$dir/cluster.env"
    for ((i = 1; i <= nodes; i++)); do start_node "$dir" "$i"; done
    "$0" urls "$dir"
    ;;
  stop)
    # shellcheck disable=SC1091
    source "$dir/cluster.env"
    for ((i = 1; i <= NODES; i++)); do stop_node "$dir" "$i" TERM; done
    ;;
  stop-node) stop_node "$dir" "${3:?node}" TERM ;;
  kill-node) stop_node "$dir" "${3:?node}" KILL ;;
  start-node) start_node "$dir" "${3:?node}" ;;
  urls)
    # shellcheck disable=SC1091
    source "$dir/cluster.env"
    urls=()
    for ((i = 1; i <= NODES; i++)); do
      v="NODE_${i}_CLIENT"
      urls+=("nats://127.0.0.1:${!v}")
    done
    (IFS=,; echo "${urls[*]}")
    ;;
  *) die "unknown command $cmd" ;;
esac
