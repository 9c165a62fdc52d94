package apicheck

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strconv"

	"golang.org/x/tools/go/packages"
)

// RouteEntries finds, in the route-table function routerFunc (a key such
// as FuncKey("coordinator", "Coordinator.newRouter")), the entry
// functions of each named route: the functions and package variables
// referenced by the call or composite literal that carries the name's
// string literal (not counting the called function itself), following
// local variables that hold a function literal.
func (g *Graph) RouteEntries(routerFunc string, names []string) (map[string][]string, error) {
	p, body := g.funcBody(routerFunc)
	if body == nil {
		return nil, fmt.Errorf("apicheck: route table %s not found", routerFunc)
	}
	locals := localFuncs(p.TypesInfo, body)
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string][]string{}
	var stack []ast.Node
	ast.Inspect(body, func(an ast.Node) bool {
		if an == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, an)
		lit, ok := an.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		name, err := strconv.Unquote(lit.Value)
		if err != nil || !want[name] {
			return true
		}
		for i := len(stack) - 2; i >= 0; i-- {
			switch holder := stack[i].(type) {
			case *ast.CallExpr:
				out[name] = refs(p.TypesInfo, locals, holder.Args...)
			case *ast.CompositeLit:
				out[name] = refs(p.TypesInfo, locals, holder.Elts...)
			default:
				continue
			}
			break
		}
		return true
	})
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("apicheck: route %q not found in %s", n, routerFunc)
		}
	}
	return out, nil
}

func (g *Graph) funcBody(key string) (*packages.Package, *ast.BlockStmt) {
	for _, p := range g.pkgs {
		for _, f := range p.Syntax {
			for _, decl := range f.Decls {
				if d, ok := decl.(*ast.FuncDecl); ok && d.Body != nil && objectKey(p.TypesInfo.Defs[d.Name]) == key {
					return p, d.Body
				}
			}
		}
	}
	return nil, nil
}

// localFuncs maps the local variables of body assigned a function
// literal (x := func(...) {...}) to it.
func localFuncs(info *types.Info, body *ast.BlockStmt) map[types.Object]*ast.FuncLit {
	out := map[types.Object]*ast.FuncLit{}
	ast.Inspect(body, func(an ast.Node) bool {
		as, ok := an.(*ast.AssignStmt)
		if !ok || len(as.Lhs) != len(as.Rhs) {
			return true
		}
		for i, lhs := range as.Lhs {
			id, ok := lhs.(*ast.Ident)
			fl, isLit := as.Rhs[i].(*ast.FuncLit)
			if ok && isLit {
				if obj := info.Defs[id]; obj != nil {
					out[obj] = fl
				}
			}
		}
		return true
	})
	return out
}

// refs lists the module's functions and package variables the nodes
// reference, through local function literals.
func refs(info *types.Info, locals map[types.Object]*ast.FuncLit, nodes ...ast.Expr) []string {
	seen := map[string]bool{}
	visited := map[*ast.FuncLit]bool{}
	var out []string
	var visit func(root ast.Node)
	visit = func(root ast.Node) {
		ast.Inspect(root, func(an ast.Node) bool {
			id, ok := an.(*ast.Ident)
			if !ok {
				return true
			}
			obj := info.Uses[id]
			if fl, ok := locals[obj]; ok && !visited[fl] {
				visited[fl] = true
				visit(fl)
				return true
			}
			if key := objectKey(obj); key != "" && !seen[key] && len(key) > len(module) && key[:len(module)] == module {
				seen[key] = true
				out = append(out, key)
			}
			return true
		})
	}
	for _, n := range nodes {
		visit(n)
	}
	return out
}
