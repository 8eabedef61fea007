# shellcheck shell=bash disable=SC2034  # variables are used by the scripts that source this
# scripts/kafka-env.sh — shared by kafka-start.sh, kafka-stop.sh and murmur2-vectors.sh.
# Source it; do not run it. It defines settings and one function:
#
#   krabka_kafka_ensure_libs   make sure $KRABKA_KAFKA_LIBS holds the broker jars,
#                              resolving them with Maven (scripts/kafka/pom.xml) if not.
#
# Environment (all optional):
#   KRABKA_KAFKA_VERSION   Kafka release to resolve (default 4.4.0, the newest 4.4.x
#                          on Maven Central when this was written). Any Apache Kafka
#                          release from 3.9.0 on (KRaft with a dynamic quorum,
#                          `format --standalone`, KIP-853); an older one is refused.
#                          scripts/matrix.sh runs the tests on several.
#   KRABKA_KAFKA_TXN_VERSION  transaction.version a NEW broker or cluster is formatted
#                          with (kafka-storage format --feature transaction.version=N):
#                          unset = the release's default (2 from Kafka 4.0 on, 0 on
#                          3.9); 1 = a cluster upgraded from 3.x and never finalized
#                          (no epoch bump per commit, no Produce v12). Needs 4.0+ for 1
#                          or 2.
#   KRABKA_KAFKA_REQUEST_LOG  level of the broker's kafka.request.logger (default WARN);
#                          DEBUG logs every request with its API key and version (the
#                          matrix reads them back to show which requests its tests sent)
#   KRABKA_CACHE_DIR       jar cache root (default $HOME/.cache/krabka-coord); the jars
#                          land in $KRABKA_CACHE_DIR/kafka-<version>/libs. ~/.m2 is used
#                          as usual by Maven, so a wiped cache re-resolves offline-fast.
#   KRABKA_KAFKA_DIR       broker run dir: config, log, pid file, data (default /tmp/krabka-kafka)
#   KRABKA_KAFKA_PORT      PLAINTEXT listener port       (default 19092)
#   KRABKA_KAFKA_SASL_PORT SASL_PLAINTEXT (SCRAM-SHA-256) (default 19093)
#   KRABKA_KAFKA_CONTROLLER_PORT  KRaft controller port  (default 19094)
#                          The defaults lie outside the kernel's ephemeral port range
#                          (/proc/sys/net/ipv4/ip_local_port_range, 32768-60999 on
#                          Linux), so a client's outgoing socket never holds the port
#                          a restarted broker must bind. The 3-node cluster of
#                          scripts/kafka-cluster.sh uses 19192-19197.
#   KRABKA_KAFKA_HEAP      JVM heap flags (default "-Xms256m -Xmx768m")
#
# Everything the scripts print for humans goes to stderr; stdout is reserved for
# the KEY=value lines of kafka-start.sh and the JSON of murmur2-vectors.sh.

KRABKA_SCRIPTS_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
KRABKA_KAFKA_VERSION="${KRABKA_KAFKA_VERSION:-4.4.0}"
KRABKA_KAFKA_POM="$KRABKA_SCRIPTS_DIR/kafka/pom.xml"
KRABKA_KAFKA_CACHE="${KRABKA_CACHE_DIR:-$HOME/.cache/krabka-coord}/kafka-$KRABKA_KAFKA_VERSION"
KRABKA_KAFKA_LIBS="$KRABKA_KAFKA_CACHE/libs"
KRABKA_KAFKA_DIR="${KRABKA_KAFKA_DIR:-/tmp/krabka-kafka}"
KRABKA_KAFKA_PORT="${KRABKA_KAFKA_PORT:-19092}"
KRABKA_KAFKA_SASL_PORT="${KRABKA_KAFKA_SASL_PORT:-19093}"
KRABKA_KAFKA_CONTROLLER_PORT="${KRABKA_KAFKA_CONTROLLER_PORT:-19094}"
KRABKA_KAFKA_HEAP="${KRABKA_KAFKA_HEAP:--Xms256m -Xmx768m}"
KRABKA_KAFKA_PIDFILE="$KRABKA_KAFKA_DIR/broker.pid"
KRABKA_KAFKA_LOG="$KRABKA_KAFKA_DIR/broker.log"
# Marker proving that $KRABKA_KAFKA_DIR was made by these scripts (so only such a
# directory is ever rm -rf'ed).
KRABKA_KAFKA_MARKER="$KRABKA_KAFKA_DIR/.krabka-kafka"

KRABKA_KAFKA_TXN_VERSION="${KRABKA_KAFKA_TXN_VERSION:-}"
KRABKA_KAFKA_REQUEST_LOG="${KRABKA_KAFKA_REQUEST_LOG:-WARN}"

krabka_log() { printf '[krabka-kafka] %s\n' "$*" >&2; }

# krabka_kafka_check_version: fail, saying why, unless $KRABKA_KAFKA_VERSION is a
# release these scripts can start (3.9.0 or later) and $KRABKA_KAFKA_TXN_VERSION a
# level it knows.
krabka_kafka_check_version() {
  local major minor
  if [[ ! "$KRABKA_KAFKA_VERSION" =~ ^([0-9]+)\.([0-9]+)\.[0-9]+(-[A-Za-z0-9.]+)?$ ]]; then
    krabka_log "KRABKA_KAFKA_VERSION=$KRABKA_KAFKA_VERSION is not a Kafka release (want e.g. 3.9.2 or 4.4.0)"
    return 1
  fi
  major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
  if ((major < 3 || (major == 3 && minor < 9))); then
    krabka_log "KRABKA_KAFKA_VERSION=$KRABKA_KAFKA_VERSION is older than 3.9.0: these scripts format a KRaft" \
      "node with a dynamic quorum (format --standalone, KIP-853), which 3.9 introduced"
    return 1
  fi
  case "$KRABKA_KAFKA_TXN_VERSION" in
    "") ;;
    0|1|2)
      if ((major < 4 && KRABKA_KAFKA_TXN_VERSION > 0)); then
        krabka_log "KRABKA_KAFKA_TXN_VERSION=$KRABKA_KAFKA_TXN_VERSION needs Kafka 4.0 or later (Kafka $KRABKA_KAFKA_VERSION has no transaction version 1 or 2 for production use)"
        return 1
      fi ;;
    *) krabka_log "KRABKA_KAFKA_TXN_VERSION=$KRABKA_KAFKA_TXN_VERSION is not a transaction.version level (0, 1 or 2)"; return 1 ;;
  esac
}

# krabka_kafka_format_features: print the extra arguments of `kafka-storage format`
# (one a line) that $KRABKA_KAFKA_TXN_VERSION asks for.
krabka_kafka_format_features() {
  [[ -z "$KRABKA_KAFKA_TXN_VERSION" ]] || printf '%s\n' --feature "transaction.version=$KRABKA_KAFKA_TXN_VERSION"
}

# The stamp ties libs/ to the exact pom and version that produced it: a changed pom
# (or version) re-resolves. libs/ is "complete" only when its stamp matches.
krabka_kafka_libs_stamp() {
  printf 'version=%s pom=%s\n' "$KRABKA_KAFKA_VERSION" \
    "$(sha256sum "$KRABKA_KAFKA_POM" | cut -d' ' -f1)"
}

krabka_kafka_ensure_libs() {
  local stamp
  krabka_kafka_check_version || return 1
  stamp="$(krabka_kafka_libs_stamp)"
  if [[ -f "$KRABKA_KAFKA_LIBS/.complete" && "$(cat "$KRABKA_KAFKA_LIBS/.complete")" == "$stamp" ]]; then
    return 0
  fi
  command -v java >/dev/null || { krabka_log "java not found (Java 17+ needed)"; return 1; }
  command -v mvn >/dev/null || { krabka_log "mvn not found (apt-get install -y maven)"; return 1; }
  mkdir -p "$KRABKA_KAFKA_CACHE"
  (
    # One resolver at a time per cache dir; a second caller waits, then finds libs/ done.
    flock -w 900 9 || { krabka_log "timed out waiting for $KRABKA_KAFKA_CACHE/.lock"; exit 1; }
    if [[ -f "$KRABKA_KAFKA_LIBS/.complete" && "$(cat "$KRABKA_KAFKA_LIBS/.complete")" == "$stamp" ]]; then
      exit 0
    fi
    local tmp="$KRABKA_KAFKA_CACHE/libs.tmp.$$"
    rm -rf "$tmp"
    krabka_log "resolving Apache Kafka $KRABKA_KAFKA_VERSION jars into $KRABKA_KAFKA_LIBS (Maven)"
    local t0=$SECONDS
    # Maven's output goes to mvn.log (Maven 3.8 with -q still emits stray ANSI resets);
    # it is shown, without escape codes, only when resolution fails.
    if ! mvn -q -B --no-transfer-progress -f "$KRABKA_KAFKA_POM" \
        -Dkafka.version="$KRABKA_KAFKA_VERSION" \
        dependency:copy-dependencies -DoutputDirectory="$tmp" \
        </dev/null >"$KRABKA_KAFKA_CACHE/mvn.log" 2>&1; then
      sed 's/\x1b\[[0-9;]*m//g' "$KRABKA_KAFKA_CACHE/mvn.log" >&2
      rm -rf "$tmp"
      krabka_log "mvn dependency:copy-dependencies failed (full output: $KRABKA_KAFKA_CACHE/mvn.log)"
      exit 1
    fi
    # Sanity: the jars every caller needs must be there.
    local j
    for j in "kafka_2.13-$KRABKA_KAFKA_VERSION.jar" "kafka-clients-$KRABKA_KAFKA_VERSION.jar" \
             "kafka-server-$KRABKA_KAFKA_VERSION.jar" "kafka-metadata-$KRABKA_KAFKA_VERSION.jar" \
             "kafka-tools-$KRABKA_KAFKA_VERSION.jar"; do
      [[ -f "$tmp/$j" ]] || { krabka_log "resolution incomplete: $j missing"; rm -rf "$tmp"; exit 1; }
    done
    printf '%s\n' "$stamp" >"$tmp/.complete"
    rm -rf "$KRABKA_KAFKA_LIBS"
    mv "$tmp" "$KRABKA_KAFKA_LIBS"
    krabka_log "resolved $(find "$KRABKA_KAFKA_LIBS" -name '*.jar' | wc -l) jars in $((SECONDS - t0)) s"
  ) 9>"$KRABKA_KAFKA_CACHE/.lock"
}

# krabka_kafka_pid: print the pid of the broker this script set started, if it is
# alive and really is our kafka.Kafka (guards against pid reuse); else fail.
krabka_kafka_pid() {
  local pid
  [[ -f "$KRABKA_KAFKA_PIDFILE" ]] || return 1
  pid="$(cat "$KRABKA_KAFKA_PIDFILE" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "kafka.Kafka $KRABKA_KAFKA_DIR/server.properties" || return 1
  printf '%s\n' "$pid"
}

# krabka_port_open PORT: true when something accepts TCP connections on 127.0.0.1:PORT.
krabka_port_open() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# gone PID: true when the process no longer exists or is only a zombie. Every thread
# counts: the JVM's main thread (the pid) turns Z while other threads still run the
# shutdown and hold the listening sockets, so /proc/PID/stat alone says Z too early.
gone() {
  local t state
  kill -0 "$1" 2>/dev/null || return 0
  for t in /proc/"$1"/task/*/stat; do
    state="$(awk '{print $3}' "$t" 2>/dev/null || true)"
    [[ -z $state || $state == Z ]] || return 1
  done
  return 0
}

# wait_gone PID SECONDS: wait until gone PID, at most SECONDS; true when it is.
wait_gone() {
  local deadline=$((SECONDS + $2))
  while ((SECONDS < deadline)); do
    gone "$1" && return 0
    sleep 0.2
  done
  gone "$1"
}
