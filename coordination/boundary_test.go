package coordination_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestBoundaryOnlyTheKafkaAdapterImportsAKafkaClient is the lint rule of
// the package's one seam: the rules, the loop and the codec reach a broker
// through the Transport interfaces only, so no library file but the Kafka
// adapter's (kafka_*.go) imports franz-go. A file of the rules that
// imports a Kafka client fails here.
func TestBoundaryOnlyTheKafkaAdapterImportsAKafkaClient(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	fset := token.NewFileSet()
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") || strings.HasPrefix(file, "kafka_") {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		parsed, err := parser.ParseFile(fset, file, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/twmb/franz-go") {
				t.Errorf("%s imports %s: only the Kafka adapter (kafka_*.go) may import a Kafka client; the rest reaches a broker through Transport", file, path)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d files of the rules; want the package's files (run from its directory)", checked)
	}
}
