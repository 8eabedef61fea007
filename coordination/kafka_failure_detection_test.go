package coordination_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

func ExampleMinLeaseForFailureDetection() {
	// Kafka's default broker.session.timeout.ms and the default renew
	// interval of 10 s.
	fmt.Println(coordination.MinLeaseForFailureDetection(9*time.Second, 10*time.Second))
	// A cluster tuned to fence a silent broker after 3 s, renewing every
	// second.
	fmt.Println(coordination.MinLeaseForFailureDetection(3*time.Second, time.Second))
	// Output:
	// 21s
	// 6s
}

// TestKafkaShortLeaseWarning (issue 9, item 9): CheckStateTopic reads the
// broker's broker.session.timeout.ms (3000 on the test broker, see
// scripts/kafka-start.sh) and warns about a lease that cannot ride out a
// broker fault, and stays quiet about one that can. Kafka only: kfake
// reports no broker.session.timeout.ms.
func TestKafkaShortLeaseWarning(t *testing.T) {
	c := kafkatest.Kafka(t)
	transport := ktTransport(t, c)
	_, options := ktStateTopic(t, c, transport, 4)
	for _, tc := range []struct {
		lease, renew time.Duration
		warn         bool
	}{
		{3 * time.Second, time.Second, true},        // 3 s + 1 s + 2 s = 6 s > 3 s
		{6 * time.Second, 2 * time.Second, true},    // 3 s + 2 s + 2 s = 7 s > 6 s
		{6 * time.Second, time.Second, false},       // 6 s: just enough
		{30 * time.Second, 10 * time.Second, false}, // the defaults
	} {
		t.Run(fmt.Sprintf("lease=%v,renew=%v", tc.lease, tc.renew), func(t *testing.T) {
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			lease := klConfig(t, tc.lease, tc.renew, time.Second)
			check := append(options, coordination.WithLeaseConfig(lease), coordination.WithLogger(logger))
			if err := transport.CheckStateTopic(ktContext(t), check...); err != nil {
				t.Fatalf("CheckStateTopic: %v", err)
			}
			t.Logf("log: %s", logs.String())
			warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "broker_session_timeout=3s")
			if warned != tc.warn {
				t.Fatalf("a lease of %v renewed every %v on a cluster with a 3 s session timeout: warned = %t, want %t",
					tc.lease, tc.renew, warned, tc.warn)
			}
		})
	}
}
