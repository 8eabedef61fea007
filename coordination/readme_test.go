package coordination_test

// The README's first snippets, built and run as a new user would run them:
// against a broker that creates no topic on its own (kfake, like the
// README's broker with auto.create.topics.enable=false).

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// readmeImports are the packages that a README snippet may use, by name.
var readmeImports = map[string]string{
	"context":      "context",
	"errors":       "errors",
	"log":          "log",
	"time":         "time",
	"coordination": "github.com/krabka-io/krabka-streams-go/coordination",
	"kgo":          "github.com/twmb/franz-go/pkg/kgo",
	"kadm":         "github.com/twmb/franz-go/pkg/kadm",
	"kerr":         "github.com/twmb/franz-go/pkg/kerr",
}

// readmeGoBlock returns the first ```go block of README.md after the text
// after, that contains the text has.
func readmeGoBlock(t *testing.T, readme, after, has string) string {
	t.Helper()
	start := strings.Index(readme, after)
	if start < 0 {
		t.Fatalf("README.md has no %q", after)
	}
	rest := readme[start:]
	for {
		open := strings.Index(rest, "```go\n")
		if open < 0 {
			t.Fatalf("README.md has no go block with %q after %q", has, after)
		}
		rest = rest[open+len("```go\n"):]
		end := strings.Index(rest, "```")
		if end < 0 {
			t.Fatalf("README.md: a go block after %q does not end", after)
		}
		if block := rest[:end]; strings.Contains(block, has) {
			return block
		}
		rest = rest[end:]
	}
}

// buildSnippet builds body, the statements of a README snippet, as the
// body of a main function, with the imports it names, into a binary of the
// test. The package is an overlay in the module (-overlay): nothing is
// written to the tree.
func buildSnippet(t *testing.T, name, body string) string {
	t.Helper()
	var imports []string
	for pkg, path := range readmeImports {
		if regexp.MustCompile(`\b` + pkg + `\.`).MatchString(body) {
			imports = append(imports, `"`+path+`"`)
		}
	}
	source := "package main\n\nimport (\n\t" + strings.Join(imports, "\n\t") + "\n)\n\nfunc main() {\n" + body + "}\n"
	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte(source), 0o600); err != nil {
		t.Fatal(err)
	}
	module, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	pkgDir := filepath.Join(module, "internal", "readme-snippet-"+name)
	overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(pkgDir, "main.go"): file}})
	overlayFile := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(overlayFile, overlay, 0o600); err != nil {
		t.Fatal(err)
	}
	// go test puts its own GOROOT/bin first on the test's PATH (Go 1.19),
	// so this is the go command of the toolchain that runs the test.
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command, to build the README's %s snippet: %v", name, err)
	}
	binary := filepath.Join(dir, name)
	build := exec.Command(goTool, "build", "-overlay", overlayFile, "-o", binary, "./internal/readme-snippet-"+name)
	build.Dir = module
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("the README's %s snippet does not build: %v\n%s\n%s", name, err, out, source)
	}
	return binary
}

// The README's first snippet takes a role and writes a command to the
// application's topic "commands". On a broker that creates no topic on its
// own, it once dropped the write's error and blocked on Done, holding the
// role and saying nothing; it must end with the error, which names the
// topic. The README's kadm snippet then creates the topic, and the first
// snippet's command lands in it.
func TestReadmeFirstSnippet(t *testing.T) {
	raw, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	if strings.Contains(readme, "kafka-topics.sh") {
		t.Errorf("README.md names kafka-topics.sh, which nothing here installs")
	}
	cluster := kafkatest.Fake(t)
	address := cluster.Brokers[0]
	first := strings.ReplaceAll(readmeGoBlock(t, readme, "## The library in a few lines", "AcquireLeadership"), "127.0.0.1:9092", address)
	create := strings.ReplaceAll(readmeGoBlock(t, readme, "## The library in a few lines", "kadm.NewClient"), "127.0.0.1:9092", address)
	leader := buildSnippet(t, "leader", first)
	creator := buildSnippet(t, "create", "ctx := context.Background()\n"+create)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	transport, err := coordination.NewKafkaTransport(coordination.DefaultLeaseConfig(), cluster.Brokers...)
	if err != nil {
		t.Fatal(err)
	}
	defer transport.Close()
	if err := transport.CreateStateTopic(ctx, 1, 1); err != nil {
		t.Fatal(err)
	}

	// No "commands" topic: the snippet ends, with the error.
	run := exec.CommandContext(ctx, leader)
	out, err := run.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("the README's first snippet did not end within a minute with no commands topic (it drops the write's error and waits on Done):\n%s", out)
	case !errors.As(err, &exit) || exit.ExitCode() == 0:
		t.Fatalf("the README's first snippet with no commands topic: %v; want a non-zero exit\n%s", err, out)
	case !strings.Contains(string(out), "commands"):
		t.Fatalf("the README's first snippet with no commands topic says %q; want the error, which names the topic", out)
	}
	t.Logf("the README's first snippet with no commands topic: %v: %s", err, strings.TrimSpace(string(out)))

	// The kadm snippet creates it, twice without an error.
	for range 2 {
		if out, err := exec.CommandContext(ctx, creator).CombinedOutput(); err != nil {
			t.Fatalf("the README's kadm snippet: %v\n%s", err, out)
		}
	}
	// Then the first snippet's command lands; it holds the role until it is
	// killed.
	holder := exec.CommandContext(ctx, leader)
	var holderOut strings.Builder
	holder.Stdout, holder.Stderr = &holderOut, &holderOut
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	stop := func() {
		_ = holder.Process.Kill()
		_ = holder.Wait()
	}
	defer stop()
	consumer := cluster.Client(t, kgo.ConsumeTopics("commands"), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	for {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			stop() // its output is complete, and read by this goroutine alone
			t.Fatalf("the README's first snippet wrote no command to the topic within a minute:\n%s", holderOut.String())
		}
		for _, record := range fetches.Records() {
			if string(record.Key) == "valve-7" && string(record.Value) == "open valve 7" {
				return
			}
		}
	}
}
