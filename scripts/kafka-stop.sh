#!/usr/bin/env bash
# scripts/kafka-stop.sh — stop the broker started by scripts/kafka-start.sh.
#
# Usage:
#   scripts/kafka-stop.sh          SIGTERM (controlled shutdown), wait up to
#                                  $KRABKA_KAFKA_STOP_TIMEOUT s (default 30), then
#                                  SIGKILL; then remove $KRABKA_KAFKA_DIR (data,
#                                  config, logs) unless KRABKA_KEEP_DATA=1.
#   scripts/kafka-stop.sh --kill   SIGKILL at once (a crash, for fault tests) and
#                                  always keep the data dir, so that
#                                  `scripts/kafka-start.sh --restart-keep-data`
#                                  brings the same cluster back.
#
# Only the pid in $KRABKA_KAFKA_DIR/broker.pid is signalled, and only when that
# process really is our kafka.Kafka. Only a directory carrying the marker file that
# kafka-start.sh writes is removed. Stopping when nothing runs is not an error.
set -euo pipefail

kill_now=0
case "${1:-}" in
  "") ;;
  --kill) kill_now=1 ;;
  -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 0 ;;
  *) echo "usage: $0 [--kill]" >&2; exit 2 ;;
esac

# shellcheck source=scripts/kafka-env.sh
source "$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/kafka-env.sh"
STOP_TIMEOUT="${KRABKA_KAFKA_STOP_TIMEOUT:-30}"


if pid="$(krabka_kafka_pid)"; then
  if ((kill_now)); then
    krabka_log "SIGKILL broker (pid $pid)"
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone "$pid" 10 || krabka_log "pid $pid still present after SIGKILL"
  else
    krabka_log "SIGTERM broker (pid $pid), waiting up to ${STOP_TIMEOUT}s"
    t0=$SECONDS
    kill -TERM "$pid" 2>/dev/null || true
    if wait_gone "$pid" "$STOP_TIMEOUT"; then
      krabka_log "broker stopped after $((SECONDS - t0)) s"
    else
      krabka_log "broker still alive after ${STOP_TIMEOUT}s: SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      wait_gone "$pid" 10 || krabka_log "pid $pid still present after SIGKILL"
    fi
  fi
else
  krabka_log "no broker running (pid file: $KRABKA_KAFKA_PIDFILE)"
fi
rm -f "$KRABKA_KAFKA_PIDFILE"

if ((kill_now)) || [[ "${KRABKA_KEEP_DATA:-0}" == 1 ]]; then
  [[ -d $KRABKA_KAFKA_DIR ]] && krabka_log "kept $KRABKA_KAFKA_DIR"
elif [[ -f "$KRABKA_KAFKA_MARKER" ]]; then
  rm -rf "$KRABKA_KAFKA_DIR"
  krabka_log "removed $KRABKA_KAFKA_DIR"
fi
exit 0
