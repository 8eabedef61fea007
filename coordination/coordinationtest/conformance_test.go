package coordinationtest_test

import (
	"testing"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// TestTransportConformance runs the conformance suite on the in-memory
// transport, the whole ExtendedTransport, and on the plain wrapper that
// hides the extensions (the specification's four interfaces only).
func TestTransportConformance(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	cluster.SetTopicPartitions(coordination.StateTopic, coordination.DefaultPartitions)
	lease, err := coordination.NewLeaseConfig(coordination.DefaultLeaseDuration, coordination.DefaultRenewInterval, coordination.DefaultChallengeStagger)
	if err != nil {
		t.Fatal(err)
	}
	cluster.SetLeaseConfig(lease)
	coordinationtest.TestTransport(t, coordinationtest.ConformanceTarget{
		NewTransport: func(t *testing.T) coordination.Transport { return cluster.Transport(t.Name()) },
		GuardedTopic: "commands",
	})
	t.Run("Plain", func(t *testing.T) {
		coordinationtest.TestTransport(t, coordinationtest.ConformanceTarget{
			NewTransport: func(t *testing.T) coordination.Transport { return coordinationtest.Plain(cluster.Transport(t.Name())) },
		})
	})
}
