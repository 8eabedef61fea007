package kafkawire

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// TestKafkaExpectedPairMintsOnePairTwice documents why a mint sends no
// expected pair (KIP-360's ProducerId and ProducerEpoch of InitProducerId,
// which would make a duplicate of a mint a retry instead of a second bump;
// mint_copy.go). Two challengers that saw the same pair of the holder both
// send InitProducerId with that pair as the expected one. The coordinator
// bumps the epoch for the first, and takes the second, whose expected epoch
// is now its "last epoch", for a retry of the first: it answers the same
// pair, unbumped. Two members would then both hold one fencing token. On
// the real broker: if the broker ever bumps for the second, or fences it,
// this test fails, and the expected pair may be worth a look again.
func TestKafkaExpectedPairMintsOnePairTwice(t *testing.T) {
	c := kafkatest.Kafka(t)
	txnID := kafkatest.TopicName("expected-pair")
	c.LockTransactionalIDs(t, txnID)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	holder, first, second := c.Client(t), c.Client(t), c.Client(t)

	mint := func(client *kgo.Client, who string, expected Producer) Producer {
		t.Helper()
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &txnID
		req.TransactionTimeoutMillis = 10000
		req.ProducerID, req.ProducerEpoch = expected.ID, expected.Epoch
		for {
			resp, err := req.RequestWith(ctx, client)
			if err != nil {
				t.Fatalf("the InitProducerId of %s: %v", who, err)
			}
			if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
				if kerr.IsRetriable(err) && ctx.Err() == nil {
					time.Sleep(100 * time.Millisecond)
					continue
				}
				t.Fatalf("the InitProducerId of %s (expected pair %v): %v", who, expected, err)
			}
			return Producer{ID: resp.ProducerID, Epoch: resp.ProducerEpoch}
		}
	}
	held := mint(holder, "the holder", Producer{ID: -1, Epoch: -1})
	a := mint(first, "the first challenger", held)
	b := mint(second, "the second challenger", held)
	t.Logf("the holder's pair %v; the first challenger got %v, the second %v", held, a, b)
	if a.ID != held.ID || a.Epoch != held.Epoch+1 {
		t.Fatalf("the first challenger got %v over the holder's %v; want one bump", a, held)
	}
	if b != a {
		t.Fatalf("the second challenger, with the same expected pair %v, got %v, not the first one's %v: the broker no longer mints one pair twice", held, b, a)
	}
}
