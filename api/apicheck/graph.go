package apicheck

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/token"
	"go/types"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/tools/go/packages"
)

const (
	module      = "github.com/capgate/capgate"
	apiPkg      = module + "/api"
	groupPkg    = module + "/coordinator/group"
	machineNode = groupPkg + ".Machine.apply"
)

// node is one function, method, package variable or machine event.
type node struct {
	codes    map[string]bool // api.Code values named
	statuses map[int]bool    // 2xx status constants named
	events   map[string]bool // group types constructed (composite literals)
	edges    map[string]bool // other nodes referenced
}

func newNode() *node {
	return &node{codes: map[string]bool{}, statuses: map[int]bool{}, events: map[string]bool{}, edges: map[string]bool{}}
}

// Graph is the reference graph of the loaded packages.
type Graph struct {
	nodes map[string]*node
	pkgs  map[string]*packages.Package
}

// Analyze loads the packages (import paths) with their syntax and types
// and builds the graph.
func Analyze(paths ...string) (*Graph, error) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles | packages.NeedSyntax |
		packages.NeedTypes | packages.NeedTypesInfo | packages.NeedImports}
	pkgs, err := packages.Load(cfg, paths...)
	if err != nil {
		return nil, fmt.Errorf("apicheck: load: %w", err)
	}
	g := &Graph{nodes: map[string]*node{}, pkgs: map[string]*packages.Package{}}
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			return nil, fmt.Errorf("apicheck: %s: %v", p.PkgPath, p.Errors[0])
		}
		g.pkgs[p.PkgPath] = p
		g.addPackage(p)
	}
	if p := g.pkgs[groupPkg]; p != nil {
		if err := g.addEvents(p); err != nil {
			return nil, err
		}
	}
	return g, nil
}

// objectKey names a function, method or package variable across
// separately type-checked packages: "path.Name" or "path.Recv.Name".
func objectKey(obj types.Object) string {
	if obj == nil || obj.Pkg() == nil {
		return ""
	}
	switch o := obj.(type) {
	case *types.Func:
		sig := o.Type().(*types.Signature)
		if recv := sig.Recv(); recv != nil {
			t := recv.Type()
			if p, ok := t.(*types.Pointer); ok {
				t = p.Elem()
			}
			named, ok := t.(*types.Named)
			if !ok {
				return "" // an interface method: not followed
			}
			return o.Pkg().Path() + "." + named.Obj().Name() + "." + o.Name()
		}
		return o.Pkg().Path() + "." + o.Name()
	case *types.Var:
		if o.Parent() == o.Pkg().Scope() {
			return o.Pkg().Path() + "." + o.Name()
		}
	}
	return ""
}

func (g *Graph) addPackage(p *packages.Package) {
	for _, f := range p.Syntax {
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Body != nil {
					g.fill(g.node(objectKey(p.TypesInfo.Defs[d.Name])), p.TypesInfo, d.Body)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					vs, ok := spec.(*ast.ValueSpec)
					if !ok {
						continue
					}
					for i, name := range vs.Names {
						n := g.node(objectKey(p.TypesInfo.Defs[name]))
						for j, v := range vs.Values {
							if len(vs.Values) == 1 || i == j {
								g.fill(n, p.TypesInfo, v)
							}
						}
					}
				}
			}
		}
	}
}

func (g *Graph) node(key string) *node {
	if key == "" {
		return newNode() // a throwaway: nothing refers to it by name
	}
	n, ok := g.nodes[key]
	if !ok {
		n = newNode()
		g.nodes[key] = n
	}
	return n
}

// fill records what root references into n. A code only compared
// (x == api.CodeX, case api.CodeX:) is not answered by it.
func (g *Graph) fill(n *node, info *types.Info, root ast.Node) {
	compared := comparedIdents(root)
	ast.Inspect(root, func(an ast.Node) bool {
		switch x := an.(type) {
		case *ast.Ident:
			if !compared[x] {
				g.reference(n, info.Uses[x])
			}
		case *ast.CompositeLit:
			if tv, ok := info.Types[x]; ok {
				if named, ok := tv.Type.(*types.Named); ok && named.Obj().Pkg() != nil && named.Obj().Pkg().Path() == groupPkg {
					n.events[named.Obj().Name()] = true
				}
			}
		}
		return true
	})
}

// comparedIdents are the identifiers of the constants root compares
// against (operands of == and !=, cases of expression switches), and of
// the codes the state machine rejects another request with: a call
// reject(x.y, code, …) or rejectWith(x.y, details, code, …) whose ref is a field other than an event's own
// .Ref (mem.wait.ref, p.leaseWaiter) answers a request parked earlier (a
// held heartbeat, a lease waiter), not the one that reached this code. A
// plain ref parameter is the caller's own.
func comparedIdents(root ast.Node) map[*ast.Ident]bool {
	out := map[*ast.Ident]bool{}
	mark := func(e ast.Expr) {
		switch x := e.(type) {
		case *ast.Ident:
			out[x] = true
		case *ast.SelectorExpr:
			out[x.Sel] = true
		}
	}
	ast.Inspect(root, func(an ast.Node) bool {
		switch x := an.(type) {
		case *ast.CallExpr:
			if sel, ok := x.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "reject" || sel.Sel.Name == "rejectWith") && len(x.Args) > 1 {
				if ref, ok := x.Args[0].(*ast.SelectorExpr); ok && ref.Sel.Name != "Ref" {
					for _, a := range x.Args[1:] {
						mark(a)
					}
				}
			}
		case *ast.BinaryExpr:
			if x.Op == token.EQL || x.Op == token.NEQ {
				mark(x.X)
				mark(x.Y)
			}
		case *ast.SwitchStmt:
			for _, stmt := range x.Body.List {
				for _, e := range stmt.(*ast.CaseClause).List {
					mark(e)
				}
			}
		}
		return true
	})
	return out
}

// codeTypes are the named string types whose constants are error codes
// written into answers: the reject table's, and the OAuth2 errors of the
// token endpoint (RFC 6749 bodies).
var codeTypes = map[string]bool{apiPkg + ".Code": true, module + "/coordinator.oauthError": true}

func (g *Graph) reference(n *node, obj types.Object) {
	switch o := obj.(type) {
	case *types.Const:
		if named, ok := o.Type().(*types.Named); ok && named.Obj().Pkg() != nil && codeTypes[named.Obj().Pkg().Path()+"."+named.Obj().Name()] {
			n.codes[constant.StringVal(o.Val())] = true
			return
		}
		if o.Pkg() != nil && (o.Pkg().Path() == "github.com/valyala/fasthttp" || o.Pkg().Path() == "net/http") && strings.HasPrefix(o.Name(), "Status") {
			if v, ok := constant.Int64Val(o.Val()); ok && v >= 200 && v < 300 {
				n.statuses[int(v)] = true
			}
		}
	case *types.Func, *types.Var:
		// The api package is the reject table itself: looking a code's
		// status up answers nothing, so it is not followed.
		if key := objectKey(obj); strings.HasPrefix(key, module) && !strings.HasPrefix(key, apiPkg+".") {
			n.edges[key] = true
		}
	}
}

// addEvents makes one node per case of (*Machine).apply's type switch:
// "event:T" reaches what the case body references.
func (g *Graph) addEvents(p *packages.Package) error {
	for _, f := range p.Syntax {
		for _, decl := range f.Decls {
			d, ok := decl.(*ast.FuncDecl)
			if !ok || objectKey(p.TypesInfo.Defs[d.Name]) != machineNode {
				continue
			}
			found := false
			ast.Inspect(d.Body, func(an ast.Node) bool {
				cc, ok := an.(*ast.CaseClause)
				if !ok {
					return true
				}
				for _, e := range cc.List {
					if tv, ok := p.TypesInfo.Types[e]; ok {
						if named, ok := tv.Type.(*types.Named); ok {
							found = true
							n := g.node("event:" + named.Obj().Name())
							for _, stmt := range cc.Body {
								g.fill(n, p.TypesInfo, stmt)
							}
						}
					}
				}
				return true
			})
			if !found {
				return fmt.Errorf("apicheck: %s has no type switch over events", machineNode)
			}
			return nil
		}
	}
	return fmt.Errorf("apicheck: %s not found: update apicheck to the machine's event dispatch", machineNode)
}

// Answers is what a route can answer.
type Answers struct {
	Codes    []string // sorted
	Statuses []int    // sorted; from the codes' table statuses and reachable 2xx constants
}

// Reach walks the graph from the entry keys and returns what it reaches.
// status maps a code to its HTTP status.
func (g *Graph) Reach(entries []string, status func(code string) int) Answers {
	codes, statuses := map[string]bool{}, map[int]bool{}
	seen := map[string]bool{}
	var walk func(key string)
	walk = func(key string) {
		if seen[key] {
			return
		}
		seen[key] = true
		n, ok := g.nodes[key]
		if !ok {
			return
		}
		for c := range n.codes {
			codes[c] = true
		}
		for s := range n.statuses {
			statuses[s] = true
		}
		for e := range n.events {
			walk("event:" + e)
		}
		for e := range n.edges {
			walk(e)
		}
	}
	for _, e := range entries {
		walk(e)
	}
	ok2xx := len(statuses) > 0
	for c := range codes {
		statuses[status(c)] = true
	}
	if !ok2xx {
		statuses[200] = true
	}
	var a Answers
	for c := range codes {
		a.Codes = append(a.Codes, c)
	}
	for s := range statuses {
		a.Statuses = append(a.Statuses, s)
	}
	sort.Strings(a.Codes)
	sort.Ints(a.Statuses)
	return a
}

// Has reports whether key is a node of the graph.
func (g *Graph) Has(key string) bool { _, ok := g.nodes[key]; return ok }

// FuncKey is the key of a function of pkg ("Name" or "Recv.Name").
func FuncKey(pkg, name string) string { return module + "/" + pkg + "." + name }

func itoa(i int) string { return strconv.Itoa(i) }
