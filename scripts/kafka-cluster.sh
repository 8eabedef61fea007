#!/usr/bin/env bash
# scripts/kafka-cluster.sh — a 3-node Apache Kafka cluster (KRaft) on 127.0.0.1,
# the production shape for the liveness tests and the fault harness.
#
# Three combined broker+controller nodes (node.id 1, 2, 3) with a static controller
# quorum (controller.quorum.voters), replication factor 3 by default,
# min.insync.replicas=2, __transaction_state RF 3 / min ISR 2, __consumer_offsets
# RF 3, and Kafka's DEFAULT failure detection: broker.session.timeout.ms (9 s),
# broker.heartbeat.interval.ms (2 s), replica.lag.time.max.ms (30 s), the
# controller's election timeouts and the transaction timeouts are left at their
# defaults, on purpose. A broker fault takes as long to detect here as on a
# production cluster; a lease must survive that (coordination.MinLeaseForFailureDetection).
# No SASL listener: the ACL tests run on the single broker (scripts/kafka-start.sh).
#
# Usage:
#   eval "$(scripts/kafka-cluster.sh start)"   start (idempotent), print the address
#   scripts/kafka-cluster.sh stop              SIGTERM every node, remove the run dir
#                                              (KRABKA_KEEP_DATA=1 keeps it)
#   scripts/kafka-cluster.sh kill N            SIGKILL node N (a crash; data kept)
#   scripts/kafka-cluster.sh stop N            SIGTERM node N (controlled shutdown; data kept)
#   scripts/kafka-cluster.sh restart N [--wait-isr]
#                                              stop node N gracefully if it runs, start it
#                                              again on its data dir, wait until its broker
#                                              is unfenced (registered with the controller);
#                                              --wait-isr then waits as wait-isr does
#   scripts/kafka-cluster.sh pause N           SIGSTOP node N (a hung JVM; sockets stay open)
#   scripts/kafka-cluster.sh resume N          SIGCONT node N
#   scripts/kafka-cluster.sh wait-isr          wait until every partition of the cluster
#                                              has its full ISR (no under-replicated one)
#   scripts/kafka-cluster.sh balance           elect the preferred replica leader of every
#                                              partition (after restarts a node leads nothing
#                                              until Kafka's own rebalance, 5 minutes later)
#   scripts/kafka-cluster.sh pid N             print the pid of node N (fails if not running)
#   scripts/kafka-cluster.sh addr N            print node N's broker address, 127.0.0.1:<port>
#   scripts/kafka-cluster.sh env               print the address line without starting
#   scripts/kafka-cluster.sh status            one line per node: id, state, pid, ports
#
# On success `start` (and `env`) print exactly one line on stdout, everything else
# goes to stderr:
#   KRABKA_KAFKA_CLUSTER_BROKERS=127.0.0.1:<p1>,127.0.0.1:<p2>,127.0.0.1:<p3>
# Node N is broker id N and listens on the N-th address.
#
# `start`: when every node started by this script set is alive it resumes a paused
# one, waits until the cluster is ready and prints the line. When some nodes are
# alive it starts the missing ones on their data dirs. When none is, it wipes
# $KRABKA_CLUSTER_DIR, writes the config, formats the three storage dirs and starts
# the nodes. Ready means: the three brokers are unfenced, and the transaction
# coordinator answers for a probe transactional id (so __transaction_state exists,
# RF 3, with a leader for each partition).
#
# Environment (all optional; the settings of scripts/kafka-env.sh apply too, among them
# KRABKA_KAFKA_VERSION, the release, and KRABKA_KAFKA_TXN_VERSION, the transaction.version
# a new cluster is formatted with, e.g. 1 for a cluster upgraded from 3.x):
#   KRABKA_CLUSTER_DIR        run dir (default /tmp/krabka-cluster): cluster.env,
#                             log4j2.properties, node-N/{server.properties,node.pid,
#                             node.log,node.log.prev,format.log,data/}
#   KRABKA_CLUSTER_BASE_PORT  first port (default 19192). Node N's PLAINTEXT listener is
#                             BASE+N-1 (19192-19194), its CONTROLLER listener BASE+N+2
#                             (19195-19197). Keep all six outside the kernel's ephemeral
#                             range (/proc/sys/net/ipv4/ip_local_port_range), or a client's
#                             outgoing socket may hold a port a restarted node needs.
#                             A second, private cluster: another DIR and e.g. BASE 19292.
#   KRABKA_CLUSTER_HEAP       JVM heap flags per node (default "-Xms128m -Xmx512m")
#   KRABKA_CLUSTER_START_TIMEOUT  seconds to wait for readiness (default 180)
#   KRABKA_CLUSTER_STOP_TIMEOUT   seconds to wait for a SIGTERM'ed node (default 30)
#   KRABKA_CLUSTER_ISR_TIMEOUT    seconds wait-isr waits (default 120)
#   KRABKA_KAFKA_LOG_LEVEL    root log level of the nodes (default INFO)
#   KRABKA_CLUSTER_SESSION_TIMEOUT_MS  broker.session.timeout.ms of a NEW cluster (default:
#                             unset, Kafka's 9000). Set, it also sets
#                             broker.heartbeat.interval.ms to a third of it (at most 2000),
#                             so that a live broker still beats three times per session.
#                             A cluster that exists keeps the value it was created with
#                             (cluster.env records it; `env` prints it as a comment).
# At each launch of a node its previous node.log is appended to node-N/all.log, which
# is never rotated: all.log then node.log hold every launch, and the fault harness reads
# the controller's view of every fault from them.
set -euo pipefail

# shellcheck source=scripts/kafka-env.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kafka-env.sh"

CLUSTER_DIR="${KRABKA_CLUSTER_DIR:-/tmp/krabka-cluster}"
BASE_PORT="${KRABKA_CLUSTER_BASE_PORT:-19192}"
HEAP="${KRABKA_CLUSTER_HEAP:--Xms128m -Xmx512m}"
START_TIMEOUT="${KRABKA_CLUSTER_START_TIMEOUT:-180}"
STOP_TIMEOUT="${KRABKA_CLUSTER_STOP_TIMEOUT:-30}"
ISR_TIMEOUT="${KRABKA_CLUSTER_ISR_TIMEOUT:-120}"
MARKER="$CLUSTER_DIR/.krabka-cluster"
NODES=(1 2 3)
SESSION_TIMEOUT_MS="${KRABKA_CLUSTER_SESSION_TIMEOUT_MS:-}"
# The release (and transaction.version) asked for; cluster.env records the one a
# cluster was formatted with, and `start` refuses to reuse a cluster of another.
WANT_RELEASE="$KRABKA_KAFKA_VERSION${KRABKA_KAFKA_TXN_VERSION:+:tv$KRABKA_KAFKA_TXN_VERSION}"
RELEASE=""

log() { printf '[krabka-cluster] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; }

# A cluster that exists keeps the ports it was created with, whatever the env says.
if [[ -f "$CLUSTER_DIR/cluster.env" ]]; then
  # shellcheck disable=SC1091
  source "$CLUSTER_DIR/cluster.env"
fi
[[ "$BASE_PORT" =~ ^[0-9]+$ ]] || die "KRABKA_CLUSTER_BASE_PORT=$BASE_PORT is not a port number"
[[ -z "$SESSION_TIMEOUT_MS" || "$SESSION_TIMEOUT_MS" =~ ^[0-9]+$ ]] || die "KRABKA_CLUSTER_SESSION_TIMEOUT_MS=$SESSION_TIMEOUT_MS is not a number of milliseconds"

broker_port() { echo $((BASE_PORT + $1 - 1)); }
controller_port() { echo $((BASE_PORT + $1 + 2)); }
node_dir() { echo "$CLUSTER_DIR/node-$1"; }
node_log() { echo "$CLUSTER_DIR/node-$1/node.log"; }
pidfile() { echo "$CLUSTER_DIR/node-$1/node.pid"; }

brokers_line() {
  local n out=""
  for n in "${NODES[@]}"; do out+="${out:+,}127.0.0.1:$(broker_port "$n")"; done
  printf 'KRABKA_KAFKA_CLUSTER_BROKERS=%s\n' "$out"
}
bootstrap() { brokers_line | cut -d= -f2; }

check_node() {
  [[ "${1:-}" =~ ^[123]$ ]] || die "node must be 1, 2 or 3, not '${1:-}'"
}

# node_pid N: print the pid of node N if it is alive and really is our kafka.Kafka
# on node N's config (guards against pid reuse); else fail.
node_pid() {
  local pid f
  f="$(pidfile "$1")"
  [[ -f $f ]] || return 1
  pid="$(cat "$f" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "kafka.Kafka $(node_dir "$1")/server.properties" || return 1
  printf '%s\n' "$pid"
}

# launched_alive N: the process that launch started for node N still runs. Unlike
# node_pid it does not check the command line: right after the fork the child is
# still the shell that execs java.
launched_alive() {
  local pid
  pid="$(cat "$(pidfile "$1")" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && [[ "$(proc_state "$pid")" != Z ]]
}

# proc_state PID: the state letter of the process (R, S, T for stopped, Z, ...).
proc_state() { awk '{print $3}' "/proc/$1/stat" 2>/dev/null || echo '?'; }


# java_tool CLASS ARGS...: run one of Kafka's command-line tools quietly.
java_tool() {
  local cls=$1; shift
  java -Xms32m -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
    -Dlog4j2.configurationFile="$CLUSTER_DIR/log4j2-tools.properties" \
    -cp "$KRABKA_KAFKA_LIBS/*" "$cls" "$@" </dev/null
}

# session_settings: the failure-detection lines of server.properties (none by default).
session_settings() {
  [[ -n "$SESSION_TIMEOUT_MS" ]] || return 0
  local hb=$((SESSION_TIMEOUT_MS / 3))
  ((hb > 2000)) && hb=2000
  printf 'broker.session.timeout.ms=%s\nbroker.heartbeat.interval.ms=%s\n' "$SESSION_TIMEOUT_MS" "$hb"
}

write_config() {
  local n c voters=""
  for n in "${NODES[@]}"; do voters+="${voters:+,}$n@127.0.0.1:$(controller_port "$n")"; done
  cat >"$CLUSTER_DIR/log4j2.properties" <<EOF
# Log4j 2 config of the cluster's nodes: everything to stdout (-> node-N/node.log).
status = warn
shutdownHook = disable
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = ${KRABKA_KAFKA_LOG_LEVEL:-INFO}
rootLogger.appenderRef.out.ref = OUT
logger.request.name = kafka.request.logger
logger.request.level = $KRABKA_KAFKA_REQUEST_LOG
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
EOF
  cat >"$CLUSTER_DIR/log4j2-tools.properties" <<EOF
status = error
appender.err.type = Console
appender.err.name = ERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m%n
rootLogger.level = ERROR
rootLogger.appenderRef.err.ref = ERR
EOF
  for n in "${NODES[@]}"; do
    mkdir -p "$(node_dir "$n")/data"
    c=$(controller_port "$n")
    cat >"$(node_dir "$n")/server.properties" <<EOF
# Generated by scripts/kafka-cluster.sh: node $n of a 3-node KRaft cluster on loopback,
# broker+controller, static quorum.
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$voters
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:$(broker_port "$n"),CONTROLLER://127.0.0.1:$c
advertised.listeners=PLAINTEXT://127.0.0.1:$(broker_port "$n")
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT
log.dirs=$(node_dir "$n")/data

# Replication: the production shape.
num.partitions=1
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
auto.create.topics.enable=false
group.initial.rebalance.delay.ms=0

# Failure detection: Kafka's defaults, deliberately NOT set here
# (broker.session.timeout.ms=9000, broker.heartbeat.interval.ms=2000,
# replica.lag.time.max.ms=30000, controller.quorum.fetch.timeout.ms=2000,
# controller.quorum.election.timeout.ms=1000, transaction timeouts),
# unless KRABKA_CLUSTER_SESSION_TIMEOUT_MS was set at creation:
$(session_settings)

# Housekeeping only (no effect on failure detection): faster log cleaning for the
# compacted state topic of short tests.
log.cleaner.backoff.ms=1000
EOF
  done
}

format_storage() {
  local n cluster_id=-
  # 16 random bytes, URL-safe base64 without padding, no leading '-' (Kafka's Uuid form).
  while [[ $cluster_id == -* ]]; do
    cluster_id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
  done
  printf 'BASE_PORT=%s\nCLUSTER_ID=%s\nSESSION_TIMEOUT_MS=%s\nRELEASE=%s\n' "$BASE_PORT" "$cluster_id" "$SESSION_TIMEOUT_MS" "$WANT_RELEASE" >"$CLUSTER_DIR/cluster.env"
  local features
  mapfile -t features < <(krabka_kafka_format_features)
  log "formatting 3 storage dirs for Kafka $KRABKA_KAFKA_VERSION (cluster id $cluster_id${KRABKA_KAFKA_TXN_VERSION:+, transaction.version=$KRABKA_KAFKA_TXN_VERSION})"
  local pids=()
  for n in "${NODES[@]}"; do
    java -Dlog4j2.configurationFile="$CLUSTER_DIR/log4j2-tools.properties" -XX:TieredStopAtLevel=1 \
      -cp "$KRABKA_KAFKA_LIBS/*" kafka.tools.StorageTool format \
      --config "$(node_dir "$n")/server.properties" --cluster-id "$cluster_id" \
      ${features[@]+"${features[@]}"} \
      </dev/null >"$(node_dir "$n")/format.log" 2>&1 &
    pids+=($!)
  done
  for n in "${NODES[@]}"; do
    if ! wait "${pids[$((n - 1))]}"; then
      log "storage format of node $n failed:"
      cat "$(node_dir "$n")/format.log" >&2
      exit 1
    fi
  done
}

launch() { # N
  local n=$1 p l pid
  for p in "$(broker_port "$n")" "$(controller_port "$n")"; do
    if krabka_port_open "$p"; then
      die "port 127.0.0.1:$p (node $n) is in use by a process these scripts did not start (set KRABKA_CLUSTER_BASE_PORT)"
    fi
  done
  l="$(node_log "$n")"
  # The log of the last launch joins all.log, which keeps every launch.
  [[ -f $l ]] && cat "$l" >>"$(node_dir "$n")/all.log" && mv -f "$l" "$l.prev"
  log "starting node $n: PLAINTEXT 127.0.0.1:$(broker_port "$n"), CONTROLLER 127.0.0.1:$(controller_port "$n")"
  # shellcheck disable=SC2086
  nohup java $HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError \
    -Djava.awt.headless=true -Dlog4j2.configurationFile="$CLUSTER_DIR/log4j2.properties" \
    -cp "$KRABKA_KAFKA_LIBS/*" kafka.Kafka "$(node_dir "$n")/server.properties" \
    </dev/null >>"$l" 2>&1 &
  pid=$!
  printf '%s\n' "$pid" >"$(pidfile "$n")"
}

# unfenced N: node N's current log says its broker registered and was unfenced.
unfenced() {
  grep -q 'The broker has been unfenced' "$(node_log "$1")" 2>/dev/null &&
    krabka_port_open "$(broker_port "$1")"
}

# wait_unfenced DEADLINE N...: wait until every node named is unfenced.
wait_unfenced() {
  local deadline=$1 n pending; shift
  while :; do
    pending=()
    for n in "$@"; do
      unfenced "$n" && continue
      launched_alive "$n" || { log "node $n exited during startup; last 40 lines of $(node_log "$n"):"; tail -n 40 "$(node_log "$n")" >&2 || true; return 1; }
      pending+=("$n")
    done
    ((${#pending[@]} == 0)) && return 0
    if ((SECONDS >= deadline)); then
      log "node(s) ${pending[*]} not unfenced after ${START_TIMEOUT}s"
      for n in "${pending[@]}"; do log "last 20 lines of $(node_log "$n"):"; tail -n 20 "$(node_log "$n")" >&2 || true; done
      return 1
    fi
    sleep 0.25
  done
}

# wait_transactions DEADLINE: wait until the transaction coordinator answers a describe
# of a probe transactional id with "not found" (the FindCoordinator creates
# __transaction_state, RF 3; the coordinator of the probe's partition has loaded it).
wait_transactions() {
  local deadline=$1 out
  while :; do
    out="$(java_tool org.apache.kafka.tools.TransactionsCommand --bootstrap-server "$(bootstrap)" \
      describe --transactional-id krabka-cluster-probe 2>&1 || true)"
    if grep -qE 'TransactionalIdNotFound|ID could not be found' <<<"$out"; then return 0; fi
    if ((SECONDS >= deadline)); then
      log "the transaction coordinator is not ready after ${START_TIMEOUT}s: $(tail -n 3 <<<"$out")"
      return 1
    fi
    sleep 1
  done
}

# under_replicated: print the under-replicated partitions of the cluster (empty when
# every ISR is full); fail when the tool cannot ask.
under_replicated() {
  java_tool org.apache.kafka.tools.TopicCommand --bootstrap-server "$(bootstrap)" \
    --describe --under-replicated-partitions 2>/dev/null
}

wait_isr() {
  local deadline=$((SECONDS + ISR_TIMEOUT)) out t0=$SECONDS
  while :; do
    if out="$(under_replicated)" && [[ -z "$out" ]]; then
      log "every partition has its full ISR (waited $((SECONDS - t0)) s)"
      return 0
    fi
    if ((SECONDS >= deadline)); then
      log "partitions still under-replicated after ${ISR_TIMEOUT}s:"
      printf '%s\n' "$out" | head -n 20 >&2
      return 1
    fi
    sleep 1
  done
}

cmd_balance() {
  local out
  # Exit status 1 with "ElectionNotNeeded" only means nothing had to move.
  out="$(java_tool org.apache.kafka.tools.LeaderElectionCommand --bootstrap-server "$(bootstrap)" \
    --election-type PREFERRED --all-topic-partitions 2>&1)" || true
  if grep -qiE 'error|exception' <<<"$out" && ! grep -qiE 'not needed|ElectionNotNeeded' <<<"$out"; then
    log "preferred leader election failed: $out"
    return 1
  fi
  log "preferred leader election done${out:+: $(head -c 300 <<<"$out")}"
}

stop_node() { # N: SIGTERM, wait, SIGKILL if needed; data kept
  local n=$1 pid t0
  if ! pid="$(node_pid "$n")"; then
    log "node $n is not running"
    rm -f "$(pidfile "$n")"
    return 0
  fi
  [[ "$(proc_state "$pid")" == T ]] && kill -CONT "$pid" 2>/dev/null || true
  log "SIGTERM node $n (pid $pid), waiting up to ${STOP_TIMEOUT}s"
  t0=$SECONDS
  kill -TERM "$pid" 2>/dev/null || true
  if wait_gone "$pid" "$STOP_TIMEOUT"; then
    log "node $n stopped after $((SECONDS - t0)) s"
  else
    log "node $n still alive after ${STOP_TIMEOUT}s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" 10 || log "pid $pid still present after SIGKILL"
  fi
  rm -f "$(pidfile "$n")"
}

formatted() { # N
  [[ -f "$MARKER" && -f "$(node_dir "$1")/data/meta.properties" && -f "$(node_dir "$1")/server.properties" ]]
}

cmd_start() {
  local n pid alive=() dead=() t0=$SECONDS deadline
  deadline=$((SECONDS + START_TIMEOUT))
  for n in "${NODES[@]}"; do
    if pid="$(node_pid "$n")"; then
      alive+=("$n")
      if [[ "$(proc_state "$pid")" == T ]]; then
        log "node $n (pid $pid) is paused: SIGCONT"
        kill -CONT "$pid"
      fi
    else
      dead+=("$n")
    fi
  done
  if ((${#alive[@]} > 0)) && [[ -n "$RELEASE" && "$RELEASE" != "$WANT_RELEASE" ]]; then
    die "the cluster that runs in $CLUSTER_DIR is $RELEASE, not the $WANT_RELEASE asked for" \
      "(KRABKA_KAFKA_VERSION, KRABKA_KAFKA_TXN_VERSION): '$0 stop' it, or use another KRABKA_CLUSTER_DIR and base port"
  fi
  krabka_kafka_ensure_libs
  if ((${#alive[@]} == 0)); then
    if [[ -e "$CLUSTER_DIR" ]]; then
      if [[ -f "$MARKER" ]]; then
        rm -rf "$CLUSTER_DIR"
      elif [[ -d "$CLUSTER_DIR" && -z "$(ls -A "$CLUSTER_DIR")" ]]; then
        rmdir "$CLUSTER_DIR"
      else
        die "$CLUSTER_DIR exists and was not made by these scripts; refusing to wipe it"
      fi
    fi
    # Fresh: take the ports of the environment, not of a removed cluster.env.
    BASE_PORT="${KRABKA_CLUSTER_BASE_PORT:-19192}"
    check_ports
    mkdir -p "$CLUSTER_DIR"
    : >"$MARKER"
    write_config
    format_storage
    for n in "${NODES[@]}"; do launch "$n"; done
  elif ((${#dead[@]} > 0)); then
    for n in "${dead[@]}"; do
      formatted "$n" || die "node $n has no formatted data dir in $(node_dir "$n"); run '$0 stop' then '$0 start'"
      log "node $n is not running: starting it on its data dir"
      launch "$n"
    done
  else
    log "cluster already running ($CLUSTER_DIR)"
  fi
  wait_unfenced "$deadline" "${NODES[@]}" || exit 1
  wait_transactions "$deadline" || exit 1
  log "cluster ready after $((SECONDS - t0)) s; logs: $CLUSTER_DIR/node-{1,2,3}/node.log"
  brokers_line
}

check_ports() {
  local lo hi p
  read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || return 0
  for p in "$BASE_PORT" $((BASE_PORT + 5)); do
    if ((p >= lo && p <= hi)); then
      log "warning: port $p is inside the ephemeral range $lo-$hi; a restarted node may find it taken"
    fi
  done
}

cmd_stop_all() {
  local n pids=()
  for n in "${NODES[@]}"; do
    stop_node "$n" &
    pids+=($!)
  done
  for n in "${pids[@]}"; do wait "$n" || true; done
  if [[ "${KRABKA_KEEP_DATA:-0}" == 1 ]]; then
    [[ -d $CLUSTER_DIR ]] && log "kept $CLUSTER_DIR"
  elif [[ -f "$MARKER" ]]; then
    rm -rf "$CLUSTER_DIR"
    log "removed $CLUSTER_DIR"
  fi
}

cmd_kill() {
  local pid
  pid="$(node_pid "$1")" || die "node $1 is not running"
  log "SIGKILL node $1 (pid $pid)"
  kill -KILL "$pid" 2>/dev/null || true
  wait_gone "$pid" 10 || log "pid $pid still present after SIGKILL"
  rm -f "$(pidfile "$1")"
}

cmd_restart() {
  local n=$1 wait_isr_too=$2 t0=$SECONDS deadline
  formatted "$n" || die "node $n has no formatted data dir in $(node_dir "$n"); start the cluster first"
  krabka_kafka_ensure_libs
  stop_node "$n"
  launch "$n"
  deadline=$((SECONDS + START_TIMEOUT))
  wait_unfenced "$deadline" "$n" || exit 1
  log "node $n unfenced after $((SECONDS - t0)) s"
  if ((wait_isr_too)); then wait_isr || exit 1; fi
}

cmd_signal() { # SIG N
  local pid
  pid="$(node_pid "$2")" || die "node $2 is not running"
  log "SIG$1 node $2 (pid $pid)"
  kill "-$1" "$pid"
}

cmd_status() {
  local n pid state
  for n in "${NODES[@]}"; do
    if pid="$(node_pid "$n")"; then
      case "$(proc_state "$pid")" in
        T|t) state=paused ;;
        *) if unfenced "$n"; then state=running; else state=starting; fi ;;
      esac
    else
      pid=-; state=stopped
    fi
    printf 'node=%s state=%s pid=%s broker=127.0.0.1:%s controller=127.0.0.1:%s\n' \
      "$n" "$state" "$pid" "$(broker_port "$n")" "$(controller_port "$n")"
  done
}

sub="${1:-}"
shift || true
case "$sub" in
  start) [[ $# -eq 0 ]] || die "usage: $0 start"; cmd_start ;;
  stop)
    if [[ $# -eq 0 ]]; then cmd_stop_all; else check_node "$1"; stop_node "$1"; fi ;;
  kill) check_node "${1:-}"; cmd_kill "$1" ;;
  restart)
    check_node "${1:-}"
    w=0
    [[ "${2:-}" == --wait-isr ]] && w=1
    [[ -z "${2:-}" || $w == 1 ]] || die "usage: $0 restart N [--wait-isr]"
    cmd_restart "$1" "$w" ;;
  pause) check_node "${1:-}"; cmd_signal STOP "$1" ;;
  resume) check_node "${1:-}"; cmd_signal CONT "$1" ;;
  wait-isr) krabka_kafka_ensure_libs; wait_isr ;;
  balance) krabka_kafka_ensure_libs; cmd_balance ;;
  pid) check_node "${1:-}"; node_pid "$1" || die "node $1 is not running" ;;
  addr) check_node "${1:-}"; echo "127.0.0.1:$(broker_port "$1")" ;;
  env) brokers_line ;;
  status) cmd_status ;;
  -h|--help|help) usage ;;
  *) usage; exit 2 ;;
esac
