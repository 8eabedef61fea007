package coordination_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/coordinationtest"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// TestKafkaAcquireRefusesABrokerAboveTheEndTxnCap (issue 28): a broker
// whose lowest EndTxn version is above the transport's cap of 4 (Kafka
// removes old versions, KIP-896) gets ErrMisconfigured from
// AcquireLeadership, naming EndTxn and both ranges, before any
// registration or mint. Before the fix the campaign registered, minted,
// failed its first lease, and minted again until its context ended.
func TestKafkaAcquireRefusesABrokerAboveTheEndTxnCap(t *testing.T) {
	c := kafkatest.Fake(t)
	_, options := ktStateTopic(t, c, ktTransport(t, c), 4)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	real, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, c.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	c.Fake.ControlKey(kmsg.ApiVersions.Int16(), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		resp := *real
		resp.Version = kreq.GetVersion()
		resp.ApiKeys = append([]kmsg.ApiVersionsResponseApiKey(nil), real.ApiKeys...)
		for i := range resp.ApiKeys {
			if resp.ApiKeys[i].ApiKey == kmsg.EndTxn.Int16() {
				resp.ApiKeys[i].MinVersion, resp.ApiKeys[i].MaxVersion = 5, 5
			}
		}
		return &resp, nil, true
	})
	var mints, produces atomic.Int64
	for key, count := range map[kmsg.Key]*atomic.Int64{kmsg.InitProducerID: &mints, kmsg.Produce: &produces} {
		c.Fake.ControlKey(key.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
			c.Fake.KeepControl()
			count.Add(1)
			return nil, nil, false
		})
	}

	transport := ktTransport(t, c) // new connections: they read the narrowed ranges
	_, err = coordination.AcquireLeadership(ctx, transport, ktRole(t, "floor"), fxMember(t, "node-1"),
		append(options, coordination.WithLeaseConfig(ktLease), coordination.WithPollInterval(250*time.Millisecond))...)
	if !errors.Is(err, coordination.ErrMisconfigured) || ctx.Err() != nil {
		t.Fatalf("AcquireLeadership = %v (context %v); want ErrMisconfigured at once", err, ctx.Err())
	}
	for _, want := range []string{"EndTxn", "serves versions 5 to 5", "sends versions 0 to 4"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if n, p := mints.Load(), produces.Load(); n != 0 || p != 0 {
		t.Errorf("%d InitProducerId and %d Produce requests were sent; want none before the check", n, p)
	}
	if _, err := transport.AcquireEpoch(ctx, ktRole(t, "floor")); !errors.Is(err, coordination.ErrMisconfigured) || mints.Load() != 0 {
		t.Errorf("AcquireEpoch = %v after %d InitProducerId; want ErrMisconfigured and none", err, mints.Load())
	}
}

// TestNewKafkaTransportRejectsALeaseAboveInt32Millis (issue 28): the lease
// duration is the transaction timeout of every role, an int32 of
// milliseconds in InitProducerId. A lease of 2^32 ms + 5 s was accepted and
// reached the broker as 5 s; it is refused, with the field and the limit.
func TestNewKafkaTransportRejectsALeaseAboveInt32Millis(t *testing.T) {
	long, err := coordination.NewLeaseConfig(time.Duration(1<<32)*time.Millisecond+5*time.Second, 10*time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := coordination.NewKafkaTransport(long, "localhost:1")
	if err == nil {
		transport.Close()
		t.Fatal("NewKafkaTransport accepted a lease of 2^32 ms + 5 s")
	}
	for _, want := range []string{"TransactionTimeoutMillis", "2147483647"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	longest, err := coordination.NewLeaseConfig((1<<31-1)*time.Millisecond, 10*time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	transport, err = coordination.NewKafkaTransport(longest, "localhost:1")
	if err != nil {
		t.Fatalf("NewKafkaTransport with a lease of MaxInt32 ms: %v", err)
	}
	transport.Close()
}

// TestWithPartitionsRejectsACountAboveInt32 (issue 28): a partition count
// goes to CreateTopics as an int32; a count of 2^31 is refused by the
// option, with the limit, instead of wrapping.
func TestWithPartitionsRejectsACountAboveInt32(t *testing.T) {
	_, err := coordination.AcquireLeadership(context.Background(), coordinationtest.NewCluster().Transport("a"), fxRole(t, "controller"),
		fxMember(t, "node-1"), coordination.WithPartitions(1<<31))
	if err == nil || !strings.Contains(err.Error(), "WithPartitions") || !strings.Contains(err.Error(), "2147483647") {
		t.Fatalf("AcquireLeadership with WithPartitions(2^31) = %v; want an error that names the option and the limit", err)
	}
}
