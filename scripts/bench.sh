#!/usr/bin/env bash
# scripts/bench.sh: the benchmarks of package coordination, against a real
# Kafka broker and etcd side by side. docs/performance.md shows the output
# and explains every figure.
#
#   scripts/bench.sh [krabka-bench flags]     e.g. -scale 0.2 for a smoke run
#
# It
#   1. starts the Kafka 4.4 broker of scripts/kafka-start.sh (loopback), or
#      uses the one that runs; it stops the broker at the end only if it
#      started it. KRABKA_BENCH_FRESH=1 stops a broker (and, with
#      KRABKA_BENCH_CLUSTER=start, a cluster) of these scripts that runs,
#      and starts it anew, so that the cold rows are those of a freshly
#      started JVM. The broker honours KRABKA_KAFKA_DIR, KRABKA_KAFKA_PORT,
#      KRABKA_KAFKA_SASL_PORT and KRABKA_KAFKA_CONTROLLER_PORT
#      (scripts/kafka-env.sh), the cluster KRABKA_CLUSTER_DIR and
#      KRABKA_CLUSTER_BASE_PORT (scripts/kafka-cluster.sh): a run on a shared
#      machine takes a directory and ports of its own;
#   2. takes the 3-node Kafka cluster of scripts/kafka-cluster.sh from
#      KRABKA_KAFKA_CLUSTER_BROKERS when it is set; with
#      KRABKA_BENCH_CLUSTER=start it starts the cluster itself (and stops it
#      at the end if it started it); with neither, the cluster rows are
#      left out;
#   3. installs etcd from Debian's packages (etcd-server) when etcd is
#      missing, and starts a single-node etcd on loopback, on free ports,
#      with a temporary data directory, and, when a Kafka cluster is
#      measured, a 3-node etcd beside it; it stops them and removes the
#      directories at the end;
#   4. runs cmd/krabka-bench, which prints the table: the handover and the
#      guarded write in steady state (it warms each broker with windows of
#      them until the p50 of two successive windows differs by less than
#      5 %, and reports the cold first window too), each beside its protocol
#      floor (raw requests over one franz-go client) and etcd's; then each
#      failover, throughput, idle, fold and roles figure; on the single
#      broker, then on the cluster;
#   5. runs the go test benchmarks of the role-state fold and the codec
#      (no broker needed).
# Needs: go, java (17+) and mvn for the broker, apt-get for etcd, curl. A full run
# takes ten to twenty minutes (the warm-up of each broker is bounded by
# -warm-max, 5 minutes by default; the roles group, up to 10 000 roles, takes
# two to three), and one more to start a cluster.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[bench] %s\n' "$*" >&2; }

# --- Kafka ------------------------------------------------------------------
started_kafka=0
if [ -z "${KRABKA_KAFKA_BROKERS:-}" ]; then
  # shellcheck source=scripts/kafka-env.sh
  source scripts/kafka-env.sh
  if [ "${KRABKA_BENCH_FRESH:-}" = 1 ] && [ -f "$KRABKA_KAFKA_PIDFILE" ] && kill -0 "$(cat "$KRABKA_KAFKA_PIDFILE")" 2>/dev/null; then
    log "KRABKA_BENCH_FRESH=1: stopping the broker in $KRABKA_KAFKA_DIR, to start it anew"
    scripts/kafka-stop.sh >&2
  fi
  if ! { [ -f "$KRABKA_KAFKA_PIDFILE" ] && kill -0 "$(cat "$KRABKA_KAFKA_PIDFILE")" 2>/dev/null; }; then
    started_kafka=1 # no broker of these scripts runs: stop the one we start
  fi
  out=$(scripts/kafka-start.sh)
  eval "$out"
fi
export KRABKA_KAFKA_BROKERS
log "Kafka at $KRABKA_KAFKA_BROKERS"

# --- the 3-node Kafka cluster ---------------------------------------------------
started_cluster=0
if [ -z "${KRABKA_KAFKA_CLUSTER_BROKERS:-}" ] && [ "${KRABKA_BENCH_CLUSTER:-}" = start ]; then
  if [ "${KRABKA_BENCH_FRESH:-}" = 1 ] && scripts/kafka-cluster.sh status 2>/dev/null | grep -q 'state=running'; then
    log "KRABKA_BENCH_FRESH=1: stopping the cluster in ${KRABKA_CLUSTER_DIR:-/tmp/krabka-cluster}, to start it anew"
    scripts/kafka-cluster.sh stop >&2
  fi
  if ! scripts/kafka-cluster.sh status 2>/dev/null | grep -q 'state=running'; then
    started_cluster=1
  fi
  out=$(scripts/kafka-cluster.sh start)
  eval "$out"
fi
if [ -n "${KRABKA_KAFKA_CLUSTER_BROKERS:-}" ]; then
  export KRABKA_KAFKA_CLUSTER_BROKERS
  log "3-node Kafka cluster at $KRABKA_KAFKA_CLUSTER_BROKERS"
else
  log "no 3-node Kafka cluster (set KRABKA_KAFKA_CLUSTER_BROKERS, or KRABKA_BENCH_CLUSTER=start): the cluster rows are left out"
fi

# --- etcd -------------------------------------------------------------------
if ! command -v etcd >/dev/null; then
  log "etcd is missing: apt-get install etcd-server"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >&2
  # The package may start a system etcd on 2379; this script runs its own.
  if command -v systemctl >/dev/null; then systemctl stop etcd >/dev/null 2>&1 || true; fi
fi

free_port() {
  local port
  while :; do
    port=$((20000 + RANDOM % 20000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return
    fi
  done
}

etcd_dir=$(mktemp -d /tmp/krabka-bench-etcd.XXXXXX)
client_port=$(free_port)
peer_port=$(free_port)
while [ "$peer_port" = "$client_port" ]; do peer_port=$(free_port); done
etcd_pid=""
etcd_cluster_pids=()
cleanup() {
  for pid in $etcd_pid "${etcd_cluster_pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$etcd_dir"
  if [ "$started_kafka" = 1 ] && [ "${KRABKA_KEEP_BROKER:-}" != 1 ]; then
    scripts/kafka-stop.sh >&2 || true
  fi
  if [ "$started_cluster" = 1 ] && [ "${KRABKA_KEEP_BROKER:-}" != 1 ]; then
    scripts/kafka-cluster.sh stop >&2 || true
  fi
}
trap cleanup EXIT

# A single node on loopback. The heartbeat and election timeout are scaled
# down (10 ms / 100 ms) because etcd raises every lease TTL to
# 1.5 × election timeout: with the defaults a session cannot have a TTL
# below 2 s, and the failover benchmark uses 1 s.
etcd --name bench --data-dir "$etcd_dir/data" \
  --listen-client-urls "http://127.0.0.1:$client_port" --advertise-client-urls "http://127.0.0.1:$client_port" \
  --listen-peer-urls "http://127.0.0.1:$peer_port" --initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
  --initial-cluster "bench=http://127.0.0.1:$peer_port" \
  --heartbeat-interval 10 --election-timeout 100 \
  --log-level warn >"$etcd_dir/etcd.log" 2>&1 &
etcd_pid=$!
# etcd_healthy reports whether every endpoint given answers its /health
# with "true" (no etcdctl needed: Debian's etcd-server does not ship it).
etcd_healthy() {
  local endpoint
  for endpoint in "$@"; do
    curl -sf --max-time 1 "http://$endpoint/health" | grep -q '"health":"true"' || return 1
  done
}
for _ in $(seq 100); do
  if etcd_healthy "127.0.0.1:$client_port"; then
    break
  fi
  if ! kill -0 "$etcd_pid" 2>/dev/null; then
    cat "$etcd_dir/etcd.log" >&2
    log "etcd did not start"
    exit 1
  fi
  sleep 0.1
done
export KRABKA_ETCD_ENDPOINTS="127.0.0.1:$client_port"
log "etcd $(etcd --version | head -1 | awk '{print $3}') at $KRABKA_ETCD_ENDPOINTS, data in $etcd_dir"

# The counterpart of the Kafka cluster: three etcd members on loopback, with
# the same scaled-down heartbeat and election timeout.
if [ -n "${KRABKA_KAFKA_CLUSTER_BROKERS:-}" ]; then
  initial="" endpoints=""
  declare -a cports pports
  used=" $client_port $peer_port "
  unused_port() {
    local port
    port=$(free_port)
    while [[ "$used" == *" $port "* ]]; do port=$(free_port); done
    used+="$port "
    echo "$port"
  }
  for i in 1 2 3; do
    cports[i]=$(unused_port)
    pports[i]=$(unused_port)
    initial+="${initial:+,}m$i=http://127.0.0.1:${pports[i]}"
    endpoints+="${endpoints:+,}127.0.0.1:${cports[i]}"
  done
  for i in 1 2 3; do
    etcd --name "m$i" --data-dir "$etcd_dir/m$i" \
      --listen-client-urls "http://127.0.0.1:${cports[i]}" --advertise-client-urls "http://127.0.0.1:${cports[i]}" \
      --listen-peer-urls "http://127.0.0.1:${pports[i]}" --initial-advertise-peer-urls "http://127.0.0.1:${pports[i]}" \
      --initial-cluster "$initial" --initial-cluster-state new --initial-cluster-token "krabka-bench-$$" \
      --heartbeat-interval 10 --election-timeout 100 \
      --log-level warn >"$etcd_dir/m$i.log" 2>&1 &
    etcd_cluster_pids+=("$!")
  done
  for _ in $(seq 200); do
    if etcd_healthy ${endpoints//,/ }; then
      break
    fi
    sleep 0.1
  done
  if ! etcd_healthy ${endpoints//,/ }; then
    cat "$etcd_dir"/m?.log >&2
    log "the 3-node etcd did not start"
    exit 1
  fi
  export KRABKA_ETCD_CLUSTER_ENDPOINTS="$endpoints"
  log "3-node etcd at $KRABKA_ETCD_CLUSTER_ENDPOINTS"
fi

# --- the machine --------------------------------------------------------------
# busiest prints the processes that used the most CPU over one second (top's
# second sample), the other users of the machine that a figure shares it with.
busiest() {
  top -b -n2 -d1 -o %CPU -w 200 | awk '/^top -/{n++} n==2 && $1 ~ /^[0-9]+$/ && $9+0 >= 1 && k++ < 8 {printf "%s%s %s%%", sep, $12, $9; sep=", "}' | head -c 400
}
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/^Mem:/{print $2}') GiB RAM"
echo "load at the start: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min); the busiest processes over 1 s: $(busiest)"
if [ -n "${KRABKA_KAFKA_PIDFILE:-}" ] && [ -f "$KRABKA_KAFKA_PIDFILE" ]; then
  echo "the single broker's JVM has run for $(ps -o etimes= -p "$(cat "$KRABKA_KAFKA_PIDFILE")" | tr -d ' ') s (started by this run: $([ "$started_kafka" = 1 ] && echo yes || echo no))"
fi
echo "versions: $(go version | awk '{print $3}'), franz-go $(go list -m -f '{{.Version}}' github.com/twmb/franz-go), Kafka ${KRABKA_KAFKA_VERSION:-4.4.0}, etcd $(etcd --version | head -1 | awk '{print $3}') (client $(go list -m -f '{{.Version}}' go.etcd.io/etcd/client/v3))"
echo

# --- the benchmarks -------------------------------------------------------------
bin=$(mktemp /tmp/krabka-bench.XXXXXX)
go build -o "$bin" ./cmd/krabka-bench
"$bin" -brokers "$KRABKA_KAFKA_BROKERS" -etcd "$KRABKA_ETCD_ENDPOINTS" \
  -cluster "${KRABKA_KAFKA_CLUSTER_BROKERS:-}" -etcd-cluster "${KRABKA_ETCD_CLUSTER_ENDPOINTS:-}" "$@"
rm -f "$bin"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min); the busiest processes over 1 s: $(busiest)"
echo
echo "go test -bench (the fold of a role state, the campaign's incremental read, the codec):"
go test -run '^$' -bench . -benchmem -benchtime 0.2s ./coordination/ | grep -E '^(Benchmark|ok)'
