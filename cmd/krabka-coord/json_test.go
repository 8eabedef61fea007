package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// jsonSchema is the documentation of json.md: the keys of each object, in
// order, by heading.
func jsonSchema(t *testing.T) map[string][]string {
	t.Helper()
	doc, err := os.ReadFile("json.md")
	if err != nil {
		t.Fatal(err)
	}
	schema := make(map[string][]string)
	heading := ""
	key := regexp.MustCompile("`([a-z_]+)`")
	for _, line := range strings.Split(string(doc), "\n") {
		switch {
		case strings.HasPrefix(line, "#"):
			heading = strings.TrimSpace(strings.TrimLeft(line, "#"))
		case strings.HasPrefix(line, "keys: "):
			for _, m := range key.FindAllStringSubmatch(line, -1) {
				schema[heading] = append(schema[heading], m[1])
			}
		}
	}
	return schema
}

// nested names the object that a key of an object holds, for the keys
// that hold objects; a key that holds a list of them is marked with [].
var nested = map[string]map[string]string{
	"describe":     {"observed_at": "time", "roster": "[]roster entry", "lease": "lease", "coordinator": "coordinator"},
	"roster entry": {"registered_at": "time", "last_seen": "time"},
	"lease":        {"token": "token", "granted_at": "time", "deadline": "time"},
	"coordinator":  {"token": "token"},
	"list":         {"token": "token", "deadline": "time", "coordinator_token": "token"},
	"watch event": {"at": "time", "token": "token", "previous_token": "token", "granted_at": "time", "deadline": "time",
		"previous_deadline": "time", "state": "describe"},
	"member event": {"at": "time", "token": "token", "current_token": "token", "deadline": "time"},
	"fence":        {"old_token": "token", "new_token": "token", "lease_token": "token"},
	"step-down":    {"previous_token": "token", "token": "token"},
	"transfer":     {"previous_token": "token", "token": "token"},
	"drain":        {"previous_token": "token", "token": "token"},
	"demo":         {"events": "[]demo event", "commands": "[]demo command", "checks": "[]demo check"},
	"doctor":       {"checks": "[]doctor check"},
	"demo event":   {"at": "time", "token": "token"},
	"demo command": {"token": "token"},
}

// objectKeys returns the keys of a JSON object in order, and their raw
// values.
func objectKeys(raw []byte) ([]string, map[string]json.RawMessage, error) {
	var values map[string]json.RawMessage
	if err := json.Unmarshal(raw, &values); err != nil {
		return nil, nil, err
	}
	decoder := json.NewDecoder(bytes.NewReader(raw))
	if _, err := decoder.Token(); err != nil { // {
		return nil, nil, err
	}
	var keys []string
	for decoder.More() {
		token, err := decoder.Token()
		if err != nil {
			return nil, nil, err
		}
		keys = append(keys, token.(string))
		var skip json.RawMessage
		if err := decoder.Decode(&skip); err != nil {
			return nil, nil, err
		}
	}
	return keys, values, nil
}

// checkObject checks one JSON object against the schema of name, and the
// objects it holds, and returns what is wrong, or "".
func checkObject(schema map[string][]string, name string, raw []byte) string {
	want, ok := schema[name]
	if !ok {
		return "json.md documents no object " + name
	}
	keys, values, err := objectKeys(raw)
	if err != nil {
		return fmt.Sprintf("%s: not an object: %v: %s", name, err, raw)
	}
	if !slices.Equal(keys, want) {
		return fmt.Sprintf("%s has keys %v; json.md says %v: %s", name, keys, want, raw)
	}
	for key, inner := range nested[name] {
		value := values[key]
		if string(value) == "null" {
			continue
		}
		if list, ok := strings.CutPrefix(inner, "[]"); ok {
			var items []json.RawMessage
			if err := json.Unmarshal(value, &items); err != nil {
				return fmt.Sprintf("%s.%s: not a list: %s", name, key, value)
			}
			for _, item := range items {
				if problem := checkObject(schema, list, item); problem != "" {
					return name + "." + key + ": " + problem
				}
			}
			continue
		}
		if problem := checkObject(schema, inner, value); problem != "" {
			return name + "." + key + ": " + problem
		}
	}
	return ""
}

// checkLines checks every line of a command's stdout against the schema of
// name, and returns the values of their "event" keys.
func checkLines(t *testing.T, schema map[string][]string, name, stdout string) []string {
	t.Helper()
	var events []string
	scanner := bufio.NewScanner(strings.NewReader(stdout))
	scanner.Buffer(nil, 1<<20)
	lines := 0
	for scanner.Scan() {
		lines++
		if problem := checkObject(schema, name, scanner.Bytes()); problem != "" {
			t.Fatalf("%s line %d: %s", name, lines, problem)
		}
		var event struct{ Event string }
		_ = json.Unmarshal(scanner.Bytes(), &event)
		if event.Event != "" {
			events = append(events, event.Event)
		}
	}
	if lines == 0 {
		t.Fatalf("%s: no JSON line", name)
	}
	return events
}

// TestJSONSchema runs every command with --output json on the embedded
// cluster and checks each line against json.md: the documented keys, in
// order, and the shapes of times and tokens within.
func TestJSONSchema(t *testing.T) {
	schema := jsonSchema(t)
	if len(schema) < 15 {
		t.Fatalf("json.md documents %d objects", len(schema))
	}
	cluster := kafkatest.Fake(t)
	conn := []string{"--brokers", strings.Join(cluster.Brokers, ","), "--partitions", "2", "--topic", "schema", "--output", "json"}
	cli := func(args ...string) string {
		t.Helper()
		code, stdout, stderr := runCLI(t, nil, append(args, conn...)...)
		if code != exitOK {
			t.Fatalf("%s: exit %d: %s", args[0], code, stderr)
		}
		return stdout
	}
	checkLines(t, schema, "create-topic", cli("create-topic", "--replication-factor", "1"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// watch must have read the topic before node-1 registers, or the
	// registration is in its first state line and no event: a role seeded
	// before it starts shows in a state line once it read every partition.
	writeRegistration(t, cluster, "schema", 2, "seed", "seed-1")
	watch := startCLI(ctx, nil, append([]string{"watch", "--all", "--verbose", "--for", "6s"}, conn...)...)
	watch.waitFor(t, regexp.MustCompile(`"event":"state","role":"seed"`), 10*time.Second)
	holderCtx, stopHolder := context.WithCancel(ctx)
	holder := startCLI(holderCtx, nil, append(append([]string{"elect", "controller", "node-1", "--listen", "127.0.0.1:0", "--step-down-endpoint"}, conn...), fastLease...)...)
	waitDescribe(t, conn[:len(conn)-2], "controller", func(r describeJSON) bool { return r.Lease != nil && r.Lease.Holder == "node-1" })
	standbyCtx, stopStandby := context.WithCancel(ctx)
	standby := startCLI(standbyCtx, nil, append(append([]string{"run", "controller", "node-2"}, conn...), append(fastLease, "--grace", "200ms", "--max-clock-skew", "100ms", "--", "sleep", "30")...)...)
	state := waitDescribe(t, conn[:len(conn)-2], "controller", func(r describeJSON) bool { return r.Lease != nil && len(r.Roster) == 2 })
	checkLines(t, schema, "describe", cli("describe", "controller"))
	checkLines(t, schema, "list", cli("list"))

	if state.Lease.Holder != "node-1" {
		t.Fatalf("node-1 does not hold the role: %+v", state.Lease)
	}
	addr := waitAddr(t, holder)
	checkLines(t, schema, "step-down", cli("step-down", "controller", "--at", addr))
	checkLines(t, schema, "fence", cli("fence", "controller"))
	// The events that the checks below want, before the stops.
	holder.waitFor(t, regexp.MustCompile(`"event":"stepped_down"`), 10*time.Second)
	standby.waitFor(t, regexp.MustCompile(`"event":"command_started"`), 10*time.Second)
	stopStandby()
	stopHolder()
	standbyOut, holderOut := standby.wait(), holder.wait()
	memberEvents := checkLines(t, schema, "member event", holderOut.stdout)
	runEvents := checkLines(t, schema, "member event", standbyOut.stdout)
	for _, want := range []string{"campaigning", "elected", "stepped_down"} {
		if !slices.Contains(memberEvents, want) {
			t.Errorf("elect's events %v lack %s", memberEvents, want)
		}
	}
	for _, want := range []string{"campaigning", "elected", "command_started", "command_exited"} {
		if !slices.Contains(runEvents, want) {
			t.Errorf("run's events %v lack %s", runEvents, want)
		}
	}
	watchOut := watch.wait()
	watchEvents := checkLines(t, schema, "watch event", watchOut.stdout)
	for _, want := range []string{"registered", "granted", "released", "deregistered", "epoch"} {
		if !slices.Contains(watchEvents, want) {
			t.Errorf("watch's events %v lack %s", watchEvents, want)
		}
	}
}
