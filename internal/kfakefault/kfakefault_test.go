package kfakefault

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// setup starts a kfake cluster with topic t of one partition, an injector,
// and a producer without idempotence (so that a request applied twice
// shows as two records) whose read timeout is short (so that it gives up
// on a held request and sends it again soon).
func setup(t *testing.T) (*kfake.Cluster, *Injector, *kgo.Client) {
	t.Helper()
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	inj, err := New(cluster)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(inj.Close)
	producer, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.DefaultProduceTopic("t"),
		kgo.DisableIdempotentWrite(), kgo.ProducerLinger(0),
		kgo.ProduceRequestTimeout(200*time.Millisecond), kgo.RequestTimeoutOverhead(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	return cluster, inj, producer
}

// records returns the number of records of t.
func records(t *testing.T, client *kgo.Client) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(client).ListEndOffsets(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	end, ok := ends.Lookup("t", 0)
	if !ok || end.Err != nil {
		t.Fatalf("end offset of t-0: %v, %v", ok, end.Err)
	}
	return end.Offset
}

func produce(t *testing.T, client *kgo.Client) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	start := time.Now()
	if err := client.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
	return time.Since(start)
}

func wait(t *testing.T, a *Armed) Hit {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	hit, err := a.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if hit.Err != nil {
		t.Fatalf("the fault's own request failed: %v", hit.Err)
	}
	return hit
}

// TestEachFaultHappens shows each mode at work on a Produce: a delay
// delays it, a lost answer, a hold and a duplicate each make the cluster
// apply it once more than the client knows (two records for one produce),
// and an error code reaches the client.
func TestEachFaultHappens(t *testing.T) {
	t.Run("delay", func(t *testing.T) {
		_, inj, producer := setup(t)
		produce(t, producer) // connect first
		a := inj.Inject(Fault{Key: kmsg.Produce, Mode: Delay, Delay: 150 * time.Millisecond})
		if took := produce(t, producer); took < 150*time.Millisecond {
			t.Fatalf("a delayed produce took %v; want 150ms or more", took)
		}
		if hit := wait(t, a); hit.Key != kmsg.Produce.Int16() || hit.Applied != 0 {
			t.Fatalf("Hit = %+v", hit)
		}
		if n := records(t, producer); n != 2 {
			t.Fatalf("%d records; want 2 (a delay applies the request once)", n)
		}
	})
	for _, mode := range []Mode{LoseAnswer, Hold, Duplicate} {
		t.Run(string(mode), func(t *testing.T) {
			_, inj, producer := setup(t)
			a := inj.Inject(Fault{Key: kmsg.Produce, Mode: mode})
			produce(t, producer)
			hit := wait(t, a)
			if hit.Applied != 1 {
				t.Fatalf("Hit = %+v; want the request applied once apart", hit)
			}
			if mode == Hold && !hit.Resent {
				t.Fatalf("Hit = %+v; want the held request applied after the client's resend", hit)
			}
			if n := records(t, producer); n != 2 {
				t.Fatalf("%d records after one acknowledged produce; want 2 (the cluster applied it twice)", n)
			}
		})
	}
	t.Run("reset-hold", func(t *testing.T) {
		_, inj, producer := setup(t)
		produce(t, producer) // connect first
		a := inj.Inject(Fault{Key: kmsg.Produce, Mode: ResetHold, After: 1})
		produce(t, producer)
		hit := wait(t, a)
		if hit.Applied != 1 || !hit.Resent {
			t.Fatalf("Hit = %+v; want the request applied once apart, after the client's resend", hit)
		}
		if n := records(t, producer); n != 3 {
			t.Fatalf("%d records after two acknowledged produces; want 3 (the broken one applied late)", n)
		}
	})
	t.Run("error", func(t *testing.T) {
		_, inj, producer := setup(t)
		a := inj.Inject(Fault{Key: kmsg.InitProducerID, Mode: ErrorCode, Code: kerr.ConcurrentTransactions.Code})
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, producer)
		if err != nil || resp.ErrorCode != kerr.ConcurrentTransactions.Code {
			t.Fatalf("InitProducerId = %+v, %v; want CONCURRENT_TRANSACTIONS", resp, err)
		}
		wait(t, a)
		if resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, producer); err != nil || resp.ErrorCode != 0 {
			t.Fatalf("the next InitProducerId = %+v, %v; want no error (the fault takes one request)", resp, err)
		}
	})
	t.Run("applied-error", func(t *testing.T) {
		_, inj, producer := setup(t)
		produce(t, producer) // connect first
		a := inj.Inject(Fault{Key: kmsg.Produce, Mode: AppliedError, Code: kerr.NotEnoughReplicasAfterAppend.Code})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		// The producer retries the retriable code: the record lands twice,
		// once applied apart and once as the client's retry.
		if err := producer.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		if hit := wait(t, a); hit.Applied != 1 {
			t.Fatalf("Hit = %+v; want the request applied once apart", hit)
		}
		if n := records(t, producer); n != 3 {
			t.Fatalf("%d records after two acknowledged produces, one answered with an error after it was applied; want 3", n)
		}
	})
}

func TestMatchPicksTheRequest(t *testing.T) {
	_, inj, producer := setup(t)
	a := inj.Inject(Fault{Key: kmsg.InitProducerID, Mode: ErrorCode, Code: kerr.ConcurrentTransactions.Code,
		Match: func(req kmsg.Request) bool { return req.(*kmsg.InitProducerIDRequest).TransactionTimeoutMillis == 7 }})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if resp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, producer); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("an InitProducerId that Match refuses = %+v, %v; want no error", resp, err)
	}
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = 7
	if resp, err := req.RequestWith(ctx, producer); err != nil || resp.ErrorCode != kerr.ConcurrentTransactions.Code {
		t.Fatalf("the matching InitProducerId = %+v, %v; want CONCURRENT_TRANSACTIONS", resp, err)
	}
	wait(t, a)
}

func TestErrorResponseRefusesAnUnknownKey(t *testing.T) {
	if _, err := ErrorResponse(kmsg.NewPtrHeartbeatRequest(), 1); err == nil {
		t.Fatal("ErrorResponse(Heartbeat) = nil error; want one that names the key")
	}
}

// TestErrorResponseEncodesAtEveryVersion builds the error answer of each
// request it knows, at every version kmsg knows, and encodes it: an
// answer that a kfake cluster could not write would fail a fault silently.
func TestErrorResponseEncodesAtEveryVersion(t *testing.T) {
	for _, key := range []kmsg.Key{kmsg.InitProducerID, kmsg.EndTxn, kmsg.AddPartitionsToTxn, kmsg.Produce,
		kmsg.FindCoordinator, kmsg.DescribeTransactions, kmsg.ListOffsets, kmsg.Metadata} {
		req := kmsg.RequestForKey(key.Int16())
		for v := int16(0); v <= req.MaxVersion(); v++ {
			req := kmsg.RequestForKey(key.Int16())
			req.SetVersion(v)
			resp, err := ErrorResponse(req, kerr.NotCoordinator.Code)
			if err != nil {
				t.Fatalf("%s v%d: %v", kmsg.NameForKey(key.Int16()), v, err)
			}
			if resp.GetVersion() != v || len(resp.AppendTo(nil)) == 0 {
				t.Fatalf("%s v%d: an answer of version %d", kmsg.NameForKey(key.Int16()), v, resp.GetVersion())
			}
		}
	}
}
