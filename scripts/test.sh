#!/usr/bin/env bash
# scripts/test.sh: the project's test command, the one the README gives and
# .ci/run calls.
#
# It installs and starts what the tests need, runs them, and stops it again:
#   1. a real Apache Kafka 4.4 broker (single-node KRaft, loopback only),
#      resolved from Maven Central by scripts/kafka-start.sh (jars cached in
#      ~/.cache/krabka-coord), and exported as KRABKA_KAFKA_BROKERS, and a
#      3-node KRaft cluster (replication factor 3, min.insync.replicas 2,
#      Kafka's default failure detection) started by scripts/kafka-cluster.sh
#      at the same time, exported as KRABKA_KAFKA_CLUSTER_BROKERS;
#   2. murmur2 vectors from Kafka's own Java Utils class, exported as
#      KRABKA_JAVA_MURMUR2, which the partition test checks the Go rule on;
#   3. gofmt, go vet, golangci-lint (tools/go.mod pins it), and go test -race
#      over every package: the kfake suite, the real-broker suite, the
#      examples, and the seed corpus of the fuzzers;
#   4. the broker matrix (scripts/matrix.sh): the Kafka tests again on one
#      broker each of Kafka 3.9, 4.0, 4.2, 4.3, 4.4 and 4.4 at
#      transaction.version=1.
# Each step runs even when an earlier one failed; a summary of them all ends
# the run, and the exit is 1 if any failed.
# Needs: go, java (17+), mvn. Set KRABKA_KEEP_BROKER=1 to leave the broker and
# the cluster up (a later run reuses both: the start scripts are idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."

# This command starts everything the tests need, so no test may skip for
# want of it: under CI (set here unless the caller set it) a test that finds
# its broker, cluster, SASL listener or murmur2 vectors missing fails.
export CI="${CI:-true}"

for tool in go java mvn; do
  command -v "$tool" >/dev/null || { echo "test.sh: $tool is not installed; install it and run again" >&2; exit 1; }
done

work=$(mktemp -d)
if [ "${KRABKA_KEEP_BROKER:-}" != 1 ]; then
  trap '[ -n "${cluster_pid:-}" ] && kill "$cluster_pid" 2>/dev/null; scripts/kafka-cluster.sh stop >&2 || true; scripts/kafka-stop.sh >&2 || true; rm -rf "$work"' EXIT
else
  trap 'rm -rf "$work"' EXIT
fi
# The jars first (once), so that the two starts do not both resolve them.
(source scripts/kafka-env.sh && krabka_kafka_ensure_libs)
# The cluster starts in the background while the single broker starts.
cluster_t0=$SECONDS
scripts/kafka-cluster.sh start > "$work/cluster.env" &
cluster_pid=$!
started=$(scripts/kafka-start.sh)
eval "$started"
export KRABKA_KAFKA_BROKERS KRABKA_KAFKA_SASL_BROKERS
echo "test.sh: Kafka broker at $KRABKA_KAFKA_BROKERS (SASL at $KRABKA_KAFKA_SASL_BROKERS)" >&2
cluster_rc=0
wait "$cluster_pid" || cluster_rc=$?
cluster_pid=
if [ "$cluster_rc" != 0 ]; then
  echo "test.sh: the 3-node cluster did not start (logs: ${KRABKA_CLUSTER_DIR:-/tmp/krabka-cluster}/node-*/node.log)" >&2
  exit 1
fi
eval "$(cat "$work/cluster.env")"
export KRABKA_KAFKA_CLUSTER_BROKERS
echo "test.sh: 3-node Kafka cluster at $KRABKA_KAFKA_CLUSTER_BROKERS (ready $((SECONDS - cluster_t0)) s after its start)" >&2

scripts/murmur2-vectors.sh < coordination/testdata/partition-roles.txt > "$work/java-murmur2.json"
export KRABKA_JAVA_MURMUR2="$work/java-murmur2.json"

# The checks and the tests: each step runs whatever an earlier one found,
# so that one failing package does not hide the results of the others; the
# summary at the end lists every step, and the exit is non-zero if one failed.
steps=()
ran=0
failed=0
# step NAME COMMAND [ARG...]: runs one step, its output to the terminal and
# to a log, and records its result and the FAIL lines of go test.
step() {
  local name=$1 log="$work/step-$ran.log" t0=$SECONDS rc=0
  shift
  ran=$((ran + 1))
  echo "test.sh: == $name" >&2
  "$@" 2>&1 | tee "$log" || rc=$?
  if [ "$rc" = 0 ]; then
    steps+=("ok    $name ($((SECONDS - t0)) s)")
  else
    failed=$((failed + 1))
    steps+=("FAIL  $name ($((SECONDS - t0)) s, exit $rc)")
    while IFS= read -r line; do steps+=("        $line"); done < <(grep -E '^(FAIL|--- FAIL|panic:)' "$log" | head -n 40)
  fi
}
check_gofmt() {
  local unformatted
  unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
  if [ -n "$unformatted" ]; then
    echo "gofmt would change: $unformatted"
    return 1
  fi
}
step gofmt check_gofmt
# Every package of every module of the workspace (go.work): the library
# module, and the modules of the CLI, the fault harness and the bench.
packages=github.com/krabka-io/krabka-streams-go/...
step "go vet" go vet "$packages"
# golangci-lint (.golangci.yml: govet, staticcheck, errorlint, depguard (the
# layers' imports, docs/layout.md), gosec's G115
# integer-overflow conversions) over every module of the workspace, at the
# version that tools/go.mod pins: go tool builds it from the Go module proxy
# the first time (a few minutes), then from the build cache. The tools
# module stays outside go.work, so its dependencies never move the library's.
run_lint() {
  local lint
  lint=$(cd tools && GOWORK=off go tool -n golangci-lint) || return 1
  "$lint" run $(go list -m -f '{{.Dir}}/...' | sed "s|^$PWD|.|")
}
step golangci-lint run_lint
# The specification's conformance suite first, on its own line of the log: a
# change that alters an answer the specification promises fails here.
step "the specification's suite (TestSpec)" go test -count=1 -run '^TestSpec' ./coordination
step "go test -race, every package" go test -race -count=1 -timeout 20m "$packages"
# The deterministic simulation at full size: 10 000 seeds, without the race
# detector (the -race run above plays 300 of them); every other member runs
# over coordinationtest.Plain, the spec-only transport.
step "the simulation at 10 000 seeds" go test -count=1 -timeout 10m -run '^TestSimulation$' ./coordination -sim.seeds=10000
# Its second mode: every extension option on, over the in-memory cluster's
# whole ExtendedTransport, with stalled transactions and a state topic
# created again among the faults
# (about 15 s a 1000 seeds, as the first mode).
step "the extended simulation at 2000 seeds" go test -count=1 -timeout 10m -run '^TestSimulationExtended$' ./coordination -sim.seeds=2000
# The broker matrix: the Kafka tests on one broker of every release the
# library claims (3.9 to 4.4, and 4.4 at transaction.version=1), on ports and
# directories of their own (docs/compatibility.md). KRABKA_MATRIX=none leaves
# it out of a local run.
step "the broker matrix" scripts/matrix.sh

echo "test.sh: summary" >&2
printf '  %s\n' "${steps[@]}" >&2
if [ "$failed" != 0 ]; then
  echo "test.sh: $failed of $ran steps failed" >&2
  exit 1
fi
echo "test.sh: all $ran steps passed" >&2
