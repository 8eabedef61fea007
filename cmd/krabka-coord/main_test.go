package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spf13/cobra"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// assertOneLine checks that stderr is one line of error that names want.
func assertOneLine(t *testing.T, stderr, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "krabka-coord: ") {
		t.Fatalf("stderr = %q; want one line that starts with \"krabka-coord: \"", stderr)
	}
	if !strings.Contains(lines[0], want) {
		t.Fatalf("stderr = %q; want it to contain %q", lines[0], want)
	}
}

// A wrong command line fails before any connection, with exit code 2 and
// one line that says what to do.
func TestUsageErrors(t *testing.T) {
	env := map[string]string{envBrokers: "127.0.0.1:1"}
	long := strings.Repeat("r", coordination.MaxRoleLen+1)
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"empty role", []string{"describe", ""}, env, "invalid ROLE \"\": empty; pass a non-empty name"},
		{"long role", []string{"describe", long}, env, "longer than 249 bytes; pass a shorter name"},
		{"role not UTF-8", []string{"elect", "\xff\xfe", "m"}, env, "not valid UTF-8; pass the name in UTF-8"},
		{"empty member", []string{"elect", "controller", ""}, env, "invalid MEMBER \"\": empty"},
		{"member not UTF-8", []string{"run", "controller", "\xc3", "--", "true"}, env, "invalid MEMBER"},
		{"missing role", []string{"describe"}, env, "describe takes at least one ROLE, or --all"},
		{"roles and all", []string{"describe", "a", "--all"}, env, "describe takes ROLE... or --all, not both"},
		{"missing role, watch", []string{"watch"}, env, "watch takes at least one ROLE, or --all"},
		{"sasl without password", []string{"describe", "a", "--sasl-mechanism", "scram-sha-256", "--sasl-user", "u"}, env, "--sasl-mechanism scram-sha-256 needs a password: pass --sasl-password or set $KRABKA_SASL_PASSWORD"},
		{"renew above a third", []string{"elect", "a", "m", "--lease-duration", "6s", "--renew-interval", "2100ms"}, env, "--renew-interval 2.1s is above a third of --lease-duration 6s: want at most 2s"},
		{"lease too short", []string{"elect", "a", "m", "--lease-duration", "10ms", "--renew-interval", "3ms"}, env, "--lease-duration 10ms: want at least 1s"},
		{"renew too short", []string{"run", "a", "m", "--renew-interval", "10ms", "--", "true"}, env, "--renew-interval 10ms: want at least 100ms"},
		{"guard without room", []string{"run", "a", "m", "--lease-duration", "6s", "--renew-interval", "2s", "--grace", "3s", "--", "true"}, env,
			"the lease guard leaves no room: --lease-duration 6s − --grace 3s − --max-clock-skew 1s − margin 1s = 1s, which must exceed --renew-interval 2s"},
		{"negative skew", []string{"run", "a", "m", "--max-clock-skew", "-1s", "--", "true"}, env, "--max-clock-skew -1s"},
		{"member example", []string{"elect", "controller", ""}, env, "invalid MEMBER \"\": empty; pass a non-empty name such as node-1"},
		{"empty topic", []string{"describe", "a", "--topic", ""}, env, "--topic \"\": empty; pass the state topic of the members"},
		{"typo", []string{"descibe", "a"}, env, "unknown command \"descibe\" for \"krabka-coord\" (did you mean describe?; see 'krabka-coord --help')"},
		{"step-down endpoint without listen", []string{"elect", "a", "m", "--step-down-endpoint"}, env, "--step-down-endpoint needs --listen"},
		{"transfer without to", []string{"transfer", "a", "--at", "127.0.0.1:1"}, env, "transfer needs --to"},
		{"transfer without at", []string{"transfer", "a", "--to", "m"}, env, "transfer needs --at"},
		{"transfer to an empty member", []string{"transfer", "a", "--to", "\xff", "--at", "127.0.0.1:1"}, env, "invalid --to"},
		{"drain without at", []string{"drain", "m"}, env, "drain needs --at"},
		{"successor and policy", []string{"elect", "a", "m", "--successor", "n", "--successor-policy", "newest"}, env, "--successor and --successor-policy: pass one of them"},
		{"successor policy unknown", []string{"elect", "a", "m", "--successor-policy", "oldest"}, env, "--successor-policy \"oldest\": want \"newest\""},
		{"successor is self", []string{"run", "a", "m", "--successor", "m", "--", "true"}, env, "--successor \"m\" is this MEMBER"},
		{"transfer timeout above the lease", []string{"elect", "a", "m", "--transfer-timeout", "40s"}, env, "--transfer-timeout 40s: want above zero and below --lease-duration 30s"},
		{"too many", []string{"fence", "a", "b"}, env, "fence takes 1 argument(s), ROLE, and got 2"},
		{"create-topic args", []string{"create-topic", "x"}, env, "create-topic takes no arguments"},
		{"unknown flag", []string{"describe", "a", "--bogus"}, env, "unknown flag: --bogus (see 'krabka-coord describe --help')"},
		{"unknown command", []string{"bogus"}, env, "unknown command \"bogus\" for \"krabka-coord\" (see 'krabka-coord --help')"},
		// Cobra took --bogus for a flag with a value, and the address for
		// the command.
		{"unknown flag before a flag", []string{"--bogus", "--brokers", "127.0.0.1:1"}, env, "unknown flag: --bogus (see 'krabka-coord --help')"},
		{"unknown flag after a flag", []string{"-vo", "json", "--bogus", "list"}, env, "unknown flag: --bogus (see 'krabka-coord --help')"},
		{"unknown flag with a value", []string{"--bogus=1", "--topic", "t", "list"}, env, "unknown flag: --bogus (see 'krabka-coord list --help')"},
		{"port out of range", []string{"list", "--brokers", "127.0.0.1:99999"}, env, "--brokers: broker \"127.0.0.1:99999\": port 99999 out of range 1-65535; want host:port"},
		{"port not a number", []string{"describe", "a", "--brokers", "kafka-1:x"}, env, "--brokers: broker \"kafka-1:x\": port \"x\" is not a number"},
		{"port of the env", []string{"describe", "a"}, map[string]string{envBrokers: "kafka-1:0"}, "$KRABKA_BROKERS: broker \"kafka-1:0\": port 0 out of range"},
		{"output", []string{"describe", "a", "--output", "yaml"}, env, "--output \"yaml\": want text or json"},
		{"partitions", []string{"describe", "a", "--partitions", "0"}, env, "--partitions 0: want at least 1"},
		{"topic", []string{"describe", "a", "--topic", "no spaces"}, env, "--topic \"no spaces\""},
		{"no brokers", []string{"describe", "a"}, map[string]string{}, "no brokers: pass --brokers host:port[,host:port...] or set KRABKA_BROKERS"},
		{"sasl without mechanism", []string{"describe", "a", "--sasl-user", "u"}, env, "need --sasl-mechanism"},
		{"sasl mechanism", []string{"describe", "a", "--sasl-mechanism", "gssapi", "--sasl-user", "u"}, env, "want plain, scram-sha-256 or scram-sha-512"},
		{"sasl mechanism without user", []string{"describe", "a", "--sasl-mechanism", "bogus"}, env, "--sasl-mechanism \"bogus\": want plain, scram-sha-256 or scram-sha-512"},
		{"sasl without user", []string{"describe", "a", "--sasl-mechanism", "plain"}, env, "needs --sasl-user"},
		{"tls cert without key", []string{"describe", "a", "--tls-cert", "c.pem"}, env, "--tls-cert and --tls-key go together"},
		{"tls ca missing", []string{"describe", "a", "--tls-ca", "/nonexistent/ca.pem"}, env, "--tls-ca"},
		{"lease", []string{"elect", "a", "m", "--lease-duration", "2s", "--renew-interval", "2s"}, env, "is above a third of --lease-duration 2s"},
		{"poll", []string{"elect", "a", "m", "--poll-interval", "0s"}, env, "--poll-interval 0s"},
		{"wait", []string{"elect", "a", "m", "--wait", "-1s"}, env, "--wait -1s"},
		{"run without dashes", []string{"run", "a", "m", "true"}, env, "with -- before the command"},
		{"run flag of the command", []string{"run", "a", "m", "sh", "-c", "true"}, env, "put -- between MEMBER and the command"},
		{"run without command", []string{"run", "a", "m", "--"}, env, "ROLE MEMBER -- COMMAND"},
		{"grace", []string{"run", "a", "m", "--grace", "0s", "--", "true"}, env, "--grace 0s"},
		{"replication factor", []string{"create-topic", "--replication-factor", "0"}, env, "--replication-factor 0"},
		{"min isr", []string{"create-topic", "--replication-factor", "1", "--min-insync-replicas", "2"}, env, "above --replication-factor 1"},
		{"watch for", []string{"watch", "a", "--for", "-1s"}, env, "--for -1s"},
		{"connect timeout", []string{"describe", "a", "--connect-timeout", "0s"}, env, "--connect-timeout 0s"},
		{"demo lease", []string{"demo", "--lease-duration", "1s", "--renew-interval", "1s"}, env, "is above a third of --lease-duration 1s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.env, tt.args...)
			if code != exitUsage {
				t.Fatalf("exit code %d, want %d; stderr %q", code, exitUsage, stderr)
			}
			if stdout != "" {
				t.Fatalf("stdout = %q; want nothing", stdout)
			}
			assertOneLine(t, stderr, tt.want)
		})
	}
}

// A broker that refuses the connection fails the command at once, with
// exit code 4, and not after franz-go's retries.
func TestUnreachableBrokerFailsFast(t *testing.T) {
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := listener.Addr().String()
	listener.Close()
	for _, args := range [][]string{
		{"describe", "controller"},
		{"elect", "controller", "node-1"},
		{"run", "controller", "node-1", "--", "true"},
		{"fence", "controller"},
		{"watch", "controller"},
		{"create-topic"},
		{"demo"},
	} {
		t.Run(args[0], func(t *testing.T) {
			start := time.Now()
			withBrokers := append([]string{args[0], "--brokers", addr}, args[1:]...)
			code, _, stderr := runCLI(t, nil, withBrokers...)
			if code != exitCluster {
				t.Fatalf("exit code %d, want %d; stderr %q", code, exitCluster, stderr)
			}
			if elapsed := time.Since(start); elapsed > 5*time.Second {
				t.Fatalf("took %v; want a fast failure", elapsed)
			}
			assertOneLine(t, stderr, "cannot reach Kafka at "+addr)
			assertOneLine(t, stderr, "check --brokers")
		})
	}
}

func newTestGlobals(t *testing.T, env map[string]string, args ...string) *globals {
	t.Helper()
	root, g := newRoot(io.Discard, io.Discard, func(key string) string { return env[key] })
	root.AddCommand(&cobra.Command{Use: "probe", RunE: func(*cobra.Command, []string) error { return nil }})
	root.SetArgs(append([]string{"probe"}, args...))
	if err := root.Execute(); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return g
}

func TestBrokerList(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"flag", nil, []string{"--brokers", " a:1, b:2 ,,"}, "a:1,b:2"},
		{"env", map[string]string{envBrokers: "c:3,d:4"}, nil, "c:3,d:4"},
		{"flag wins over env", map[string]string{envBrokers: "c:3"}, []string{"--brokers", "a:1"}, "a:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newTestGlobals(t, tt.env, tt.args...)
			brokers, err := g.brokerList()
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(brokers, ","); got != tt.want {
				t.Fatalf("brokers = %q, want %q", got, tt.want)
			}
			if !g.brokersGiven() {
				t.Fatal("brokersGiven = false")
			}
		})
	}
	g := newTestGlobals(t, nil)
	if _, err := g.brokerList(); err == nil || g.brokersGiven() {
		t.Fatalf("no flag and no env: brokerList err = %v, brokersGiven = %v; want an error and false", err, g.brokersGiven())
	}
}

func TestSASLOptions(t *testing.T) {
	for _, mechanism := range []string{"plain", "scram-sha-256", "SCRAM-SHA-512"} {
		g := newTestGlobals(t, map[string]string{envSASLPassword: "secret"}, "--sasl-mechanism", mechanism, "--sasl-user", "u")
		opt, err := g.saslOption()
		if err != nil || opt == nil {
			t.Fatalf("%s: option %v, err %v", mechanism, opt, err)
		}
	}
	g := newTestGlobals(t, nil)
	if opt, err := g.saslOption(); opt != nil || err != nil {
		t.Fatalf("no SASL flags: option %v, err %v; want none", opt, err)
	}
}

// writeCert writes a self-signed certificate and its key as PEM files.
func writeCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "krabka test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestTLSConfig(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir)
	g := newTestGlobals(t, nil, "--tls-ca", cert, "--tls-cert", cert, "--tls-key", key, "--tls-server-name", "kafka.example")
	config, err := g.tlsConfig()
	if err != nil {
		t.Fatal(err)
	}
	if config == nil || config.RootCAs == nil || len(config.Certificates) != 1 || config.ServerName != "kafka.example" {
		t.Fatalf("config = %+v; want the CA pool, one certificate and the server name", config)
	}
	if g := newTestGlobals(t, nil, "--tls"); func() bool { c, err := g.tlsConfig(); return c == nil || err != nil || c.RootCAs != nil }() {
		t.Fatal("--tls alone: want a config over the system pool")
	}
	if c, err := newTestGlobals(t, nil).tlsConfig(); c != nil || err != nil {
		t.Fatalf("no TLS flags: config %v, err %v; want none", c, err)
	}
	notPEM := filepath.Join(dir, "not.pem")
	os.WriteFile(notPEM, []byte("nothing"), 0o600)
	if _, err := newTestGlobals(t, nil, "--tls-ca", notPEM).tlsConfig(); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("a CA file without PEM: err %v", err)
	}
}

// stateOf folds records built with the library's codec.
func stateOf(t *testing.T, role coordination.Role, records ...coordination.StateRecord) coordination.RoleState {
	t.Helper()
	state, err := coordination.BuildRoleState(role, records)
	if err != nil {
		t.Fatal(err)
	}
	return state
}

// heartbeatRecord is the log record of one heartbeat.
func heartbeatRecord(role coordination.Role, member string, offset, seenAt int64) coordination.StateRecord {
	m, _ := coordination.NewMemberID(member)
	return coordination.StateRecord{Offset: offset, Key: coordination.EncodeKey(coordination.HeartbeatKey(role, m)),
		Value: coordination.EncodeHeartbeat(coordination.Heartbeat{Member: m, SeenAt: seenAt})}
}

func registration(role coordination.Role, member string, offset, at int64) coordination.StateRecord {
	id, _ := coordination.NewMemberID(member)
	return coordination.StateRecord{Offset: offset,
		Key:   coordination.EncodeKey(coordination.RegistrationKey(role, id)),
		Value: coordination.EncodeRegistration(coordination.Registration{Member: id, RegisteredAt: at})}
}

func deregistration(role coordination.Role, member string, offset int64) coordination.StateRecord {
	id, _ := coordination.NewMemberID(member)
	return coordination.StateRecord{Offset: offset, Key: coordination.EncodeKey(coordination.RegistrationKey(role, id))}
}

func leaseRecord(role coordination.Role, member string, token coordination.FencingToken, offset, granted, deadline int64) coordination.StateRecord {
	id, _ := coordination.NewMemberID(member)
	return coordination.StateRecord{Offset: offset,
		Key:   coordination.EncodeKey(coordination.LeaseKey(role)),
		Value: coordination.EncodeLease(coordination.Lease{Member: id, Token: token, GrantedAt: granted, Deadline: deadline})}
}

func leaseTombstone(role coordination.Role, offset int64) coordination.StateRecord {
	return coordination.StateRecord{Offset: offset, Key: coordination.EncodeKey(coordination.LeaseKey(role))}
}

func mustToken(t *testing.T, id int64, epoch int16) coordination.FencingToken {
	t.Helper()
	token, err := coordination.NewFencingToken(id, epoch)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

func TestDescribeOutput(t *testing.T) {
	role, _ := coordination.NewRole("controller")
	partition := coordination.TopicPartition{Topic: coordination.StateTopic, Partition: 12}
	t7, t8 := mustToken(t, 4242, 7), mustToken(t, 4242, 8)
	state := stateOf(t, role,
		registration(role, "node-1", 0, 1000),
		registration(role, "node-2", 1, 2000),
		registration(role, "node-3", 2, 3000),
		leaseRecord(role, "node-2", t7, 3, 10_000, 40_000),
	)
	now := int64(25_000)

	result := buildDescribe(role, partition, state, coordination.LeadershipStatus{Role: role, Token: t7, Held: true}, now, coordination.DefaultLeaseConfig())
	var order []string
	for _, m := range result.Roster {
		order = append(order, m.Member)
	}
	if got := strings.Join(order, ","); got != "node-2,node-1,node-3" {
		t.Fatalf("rank order = %s; want the holder first, then the standbys", got)
	}
	if r := result.Roster; !r[0].Holder || r[0].Rank != nil || r[1].Rank == nil || *r[1].Rank != 0 || r[2].Rank == nil || *r[2].Rank != 1 {
		t.Fatalf("roster = %+v; want the holder without a rank, then ranks 0 and 1", r)
	}
	if l := result.Lease; l == nil || l.Holder != "node-2" || l.Token.Token != "4242:7" || l.TimeLeftMs != 15_000 || !l.Live || !l.Authoritative {
		t.Fatalf("lease = %+v", result.Lease)
	}
	line, err := json.Marshal(result)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"partition":12`, `"member":"node-2","holder":true,"rank":null,"offset":1`, `"member":"node-1","holder":false,"rank":0,"offset":0`, `"last_seen":{"time":"1970-01-01T00:00:10.000Z","ms":10000}`, `"producer_id":4242`, `"producer_epoch":7`, `"authoritative":true`, `"deadline":{"time":"1970-01-01T00:00:40.000Z","ms":40000}`} {
		if !strings.Contains(string(line), want) {
			t.Fatalf("JSON %s lacks %s", line, want)
		}
	}
	var text bytes.Buffer
	printDescribe(&text, result)
	for _, want := range []string{
		"partition:   __coordination_state-12",
		"coordinator: epoch 4242:7",
		"lease:       held by node-2, token 4242:7, live, 15.00s left",
		"token 4242:7 is authoritative",
		"  holder  node-2  1       1970-01-01T00:00:02.000Z",
		"  0       node-1  0       1970-01-01T00:00:01.000Z",
		"  1       node-3  2",
	} {
		if !strings.Contains(text.String(), want) {
			t.Fatalf("text lacks %q:\n%s", want, text.String())
		}
	}

	// A newer epoch at the coordinator: the lease is not authoritative.
	stale := buildDescribe(role, partition, state, coordination.LeadershipStatus{Role: role, Token: t8, Held: true}, 50_000, coordination.DefaultLeaseConfig())
	if stale.Lease.Authoritative || stale.Lease.Live || stale.Lease.TimeLeftMs != 0 {
		t.Fatalf("stale lease = %+v", stale.Lease)
	}
	text.Reset()
	printDescribe(&text, stale)
	if !strings.Contains(text.String(), "EXPIRED 10.00s ago") || !strings.Contains(text.String(), "NOT authoritative: the coordinator holds 4242:8") {
		t.Fatalf("text:\n%s", text.String())
	}

	// No member, no epoch.
	empty := buildDescribe(role, partition, coordination.RoleState{}, coordination.LeadershipStatus{Role: role, Token: coordination.NoEpoch}, now, coordination.DefaultLeaseConfig())
	line, _ = json.Marshal(empty)
	if !strings.Contains(string(line), `"lease":null`) || !strings.Contains(string(line), `"coordinator":{"held":false,"token":null}`) || !strings.Contains(string(line), `"roster":[]`) {
		t.Fatalf("empty JSON %s", line)
	}
}

// TestDescribeRosterLiveness: describe shows a standby's newest heartbeat
// as its last sign of life, and a standby unseen for 3 heartbeat intervals
// as lapsed, without a rank, after the live ones, which move up; list
// counts the lapsed apart.
func TestDescribeRosterLiveness(t *testing.T) {
	role, _ := coordination.NewRole("controller")
	partition := coordination.TopicPartition{Topic: coordination.StateTopic, Partition: 12}
	t7 := mustToken(t, 4242, 7)
	node3, _ := coordination.NewMemberID("node-3")
	state := stateOf(t, role,
		registration(role, "node-1", 0, 1000),
		registration(role, "dead", 1, 2000),
		registration(role, "node-3", 2, 3000),
		leaseRecord(role, "node-1", t7, 3, 100_000, 130_000),
		coordination.StateRecord{Offset: 4, Key: coordination.EncodeKey(coordination.HeartbeatKey(role, node3)),
			Value: coordination.EncodeHeartbeat(coordination.Heartbeat{Member: node3, SeenAt: 93_000})},
		heartbeatRecord(role, "dead", 5, 2000), // its one heartbeat, right after its registration
	)
	view, err := rosterView(30 * time.Second) // lapse 90 s
	if err != nil {
		t.Fatal(err)
	}
	result := buildDescribe(role, partition, state, coordination.LeadershipStatus{Role: role, Token: t7, Held: true}, 100_000, view)
	var got []string
	for _, m := range result.Roster {
		rank := "-"
		if m.Rank != nil {
			rank = fmt.Sprint(*m.Rank)
		}
		got = append(got, fmt.Sprintf("%s:%s:%t:%d", m.Member, rank, m.Lapsed, m.LastSeen.Millis))
	}
	if want := "node-1:-:false:100000 node-3:0:false:93000 dead:-:true:2000"; strings.Join(got, " ") != want {
		t.Fatalf("roster = %s; want %s", strings.Join(got, " "), want)
	}
	var text bytes.Buffer
	printDescribe(&text, result)
	for _, want := range []string{"  0       node-3  2       1970-01-01T00:00:03.000Z  heartbeat 7.00s ago", "  lapsed  dead    1", "last seen 98.00s ago: no heartbeat for 3 intervals"} {
		if !strings.Contains(text.String(), want) {
			t.Fatalf("text lacks %q:\n%s", want, text.String())
		}
	}
	line, _ := json.Marshal(result)
	if !strings.Contains(string(line), `"member":"dead","holder":false,"rank":null,"offset":1`) || !strings.Contains(string(line), `"lapsed":true`) {
		t.Fatalf("JSON %s", line)
	}
	row := buildListRow(roleFold{role: role, partition: partition, state: state}, coordination.LeadershipStatus{Role: role, Token: t7, Held: true}, true, 100_000, view)
	if row.Standbys != 1 || row.LapsedStandbys != 1 {
		t.Fatalf("list row standbys %d, lapsed %d; want 1 and 1", row.Standbys, row.LapsedStandbys)
	}
	// The one-line summary of watch's state event names the lapsed standby
	// without a rank (a lapsed entry has none: it once panicked here).
	if line := summarize(result); !strings.Contains(line, "standbys node-3 (rank 0), dead (lapsed)") {
		t.Fatalf("summarize = %q", line)
	}
	// With the members' shorter interval passed, node-3 lapses too.
	short, _ := rosterView(2 * time.Second)
	if r := buildDescribe(role, partition, state, coordination.LeadershipStatus{Role: role, Token: t7, Held: true}, 100_000, short); !r.Roster[1].Lapsed {
		t.Fatalf("with a 2s heartbeat interval node-3 (seen 7s ago) is not lapsed: %+v", r.Roster)
	}
}

// TestDescribeRosterLapseFollowsTheLease: without --heartbeat-interval,
// describe and list judge a standby by the members' default interval, the
// lease duration that the role's lease record carries (6 s here: a
// standby unseen for 18 s lapses), not by 30 s; an explicit interval wins.
func TestDescribeRosterLapseFollowsTheLease(t *testing.T) {
	role, _ := coordination.NewRole("ledger")
	partition := coordination.TopicPartition{Topic: coordination.StateTopic, Partition: 3}
	t7 := mustToken(t, 4242, 7)
	node3, _ := coordination.NewMemberID("node-3")
	state := stateOf(t, role,
		registration(role, "node-2", 0, 1000),
		registration(role, "node-1", 1, 2000),
		registration(role, "node-3", 2, 3000),
		leaseRecord(role, "node-2", t7, 3, 100_000, 106_000),
		coordination.StateRecord{Offset: 4, Key: coordination.EncodeKey(coordination.HeartbeatKey(role, node3)),
			Value: coordination.EncodeHeartbeat(coordination.Heartbeat{Member: node3, SeenAt: 95_000})},
		heartbeatRecord(role, "node-1", 5, 2000), // its one heartbeat, right after its registration
	)
	auto, err := rosterView(0)
	if err != nil {
		t.Fatalf("rosterView(0): %v", err)
	}
	status := coordination.LeadershipStatus{Role: role, Token: t7, Held: true}
	ranks := func(view coordination.LeaseConfig) string {
		var got []string
		for _, m := range buildDescribe(role, partition, state, status, 100_000, view).Roster {
			got = append(got, fmt.Sprintf("%s:%t", m.Member, m.Lapsed))
		}
		return strings.Join(got, " ")
	}
	// node-1's last heartbeat was 98 s ago: past 3 × 6 s.
	if got, want := ranks(auto), "node-2:false node-3:false node-1:true"; got != want {
		t.Fatalf("roster by the lease's own duration = %s; want %s", got, want)
	}
	explicit, _ := rosterView(40 * time.Second) // lapse 120 s
	if got, want := ranks(explicit), "node-2:false node-1:false node-3:false"; got != want {
		t.Fatalf("roster with --heartbeat-interval 40s = %s; want %s", got, want)
	}
	row := buildListRow(roleFold{role: role, partition: partition, state: state}, status, true, 100_000, auto)
	if row.Standbys != 1 || row.LapsedStandbys != 1 {
		t.Fatalf("list row standbys %d, lapsed %d; want 1 and 1", row.Standbys, row.LapsedStandbys)
	}
}

// TestWatchEvents: watch's events of coordination.Observe's changes, with
// their fields and words.
func TestWatchEvents(t *testing.T) {
	synctest.Test(t, testWatchEvents)
}

func testWatchEvents(t *testing.T) {
	role, _ := coordination.NewRole("controller")
	other, _ := coordination.NewRole("other")
	t1, t2 := mustToken(t, 7, 1), mustToken(t, 7, 2)
	feed := startFeed(t, role, coordination.DefaultLeaseConfig(), 900)
	defer feed.stop()
	now := time.UnixMilli(5000)
	feed.log.add(
		registration(role, "a", 0, 1000),
		registration(other, "x", 1, 1000),
		leaseRecord(role, "a", t1, 2, 1000, 4000),
		registration(role, "b", 3, 1100),
		leaseRecord(role, "a", t1, 4, 2000, 5000),
	)
	events := feed.at(1000)
	if got := kinds(events); got != "registered:a granted:a registered:b renewed:a" {
		t.Fatalf("events = %s", got)
	}
	if *events[2].Rank != 0 || !strings.Contains(events[2].Message, "rank 0") {
		t.Fatalf("registration of b = %+v; want rank 0 behind the holder", events[2])
	}
	// Records already folded come again after compaction: skipped.
	feed.log.add(registration(role, "a", 0, 1000))
	if again := feed.at(1100); len(again) != 0 {
		t.Fatalf("a repeated record made events: %s", kinds(again))
	}
	if events := feed.at(5000); len(events) != 1 || events[0].Kind != eventExpired || events[0].Member != "a" || events[0].Offset != nil ||
		events[0].Deadline.Millis != 5000 || !strings.Contains(events[0].Message, "expired at") {
		t.Fatalf("expiry at the deadline = %+v", events)
	}
	if events := feed.at(6000); len(events) != 0 {
		t.Fatalf("one expiry reported twice: %s", kinds(events))
	}
	feed.log.add(
		leaseRecord(role, "b", t2, 5, 5100, 8100),
		leaseTombstone(role, 6),
		deregistration(role, "b", 7),
	)
	events = feed.at(6100)
	if got := kinds(events); got != "takeover:b released:b deregistered:b" {
		t.Fatalf("events = %s", got)
	}
	takeover := events[0]
	if takeover.PreviousMember != "a" || tokenText(takeover.PreviousToken) != "7:1" || tokenText(takeover.Token) != "7:2" ||
		takeover.GrantedAt.Millis != 5100 || takeover.PreviousDeadline.Millis != 5000 || !strings.Contains(takeover.Message, "its lease expired 100ms before") {
		t.Fatalf("takeover = %+v", takeover)
	}
	if line := formatEvent(takeover); !strings.HasSuffix(line, "\n") || !strings.Contains(line, "takeover      b           b took over with token 7:2 from a") {
		t.Fatalf("formatEvent = %q", line)
	}
	if released := events[1]; tokenText(released.Token) != "7:2" || !strings.Contains(released.Message, "lease of b (token 7:2) cleared") {
		t.Fatalf("release = %+v", released)
	}
	if left := events[2]; left.Message != "left the roster" || left.Offset == nil || *left.Offset != 7 {
		t.Fatalf("deregistration = %+v", left)
	}
	for _, kind := range []coordination.ChangeKind{coordination.ChangeState, coordination.ChangeSynced} {
		if event, ok := eventOf(coordination.RoleChange{Kind: kind, Role: role, Offset: -1}, coordination.DefaultLeaseConfig()); ok {
			t.Fatalf("eventOf(%s) = %+v; watch prints its own state line, and no synced line", kind, event)
		}
	}
	status := func(held bool, token coordination.FencingToken) coordination.LeadershipStatus {
		return coordination.LeadershipStatus{Role: role, Held: held, Token: token}
	}
	if e := epochEvent(role, status(true, t1), status(true, t2), now); tokenText(e.Token) != "7:2" || tokenText(e.PreviousToken) != "7:1" {
		t.Fatalf("epoch event = %+v", e)
	}
}

func TestEventPrinterJSON(t *testing.T) {
	var out bytes.Buffer
	// Text of several roles: each line names its role (watch of two
	// roles printed lines that did not say which).
	var text bytes.Buffer
	several := &eventPrinter{w: &text, withRole: true}
	several.print(roleEvent{At: newTimeJSON(0), Kind: eventGranted, Role: "o2", Member: "c", Message: "c took the role"})
	if !strings.Contains(text.String(), "  o2  granted       c           c took the role") {
		t.Fatalf("text of several roles %q; want the role after the time", text.String())
	}
	p := &eventPrinter{w: &out, json: true}
	offset, rank := int64(3), 1
	p.print(roleEvent{At: newTimeJSON(0), Kind: eventRegistered, Role: "r", Member: "m", Offset: &offset, Rank: &rank, Message: "joined"})
	p.print(roleEvent{At: newTimeJSON(0), Kind: eventRenewed, Role: "r", Member: "m"}) // only with --verbose
	var event map[string]any
	if err := json.Unmarshal(out.Bytes(), &event); err != nil {
		t.Fatalf("%q: %v", out.String(), err)
	}
	if event["event"] != "registered" || event["rank"] != float64(1) || event["offset"] != float64(3) || event["at"].(map[string]any)["time"] != "1970-01-01T00:00:00.000Z" {
		t.Fatalf("event = %v", event)
	}
}

func TestHealthAndMetrics(t *testing.T) {
	role, _ := coordination.NewRole("controller")
	m := newMemberMetrics(role, coordination.TopicPartition{Topic: coordination.StateTopic, Partition: 12}, 6*time.Second)
	now := time.Unix(1000, 0)
	m.now = func() time.Time { return now }
	token := mustToken(t, 42, 3)
	server := httptest.NewServer(m.handler(nil))
	defer server.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(server.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	if code, body := get("/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "has not read __coordination_state-12 yet") {
		t.Fatalf("standby before its first read: %d %q", code, body)
	}
	m.partitionRead(nil)
	if code, body := get("/healthz"); code != 200 || !strings.HasPrefix(body, "ok: standby") {
		t.Fatalf("standby: %d %q", code, body)
	}
	m.leaseWritten(token, 3*time.Millisecond, nil) // the grant, inside AcquireLeadership
	m.acquired(token)
	now = now.Add(time.Second)
	m.leaseWritten(token, 5*time.Millisecond, nil)
	m.leaseWritten(token, 9*time.Millisecond, errors.New("timeout"))
	now = now.Add(5 * time.Second)
	if code, body := get("/healthz"); code != 200 || !strings.Contains(body, "leads role controller with token 42:3") {
		t.Fatalf("leader renewed 5s ago: %d %q", code, body)
	}
	now = now.Add(1500 * time.Millisecond)
	if code, body := get("/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "last successful renewal was 6.50s ago") {
		t.Fatalf("leader renewed 6.5s ago, lease 6s: %d %q", code, body)
	}
	_, metrics := get("/metrics")
	for _, want := range []string{
		`krabka_coord_is_leader{role="controller"} 1`,
		`krabka_coord_token_producer_id{role="controller"} 42`,
		`krabka_coord_token_producer_epoch{role="controller"} 3`,
		`krabka_coord_leadership_changes_total{change="acquired",role="controller"} 1`,
		`krabka_coord_renewal_failures_total{role="controller"} 1`,
		`krabka_coord_renewal_duration_seconds_count{kind="grant",role="controller"} 1`,
		`krabka_coord_renewal_duration_seconds_count{kind="renewal",role="controller"} 2`,
	} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %s:\n%s", want, metrics)
		}
	}
	m.ended("fenced")
	m.partitionRead(nil)
	if code, _ := get("/healthz"); code != 200 {
		t.Fatalf("after the fence: %d; a member that knows it lost the role is healthy", code)
	}
	_, metrics = get("/metrics")
	if !strings.Contains(metrics, `krabka_coord_is_leader{role="controller"} 0`) || !strings.Contains(metrics, `krabka_coord_leadership_changes_total{change="fenced",role="controller"} 1`) {
		t.Fatalf("metrics after the fence:\n%s", metrics)
	}
}

func TestChildExitCode(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		kafkatest.RequireOrSkip(t, "no sh on the PATH")
	}
	for _, tt := range []struct {
		script string
		want   int
	}{
		{"exit 0", 0},
		{"exit 7", 7},
		{"kill -KILL $$", 137},
		{"kill -TERM $$", 143},
	} {
		err := exec.Command("sh", "-c", tt.script).Run()
		if got := childExitCode(err); got != tt.want {
			t.Errorf("sh -c %q: exit code %d, want %d", tt.script, got, tt.want)
		}
	}
}

func TestFormatting(t *testing.T) {
	if got := formatShort(4 * time.Millisecond); got != "4ms" {
		t.Errorf("formatShort(4ms) = %q", got)
	}
	if got := formatShort(2480 * time.Millisecond); got != "2.48s" {
		t.Errorf("formatShort(2.48s) = %q", got)
	}
	if got := formatAgo(1000, 3500); got != "2.50s ago" {
		t.Errorf("formatAgo = %q", got)
	}
	if got := oneLine("a\nb\r\nc\n"); got != "a; b; c" {
		t.Errorf("oneLine = %q", got)
	}
	role, _ := coordination.NewRole("r")
	state := stateOf(t, role, registration(role, "a", 0, 0), registration(role, "b", 1, 0), leaseRecord(role, "b", mustToken(t, 1, 0), 2, 0, 1))
	if got := rosterLine(state); got != "holder b; standbys a (rank 0)" {
		t.Errorf("rosterLine = %q", got)
	}
}

// The demo on the embedded cluster, in process, through the command: its
// flags reach demo.Run, and its JSON document is the one of json.md.
// internal/demo runs the scenario itself under the race detector
// (TestRunOnEmbeddedCluster); cmd/krabka-coord/e2e_test.go runs the binary.
func TestDemoInProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	code, stdout, stderr := runCLI(t, nil, "demo", "--output", "json", "--role", "ctl")
	if code != exitOK {
		t.Fatalf("demo exit code %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	var result struct {
		OK       bool   `json:"ok"`
		Role     string `json:"role"`
		Checks   []any  `json:"checks"`
		Commands []any  `json:"commands"`
	}
	if err := json.Unmarshal([]byte(stdout), &result); err != nil {
		t.Fatalf("demo --output json: %v\n%s", err, stdout)
	}
	if !result.OK || result.Role != "ctl" || len(result.Checks) < 6 || len(result.Commands) == 0 {
		t.Fatalf("demo result: ok %v, role %q, %d checks, %d commands", result.OK, result.Role, len(result.Checks), len(result.Commands))
	}
}

// demo refuses a --role that is no role before it starts anything.
func TestDemoRefusesABadRole(t *testing.T) {
	code, _, stderr := runCLI(t, nil, "demo", "--role", "\xff")
	if code != exitUsage || !strings.Contains(stderr, "invalid ROLE") {
		t.Fatalf("demo --role \\xff: exit %d, stderr %q; want %d and invalid ROLE", code, stderr, exitUsage)
	}
}

// watch of several roles: the columns align however long the roles and
// members are (the role was not padded, and a member over 10 runes pushed
// the message right), and the first lines, the states, come in time order
// (Observe yields them in name order, each stamped when its partition was
// read).
func TestWatchColumnsAlignAndStatesInTimeOrder(t *testing.T) {
	long, short := mustRole(t, "scheduler-of-the-nightly-batch-jobs"), mustRole(t, "a")
	holder, standby := mustMember(t, "n3"), mustMember(t, "node-with-a-long-name-2")
	states := []coordination.RoleChange{
		{Kind: coordination.ChangeState, Role: short, At: 2000, State: coordination.RoleState{Roster: []coordination.RosterEntry{{Member: holder}, {Member: standby}}}},
		{Kind: coordination.ChangeState, Role: long, At: 1000},
	}
	var text bytes.Buffer
	p := &eventPrinter{w: &text, withRole: true, verbose: true}
	orderStates(states, p)
	if states[0].Role != long || states[1].Role != short {
		t.Fatalf("states in order %s, %s; want the one read first first", states[0].Role, states[1].Role)
	}
	for _, change := range states {
		p.print(roleEvent{At: newTimeJSON(change.At), Kind: eventState, Role: change.Role.String(), Message: "state"})
	}
	p.print(roleEvent{At: newTimeJSON(3000), Kind: eventRenewed, Role: short.String(), Member: holder.String(), Message: "renewed"})
	p.print(roleEvent{At: newTimeJSON(4000), Kind: eventDeregistered, Role: long.String(), Member: standby.String(), Message: "left"})
	lines := strings.Split(strings.TrimSuffix(text.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("lines:\n%s", text.String())
	}
	var times []string
	for i, column := range []string{"state", "state", "renewed", "deregistered"} {
		want := 12 + 2 + len(long.String()) + 2 // the clock, the widest role
		if at := strings.Index(lines[i], column); at != want {
			t.Errorf("line %d: kind at column %d, want %d:\n%s", i, at, want, text.String())
		}
		message := strings.LastIndex(lines[i], "  ") + 2
		if want := want + 12 + 2 + len(standby.String()) + 2; message != want {
			t.Errorf("line %d: message at column %d, want %d:\n%s", i, message, want, text.String())
		}
		times = append(times, lines[i][:12])
	}
	if !slices.IsSorted(times) {
		t.Errorf("times %v; want them in order", times)
	}
}

// list of several roles, a long one among them: every column starts at the
// same place on every line.
func TestListColumnsAlign(t *testing.T) {
	deadline := timeJSON{Millis: time.Now().Add(3 * time.Second).UnixMilli()}
	rows := []listJSON{
		{Role: "a", Partition: 1, Holder: "node-1", Token: newTokenJSON(mustToken(t, 3414781078840391614, 0)), LeaseState: "live", Deadline: &deadline, CoordinatorKnown: true, Authoritative: true, Standbys: 1},
		{Role: "scheduler-of-the-nightly-batch-jobs", Partition: 12, Holder: "node-with-a-long-name-2", Token: newTokenJSON(mustToken(t, 7, 1)), LeaseState: "expired", Deadline: &deadline, LapsedStandbys: 2},
		{Role: "b", Partition: 2},
	}
	var out bytes.Buffer
	printList(&out, rows, "t")
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	starts := func(line string) []int {
		var at []int
		for i := 1; i < len(line); i++ {
			if line[i] != ' ' && line[i-1] == ' ' && i >= 2 && line[i-2] == ' ' {
				at = append(at, i)
			}
		}
		return at
	}
	header := starts(lines[0])
	if len(lines) != 4 || len(header) != 6 {
		t.Fatalf("list:\n%s", out.String())
	}
	for _, line := range lines[1:] {
		for _, at := range header {
			if line[at-1] != ' ' || line[at] == ' ' {
				t.Fatalf("a column of the header starts at %d, and this row has no cell there:\n%s", at, out.String())
			}
		}
	}
}

// watch on a planned transfer: the offer (the holder's token, the target
// named) is not shown as the target taking over, and the target's own
// lease under a new token says it may be a transfer taken.
func TestWatchEventsOfATransfer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		role, _ := coordination.NewRole("controller")
		t1, t2 := mustToken(t, 7, 1), mustToken(t, 7, 2)
		feed := startFeed(t, role, coordination.DefaultLeaseConfig(), 900)
		defer feed.stop()
		feed.log.add(
			registration(role, "a", 0, 1000),
			registration(role, "b", 1, 1000),
			leaseRecord(role, "a", t1, 2, 1000, 4000),
		)
		if got := kinds(feed.at(1000)); got != "registered:a registered:b granted:a" {
			t.Fatalf("events = %s", got)
		}
		feed.log.add(leaseRecord(role, "b", t1, 3, 2000, 5000)) // the offer
		events := feed.at(2000)
		if len(events) != 1 || events[0].Kind != "takeover" || strings.Contains(events[0].Message, "took over") ||
			!strings.Contains(events[0].Message, "the lease under token 7:1 names b now, not a, with no new epoch: the offer of a planned transfer") {
			t.Fatalf("the offer: %+v; want a takeover line that says no epoch was minted", events)
		}
		feed.log.add(leaseRecord(role, "b", t2, 4, 2010, 5010)) // b's own mint
		events = feed.at(2010)
		if len(events) != 1 || events[0].Kind != "reacquired" || !strings.Contains(events[0].Message, "b took the role again with a new token 7:2") ||
			!strings.Contains(events[0].Message, "a planned transfer's offer taken") {
			t.Fatalf("the transfer taken: %+v", events)
		}
	})
}
