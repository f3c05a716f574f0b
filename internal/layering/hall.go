package layering

import (
	"cmp"
	"go/ast"
	"go/token"
	"go/types"
	"path/filepath"
	"slices"
)

// The hall's shape: how the files of one package use each other, read with
// the type checker (hall_test.go measures proxy/, the assembly). A file uses
// another when it names something declared there: a package-level
// function, type, variable or constant, or a method or field of one of the
// package's types. Two files that use each other both ways are one concern
// split in two, or two concerns tangled; a file graph without such pairs
// and without cycles reads from the top down.

// fileUses is a package's file graph: for each file (its base name), the
// other files it uses, with how many uses.
type fileUses map[string]map[string]int

// usesOf builds the file graph of the package whose files and type
// information these are: every identifier in a file that refers to an
// object declared in another file of the same package is an edge.
func usesOf(fset *token.FileSet, files []*ast.File, info *types.Info, pkg *types.Package) fileUses {
	g := fileUses{}
	for _, f := range files {
		from := filepath.Base(fset.Position(f.Pos()).Filename)
		if g[from] == nil {
			g[from] = map[string]int{}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			obj := info.Uses[id]
			if obj == nil || obj.Pkg() != pkg || !obj.Pos().IsValid() || isLocal(obj, pkg) {
				return true
			}
			to := filepath.Base(fset.Position(obj.Pos()).Filename)
			if to != from {
				g[from][to]++
			}
			return true
		})
	}
	return g
}

// isLocal reports whether obj is declared inside a function (a local
// variable, a parameter, a label): only what is declared at the package's
// level, and the methods and fields of its types, makes an edge.
func isLocal(obj types.Object, pkg *types.Package) bool {
	switch o := obj.(type) {
	case *types.Func:
		return false
	case *types.Var:
		if o.IsField() {
			return false
		}
	}
	return obj.Parent() != pkg.Scope()
}

// twoWay lists the pairs of files that use each other, each pair once,
// its names in order.
func (g fileUses) twoWay() [][2]string {
	var out [][2]string
	for a, tos := range g {
		for b := range tos {
			if a < b && g[b][a] > 0 {
				out = append(out, [2]string{a, b})
			}
		}
	}
	slices.SortFunc(out, func(x, y [2]string) int {
		return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1]))
	})
	return out
}

// inCycles lists the uses whose two files lie on one cycle (the same
// strongly connected component of the graph), each as [from, to], and the
// files of the largest such component. With none, the files can be laid
// out so that every use points down; each is an arrow that some layout
// must run back up. Unlike a count of the back edges of one walk, it does
// not depend on the files' names.
func (g fileUses) inCycles() (uses [][2]string, largest []string) {
	// Tarjan's algorithm, files visited in name order (the result does not
	// depend on it).
	names := make([]string, 0, len(g))
	for n := range g {
		names = append(names, n)
	}
	slices.Sort(names)
	index, low, onStack := map[string]int{}, map[string]int{}, map[string]bool{}
	comp := map[string]int{}
	var stack []string
	next, ncomp := 0, 0
	var visit func(string)
	visit = func(n string) {
		index[n], low[n] = next, next
		next++
		stack = append(stack, n)
		onStack[n] = true
		for to := range g[n] {
			if _, seen := index[to]; !seen {
				visit(to)
				low[n] = min(low[n], low[to])
			} else if onStack[to] {
				low[n] = min(low[n], index[to])
			}
		}
		if low[n] == index[n] {
			var members []string
			for {
				m := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[m] = false
				comp[m] = ncomp
				members = append(members, m)
				if m == n {
					break
				}
			}
			if len(members) > len(largest) {
				largest = members
			}
			ncomp++
		}
	}
	for _, n := range names {
		if _, seen := index[n]; !seen {
			visit(n)
		}
	}
	for _, from := range names {
		for to := range g[from] {
			if _, ok := g[to]; ok && comp[from] == comp[to] {
				uses = append(uses, [2]string{from, to})
			}
		}
	}
	slices.SortFunc(uses, func(x, y [2]string) int {
		return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1]))
	})
	if len(largest) < 2 {
		largest = nil
	}
	slices.Sort(largest)
	return uses, largest
}

// usedBy counts, for each file, the other files that use it.
func (g fileUses) usedBy() map[string]int {
	out := map[string]int{}
	for _, tos := range g {
		for to := range tos {
			out[to]++
		}
	}
	return out
}
