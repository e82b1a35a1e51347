package schemas

import (
	"embed"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
)

// Base is the URI prefix of every schema's $id: URI(name) is Base + name + Suffix.
const Base = "https://cairn.dev/schemas/"

// Suffix ends every schema's file name and $id: the schemas' version, which moves with
// the events' "v".
const Suffix = ".v1.json"

// ContentType is the media type Handler serves the schemas with.
const ContentType = "application/schema+json"

//go:embed *.json
var files embed.FS

// names is every schema's name, sorted; files holds name+Suffix for each.
var names = func() []string {
	ents, err := files.ReadDir(".")
	if err != nil {
		panic(err) // the embedded directory always reads
	}
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), Suffix); ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}()

// Names returns the name of every schema, sorted. The slice is the caller's.
func Names() []string { return slices.Clone(names) }

// Get returns the schema called name (a JSON document) and whether there is one.
// The bytes are a copy, the caller's to keep or modify.
func Get(name string) ([]byte, bool) {
	if !slices.Contains(names, name) {
		return nil, false
	}
	b, err := files.ReadFile(name + Suffix)
	if err != nil {
		return nil, false
	}
	return b, true
}

// URI returns the $id of the schema called name: Base + name + Suffix. It does not
// check that the schema exists (Get does).
func URI(name string) string { return Base + name + Suffix }

// Handler serves the schemas: GET /schemas/{name} (name as Names lists it, or its file
// name name+Suffix) answers the schema with ContentType, GET /schemas/ the list of
// names and $ids as a JSON array of {"name", "$id"}, and an unknown name 404. HEAD is
// answered as GET without the body. The handler is safe for concurrent use.
func Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /schemas/{$}", serveIndex)
	mux.HandleFunc("GET /schemas/{name}", serveSchema)
	return mux
}

func serveSchema(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	name = strings.TrimSuffix(name, Suffix)
	b, ok := Get(name)
	if !ok {
		http.Error(w, "no schema "+name, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", ContentType)
	w.Write(b)
}

// entry is one line of the index Handler serves at /schemas/.
type entry struct {
	Name string `json:"name"`
	ID   string `json:"$id"`
}

func serveIndex(w http.ResponseWriter, _ *http.Request) {
	idx := make([]entry, len(names))
	for i, n := range names {
		idx[i] = entry{Name: n, ID: URI(n)}
	}
	b, err := json.Marshal(idx)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}
