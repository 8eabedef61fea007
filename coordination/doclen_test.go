package coordination_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The house rule of doc comments (issue 30, item 5): the doc of an exported
// name says its shape, units, errors and concurrency in about 15 lines, and
// none is longer than maxDocLines; a longer explanation goes under a heading
// of the package doc (doc.go) or a page of docs/, and the short doc names it.
// The package doc itself (doc.go's comment on the package clause) is exempt.

// maxDocLines is the most lines the doc comment of one exported name may take.
const maxDocLines = 25

// docLengthDirs are the packages whose exported names the rule covers,
// relative to this package's directory.
var docLengthDirs = []string{".", "device", "coordinationtest"}

// TestDocLength fails naming every exported name of coordination,
// coordination/device and coordination/coordinationtest whose doc comment
// is longer than maxDocLines lines.
func TestDocLength(t *testing.T) {
	var long []string
	for _, dir := range docLengthDirs {
		found, err := longDocsInDir(dir, maxDocLines)
		if err != nil {
			t.Fatal(err)
		}
		long = append(long, found...)
	}
	for _, l := range long {
		t.Errorf("%s: over %d lines; keep shape, units, errors and concurrency, and move the explanation under a heading of doc.go or a page of docs/", l, maxDocLines)
	}
}

// TestDocLengthFindsLongDocs runs the checker over a source with a long doc
// on each kind of exported name, and on unexported names, which it must
// leave alone: a checker that finds nothing would pass TestDocLength on any
// tree.
func TestDocLengthFindsLongDocs(t *testing.T) {
	long := strings.Repeat("// A line.\n", maxDocLines+1)
	short := strings.Repeat("// A line.\n", maxDocLines)
	src := "package p\n\n" +
		long + "func F() {}\n\n" +
		short + "func G() {}\n\n" +
		long + "func h() {}\n\n" +
		"// T is a type.\ntype T struct {\n" + long + "\tField int\n" + long + "\thidden int\n}\n\n" +
		long + "func (T) M() {}\n\n" +
		long + "func (t) N() {}\n\n" +
		"type t struct{}\n\n" +
		"// I is an interface.\ntype I interface {\n" + long + "\tCall()\n}\n\n" +
		long + "const (\n\tA = 1\n" + long + "\tB = 2\n)\n\n" +
		"/*\n" + long + "*/\nvar V = 1\n"
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := longDocsInDir(dir, maxDocLines)
	if err != nil {
		t.Fatal(err)
	}
	for i, g := range got {
		got[i] = g[strings.Index(g, " lines ")+len(" lines "):]
	}
	want := []string{"F", "T.Field", "T.M", "I.Call", "A, B", "B", "V"}
	sort.Strings(got)
	sort.Strings(want)
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("long docs found: got %v, want %v", got, want)
	}
}

// longDocsInDir returns, in file and line order, "file:line: lines name"
// for every exported name declared in the non-test Go files of dir whose
// doc comment is longer than limit lines: functions, methods of exported
// types, types, constants and variables (a group's doc and each spec's),
// exported struct fields and interface methods of exported types.
func longDocsInDir(dir string, limit int) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("doc length: %w", err)
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("doc length: %w", err)
		}
		files = append(files, file)
	}
	type finding struct {
		pos  token.Position
		text string
	}
	var found []finding
	check := func(doc *ast.CommentGroup, name string) {
		if doc == nil {
			return
		}
		start, end := fset.Position(doc.Pos()), fset.Position(doc.End())
		if lines := end.Line - start.Line + 1; lines > limit {
			found = append(found, finding{start, fmt.Sprintf("%s:%d: %d lines %s", filepath.ToSlash(filepath.Join(dir, filepath.Base(start.Filename))), start.Line, lines, name)})
		}
	}
	checkType := func(prefix string, typ ast.Expr) {
		switch typ := typ.(type) {
		case *ast.StructType:
			for _, field := range typ.Fields.List {
				for _, n := range field.Names {
					if n.IsExported() {
						check(field.Doc, prefix+n.Name)
					}
				}
			}
		case *ast.InterfaceType:
			for _, method := range typ.Methods.List {
				for _, n := range method.Names {
					if n.IsExported() {
						check(method.Doc, prefix+n.Name)
					}
				}
			}
		}
	}
	for _, file := range files {
		{
			for _, decl := range file.Decls {
				switch decl := decl.(type) {
				case *ast.FuncDecl:
					if !decl.Name.IsExported() {
						continue
					}
					name := decl.Name.Name
					if decl.Recv != nil {
						recv := receiverName(decl.Recv.List[0].Type)
						if !ast.IsExported(recv) {
							continue
						}
						name = recv + "." + name
					}
					check(decl.Doc, name)
				case *ast.GenDecl:
					var exported []string
					for _, spec := range decl.Specs {
						switch spec := spec.(type) {
						case *ast.TypeSpec:
							if !spec.Name.IsExported() {
								continue
							}
							exported = append(exported, spec.Name.Name)
							check(spec.Doc, spec.Name.Name)
							checkType(spec.Name.Name+".", spec.Type)
						case *ast.ValueSpec:
							var names []string
							for _, n := range spec.Names {
								if n.IsExported() {
									names = append(names, n.Name)
								}
							}
							if len(names) > 0 {
								exported = append(exported, names...)
								check(spec.Doc, strings.Join(names, ", "))
							}
						}
					}
					if len(exported) > 0 && decl.Lparen.IsValid() {
						check(decl.Doc, strings.Join(exported, ", "))
					} else if len(exported) > 0 && decl.Doc != nil {
						check(decl.Doc, exported[0])
					}
				}
			}
		}
	}
	sort.Slice(found, func(i, j int) bool {
		if found[i].pos.Filename != found[j].pos.Filename {
			return found[i].pos.Filename < found[j].pos.Filename
		}
		return found[i].pos.Line < found[j].pos.Line
	})
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = f.text
	}
	return out, nil
}

// receiverName is the type name of a method's receiver: T of T, *T, T[K]
// and *T[K].
func receiverName(expr ast.Expr) string {
	for {
		switch e := expr.(type) {
		case *ast.StarExpr:
			expr = e.X
		case *ast.IndexExpr:
			expr = e.X
		case *ast.IndexListExpr:
			expr = e.X
		case *ast.Ident:
			return e.Name
		default:
			return ""
		}
	}
}
