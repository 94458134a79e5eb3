package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// wireCodes returns every Code* constant of the package: name → value.
func wireCodes(t *testing.T) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	codes := map[string]string{}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 || !strings.HasPrefix(vs.Names[0].Name, "Code") {
				return true
			}
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				codes[vs.Names[0].Name] = v
			}
			return true
		})
	}
	if len(codes) < 10 {
		t.Fatalf("found only %d wire codes: %v", len(codes), codes)
	}
	return codes
}

// Every wire code has a status of its own in Status, and the error table of
// docs/broker-api.md lists each with that status.
func TestEveryCodeHasAStatusAndIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/broker-api.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "| Code | Status | Where |")
	if !ok {
		t.Fatal(`docs/broker-api.md has no "| Code | Status | Where |" table`)
	}
	documented := map[string]int{}
	row := regexp.MustCompile("^\\| (`[A-Za-z]+`(?:, `[A-Za-z]+`)*) \\| ([0-9, ]+) \\|")
	for _, line := range strings.Split(table, "\n")[2:] {
		if !strings.HasPrefix(line, "|") {
			break
		}
		m := row.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("unparsable row of the error table: %s", line)
		}
		codes, statuses := strings.Split(m[1], ", "), strings.Split(m[2], ", ")
		if len(codes) != len(statuses) {
			t.Fatalf("row %q: %d codes, %d statuses", line, len(codes), len(statuses))
		}
		for i, c := range codes {
			n, err := strconv.Atoi(strings.TrimSpace(statuses[i]))
			if err != nil {
				t.Fatalf("row %q: %v", line, err)
			}
			documented[strings.Trim(c, "`")] = n
		}
	}
	for name, code := range wireCodes(t) {
		st := Status(code)
		if st == http.StatusInternalServerError && code != CodeInternalError {
			t.Errorf("%s (%q) falls through to 500 in Status", name, code)
		}
		if got, ok := documented[code]; !ok {
			t.Errorf("%s (%q) is missing from the error table of docs/broker-api.md", name, code)
		} else if got != st {
			t.Errorf("docs/broker-api.md documents %q as %d, Status says %d", code, got, st)
		}
	}
}

// CodeForStatus reads Status backwards for every status a wire code has
// (so a new code cannot be forgotten there), and knows no other status.
func TestCodeForStatusInvertsStatus(t *testing.T) {
	for name, code := range wireCodes(t) {
		st := Status(code)
		got, ok := CodeForStatus(st)
		if !ok || Status(got) != st {
			t.Errorf("%s (%q, %d): CodeForStatus(%d) = %q, %v", name, code, st, st, got, ok)
		}
	}
	for _, tc := range []struct {
		status int
		want   string
	}{
		{http.StatusRequestTimeout, CodeRequestTimeout},
		{http.StatusRequestHeaderFieldsTooLarge, CodeRequestHeadersTooLarge},
		{http.StatusConflict, CodeConflict},
		{http.StatusBadRequest, CodeInvalidRequest},
	} {
		if got, _ := CodeForStatus(tc.status); got != tc.want {
			t.Errorf("CodeForStatus(%d) = %q, want %q", tc.status, got, tc.want)
		}
	}
	for _, st := range []int{http.StatusOK, http.StatusTeapot, 599} {
		if got, ok := CodeForStatus(st); ok {
			t.Errorf("CodeForStatus(%d) = %q, want none", st, got)
		}
	}
}
