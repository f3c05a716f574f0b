package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// foldUse is one use of a Unicode case function in a file.
type foldUse struct {
	pos      token.Position
	call     string // "strings.ToLower"
	function string // the enclosing function: "dispatch", "Server.cmdClient"
}

// foldUses returns every use (a call or a function value) of unicodeFolds
// in one parsed file, by the import path of the package named, so that a
// renamed import ("str" for strings) is found too.
func foldUses(fset *token.FileSet, f *ast.File) []foldUse {
	local := map[string]string{} // the name a file gives an import → its path
	for _, imp := range f.Imports {
		path, err := strconv.Unquote(imp.Path.Value)
		if err != nil {
			continue
		}
		if _, ok := unicodeFolds[path]; !ok {
			continue
		}
		name := path[strings.LastIndex(path, "/")+1:]
		if imp.Name != nil {
			name = imp.Name.Name
		}
		local[name] = path
	}
	var uses []foldUse
	for _, decl := range f.Decls {
		function := ""
		if fd, ok := decl.(*ast.FuncDecl); ok {
			function = fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) == 1 {
				function = receiverType(fd.Recv.List[0].Type) + "." + function
			}
		}
		ast.Inspect(decl, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok || id.Obj != nil { // a local variable, not a package
				return true
			}
			path, ok := local[id.Name]
			if !ok {
				return true
			}
			if names := unicodeFolds[path]; names == nil || slices.Contains(names, sel.Sel.Name) {
				uses = append(uses, foldUse{fset.Position(sel.Pos()), path + "." + sel.Sel.Name, function})
			}
			return true
		})
	}
	return uses
}

// receiverType is a method's receiver type's name, without * or type
// parameters.
func receiverType(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return "?"
		}
	}
}

// TestFoldUsesFound: the walker finds the uses it is meant to, renamed
// imports and function values included, and nothing else.
func TestFoldUsesFound(t *testing.T) {
	src := `package p

import (
	str "strings"
	"bytes"
	"unicode"
	"strings/other"
)

type T struct{}

func (t *T) m(s string) bool { return str.EqualFold(s, "kill") }

func f(b []byte) {
	_ = bytes.ToUpper(b)
	g := unicode.SimpleFold
	_ = g
	_ = str.HasPrefix("a", "b")
	strings := struct{ ToLower func(string) string }{}
	_ = strings.ToLower("x")
	_ = other.ToLower("x")
}
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range foldUses(fset, f) {
		got = append(got, u.function+":"+u.call)
	}
	want := []string{"T.m:strings.EqualFold", "f:bytes.ToUpper", "f:unicode.SimpleFold"}
	if !slices.Equal(got, want) {
		t.Errorf("found %q, want %q", got, want)
	}
}

// TestNamesFoldASCII fails on a use of a Unicode case function
// (unicodeFolds) in the code of proxy/ and cmd/ that allowedFolds does
// not list: names from the network are folded by proxy/wire alone, ASCII
// letters only, as Redis folds them.
func TestNamesFoldASCII(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files, used := 0, map[string]bool{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if name := d.Name(); path != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || !foldChecked(filepath.ToSlash(filepath.Dir(rel))) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files++
		for _, u := range foldUses(fset, f) {
			key := rel + ":" + u.function
			if _, ok := allowedFolds[key]; ok {
				used[key] = true
				continue
			}
			t.Errorf("%s:%d: %s in %s: a name from the network folds ASCII letters only (proxy/wire: Lower, Upper, EqualFold); "+
				"if this is no name from the network, add %q to allowedFolds with the reason", rel, u.pos.Line, u.call, u.function, key)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("checked %d files of proxy/ and cmd/: the walk went wrong", files)
	}
	for key := range allowedFolds {
		if !used[key] {
			t.Errorf("allowedFolds lists %s, which uses no Unicode case function: remove it", key)
		}
	}
}
