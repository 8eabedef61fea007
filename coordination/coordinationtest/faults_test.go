package coordinationtest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

// everyCall makes one call of each Op on the transport, the writes under
// token and the mint last, and returns the errors by Op.
func everyCall(ctx context.Context, transport *coordinationtest.Transport, role coordination.Role, token coordination.FencingToken) map[coordinationtest.Op]error {
	errs := make(map[coordinationtest.Op]error)
	_, _, errs[coordinationtest.OpDescribeEpoch] = transport.DescribeEpoch(ctx, role)
	_, errs[coordinationtest.OpReadPartition] = transport.ReadPartition(ctx, stateTP)
	errs[coordinationtest.OpAppend] = transport.Append(ctx, stateTP, []byte("k"), []byte("v"))
	errs[coordinationtest.OpWriteLease] = transport.WriteLease(ctx, stateTP, token, []byte("lease"), []byte("v"))
	errs[coordinationtest.OpWriteGuarded] = transport.WriteGuarded(ctx, token, []coordination.GuardedRecord{{Topic: "commands", Value: []byte("v")}})
	_, errs[coordinationtest.OpAcquireEpoch] = transport.AcquireEpoch(ctx, role)
	return errs
}

var allOps = []coordinationtest.Op{
	coordinationtest.OpAcquireEpoch, coordinationtest.OpDescribeEpoch, coordinationtest.OpReadPartition,
	coordinationtest.OpAppend, coordinationtest.OpWriteLease, coordinationtest.OpWriteGuarded,
}

func TestCutFailsEveryCallWithUnreachable(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	role := mustRole(t, "controller")
	ctx := context.Background()
	token := acquire(t, a, role)

	a.Cut()
	a.Cut()
	for op, err := range everyCall(ctx, a, role, token) {
		if !errors.Is(err, coordinationtest.ErrUnreachable) || errors.Is(err, coordination.ErrFenced) {
			t.Errorf("%s while cut = %v, want ErrUnreachable and no fence", op, err)
		}
	}
	if _, _, err := a.ReadPartitionFrom(ctx, stateTP, 0); !errors.Is(err, coordinationtest.ErrUnreachable) {
		t.Errorf("ReadPartitionFrom while cut = %v, want ErrUnreachable", err)
	}
	if cluster.Token(role) != token || cluster.EndOffset(stateTP) != 0 || len(cluster.Records(commandsTP)) != 0 {
		t.Fatal("a call of a cut-off member reached the cluster")
	}
	if got := a.Calls(coordinationtest.OpAcquireEpoch); got != 2 {
		t.Errorf("Calls(AcquireEpoch) = %d, want 2: refused calls count", got)
	}

	a.Heal()
	if err := a.WriteLease(ctx, stateTP, token, []byte("lease"), []byte("v")); err != nil {
		t.Fatalf("after Heal, a write under the token minted before the cut: %v", err)
	}
	for op, err := range everyCall(ctx, a, role, token) {
		if err != nil {
			t.Errorf("%s after Heal: %v", op, err)
		}
	}
}

func TestFailNext(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	role := mustRole(t, "controller")
	ctx := context.Background()
	token := acquire(t, a, role)
	transient := errors.New("NOT_ENOUGH_REPLICAS")

	for _, op := range allOps {
		a.FailNext(op, transient)
		for other, err := range everyCall(ctx, a, role, token) {
			switch {
			case other == op && !errors.Is(err, transient):
				t.Errorf("%s after FailNext(%s) = %v, want the injected error", other, op, err)
			case other != op && err != nil:
				t.Errorf("%s after FailNext(%s) = %v, want nil", other, op, err)
			}
		}
		token = cluster.Token(role)
	}
}

func TestFailNextChangesNothing(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	role := mustRole(t, "controller")
	ctx := context.Background()
	token := acquire(t, a, role)
	boom := errors.New("boom")

	a.FailNext(coordinationtest.OpAppend, boom)
	a.FailNext(coordinationtest.OpAppend, boom)
	for i := range 2 {
		if err := a.Append(ctx, stateTP, []byte("k"), []byte("v")); !errors.Is(err, boom) {
			t.Fatalf("Append %d = %v, want the queued failure", i, err)
		}
	}
	a.FailNext(coordinationtest.OpWriteLease, boom)
	if err := a.WriteLease(ctx, stateTP, token, []byte("lease"), []byte("v")); !errors.Is(err, boom) {
		t.Fatalf("WriteLease = %v, want the injected failure", err)
	}
	if got := cluster.EndOffset(stateTP); got != 0 {
		t.Fatalf("failed calls wrote %d records", got)
	}
	if err := a.Append(ctx, stateTP, []byte("k"), []byte("v")); err != nil {
		t.Fatalf("Append after the queue drained: %v", err)
	}
	a.FailNext(coordinationtest.OpWriteLease, coordination.ErrFenced)
	if err := a.WriteLease(ctx, stateTP, token, []byte("lease"), []byte("v")); !errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("an injected fence = %v, want ErrFenced", err)
	}
	if err := a.WriteLease(ctx, stateTP, token, []byte("lease"), []byte("v")); err != nil {
		t.Fatalf("an injected fence deposed the holder at the cluster: %v", err)
	}
}

func TestLoseNextReply(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	role := mustRole(t, "controller")
	ctx := context.Background()
	timeout := errors.New("request timed out")

	a.LoseNextReply(coordinationtest.OpAppend, timeout)
	if err := a.Append(ctx, stateTP, []byte("k"), []byte("v")); !errors.Is(err, timeout) {
		t.Fatalf("Append = %v, want the injected error", err)
	}
	if got := cluster.EndOffset(stateTP); got != 1 {
		t.Fatalf("an Append whose reply was lost wrote %d records, want 1", got)
	}

	a.LoseNextReply(coordinationtest.OpAcquireEpoch, timeout)
	if _, err := a.AcquireEpoch(ctx, role); !errors.Is(err, timeout) {
		t.Fatalf("AcquireEpoch = %v, want the injected error", err)
	}
	minted := cluster.Token(role)
	if minted == coordination.NoEpoch {
		t.Fatal("an AcquireEpoch whose reply was lost minted nothing")
	}
	if err := a.WriteLease(ctx, stateTP, minted, []byte("lease"), []byte("v")); !errors.Is(err, coordination.ErrFenced) {
		t.Fatalf("a write under a token whose mint reply was lost = %v, want ErrFenced", err)
	}

	token := acquire(t, a, role)
	a.LoseNextReply(coordinationtest.OpWriteLease, timeout)
	if err := a.WriteLease(ctx, stateTP, token, []byte("lease"), []byte("v")); !errors.Is(err, timeout) {
		t.Fatalf("WriteLease = %v, want the injected error", err)
	}
	if got := cluster.EndOffset(stateTP); got != 2 {
		t.Fatalf("end offset = %d, want 2", got)
	}
}

func TestCancelledContextChangesNothing(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	role := mustRole(t, "controller")
	token := acquire(t, a, role)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for op, err := range everyCall(ctx, a, role, token) {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context = %v, want context.Canceled", op, err)
		}
	}
	if cluster.Token(role) != token || cluster.EndOffset(stateTP) != 0 {
		t.Fatal("a call with a cancelled context reached the cluster")
	}
}

func TestBlockHoldsCallsUntilRelease(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	ctx := context.Background()
	release := a.Block(coordinationtest.OpAppend)

	done := make(chan error)
	go func() { done <- a.Append(ctx, stateTP, []byte("k"), []byte("v")) }()
	a.WaitCalls(coordinationtest.OpAppend, 1)
	select {
	case err := <-done:
		t.Fatalf("a blocked Append returned %v", err)
	default:
	}
	if got := cluster.EndOffset(stateTP); got != 0 {
		t.Fatalf("a held Append reached the cluster: end offset %d", got)
	}
	if _, err := a.ReadPartition(ctx, stateTP); err != nil {
		t.Fatalf("a gate of Append held ReadPartition: %v", err)
	}
	release()
	release()
	if err := <-done; err != nil {
		t.Fatalf("released Append: %v", err)
	}
	if got := cluster.EndOffset(stateTP); got != 1 {
		t.Fatalf("end offset after release = %d, want 1", got)
	}
	if err := a.Append(ctx, stateTP, []byte("k"), []byte("v")); err != nil {
		t.Fatalf("Append after release: %v", err)
	}
}

func TestBlockEndsWithTheContext(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	release := a.Block(coordinationtest.OpAppend)
	defer release()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- a.Append(ctx, stateTP, []byte("k"), []byte("v")) }()
	a.WaitCalls(coordinationtest.OpAppend, 1)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("held Append after cancel = %v, want context.Canceled", err)
	}
	release()
	if got := cluster.EndOffset(stateTP); got != 0 {
		t.Fatalf("a held call whose context ended wrote: end offset %d", got)
	}
}

func TestBlockThenCutFailsOnRelease(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	ctx := context.Background()
	token := acquire(t, a, mustRole(t, "controller"))
	release := a.Block(coordinationtest.OpWriteLease)
	done := make(chan error)
	go func() { done <- a.WriteLease(ctx, stateTP, token, []byte("lease"), []byte("v")) }()
	a.WaitCalls(coordinationtest.OpWriteLease, 1)
	a.Cut()
	release()
	if err := <-done; !errors.Is(err, coordinationtest.ErrUnreachable) {
		t.Fatalf("held WriteLease released after a cut = %v, want ErrUnreachable", err)
	}
	if got := cluster.EndOffset(stateTP); got != 0 {
		t.Fatalf("end offset %d, want 0", got)
	}
}

func TestGatesStack(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a := cluster.Transport("a")
	ctx := context.Background()
	first := a.Block(coordinationtest.OpAppend)
	second := a.Block(coordinationtest.OpAppend)
	done := make(chan error)
	go func() { done <- a.Append(ctx, stateTP, []byte("k"), []byte("v")) }()
	a.WaitCalls(coordinationtest.OpAppend, 1)
	first()
	select {
	case err := <-done:
		t.Fatalf("Append returned %v with one of two gates closed", err)
	default:
	}
	second()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestOpString(t *testing.T) {
	for op, want := range map[coordinationtest.Op]string{
		coordinationtest.OpAcquireEpoch:  "AcquireEpoch",
		coordinationtest.OpDescribeEpoch: "DescribeEpoch",
		coordinationtest.OpReadPartition: "ReadPartition",
		coordinationtest.OpAppend:        "Append",
		coordinationtest.OpWriteLease:    "WriteLease",
		coordinationtest.OpWriteGuarded:  "WriteGuarded",
		coordinationtest.Op(0):           "Op(0)",
	} {
		if got := op.String(); got != want {
			t.Errorf("Op(%d).String() = %q, want %q", int(op), got, want)
		}
	}
}

func TestUnknownOpPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Calls(Op(0)) did not panic")
		}
	}()
	coordinationtest.NewCluster().Transport("a").Calls(coordinationtest.Op(0))
}

func TestNilInjectedErrorPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("FailNext(op, nil) did not panic")
		}
	}()
	coordinationtest.NewCluster().Transport("a").FailNext(coordinationtest.OpAppend, nil)
}

func TestStaleReads(t *testing.T) {
	cluster := coordinationtest.NewCluster()
	a, b := cluster.Transport("a"), cluster.Transport("b")
	ctx := context.Background()
	if err := b.Append(ctx, stateTP, []byte("k"), []byte("before")); err != nil {
		t.Fatal(err)
	}
	catchUp := a.StaleReads()
	for _, w := range []*coordinationtest.Transport{a, b} {
		if err := w.Append(ctx, stateTP, []byte("k"), []byte("after")); err != nil {
			t.Fatal(err)
		}
		if err := w.Append(ctx, commandsTP, []byte("k"), []byte("after")); err != nil {
			t.Fatal(err)
		}
	}
	if got := cluster.EndOffset(stateTP); got != 3 {
		t.Fatalf("appends of a stale reader did not land: end offset %d, want 3", got)
	}
	records, err := a.ReadPartition(ctx, stateTP)
	if err != nil || len(records) != 1 || string(records[0].Value) != "before" {
		t.Fatalf("stale ReadPartition = %d records, %v; want the one before StaleReads", len(records), err)
	}
	if records, err := a.ReadPartition(ctx, commandsTP); err != nil || len(records) != 0 {
		t.Fatalf("stale ReadPartition of a partition created later = %d records, %v; want none", len(records), err)
	}
	records, next, err := a.ReadPartitionFrom(ctx, stateTP, 0)
	if err != nil || len(records) != 1 || next != 1 {
		t.Fatalf("stale ReadPartitionFrom(0) = %d records, next %d, %v; want 1, 1, nil", len(records), next, err)
	}
	if records, next, err := a.ReadPartitionFrom(ctx, stateTP, 3); err != nil || len(records) != 0 || next != 3 {
		t.Fatalf("stale ReadPartitionFrom(3) = %d records, next %d, %v; want 0, 3, nil", len(records), next, err)
	}
	if records, err := b.ReadPartition(ctx, stateTP); err != nil || len(records) != 3 {
		t.Fatalf("another transport's read = %d records, %v; want 3", len(records), err)
	}
	catchUp()
	catchUp()
	records, next, err = a.ReadPartitionFrom(ctx, stateTP, next)
	if err != nil || len(records) != 2 || next != 3 {
		t.Fatalf("ReadPartitionFrom after catchUp = %d records, next %d, %v; want 2, 3, nil", len(records), next, err)
	}
}
