package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// TestRequestsTableCapsTheTransactionalClient: the caps of the table are
// the versions the transactional client sends (leaseVersions reads them
// from it), and every row of the default versions is a range the library
// can send.
func TestRequestsTableCapsTheTransactionalClient(t *testing.T) {
	lease := leaseVersions(kversion.Stable())
	for key, want := range map[kmsg.Key]int16{kmsg.EndTxn: 4, kmsg.Produce: 11, kmsg.AddPartitionsToTxn: 3} {
		if got, _ := lease.LookupMaxKeyVersion(key.Int16()); got != want {
			t.Errorf("the transactional client sends %s up to v%d, want v%d", key.Name(), got, want)
		}
	}
	for _, r := range Requests(nil) {
		if r.Min > r.Max {
			t.Errorf("%s (%s): range %d to %d is empty", r.Key.Name(), r.Client, r.Min, r.Max)
		}
		if r.Client == "transactional" {
			if capped, _ := lease.LookupMaxKeyVersion(r.Key.Int16()); capped != r.Max {
				t.Errorf("%s: the table says up to v%d, the transactional client sends up to v%d", r.Key.Name(), r.Max, capped)
			}
		}
	}
	// A caller's MaxVersions below a row's Min leaves the row empty, and
	// the check names it.
	old := kversion.Stable()
	old.SetMaxKeyVersion(kmsg.Fetch.Int16(), 3)
	for _, r := range Requests(old) {
		if r.Key == kmsg.Fetch && versionMismatch(r, versionRange{min: 0, max: 17, served: true}) == "" {
			t.Errorf("Fetch at most v3 by the client's options passed the check")
		}
	}
}

// apiVersionsNarrowed makes the fake answer every ApiVersions with its
// own ranges, changed by narrow: a broker that removed old versions
// (KIP-896) or never had new ones.
func apiVersionsNarrowed(t *testing.T, c *kafkatest.Cluster, narrow func(keys []kmsg.ApiVersionsResponseApiKey) []kmsg.ApiVersionsResponseApiKey) {
	t.Helper()
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
		resp.ApiKeys = narrow(append([]kmsg.ApiVersionsResponseApiKey(nil), real.ApiKeys...))
		return &resp, nil, true
	})
}

// countRequests counts the requests of key that the fake handles.
func countRequests(c *kafkatest.Cluster, key kmsg.Key) func() int {
	count := make(chan int, 1)
	count <- 0
	c.Fake.ControlKey(key.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		count <- <-count + 1
		return nil, nil, false
	})
	return func() int { n := <-count; count <- n; return n }
}

// TestCheckVersionsRefusesABrokerThatCannotServeARequest (issue 28): a
// broker whose lowest EndTxn version is above the library's cap of 4, one
// that serves Fetch only below read_committed (v4), and one that does not
// serve DescribeTransactions get an error of class Misconfigured that
// names the API and both ranges, and the wire sends no InitProducerId.
func TestCheckVersionsRefusesABrokerThatCannotServeARequest(t *testing.T) {
	setRange := func(key kmsg.Key, lo, hi int16) func([]kmsg.ApiVersionsResponseApiKey) []kmsg.ApiVersionsResponseApiKey {
		return func(keys []kmsg.ApiVersionsResponseApiKey) []kmsg.ApiVersionsResponseApiKey {
			for i := range keys {
				if keys[i].ApiKey == key.Int16() {
					keys[i].MinVersion, keys[i].MaxVersion = lo, hi
				}
			}
			return keys
		}
	}
	for _, r := range []struct {
		name   string
		narrow func([]kmsg.ApiVersionsResponseApiKey) []kmsg.ApiVersionsResponseApiKey
		want   []string
	}{
		{"EndTxn from v5", setRange(kmsg.EndTxn, 5, 5), []string{"EndTxn (transactional)", "serves versions 5 to 5", "sends versions 0 to 4"}},
		{"Fetch below v4", setRange(kmsg.Fetch, 0, 3), []string{"Fetch (reader)", "serves versions 0 to 3", "sends versions 4 to "}},
		{"no DescribeTransactions", func(keys []kmsg.ApiVersionsResponseApiKey) []kmsg.ApiVersionsResponseApiKey {
			for i := range keys {
				if keys[i].ApiKey == kmsg.DescribeTransactions.Int16() {
					return append(keys[:i], keys[i+1:]...)
				}
			}
			return keys
		}, []string{"DescribeTransactions (transactional)", "does not serve it at all"}},
	} {
		t.Run(r.name, func(t *testing.T) {
			c := kafkatest.Fake(t)
			apiVersionsNarrowed(t, c, r.narrow)
			mints := countRequests(c, kmsg.InitProducerID)
			w, err := New(Config{Brokers: c.Brokers, TxnTimeout: 10 * time.Second, RenewInterval: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = w.CheckVersions(ctx, "connect")
			var e *Error
			if !errors.As(err, &e) || e.Class != Misconfigured {
				t.Fatalf("CheckVersions = %v; want an *Error of class Misconfigured", err)
			}
			for _, want := range r.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not say %q: %v", want, err)
				}
			}
			if n := mints(); n != 0 {
				t.Errorf("%d InitProducerId requests were sent", n)
			}
		})
	}
}

// TestCheckVersionsPassesTheBrokers: kfake at its own ranges, kfake capped
// at the versions of Kafka 3.0 (the oldest with DescribeTransactions), and
// the real broker serve every request at the versions the library sends
// them; the check passes once and is not sent again.
func TestCheckVersionsPassesTheBrokers(t *testing.T) {
	for name, c := range map[string]*kafkatest.Cluster{"kfake": kafkatest.Fake(t), "kfake at Kafka 3.0": kafkatest.Fake(t, kfake.MaxVersions(kversion.V3_0_0())), "kafka": kafkatest.Kafka(t)} {
		t.Run(name, func(t *testing.T) {
			hook := apiVersionsHook{count: new(atomic.Int64)}
			w, err := New(Config{Brokers: c.Brokers, Options: []kgo.Opt{kgo.WithHooks(hook)}, TxnTimeout: 10 * time.Second, RenewInterval: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := w.CheckVersions(ctx, "connect"); err != nil {
				t.Fatalf("CheckVersions: %v", err)
			}
			sent := hook.count.Load()
			if err := w.CheckVersions(ctx, "connect again"); err != nil {
				t.Fatalf("CheckVersions again: %v", err)
			}
			if now := hook.count.Load(); now != sent {
				t.Errorf("a check that passed was sent again: %d ApiVersions requests, then %d", sent, now)
			}
			versions, err := w.admin.ApiVersions(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range versions.Sorted() {
				for _, r := range Requests(nil) {
					lo, hi, ok := b.KeyVersions(r.Key.Int16())
					t.Logf("broker %d %-22s %-13s library %2d..%2d broker %2d..%2d served %v", b.NodeID, r.Key.Name(), r.Client, r.Min, r.Max, lo, hi, ok)
				}
			}
		})
	}
}

// apiVersionsHook counts the ApiVersions requests that the wire's clients
// write.
type apiVersionsHook struct{ count *atomic.Int64 }

func (h apiVersionsHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _ time.Duration, _ time.Duration, _ error) {
	if key == kmsg.ApiVersions.Int16() {
		h.count.Add(1)
	}
}

// TestKafkaNegotiatedVersions asks the broker for its ApiVersions and
// prints, for every row of the table of requests ([Requests]: each
// request the library and its CLI send, by client), the broker's range,
// the library's range and the version the two negotiate, one
// `krabka-api` line each (scripts/matrix.sh collects them per broker); it
// fails when the broker does not serve a request the library needs, or
// serves none of the versions the library may send.
func TestKafkaNegotiatedVersions(t *testing.T) {
	c := kafkatest.Kafka(t)
	features := c.Features(t)
	var finalized []string
	for name, level := range features.Finalized {
		finalized = append(finalized, fmt.Sprintf("%s=%d", name, level))
	}
	slices.Sort(finalized)
	t.Logf("krabka-features transaction.version=%d finalized: %s", features.TransactionVersion(), strings.Join(finalized, " "))
	for _, r := range Requests(nil) {
		span, served := features.Keys[r.Key.Int16()]
		switch {
		case !served && r.Optional:
			t.Logf("krabka-api key=%d name=%s library=%d-%d broker=none negotiated=none client=%s (optional: %s)", r.Key, r.Key.Name(), r.Min, r.Max, r.Client, r.Why)
		case !served:
			t.Errorf("krabka-api key=%d name=%s library=%d-%d broker=none negotiated=none client=%s: the broker does not serve a request the library sends (%s)", r.Key, r.Key.Name(), r.Min, r.Max, r.Client, r.Why)
		case min(r.Max, span[1]) < max(r.Min, span[0]):
			t.Errorf("krabka-api key=%d name=%s library=%d-%d broker=%d-%d negotiated=none client=%s: no version in common (%s)", r.Key, r.Key.Name(), r.Min, r.Max, span[0], span[1], r.Client, r.Why)
		default:
			t.Logf("krabka-api key=%d name=%s library=%d-%d broker=%d-%d negotiated=%d client=%s", r.Key, r.Key.Name(), r.Min, r.Max, span[0], span[1], min(r.Max, span[1]), r.Client)
		}
	}
}
