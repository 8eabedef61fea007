package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-streams-go/coordination"
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

// A member interrupted after its registration and before its election
// leaves a registration and its tombstone, and no epoch: list shows the
// role, describe shows it too (it no longer calls it a typo and sends the
// user back to list), and fence says what is true of it. A role whose lease
// record remains (a tombstone) but whose epoch is gone was taken before;
// a name that no record carries is still refused as never taken.
func TestRegisteredNeverTakenRole(t *testing.T) {
	cluster := kafkatest.Fake(t)
	conn := []string{"--brokers", strings.Join(cluster.Brokers, ","), "--partitions", "3", "--topic", "idle"}
	createStateTopic(t, conn)
	// A plain producer: the lease tombstone of an expired role is what the
	// library never appends outside a transaction.
	client := cluster.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	write := func(roleName string, key coordination.Key, value []byte) {
		t.Helper()
		partition, err := coordination.RoleTopicPartition(mustRole(t, roleName), coordination.WithTopic("idle"), coordination.WithPartitions(3))
		if err != nil {
			t.Fatal(err)
		}
		record := &kgo.Record{Topic: "idle", Partition: int32(partition.Partition), Key: coordination.EncodeKey(key), Value: value}
		if err := client.ProduceSync(ctx, record).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	gamma, delta, member := mustRole(t, "gamma"), mustRole(t, "delta"), mustMember(t, "node-9")
	write("gamma", coordination.RegistrationKey(gamma, member), coordination.EncodeRegistration(coordination.Registration{Member: member, RegisteredAt: time.Now().UnixMilli()}))
	write("gamma", coordination.RegistrationKey(gamma, member), nil)
	write("delta", coordination.LeaseKey(delta), nil)

	code, stdout, stderr := runCLI(t, nil, append([]string{"list"}, conn...)...)
	if code != exitOK || !strings.Contains(stdout, "gamma") || !strings.Contains(stdout, "delta") {
		t.Fatalf("list: exit %d: %s%s; want gamma and delta", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, nil, append([]string{"describe", "gamma"}, conn...)...)
	if code != exitOK || !strings.Contains(stdout, "role:        gamma") || !strings.Contains(stdout, "coordinator: no epoch") || !strings.Contains(stdout, "roster:      empty") {
		t.Fatalf("describe of a role that list shows: exit %d: %s%s; want its state", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, nil, append([]string{"fence", "gamma"}, conn...)...)
	if code != exitUsage || stdout != "" {
		t.Fatalf("fence of a registered, never taken role: exit %d, stdout %q; want %d and nothing", code, stdout, exitUsage)
	}
	assertOneLine(t, stderr, "role gamma was registered, never taken: no member has minted an epoch, and none is in the roster now; there is no holder to fence; pass --force to mint an epoch")
	code, _, stderr = runCLI(t, nil, append([]string{"fence", "delta"}, conn...)...)
	if code != exitUsage {
		t.Fatalf("fence of a role whose epoch expired: exit %d", code)
	}
	assertOneLine(t, stderr, "role delta has no epoch, no lease and no members: it was taken before, and its transactional id expired")
	code, _, stderr = runCLI(t, nil, append([]string{"describe", "epsilon"}, conn...)...)
	if code != exitUsage {
		t.Fatalf("describe of a name no record carries: exit %d", code)
	}
	assertOneLine(t, stderr, "role epsilon has never been taken and has no members: no record of the state topic names it; check the name ('krabka-coord list' shows the roles of the state topic)")
}

// describe --all of a state topic without a role says so, as list does,
// and exits 0; it printed nothing (issue 29: a new user took the silence
// for a hang or a wrong topic). JSON output stays empty.
func TestDescribeAllWithoutRole(t *testing.T) {
	cluster := kafkatest.Fake(t)
	conn := []string{"--brokers", strings.Join(cluster.Brokers, ","), "--partitions", "2", "--topic", "empty"}
	createStateTopic(t, conn)
	for _, command := range []string{"list", "describe"} {
		args := append([]string{command}, conn...)
		if command == "describe" {
			args = append(args, "--all")
		}
		code, stdout, stderr := runCLI(t, nil, args...)
		if code != exitOK || stdout != "no role on empty\n" {
			t.Fatalf("%s of a topic without a role: exit %d, stdout %q, stderr %q; want 0 and \"no role on empty\"", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	if code, stdout, stderr := runCLI(t, nil, append([]string{"describe", "--all", "--output", "json"}, conn...)...); code != exitOK || stdout != "" {
		t.Fatalf("describe --all --output json of a topic without a role: exit %d, stdout %q, stderr %q; want 0 and no line", code, stdout, stderr)
	}
}

// watch gives the library its logger, as elect and run do: a record of
// the state topic that does not decode is a structured warning on the
// command's stderr, not a line of Go's default logger (issue 29: watch
// --all mixed two formats on stderr, and --verbose did not reach the
// library's log).
func TestWatchLogsThroughTheCommand(t *testing.T) {
	cluster := kafkatest.Fake(t)
	conn := []string{"--brokers", strings.Join(cluster.Brokers, ","), "--partitions", "1", "--topic", "garbled"}
	createStateTopic(t, conn)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := cluster.Client(t).ProduceSync(ctx, &kgo.Record{Topic: "garbled", Key: []byte("not a key of the layout"), Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	watchCtx, stop := context.WithCancel(ctx)
	cli := startCLI(watchCtx, nil, append([]string{"watch", "--all"}, conn...)...)
	cli.waitFor(t, regexp.MustCompile(`level=WARN msg="coordination: observe: skipped a record of the state partition that does not decode"`), 10*time.Second)
	stop()
	if r := cli.wait(); r.code != exitOK {
		t.Fatalf("watch --all stopped: exit %d, stderr %q; want 0", r.code, r.stderr)
	}
}
