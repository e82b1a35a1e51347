package config

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/dataset"
)

var update = flag.Bool("update", false, "rewrite docs/configuration.md from Config (TestConfigurationDoc)")

// referencePath is the generated configuration reference, from this package's directory.
const referencePath = "../docs/configuration.md"

// TestConfigurationDoc fails when docs/configuration.md is not what Config generates:
// every setting of Settings with its YAML key, environment variable, flag, default and
// the field's doc comment. After changing Config, regenerate it with
//
//	go test ./config -run TestConfigurationDoc -update
//
// (or go generate ./config) and commit the result.
func TestConfigurationDoc(t *testing.T) {
	got := reference(t)
	if *update {
		if err := os.WriteFile(referencePath, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(referencePath)
	if err != nil {
		t.Fatalf("%v: generate it with go test ./config -run TestConfigurationDoc -update", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		i := 0
		for i < len(gl) && i < len(wl) && gl[i] == wl[i] {
			i++
		}
		at := func(l []string) string {
			if i < len(l) {
				return l[i]
			}
			return "(end of file)"
		}
		t.Errorf("%s is stale (first difference at line %d: generated %q, file %q); "+
			"regenerate it with go test ./config -run TestConfigurationDoc -update", referencePath, i+1, at(gl), at(wl))
	}
}

// TestReferenceCoversConfig: the generator's inputs can fail. Every setting has a doc
// comment, every flag but --config sets exactly one setting (Settings panics otherwise),
// and the flags found agree with the ones config_test checks by hand.
func TestReferenceCoversConfig(t *testing.T) {
	docs := fieldDocs(t)
	flags := map[string]string{}
	for _, s := range Settings() {
		if strings.TrimSpace(docs[s.Field]) == "" {
			t.Errorf("setting %s (Config.%s) has no doc comment: docs/configuration.md would say nothing of it", s.Path, s.Field)
		}
		if s.Flag != "" {
			flags[s.Flag] = s.Path
		}
	}
	for flag, path := range map[string]string{"data-dir": "data_dir", "brokers": "kafka.brokers", "role": "role",
		"untrained": "model.untrained", "http-token-file": "http_auth.token_file"} {
		if flags[flag] != path {
			t.Errorf("flag --%s: got setting %q, want %q", flag, flags[flag], path)
		}
	}
}

// fieldDocs maps "Type.Field" paths of Config ("Sketch.H", "Kafka.TLS.Enabled") to the
// text of each field's doc comment, or of its line comment when it has none, read from
// this package's Go files; "Type." keys hold each struct type's own doc.
func fieldDocs(t *testing.T) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	types := map[string]*ast.StructType{}
	typeDocs := map[string]string{}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, spec := range g.Specs {
				ts := spec.(*ast.TypeSpec)
				if st, ok := ts.Type.(*ast.StructType); ok {
					types[ts.Name.Name] = st
					typeDocs[ts.Name.Name] = g.Doc.Text()
				}
			}
		}
	}
	out := map[string]string{}
	var visit func(typeName, prefix string)
	visit = func(typeName, prefix string) {
		out[prefix] = typeDocs[typeName]
		for _, field := range types[typeName].Fields.List {
			text := field.Doc.Text()
			if text == "" {
				text = field.Comment.Text()
			}
			for _, n := range field.Names {
				if id, ok := field.Type.(*ast.Ident); ok && types[id.Name] != nil {
					visit(id.Name, prefix+n.Name+".")
					continue
				}
				out[strings.TrimPrefix(prefix+n.Name, "Config.")] = text
			}
		}
	}
	visit("Config", "Config.")
	return out
}

// reference renders docs/configuration.md.
func reference(t *testing.T) []byte {
	t.Helper()
	docs := fieldDocs(t)
	settings := Settings()
	var b bytes.Buffer
	b.WriteString(referenceIntro)
	b.WriteString("\n## All settings\n\n| YAML key | environment variable | cairnd flag | default |\n| --- | --- | --- | --- |\n")
	for _, s := range settings {
		fmt.Fprintf(&b, "| [`%s`](#%s) | `%s` | %s | %s |\n", s.Path, anchor(s.Path), s.Env, flagCell(s.Flag), code(s.Default))
	}
	// Sections in order of first appearance, the top level ("") first.
	order := []string{""}
	bySection := map[string][]Setting{}
	for _, s := range settings {
		sec := ""
		if i := strings.LastIndex(s.Path, "."); i >= 0 {
			sec = s.Path[:i]
		}
		if _, ok := bySection[sec]; !ok && sec != "" {
			order = append(order, sec)
		}
		bySection[sec] = append(bySection[sec], s)
	}
	for _, sec := range order {
		siblings := map[string]string{}
		for _, s := range bySection[sec] {
			siblings[fieldName(s.Field)] = leafKey(s.Path)
		}
		writeSection(&b, sec, bySection[sec][0].Field, docs, siblings)
		for _, s := range bySection[sec] {
			fmt.Fprintf(&b, "### %s\n\n", s.Path)
			fmt.Fprintf(&b, "`%s` · %s · %s · default %s\n\n", s.Env, flagCell(s.Flag), s.Type, code(s.Default))
			b.WriteString(prose(renameFields(docs[s.Field], siblings), fieldName(s.Field), leafKey(s.Path)) + "\n\n")
		}
	}
	writeFlags(&b)
	writeLoaderEnv(t, &b)
	return append(bytes.TrimRight(b.Bytes(), "\n"), '\n')
}

const referenceIntro = `# Configuration reference

<!-- Generated from config.Config by TestConfigurationDoc (go test ./config -run TestConfigurationDoc -update); do not edit by hand. -->

cairnd takes its settings in layers, each overriding the one before: the defaults (the
embedded mode on MNIST-shaped data), a YAML file (` + "`--config FILE`" + `), ` + "`CAIRN_*`" + `
environment variables, then the flags given on the command line. A YAML key is the dotted
path below written as nested maps (` + "`sketch.h: 2`" + ` is ` + "`sketch:`" + ` then ` + "`  h: 2`" + `); its
environment variable is ` + "`CAIRN_`" + ` plus the path upper-cased with "." replaced by "_";
lists are comma-separated there (` + "`CAIRN_KAFKA_BROKERS=a:9092,b:9092`" + `), durations are
written as Go durations (` + "`250ms`, `10s`, `12h`" + `). An unknown YAML key, a key given twice
and an unknown ` + "`CAIRN_`" + ` variable are errors, and cairnd validates the result once, reporting
every invalid setting at once (` + "`go doc ./config`" + `).

A minimal file for an external Kafka:

` + "```yaml" + `
data_dir: /var/lib/cairn
role: primary
kafka:
  brokers: [kafka-1:9093, kafka-2:9093]
  tls:
    enabled: true
    ca_file: /etc/cairn/kafka-ca.pem
` + "```" + `
`

// writeSection starts the section of the settings under YAML path sec ("" for the
// top level), with its struct type's doc comment, in which the Go names of the
// section's fields (siblings) become their YAML keys.
func writeSection(b *bytes.Buffer, sec, field string, docs, siblings map[string]string) {
	if sec == "" {
		b.WriteString("\n## Top-level settings\n\n")
		return
	}
	fmt.Fprintf(b, "## %s\n\n", sec)
	typePath := field[:strings.LastIndex(field, ".")+1]
	if text := docs["Config."+typePath]; text != "" {
		typeName, _, _ := strings.Cut(text, " ")
		b.WriteString(prose(renameFields(text, siblings), typeName, sec) + "\n\n")
	}
}

// writeFlags lists cairnd's flags with the setting each one sets.
func writeFlags(b *bytes.Buffer) {
	b.WriteString("## cairnd's flags\n\nA flag overrides the file and the environment only when it is given.\n\n| flag | sets | meaning |\n| --- | --- | --- |\n")
	paths := map[string]string{}
	for _, s := range Settings() {
		if s.Flag != "" {
			paths[s.Flag] = s.Path
		}
	}
	fs := flag.NewFlagSet("cairnd", flag.ContinueOnError)
	RegisterFlags(fs)
	fs.VisitAll(func(f *flag.Flag) {
		sets := "the file to read"
		if p := paths[f.Name]; p != "" {
			sets = fmt.Sprintf("[`%s`](#%s)", p, anchor(p))
		}
		fmt.Fprintf(b, "| `--%s` | %s | %s |\n", f.Name, sets, strings.ReplaceAll(prose(f.Usage, "", ""), "|", `\|`))
	})
	b.WriteString("\n")
}

// writeLoaderEnv lists the data loaders' variables (dataset.EnvVars), with the doc
// comments of their constants in package dataset.
func writeLoaderEnv(t *testing.T, b *bytes.Buffer) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../dataset/env.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Values) == 1 {
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok {
				text := strings.TrimPrefix(strings.TrimSpace(vs.Doc.Text()), vs.Names[0].Name+" ")
				docs[strings.Trim(lit.Value, `"`)] = prose(text, "", "")
			}
		}
		return true
	})
	b.WriteString("## The data loaders' variables\n\nThese belong to the data loaders (package dataset), which cairnd and cairnctl share; they are\nnot settings of Config, and setting one never stops cairnd from starting.\n\n")
	for _, name := range dataset.EnvVars() {
		if docs[name] == "" {
			t.Errorf("dataset.EnvVars names %s, which has no documented constant in dataset/env.go", name)
		}
		fmt.Fprintf(b, "* `%s` %s\n", name, docs[name])
	}
}

// leafKey is the last element of a YAML path.
func leafKey(path string) string { return path[strings.LastIndex(path, ".")+1:] }

// renameFields replaces, in a field's doc comment, the Go names of the other fields of
// its struct by their YAML keys ("used when Brokers is empty": `brokers`). Names of
// fewer than three letters and all-capital ones (HTTP, DLQ) are left alone: they are
// words of the text as often as names; so is a name after a dot (coreset.Config.Normalize
// is Go). The field's own leading name is prose's.
func renameFields(text string, keys map[string]string) string {
	var b strings.Builder
	last := 0
	for _, m := range goNameRe.FindAllStringIndex(text, -1) {
		name := text[m[0]:m[1]]
		key, ok := keys[name]
		if !ok || m[0] == 0 || text[m[0]-1] == '.' || strings.ToUpper(name) == name {
			continue
		}
		b.WriteString(text[last:m[0]] + "`" + key + "`")
		last = m[1]
	}
	b.WriteString(text[last:])
	return b.String()
}

var goNameRe = regexp.MustCompile(`\b[A-Z][A-Za-z0-9]{2,}\b`)

// fieldName is the last element of a Go field path.
func fieldName(field string) string { return field[strings.LastIndex(field, ".")+1:] }

// anchor is the GitHub anchor of the "### path" heading.
func anchor(path string) string { return strings.ReplaceAll(path, ".", "") }

func flagCell(name string) string {
	if name == "" {
		return "no flag"
	}
	return "`--" + name + "`"
}

func code(s string) string { return "`" + s + "`" }

// prose turns a doc comment into Markdown: lines joined into paragraphs, a leading Go
// name (the field's) replaced by the YAML key, settings' paths, CAIRN_ variables and
// flags set as code, and the characters Markdown would take for emphasis escaped.
func prose(text, goName, key string) string {
	text = strings.TrimSpace(text)
	if goName != "" && key != "" && strings.HasPrefix(text, goName+" ") {
		text = "`" + key + "`" + text[len(goName):]
	} else if goName != "" && strings.HasPrefix(text, goName+" ") {
		text = "`" + goName + "`" + text[len(goName):]
	}
	var paras []string
	for _, p := range strings.Split(text, "\n\n") {
		paras = append(paras, codeSpans(strings.Join(strings.Fields(p), " ")))
	}
	return strings.Join(paras, "\n\n")
}

// codeRe matches what the reference sets as code: CAIRN_ variables, --flags, YAML paths
// of two or more elements, and keys with an underscore.
var codeRe = regexp.MustCompile("`[^`]*`|\\bCAIRN_[A-Z0-9_]+|(?:^|\\s)--[a-z][a-z0-9-]*|\\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?:\\.[a-z][a-z0-9_]*)*\\b|\\b(?:kafka|http_tls|http_auth|model|sketch|pool|fit|refit|query|audit|limits|ui)\\.[a-z][a-z0-9_.]*[a-z0-9]")

// codeSpans sets the matches of codeRe as code and escapes the rest.
func codeSpans(s string) string {
	var b strings.Builder
	last := 0
	for _, m := range codeRe.FindAllStringIndex(s, -1) {
		b.WriteString(escape(s[last:m[0]]))
		tok := s[m[0]:m[1]]
		switch {
		case strings.HasPrefix(tok, "`"):
			b.WriteString(tok)
		case strings.TrimSpace(tok) != tok:
			b.WriteString(tok[:len(tok)-len(strings.TrimLeft(tok, " \t"))] + "`" + strings.TrimSpace(tok) + "`")
		default:
			b.WriteString("`" + tok + "`")
		}
		last = m[1]
	}
	b.WriteString(escape(s[last:]))
	return b.String()
}

// escape keeps Markdown from reading *, _ , < and [ as markup.
func escape(s string) string {
	return strings.NewReplacer(`*`, `\*`, `_`, `\_`, `<`, `&lt;`).Replace(s)
}
