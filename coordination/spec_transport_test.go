package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// The in-memory transport of the specification's conformance suite
// (spec_test.go). It implements the four interfaces of
// coordination.Transport and nothing else, as a port written from the
// specification alone would: no ExtendedTransport (so no incremental
// reads, no guarded writes, no record of its mints and fences, no lease
// policy of its own), and no record timestamps. So every answer that the
// suite sees is the answer that the specification promises to such a
// program.

// specCluster is one cluster: the partitions of the state topic and the
// transaction coordinator's token of each role. It is safe for concurrent
// use.
type specCluster struct {
	mu         sync.Mutex
	logs       map[coordination.TopicPartition][]coordination.StateRecord
	tokens     map[coordination.Role]coordination.FencingToken
	mints      map[coordination.Role]int
	nextID     int64
	beforeCall map[string]func() // a hook that runs before the named call, once
	failNext   map[string]error  // an error that the next named call returns
	calls      map[string]int    // calls by name, of every client
}

func newSpecCluster() *specCluster {
	return &specCluster{
		logs:       make(map[coordination.TopicPartition][]coordination.StateRecord),
		tokens:     make(map[coordination.Role]coordination.FencingToken),
		mints:      make(map[coordination.Role]int),
		nextID:     4000,
		beforeCall: make(map[string]func()),
		failNext:   make(map[string]error),
		calls:      make(map[string]int),
	}
}

// client opens the transport of one member process: a restarted process
// opens a new one, with no token minted.
func (c *specCluster) client() *specTransport {
	return &specTransport{cluster: c, minted: make(map[coordination.Role]coordination.FencingToken)}
}

// mint is InitProducerId: the first mint of a role takes a new producer id
// at epoch 0, each later one the next epoch. It fences every earlier token.
func (c *specCluster) mint(role coordination.Role) coordination.FencingToken {
	c.mu.Lock()
	defer c.mu.Unlock()
	current, ok := c.tokens[role]
	var next coordination.FencingToken
	var err error
	if !ok {
		next, err = coordination.NewFencingToken(c.nextID, 0)
		c.nextID++
	} else {
		next, err = coordination.NewFencingToken(current.ProducerID(), current.ProducerEpoch()+1)
	}
	if err != nil {
		panic(err)
	}
	c.tokens[role] = next
	c.mints[role]++
	return next
}

// mintCount returns how many epochs the role used up.
func (c *specCluster) mintCount(role coordination.Role) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mints[role]
}

// token returns the coordinator's token of the role.
func (c *specCluster) token(role coordination.Role) (coordination.FencingToken, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	token, ok := c.tokens[role]
	return token, ok
}

// records returns a copy of the log of one partition.
func (c *specCluster) records(partition coordination.TopicPartition) []coordination.StateRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.logs[partition])
}

// before runs hook once, right before the next call named op ("WriteLease",
// "AcquireEpoch", "Append", "ReadPartition", "DescribeEpoch") of any client.
func (c *specCluster) before(op string, hook func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.beforeCall[op] = hook
}

// fail makes the next call named op of any client return err.
func (c *specCluster) fail(op string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failNext[op] = err
}

// count returns how many calls named op the clients made.
func (c *specCluster) count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[op]
}

func (c *specCluster) enter(ctx context.Context, t *specTransport, op string) error {
	c.mu.Lock()
	c.calls[op]++
	hook := c.beforeCall[op]
	delete(c.beforeCall, op)
	failure := c.failNext[op]
	delete(c.failNext, op)
	c.mu.Unlock()
	if hook != nil {
		hook()
	}
	t.mu.Lock()
	cut := t.cut
	t.mu.Unlock()
	switch {
	case cut:
		return fmt.Errorf("spec transport: %s: %w", op, errSpecCut)
	case failure != nil:
		return failure
	}
	return ctx.Err()
}

func (c *specCluster) appendLocked(partition coordination.TopicPartition, key, value []byte) {
	log := c.logs[partition]
	c.logs[partition] = append(log, coordination.StateRecord{Offset: int64(len(log)), Key: slices.Clone(key), Value: slices.Clone(value)})
}

// specTransport is the client of one member process.
type specTransport struct {
	cluster *specCluster
	mu      sync.Mutex
	minted  map[coordination.Role]coordination.FencingToken
	cut     bool // every call fails, as for a process that lost the cluster
}

// setCut cuts the client off the cluster, or heals it.
func (t *specTransport) setCut(cut bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cut = cut
}

var _ coordination.Transport = (*specTransport)(nil)

func (t *specTransport) AcquireEpoch(ctx context.Context, role coordination.Role) (coordination.FencingToken, error) {
	if err := t.cluster.enter(ctx, t, "AcquireEpoch"); err != nil {
		return coordination.NoEpoch, err
	}
	token := t.cluster.mint(role)
	t.mu.Lock()
	t.minted[role] = token
	t.mu.Unlock()
	return token, nil
}

func (t *specTransport) DescribeEpoch(ctx context.Context, role coordination.Role) (coordination.FencingToken, bool, error) {
	if err := t.cluster.enter(ctx, t, "DescribeEpoch"); err != nil {
		return coordination.NoEpoch, false, err
	}
	token, ok := t.cluster.token(role)
	if !ok {
		return coordination.NoEpoch, false, nil
	}
	return token, true, nil
}

func (t *specTransport) ReadPartition(ctx context.Context, partition coordination.TopicPartition) ([]coordination.StateRecord, error) {
	if err := t.cluster.enter(ctx, t, "ReadPartition"); err != nil {
		return nil, err
	}
	return t.cluster.records(partition), nil
}

func (t *specTransport) Append(ctx context.Context, partition coordination.TopicPartition, key, value []byte) error {
	if err := t.cluster.enter(ctx, t, "Append"); err != nil {
		return err
	}
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	t.cluster.appendLocked(partition, key, value)
	return nil
}

// WriteLease writes under the token that this client minted for the role
// of the key, as a transactional producer does, and refuses a token that
// is not the coordinator's with an error that wraps ErrFenced.
func (t *specTransport) WriteLease(ctx context.Context, partition coordination.TopicPartition, token coordination.FencingToken, key, value []byte) error {
	if err := t.cluster.enter(ctx, t, "WriteLease"); err != nil {
		return err
	}
	decoded, err := coordination.DecodeKey(key)
	if err != nil {
		return err
	}
	t.mu.Lock()
	own, ok := t.minted[decoded.Role]
	t.mu.Unlock()
	if !ok || own != token {
		return fmt.Errorf("spec transport: %s was not minted by this client: %w", token, coordination.ErrFenced)
	}
	t.cluster.mu.Lock()
	defer t.cluster.mu.Unlock()
	if current := t.cluster.tokens[decoded.Role]; current != token {
		return fmt.Errorf("spec transport: INVALID_PRODUCER_EPOCH: %s is not the current %s: %w", token, current, coordination.ErrFenced)
	}
	t.cluster.appendLocked(partition, key, value)
	return nil
}

// errSpecInjected is an error that a test injects into one call, and
// errSpecCut the error of a client that is cut off.
var (
	errSpecInjected = errors.New("spec transport: injected failure")
	errSpecCut      = errors.New("the member cannot reach the cluster")
)
