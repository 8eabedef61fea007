package main

import (
	"encoding/json"
	"testing"
)

// create-topic --output json gives min_insync_replicas as a number, as the
// other counts.
func TestCreateTopicJSONNumbers(t *testing.T) {
	brokers := kfakeBrokers(t)
	code, stdout, stderr := runCLI(t, nil, "create-topic", "--brokers", brokers, "--replication-factor", "1", "--output", "json")
	if code != exitOK {
		t.Fatalf("create-topic: exit %d: %s", code, stderr)
	}
	var fields map[string]any
	if err := json.Unmarshal([]byte(stdout), &fields); err != nil {
		t.Fatalf("%v: %s", err, stdout)
	}
	for _, key := range []string{"partitions", "replication_factor", "min_insync_replicas"} {
		if _, ok := fields[key].(float64); !ok {
			t.Errorf("%s = %#v; want a number: %s", key, fields[key], stdout)
		}
	}
	if fields["min_insync_replicas"] != float64(1) {
		t.Errorf("min_insync_replicas = %v; want 1", fields["min_insync_replicas"])
	}
}

// fence refuses a role that was never taken and has no members, a typo
// most likely, with exit code 2; --force mints its first epoch.
func TestFenceRefusesAnUnknownRole(t *testing.T) {
	brokers := kfakeBrokers(t)
	if code, _, stderr := runCLI(t, nil, "create-topic", "--brokers", brokers, "--replication-factor", "1"); code != exitOK {
		t.Fatalf("create-topic: exit %d: %s", code, stderr)
	}
	code, stdout, stderr := runCLI(t, nil, "fence", "contoller", "--brokers", brokers)
	if code != exitUsage || stdout != "" {
		t.Fatalf("fence of an unknown role: exit %d, stdout %q; want %d and nothing", code, stdout, exitUsage)
	}
	assertOneLine(t, stderr, "role contoller has never been taken and has no members: no record of the state topic names it; check the name, or pass --force to mint its first epoch")
	code, _, stderr = runCLI(t, nil, "fence", "bad\x1bname", "--brokers", brokers)
	if code != exitUsage {
		t.Fatalf("fence of an unknown role: exit %d", code)
	}
	assertOneLine(t, stderr, `role "bad\x1bname" has never been taken`)

	code, stdout, stderr = runCLI(t, nil, "fence", "contoller", "--brokers", brokers, "--force", "--output", "json")
	if code != exitOK {
		t.Fatalf("fence --force: exit %d: %s", code, stderr)
	}
	var result fenceJSON
	if err := json.Unmarshal([]byte(stdout), &result); err != nil || result.NewToken == nil || result.OldToken != nil {
		t.Fatalf("fence --force = %s (%v); want a first epoch", stdout, err)
	}
	// The role has an epoch now: fence needs no --force again.
	code, stdout, stderr = runCLI(t, nil, "fence", "contoller", "--brokers", brokers, "--output", "json")
	if code != exitOK {
		t.Fatalf("fence of a role with an epoch: exit %d: %s", code, stderr)
	}
	var again fenceJSON
	if err := json.Unmarshal([]byte(stdout), &again); err != nil || again.OldToken == nil || again.OldToken.Token != result.NewToken.Token {
		t.Fatalf("fence again = %s (%v); want the old token %s", stdout, err, result.NewToken.Token)
	}
}
