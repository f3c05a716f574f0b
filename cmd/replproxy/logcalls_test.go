package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/constant"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// The log lines tests produce (checkJSONLog) reach only the paths tests
// take. TestLogCallsMatchDocs covers the rest: it type-checks every
// non-test file of the module and holds every call of an hclog.Logger's
// logging methods to the table of log fields in docs/logs.md, as the JSON
// lines are held to it: each key a constant string the table lists, its
// value of a Go type that hclog writes as the table's JSON type, and each
// Named name one of the table's @module values. A key built at run time, or
// passed in a slice (args...), cannot be checked and is refused.

// hclogPath is go-hclog's import path.
const hclogPath = "github.com/hashicorp/go-hclog"

// A listedPackage is what `go list -json -export` says of one package.
type listedPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Export     string
	DepOnly    bool
	Module     *struct{ Main bool }
}

// moduleExports lists the module's packages (./... from the module root)
// and the export data of everything they import, built by the go command
// into its cache. Read once.
var moduleExports = sync.OnceValues(func() ([]listedPackage, error) {
	cmd := exec.Command("go", "list", "-json", "-export", "-deps", "./...")
	cmd.Dir = filepath.Join("..", "..")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.Bytes())
	}
	var pkgs []listedPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("go list's output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
})

// exportImporter returns an importer that reads the export data go list
// built, for type-checking source against it.
func exportImporter(fset *token.FileSet, pkgs []listedPackage) types.Importer {
	exports := make(map[string]string, len(pkgs))
	for _, p := range pkgs {
		exports[p.ImportPath] = p.Export
	}
	return importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
}

// typeCheck parses and type-checks one package's files.
func typeCheck(fset *token.FileSet, imp types.Importer, path string, files []*ast.File) (*types.Info, error) {
	info := &types.Info{
		Types:      map[ast.Expr]types.TypeAndValue{},
		Uses:       map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
	}
	_, err := (&types.Config{Importer: imp}).Check(path, fset, files, info)
	return info, err
}

// logTable is the table of log fields in docs/logs.md: each key's type,
// and the @module values.
type logTable struct {
	fields  map[string]string
	modules map[string]bool
}

// docLogTable reads the table of log fields in docs/logs.md.
func docLogTable(t testing.TB) logTable {
	t.Helper()
	fields, err := docLogFields()
	if err != nil || len(fields) == 0 {
		t.Fatalf("the table of log fields in %s: %v (%d keys)", logsDoc, err, len(fields))
	}
	modules, err := docLogModules()
	if err != nil || len(modules) == 0 {
		t.Fatalf("the @module values in %s: %v (%d)", logsDoc, err, len(modules))
	}
	return logTable{fields, modules}
}

// docLogModules reads the @module row's values from the table of
// log fields ("`replproxy`, `replproxy.upstream`, ...").
func docLogModules() (map[string]bool, error) {
	data, err := os.ReadFile(logsDoc)
	if err != nil {
		return nil, err
	}
	quoted := regexp.MustCompile("`([^`]+)`")
	for line := range strings.Lines(string(data)) {
		if cells := strings.Split(line, "|"); len(cells) > 4 && strings.TrimSpace(cells[1]) == "`@module`" {
			mods := map[string]bool{}
			for _, m := range quoted.FindAllStringSubmatch(cells[4], -1) {
				mods[m[1]] = true
			}
			return mods, nil
		}
	}
	return nil, errors.New(logsDoc + " has no @module row")
}

// checkLogCalls reports, through report, every logging call in files whose
// keys or values the table of log fields does not allow.
func checkLogCalls(fset *token.FileSet, files []*ast.File, info *types.Info, table logTable, report func(pos token.Position, format string, args ...any)) (calls int) {
	for _, f := range files {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			method, ok := hclogMethod(call, info)
			if !ok {
				return true
			}
			pos := fset.Position(call.Pos())
			var kv []ast.Expr
			switch method {
			case "Trace", "Debug", "Info", "Warn", "Error":
				kv = call.Args[1:]
			case "Log":
				kv = call.Args[2:]
			case "With":
				kv = call.Args
			case "Named", "ResetNamed":
				calls++
				name, ok := constString(info, call.Args[0])
				switch {
				case !ok:
					report(pos, "%s's name is not a constant string", method)
				case !table.modules["replproxy."+name] && !table.modules[name]:
					report(pos, "%s(%q): docs/logs.md's @module lists no replproxy.%s", method, name, name)
				}
				return true
			default:
				return true
			}
			calls++
			if call.Ellipsis.IsValid() {
				report(pos, "%s's key/value pairs are passed in a slice: their keys cannot be checked; pass them as arguments", method)
				return true
			}
			if len(kv)%2 != 0 {
				report(pos, "%s has an odd number of key/value arguments", method)
			}
			for i := 0; i+1 < len(kv); i += 2 {
				key, ok := constString(info, kv[i])
				if !ok {
					report(fset.Position(kv[i].Pos()), "%s: a key is not a constant string", method)
					continue
				}
				typ, ok := table.fields[key]
				if !ok {
					report(fset.Position(kv[i].Pos()), "%s: key %q is not in the table of log fields (docs/logs.md)", method, key)
					continue
				}
				if got := jsonType(info.Types[kv[i+1]].Type); got != typ {
					report(fset.Position(kv[i+1].Pos()), "%s: %q is logged as %s (a %s), the table of log fields says %s", method, key, got, info.Types[kv[i+1]].Type, typ)
				}
			}
			return true
		})
	}
	return calls
}

// hclogMethod returns the name of the hclog.Logger method call calls, if
// it calls one.
func hclogMethod(call *ast.CallExpr, info *types.Info) (string, bool) {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	fn, ok := info.Uses[sel.Sel].(*types.Func)
	if !ok || fn.Pkg() == nil || fn.Pkg().Path() != hclogPath {
		return "", false
	}
	recv := fn.Type().(*types.Signature).Recv()
	if recv == nil {
		return "", false // a function of the package, hclog.New
	}
	return fn.Name(), true
}

// constString returns e's value if it is a constant string.
func constString(info *types.Info, e ast.Expr) (string, bool) {
	tv := info.Types[e]
	if tv.Value == nil || tv.Value.Kind() != constant.String {
		return "", false
	}
	return constant.StringVal(tv.Value), true
}

// jsonType is the JSON type hclog writes a value of type t as, in the
// table's words: string (strings, and errors, which hclog writes as their
// message), integer, boolean, or a description of what the table has no
// type for (a duration, in nanoseconds, is one: log it in a unit).
func jsonType(t types.Type) string {
	if t == nil {
		return "untyped"
	}
	if n, ok := t.(*types.Named); ok && n.Obj().Pkg() != nil {
		switch n.Obj().Pkg().Path() + "." + n.Obj().Name() {
		case "time.Duration":
			return "a duration in nanoseconds"
		case hclogPath + ".Format":
			return "string"
		}
	}
	if types.Implements(t, types.Universe.Lookup("error").Type().Underlying().(*types.Interface)) {
		return "string"
	}
	b, ok := t.Underlying().(*types.Basic)
	switch {
	case !ok:
		return "not a string, integer or boolean"
	case b.Info()&types.IsString != 0:
		return "string"
	case b.Info()&types.IsInteger != 0:
		return "integer"
	case b.Info()&types.IsBoolean != 0:
		return "boolean"
	case b.Info()&types.IsFloat != 0:
		return "a float"
	}
	return "not a string, integer or boolean"
}

// TestLogCallsMatchDocs: every logging call in the module's non-test
// files uses keys the table of log fields (docs/logs.md) lists, with values
// of their types, and names only the table's modules.
func TestLogCallsMatchDocs(t *testing.T) {
	table := docLogTable(t)
	pkgs, err := moduleExports()
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	imp := exportImporter(fset, pkgs)
	calls, checked := 0, 0
	for _, p := range pkgs {
		if p.DepOnly || p.Module == nil || !p.Module.Main {
			continue
		}
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		info, err := typeCheck(fset, imp, p.ImportPath, files)
		if err != nil {
			t.Fatalf("type-check %s: %v", p.ImportPath, err)
		}
		calls += checkLogCalls(fset, files, info, table, func(pos token.Position, format string, args ...any) {
			t.Errorf("%s: %s", pos, fmt.Sprintf(format, args...))
		})
		checked++
	}
	if calls == 0 {
		t.Fatalf("no logging call found in %d packages", checked)
	}
	t.Logf("%d logging calls in %d packages checked against the table of log fields", calls, checked)
}

// TestLogCallsChecker: the check refuses what it is meant to refuse.
func TestLogCallsChecker(t *testing.T) {
	const src = `package p

import (
	"errors"
	"time"

	"github.com/hashicorp/go-hclog"
)

const keyError = "error"

type info struct{}

func (info) Info(msg string, args ...any) {}

func f(log hclog.Logger, key string, kv []any) {
	log.Info("ok", "took-ms", int64(3), keyError, errors.New("x"), "eof-mark", true, "address", "a")
	log.With("client-id", 1).Named("upstream").Warn("ok")
	info{}.Info("not a logger", "nope", 1.5)
	log.Info("unknown key", "size", 1)                  // bad 1
	log.Warn("float", "took-ms", 0.5)                   // bad 2
	log.Error("duration", "took-ms", time.Second)       // bad 3
	log.Info("key at run time", key, 1)                 // bad 4
	log.Info("slice", kv...)                            // bad 5
	log.Debug("odd", "took-ms")                         // bad 6
	log.With("reason", 1).Info("reason as integer")     // bad 7
	log.Named("nosuchmodule").Log(hclog.Info, "module") // bad 8
}
`
	pkgs, err := moduleExports()
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	info, err := typeCheck(fset, exportImporter(fset, pkgs), "p", []*ast.File{f})
	if err != nil {
		t.Fatal(err)
	}
	bad := map[int]bool{}
	checkLogCalls(fset, []*ast.File{f}, info, docLogTable(t), func(pos token.Position, format string, args ...any) {
		bad[pos.Line] = true
		t.Logf("refused as meant: line %d: %s", pos.Line, fmt.Sprintf(format, args...))
	})
	for i, line := range strings.Split(src, "\n") {
		if want := strings.Contains(line, "// bad"); want != bad[i+1] {
			t.Errorf("line %d %q: refused %v, want %v", i+1, strings.TrimSpace(line), bad[i+1], want)
		}
	}
}
