package kafkawire

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// libraryRequest is one request the library or its CLI sends, and the
// client of the Wire that sends it: the transactional client (and the
// reader's), whose versions leaseVersions caps, or the plain client
// (kversion.Stable, or the caller's MaxVersions).
type libraryRequest struct {
	key    kmsg.Key
	capped bool
	sentBy string
}

// libraryRequests is every request the library (package coordination
// through this package) and cmd/krabka-coord send. It is the one list the
// broker matrix (scripts/matrix.sh) checks, on each broker, against what
// the broker serves and against the requests its tests were seen to send.
// When kafkawire holds its own table of requests and caps, this list
// becomes that table.
var libraryRequests = []libraryRequest{
	{kmsg.ApiVersions, false, "every connection (franz-go)"},
	{kmsg.SASLHandshake, false, "a SASL connection (franz-go)"},
	{kmsg.SASLAuthenticate, false, "a SASL connection (franz-go)"},
	{kmsg.Metadata, false, "leaders, topics, brokers (leaders.go, requests.go, consumer.go)"},
	{kmsg.FindCoordinator, true, "the transaction coordinator of a role (coordinator.go)"},
	{kmsg.InitProducerID, true, "a mint (mint.go; the CLI's fence); the idempotent Append"},
	{kmsg.DescribeTransactions, true, "DescribeEpoch (mint.go; describe, list, watch)"},
	{kmsg.AddPartitionsToTxn, true, "a lease write, a guarded write (transaction.go)"},
	{kmsg.Produce, true, "a lease write, a guarded write (produce.go)"},
	{kmsg.EndTxn, true, "the commit or abort (transaction.go)"},
	{kmsg.Fetch, true, "the reader's long polls, read_committed (fetch_request.go); Consumer"},
	{kmsg.ListOffsets, true, "the last stable offset, the log start (requests.go)"},
	{kmsg.CreateTopics, false, "EnsureStateTopic, create-topic (topic.go)"},
	{kmsg.DescribeConfigs, false, "the state topic's and the brokers' configs (topic.go, failure_detection.go)"},
}

// TestKafkaNegotiatedVersions asks the broker for its ApiVersions and
// prints, for every request of libraryRequests, the broker's range, the
// library's cap and the version the two negotiate, one `krabka-api` line
// each (scripts/matrix.sh collects them per broker); it fails when the
// broker does not serve a request the library sends, or serves none of
// the versions the library may send.
func TestKafkaNegotiatedVersions(t *testing.T) {
	c := kafkatest.Kafka(t)
	features := c.Features(t)
	plain, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	capped, stable := leaseVersions(plain), kversion.Stable()
	var finalized []string
	for name, level := range features.Finalized {
		finalized = append(finalized, fmt.Sprintf("%s=%d", name, level))
	}
	slices.Sort(finalized)
	t.Logf("krabka-features transaction.version=%d finalized: %s", features.TransactionVersion(), strings.Join(finalized, " "))
	seen := make(map[kmsg.Key]bool)
	for _, r := range libraryRequests {
		if seen[r.key] {
			t.Fatalf("libraryRequests lists %s twice", r.key.Name())
		}
		seen[r.key] = true
		versions := stable
		if r.capped {
			versions = capped
		}
		limit, ok := versions.LookupMaxKeyVersion(r.key.Int16())
		if !ok {
			t.Fatalf("the library's client has no version of %s (key %d)", r.key.Name(), r.key)
		}
		span, served := features.Keys[r.key.Int16()]
		if !served {
			t.Errorf("krabka-api key=%d name=%s library=0-%d broker=none negotiated=none: the broker does not serve a request the library sends (%s)", r.key, r.key.Name(), limit, r.sentBy)
			continue
		}
		negotiated := min(limit, span[1])
		if negotiated < span[0] {
			t.Errorf("krabka-api key=%d name=%s library=0-%d broker=%d-%d negotiated=none: no version in common (%s)", r.key, r.key.Name(), limit, span[0], span[1], r.sentBy)
			continue
		}
		t.Logf("krabka-api key=%d name=%s library=0-%d broker=%d-%d negotiated=%d", r.key, r.key.Name(), limit, span[0], span[1], negotiated)
	}
}
