#!/usr/bin/env bash
# scripts/matrix.sh: the broker matrix. The library's Kafka tests on one real
# broker of each Apache Kafka release the library claims, one after another;
# scripts/test.sh (the README's test command, .ci/run) runs it after the
# main suite, whose broker and cluster are 4.4 with the defaults.
#
# Usage:
#   scripts/matrix.sh                  every configuration of KRABKA_MATRIX
#   scripts/matrix.sh 3.9.2 4.4.0:tv1  only those
#
# A configuration is a Kafka release, optionally with ":tv1" (or ":tv2"): a
# broker formatted with transaction.version=1 (a cluster upgraded from 3.x
# and never finalized), through KRABKA_KAFKA_TXN_VERSION. The default list:
#   3.9.2      the last 3.x line (transaction.version 0: no KIP-890 part 2)
#   4.0.2      the first 4.x, the first with transaction.version 2
#   4.2.2      checks transaction markers strictly (KIP-1228)
#   4.3.2      rotates the producer id on the fence path (KAFKA-20090)
#   4.4.0      the release the main suite runs on
#   4.4.0:tv1  4.4 formatted with transaction.version=1
# (the newest patch release of each line on Maven Central, 2026-12-07).
#
# Each configuration runs one single-node broker (scripts/kafka-start.sh, with
# its request log at DEBUG) and, against it, without the race detector:
#   TestKafkaNegotiatedVersions      every request the library sends: the broker's
#                                    range and the negotiated version (krabka-api lines)
#   TestKafkaTransportConformanceKafka  the transport's conformance suite
#   TestKafkaAPIKafka                the specification's answers over KafkaTransport
#                                    (SpecDefaultsWriteTheTwoKinds, SpecRestartCostsOneEpoch, ...)
#   TestKafkaTransportKafka, TestKafkaLeadershipKafka, TestKafkaLivenessTimeoutAbortIsNoFence,
#   TestKafkaSharedClientKafka, TestKafkaLeadershipACL
#                                    fencing, epochs, the KIP-890 cap, interop with the
#                                    caller's franz-go client, ACLs over SASL/SCRAM
#   kafkawire: TestKafkaRivalMinted, TestKafkaAbandonedMintIsTakenByTheNextMint,
#   TestMintUnlessMovedStopsAfterARivalsMint, TestKafkaImplicitAddPartitions,
#   TestKafkaConcurrentMintsShareTheCoordinatorLookups
#                                    mints, rivals, Produce v12 (by the advertised range)
#   cmd/krabka-coord TestE2EKafka    the CLI end to end (elect, fence, run, SASL, demo)
# The 3-node cluster tests stay on the main suite's 4.4 cluster.
# The broker is ready when its transaction coordinator answers (KRABKA_KAFKA_WAIT_TXN=1).
# Then it reads the broker's request log back: every API key of the library's
# list must have been sent by the tests (else the subset does not cover it);
# SaslHandshake and SaslAuthenticate never reach that log, and the passing
# SCRAM test (TestKafkaLeadershipACL) covers them.
#
# To stay fast on two cores: the jars of every release are resolved in the
# background from the start, the test binaries are compiled once, and the
# next configuration's broker starts (on the other port slot) while the tests
# of the current one run.
#
# Output: per configuration a line
#   matrix: kafka 4.0.2 tv=2: PASS in 83 s (broker ready 9 s ahead)
# its negotiated versions, and a summary table at the end; every log in
# $KRABKA_MATRIX_OUT (default: a new temporary directory, printed). Exit 1 when
# any configuration fails.
#
# Environment:
#   KRABKA_MATRIX            the configurations (default above); "none" runs nothing
#   KRABKA_MATRIX_BASE_PORT  first port of slot 0 (default 19300; slot 1 is +10; each slot
#                            takes PLAINTEXT, SASL_PLAINTEXT and CONTROLLER: base, +1, +2)
#   KRABKA_MATRIX_DIR        prefix of the brokers' run dirs (default /tmp/krabka-matrix;
#                            slot N runs in $KRABKA_MATRIX_DIR-N)
#   KRABKA_MATRIX_OUT        where the logs go
#   KRABKA_MATRIX_TIMEOUT    go test -timeout of each package run (default 10m)
#   KRABKA_CACHE_DIR         as for kafka-start.sh (jars of each release)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

default_matrix="3.9.2 4.0.2 4.2.2 4.3.2 4.4.0 4.4.0:tv1"
if (($# > 0)); then configs=("$@"); else read -r -a configs <<<"${KRABKA_MATRIX:-$default_matrix}"; fi
if [[ "${configs[*]}" == none ]]; then
  echo "matrix: KRABKA_MATRIX=none: no broker matrix" >&2
  exit 0
fi
base_port="${KRABKA_MATRIX_BASE_PORT:-19300}"
dir_prefix="${KRABKA_MATRIX_DIR:-/tmp/krabka-matrix}"
timeout="${KRABKA_MATRIX_TIMEOUT:-10m}"
out="${KRABKA_MATRIX_OUT:-$(mktemp -d /tmp/krabka-matrix-out.XXXXXX)}"
mkdir -p "$out"
export CI="${CI:-true}"
# Nothing of the matrix may reach the main suite's cluster.
unset KRABKA_KAFKA_CLUSTER_BROKERS

log() { printf 'matrix: %s\n' "$*" >&2; }

# config_version CONFIG, config_tv CONFIG: the release, and the
# transaction.version to format with ("" for the release's default).
config_version() { echo "${1%%:*}"; }
config_tv() {
  case "$1" in
    *:tv[0-9]) echo "${1##*:tv}" ;;
    *:*) log "unknown configuration $1 (want VERSION or VERSION:tvN)"; exit 2 ;;
    *) echo "" ;;
  esac
}
for c in "${configs[@]}"; do config_tv "$c" >/dev/null; done

# slot_env SLOT CONFIG: the environment of kafka-start.sh / kafka-stop.sh for
# the broker of CONFIG in port slot SLOT.
slot_env() {
  local p=$((base_port + 10 * $1))
  printf '%s\n' "KRABKA_KAFKA_VERSION=$(config_version "$2")" "KRABKA_KAFKA_TXN_VERSION=$(config_tv "$2")" \
    "KRABKA_KAFKA_DIR=$dir_prefix-$1" "KRABKA_KAFKA_PORT=$p" "KRABKA_KAFKA_SASL_PORT=$((p + 1))" \
    "KRABKA_KAFKA_CONTROLLER_PORT=$((p + 2))" "KRABKA_KAFKA_REQUEST_LOG=DEBUG" "KRABKA_KAFKA_WAIT_TXN=1" "KRABKA_KAFKA_HEAP=-Xms256m -Xmx640m"
}
in_slot() { # SLOT CONFIG COMMAND...
  local slot=$1 config=$2; shift 2
  local envs
  mapfile -t envs < <(slot_env "$slot" "$config")
  env "${envs[@]}" "$@"
}

stop_slot() { # SLOT: stop the matrix broker of SLOT, if one runs (only ours: kafka-stop.sh checks the pid's command line)
  in_slot "$1" "${configs[0]}" scripts/kafka-stop.sh >>"$out/stop.log" 2>&1 || true
}
pids_to_reap=()
cleanup() {
  local p
  for p in "${pids_to_reap[@]}"; do kill "$p" 2>/dev/null || true; done
  stop_slot 0
  stop_slot 1
}
trap cleanup EXIT

t_start=$SECONDS

# 1. The jars of every release, one Maven at a time, in the background.
versions=()
for c in "${configs[@]}"; do
  v=$(config_version "$c")
  [[ " ${versions[*]} " == *" $v "* ]] || versions+=("$v")
done
(
  for v in "${versions[@]}"; do
    # The version before kafka-env.sh: it derives the jar directory from it.
    if (export KRABKA_KAFKA_VERSION=$v && source scripts/kafka-env.sh && krabka_kafka_ensure_libs) \
        >"$out/resolve-$v.log" 2>&1; then
      : >"$out/resolved-$v"
    else
      : >"$out/unresolved-$v"
    fi
  done
) &
resolver=$!
pids_to_reap+=("$resolver")

# 2. The test binaries, once (while the jars resolve).
log "compiling the test binaries into $out/bin"
mkdir -p "$out/bin"
go test -c -o "$out/bin/coordination.test" ./coordination
go test -c -o "$out/bin/kafkawire.test" ./coordination/internal/kafkawire
(cd cmd/krabka-coord && go test -c -o "$out/bin/krabka-coord.test" .)

wait_resolved() { # VERSION
  while [[ ! -e "$out/resolved-$1" && ! -e "$out/unresolved-$1" ]]; do sleep 1; done
  [[ -e "$out/resolved-$1" ]]
}

# start_broker SLOT CONFIG: resolve-wait, then start; writes $out/<config>.start
# (the KEY=value lines) or $out/<config>.start-failed.
start_broker() {
  local slot=$1 config=$2 name=${2//:/-}
  if ! wait_resolved "$(config_version "$config")"; then
    log "the jars of Kafka $(config_version "$config") did not resolve: $out/resolve-$(config_version "$config").log"
    : >"$out/$name.start-failed"
    return
  fi
  if in_slot "$slot" "$config" scripts/kafka-start.sh >"$out/$name.start.tmp" 2>"$out/$name.start.log"; then
    mv "$out/$name.start.tmp" "$out/$name.start"
  else
    : >"$out/$name.start-failed"
  fi
}

wait_started() { # NAME: true when the start succeeded
  while [[ ! -e "$out/$1.start" && ! -e "$out/$1.start-failed" ]]; do sleep 0.5; done
  [[ -e "$out/$1.start" ]]
}

coord_tests='^(TestKafkaTransportConformanceKafka|TestKafkaAPIKafka|TestKafkaTransportKafka|TestKafkaLeadershipKafka|TestKafkaLivenessTimeoutAbortIsNoFence|TestKafkaSharedClientKafka|TestKafkaLeadershipACL|TestPreflightKafka)$'
wire_tests='^(TestKafkaNegotiatedVersions|TestKafkaRivalMinted|TestKafkaAbandonedMintIsTakenByTheNextMint|TestMintUnlessMovedStopsAfterARivalsMint|TestKafkaImplicitAddPartitions|TestKafkaConcurrentMintsShareTheCoordinatorLookups|TestCheckVersionsPassesTheBrokers)$'
e2e_tests='^(TestE2EKafka|TestDoctorACL)$'

# run_tests NAME: the subset against the broker of $KRABKA_KAFKA_BROKERS; the
# outcome of each package in $out/NAME.<pkg>.rc.
run_tests() {
  local name=$1 rc
  for pkg in kafkawire:coordination/internal/kafkawire:"$wire_tests" \
             coordination:coordination:"$coord_tests" \
             krabka-coord:cmd/krabka-coord:"$e2e_tests"; do
    IFS=: read -r bin dir pattern <<<"$pkg"
    rc=0
    (cd "$dir" && "$out/bin/$bin.test" -test.count=1 -test.v -test.timeout "$timeout" -test.run "$pattern") \
      >"$out/$name.$bin.log" 2>&1 || rc=$?
    echo "$rc" >"$out/$name.$bin.rc"
  done
}

# request_coverage NAME SLOT: the API keys (and versions) the tests' franz-go
# clients sent, from the broker's request log, against the library's list.
request_coverage() {
  local name=$1 slot=$2 k missing=()
  grep -oE '"requestApiKey":[0-9]+,"requestApiVersion":[0-9]+,"correlationId":[0-9]+,"clientId":"kgo"' \
    "$dir_prefix-$slot/broker.log" 2>/dev/null |
    sed -E 's/"requestApiKey":([0-9]+),"requestApiVersion":([0-9]+).*/\1 \2/' | sort -u | sort -k1,1n -k2,2n >"$out/$name.sent" || true
  for k in $(grep -oE 'krabka-api key=[0-9]+' "$out/$name.kafkawire.log" | cut -d= -f2); do
    case $k in
      17|36)
        # SaslHandshake and SaslAuthenticate are answered by the listener's
        # authenticator, before the request channel and its log: a passing
        # test that connects over SCRAM-SHA-256 covers them.
        grep -q -- '--- PASS: TestKafkaLeadershipACL ' "$out/$name.coordination.log" || missing+=("$k") ;;
      *) grep -q "^$k " "$out/$name.sent" || missing+=("$k") ;;
    esac
  done
  printf '%s\n' "${missing[@]}" >"$out/$name.uncovered"
  [[ ${#missing[@]} -eq 0 ]]
}

results=()
overall=0
slot=0
start_broker 0 "${configs[0]}" &
pids_to_reap+=($!)
for i in "${!configs[@]}"; do
  config=${configs[$i]}
  name=${config//:/-}
  t0=$SECONDS
  ok=1
  if ! wait_started "$name"; then
    log "kafka $config: the broker did not start: $out/$name.start.log"
    tail -n 20 "$out/$name.start.log" >&2 || true
    ok=0
  fi
  waited=$((SECONDS - t0))
  # The next configuration's broker starts now, in the other slot.
  if ((i + 1 < ${#configs[@]})); then
    start_broker $((1 - slot)) "${configs[$((i + 1))]}" &
    pids_to_reap+=($!)
  fi
  verdict=FAIL detail=""
  tv="?"
  if ((ok)); then
    # shellcheck disable=SC1090
    eval "$(cat "$out/$name.start")"
    export KRABKA_KAFKA_BROKERS KRABKA_KAFKA_SASL_BROKERS
    log "kafka $config: broker at $KRABKA_KAFKA_BROKERS (SASL $KRABKA_KAFKA_SASL_BROKERS); running the subset"
    run_tests "$name"
    tv=$(grep -oE 'krabka-features transaction.version=[0-9]+' "$out/$name.kafkawire.log" | head -n1 | cut -d= -f2)
    tv=${tv:-?}
    failed=()
    for bin in kafkawire coordination krabka-coord; do
      [[ "$(cat "$out/$name.$bin.rc")" == 0 ]] || failed+=("$bin")
    done
    if ! request_coverage "$name" "$slot"; then
      failed+=("coverage(keys $(tr '\n' ' ' <"$out/$name.uncovered" | sed 's/ $//') never sent)")
    fi
    if ((${#failed[@]} == 0)); then verdict=PASS; else detail=" (failed: ${failed[*]})"; fi
  fi
  if [[ $verdict != PASS && -f "$dir_prefix-$slot/broker.log" ]]; then
    # The broker's log goes with the failure (kafka-stop.sh removes the run dir).
    gzip -c "$dir_prefix-$slot/broker.log" >"$out/$name.broker.log.gz" || true
  fi
  stop_slot "$slot"
  secs=$((SECONDS - t0))
  [[ $verdict == PASS ]] || overall=1
  line="kafka $config tv=$tv: $verdict in $secs s (waited $waited s for the broker)$detail"
  results+=("$line")
  log "$line"
  if [[ -f "$out/$name.kafkawire.log" ]]; then
    negotiated=$(grep -oE 'krabka-api key=[0-9]+ name=[A-Za-z]+ library=[0-9-]+ broker=[0-9a-z-]+ negotiated=[0-9a-z]+' "$out/$name.kafkawire.log" |
      sed -E 's/krabka-api key=[0-9]+ name=([A-Za-z]+) .*broker=([0-9a-z-]+) negotiated=([0-9a-z]+)/\1 v\3 (broker \2)/' | paste -sd, - | sed 's/,/, /g')
    log "  negotiated: $negotiated"
    echo "$config $negotiated" >>"$out/negotiated.txt"
  fi
  if [[ -s "$out/$name.sent" ]]; then
    # Every version of every key that a franz-go client of the tests sent (the
    # library's clients and the tests' own, e.g. the uncapped control client).
    log "  seen in the request log: $(awk '{v[$1]=v[$1] (v[$1] == "" ? "" : ",") $2} END {for (k in v) print k, v[k]}' "$out/$name.sent" |
      sort -n | awk '{printf "%s%s v%s", (NR > 1 ? "; " : ""), "key " $1, $2}')"
  fi
  if [[ $verdict != PASS ]]; then
    # Each failed test with the lines it logged (the last 6 of each), and the
    # broker's own exceptions, if it had any.
    for bin in kafkawire coordination krabka-coord; do
      [[ -f "$out/$name.$bin.log" ]] || continue
      awk '/^=== (RUN|CONT|PAUSE)/ {cur = $3; next}
           /^[[:space:]]+[^[:space:]]+_test\.go:[0-9]+:/ {n[cur]++; line[cur, n[cur]] = $0; next}
           /^[[:space:]]*--- FAIL: / {t = $3; print "  " $0
             for (i = (n[t] > 6 ? n[t] - 5 : 1); i <= n[t]; i++) print "    " substr(line[t, i], 1, 400)}' \
        "$out/$name.$bin.log" >&2 || true
    done
    if [[ -f "$out/$name.broker.log.gz" ]]; then
      zgrep -A1 'Unexpected error handling request' "$out/$name.broker.log.gz" | grep -v '^--' |
        sed -E 's/ with context RequestContext.*//' | cut -c1-300 | head -n 6 | sed 's/^/  broker: /' >&2 || true
    fi
  fi
  slot=$((1 - slot))
done
wait "$resolver" 2>/dev/null || true

{
  echo "matrix: summary ($((SECONDS - t_start)) s in all; logs in $out)"
  for r in "${results[@]}"; do echo "  $r"; done
} | tee "$out/summary.txt" >&2
exit "$overall"
