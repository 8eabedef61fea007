package coordination_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// The fault-injection tests of KafkaTransport's error classification. They
// run on kfake only, whose control functions answer a request of the
// transport with any error code: a real broker cannot be made to.

// ktRequests counts the requests that the clients of a transport write, by
// request key.
type ktRequests struct {
	mu sync.Mutex
	n  map[int16]int
}

func (r *ktRequests) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = make(map[int16]int)
	}
	r.n[key]++
}

func (r *ktRequests) count(key kmsg.Key) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[key.Int16()]
}

// ktFaultSetup is one transport of a kfake cluster that holds a fresh token
// of a role, with a state topic and a request counter.
type ktFaultSetup struct {
	cluster   *kafkatest.Cluster
	transport *coordination.KafkaTransport
	requests  *ktRequests
	role      coordination.Role
	tp        coordination.TopicPartition
	token     coordination.FencingToken
}

func ktFaultSetupFor(t *testing.T) *ktFaultSetup {
	t.Helper()
	c := kafkatest.Fake(t)
	requests := new(ktRequests)
	// A short metadata min age: franz-go waits it out before it retries a
	// produce that a leader refused.
	transport := ktTransport(t, c, kgo.WithHooks(requests), kgo.MetadataMinAge(200*time.Millisecond))
	_, options := ktStateTopic(t, c, transport, 4)
	role := ktRole(t, "fault")
	token, err := transport.AcquireEpoch(ktContext(t), role)
	if err != nil {
		t.Fatalf("AcquireEpoch: %v", err)
	}
	return &ktFaultSetup{cluster: c, transport: transport, requests: requests, role: role, tp: ktPartition(t, role, options), token: token}
}

func (s *ktFaultSetup) writeLease(t *testing.T, grantedAt int64) error {
	t.Helper()
	key, value := ktLeaseRecord(t, s.role, "node-1", s.token, grantedAt)
	return s.transport.WriteLease(ktContext(t), s.tp, s.token, key, value)
}

// answerOnce makes the cluster answer the next request of the key that the
// role's transactional id sends with the error code, and every other
// request as usual.
func (s *ktFaultSetup) answerOnce(key kmsg.Key, code int16) {
	txnID := s.role.String()
	s.cluster.Fake.ControlKey(key.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		switch req := kreq.(type) {
		case *kmsg.EndTxnRequest:
			if req.TransactionalID != txnID {
				break
			}
			resp := req.ResponseKind().(*kmsg.EndTxnResponse)
			resp.ErrorCode = code
			return resp, nil, true
		case *kmsg.ProduceRequest:
			if req.TransactionID == nil || *req.TransactionID != txnID {
				break
			}
			return kafkatest.RefusedProduce(req, code), nil, true
		case *kmsg.AddPartitionsToTxnRequest:
			if req.TransactionalID != txnID {
				break
			}
			resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
			for _, rt := range req.Topics {
				st := kmsg.NewAddPartitionsToTxnResponseTopic()
				st.Topic = rt.Topic
				for _, p := range rt.Partitions {
					sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
					sp.Partition, sp.ErrorCode = p, code
					st.Partitions = append(st.Partitions, sp)
				}
				resp.Topics = append(resp.Topics, st)
			}
			return resp, nil, true
		}
		s.cluster.Fake.KeepControl() // not the role's request: wait for it
		return nil, nil, false
	})
}

// TestKafkaTransportFenceCodes: every fencing broker code, from every
// request of a lease write that can carry it, wraps ErrFenced; the
// transport then closes the producer, so the next write fails without a
// request, and it never sends InitProducerId again.
func TestKafkaTransportFenceCodes(t *testing.T) {
	for _, tc := range []struct {
		key  kmsg.Key
		code *kerr.Error
	}{
		{kmsg.EndTxn, kerr.InvalidProducerEpoch},
		{kmsg.EndTxn, kerr.ProducerFenced},
		{kmsg.EndTxn, kerr.InvalidProducerIDMapping},
		{kmsg.Produce, kerr.InvalidProducerEpoch},
		{kmsg.Produce, kerr.InvalidProducerIDMapping},
		{kmsg.AddPartitionsToTxn, kerr.ProducerFenced},
		{kmsg.AddPartitionsToTxn, kerr.InvalidProducerEpoch},
	} {
		t.Run(tc.key.Name()+"/"+tc.code.Message, func(t *testing.T) {
			s := ktFaultSetupFor(t)
			s.answerOnce(tc.key, tc.code.Code)
			err := s.writeLease(t, 1)
			if !errors.Is(err, coordination.ErrFenced) || !errors.Is(err, tc.code) {
				t.Fatalf("WriteLease answered %s on %s = %v; want an error that wraps ErrFenced and the code", tc.code.Message, tc.key.Name(), err)
			}
			before := s.requests.count(kmsg.AddPartitionsToTxn) + s.requests.count(kmsg.Produce) + s.requests.count(kmsg.EndTxn)
			ktMustFence(t, "the next WriteLease", s.writeLease(t, 2))
			ktMustFence(t, "the next WriteGuarded", s.transport.WriteGuarded(ktContext(t), s.token, []coordination.GuardedRecord{{Topic: "commands", Value: []byte("x")}}))
			if after := s.requests.count(kmsg.AddPartitionsToTxn) + s.requests.count(kmsg.Produce) + s.requests.count(kmsg.EndTxn); after != before {
				t.Fatalf("the writes after the fence sent %d requests; want none", after-before)
			}
			if n := s.requests.count(kmsg.InitProducerID); n != 1 {
				t.Fatalf("the transport sent %d InitProducerId requests; want 1, its mint", n)
			}
		})
	}
}

// TestKafkaTransportTransientCodes: an error that the transport (or
// franz-go, for a coordinator that moved) retries, or that fails the write
// without touching the producer state, leaves the token writing. A Produce
// answered REQUEST_TIMED_OUT goes again with the same sequence number.
func TestKafkaTransportTransientCodes(t *testing.T) {
	for _, tc := range []struct {
		key       kmsg.Key
		code      *kerr.Error
		writeFail bool // the first write fails (after an abort) rather than being retried
	}{
		{kmsg.EndTxn, kerr.CoordinatorLoadInProgress, false},
		{kmsg.EndTxn, kerr.NotCoordinator, false},
		{kmsg.EndTxn, kerr.ConcurrentTransactions, false},
		{kmsg.Produce, kerr.NotEnoughReplicas, false},
		{kmsg.Produce, kerr.NotLeaderForPartition, false},
		{kmsg.Produce, kerr.MessageTooLarge, true},
		{kmsg.Produce, kerr.RequestTimedOut, false},
		{kmsg.AddPartitionsToTxn, kerr.ConcurrentTransactions, false},
		{kmsg.AddPartitionsToTxn, kerr.NotCoordinator, false},
		{kmsg.AddPartitionsToTxn, kerr.UnknownTopicOrPartition, true},
	} {
		t.Run(tc.key.Name()+"/"+tc.code.Message, func(t *testing.T) {
			s := ktFaultSetupFor(t)
			s.answerOnce(tc.key, tc.code.Code)
			err := s.writeLease(t, 1)
			switch {
			case errors.Is(err, coordination.ErrFenced):
				t.Fatalf("WriteLease answered %s on %s = %v; want no fence", tc.code.Message, tc.key.Name(), err)
			case tc.writeFail && err == nil:
				t.Fatalf("WriteLease answered %s on %s succeeded; want an error", tc.code.Message, tc.key.Name())
			case !tc.writeFail && err != nil:
				t.Fatalf("WriteLease answered %s on %s = %v; want franz-go to retry it", tc.code.Message, tc.key.Name(), err)
			}
			if err := s.writeLease(t, 2); err != nil {
				t.Fatalf("the next WriteLease under the same token: %v", err)
			}
			described, _, _ := s.transport.DescribeEpoch(ktContext(t), s.role)
			if described != s.token || s.requests.count(kmsg.InitProducerID) != 1 {
				t.Fatalf("after the fault: DescribeEpoch = %s, %d InitProducerId requests; want %s and 1", described, s.requests.count(kmsg.InitProducerID), s.token)
			}
		})
	}
}

// TestKafkaTransportUnknownProducerIDClosesWithoutAMint: UNKNOWN_PRODUCER_ID
// on a produce fails franz-go's producer id, which franz-go would recover at
// the next BeginTransaction with an InitProducerId that mints a new epoch.
// The transport closes the producer instead, and aborts the open
// transaction itself, so the partition's last stable offset moves on at
// once rather than at the transaction timeout. It is no fence: the error
// wraps ErrProducerLost, not ErrFenced.
func TestKafkaTransportUnknownProducerIDClosesWithoutAMint(t *testing.T) {
	// OUT_OF_ORDER_SEQUENCE_NUMBER too: the Java producer aborts and ends
	// its transactional producer on both.
	for _, code := range []*kerr.Error{kerr.UnknownProducerID, kerr.OutOfOrderSequenceNumber} {
		t.Run(code.Message, func(t *testing.T) { ktProducerStateRefused(t, code) })
	}
}

func ktProducerStateRefused(t *testing.T, code *kerr.Error) {
	s := ktFaultSetupFor(t)
	ctx := ktContext(t)
	// A first write adds the partition, so that the failing one holds a
	// transaction open at the broker.
	if err := s.writeLease(t, 1); err != nil {
		t.Fatalf("first WriteLease: %v", err)
	}
	s.answerOnce(kmsg.Produce, code.Code)
	start := time.Now()
	err := s.writeLease(t, 2)
	ktMustLoseProducer(t, "WriteLease answered "+code.Message, err)
	ktMustLoseProducer(t, "the next WriteLease", s.writeLease(t, 3))
	if n := s.requests.count(kmsg.InitProducerID); n != 1 {
		t.Fatalf("the transport sent %d InitProducerId requests; want 1, its mint", n)
	}
	if described, _, _ := s.transport.DescribeEpoch(ctx, s.role); described != s.token {
		t.Fatalf("DescribeEpoch = %s; want the minted %s", described, s.token)
	}
	// The failed write had added the partition to a transaction at the
	// coordinator; the transport aborted it, rather than leaving it to the
	// transaction timeout (ktLease.Duration()).
	described, err := s.cluster.Admin(t).DescribeTransactions(ctx, s.role.String())
	if err != nil {
		t.Fatalf("DescribeTransactions: %v", err)
	}
	if txn := described[s.role.String()]; txn.State == "Ongoing" {
		t.Fatalf("the transaction of %s is %s %v after the failed write; want it aborted", s.role, txn.State, time.Since(start))
	}
}

// ktMustLoseProducer checks that err wraps ErrProducerLost and not
// ErrFenced: the epoch cannot write again, and nobody else took the role.
func ktMustLoseProducer(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, coordination.ErrProducerLost) || errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("%s: got error %v, want one that wraps ErrProducerLost and not ErrFenced", what, err)
	}
}
