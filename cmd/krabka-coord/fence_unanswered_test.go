package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// fenceTestTimeout marks the InitProducerId that the test itself sends
// (its transaction timeout), which the control function lets through.
const fenceTestTimeout = 12345

// runFence runs fence of role on the cluster with its mint bounded by
// bound, in process.
func runFence(t *testing.T, brokers string, bound time.Duration, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = executeWith(context.Background(), append([]string{"fence", "--brokers", brokers}, args...), &out, &errOut,
		func(string) string { return "" }, func(g *globals) { g.mintBound = bound })
	return code, out.String(), errOut.String()
}

// fenceConcurrent makes every InitProducerId of fence for role answer
// CONCURRENT_TRANSACTIONS; with landed, the coordinator applies the
// first one all the same (the test mints beside it, as a coordinator that
// applied a mint whose answer was lost), so the epoch moves. It returns the
// count of fence's mint attempts.
func fenceConcurrent(t *testing.T, c *kafkatest.Cluster, role string, landed bool) *atomic.Int64 {
	t.Helper()
	attempts := new(atomic.Int64)
	apply := make(chan struct{}, 1)
	c.Fake.ControlKey(kmsg.InitProducerID.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		req := kreq.(*kmsg.InitProducerIDRequest)
		if req.TransactionalID == nil || *req.TransactionalID != role || req.TransactionTimeoutMillis == fenceTestTimeout {
			return nil, nil, false
		}
		if attempts.Add(1) == 1 && landed {
			apply <- struct{}{}
		}
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ErrorCode = kerr.ConcurrentTransactions.Code
		resp.ProducerID, resp.ProducerEpoch = -1, -1
		return resp, nil, true
	})
	client := c.Client(t)
	done := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		select {
		case <-apply:
		case <-ctx.Done():
			return
		}
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID, req.TransactionTimeoutMillis = &role, fenceTestTimeout
		req.ProducerID, req.ProducerEpoch = -1, -1
		kresp, err := req.RequestWith(ctx, client)
		if err != nil || kerr.ErrorForCode(kresp.ErrorCode) != nil {
			t.Errorf("the mint beside fence's: %v, %v", err, kresp)
		}
	}()
	return attempts
}

// TestFenceMintThatLandedWithoutAnAnswer (issue 28): every answer to
// fence's mint is CONCURRENT_TRANSACTIONS until its bound ends, but the
// coordinator applied the first one. fence asks the coordinator, finds a
// newer token than the one before, and succeeds with it, saying that it
// could not clear the lease. Before, it exited 4 and said nothing of the
// role.
func TestFenceMintThatLandedWithoutAnAnswer(t *testing.T) {
	c := kafkatest.Fake(t)
	brokers := strings.Join(c.Brokers, ",")
	if code, _, stderr := runCLI(t, nil, "create-topic", "--brokers", brokers, "--replication-factor", "1"); code != exitOK {
		t.Fatalf("create-topic: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := runFence(t, brokers, 0, "controller", "--force", "--output", "json")
	var first fenceJSON
	if code != exitOK || json.Unmarshal([]byte(stdout), &first) != nil || first.NewToken == nil {
		t.Fatalf("fence --force: exit %d: %s%s", code, stdout, stderr)
	}

	attempts := fenceConcurrent(t, c, "controller", true)
	code, stdout, stderr = runFence(t, brokers, 2*time.Second, "controller", "--output", "json")
	if attempts.Load() == 0 {
		t.Fatalf("fence sent no InitProducerId through the control")
	}
	var result fenceJSON
	if code != exitOK || json.Unmarshal([]byte(stdout), &result) != nil {
		t.Fatalf("fence with a mint that landed unanswered: exit %d, stdout %q, stderr %q; want 0 and the coordinator's token", code, stdout, stderr)
	}
	if result.OldToken == nil || result.OldToken.Token != first.NewToken.Token || result.NewToken == nil || result.NewToken.Token == first.NewToken.Token {
		t.Fatalf("fence = %s; want old token %s and the coordinator's newer one", stdout, first.NewToken.Token)
	}
	if !strings.Contains(stderr, "got no answer") || !strings.Contains(stderr, result.NewToken.Token) {
		t.Fatalf("stderr %q; want a warning that the mint got no answer and names the coordinator's token %s", stderr, result.NewToken.Token)
	}
	t.Logf("%d mint attempts; stderr: %s", attempts.Load(), stderr)
}

// TestFenceMintThatNeverLandedNamesTheHeldToken: every answer is
// CONCURRENT_TRANSACTIONS and the coordinator applied none. fence exits 4,
// and the error names the token that the coordinator still holds.
func TestFenceMintThatNeverLandedNamesTheHeldToken(t *testing.T) {
	c := kafkatest.Fake(t)
	brokers := strings.Join(c.Brokers, ",")
	if code, _, stderr := runCLI(t, nil, "create-topic", "--brokers", brokers, "--replication-factor", "1"); code != exitOK {
		t.Fatalf("create-topic: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := runFence(t, brokers, 0, "controller", "--force", "--output", "json")
	var first fenceJSON
	if code != exitOK || json.Unmarshal([]byte(stdout), &first) != nil || first.NewToken == nil {
		t.Fatalf("fence --force: exit %d: %s%s", code, stdout, stderr)
	}
	fenceConcurrent(t, c, "controller", false)
	code, _, stderr = runFence(t, brokers, 2*time.Second, "controller")
	if code != exitCluster {
		t.Fatalf("fence with a mint that never landed: exit %d, stderr %q; want %d", code, stderr, exitCluster)
	}
	if !strings.Contains(stderr, "still holds token "+first.NewToken.Token) || !strings.Contains(stderr, "not fenced") {
		t.Fatalf("stderr %q; want the token the coordinator still holds, %s, and that the holder is not fenced", stderr, first.NewToken.Token)
	}
	t.Logf("stderr: %s", stderr)
}
