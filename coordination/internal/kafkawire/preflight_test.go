package kafkawire

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// TestProbeTxnWriteReadsThePartitionAsked: ProbeTxnWrite read the code of
// the first partition of the AddPartitionsToTxn answer, whichever it was
// (a loop that always returned on its first lap). It reads the partition
// it asked for: an answer that lists another partition first, without an
// error, and the one asked for with TOPIC_AUTHORIZATION_FAILED is a
// refused WRITE on the topic; an answer without it says so.
func TestProbeTxnWriteReadsThePartitionAsked(t *testing.T) {
	c := kafkatest.Fake(t)
	w := unansweredWire(t, c)
	asked := Partition{Topic: kafkatest.TopicName("probe-txn-write"), Partition: 3}
	answer := func(topics ...kmsg.AddPartitionsToTxnResponseTopic) {
		c.Fake.ControlKey(kmsg.AddPartitionsToTxn.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
			resp := kreq.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
			resp.Version = kreq.GetVersion()
			resp.Topics = topics
			return resp, nil, true
		})
	}
	topic := func(name string, codes map[int32]int16, order ...int32) kmsg.AddPartitionsToTxnResponseTopic {
		rt := kmsg.NewAddPartitionsToTxnResponseTopic()
		rt.Topic = name
		for _, p := range order {
			tp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			tp.Partition, tp.ErrorCode = p, codes[p]
			rt.Partitions = append(rt.Partitions, tp)
		}
		return rt
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	answer(topic("other", map[int32]int16{3: 0}, 3),
		topic(asked.Topic, map[int32]int16{0: 0, 3: kerr.TopicAuthorizationFailed.Code}, 0, 3))
	txn, onTopic := w.ProbeTxnWrite(ctx, 0, "probe-txn-write", asked)
	if txn.Denied || txn.Err != nil {
		t.Errorf("the transactional id's probe: %+v, want authorized", txn)
	}
	if !onTopic.Denied || !errors.Is(onTopic.Err, kerr.TopicAuthorizationFailed) {
		t.Errorf("the topic's probe: %+v, want denied with TOPIC_AUTHORIZATION_FAILED (of partition %d, not of the partitions before it)", onTopic, asked.Partition)
	}

	answer(topic(asked.Topic, map[int32]int16{0: 0}, 0))
	txn, onTopic = w.ProbeTxnWrite(ctx, 0, "probe-txn-write", asked)
	for name, p := range map[string]Probe{"transactional id": txn, "topic": onTopic} {
		if p.Denied || p.Err == nil || !strings.Contains(p.Err.Error(), "omits partition 3") {
			t.Errorf("the %s's probe of an answer without partition 3: %+v, want the error that it omits it", name, p)
		}
	}
}
