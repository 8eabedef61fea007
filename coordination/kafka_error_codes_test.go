package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkacodes"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
	"github.com/krabka-io/krabka-streams-go/internal/kfakefault"
)

// The error codes of issue 28's request nemesis, on kfake: every code that
// Kafka documents for each request the library sends (the one table,
// internal/kafkacodes.Codes; Applied for the codes a broker answers to a
// request it applied) answers one request of a member in the middle of a
// leadership, and the member neither panics, nor hangs, nor reports a
// write as not committed while its records are visible.

// kcPhase is where in a leadership the fault takes its request.
type kcPhase string

const (
	kcCampaign kcPhase = "campaign" // AcquireLeadership: topic check, registration, mint, first lease
	kcRegister kcPhase = "register" // AcquireLeadership: the plain producer's idempotent InitProducerId, at the registration
	kcWrite    kcPhase = "write"    // a renewal or a guarded Write of two records, whichever sends first
	kcResign   kcPhase = "resign"   // the tombstones of Resign
)

// kcPhases lists, for each API key of the table that a member sends, the
// phases whose requests include it. CreateTopics is krabka-coord's only.
var kcPhases = map[kmsg.Key][]kcPhase{
	kmsg.Produce:              {kcCampaign, kcWrite, kcResign},
	kmsg.Fetch:                {kcCampaign, kcWrite},
	kmsg.ListOffsets:          {kcCampaign, kcWrite},
	kmsg.Metadata:             {kcCampaign, kcWrite},
	kmsg.FindCoordinator:      {kcCampaign},
	kmsg.ApiVersions:          {kcCampaign},
	kmsg.InitProducerID:       {kcCampaign, kcRegister},
	kmsg.AddPartitionsToTxn:   {kcCampaign, kcWrite, kcResign},
	kmsg.EndTxn:               {kcCampaign, kcWrite, kcResign},
	kmsg.DescribeConfigs:      {kcCampaign},
	kmsg.DescribeTransactions: {kcCampaign},
}

// kcCase is one row of the walk.
type kcCase struct {
	key     kmsg.Key
	code    *kerr.Error
	phase   kcPhase
	applied bool // kfakefault.AppliedError: the request applied, the answer the code
}

func (c kcCase) name() string {
	mode := "error"
	if c.applied {
		mode = "applied"
	}
	return fmt.Sprintf("%s/%s/%s/%s", c.key.Name(), c.code.Message, c.phase, mode)
}

// kcOutcome is what one case saw.
type kcOutcome struct {
	taken                bool
	acquireErr, writeErr error
	leadershipErr        error
	visible0, visible1   int
	resignErr            error
}

// TestKafkaEveryErrorCodeOfEveryRequest walks the table: for each API key
// the library sends, each code Kafka documents for it, retriable and
// fatal, answers the first request of the key in a phase of a leadership
// (the campaign; a renewal or a guarded Write of two records on two
// partitions; the resignation's tombstones), on a kfake cluster of its own.
// It asserts: no panic and no hang; AcquireLeadership either leads, or
// returns an error that wraps a sentinel or names the code; a retriable
// code never fails the campaign; the Write is whole or absent to a
// read_committed reader, present when it returned nil, and absent when its
// error wraps none of ErrFenced, ErrProducerLost and ErrOutcomeUnknown (no
// false report); a leadership that ended says why with a sentinel. The
// codes Kafka answers to a request it applied (kafkacodes.Applied) run
// again with the request applied.
func TestKafkaEveryErrorCodeOfEveryRequest(t *testing.T) {
	var cases []kcCase
	keys := make([]kmsg.Key, 0, len(kcPhases))
	for key := range kcPhases {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	for _, key := range keys {
		for _, phase := range kcPhases[key] {
			for _, code := range kafkacodes.Of(key.Int16()) {
				cases = append(cases, kcCase{key: key, code: code, phase: phase})
			}
			for _, code := range kafkacodes.AppliedOf(key.Int16()) {
				cases = append(cases, kcCase{key: key, code: code, phase: phase, applied: true})
			}
		}
	}
	if len(cases) < 200 {
		t.Fatalf("the table holds %d cases; want every code of every key", len(cases))
	}
	var mu sync.Mutex
	taken := make(map[kmsg.Key]int)
	gate := make(chan struct{}, 12) // at most 12 clusters at once: they mostly wait
	t.Run("cases", func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name(), func(t *testing.T) {
				t.Parallel()
				gate <- struct{}{}
				defer func() { <-gate }()
				out := kcRun(t, c)
				if out.taken {
					mu.Lock()
					taken[c.key]++
					mu.Unlock()
				}
			})
		}
	})
	var summary []string
	for _, key := range keys {
		summary = append(summary, fmt.Sprintf("%s %d", key.Name(), taken[key]))
	}
	t.Logf("%d cases; the faults took a request, by key: %s", len(cases), strings.Join(summary, ", "))
	// Every key but those a campaign on kfake may not send (DescribeConfigs:
	// the topic check's; DescribeTransactions: the rival-mint watch's) must
	// have been taken.
	for _, key := range keys {
		if taken[key] == 0 && key != kmsg.DescribeConfigs && key != kmsg.DescribeTransactions {
			t.Errorf("no fault of %s took a request: the walk did not reach it", key.Name())
		}
	}
}

// kcSentinels are the errors a leadership may end with, or a call return,
// under an injected code.
var kcSentinels = []error{coordination.ErrFenced, coordination.ErrProducerLost, coordination.ErrOutcomeUnknown,
	coordination.ErrNotAuthorized, coordination.ErrMisconfigured, coordination.ErrNotHeld}

func kcWrapsSentinel(err error) bool {
	return slices.ContainsFunc(kcSentinels, func(s error) bool { return errors.Is(err, s) })
}

// kcMayHaveCommitted reports an error of Write that does not claim that
// nothing committed.
func kcMayHaveCommitted(err error) bool {
	return errors.Is(err, coordination.ErrFenced) || errors.Is(err, coordination.ErrProducerLost) ||
		errors.Is(err, coordination.ErrOutcomeUnknown)
}

func kcRun(t *testing.T, c kcCase) (out kcOutcome) {
	cluster := kafkatest.Fake(t)
	inj, err := kfakefault.New(cluster.Fake)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(inj.Close)
	e := kaNewEnv(t, cluster)
	data := cluster.CreateTopic(t, "coord-codes-data", 2, nil)
	txnID := e.role.String()
	var active atomic.Bool // the fault takes a request only while the phase runs
	mode := kfakefault.ErrorCode
	if c.applied {
		mode = kfakefault.AppliedError
	}
	arm := func() *kfakefault.Armed {
		active.Store(true)
		return inj.Inject(kfakefault.Fault{Key: c.key, Mode: mode, Code: c.code.Code,
			Match: func(req kmsg.Request) bool { return active.Load() && kcOwn(c.phase, req, txnID, data) }})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	var armed *kfakefault.Armed
	if c.phase == kcCampaign || c.phase == kcRegister {
		armed = arm()
	}
	acquireCtx, acquireCancel := context.WithTimeout(ctx, 20*time.Second)
	holder, err := coordination.AcquireLeadership(acquireCtx, ktTransport(t, cluster), e.role, fxMember(t, "node-1"), e.options...)
	acquireCancel()
	out.acquireErr = err
	if err != nil {
		active.Store(false)
		out.taken = kcTaken(armed)
		switch {
		case errors.Is(err, context.DeadlineExceeded):
			t.Fatalf("AcquireLeadership under %s did not lead within 20 s: %v", c.code.Message, err)
		case c.code.Retriable && !c.applied:
			t.Fatalf("AcquireLeadership failed on a retriable code: %v", err)
		case c.phase == kcRegister && !errors.Is(err, coordination.ErrNotAuthorized) && !errors.Is(err, coordination.ErrMisconfigured):
			t.Fatalf("AcquireLeadership ended on one answer to the plain producer's InitProducerId: %v; "+
				"only a denial or INVALID_TRANSACTION_TIMEOUT ends it", err)
		case !kcWrapsSentinel(err) && !errors.Is(err, c.code):
			t.Fatalf("AcquireLeadership = %v; want an error that wraps a sentinel or names %s", err, c.code.Message)
		}
		t.Logf("AcquireLeadership: %v", err)
		return out
	}
	defer func() { _ = holder.Resign(context.Background()) }()
	if c.phase == kcWrite {
		armed = arm()
	}
	writeCtx, writeCancel := context.WithTimeout(ctx, 10*time.Second)
	out.writeErr = holder.Write(writeCtx,
		coordination.GuardedRecord{Topic: data, Partition: 0, Value: []byte("a")},
		coordination.GuardedRecord{Topic: data, Partition: 1, Value: []byte("b")})
	writeCancel()
	if c.phase == kcWrite {
		time.Sleep(100 * time.Millisecond) // a renewal that took the fault reports it
	}
	if c.phase == kcResign {
		armed = arm()
		resignCtx, resignCancel := context.WithTimeout(ctx, 10*time.Second)
		out.resignErr = holder.Resign(resignCtx)
		resignCancel()
		if out.resignErr != nil && !kcWrapsSentinel(out.resignErr) && !errors.Is(out.resignErr, c.code) {
			t.Errorf("Resign = %v; want nil, or an error that wraps a sentinel or names %s", out.resignErr, c.code.Message)
		}
	}
	active.Store(false)
	out.taken = kcTaken(armed)
	if out.taken {
		if hit, _ := armed.Wait(ctx); hit.Err != nil {
			t.Logf("the fault's own request of %s v%d failed: %v", c.key.Name(), hit.Version, hit.Err)
		}
	}
	select {
	case <-holder.Done():
		out.leadershipErr = holder.Err()
		if !kcWrapsSentinel(out.leadershipErr) {
			t.Errorf("the leadership ended with %v; want an error that wraps a sentinel", out.leadershipErr)
		}
	default:
	}
	seen := kcCommitted(t, cluster, data)
	out.visible0, out.visible1 = len(seen[0]), len(seen[1])
	t.Logf("taken %v; Write: %v; leadership: %v; resign: %v; visible %d/%d", out.taken, out.writeErr, out.leadershipErr, out.resignErr, out.visible0, out.visible1)
	switch {
	case out.visible0 != out.visible1 || out.visible0 > 1:
		t.Errorf("a read_committed reader sees %d and %d records of the two-record Write (%v): torn or doubled", out.visible0, out.visible1, seen)
	case out.writeErr == nil && out.visible0 != 1:
		t.Errorf("Write returned nil and a read_committed reader sees none of it")
	case out.writeErr != nil && out.visible0 == 1 && !kcMayHaveCommitted(out.writeErr):
		t.Errorf("Write reported %v, which says nothing committed, and a read_committed reader sees it: a false report", out.writeErr)
	case out.writeErr != nil && !kcMayHaveCommitted(out.writeErr) && c.code.Retriable && c.phase == kcWrite && !c.applied:
		// A retriable code the write could not overcome: allowed, named.
		if !errors.Is(out.writeErr, c.code) && !kcWrapsSentinel(out.writeErr) {
			t.Logf("Write failed on a retriable code without naming it: %v", out.writeErr)
		}
	}
	return out
}

// kcTaken reports whether the armed fault took a request.
func kcTaken(a *kfakefault.Armed) bool {
	if a == nil {
		return false
	}
	select {
	case <-a.Done():
		return true
	default:
		return false
	}
}

// kcOwn picks the request of the phase: in the campaign, the first of the
// key; later, a request of the role's transactional id, a Produce of the
// guarded write's topic (the write phase) or of the state topic (the
// resignation), or any request of a key that names no transactional id.
//
// An InitProducerId is the plain producer's idempotent one in the
// register phase (franz-go keeps a fatal answer to it for the client's
// life, and the transport replaces the producer: docs/safety.md), and the
// role's mint in every other phase.
func kcOwn(phase kcPhase, req kmsg.Request, txnID, data string) bool {
	if r, ok := req.(*kmsg.InitProducerIDRequest); ok {
		if phase == kcRegister {
			return r.TransactionalID == nil
		}
		return r.TransactionalID != nil && *r.TransactionalID == txnID
	}
	if phase == kcCampaign {
		return true
	}
	switch r := req.(type) {
	case *kmsg.ProduceRequest:
		if r.TransactionID == nil || *r.TransactionID != txnID {
			return false
		}
		for _, topic := range r.Topics {
			if (phase == kcWrite) == (topic.Topic == data) {
				return true
			}
		}
		return false
	case *kmsg.AddPartitionsToTxnRequest:
		return r.TransactionalID == txnID
	case *kmsg.EndTxnRequest:
		return r.TransactionalID == txnID
	case *kmsg.FindCoordinatorRequest:
		return r.CoordinatorKey == txnID || slices.Contains(r.CoordinatorKeys, txnID)
	}
	return true
}

// kcCommitted reads partitions 0 and 1 of topic read_committed: until both
// show a record (and 200 ms more, for a double), or 700 ms with neither,
// or 5 s with one only (a torn write, or a slow read under load).
func kcCommitted(t *testing.T, c *kafkatest.Cluster, topic string) map[int32][]string {
	t.Helper()
	client := c.Client(t,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(100*time.Millisecond))
	start := time.Now()
	seen := make(map[int32][]string)
	var both time.Time
	for {
		elapsed := time.Since(start)
		switch {
		case !both.IsZero() && time.Since(both) > 200*time.Millisecond,
			len(seen[0]) == 0 && len(seen[1]) == 0 && elapsed > 700*time.Millisecond,
			elapsed > 5*time.Second:
			return seen
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		client.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[r.Partition] = append(seen[r.Partition], string(r.Value)) })
		cancel()
		if both.IsZero() && len(seen[0]) > 0 && len(seen[1]) > 0 {
			both = time.Now()
		}
	}
}
