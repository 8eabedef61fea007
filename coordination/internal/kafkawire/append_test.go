package kafkawire

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// fatalPlainMints answers the first n idempotent (plain, non-transactional)
// InitProducerId requests of the fake cluster with code, and lets every
// other one through. It returns the count of plain InitProducerId
// requests seen.
func fatalPlainMints(c *kafkatest.Cluster, n int32, code int16) *atomic.Int32 {
	var seen atomic.Int32
	c.Fake.ControlKey(kmsg.InitProducerID.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		req := kreq.(*kmsg.InitProducerIDRequest)
		if req.TransactionalID != nil {
			return nil, nil, false
		}
		if seen.Add(1) > n {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = code, -1, -1
		return resp, nil, true
	})
	return &seen
}

// endOffset returns the end offset of partition 0 of topic.
func endOffset(t *testing.T, c *kafkatest.Cluster, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := c.Admin(t).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, ok := ends.Lookup(topic, 0)
	if !ok || end.Err != nil {
		t.Fatalf("the end offset of %s-0: %v (found %v)", topic, end.Err, ok)
	}
	return end.Offset
}

// TestOneFatalAnswerToThePlainProducersMintIsNotForever: the plain
// producer's idempotent InitProducerId (its first Append, a registration)
// is answered once with a fatal code. franz-go keeps that error for the
// client's life (doInitProducerID: keep=true) and fails every later record
// with it; the wire replaces the producer, and since no record went out
// under the failed one, the same Append sends its record on the new one:
// every Append succeeds, each record once (TestKafkaEveryErrorCodeOfEveryRequest
// found it; docs/safety.md).
func TestOneFatalAnswerToThePlainProducersMintIsNotForever(t *testing.T) {
	for _, code := range []*kerr.Error{kerr.UnknownServerError, kerr.ProducerFenced} {
		t.Run(code.Message, func(t *testing.T) {
			c := kafkatest.Fake(t)
			w := unansweredWire(t, c)
			topic := c.CreateTopic(t, "coord-plain-mint", 1, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			seen := fatalPlainMints(c, 1, code.Code)
			record := Record{Partition: Partition{Topic: topic}, Value: []byte("registration")}
			for i := range 4 {
				if err := w.Append(ctx, record); err != nil {
					t.Fatalf("Append %d after one fatal answer (%v) to the plain producer's InitProducerId: %v", i+1, code, err)
				}
			}
			if n := seen.Load(); n != 2 {
				t.Errorf("%d plain InitProducerId requests, want 2 (the refused one, the new producer's)", n)
			}
			if end := endOffset(t, c, topic); end != 4 {
				t.Errorf("end offset %d after 4 appends, want 4: a record lost or sent twice", end)
			}
		})
	}
}

// TestInvalidTransactionTimeoutToThePlainProducersMintIsMisconfigured:
// INVALID_TRANSACTION_TIMEOUT to the plain producer's InitProducerId is a
// configuration that the broker refuses: the Append returns it as
// Misconfigured at once, without another try, and the next Append, on the
// new producer, succeeds.
func TestInvalidTransactionTimeoutToThePlainProducersMintIsMisconfigured(t *testing.T) {
	c := kafkatest.Fake(t)
	w := unansweredWire(t, c)
	topic := c.CreateTopic(t, "coord-plain-timeout", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := fatalPlainMints(c, 1, kerr.InvalidTransactionTimeout.Code)
	record := Record{Partition: Partition{Topic: topic}, Value: []byte("registration")}
	err := w.Append(ctx, record)
	if ClassOf(err) != Misconfigured || !errors.Is(err, kerr.InvalidTransactionTimeout) {
		t.Fatalf("the first Append: %v (class %v), want INVALID_TRANSACTION_TIMEOUT, misconfigured", err, ClassOf(err))
	}
	if n := seen.Load(); n != 1 {
		t.Fatalf("%d plain InitProducerId requests by the refused Append, want 1 (no retry)", n)
	}
	if err := w.Append(ctx, record); err != nil {
		t.Fatalf("the Append after the refusal: %v", err)
	}
	if end := endOffset(t, c, topic); end != 1 {
		t.Errorf("end offset %d, want 1", end)
	}
}

// TestConcurrentAppendsRebuildThePlainProducerOnce: appends in flight
// together when the producer's InitProducerId gets a fatal answer all see
// it; one builds the new producer, the others use it, and each record is
// appended once.
func TestConcurrentAppendsRebuildThePlainProducerOnce(t *testing.T) {
	c := kafkatest.Fake(t)
	w := unansweredWire(t, c)
	topic := c.CreateTopic(t, "coord-plain-concurrent", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := fatalPlainMints(c, 1, kerr.UnknownServerError.Code)
	const appends = 16
	var wg sync.WaitGroup
	errs := make([]error, appends)
	for i := range appends {
		wg.Go(func() {
			errs[i] = w.Append(ctx, Record{Partition: Partition{Topic: topic}, Value: []byte("registration")})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Append %d: %v", i, err)
		}
	}
	if n := seen.Load(); n != 2 {
		t.Errorf("%d plain InitProducerId requests, want 2: one rebuild", n)
	}
	if end := endOffset(t, c, topic); end != appends {
		t.Errorf("end offset %d after %d appends, want %d: a record lost or sent twice", end, appends, appends)
	}
}

// TestAnAlwaysFatalPlainMintEndsTheAppendAfterBoundedRebuilds: a broker
// that refuses every plain InitProducerId costs one Append at most
// MaxAppendRebuilds new producers; the Append then returns the code.
func TestAnAlwaysFatalPlainMintEndsTheAppendAfterBoundedRebuilds(t *testing.T) {
	c := kafkatest.Fake(t)
	w := unansweredWire(t, c)
	topic := c.CreateTopic(t, "coord-plain-always", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := fatalPlainMints(c, 1<<30, kerr.UnknownServerError.Code)
	err := w.Append(ctx, Record{Partition: Partition{Topic: topic}, Value: []byte("registration")})
	if !errors.Is(err, kerr.UnknownServerError) || ClassOf(err) != Refused {
		t.Fatalf("the Append: %v (class %v), want UNKNOWN_SERVER_ERROR, refused", err, ClassOf(err))
	}
	if n := seen.Load(); n != MaxAppendRebuilds {
		t.Errorf("%d plain InitProducerId requests, want %d (one per producer)", n, MaxAppendRebuilds)
	}
	if ctx.Err() != nil {
		t.Error("the Append ran until its context ended")
	}
}

// TestCloseAfterARebuildClosesTheNewProducer: the producer that replaced
// plain belongs to the wire, which closes it at Close; a later Append
// returns the error of a closed wire.
func TestCloseAfterARebuildClosesTheNewProducer(t *testing.T) {
	c := kafkatest.Fake(t)
	w := unansweredWire(t, c)
	topic := c.CreateTopic(t, "coord-plain-close", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fatalPlainMints(c, 1, kerr.UnknownServerError.Code)
	record := Record{Partition: Partition{Topic: topic}, Value: []byte("registration")}
	if err := w.Append(ctx, record); err != nil {
		t.Fatal(err)
	}
	rebuilt := w.producer()
	if rebuilt == w.plain {
		t.Fatal("the Append after a fatal answer to the plain producer's InitProducerId did not replace the producer")
	}
	w.Close()
	if err := rebuilt.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("late")}).FirstErr(); !errors.Is(err, kgo.ErrClientClosed) {
		t.Errorf("a produce of the new producer after Close: %v, want %v", err, kgo.ErrClientClosed)
	}
	if err := w.Append(ctx, record); ClassOf(err) != Closed {
		t.Errorf("Append after Close: %v (class %v), want class closed", err, ClassOf(err))
	}
}
