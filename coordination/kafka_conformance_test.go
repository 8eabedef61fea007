package coordination_test

import (
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// The transport conformance suite of package coordinationtest, run on
// KafkaTransport over kfake and over the real broker. The in-memory
// transport runs it in package coordinationtest.

func TestKafkaTransportConformanceFake(t *testing.T) { kcConformance(t, kafkatest.Fake(t)) }

func TestKafkaTransportConformanceKafka(t *testing.T) { kcConformance(t, kafkatest.Kafka(t)) }

func kcConformance(t *testing.T, c *kafkatest.Cluster) {
	e := klNewEnv(t, c, klConfig(t, 6*time.Second, 2*time.Second, time.Second))
	coordinationtest.TestTransport(t, coordinationtest.ConformanceTarget{
		NewTransport: func(t *testing.T) coordination.Transport { return e.transport(t) },
		Options:      e.options,
		GuardedTopic: c.CreateTopic(t, "coord-conformance-commands", 1, nil),
	})
}
