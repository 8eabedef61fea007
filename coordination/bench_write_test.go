package coordination_test

// The cost of Leadership.Write in the library itself, over the in-memory
// transport, where a transaction costs a few hundred nanoseconds instead of
// a millisecond of round trips: what the group commit adds to a lone
// writer, and what 16 writers pay per call when they share transactions.
//
//	go test -run '^$' -bench BenchmarkLeadershipWrite -benchmem ./coordination/

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
)

func benchHolder(b *testing.B) (*coordination.Leadership, *coordinationtest.Transport) {
	b.Helper()
	transport := coordinationtest.NewCluster().Transport("node-1")
	l, err := coordination.AcquireLeadership(context.Background(), transport, fxRole(b, "controller"), fxMember(b, "node-1"))
	if err != nil {
		b.Fatalf("AcquireLeadership: %v", err)
	}
	b.Cleanup(func() { _ = l.Resign(context.Background()) })
	return l, transport
}

var benchRecord = coordination.GuardedRecord{Topic: "commands", Key: []byte("device-1"), Value: make([]byte, 100)}

// BenchmarkLeadershipWriteAlone: one writer, back to back. Each call finds
// nothing in flight and writes its own transaction at once.
func BenchmarkLeadershipWriteAlone(b *testing.B) {
	l, _ := benchHolder(b)
	ctx := context.Background()
	for b.Loop() {
		if err := l.Write(ctx, benchRecord); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLeadershipWrite16: 16 writers at once (8 goroutines per
// GOMAXPROCS on the 2 cores of the bench machine); it reports the calls per
// transaction.
func BenchmarkLeadershipWrite16(b *testing.B) {
	l, transport := benchHolder(b)
	ctx := context.Background()
	before := transport.Calls(coordinationtest.OpWriteGuarded)
	var calls atomic.Int64
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := l.Write(ctx, benchRecord); err != nil {
				b.Error(err)
				return
			}
			calls.Add(1)
		}
	})
	if txns := transport.Calls(coordinationtest.OpWriteGuarded) - before; txns > 0 {
		b.ReportMetric(float64(calls.Load())/float64(txns), "calls/txn")
	}
}
