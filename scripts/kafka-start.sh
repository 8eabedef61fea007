#!/usr/bin/env bash
# scripts/kafka-start.sh — start ONE real Apache Kafka broker (KRaft, combined
# broker+controller, node.id=1) on 127.0.0.1 for integration and fault tests.
#
# Usage:
#   eval "$(scripts/kafka-start.sh)"          # fresh broker, new empty data dir
#   scripts/kafka-start.sh --restart-keep-data # (re)start on the SAME data dir
#   scripts/kafka-stop.sh [--kill]             # see that script
#
# On success stdout carries exactly these two lines (everything else -> stderr):
#   KRABKA_KAFKA_BROKERS=127.0.0.1:<port>       PLAINTEXT, no auth, principal
#                                               User:ANONYMOUS = super user
#   KRABKA_KAFKA_SASL_BROKERS=127.0.0.1:<port>  SASL_PLAINTEXT, SCRAM-SHA-256,
#                                               subject to ACLs (StandardAuthorizer)
# SCRAM-SHA-256 users: admin/admin-secret (super user), alice/alice-secret,
# bob/bob-secret (no ACLs: denied everything until a test grants some).
#
# Modes:
#   (default)            If a broker started by these scripts is alive, wait until it
#                        is ready and print the lines (idempotent). Otherwise wipe
#                        $KRABKA_KAFKA_DIR, write config, format storage, start.
#   --restart-keep-data  Stop the running broker if any (SIGTERM, as kafka-stop.sh
#                        with KRABKA_KEEP_DATA=1), then start again on the existing
#                        data dir and config (same ports, same cluster id), without
#                        formatting. Falls back to a fresh start when there is no
#                        formatted data dir. Meant for fault harnesses: e.g.
#                        `kafka-stop.sh --kill; kafka-start.sh --restart-keep-data`.
#
# Jars: resolved once by Maven (scripts/kafka/pom.xml) into
# ${KRABKA_CACHE_DIR:-~/.cache/krabka-coord}/kafka-<version>/libs and reused.
# Layout of ${KRABKA_KAFKA_DIR:-/tmp/krabka-kafka}: server.properties,
# log4j2.properties, ports.env, release.env (the release and transaction.version
# it was formatted with: a running broker of another one is refused, not reused),
# broker.pid, broker.log (+ broker.log.prev from the previous start), format.log,
# data/ (log.dirs and KRaft metadata log).
# Other knobs: see scripts/kafka-env.sh; KRABKA_KAFKA_START_TIMEOUT (s, default 90),
# KRABKA_KAFKA_LOG_LEVEL (root log level, default INFO), KRABKA_KAFKA_WAIT_TXN=1 (ready
# means also that the transaction coordinator answers a DescribeTransactions of a probe
# transactional id: __transaction_state exists and is loaded, so the first mints of a
# test do not meet COORDINATOR_NOT_AVAILABLE; scripts/matrix.sh sets it).
set -euo pipefail

mode=fresh
case "${1:-}" in
  "") ;;
  --restart-keep-data) mode=restart ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 0 ;;
  *) echo "usage: $0 [--restart-keep-data]" >&2; exit 2 ;;
esac

# shellcheck source=scripts/kafka-env.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kafka-env.sh"
START_TIMEOUT="${KRABKA_KAFKA_START_TIMEOUT:-90}"

print_brokers() {
  printf 'KRABKA_KAFKA_BROKERS=127.0.0.1:%s\n' "$KRABKA_KAFKA_PORT"
  printf 'KRABKA_KAFKA_SASL_BROKERS=127.0.0.1:%s\n' "$KRABKA_KAFKA_SASL_PORT"
}

# A broker that is up reuses the ports it was started with, whatever the env says.
load_ports() {
  if [[ -f "$KRABKA_KAFKA_DIR/ports.env" ]]; then
    # shellcheck disable=SC1091
    source "$KRABKA_KAFKA_DIR/ports.env"
  fi
}

ready() {
  grep -qE 'Kafka Server started|started \(kafka\.server\.KafkaRaftServer\)' "$KRABKA_KAFKA_LOG" 2>/dev/null &&
    krabka_port_open "$KRABKA_KAFKA_PORT" && krabka_port_open "$KRABKA_KAFKA_SASL_PORT"
}

# wait_ready PID: poll until ready, the process dies, or the timeout passes.
wait_ready() {
  local pid=$1 deadline=$((SECONDS + START_TIMEOUT))
  while ((SECONDS < deadline)); do
    if ready; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then
      krabka_log "broker (pid $pid) exited during startup"
      return 1
    fi
    sleep 0.25
  done
  krabka_log "broker (pid $pid) not ready after ${START_TIMEOUT}s"
  return 1
}

# wait_transactions PID: wait until the transaction coordinator answers a describe of a
# probe transactional id with "not found" (its FindCoordinator creates
# __transaction_state; the coordinator of the probe's partition has loaded it).
wait_transactions() {
  local pid=$1 deadline=$((SECONDS + START_TIMEOUT)) out
  printf 'status = error\nrootLogger.level = OFF\n' >"$KRABKA_KAFKA_DIR/log4j2-tools.properties"
  while ((SECONDS < deadline)); do
    out="$(java -Xms32m -Xmx256m -XX:TieredStopAtLevel=1 -XX:+UseSerialGC \
      -Dlog4j2.configurationFile="$KRABKA_KAFKA_DIR/log4j2-tools.properties" -cp "$KRABKA_KAFKA_LIBS/*" \
      org.apache.kafka.tools.TransactionsCommand --bootstrap-server "127.0.0.1:$KRABKA_KAFKA_PORT" \
      describe --transactional-id krabka-start-probe </dev/null 2>&1 || true)"
    if grep -qE 'TransactionalIdNotFound|ID could not be found' <<<"$out"; then return 0; fi
    kill -0 "$pid" 2>/dev/null || { krabka_log "broker (pid $pid) exited while the transaction coordinator loaded"; return 1; }
    sleep 0.5
  done
  krabka_log "the transaction coordinator is not ready after ${START_TIMEOUT}s: $(tail -n 3 <<<"$out")"
  return 1
}

fail_with_log() {
  krabka_log "last 50 lines of $KRABKA_KAFKA_LOG:"
  tail -n 50 "$KRABKA_KAFKA_LOG" >&2 2>/dev/null || true
  exit 1
}

krabka_kafka_check_version || exit 2
# What a fresh start records in $KRABKA_KAFKA_DIR/release.env, and a running
# broker must match (a broker of another release is not reused silently).
release_line="KRABKA_KAFKA_RUNNING=$KRABKA_KAFKA_VERSION${KRABKA_KAFKA_TXN_VERSION:+:tv$KRABKA_KAFKA_TXN_VERSION}"

# --- already running? -------------------------------------------------------
if [[ $mode == fresh ]] && pid="$(krabka_kafka_pid)"; then
  load_ports
  krabka_log "broker already running (pid $pid, $KRABKA_KAFKA_DIR)"
  if [[ -f "$KRABKA_KAFKA_DIR/release.env" && "$(cat "$KRABKA_KAFKA_DIR/release.env")" != "$release_line" ]]; then
    krabka_log "the broker that runs in $KRABKA_KAFKA_DIR is $(cut -d= -f2 "$KRABKA_KAFKA_DIR/release.env"), not the" \
      "${release_line#*=} asked for (KRABKA_KAFKA_VERSION, KRABKA_KAFKA_TXN_VERSION): stop it with" \
      "scripts/kafka-stop.sh, or use another KRABKA_KAFKA_DIR and ports"
    exit 1
  fi
  wait_ready "$pid" || fail_with_log
  print_brokers
  exit 0
fi

krabka_kafka_ensure_libs

if [[ $mode == restart ]]; then
  if krabka_kafka_pid >/dev/null; then
    KRABKA_KEEP_DATA=1 "$KRABKA_SCRIPTS_DIR/kafka-stop.sh"
  fi
  if [[ -f "$KRABKA_KAFKA_MARKER" && -f "$KRABKA_KAFKA_DIR/data/meta.properties" &&
        -f "$KRABKA_KAFKA_DIR/server.properties" ]]; then
    load_ports
    krabka_log "restarting on existing data dir $KRABKA_KAFKA_DIR/data"
  else
    krabka_log "no formatted data dir in $KRABKA_KAFKA_DIR: starting fresh"
    mode=fresh
  fi
fi

for p in "$KRABKA_KAFKA_PORT" "$KRABKA_KAFKA_SASL_PORT" "$KRABKA_KAFKA_CONTROLLER_PORT"; do
  if krabka_port_open "$p"; then
    krabka_log "port 127.0.0.1:$p is already in use by a process these scripts did not start" \
      "(stop it, or set KRABKA_KAFKA_PORT / KRABKA_KAFKA_SASL_PORT / KRABKA_KAFKA_CONTROLLER_PORT)"
    exit 1
  fi
done

JAVA_LOG4J="-Dlog4j2.configurationFile=$KRABKA_KAFKA_DIR/log4j2.properties"

# --- fresh data dir, config, storage format --------------------------------
if [[ $mode == fresh ]]; then
  if [[ -e "$KRABKA_KAFKA_DIR" ]]; then
    if [[ -f "$KRABKA_KAFKA_MARKER" ]]; then
      rm -rf "$KRABKA_KAFKA_DIR"
    elif [[ -d "$KRABKA_KAFKA_DIR" && -z "$(ls -A "$KRABKA_KAFKA_DIR")" ]]; then
      rmdir "$KRABKA_KAFKA_DIR"
    else
      krabka_log "$KRABKA_KAFKA_DIR exists and was not made by these scripts; refusing to wipe it"
      exit 1
    fi
  fi
  mkdir -p "$KRABKA_KAFKA_DIR/data"
  : >"$KRABKA_KAFKA_MARKER"
  printf '%s\n' "$release_line" >"$KRABKA_KAFKA_DIR/release.env"
  cat >"$KRABKA_KAFKA_DIR/ports.env" <<EOF
KRABKA_KAFKA_PORT=$KRABKA_KAFKA_PORT
KRABKA_KAFKA_SASL_PORT=$KRABKA_KAFKA_SASL_PORT
KRABKA_KAFKA_CONTROLLER_PORT=$KRABKA_KAFKA_CONTROLLER_PORT
EOF

  cat >"$KRABKA_KAFKA_DIR/log4j2.properties" <<EOF
# Log4j 2 config for the test broker: everything to stdout (-> broker.log).
status = warn
# Keep logging through the broker's own shutdown hook (Log4j's hook would stop the
# logger first and the controlled-shutdown lines would be lost).
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

  c=$KRABKA_KAFKA_CONTROLLER_PORT
  cat >"$KRABKA_KAFKA_DIR/server.properties" <<EOF
# Generated by scripts/kafka-start.sh: one KRaft node, broker+controller, loopback only.
process.roles=broker,controller
node.id=1
# Dynamic KRaft quorum (kraft.version=1), formatted with 'format --standalone'.
controller.quorum.bootstrap.servers=127.0.0.1:$c
controller.listener.names=CONTROLLER
listeners=PLAINTEXT://127.0.0.1:$KRABKA_KAFKA_PORT,SASL_PLAINTEXT://127.0.0.1:$KRABKA_KAFKA_SASL_PORT,CONTROLLER://127.0.0.1:$c
advertised.listeners=PLAINTEXT://127.0.0.1:$KRABKA_KAFKA_PORT,SASL_PLAINTEXT://127.0.0.1:$KRABKA_KAFKA_SASL_PORT,CONTROLLER://127.0.0.1:$c
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
inter.broker.listener.name=PLAINTEXT

# SASL/SCRAM on the SASL_PLAINTEXT listener only (users are created by the storage format).
sasl.enabled.mechanisms=SCRAM-SHA-256
listener.name.sasl_plaintext.sasl.enabled.mechanisms=SCRAM-SHA-256
listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;

# ACLs. PLAINTEXT clients and the PLAINTEXT controller listener authenticate as
# User:ANONYMOUS, which is a super user; SASL users other than admin need ACLs.
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:ANONYMOUS;User:admin

log.dirs=$KRABKA_KAFKA_DIR/data

# One node, fast tests.
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
# After a SIGKILL the restarted node cannot register until the controller fences its
# old registration (session timeout, default 9 s): keep that short for fault tests.
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=3000
transaction.abort.timed.out.transaction.cleanup.interval.ms=1000
transaction.remove.expired.transaction.cleanup.interval.ms=5000
log.cleaner.backoff.ms=1000
auto.create.topics.enable=false
EOF

  # Cluster id: 16 random bytes, URL-safe base64 without padding (Kafka's Uuid
  # string form); avoid a leading '-' like Uuid.randomUuid() does.
  cluster_id=-
  while [[ $cluster_id == -* ]]; do
    cluster_id="$(head -c 16 /dev/urandom | base64 | tr '+/' '-_' | tr -d '=\n')"
  done
  mapfile -t features < <(krabka_kafka_format_features)
  krabka_log "formatting storage for Kafka $KRABKA_KAFKA_VERSION (cluster id $cluster_id${KRABKA_KAFKA_TXN_VERSION:+, transaction.version=$KRABKA_KAFKA_TXN_VERSION})"
  # shellcheck disable=SC2086
  if ! java $JAVA_LOG4J -cp "$KRABKA_KAFKA_LIBS/*" kafka.tools.StorageTool format \
      --config "$KRABKA_KAFKA_DIR/server.properties" --cluster-id "$cluster_id" --standalone \
      ${features[@]+"${features[@]}"} \
      --add-scram 'SCRAM-SHA-256=[name=admin,password=admin-secret]' \
      --add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]' \
      --add-scram 'SCRAM-SHA-256=[name=bob,password=bob-secret]' \
      </dev/null >"$KRABKA_KAFKA_DIR/format.log" 2>&1; then
    krabka_log "storage format failed:"
    cat "$KRABKA_KAFKA_DIR/format.log" >&2
    exit 1
  fi
fi

# --- launch -----------------------------------------------------------------
[[ -f "$KRABKA_KAFKA_LOG" ]] && mv -f "$KRABKA_KAFKA_LOG" "$KRABKA_KAFKA_LOG.prev"
krabka_log "starting broker: PLAINTEXT 127.0.0.1:$KRABKA_KAFKA_PORT, SASL_PLAINTEXT 127.0.0.1:$KRABKA_KAFKA_SASL_PORT, CONTROLLER 127.0.0.1:$KRABKA_KAFKA_CONTROLLER_PORT"
# All fds redirected, so `eval "$(kafka-start.sh)"` does not wait for the broker.
# shellcheck disable=SC2086
nohup java $KRABKA_KAFKA_HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError \
  -Djava.awt.headless=true $JAVA_LOG4J \
  -cp "$KRABKA_KAFKA_LIBS/*" kafka.Kafka "$KRABKA_KAFKA_DIR/server.properties" \
  </dev/null >>"$KRABKA_KAFKA_LOG" 2>&1 &
pid=$!
printf '%s\n' "$pid" >"$KRABKA_KAFKA_PIDFILE"

t0=$SECONDS
if ! wait_ready "$pid"; then
  if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -f "$KRABKA_KAFKA_PIDFILE"
  fail_with_log
fi
if [[ "${KRABKA_KAFKA_WAIT_TXN:-0}" == 1 ]] && ! wait_transactions "$pid"; then
  if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
  rm -f "$KRABKA_KAFKA_PIDFILE"
  fail_with_log
fi
# The release the broker says it is (AppInfoParser's line) must be the one asked for.
running_version="$(grep -oE 'Kafka version: [^ ]+' "$KRABKA_KAFKA_LOG" | head -n1 | cut -d' ' -f3)"
if [[ -n "$running_version" && "$running_version" != "$KRABKA_KAFKA_VERSION" ]]; then
  krabka_log "the broker says it is Kafka $running_version, not the $KRABKA_KAFKA_VERSION asked for (jars: $KRABKA_KAFKA_LIBS)"
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$KRABKA_KAFKA_PIDFILE"
  exit 1
fi
krabka_log "broker ready (pid $pid, Kafka ${running_version:-?}${KRABKA_KAFKA_TXN_VERSION:+, transaction.version=$KRABKA_KAFKA_TXN_VERSION}) after $((SECONDS - t0)) s; log: $KRABKA_KAFKA_LOG"
print_brokers
