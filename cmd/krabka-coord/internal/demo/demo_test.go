package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// TestMain fails the package's tests when a goroutine of a run (a member,
// the observer, the embedded cluster) outlives the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// demoOptions are the options of krabka-coord demo on the embedded
// cluster: its default timings and flags.
func demoOptions(t *testing.T, out *bytes.Buffer) Options {
	t.Helper()
	config, err := coordination.NewLeaseConfig(3*time.Second, time.Second, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return Options{
		Out: out, Partitions: coordination.DefaultPartitions, Lease: config,
		LeaseOptions: []coordination.Option{coordination.WithLeaseConfig(config), coordination.WithPollInterval(200 * time.Millisecond)},
		Interval:     300 * time.Millisecond, Timeout: 55 * time.Second,
	}
}

// The scenario on the embedded cluster, in process, so that the race
// detector sees its goroutines: every check holds, and the document of
// JSON output has the events, the commands read back and the checks.
func TestRunOnEmbeddedCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	var out bytes.Buffer
	opts := demoOptions(t, &out)
	opts.JSON = true
	start := time.Now()
	if err := Run(context.Background(), opts); err != nil {
		t.Fatalf("Run: %v\n%s", err, out.String())
	}
	var result demoJSON
	if err := json.Unmarshal(out.Bytes(), &result); err != nil {
		t.Fatalf("the JSON document: %v\n%s", err, out.String())
	}
	if !result.OK || len(result.Checks) < 6 || len(result.Commands) == 0 || result.Role != "controller" {
		t.Fatalf("demo result: ok %v, role %q, %d checks, %d commands", result.OK, result.Role, len(result.Checks), len(result.Commands))
	}
	t.Logf("demo in process: %v, %d commands, %d events", time.Since(start), len(result.Commands), len(result.Events))
}

// Run refuses options it cannot run with, as a usage error, and starts
// nothing.
func TestRunRefusesMissingOptions(t *testing.T) {
	var out bytes.Buffer
	for name, change := range map[string]func(*Options){
		"no Out":      func(o *Options) { o.Out = nil },
		"no Interval": func(o *Options) { o.Interval = 0 },
		"no Timeout":  func(o *Options) { o.Timeout = -time.Second },
	} {
		opts := demoOptions(t, &out)
		change(&opts)
		err := Run(context.Background(), opts)
		var demoErr *Error
		if !errors.As(err, &demoErr) || demoErr.Class != ClassUsage {
			t.Errorf("%s: Run = %v; want an *Error of ClassUsage", name, err)
		}
	}
	if out.Len() != 0 {
		t.Errorf("Run printed %q before refusing its options", out.String())
	}
}

func TestFormatTimelineRow(t *testing.T) {
	if got := formatTimelineRow(timelineEvent{ElapsedMs: 4010, Member: "node-2", token: "19:1", Rank: "leader", Message: "takes over"}, 9); got != "   4.01s  node-2   19:1       leader   takes over\n" {
		t.Errorf("formatTimelineRow = %q", got)
	}
	if !strings.HasSuffix(formatTimelineRow(timelineEvent{Message: "m"}, 1), "m\n") {
		t.Error("a row ends with its message and a newline")
	}
}
