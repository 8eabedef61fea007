package kafkawire

// The request versions: the table of every Kafka request the package sends,
// by API key, with the range of versions it may send (its own caps from
// leaseVersions), and the check at connect of that table against the
// ranges each broker serves (ApiVersions). Kafka removes old request
// versions (KIP-896); a broker whose range misses the package's would
// otherwise refuse a mint or a commit only once the campaign got there.

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// RequestVersions is one Kafka request that the package sends, by API key,
// with the range of versions it may send: Min is the lowest version that
// has the fields the package needs, Max the highest it sends (its own cap,
// else the client's). A broker serves the request when the two ranges
// meet.
type RequestVersions struct {
	Key      kmsg.Key
	Min, Max int16
	// Client names the franz-go client that sends it: "transactional"
	// (capped: see [Wire]), "plain" or "reader".
	Client string
	// Why says what the package sends it for, and why Min and a cap are
	// what they are.
	Why string
	// Optional marks a request of a call that a member may never make
	// (CreateStateTopic, a config read whose failure only skips a
	// warning, SASL): listed, not checked at connect.
	Optional bool
}

// requestTable is the table before the client's versions set each Max;
// cap is the package's own cap (-1 for none), which leaseVersions puts on
// the transactional and the reader's clients.
var requestTable = []struct {
	RequestVersions
	cap int16
}{
	{RequestVersions{Key: kmsg.ApiVersions, Client: "every", Why: "the versions of each broker (franz-go, at every connection)"}, -1},
	{RequestVersions{Key: kmsg.Metadata, Client: "every", Why: "partition leaders, topic ids, the state topic's partitions"}, -1},
	{RequestVersions{Key: kmsg.FindCoordinator, Min: 1, Client: "transactional", Why: "the transaction coordinator of a role's transactional id (key type 1 from v1)"}, -1},
	{RequestVersions{Key: kmsg.InitProducerID, Client: "transactional", Why: "the mint of a role's epoch; the plain producer's idempotent producer id"}, -1},
	{RequestVersions{Key: kmsg.AddPartitionsToTxn, Client: "transactional", Why: "a partition into the open transaction; v4 and up batch producers, for brokers"}, 3},
	{RequestVersions{Key: kmsg.Produce, Min: 3, Client: "transactional", Why: "the leases and guarded writes; capped at 11 so that a commit keeps the epoch (KIP-890 part 2), v3 for the transactional id"}, 11},
	{RequestVersions{Key: kmsg.EndTxn, Client: "transactional", Why: "commit and abort; capped at 4 so that a commit keeps the epoch (KIP-890 part 2 bumps it from v5)"}, 4},
	{RequestVersions{Key: kmsg.DescribeTransactions, Client: "transactional", Why: "the pair the coordinator holds (DescribeEpoch, the Gate, the rival-mint watch)"}, -1},
	{RequestVersions{Key: kmsg.Produce, Min: 3, Client: "plain", Why: "the registrations and heartbeats, idempotent (record batch v2 from v3)"}, -1},
	{RequestVersions{Key: kmsg.Fetch, Min: 4, Client: "reader", Why: "the read_committed reads of the state topic and of the command topics (isolation level from v4)"}, -1},
	{RequestVersions{Key: kmsg.ListOffsets, Min: 2, Client: "reader", Why: "the last stable offset and the high watermark of a read (isolation level from v2)"}, -1},
	{RequestVersions{Key: kmsg.DescribeConfigs, Client: "plain", Why: "cleanup.policy of the state topic, broker.session.timeout.ms: a refusal only skips the check", Optional: true}, -1},
	{RequestVersions{Key: kmsg.CreateTopics, Client: "plain", Why: "CreateStateTopic", Optional: true}, -1},
	{RequestVersions{Key: kmsg.SASLHandshake, Client: "every", Why: "SASL, when the caller's options set it", Optional: true}, -1},
	{RequestVersions{Key: kmsg.SASLAuthenticate, Client: "every", Why: "SASL, when the caller's options set it", Optional: true}, -1},
}

// Requests returns the table of every request the package sends, with
// the highest version of each as the clients built from base send it: the
// package's own cap, or base's version (kversion.Stable when base is nil,
// as [New] builds the clients). A request of several clients has a row
// for each whose range differs.
func Requests(base *kversion.Versions) []RequestVersions {
	if base == nil {
		base = kversion.Stable()
	}
	rows := make([]RequestVersions, 0, len(requestTable))
	for _, row := range requestTable {
		r := row.RequestVersions
		r.Max = -1 // a key that base does not name: the client never sends it
		if v, ok := base.LookupMaxKeyVersion(r.Key.Int16()); ok {
			r.Max = v
			if row.cap >= 0 {
				r.Max = min(v, row.cap)
			}
		}
		rows = append(rows, r)
	}
	return rows
}

// versionRange is a broker's range of one API key.
type versionRange struct {
	min, max int16
	served   bool
}

// versionMismatch says why a broker with range got cannot serve r, and
// "" when it can.
func versionMismatch(r RequestVersions, got versionRange) string {
	name := r.Key.Name()
	if r.Client != "every" {
		name += " (" + r.Client + ")"
	}
	ours := fmt.Sprintf("versions %d to %d", r.Min, r.Max)
	switch {
	case r.Max < r.Min:
		return fmt.Sprintf("%s: the client's options allow at most version %d, and the library needs %s", name, r.Max, ours)
	case !got.served:
		return fmt.Sprintf("%s: the broker does not serve it at all; the library sends %s", name, ours)
	case got.min > r.Max || got.max < r.Min:
		return fmt.Sprintf("%s: the broker serves versions %d to %d, the library sends %s (%s)", name, got.min, got.max, ours, r.Why)
	}
	return ""
}

// CheckVersions checks each request of the table that is not optional
// against the ApiVersions range of every broker of the cluster that
// answers, before the first registration or mint. A broker that cannot
// serve one gets an *Error of class Misconfigured that names the broker,
// the API and both ranges. When no broker answers it returns the error of
// the request, classified on PathAdmin. A check that passed is not sent
// again for the wire's life. It is safe for concurrent use.
func (w *Wire) CheckVersions(ctx context.Context, op string) error {
	if w.versionsChecked.Load() {
		return nil
	}
	if w.Closed() {
		return &Error{Op: op, Class: Closed}
	}
	versions, err := w.admin.ApiVersions(ctx)
	if err != nil {
		return wrap(PathAdmin, op+": ApiVersions", err)
	}
	if err := checkBrokerVersions(op, Requests(w.versions), versions); err != nil {
		return err
	}
	w.versionsChecked.Store(true)
	return nil
}

// checkBrokerVersions checks the required rows against every broker that
// answered; the error of the first broker that did not answer when none
// did.
func checkBrokerVersions(op string, rows []RequestVersions, versions kadm.BrokersApiVersions) error {
	var firstErr error
	answered := 0
	for _, broker := range versions.Sorted() {
		if broker.Err != nil {
			if firstErr == nil {
				firstErr = broker.Err
			}
			continue
		}
		answered++
		var problems []string
		for _, r := range rows {
			if r.Optional {
				continue
			}
			lo, hi, served := broker.KeyVersions(r.Key.Int16())
			if problem := versionMismatch(r, versionRange{min: lo, max: hi, served: served}); problem != "" {
				problems = append(problems, problem)
			}
		}
		if len(problems) > 0 {
			return &Error{Op: op, Class: Misconfigured, Detail: fmt.Errorf("broker %d cannot serve every request the library sends, at the versions it sends them (Kafka removes old versions, KIP-896; a cap keeps the epoch fixed): %s",
				broker.NodeID, strings.Join(problems, "; "))}
		}
	}
	if answered == 0 {
		if firstErr == nil {
			firstErr = fmt.Errorf("the metadata named no broker")
		}
		return wrap(PathAdmin, op+": ApiVersions", firstErr)
	}
	return nil
}

// clientVersions returns the versions the caller's options allow
// (kversion.Stable by default): the base of leaseVersions and of the
// table's Max.
func clientVersions(plain *kgo.Client) *kversion.Versions {
	base, _ := plain.OptValue(kgo.MaxVersions).(*kversion.Versions)
	if base == nil {
		base = kversion.Stable()
	}
	return base
}
