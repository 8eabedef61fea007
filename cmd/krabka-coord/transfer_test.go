package main

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// transfer and drain on the embedded cluster (issue 31): three elect
// processes on one role; a transfer to a non-member, to the holder itself
// and through a standby's address is refused with its fault and leaves
// the lease alone; a transfer to a named member hands it over; a drain of
// the holder hands the role to the first live standby, a drain of a
// standby withdraws its registration, and a drain of the last member says
// why it cannot move the role.
func TestTransferAndDrainKfake(t *testing.T) {
	testTransferAndDrain(t, kafkatest.Fake(t), "transfer")
}

// The same on the real broker (KRABKA_KAFKA_BROKERS; fails under CI
// without it).
func TestTransferAndDrainKafka(t *testing.T) {
	cluster := kafkatest.Kafka(t)
	topic := kafkatest.TopicName("krabka-coord-transfer")
	cluster.DeleteTopicAtCleanup(t, topic)
	testTransferAndDrain(t, cluster, topic)
}

func testTransferAndDrain(t *testing.T, cluster *kafkatest.Cluster, topic string) {
	schema := jsonSchema(t)
	conn := []string{"--brokers", strings.Join(cluster.Brokers, ","), "--partitions", "2", "--topic", topic}
	createStateTopic(t, conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	role := "controller"
	members := []string{"node-1", "node-2", "node-3"}
	procs := make(map[string]*inProcess)
	stops := make(map[string]context.CancelFunc)
	addrs := make(map[string]string)
	for _, m := range members {
		pctx, stop := context.WithCancel(ctx)
		stops[m] = stop
		procs[m] = startCLI(pctx, nil, append(append([]string{"elect", role, m, "--listen", "127.0.0.1:0", "--step-down-endpoint", "--transfer-timeout", "2s"}, conn...), fastLease...)...)
		addrs[m] = waitAddr(t, procs[m])
		if m == "node-1" {
			procs[m].waitFor(t, electedText, 20*time.Second)
			// node-0: a standby of rank 0 with no process behind it (down;
			// heartbeats off, so nothing tells it apart from a live one).
			writeRegistration(t, cluster, topic, 2, role, "node-0")
		}
	}
	defer func() {
		for _, stop := range stops {
			stop()
		}
		for _, p := range procs {
			p.wait()
		}
	}()
	before := waitDescribe(t, conn, role, func(r describeJSON) bool { return r.Lease != nil && len(r.Roster) == 4 })
	if before.Lease.Holder != "node-1" {
		t.Fatalf("holder %s; want node-1", before.Lease.Holder)
	}
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, nil, append(args, conn...)...)
	}

	// Refusals: the holder keeps the role, no epoch used.
	for _, c := range []struct {
		to, at, fault string
		code          int
	}{
		{"ghost", addrs["node-1"], "not_member", exitUsage},
		{"node-1", addrs["node-1"], "to_self", exitUsage},
		{"node-3", addrs["node-2"], "not_holder", exitFailure},
	} {
		code, stdout, stderr := cli("transfer", role, "--to", c.to, "--at", c.at, "--output", "json")
		if code != c.code || !strings.Contains(stderr, c.fault) {
			t.Fatalf("transfer --to %s: exit %d, stderr %q; want %d and the fault %s", c.to, code, stderr, c.code, c.fault)
		}
		checkLines(t, schema, "transfer", stdout)
		var result handoverJSON
		if err := json.Unmarshal([]byte(stdout), &result); err != nil || result.Moved || result.Fault != c.fault {
			t.Fatalf("transfer --to %s: %s; want moved false, fault %s", c.to, stdout, c.fault)
		}
	}
	same := waitDescribe(t, conn, role, func(r describeJSON) bool { return r.Lease != nil })
	if same.Lease.Holder != "node-1" || same.Lease.Token.Token != before.Lease.Token.Token || same.Coordinator.Token.Token != before.Lease.Token.Token {
		t.Fatalf("after the refused transfers: lease %+v, coordinator %+v; want node-1's lease and epoch %s unchanged", same.Lease, same.Coordinator, before.Lease.Token.Token)
	}

	// A transfer to node-3, which ranks after node-0 and node-2: node-3
	// takes it, and node-1 campaigns again at the tail.
	code, stdout, stderr := cli("transfer", role, "--to", "node-3", "--at", addrs["node-1"], "--output", "json")
	if code != exitOK {
		t.Fatalf("transfer --to node-3: exit %d: %s%s", code, stdout, stderr)
	}
	checkLines(t, schema, "transfer", stdout)
	var moved handoverJSON
	if err := json.Unmarshal([]byte(stdout), &moved); err != nil || !moved.Moved || moved.To != "node-3" || moved.Token == nil || moved.Token.ProducerEpoch != before.Lease.Token.ProducerEpoch+1 {
		t.Fatalf("transfer: %s; want moved to node-3 under the next epoch of %s", stdout, before.Lease.Token.Token)
	}
	after := waitDescribe(t, conn, role, func(r describeJSON) bool {
		return r.Lease != nil && r.Lease.Holder == "node-3" && len(r.Roster) == 4 && r.Roster[3].Member == "node-1"
	})
	procs["node-1"].waitFor(t, regexp.MustCompile(`transferred: member node-1 handed role controller .* to node-3`), 5*time.Second)

	// drain node-3: node-0, first by rank, does not take the role within
	// the bound (2 s), so it goes to node-2, the next.
	code, stdout, stderr = cli("drain", "node-3", "--at", addrs["node-3"], "--output", "json")
	if code != exitOK {
		t.Fatalf("drain node-3: exit %d: %s%s", code, stdout, stderr)
	}
	checkLines(t, schema, "drain", stdout)
	drained := waitDescribe(t, conn, role, func(r describeJSON) bool { return r.Lease != nil && r.Lease.Holder == "node-2" })
	if drained.Lease.Token.ProducerEpoch != after.Lease.Token.ProducerEpoch+1 || slices.ContainsFunc(drained.Roster, func(e rosterJSON) bool { return e.Member == "node-3" }) {
		t.Fatalf("after drain node-3: %+v; want node-2 under the next epoch, node-3 out of the roster", drained)
	}
	procs["node-3"].waitFor(t, regexp.MustCompile(`drained: member node-3`), 5*time.Second)

	// drain node-1, a standby: its registration is withdrawn.
	code, stdout, stderr = cli("drain", "node-1", "--at", addrs["node-1"])
	if code != exitOK || !strings.Contains(stdout, "withdrew its standby registration") || !strings.Contains(stdout, "member node-1 drained") {
		t.Fatalf("drain node-1: exit %d: %s%s", code, stdout, stderr)
	}
	waitDescribe(t, conn, role, func(r describeJSON) bool { return len(r.Roster) == 2 && r.Lease != nil && r.Lease.Holder == "node-2" })

	// drain node-2: only the down node-0 is left, which does not take the
	// role, so node-2 keeps it and drain says why, without waiting out
	// --wait.
	started := time.Now()
	code, stdout, stderr = cli("drain", "node-2", "--at", addrs["node-2"], "--wait", "30s")
	if code != exitFailure || !strings.Contains(stderr, "not_taken") || !strings.Contains(stderr, "member node-2 is not drained") || time.Since(started) > 15*time.Second {
		t.Fatalf("drain node-2, the last live member: exit %d after %v: %s%s; want 1 and the reason, before --wait", code, time.Since(started), stdout, stderr)
	}
	kept := waitDescribe(t, conn, role, func(r describeJSON) bool { return r.Lease != nil })
	if kept.Lease.Holder != "node-2" || kept.Lease.Token.Token != drained.Lease.Token.Token {
		t.Fatalf("after a drain that could not move the role: %+v; want node-2 under %s", kept.Lease, drained.Lease.Token.Token)
	}
	// The drained processes idle, and exit 0 on a stop.
	for _, m := range []string{"node-1", "node-3"} {
		stops[m]()
		if r := procs[m].wait(); r.code != exitOK {
			t.Fatalf("%s drained: exit %d: %s", m, r.code, r.stderr)
		}
		delete(procs, m)
	}
}

// elect --successor and --successor-policy newest: at a stop the holder
// hands the role to the named member, or to the live standby registered
// last, not to the first standby by rank.
func TestSuccessorOnStopKfake(t *testing.T) {
	for _, c := range []struct {
		name string
		flag []string
	}{
		{"named", []string{"--successor", "node-c"}},
		{"newest", []string{"--successor-policy", "newest"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			role := "successor-" + c.name
			conn := []string{"--brokers", kfakeBrokers(t), "--partitions", "2", "--topic", "successor"}
			createStateTopic(t, conn)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			holderCtx, stopHolder := context.WithCancel(ctx)
			a := startCLI(holderCtx, nil, append(append(append([]string{"elect", role, "node-a"}, c.flag...), conn...), fastLease...)...)
			a.waitFor(t, electedText, 20*time.Second)
			b := startCLI(ctx, nil, append(append([]string{"elect", role, "node-b"}, conn...), fastLease...)...)
			waitDescribe(t, conn, role, func(r describeJSON) bool { return len(r.Roster) == 2 })
			d := startCLI(ctx, nil, append(append([]string{"elect", role, "node-c"}, conn...), fastLease...)...)
			before := waitDescribe(t, conn, role, func(r describeJSON) bool { return len(r.Roster) == 3 })
			stopHolder()
			if r := a.wait(); r.code != exitOK || !strings.Contains(r.stdout, "transferred: member node-a handed role "+role) {
				t.Fatalf("node-a: exit %d: %s%s", r.code, r.stdout, r.stderr)
			}
			after := waitDescribe(t, conn, role, func(r describeJSON) bool { return r.Lease != nil && r.Lease.Token.Token != before.Lease.Token.Token })
			if after.Lease.Holder != "node-c" || after.Lease.Token.ProducerEpoch != before.Lease.Token.ProducerEpoch+1 {
				t.Fatalf("after node-a's stop: %+v; want node-c (not node-b of rank 0) under the next epoch", after.Lease)
			}
			cancel()
			b.wait()
			d.wait()
		})
	}
}

// A transfer of run's role: the holder stops its command before the
// offer, so the two commands never run at once, and a refused transfer
// starts the command again under the same token.
func TestTransferOfRunKfake(t *testing.T) {
	conn := []string{"--brokers", kfakeBrokers(t), "--partitions", "2", "--topic", "transfer-run"}
	createStateTopic(t, conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	// Each command marks its start and its end in a file of its own, so the
	// test can tell whether the two ran at once.
	script := `echo "$(date +%s%N) start" >> ` + dir + `/"$KRABKA_MEMBER"; trap 'echo "$(date +%s%N) end" >> ` + dir + `/"$KRABKA_MEMBER"; exit 0' TERM; while :; do sleep 0.05; done`
	runArgs := func(member string) []string {
		return append(append([]string{"run", "job", member, "--listen", "127.0.0.1:0", "--step-down-endpoint", "--transfer-timeout", "2s"}, conn...),
			append(fastLease, "--grace", "500ms", "--max-clock-skew", "100ms", "--", "sh", "-c", script)...)
	}
	a := startCLI(ctx, nil, runArgs("node-a")...)
	addr := waitAddr(t, a)
	a.waitFor(t, electedText, 20*time.Second)
	b := startCLI(ctx, nil, runArgs("node-b")...)
	before := waitDescribe(t, conn, "job", func(r describeJSON) bool { return r.Lease != nil && len(r.Roster) == 2 })
	waitLines(t, dir+"/node-a", 1)

	code, stdout, stderr := runCLI(t, nil, append([]string{"transfer", "job", "--to", "ghost", "--at", addr}, conn...)...)
	if code != exitUsage || !strings.Contains(stderr, "not_member") {
		t.Fatalf("transfer --to ghost: exit %d: %s%s", code, stdout, stderr)
	}
	waitLines(t, dir+"/node-a", 3) // start, end, start again
	same := waitDescribe(t, conn, "job", func(r describeJSON) bool { return r.Lease != nil })
	if same.Lease.Holder != "node-a" || same.Lease.Token.Token != before.Lease.Token.Token {
		t.Fatalf("after the refused transfer: %+v; want node-a under %s", same.Lease, before.Lease.Token.Token)
	}

	code, stdout, stderr = runCLI(t, nil, append([]string{"transfer", "job", "--to", "node-b", "--at", addr}, conn...)...)
	if code != exitOK {
		t.Fatalf("transfer --to node-b: exit %d: %s%s", code, stdout, stderr)
	}
	waitLines(t, dir+"/node-b", 1)
	aLines, bLines := readLines(t, dir+"/node-a"), readLines(t, dir+"/node-b")
	if len(aLines) != 4 || !strings.HasSuffix(aLines[3], "_end") {
		t.Fatalf("node-a's command: %q; want start, end, start, end", aLines)
	}
	if aLines[3] > bLines[0] { // same-width nanosecond stamps compare as text
		t.Fatalf("node-a's command ended at %s, after node-b's started at %s: two copies ran at once", aLines[3], bLines[0])
	}
	cancel()
	a.wait()
	b.wait()
}

// waitLines waits until the file has at least n lines.
func waitLines(t *testing.T, path string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for len(readLines(t, path)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %q; want %d lines", path, readLines(t, path), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Fields(strings.ReplaceAll(string(data), " ", "_"))
}

// A drain of a member with a role that no --at address serves (a process
// the operator forgot): drain says so, with a no_endpoint line and exit 1,
// as soon as the processes it asked are drained, not after --wait, and the
// line is not lost to the end of --wait.
func TestDrainNoEndpointKfake(t *testing.T) {
	cluster := kafkatest.Fake(t)
	topic := "drain-no-endpoint"
	schema := jsonSchema(t)
	conn := []string{"--brokers", strings.Join(cluster.Brokers, ","), "--partitions", "2", "--topic", topic}
	createStateTopic(t, conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	holder := startCLI(ctx, nil, append(append([]string{"elect", "served", "node-y"}, conn...), fastLease...)...)
	holder.waitFor(t, electedText, 20*time.Second)
	standby := startCLI(ctx, nil, append(append([]string{"elect", "served", "node-x", "--listen", "127.0.0.1:0", "--step-down-endpoint"}, conn...), fastLease...)...)
	addr := waitAddr(t, standby)
	waitDescribe(t, conn, "served", func(r describeJSON) bool { return len(r.Roster) == 2 })
	// node-x waits for a second role too, in a process with no --at address.
	writeRegistration(t, cluster, topic, 2, "unserved", "node-x")
	waitDescribe(t, conn, "unserved", func(r describeJSON) bool { return len(r.Roster) == 1 })

	started := time.Now()
	code, stdout, stderr := runCLI(t, nil, append([]string{"drain", "node-x", "--at", addr, "--wait", "20s", "--output", "json"}, conn...)...)
	took := time.Since(started)
	if code != exitFailure || !strings.Contains(stderr, "role unserved: no --at address serves this role") {
		t.Fatalf("drain node-x: exit %d: %s%s; want 1 and the role that no address serves", code, stdout, stderr)
	}
	checkLines(t, schema, "drain", stdout)
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	if len(lines) != 2 {
		t.Fatalf("drain node-x: %q; want the served role's line and the unserved role's", lines)
	}
	var served, unserved drainJSON
	if err := json.Unmarshal([]byte(lines[0]), &served); err != nil || served.Role != "served" || !served.Moved {
		t.Fatalf("first line %s: want role served, moved (the standby withdrawn)", lines[0])
	}
	if err := json.Unmarshal([]byte(lines[1]), &unserved); err != nil || unserved.Role != "unserved" || unserved.At != "" || unserved.Fault != "no_endpoint" || unserved.Moved {
		t.Fatalf("second line %s: want role unserved, at \"\", fault no_endpoint, not moved", lines[1])
	}
	if took > 10*time.Second {
		t.Fatalf("drain node-x took %v; want the answer once the addresses answered, well before --wait 20s", took)
	}
	cancel()
	holder.wait()
	standby.wait()
}

// A second transfer while one is under way is refused at once as busy
// (exit 1), as TransferTo refuses it, and does not run later: the first,
// to a registered member with no process behind it, is not taken, and the
// holder keeps the role under the same token.
func TestTransferBusyKfake(t *testing.T) {
	cluster := kafkatest.Fake(t)
	topic := "transfer-busy"
	schema := jsonSchema(t)
	conn := []string{"--brokers", strings.Join(cluster.Brokers, ","), "--partitions", "2", "--topic", topic}
	createStateTopic(t, conn)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	role := "busy"
	// The lease of 6 s leaves room for a bound of 4 s, in which the test
	// sends its second transfer and its step-down.
	lease := []string{"--lease-duration", "6s", "--renew-interval", "1s", "--challenge-stagger", "1s", "--poll-interval", "200ms"}
	holder := startCLI(ctx, nil, append(append([]string{"elect", role, "node-1", "--listen", "127.0.0.1:0", "--step-down-endpoint", "--transfer-timeout", "4s"}, conn...), lease...)...)
	addr := waitAddr(t, holder)
	holder.waitFor(t, electedText, 20*time.Second)
	standby := startCLI(ctx, nil, append(append([]string{"elect", role, "node-2"}, conn...), lease...)...)
	writeRegistration(t, cluster, topic, 2, role, "node-0") // down: it never takes an offer
	before := waitDescribe(t, conn, role, func(r describeJSON) bool { return r.Lease != nil && len(r.Roster) == 3 })

	first := make(chan int, 1)
	go func() {
		code, _, _ := runCLI(t, nil, append([]string{"transfer", role, "--to", "node-0", "--at", addr}, conn...)...)
		first <- code
	}()
	waitDescribe(t, conn, role, func(r describeJSON) bool { return r.Lease != nil && r.Lease.Holder == "node-0" }) // the offer is out
	started := time.Now()
	code, stdout, stderr := runCLI(t, nil, append([]string{"transfer", role, "--to", "node-2", "--at", addr, "--output", "json"}, conn...)...)
	if code != exitFailure || !strings.Contains(stderr, "busy") || time.Since(started) > time.Second {
		t.Fatalf("a second transfer during the first: exit %d after %v: %s%s; want 1 and busy, at once", code, time.Since(started), stdout, stderr)
	}
	// A step-down then is refused too, rather than accepted and dropped.
	code, stdout, stderr = runCLI(t, nil, append([]string{"step-down", role, "--at", addr, "--wait", "3s"}, conn...)...)
	if code != exitFailure || !strings.Contains(stderr, "handing role busy over") {
		t.Fatalf("a step-down during the transfer: exit %d: %s%s; want 1 and the handover named", code, stdout, stderr)
	}
	code, stdout, stderr = runCLI(t, nil, append([]string{"transfer", role, "--to", "node-2", "--at", addr, "--output", "json"}, conn...)...)
	if code != exitFailure {
		t.Fatalf("the second transfer again: exit %d: %s%s; want 1 (busy)", code, stdout, stderr)
	}
	checkLines(t, schema, "transfer", stdout)
	var busy handoverJSON
	if err := json.Unmarshal([]byte(stdout), &busy); err != nil || busy.Fault != "busy" || busy.Moved || busy.To != "node-2" {
		t.Fatalf("second transfer: %s; want fault busy, not moved, to node-2", stdout)
	}
	if code := <-first; code != exitFailure {
		t.Fatalf("the transfer to node-0, which is down: exit %d; want 1 (not taken)", code)
	}
	time.Sleep(time.Second) // a queued second transfer would run now
	after := waitDescribe(t, conn, role, func(r describeJSON) bool { return r.Lease != nil })
	if after.Lease.Holder != "node-1" || after.Lease.Token.Token != before.Lease.Token.Token {
		t.Fatalf("after the refused transfers: %+v; want node-1 under %s", after.Lease, before.Lease.Token.Token)
	}
	cancel()
	holder.wait()
	standby.wait()
}

// Every --at address of a drain has its line, one that gave no answer too
// (fault no_answer), in text and in JSON.
func TestDrainNoAnswerLineKfake(t *testing.T) {
	schema := jsonSchema(t)
	conn := []string{"--brokers", kfakeBrokers(t), "--partitions", "2", "--topic", "drain-no-answer"}
	createStateTopic(t, conn)
	code, stdout, stderr := runCLI(t, nil, append([]string{"drain", "node-z", "--at", "127.0.0.1:1", "--wait", "5s", "--output", "json"}, conn...)...)
	if code != exitFailure {
		t.Fatalf("drain with an address that does not answer: exit %d: %s%s; want 1", code, stdout, stderr)
	}
	checkLines(t, schema, "drain", stdout)
	var line drainJSON
	if err := json.Unmarshal([]byte(stdout), &line); err != nil || line.At != "127.0.0.1:1" || line.Fault != "no_answer" || line.Reason == "" || line.Moved {
		t.Fatalf("drain line %s; want at 127.0.0.1:1, fault no_answer with the error", stdout)
	}
	code, stdout, stderr = runCLI(t, nil, append([]string{"drain", "node-z", "--at", "127.0.0.1:1", "--wait", "5s"}, conn...)...)
	if code != exitFailure || !strings.HasPrefix(stdout, "127.0.0.1:1: no drain answer: ") {
		t.Fatalf("drain, text: exit %d: %s%s; want 1 and the address's line", code, stdout, stderr)
	}
}
