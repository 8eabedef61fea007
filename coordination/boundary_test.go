package coordination_test

import (
	"encoding/json"
	"errors"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The lint rule of the package's seam, over what the go command builds
// (go list): the rules, the loop and the codec reach a broker through the
// Transport interfaces only, so no library file of package coordination but
// the thin Kafka layer (kafka_*.go) imports franz-go or kafkawire; kafkawire,
// the machinery under that layer, depends on nothing of coordination; and
// coordinationtest, the fakes and the conformance suite, imports no Kafka
// client; and in package device, as in coordination, only kafka_*.go (the
// reader of guarded topics) imports franz-go or kafkawire. A violation fails `go test ./coordination`, which scripts/test.sh
// and CI run.

const (
	modulePath          = "github.com/krabka-io/krabka-streams-go"
	coordinationPath    = modulePath + "/coordination"
	coordinationtestPkg = coordinationPath + "/coordinationtest"
	kafkawirePath       = coordinationPath + "/internal/kafkawire"
	devicePath          = coordinationPath + "/device"
	franzGoPath         = "github.com/twmb/franz-go"
)

// seamUnit is what one rule of the seam looks at: one library file of a
// package (file set), or the package as a whole (file empty).
type seamUnit struct {
	pkg  string // the package's import path
	file string // the file's name in the package's directory; "" for the package
	// imports is what the file imports; for a package, what it imports
	// directly.
	imports []string
	// deps is what a package depends on, directly or not (go list -deps);
	// for a file, what its imports reach, directly or through the packages
	// they depend on (a wrapper package cannot hide franz-go), except
	// through package coordination itself, whose thin layer may.
	deps []string
}

// seamRule forbids the units of one package some imports.
type seamRule struct {
	pkg string
	// covers selects the library files of pkg that the rule checks, one by
	// one; nil makes it a rule of the package as a whole.
	covers func(file string) bool
	// deps makes a rule of a package check what it depends on, directly
	// or not, instead of what it imports.
	deps bool
	// forbids lists import paths; one that ends in "/..." forbids the path
	// and every path below it, as a go command pattern does.
	forbids []string
	// why follows the violation in its message.
	why string
}

// seamRules are the rules that the package's layout keeps.
var seamRules = []seamRule{
	{
		pkg:     coordinationPath,
		covers:  func(file string) bool { return !strings.HasPrefix(file, "kafka_") },
		forbids: []string{franzGoPath + "/...", kafkawirePath + "/..."},
		why:     "the rules, the loop and the codec reach a broker through Transport only; only the thin Kafka layer (kafka_*.go) may import franz-go or kafkawire",
	},
	{
		pkg:     kafkawirePath,
		deps:    true,
		forbids: []string{coordinationPath, coordinationtestPkg + "/..."},
		why:     "kafkawire is the machinery under coordination's thin Kafka layer and knows nothing of roles, leases or the codec; the arrows point from coordination to kafkawire only",
	},
	{
		pkg:     coordinationtestPkg,
		covers:  func(string) bool { return true },
		forbids: []string{franzGoPath + "/...", kafkawirePath + "/..."},
		why:     "the fakes and the conformance suite stand in for a broker behind Transport; they need no Kafka client",
	},
	{
		pkg:     devicePath,
		covers:  func(file string) bool { return !strings.HasPrefix(file, "kafka_") },
		forbids: []string{franzGoPath + "/...", kafkawirePath + "/..."},
		why:     "the gate and the command reach the coordinator through coordination.Coordinator only; only the device's reader of guarded topics (kafka_*.go) may import franz-go or kafkawire",
	},
}

// forbidden reports whether pattern, an import path or a path with "/...",
// matches path.
func forbidden(pattern, path string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "/..."); ok {
		return path == prefix || strings.HasPrefix(path, prefix+"/")
	}
	return path == pattern
}

// seamViolations returns one message for each import of a unit that a rule
// forbids, naming the file or the package, and one for each rule that
// found nothing to check (a package that moved, a filter that covers no
// file), so that the rule cannot pass by looking at nothing.
func seamViolations(units []seamUnit, rules []seamRule) []string {
	var violations []string
	for _, rule := range rules {
		checked := 0
		for _, unit := range units {
			if unit.pkg != rule.pkg || (unit.file == "") != (rule.covers == nil) {
				continue
			}
			if rule.covers != nil && !rule.covers(unit.file) {
				continue
			}
			checked++
			name, verb, paths := "package "+unit.pkg, "imports", unit.imports
			if unit.file != "" {
				name = strings.TrimPrefix(unit.pkg, modulePath+"/") + "/" + unit.file
				paths = slices.Concat(unit.imports, unit.deps)
			} else if rule.deps {
				verb, paths = "depends on", unit.deps
			}
			reported := make(map[string]bool)
			for _, path := range paths {
				for _, pattern := range rule.forbids {
					if !forbidden(pattern, path) || reported[path] {
						continue
					}
					reported[path] = true
					verb := verb
					if unit.file != "" && !slices.Contains(unit.imports, path) {
						verb = "reaches, through an import,"
					}
					violations = append(violations, name+" "+verb+" "+path+": "+rule.why)
				}
			}
		}
		if checked == 0 {
			violations = append(violations, "no unit of package "+rule.pkg+" to check: the rule looks at nothing")
		}
	}
	return violations
}

// listPackage is the part of go list -json's output that the rules read.
type listPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	// IgnoredGoFiles are the files that a build constraint leaves out on
	// this machine: a rule checks them too, since another GOOS builds them.
	IgnoredGoFiles []string
	Imports        []string
	Deps           []string
}

// seamUnits lists the packages of coordination with go list -json (which
// carries -deps's Deps) and parses the imports of each library file that
// the go command builds.
func seamUnits(t *testing.T) []seamUnit {
	t.Helper()
	// -deps lists every package that ./... reaches too, with its Deps, so
	// that a file's reach through a wrapper package is known.
	cmd := exec.Command("go", "list", "-deps", "-json", "./...")
	out, err := cmd.Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("go list -deps -json ./...: %v\n%s", err, exit.Stderr)
		}
		t.Fatalf("go list -deps -json ./...: %v", err)
	}
	var listed []listPackage
	depsOf := make(map[string][]string)
	for dec := json.NewDecoder(strings.NewReader(string(out))); ; {
		var p listPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode go list -json: %v", err)
		}
		depsOf[p.ImportPath] = p.Deps
		if forbidden(coordinationPath+"/...", p.ImportPath) {
			listed = append(listed, p)
		}
	}
	var units []seamUnit
	fset := token.NewFileSet()
	for _, p := range listed {
		units = append(units, seamUnit{pkg: p.ImportPath, imports: p.Imports, deps: p.Deps})
		ignored := slices.DeleteFunc(slices.Clone(p.IgnoredGoFiles), func(file string) bool { return strings.HasSuffix(file, "_test.go") })
		for _, file := range slices.Concat(p.GoFiles, p.CgoFiles, ignored) {
			parsed, err := parser.ParseFile(fset, filepath.Join(p.Dir, file), nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			unit := seamUnit{pkg: p.ImportPath, file: file}
			for _, imp := range parsed.Imports {
				path, err := strconv.Unquote(imp.Path.Value)
				if err != nil {
					t.Fatalf("%s: import %s: %v", file, imp.Path.Value, err)
				}
				unit.imports = append(unit.imports, path)
				if path != coordinationPath {
					unit.deps = append(unit.deps, depsOf[path]...)
				}
			}
			units = append(units, unit)
		}
	}
	return units
}

// TestBoundaryOnlyTheKafkaLayerImportsKafka checks the seam's rules on
// the packages as the go command builds them.
func TestBoundaryOnlyTheKafkaLayerImportsKafka(t *testing.T) {
	units := seamUnits(t)
	for _, v := range seamViolations(units, seamRules) {
		t.Error(v)
	}
	// The check is only as good as what it saw: the rules files of the
	// package, a thin layer that does reach kafkawire, and a kafkawire
	// that does reach franz-go.
	rules, layer, deviceLayer := 0, false, false
	for _, u := range units {
		switch {
		case u.pkg == devicePath && u.file != "" && strings.HasPrefix(u.file, "kafka_"):
			deviceLayer = deviceLayer || slices.Contains(u.imports, kafkawirePath)
		case u.pkg == coordinationPath && u.file != "" && !strings.HasPrefix(u.file, "kafka_"):
			rules++
		case u.pkg == coordinationPath && u.file != "":
			layer = layer || slices.Contains(u.imports, kafkawirePath)
		case u.pkg == kafkawirePath && u.file == "":
			if !slices.ContainsFunc(u.deps, func(dep string) bool { return forbidden(franzGoPath+"/...", dep) }) {
				t.Errorf("package %s depends on no franz-go package (deps %v); the check of the seam lists the wrong package", kafkawirePath, u.deps)
			}
		}
	}
	if rules < 20 {
		t.Errorf("checked %d rules files of package coordination; want all of them (go list from the package's directory)", rules)
	}
	if !layer {
		t.Errorf("no kafka_*.go file of package coordination imports %s; the thin layer over it is missing", kafkawirePath)
	}
	if !deviceLayer {
		t.Errorf("no kafka_*.go file of package %s imports %s; the check of the device's seam lists the wrong files", devicePath, kafkawirePath)
	}
}

// TestBoundaryRuleFindsViolations runs the seam's checker over imports
// that break each rule, and over the allowed ones, so that the check of
// the real packages above cannot pass by finding nothing.
func TestBoundaryRuleFindsViolations(t *testing.T) {
	kgo := franzGoPath + "/pkg/kgo"
	units := []seamUnit{
		{pkg: coordinationPath, file: "leadership.go", imports: []string{"context", kgo}},
		{pkg: coordinationPath, file: "renewal.go", imports: []string{kafkawirePath}},
		{pkg: coordinationPath, file: "lease.go", imports: []string{"time"}},
		{pkg: coordinationPath, file: "succession.go", imports: []string{coordinationPath + "/internal/shim"}, deps: []string{"errors", franzGoPath + "/pkg/kerr"}},
		{pkg: coordinationPath, file: "kafka_transport.go", imports: []string{kgo, kafkawirePath}}, // the thin layer may
		{pkg: kafkawirePath, imports: []string{kgo}, deps: []string{"context", coordinationPath, kgo}},
		{pkg: coordinationtestPkg, file: "cluster.go", imports: []string{coordinationPath, franzGoPath + "/pkg/kerr"}},
		{pkg: coordinationtestPkg, file: "faults.go", imports: []string{coordinationPath}}, // through coordination it may
		{pkg: devicePath, file: "gate.go", imports: []string{coordinationPath, kgo}},
		{pkg: devicePath, file: "kafka_command_reader.go", imports: []string{coordinationPath, kgo, kafkawirePath}}, // the device's reader may
	}
	got := seamViolations(units, seamRules)
	want := []string{
		"coordination/leadership.go imports " + kgo + ": ",
		"coordination/renewal.go imports " + kafkawirePath + ": ",
		"coordination/succession.go reaches, through an import, " + franzGoPath + "/pkg/kerr: ",
		"package " + kafkawirePath + " depends on " + coordinationPath + ": ",
		"coordination/coordinationtest/cluster.go imports " + franzGoPath + "/pkg/kerr: ",
		"coordination/device/gate.go imports " + kgo + ": ",
	}
	if len(got) != len(want) {
		t.Fatalf("seamViolations found %d violations, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("violation %d = %q, want it to begin %q", i, got[i], want[i])
		}
	}
	// A rule that covers nothing fails too: a package that moved, or a
	// layout in which every file is named kafka_*.go.
	empty := seamViolations([]seamUnit{{pkg: coordinationPath, file: "kafka_all.go", imports: []string{kgo}}}, seamRules[:1])
	if len(empty) != 1 || !strings.Contains(empty[0], "looks at nothing") {
		t.Errorf("seamViolations over no rules file = %q, want one message that the rule looks at nothing", empty)
	}
	// The allowed imports pass: a franz-go package below a "/..." pattern is
	// caught, a package whose path only begins the same way is not.
	if forbidden(franzGoPath+"/...", franzGoPath+"-fork/pkg/kgo") || !forbidden(franzGoPath+"/...", franzGoPath) {
		t.Error(`forbidden("…/franz-go/...") matches by path element, not by string prefix`)
	}
}
