package chaos

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// TestKafkaProxyErrorCodesAgainstALeadership is the real-broker version of
// coordination's TestKafkaEveryErrorCodeOfEveryRequest (kfake), a few codes
// of it, one per class, through the Kafka-aware proxy's error-code and
// applied-error modes: a member campaigns and then makes a guarded Write
// of two records on two partitions, through a proxy armed with the code
// for the first request of the key. It asserts: no hang; AcquireLeadership
// leads, or returns an error that wraps a sentinel or names the code; the
// Write is whole or absent to a read_committed reader, present when it
// returned nil, absent when its error says nothing committed (none of
// ErrFenced, ErrProducerLost, ErrOutcomeUnknown); a leadership that ended
// says why with a sentinel.
func TestKafkaProxyErrorCodesAgainstALeadership(t *testing.T) {
	c := kafkatest.Kafka(t)
	lease, err := coordination.NewLeaseConfig(6*time.Second, 2*time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		key      kmsg.Key
		code     *kerr.Error
		mode     RequestMode
		campaign bool // armed before AcquireLeadership; else before the Write
		plain    bool // the plain producer's idempotent InitProducerId (the registration's) takes it: no warm-up
	}{
		{"mint retriable", kmsg.InitProducerID, kerr.CoordinatorLoadInProgress, RequestErrorCode, true, false},
		{"mint fenced", kmsg.InitProducerID, kerr.ProducerFenced, RequestErrorCode, true, false},
		{"plain mint fatal", kmsg.InitProducerID, kerr.UnknownServerError, RequestErrorCode, true, true},
		{"plain mint fenced", kmsg.InitProducerID, kerr.ProducerFenced, RequestErrorCode, true, true},
		{"plain mint timeout", kmsg.InitProducerID, kerr.InvalidTransactionTimeout, RequestErrorCode, true, true},
		{"coordinator lookup", kmsg.FindCoordinator, kerr.CoordinatorNotAvailable, RequestErrorCode, true, false},
		{"metadata", kmsg.Metadata, kerr.LeaderNotAvailable, RequestErrorCode, true, false},
		{"read", kmsg.Fetch, kerr.NotLeaderForPartition, RequestErrorCode, true, false},
		{"commit busy", kmsg.EndTxn, kerr.ConcurrentTransactions, RequestErrorCode, false, false},
		{"commit denied", kmsg.EndTxn, kerr.TransactionalIDAuthorizationFailed, RequestErrorCode, false, false},
		{"commit applied", kmsg.EndTxn, kerr.CoordinatorNotAvailable, RequestAppliedError, false, false},
		{"add partitions fenced", kmsg.AddPartitionsToTxn, kerr.ProducerFenced, RequestErrorCode, false, false},
		{"produce abortable", kmsg.Produce, kerr.TransactionAbortable, RequestErrorCode, false, false},
		{"produce applied", kmsg.Produce, kerr.NotEnoughReplicasAfterAppend, RequestAppliedError, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			proxy, err := NewKafkaProxy("127.0.0.1:0", c.Brokers[0])
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = proxy.Close() })
			routes := Routes{"*": proxy.Addr()}
			transport, err := coordination.NewKafkaTransportWithOptions(lease, []kgo.Opt{kgo.Dialer(routes.Dial)}, c.Brokers...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(transport.Close)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			stateTopic := kafkatest.TopicName("chaos-codes-state")
			c.DeleteTopicAtCleanup(t, stateTopic)
			options := []coordination.Option{coordination.WithTopic(stateTopic), coordination.WithPartitions(1),
				coordination.WithLeaseConfig(lease), coordination.WithPollInterval(250 * time.Millisecond)}
			if err := transport.CreateStateTopic(ctx, 1, 1, options...); err != nil {
				t.Fatal(err)
			}
			data := c.CreateTopic(t, "chaos-codes-data", 2, nil)
			role, err := coordination.NewRole(kafkatest.TopicName("codes"))
			if err != nil {
				t.Fatal(err)
			}
			member, err := coordination.NewMemberID("node-1")
			if err != nil {
				t.Fatal(err)
			}
			if tc.key == kmsg.InitProducerID && !tc.plain {
				// The plain producer's own InitProducerId (idempotence, at
				// the first registration) goes first; for a fault of the
				// role's mint, a leadership of another role loads it. The
				// plain cases take that one: franz-go keeps a fatal answer
				// to it for the client's life, and the transport replaces
				// the producer (docs/safety.md).
				warm, err := coordination.NewRole(kafkatest.TopicName("codes-warm"))
				if err != nil {
					t.Fatal(err)
				}
				first, err := coordination.AcquireLeadership(ctx, transport, warm, member, options...)
				if err != nil {
					t.Fatalf("the warm-up leadership: %v", err)
				}
				if err := first.Resign(ctx); err != nil {
					t.Fatalf("the warm-up resignation: %v", err)
				}
			}
			fault := RequestFault{Mode: tc.mode, Keys: []int16{tc.key.Int16()}, Code: tc.code.Code}
			var armed *ArmedRequest
			if tc.campaign {
				armed = Arm(fault, proxy)
			}
			acquireCtx, acquireCancel := context.WithTimeout(ctx, 30*time.Second)
			holder, err := coordination.AcquireLeadership(acquireCtx, transport, role, member, options...)
			acquireCancel()
			if tc.plain {
				// One fatal answer costs the registration a new producer,
				// not the campaign; INVALID_TRANSACTION_TIMEOUT ends it.
				if misconfigured := errors.Is(tc.code, kerr.InvalidTransactionTimeout); misconfigured != errors.Is(err, coordination.ErrMisconfigured) ||
					!misconfigured && err != nil {
					t.Fatalf("AcquireLeadership after %s to the plain producer's InitProducerId = %v; want a leadership, or ErrMisconfigured for INVALID_TRANSACTION_TIMEOUT", tc.code.Message, err)
				}
			}
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) || !codesWrapsSentinel(err) && !errors.Is(err, tc.code) {
					t.Fatalf("AcquireLeadership under %s = %v; want a leadership, or an error that wraps a sentinel or names the code", tc.code.Message, err)
				}
				t.Logf("AcquireLeadership: %v", err)
				return
			}
			defer func() { _ = holder.Resign(context.Background()) }()
			if !tc.campaign {
				armed = Arm(fault, proxy)
			}
			writeCtx, writeCancel := context.WithTimeout(ctx, 10*time.Second)
			writeErr := holder.Write(writeCtx,
				coordination.GuardedRecord{Topic: data, Partition: 0, Value: []byte("a")},
				coordination.GuardedRecord{Topic: data, Partition: 1, Value: []byte("b")})
			writeCancel()
			time.Sleep(200 * time.Millisecond) // a renewal that took the fault reports it
			armed.Disarm()
			hit, taken := armed.Hit()
			if !taken {
				t.Fatalf("no %s request took the fault", tc.key.Name())
			}
			if hit.Err != "" || hit.Code != tc.code.Code {
				t.Fatalf("the fault's hit %+v: want the request answered with %s", hit, tc.code.Message)
			}
			var ended error
			select {
			case <-holder.Done():
				ended = holder.Err()
				if !codesWrapsSentinel(ended) {
					t.Errorf("the leadership ended with %v; want an error that wraps a sentinel", ended)
				}
			default:
			}
			seen := readCommitted(t, c, data)
			t.Logf("hit %s v%d; Write: %v; leadership ended: %v; visible %d/%d", hit.API, hit.Version, writeErr, ended, seen[0], seen[1])
			switch {
			case seen[0] != seen[1] || seen[0] > 1:
				t.Errorf("a read_committed reader sees %d and %d records of the two-record Write: torn or doubled", seen[0], seen[1])
			case writeErr == nil && seen[0] != 1:
				t.Errorf("Write returned nil and a read_committed reader sees none of it")
			case writeErr != nil && seen[0] == 1 && !errors.Is(writeErr, coordination.ErrFenced) &&
				!errors.Is(writeErr, coordination.ErrProducerLost) && !errors.Is(writeErr, coordination.ErrOutcomeUnknown):
				t.Errorf("Write reported %v, which says nothing committed, and a read_committed reader sees it: a false report", writeErr)
			}
		})
	}
}

// codesWrapsSentinel reports an error that says why with one of
// coordination's sentinels.
func codesWrapsSentinel(err error) bool {
	return slices.ContainsFunc([]error{coordination.ErrFenced, coordination.ErrProducerLost, coordination.ErrOutcomeUnknown,
		coordination.ErrNotAuthorized, coordination.ErrMisconfigured, coordination.ErrNotHeld},
		func(s error) bool { return errors.Is(err, s) })
}

// readCommitted counts the records of partitions 0 and 1 of topic that a
// read_committed reader sees up to their end offsets.
func readCommitted(t *testing.T, c *kafkatest.Cluster, topic string) map[int32]int {
	t.Helper()
	client := c.Client(t,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	seen := make(map[int32]int)
	for ctx.Err() == nil {
		client.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[r.Partition]++ })
	}
	return seen
}
