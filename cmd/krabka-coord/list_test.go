package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// list shows every role of the state topic: a held one with its holder,
// token and standbys, and one that was fenced but has no lease.
func TestList(t *testing.T) {
	cluster := kafkatest.Fake(t)
	conn := []string{"--brokers", strings.Join(cluster.Brokers, ","), "--partitions", "3", "--topic", "listed"}
	createStateTopic(t, conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := startCLI(ctx, nil, append(append([]string{"elect", "alpha", "node-1"}, conn...), fastLease...)...)
	b := startCLI(ctx, nil, append(append([]string{"elect", "alpha", "node-2"}, conn...), fastLease...)...)
	c := startCLI(ctx, nil, append(append([]string{"elect", "beta", "node-1"}, conn...), fastLease...)...)
	waitDescribe(t, conn, "alpha", func(r describeJSON) bool { return r.Lease != nil && len(r.Roster) == 2 })
	waitDescribe(t, conn, "beta", func(r describeJSON) bool { return r.Lease != nil })
	// A record whose key is not of the layout (another writer's) is
	// skipped, and said so: nothing on the topic goes unmentioned.
	client := cluster.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := client.ProduceSync(ctx, &kgo.Record{Topic: "listed", Partition: 1, Key: []byte("not a coordination key"), Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	const skippedWarning = "warning: skipped 1 record(s) of listed-1 whose key does not decode"
	code, stdout, stderr := runCLI(t, nil, append([]string{"list", "--output", "json"}, conn...)...)
	if code != exitOK {
		t.Fatalf("list: exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, skippedWarning) {
		t.Fatalf("list's stderr does not count the undecodable key: %q", stderr)
	}
	var rows []listJSON
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var row listJSON
		if err := json.Unmarshal([]byte(line), &row); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		rows = append(rows, row)
	}
	if len(rows) != 2 || rows[0].Role != "alpha" || rows[1].Role != "beta" {
		t.Fatalf("list = %s; want alpha and beta in name order", stdout)
	}
	if r := rows[0]; (r.Holder != "node-1" && r.Holder != "node-2") || r.Standbys != 1 || r.LeaseState != "live" || !r.Authoritative || r.Token == nil || r.Coordinator == nil || r.Token.Token != r.Coordinator.Token {
		t.Fatalf("alpha = %+v", r)
	}
	if r := rows[1]; r.Holder != "node-1" || r.Standbys != 0 {
		t.Fatalf("beta = %+v", r)
	}
	code, stdout, _ = runCLI(t, nil, append([]string{"list"}, conn...)...)
	if code != exitOK || !strings.Contains(stdout, "ROLE") || !strings.Contains(stdout, "alpha") || !strings.Contains(stdout, "yes") {
		t.Fatalf("list as text: %s", stdout)
	}
	code, stdout, stderr = runCLI(t, nil, append([]string{"describe", "--all", "--output", "json"}, conn...)...)
	if code != exitOK || strings.Count(stdout, "\n") != 2 || !strings.Contains(stdout, `"role":"alpha"`) || !strings.Contains(stdout, `"role":"beta"`) || !strings.Contains(stderr, skippedWarning) {
		t.Fatalf("describe --all: exit %d: %s%s", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, nil, append([]string{"describe", "alpha", "gamma"}, conn...)...)
	if code != exitUsage || !strings.Contains(stdout, "role:        alpha") || !strings.Contains(stderr, "role gamma has never been taken") {
		t.Fatalf("describe of a known and a never seen role: exit %d: %s%s", code, stdout, stderr)
	}
	cancel()
	for _, r := range []*inProcess{a, b, c} {
		r.wait()
	}
}
