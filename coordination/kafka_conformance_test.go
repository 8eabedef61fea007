package coordination_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

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
	target := coordinationtest.ConformanceTarget{
		NewTransport: func(t *testing.T) coordination.Transport { return e.transport(t) },
		Options:      e.options,
		GuardedTopic: c.CreateTopic(t, "coord-conformance-commands", 1, nil),
	}
	if c.Fake != nil {
		target.StallNextMint = func(_ *testing.T, _ coordination.Transport, role coordination.Role) { kcBusyOnce(c, role) }
		target.LoseNextMintReply = func(_ *testing.T, _ coordination.Transport, role coordination.Role) { kcLateOnce(c, role) }
	}
	coordinationtest.TestTransport(t, target)
}

// kcBusyOnce makes kfake answer the next InitProducerId of the role's
// transactional id with CONCURRENT_TRANSACTIONS (a coordinator that still
// aborts the deposed holder's transaction), once; the resend goes to the
// cluster. The suite's challenger is the only transport that mints the
// role then, so the answer is its own.
func kcBusyOnce(c *kafkatest.Cluster, role coordination.Role) {
	c.Fake.ControlKey(kmsg.InitProducerID.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		init, ok := req.(*kmsg.InitProducerIDRequest)
		if !ok || init.TransactionalID == nil || *init.TransactionalID != role.String() {
			c.Fake.KeepControl()
			return nil, nil, false
		}
		resp := init.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode = kerr.ConcurrentTransactions.Code
		return resp, nil, true
	})
}

// kcLateOnce makes kfake hold the next InitProducerId of the role's
// transactional id for 2 s, then serve it: the suite's caller gave up
// after a second, and the answer reaches the transport late.
func kcLateOnce(c *kafkatest.Cluster, role coordination.Role) {
	c.Fake.ControlKey(kmsg.InitProducerID.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		init, ok := req.(*kmsg.InitProducerIDRequest)
		if !ok || init.TransactionalID == nil || *init.TransactionalID != role.String() {
			c.Fake.KeepControl()
			return nil, nil, false
		}
		c.Fake.DropControl()
		c.Fake.SleepControl(func() { time.Sleep(2 * time.Second) })
		return nil, nil, false
	})
}
