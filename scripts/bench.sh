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
#      started it;
#   2. installs etcd from Debian's packages (etcd-server) when etcd is
#      missing, and starts a single-node etcd on loopback, on free ports,
#      with a temporary data directory, and stops it and removes the
#      directory at the end;
#   3. runs cmd/krabka-bench, which prints the table;
#   4. runs the go test benchmarks of the role-state fold and the codec
#      (no broker needed).
# Needs: go, java (17+) and mvn for the broker, apt-get for etcd. A full run
# takes about five minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '[bench] %s\n' "$*" >&2; }

# --- Kafka ------------------------------------------------------------------
started_kafka=0
if [ -z "${KRABKA_KAFKA_BROKERS:-}" ]; then
  # shellcheck source=scripts/kafka-env.sh
  source scripts/kafka-env.sh
  if ! { [ -f "$KRABKA_KAFKA_PIDFILE" ] && kill -0 "$(cat "$KRABKA_KAFKA_PIDFILE")" 2>/dev/null; }; then
    started_kafka=1 # no broker of these scripts runs: stop the one we start
  fi
  out=$(scripts/kafka-start.sh)
  eval "$out"
fi
export KRABKA_KAFKA_BROKERS
log "Kafka at $KRABKA_KAFKA_BROKERS"

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
cleanup() {
  if [ -n "$etcd_pid" ]; then
    kill "$etcd_pid" 2>/dev/null || true
    wait "$etcd_pid" 2>/dev/null || true
  fi
  rm -rf "$etcd_dir"
  if [ "$started_kafka" = 1 ] && [ "${KRABKA_KEEP_BROKER:-}" != 1 ]; then
    scripts/kafka-stop.sh >&2 || true
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
for _ in $(seq 100); do
  if ETCDCTL_API=3 etcdctl --endpoints "127.0.0.1:$client_port" endpoint health >/dev/null 2>&1; then
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

# --- the machine --------------------------------------------------------------
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/^Mem:/{print $2}') GiB RAM"
echo "versions: $(go version | awk '{print $3}'), franz-go $(go list -m -f '{{.Version}}' github.com/twmb/franz-go), Kafka ${KRABKA_KAFKA_VERSION:-4.4.0}, etcd $(etcd --version | head -1 | awk '{print $3}') (client $(go list -m -f '{{.Version}}' go.etcd.io/etcd/client/v3))"
echo

# --- the benchmarks -------------------------------------------------------------
bin=$(mktemp /tmp/krabka-bench.XXXXXX)
go build -o "$bin" ./cmd/krabka-bench
"$bin" -brokers "$KRABKA_KAFKA_BROKERS" -etcd "$KRABKA_ETCD_ENDPOINTS" "$@"
rm -f "$bin"
echo
echo "go test -bench (the fold of a role state, the campaign's incremental read, the codec):"
go test -run '^$' -bench . -benchmem -benchtime 0.2s ./coordination/ | grep -E '^(Benchmark|ok)'
