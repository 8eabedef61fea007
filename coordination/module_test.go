package coordination_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestLibraryModuleRequiresOnlyFranzGo (issue 11, item 8): the library
// module's go.mod requires the franz-go family and what franz-go itself
// needs, nothing else: every requirement of the library module becomes a
// minimum version for every user. The CLI (cobra, Prometheus), the fault
// harness and the bench (etcd, gRPC, zap) are modules of their own. The
// one other requirement, go.uber.org/goleak, has no requirements of its own
// and no library package imports it (go list -deps proves it below): a
// user's build never compiles it.
func TestLibraryModuleRequiresOnlyFranzGo(t *testing.T) {
	data, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatalf("read the library module's go.mod: %v", err)
	}
	allowed := []string{
		"github.com/twmb/franz-go",      // kgo, kadm, kmsg, kfake (tests)
		"github.com/klauspost/compress", // franz-go's compression codecs
		"github.com/pierrec/lz4/v4",     // franz-go's lz4 codec
		"go.uber.org/goleak",            // the leak check of the TestMains: tests only, checked below
	}
	inBlock := false
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "require (":
			inBlock = true
			continue
		case inBlock && line == ")":
			inBlock = false
			continue
		case strings.HasPrefix(line, "require "):
			line = strings.TrimPrefix(line, "require ")
		case !inBlock:
			continue
		}
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "//") {
			continue
		}
		ok := false
		for _, prefix := range allowed {
			ok = ok || strings.HasPrefix(fields[0], prefix)
		}
		if !ok {
			t.Errorf("the library module requires %s; it may require only the franz-go family and its codecs", fields[0])
		}
	}
}

// TestGoleakIsImportedByTestsOnly: go.uber.org/goleak is a requirement of
// the library module for its tests, and no package of the module that a
// user builds depends on it.
func TestGoleakIsImportedByTestsOnly(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps ./...: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/krabka-io/krabka-streams-go/coordination") {
		t.Fatalf("go list -deps ./... lists %d packages without the coordination package; want the module's packages", len(deps))
	}
	for _, dep := range deps {
		if strings.HasPrefix(dep, "go.uber.org/goleak") {
			t.Errorf("a package of the library module depends on %s outside its tests", dep)
		}
	}
}
