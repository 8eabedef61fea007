package kafkatest

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Features is what a broker advertises in its ApiVersions response
// (KIP-511, KIP-584): the version range of every request key it serves,
// and the finalized level of every feature of the cluster.
type Features struct {
	// Keys maps a request key (kmsg.Key) to the [min, max] versions the
	// broker serves; a key it does not serve is absent.
	Keys map[int16][2]int16

	// Finalized maps a feature name (transaction.version, metadata.version,
	// group.version, ...) to its finalized level. A broker lists a feature
	// only above level 0, and a Kafka 3.x broker lists no transaction.version.
	Finalized map[string]int16
}

// MaxVersion returns the highest version of key the broker serves, and
// whether it serves the key at all.
func (f Features) MaxVersion(key kmsg.Key) (int16, bool) {
	r, ok := f.Keys[key.Int16()]
	return r[1], ok
}

// TransactionVersion returns the cluster's finalized transaction.version:
// 2 on a cluster formatted by Kafka 4.0 or later with the defaults (an
// EndTxn of version 5 bumps the epoch at every commit, KIP-890 part 2; a
// Produce of version 12 adds its partition to the transaction), 1 on one
// upgraded from 3.x and never finalized, or formatted with
// --feature transaction.version=1, and 0 on Kafka 3.x.
func (f Features) TransactionVersion() int16 { return f.Finalized["transaction.version"] }

// Features asks the cluster's first answering broker for its ApiVersions
// (the newest version the client and the broker share) and returns what it
// advertises. It fails the test when no broker answers within 30 s.
func (c *Cluster) Features(t testing.TB) Features {
	t.Helper()
	client := c.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, client)
	if err == nil && resp.ErrorCode != 0 {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		t.Fatalf("kafkatest: ApiVersions of %v: %v", c.Brokers, err)
	}
	f := Features{Keys: make(map[int16][2]int16), Finalized: make(map[string]int16)}
	for _, k := range resp.ApiKeys {
		f.Keys[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	for _, ff := range resp.FinalizedFeatures {
		f.Finalized[ff.Name] = ff.MaxVersionLevel
	}
	return f
}
