package kafkatest

import (
	"os"
	"strings"
	"testing"
)

// RequireOrSkip ends a test that cannot run here because something that
// it needs is missing: a feature of the broker (the SASL listener of
// [SASLBrokers]) or of the machine (a pseudo-terminal). reason says what
// is missing, and how to get it. Outside CI it skips the test; under CI
// (the environment variable CI is not empty) it fails it, as [Kafka] and
// [KafkaCluster] do without their brokers: CI must never pass by skipping
// a test. A test calls it where it finds the feature missing.
func RequireOrSkip(t testing.TB, reason string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("kafkatest: CI is set, and CI never skips a test, but this one cannot run: %s", reason)
	}
	t.Skipf("kafkatest: skipped: %s", reason)
}

// SASLBrokers returns the seed brokers of the real broker's SASL_PLAINTEXT
// listener, KRABKA_KAFKA_SASL_BROKERS (SCRAM-SHA-256, with ACLs enforced).
// Without the variable it ends the test with [RequireOrSkip].
func SASLBrokers(t testing.TB) []string {
	t.Helper()
	var brokers []string
	for b := range strings.SplitSeq(os.Getenv(EnvSASLBrokers), ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	if len(brokers) == 0 {
		RequireOrSkip(t, EnvSASLBrokers+" is not set; "+startHint)
	}
	return brokers
}
