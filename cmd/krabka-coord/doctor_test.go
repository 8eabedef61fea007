package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// The tests of doctor (issue 29, item 4): its exit code by the gravest
// check (0 all well, 1 warnings, 2 a blocker, 4 no broker), one line per
// check that names what to do, and --output json as json.md says. The rows
// of each misconfiguration are the library's (coordination's
// kafka_preflight_test.go); these check that doctor carries them.

// doctorRun runs doctor against cluster and returns its exit code and
// output.
func doctorRun(t *testing.T, cluster *kafkatest.Cluster, args ...string) (int, string, string) {
	t.Helper()
	code, stdout, stderr := runCLI(t, nil, append([]string{"doctor", "--brokers", strings.Join(cluster.Brokers, ",")}, args...)...)
	t.Logf("doctor %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout, stderr)
	return code, stdout, stderr
}

// TestDoctorExitCodes: on kfake, a healthy topic with a role exits 0; a
// topic without a role named exits 1 (the ACLs of the transactional ids
// were not tried); a short lease exits 1 with its WARN line; a topic with
// cleanup.policy=delete exits 2 with a FAIL line that says how to compact
// it; a topic with another partition count exits 2; an address where no
// broker listens exits 4; a bad --as exits 2 before it connects.
func TestDoctorExitCodes(t *testing.T) {
	cluster := kafkatest.Fake(t)
	good := cluster.CreateTopic(t, "doctor-good", 4, map[string]string{"cleanup.policy": "compact"})
	deleted := cluster.CreateTopic(t, "doctor-delete", 4, map[string]string{"cleanup.policy": "delete"})

	if code, stdout, _ := doctorRun(t, cluster, "--topic", good, "--partitions", "4", "controller"); code != doctorOK || !strings.Contains(stdout, "all is well") {
		t.Fatalf("doctor of a healthy topic: exit %d; want 0 and 'all is well'", code)
	} else if !strings.Contains(stdout, " OK as the connection's principal (no --sasl-user; User:ANONYMOUS on a plaintext listener) (member): all is well") {
		t.Fatalf("doctor without SASL: the summary does not say whose ACLs were tried")
	}
	if code, stdout, _ := doctorRun(t, cluster, "--topic", good, "--partitions", "4"); code != doctorWarn || !strings.Contains(stdout, "WARN  the ACLs on the roles' transactional ids") {
		t.Fatalf("doctor without a role: exit %d; want 1 and the WARN of the untried ACLs", code)
	}
	if code, stdout, _ := doctorRun(t, cluster, "--topic", good, "--partitions", "4", "--as", "device", "controller"); code != doctorWarn || !strings.Contains(stdout, "WARN  device: the ACLs on the command topics: no command topic named") {
		t.Fatalf("doctor --as device without --command-topic: exit %d; want 1 and the WARN of the untried READ (it said all is well)", code)
	}
	code, stdout, _ := doctorRun(t, cluster, "--topic", good, "--partitions", "4", "--lease-duration", "3s", "--renew-interval", "1s", "controller")
	if code != doctorWarn || !regexp.MustCompile(`(?m)^WARN  the lease against broker\.session\.timeout\.ms: .*; fix: pick a lease of at least `).MatchString(stdout) {
		t.Fatalf("doctor with a 3 s lease: exit %d; want 1 and a WARN line with its fix", code)
	}
	code, stdout, _ = doctorRun(t, cluster, "--topic", deleted, "--partitions", "4", "controller")
	if code != doctorBlocker || !regexp.MustCompile(`(?m)^FAIL  the state topic's cleanup\.policy: cleanup\.policy=delete: .*; fix: kafka-configs\.sh .*cleanup\.policy=compact`).MatchString(stdout) {
		t.Fatalf("doctor of a topic with cleanup.policy=delete: exit %d; want 2 and a FAIL line with its fix", code)
	}
	code, stdout, _ = doctorRun(t, cluster, "--topic", good, "--partitions", "8", "controller")
	if code != doctorBlocker || !strings.Contains(stdout, "FAIL  the state topic's partition count: the topic has 4 partitions, but the members are configured for 8") {
		t.Fatalf("doctor with --partitions 8 against 4: exit %d; want 2 and the FAIL line of the count", code)
	}
	if code, _, stderr := runCLI(t, nil, "doctor", "--brokers", "127.0.0.1:1", "--connect-timeout", "1s", "controller"); code != exitCluster {
		t.Fatalf("doctor of an address without a broker: exit %d (%s); want %d", code, stderr, exitCluster)
	}
	if code, _, stderr := runCLI(t, nil, "doctor", "--brokers", strings.Join(cluster.Brokers, ","), "--as", "admin"); code != exitUsage || !strings.Contains(stderr, `--as "admin"`) {
		t.Fatalf("doctor --as admin: exit %d (%s); want %d and the flag named", code, stderr, exitUsage)
	}
	// An empty --command-topic (a,,b) is named as a command topic, not
	// as the state topic.
	if code, stdout, stderr := runCLI(t, nil, "doctor", "--brokers", strings.Join(cluster.Brokers, ","), "--command-topic", "a,,b", "controller"); code != exitUsage || stdout != "" {
		t.Fatalf("doctor --command-topic a,,b: exit %d, stdout %q; want %d and nothing on stdout", code, stdout, exitUsage)
	} else {
		assertOneLine(t, stderr, `--command-topic "": empty; pass the name of a topic of guarded writes`)
	}
}

// TestDoctorJSON: --output json writes one object with the keys of
// json.md, whose level and exit code agree with the exit code.
func TestDoctorJSON(t *testing.T) {
	schema := jsonSchema(t)
	cluster := kafkatest.Fake(t)
	topic := cluster.CreateTopic(t, "doctor-json", 2, map[string]string{"cleanup.policy": "delete"})
	code, stdout, _ := doctorRun(t, cluster, "--topic", topic, "--partitions", "2", "--output", "json", "--as", "member,device", "--command-topic", topic, "controller")
	checkLines(t, schema, "doctor", stdout)
	var out doctorJSON
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatal(err)
	}
	if code != doctorBlocker || out.ExitCode != code || out.Level != "FAIL" {
		t.Fatalf("doctor --output json of a deleting topic: exit %d, exit_code %d, level %s; want 2, 2, FAIL", code, out.ExitCode, out.Level)
	}
	parties := map[string]bool{}
	for _, c := range out.Checks {
		parties[c.Party] = true
	}
	if !parties["member"] || !parties["device"] || parties["observer"] {
		t.Fatalf("the checks' parties are %v; want member and device, not observer (--as member,device)", parties)
	}
}

// TestDoctorACL runs doctor on the SASL listener of the real broker as
// bob, who holds no ACL: it exits 2, and each FAIL line of a member's ACL
// names the ACL and the kafka-acls.sh line that grants it to User:bob.
func TestDoctorACL(t *testing.T) {
	cluster := kafkatest.Kafka(t)
	sasl := strings.Join(kafkatest.SASLBrokers(t), ",")
	topic := cluster.CreateTopic(t, "doctor-acl", 2, map[string]string{"cleanup.policy": "compact"})
	role := kafkatest.TopicName("doctor-acl-role")
	code, stdout, stderr := runCLI(t, nil, "doctor", "--brokers", sasl, "--sasl-mechanism", "scram-sha-256", "--sasl-user", "bob", "--sasl-password", "bob-secret",
		"--topic", topic, "--partitions", "2", role)
	t.Logf("doctor as bob: exit %d\n%s%s", code, stdout, stderr)
	if code != doctorBlocker {
		t.Fatalf("doctor as bob: exit %d; want 2", code)
	}
	for _, want := range []string{
		`(?m)^FAIL  member: WRITE on the TransactionalId ` + role + `: refused \(TRANSACTIONAL_ID_AUTHORIZATION_FAILED.*; fix: kafka-acls\.sh --bootstrap-server \S+ --command-config admin\.properties --add --allow-principal User:bob --operation Write --transactional-id ` + role + `$`,
		`(?m)^FAIL  member: DESCRIBE on the TransactionalId ` + role + `: refused`,
		`(?m)^FAIL  member: READ on the state topic ` + topic + `: refused .*--allow-principal User:bob --operation Read --topic ` + topic + `$`,
		`(?m)^FAIL  member: WRITE on the state topic ` + topic + `: refused`,
		`(?m)^doctor: \d+ FAIL, \d+ WARN, \d+ OK as User:bob \(member\): a blocker`,
	} {
		if !regexp.MustCompile(want).MatchString(stdout) {
			t.Errorf("doctor as bob: no line matches %s", want)
		}
	}
}

// TestDoctorFixesRunAsPrinted: the fix of a missing state topic and of a
// missing command topic is a create-topic line that runs as printed on
// the cluster doctor checked (a single broker here, where
// --replication-factor 3 is refused), after which doctor passes; the
// kafka-configs.sh line of a deleting topic names the broker, as the
// other commands' lines do (kafka-configs.sh refuses a line without
// --bootstrap-server); and a
// topic of one partition is "1 partition".
func TestDoctorFixesRunAsPrinted(t *testing.T) {
	cluster := kafkatest.Fake(t)
	brokers := strings.Join(cluster.Brokers, ",")
	state := kafkatest.TopicName("doctor-fix-state")
	commands := kafkatest.TopicName("doctor-fix-commands")
	createLine := regexp.MustCompile(`fix: create it: '(krabka-coord create-topic [^']*)'`)

	code, stdout, _ := doctorRun(t, cluster, "--topic", state, "--partitions", "2", "--as", "member,device", "--command-topic", commands, "controller")
	fixes := createLine.FindAllStringSubmatch(stdout, -1)
	if code != doctorBlocker || len(fixes) != 2 {
		t.Fatalf("doctor of a missing state topic and command topic: exit %d, %d create-topic fixes; want 2 and 2", code, len(fixes))
	}
	for _, fix := range fixes {
		args := append(strings.Fields(strings.TrimPrefix(fix[1], "krabka-coord ")), "--brokers", brokers)
		if code, _, stderr := runCLI(t, nil, args...); code != exitOK {
			t.Fatalf("the fix %q as printed: exit %d: %s", fix[1], code, stderr)
		}
	}
	code, _, _ = doctorRun(t, cluster, "--topic", state, "--partitions", "2", "--as", "member,device", "--command-topic", commands, "controller")
	if code != doctorOK {
		t.Fatalf("doctor after the create-topic fixes: exit %d; want 0", code)
	}

	deleted := cluster.CreateTopic(t, "doctor-fix-delete", 1, map[string]string{"cleanup.policy": "delete"})
	code, stdout, _ = doctorRun(t, cluster, "--topic", deleted, "--partitions", "1", "controller")
	want := `(?m)^FAIL  the state topic's cleanup\.policy: .*; fix: kafka-configs\.sh --bootstrap-server ` + regexp.QuoteMeta(cluster.Brokers[0]) +
		` --alter --entity-type topics --entity-name ` + deleted + ` --add-config cleanup\.policy=compact$`
	if code != doctorBlocker || !regexp.MustCompile(want).MatchString(stdout) {
		t.Fatalf("doctor of a deleting topic: exit %d; want 2 and a line matching %s", code, want)
	}
	if !strings.Contains(stdout, "OK    the state topic "+deleted+" exists: 1 partition on a cluster of 1 broker") {
		t.Fatalf("doctor of a topic of one partition: want \"1 partition on a cluster of 1 broker\"")
	}
}
