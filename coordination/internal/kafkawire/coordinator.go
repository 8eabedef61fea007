package kafkawire

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/backoff"
)

// This file holds the cache of transaction coordinators: the requests of a
// transactional id's transactions (InitProducerId, AddPartitionsToTxn,
// EndTxn) and the DescribeTransactions of its epoch go to the broker that
// leads the id's partition of __transaction_state, which FindCoordinator
// names. The wire keeps that node per transactional id itself, and sends
// each request pinned to it, rather than through franz-go's routing: after
// a kill -9 of the coordinator's broker, franz-go 1.22 kept sending these
// requests to the dead node ("unable to dial") for as long as it was
// measured (40 s), though FindCoordinator through the same client named the
// new coordinator 9 s after the kill (broker.session.timeout.ms).

// txnCoordinators maps transactional ids to the node of their transaction
// coordinator. It is safe for concurrent use.
type txnCoordinators struct {
	client      *kgo.Client
	readTimeout time.Duration // the client's RequestTimeoutOverhead: the watch of untilMoved

	mu      sync.Mutex
	nodes   map[string]int32
	lookups map[string]*coordinatorLookup // the ids queued for the next FindCoordinator or in flight
	queued  []string                      // the ids of the next FindCoordinator
	sending bool                          // the goroutine of lookAll runs
}

// coordinatorLookup is the lookup of one id, which every caller that
// needs the id meanwhile waits for. Its fields but done are guarded by
// the lock of txnCoordinators.
type coordinatorLookup struct {
	done    chan struct{} // closed when node and err are set
	node    int32
	err     error
	waiters int          // the callers that wait for it
	batch   *lookupBatch // the FindCoordinator that carries it; nil while queued
}

// lookupBatch is one FindCoordinator of lookAll. It is cancelled when
// every caller that waits for one of its ids has given up, so that no
// request outlives its callers' contexts; lookupTimeout bounds it too.
type lookupBatch struct {
	cancel  context.CancelFunc
	waiters int
}

const lookupTimeout = 5 * time.Second

func newTxnCoordinators(client *kgo.Client) *txnCoordinators {
	readTimeout, _ := client.OptValue(kgo.RequestTimeoutOverhead).(time.Duration)
	if readTimeout <= 0 {
		readTimeout = requestTimeoutFloor
	}
	return &txnCoordinators{client: client, readTimeout: readTimeout, nodes: make(map[string]int32), lookups: make(map[string]*coordinatorLookup)}
}

// coordinatorBackoff is the first pause between two attempts of a
// coordinator request that found no coordinator, or a dead one; it doubles
// up to coordinatorBackoffMax.
const (
	coordinatorBackoff    = 50 * time.Millisecond
	coordinatorBackoffMax = 500 * time.Millisecond
)

// request sends the request that build makes to the transaction
// coordinator of txnID, and returns its response once codeOf finds no
// coordinator error in it. A request that got no answer (a broker that
// cannot be dialled, a connection that broke), or whose answer says that
// the broker is not the coordinator (NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE), forgets the node, looks the coordinator up
// again and goes again; COORDINATOR_LOAD_IN_PROGRESS goes again to the
// same node. It retries until ctx ends, and then returns the last error.
// Every other error code is the caller's: request returns the response and
// codeOf's error, or, for a FindCoordinator that refused the id (such as
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED), no response and that error.
//
// Sending a request again that may have reached the coordinator is what
// franz-go does for these requests too: AddPartitionsToTxn is idempotent,
// and the coordinator answers a repeated EndTxn of a transaction that it
// ended as the first one. But the first copy may still be applied later,
// on a later transaction of the same epoch (an EndTxn(commit) then commits
// whatever is open: KAFKA-17754), so a caller that resends sees it in
// requestTracked's unanswered and ends the epoch after its transaction
// (transaction.go, "A request without an answer"). InitProducerId waits
// for its answer instead (mint.go, patientInitProducerID), and one without
// an answer returns at once, for the mint to wait until no copy of it can
// land (mint_copy.go).
func (c *txnCoordinators) request(ctx context.Context, txnID string, build func() kmsg.Request, codeOf func(kmsg.Response) error) (kmsg.Response, error) {
	return c.requestWith(ctx, ctx, txnID, build, codeOf, nil)
}

// requestTracked is request, and notes in unanswered each node that an
// attempt of it was written to and got no answer from (see requestWith).
func (c *txnCoordinators) requestTracked(ctx context.Context, txnID string, build func() kmsg.Request, codeOf func(kmsg.Response) error, unanswered *unansweredAt) (kmsg.Response, error) {
	return c.requestWith(ctx, ctx, txnID, build, codeOf, unanswered)
}

// requestWith is request with the requests to the coordinator sent under
// send and the retries bounded by ctx: a request in flight when ctx ends
// runs on to its answer (an InitProducerId whose mint the caller keeps,
// mint_late.go), and no request goes after ctx ended.
//
// With unanswered set, it sets *unanswered when an attempt was written and
// got no answer while send still ran (mayApplyLater: its answer timed out,
// or the connection broke while the client read it), after which the
// broker may still apply the request. A connection that could not be
// dialled carried nothing, and the end of send is the caller's to judge.
func (c *txnCoordinators) requestWith(ctx, send context.Context, txnID string, build func() kmsg.Request, codeOf func(kmsg.Response) error, unanswered *unansweredAt) (kmsg.Response, error) {
	pauses := backoff.Doubling{First: coordinatorBackoff, Max: coordinatorBackoffMax}
	for {
		node, err := c.node(ctx, txnID)
		var resp kmsg.Response
		if coordinatorRefused(err) {
			return nil, err // FindCoordinator refused: a missing ACL, an invalid id
		}
		if err == nil && ctx.Err() != nil {
			return nil, ctx.Err() // no request after ctx ended
		}
		if err == nil {
			req := build()
			sendCtx, stop := send, context.CancelFunc(func() {})
			_, patient := req.(patientInitProducerID)
			if patient {
				sendCtx, stop = c.untilMoved(send, txnID, node)
			}
			resp, err = c.client.Broker(int(node)).Request(sendCtx, req)
			stop()
			if err != nil {
				if unanswered != nil && mayApplyLater(err) && send.Err() == nil {
					unanswered.note(node)
					if patient {
						c.forget(txnID, node)
						return nil, err // an InitProducerId goes once while a copy may land (mint_copy.go)
					}
				}
				c.forget(txnID, node)
			} else if err = codeOf(resp); err == nil || !coordinatorMoved(err) {
				if unanswered != nil {
					unanswered.answeredBy(node)
				}
				return resp, err
			} else if !coordinatorLoading(err) {
				c.forget(txnID, node)
			}
		}
		if ctx.Err() != nil {
			return nil, err
		}
		timer := time.NewTimer(pauses.Next())
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, err
		case <-timer.C:
		}
	}
}

// untilMoved returns a context of send that ends, and the func that ends
// it, for a request to node that waits for its answer past the read
// timeout (patientInitProducerID): it also ends once FindCoordinator, asked
// every read timeout from the first one on, names another node than node
// for txnID. A broker that is no longer the coordinator of the id cannot
// apply the request any more (its write to __transaction_state fails), so
// it goes again, to the new coordinator, at once instead of after the
// transaction timeout: the wait of a mint on a paused or cut-off
// coordinator is then the cluster's failover, as before. The func waits
// for the goroutine of the watch.
func (c *txnCoordinators) untilMoved(send context.Context, txnID string, node int32) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(send)
	exited := make(chan struct{})
	go func() { // ends with ctx: at the func's call, or when the coordinator moved
		defer close(exited)
		timer := time.NewTimer(c.readTimeout)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			lookup, stop := context.WithTimeout(ctx, lookupTimeout)
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorType = 1 // transaction
			req.CoordinatorKeys = []string{txnID}
			resp, err := req.RequestWith(lookup, c.client)
			stop()
			if now, err := coordinatorOf(resp, err, txnID); err == nil && now != node {
				cancel()
				return
			}
			timer.Reset(c.readTimeout)
		}
	}()
	return ctx, func() {
		cancel()
		<-exited
	}
}

// node returns the coordinator of txnID: the cached node, or the answer of
// a FindCoordinator request (key type transaction), which franz-go sends to
// any broker it can reach. The lookups of ids that are asked for while a
// FindCoordinator is in flight go together in the next one (version 4
// takes many keys; franz-go splits the request for a broker that predates
// it), so that a process that mints many roles at once sends a few such
// requests, not one for each role.
func (c *txnCoordinators) node(ctx context.Context, txnID string) (int32, error) {
	c.mu.Lock()
	if node, ok := c.nodes[txnID]; ok {
		c.mu.Unlock()
		return node, nil
	}
	lookup := c.lookups[txnID]
	if lookup == nil {
		lookup = &coordinatorLookup{done: make(chan struct{})}
		c.lookups[txnID] = lookup
		c.queued = append(c.queued, txnID)
		if !c.sending {
			c.sending = true
			go c.lookAll()
		}
	}
	lookup.waiters++
	if lookup.batch != nil {
		lookup.batch.waiters++
	}
	c.mu.Unlock()
	select {
	case <-lookup.done:
		return lookup.node, lookup.err
	case <-ctx.Done():
		c.mu.Lock()
		lookup.waiters--
		if b := lookup.batch; b != nil {
			if b.waiters--; b.waiters == 0 {
				b.cancel()
			}
		}
		c.mu.Unlock()
		return -1, ctx.Err()
	}
}

// lookAll sends the queued lookups, all of them in one FindCoordinator,
// until none is queued. It is the goroutine that node starts; it ends when
// the queue is empty, each request bounded by lookupTimeout.
func (c *txnCoordinators) lookAll() {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
		batch := &lookupBatch{cancel: cancel}
		c.mu.Lock()
		var ids []string
		for _, id := range c.queued {
			lookup := c.lookups[id]
			if lookup.waiters == 0 { // every caller gave up before it was sent
				delete(c.lookups, id)
				lookup.node, lookup.err = -1, context.Canceled
				close(lookup.done)
				continue
			}
			lookup.batch = batch
			batch.waiters += lookup.waiters
			ids = append(ids, id)
		}
		c.queued = nil
		if len(ids) == 0 {
			c.sending = false
			c.mu.Unlock()
			cancel()
			return
		}
		c.mu.Unlock()

		req := kmsg.NewPtrFindCoordinatorRequest()
		req.CoordinatorType = 1 // transaction
		req.CoordinatorKeys = ids
		resp, err := req.RequestWith(ctx, c.client)
		cancel()

		c.mu.Lock()
		for _, id := range ids {
			lookup := c.lookups[id]
			delete(c.lookups, id)
			lookup.node, lookup.err = coordinatorOf(resp, err, id)
			if lookup.err == nil {
				c.nodes[id] = lookup.node
			}
			close(lookup.done)
		}
		c.mu.Unlock()
	}
}

// coordinatorOf reads the coordinator of txnID from the answer of a
// FindCoordinator, or the request's error.
func coordinatorOf(resp *kmsg.FindCoordinatorResponse, err error, txnID string) (int32, error) {
	if err != nil {
		return -1, err
	}
	node, code := resp.NodeID, resp.ErrorCode // FindCoordinator before version 4: one key, at the top level
	if len(resp.Coordinators) > 0 {
		i := slices.IndexFunc(resp.Coordinators, func(found kmsg.FindCoordinatorResponseCoordinator) bool { return found.Key == txnID })
		if i < 0 {
			return -1, fmt.Errorf("the FindCoordinator answer omits the transactional id %s: %w", txnID, errNoCoordinator)
		}
		node, code = resp.Coordinators[i].NodeID, resp.Coordinators[i].ErrorCode
	}
	if err := codeError(code); err != nil {
		return -1, err
	}
	return node, nil
}

// forget drops the cached coordinator of txnID if it is still node.
func (c *txnCoordinators) forget(txnID string, node int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.nodes[txnID] == node {
		delete(c.nodes, txnID)
	}
}

// unansweredAt holds the coordinators that an attempt of one request was
// written to and got no answer from (mayApplyLater): each may still apply
// it, to a later transaction of the pair, for as long as it is the
// coordinator of the transactional id.
//
// An answer from another node, as the coordinator, ends that for all of
// them: the transaction's state now lives there, and a node that is no
// longer the coordinator applies nothing to it. It answers a queued copy
// NOT_COORDINATOR, and a paused node that still believes it leads the
// transaction log cannot append its PrepareCommit there (the log's
// leader epoch moved, and acks=all needs the in-sync replicas, which follow
// the new leader), so it writes no marker. A broker killed or restarted
// under its coordinator role is the common case (issue 9: a broker fault
// costs no leadership change). The same node answering keeps them: a
// copy queued there may still land.
type unansweredAt struct{ nodes []int32 }

// note records an attempt at node that got no answer.
func (u *unansweredAt) note(node int32) {
	if !slices.Contains(u.nodes, node) {
		u.nodes = append(u.nodes, node)
	}
}

// answeredBy records that node answered as the coordinator.
func (u *unansweredAt) answeredBy(node int32) {
	if !slices.Contains(u.nodes, node) {
		u.nodes = u.nodes[:0]
	}
}

// pending reports whether a copy without an answer may still be applied.
func (u *unansweredAt) pending() bool { return len(u.nodes) > 0 }
