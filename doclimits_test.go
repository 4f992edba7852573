package crashloop_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The doc comments of the package read as x/time/rate's do: the type
// carries the model, a method says what it does and its one exception, and
// what needs more goes to docs/. Every exported declaration's comment
// (types, functions, methods, interface methods, constants and variables)
// is at most maxDocLines lines, and no sentence of it is longer than
// maxSentenceWords words.
const (
	maxDocLines      = 14
	maxSentenceWords = 60
)

// sentenceEnd ends a sentence: a full stop, question or exclamation mark
// before white space or the end, or a colon or semicolon before a line
// that starts a list item.
var sentenceEnd = regexp.MustCompile(`[.!?]\s|[.!?]$|[:;]\n\s*(-|\d+\.)\s`)

func TestDocCommentsAreShort(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	check := func(name, text string) {
		text = strings.TrimSpace(text)
		if text == "" {
			return
		}
		if n := strings.Count(text, "\n") + 1; n > maxDocLines {
			t.Errorf("%s: its doc comment has %d lines (at most %d)", name, n, maxDocLines)
		}
		for _, s := range sentenceEnd.Split(text, -1) {
			if n := len(strings.Fields(s)); n > maxSentenceWords {
				t.Errorf("%s: a sentence of %d words (at most %d): %.80q…", name, n, maxSentenceWords, strings.Join(strings.Fields(s), " "))
			}
		}
	}
	pkg, err := doc.NewFromFiles(fset, files, "github.com/crashloopguard/crashloop")
	if err != nil {
		t.Fatal(err)
	}
	values := func(vs []*doc.Value) {
		for _, v := range vs {
			check(strings.Join(v.Names, ", "), v.Doc)
		}
	}
	values(pkg.Consts)
	values(pkg.Vars)
	for _, f := range pkg.Funcs {
		check(f.Name, f.Doc)
	}
	for _, typ := range pkg.Types {
		check(typ.Name, typ.Doc)
		values(typ.Consts)
		values(typ.Vars)
		for _, f := range typ.Funcs {
			check(f.Name, f.Doc)
		}
		for _, m := range typ.Methods {
			check(typ.Name+"."+m.Name, m.Doc)
		}
		for _, spec := range typ.Decl.Specs {
			ts, ok := spec.(*ast.TypeSpec)
			if !ok {
				continue
			}
			var fields *ast.FieldList
			switch x := ts.Type.(type) {
			case *ast.InterfaceType:
				fields = x.Methods
			case *ast.StructType:
				fields = x.Fields
			}
			if fields == nil {
				continue
			}
			for _, f := range fields.List {
				for _, n := range f.Names {
					if n.IsExported() {
						check(typ.Name+"."+n.Name, f.Doc.Text())
					}
				}
			}
		}
	}
}

// The README says what crashloop is, gives the two commands, a quick start
// and a map of docs/, in at most maxReadmeLines lines; the rest is in
// docs/.
const maxReadmeLines = 300

func TestReadmeIsShort(t *testing.T) {
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines (at most %d): move the detail to docs/", n, maxReadmeLines)
	}
}

// docs/design.md's table of files and layers names each file of the
// package, and each file it names exists.
func TestDesignNamesEveryFile(t *testing.T) {
	design, err := os.ReadFile("docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") && !strings.Contains(string(design), "`"+f+"`") {
			t.Errorf("docs/design.md does not name %s", f)
		}
	}
	for _, m := range regexp.MustCompile("`([a-z_]+\\.go)`").FindAllStringSubmatch(string(design), -1) {
		if _, err := os.Stat(m[1]); err != nil {
			t.Errorf("docs/design.md names %s: %v", m[1], err)
		}
	}
}
