package main

// Output of the admin commands (and `version`): --output table|json|yaml.
// Without the flag a terminal gets tables and anything else (a pipe, a
// file) gets JSON (yaml only when asked, as rpk's --format yaml), so `capgate admin grant … > grant.json` and `| jq`
// keep working while a person reads tables. Tables are laid out with the
// standard library's text/tabwriter in rpk's style (upper-case headers,
// columns two spaces apart, key/value blocks for one object); no table
// library is needed for that.

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/pflag"
)

// outputFlag is the value of --output: "", "table", "json" or "yaml".
type outputFlag struct{ format string }

func (o *outputFlag) String() string { return o.format }
func (o *outputFlag) Type() string   { return "table|json|yaml" }
func (o *outputFlag) Set(v string) error {
	if v != "table" && v != "json" && v != "yaml" {
		return fmt.Errorf("want table, json or yaml, got %q", v)
	}
	o.format = v
	return nil
}

func (o *outputFlag) register(fs *pflag.FlagSet) {
	fs.VarP(o, "output", "o", "output format: table, json or yaml (default: table on a terminal, json otherwise; capgate help output)")
}

// document reports whether to print the answer as a document (JSON or
// YAML) to w rather than as tables.
func (o *outputFlag) document(w io.Writer) bool {
	switch o.format {
	case "json", "yaml":
		return true
	case "table":
		return false
	}
	return !isTerminal(w) // consume.go
}

// print writes v as the document --output asks for: YAML, else JSON.
func (o *outputFlag) print(w io.Writer, v any) error {
	if o.format == "yaml" {
		return printYAML(w, v)
	}
	return printJSON(w, v)
}

func newTabWriter(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
}

// printFields prints one object as KEY  value lines.
func printFields(w io.Writer, rows [][2]string) error {
	tw := newTabWriter(w)
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\n", quoteUnsafe(header(r[0])), quoteUnsafe(r[1]))
	}
	return tw.Flush()
}

// printTable prints a header row and rows. Every cell is text from the
// server: one that holds a tab, a newline, an escape or any other unsafe
// rune is printed quoted (terminal.go), so the table holds and the
// terminal obeys nothing in it.
func printTable(w io.Writer, headers []string, rows [][]string) error {
	tw := newTabWriter(w)
	writeRow(tw, headers)
	for _, r := range rows {
		writeRow(tw, r)
	}
	return tw.Flush()
}

func writeRow(w io.Writer, cells []string) {
	for i, c := range cells {
		if i > 0 {
			io.WriteString(w, "\t")
		}
		io.WriteString(w, quoteUnsafe(c))
	}
	io.WriteString(w, "\n")
}

// printAny renders a JSON document with no renderer of its own: an object's
// scalar fields as KEY value lines, each list of objects under it as a
// table (headers from the union of their keys, sorted), anything else as
// compact JSON in its cell.
func printAny(w io.Writer, raw json.RawMessage) error {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		if list, ok := v.([]any); ok {
			return printObjects(w, list)
		}
		_, err := fmt.Fprintln(w, quoteUnsafe(cellText(v)))
		return err
	}
	keys := sortedKeys(obj)
	var fields [][2]string
	var lists []string
	for _, k := range keys {
		if list, ok := obj[k].([]any); ok && len(list) > 0 && isObject(list[0]) {
			lists = append(lists, k)
			continue
		}
		fields = append(fields, [2]string{k, fieldText(k, obj[k])})
	}
	if err := printFields(w, fields); err != nil {
		return err
	}
	for _, k := range lists {
		fmt.Fprintf(w, "\n%s\n", quoteUnsafe(header(k)))
		if err := printObjects(w, obj[k].([]any)); err != nil {
			return err
		}
	}
	return nil
}

// unixSecondsKeys are the JSON keys the admin API gives as unix seconds
// (a denied jti's exp, a QoS override's until). Tables print them as RFC
// 3339, as the answers that carry times as text do (lease until, grant
// expires_at, audit at); JSON keeps the API's numbers.
var unixSecondsKeys = map[string]bool{"exp": true, "iat": true, "nbf": true, "until": true}

// fieldText is the cell of key's value v: cellText, a unix-seconds time
// as RFC 3339.
func fieldText(key string, v any) string {
	if n, ok := v.(float64); ok && unixSecondsKeys[key] && n > 0 && n == float64(int64(n)) {
		return unixText(int64(n))
	}
	return cellText(v)
}

// header is a JSON key as a table header: upper case, words joined by
// "-" as rpk's headers are.
func header(key string) string {
	return strings.ToUpper(strings.NewReplacer("_", "-", " ", "-").Replace(key))
}

func isObject(v any) bool { _, ok := v.(map[string]any); return ok }

// printObjects prints a list of objects as a table.
func printObjects(w io.Writer, list []any) error {
	seen := map[string]bool{}
	var cols []string
	for _, e := range list {
		if m, ok := e.(map[string]any); ok {
			for _, k := range sortedKeys(m) {
				if !seen[k] {
					seen[k] = true
					cols = append(cols, k)
				}
			}
		}
	}
	headers := make([]string, len(cols))
	for i, c := range cols {
		headers[i] = header(c)
	}
	rows := make([][]string, 0, len(list))
	for _, e := range list {
		m, _ := e.(map[string]any)
		row := make([]string, len(cols))
		for i, c := range cols {
			row[i] = fieldText(c, m[c])
		}
		rows = append(rows, row)
	}
	return printTable(w, headers, rows)
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// cellText is v as one table cell: strings as they are, numbers without
// exponents, absent as "-", anything else compact JSON (printTable quotes
// a cell holding a tab, a newline or any other unsafe rune).
func cellText(v any) string {
	var s string
	switch x := v.(type) {
	case nil:
		return "-"
	case string:
		s = x
	case float64:
		s = strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		s = strconv.FormatBool(x)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = cellText(e)
		}
		s = strings.Join(parts, ",")
	default:
		b, _ := json.Marshal(x)
		s = string(b)
	}
	if s == "" {
		return "-"
	}
	return s
}
