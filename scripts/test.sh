#!/usr/bin/env bash
# scripts/test.sh: the project's test command, the one the README gives and
# .ci/run calls.
#
# It installs and starts what the tests need, runs them, and stops it again:
#   1. a real Apache Kafka 4.4 broker (single-node KRaft, loopback only),
#      resolved from Maven Central by scripts/kafka-start.sh (jars cached in
#      ~/.cache/krabka-coord), and exported as KRABKA_KAFKA_BROKERS;
#   2. murmur2 vectors from Kafka's own Java Utils class, exported as
#      KRABKA_JAVA_MURMUR2, which the partition test checks the Go rule on;
#   3. gofmt, go vet, and go test -race over every package: the kfake suite,
#      the real-broker suite, the examples, and the seed corpus of the fuzzers.
# Needs: go, java (17+), mvn. Set KRABKA_KEEP_BROKER=1 to leave the broker up.
set -euo pipefail
cd "$(dirname "$0")/.."

for tool in go java mvn; do
  command -v "$tool" >/dev/null || { echo "test.sh: $tool is not installed; install it and run again" >&2; exit 1; }
done

started=$(scripts/kafka-start.sh)
eval "$started"
export KRABKA_KAFKA_BROKERS KRABKA_KAFKA_SASL_BROKERS
if [ "${KRABKA_KEEP_BROKER:-}" != 1 ]; then
  trap 'scripts/kafka-stop.sh >&2 || true' EXIT
fi
echo "test.sh: Kafka broker at $KRABKA_KAFKA_BROKERS (SASL at $KRABKA_KAFKA_SASL_BROKERS)" >&2

work=$(mktemp -d)
scripts/murmur2-vectors.sh < coordination/testdata/partition-roles.txt > "$work/java-murmur2.json"
export KRABKA_JAVA_MURMUR2="$work/java-murmur2.json"

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "test.sh: gofmt would change: $unformatted" >&2
  exit 1
fi
# Every package of every module of the workspace (go.work): the library
# module, and the modules of the CLI, the fault harness and the bench.
packages=github.com/krabka-io/krabka-streams-go/...
go vet "$packages"
go test -race -count=1 -timeout 20m "$packages"
# The deterministic simulation at full size: 10 000 seeds, without the race
# detector (the -race run above plays 300 of them).
go test -count=1 -timeout 10m -run '^TestSimulation$' ./coordination -sim.seeds=10000
