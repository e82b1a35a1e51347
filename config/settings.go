package config

import (
	"flag"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Setting is one leaf of Config as an operator sets it. docs/configuration.md is
// generated from Settings and the fields' doc comments (TestConfigurationDoc), so a field
// added to Config appears there with its key, variable, flag and default by itself.
type Setting struct {
	// Path is the YAML path, e.g. "sketch.h"; Field the Go path, e.g. "Sketch.H".
	Path, Field string
	// Env is the environment variable that sets it (EnvName(Path)).
	Env string
	// Flag is cairnd's flag that sets it, without dashes ("data-dir"), or "" for none.
	Flag string
	// Type is the kind of value in words: string, integer, unsigned integer, number,
	// boolean, duration or list of strings.
	Type string
	// Default is Default()'s value as YAML writes it ("" for an empty string, [] for an
	// empty list, durations in time.ParseDuration syntax).
	Default string
}

// EnvName is the environment variable of the setting at YAML path: CAIRN_ plus the path
// upper-cased with "." replaced by "_" (sketch.h: CAIRN_SKETCH_H).
func EnvName(path string) string {
	return "CAIRN_" + strings.ToUpper(strings.ReplaceAll(path, ".", "_"))
}

// Settings lists every setting of Config in field order. A setting's flag is found by
// giving each of RegisterFlags's flags alone, through Flags.Load, and seeing which
// setting it changes; --config, which names the file, sets none.
func Settings() []Setting {
	flags := flagPaths()
	var out []Setting
	d := Default()
	walkFields(reflect.ValueOf(&d).Elem(), "", "", func(path, field string, f reflect.Value) {
		out = append(out, Setting{Path: path, Field: field, Env: EnvName(path), Flag: flags[path],
			Type: typeName(f), Default: formatValue(f)})
	})
	return out
}

// flagPaths maps the YAML path of each setting a cairnd flag sets to the flag's name.
// It panics when a flag other than --config sets no setting or several: RegisterFlags
// and Flags.Load disagree, a programmer error that the tests meet first.
func flagPaths() map[string]string {
	base := leafValues(Default())
	out := map[string]string{}
	names := flag.NewFlagSet("names", flag.ContinueOnError)
	RegisterFlags(names)
	names.VisitAll(func(fl *flag.Flag) {
		if fl.Name == "config" {
			return
		}
		value := "probe.invalid:1" // differs from every default, and is a list of one for --brokers
		if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			def, _ := strconv.ParseBool(fl.DefValue)
			value = strconv.FormatBool(!def)
		}
		fs := flag.NewFlagSet("probe", flag.ContinueOnError)
		f := RegisterFlags(fs)
		if err := fs.Parse([]string{"--" + fl.Name + "=" + value}); err != nil {
			panic(fmt.Sprintf("config: probing --%s: %v", fl.Name, err))
		}
		c, err := f.Load(fs, nil)
		if err != nil {
			panic(fmt.Sprintf("config: probing --%s: %v", fl.Name, err))
		}
		var changed []string
		for path, v := range leafValues(c) {
			if v != base[path] {
				changed = append(changed, path)
			}
		}
		if len(changed) != 1 {
			panic(fmt.Sprintf("config: flag --%s sets %d settings %v, want 1", fl.Name, len(changed), changed))
		}
		out[changed[0]] = fl.Name
	})
	return out
}

// leafValues is every setting of c by YAML path, formatted.
func leafValues(c Config) map[string]string {
	out := map[string]string{}
	walkFields(reflect.ValueOf(&c).Elem(), "", "", func(path, _ string, f reflect.Value) { out[path] = formatValue(f) })
	return out
}

// walkFields is walk with the Go field path beside the YAML path.
func walkFields(v reflect.Value, prefix, goPrefix string, fn func(path, field string, f reflect.Value)) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		tag := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		if tag == "" || tag == "-" {
			continue
		}
		path, field := tag, t.Field(i).Name
		if prefix != "" {
			path, field = prefix+"."+tag, goPrefix+"."+field
		}
		f := v.Field(i)
		if f.Kind() == reflect.Struct && f.Type() != reflect.TypeOf(time.Duration(0)) {
			walkFields(f, path, field, fn)
			continue
		}
		fn(path, field, f)
	}
}

// typeName is the kind of f's value in words.
func typeName(f reflect.Value) string {
	switch {
	case f.Type() == reflect.TypeOf(time.Duration(0)):
		return "duration"
	case f.Kind() == reflect.Bool:
		return "boolean"
	case f.Kind() == reflect.Int || f.Kind() == reflect.Int64:
		return "integer"
	case f.Kind() == reflect.Uint64:
		return "unsigned integer"
	case f.Kind() == reflect.Float64:
		return "number"
	case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
		return "list of strings"
	}
	return "string"
}

// formatValue writes f's value as YAML would take it.
func formatValue(f reflect.Value) string {
	switch {
	case f.Type() == reflect.TypeOf(time.Duration(0)):
		return formatDuration(time.Duration(f.Int()))
	case f.Kind() == reflect.String:
		if f.String() == "" {
			return `""`
		}
		return f.String()
	case f.Kind() == reflect.Float64:
		return strconv.FormatFloat(f.Float(), 'g', -1, 64)
	case f.Kind() == reflect.Slice:
		parts := make([]string, f.Len())
		for i := range parts {
			parts[i] = f.Index(i).String()
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(f.Interface())
}

// formatDuration is d.String() without zero trailing units: 12h, 1m30s, 250ms.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
