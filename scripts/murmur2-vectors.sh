#!/usr/bin/env bash
# scripts/murmur2-vectors.sh — print Kafka's own murmur2 / partition-for-key values
# as JSON (stdout), computed by kafka-clients' Utils.murmur2 and Utils.toPositive.
#
# Usage:
#   scripts/murmur2-vectors.sh controller archiver node-1     # role names as args
#   printf 'controller\né-rôle\n' | scripts/murmur2-vectors.sh # or one per line on stdin
#   scripts/murmur2-vectors.sh --kafka-test-vectors            # Kafka's UtilsTest cases
#
# Output: see scripts/murmur2/Murmur2Vectors.java. Role names given as arguments
# are handed to Java on stdin as UTF-8, so non-ASCII names are safe whatever the
# locale. Jars come from the same cache as scripts/kafka-start.sh (resolved with
# Maven on first use); logs go to stderr.
set -euo pipefail
# shellcheck source=scripts/kafka-env.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kafka-env.sh"
krabka_kafka_ensure_libs

prog="$KRABKA_SCRIPTS_DIR/murmur2/Murmur2Vectors.java"
run() { java -cp "$KRABKA_KAFKA_LIBS/*" "$prog" "$@"; }

if [[ ${1:-} == --kafka-test-vectors ]]; then
  run --kafka-test-vectors
elif (($#)); then
  printf '%s\n' "$@" | run
else
  run
fi
