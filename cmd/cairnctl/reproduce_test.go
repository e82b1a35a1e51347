package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cairnhq/cairn/internal/lab/reproduce"
)

// TestReproduceFlags checks that the flags reach reproduce.Command: a bad --table fails
// naming the tables, and --table srht --quick --seed 2 --format json runs the quick
// table under seed 2 (the package's own tests cover the tables).
func TestReproduceFlags(t *testing.T) {
	err := cmdRun("reproduce", []string{"--table", "nope"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), strings.Join(reproduce.Names(), ", ")) {
		t.Errorf("reproduce --table nope: %v; want an error naming every table", err)
	}
	var out bytes.Buffer
	if err := cmdRun("reproduce", []string{"--table", "srht", "--quick", "--seed", "2", "--format", "json"}, &out); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Name     string `json:"name"`
		Settings struct {
			Seed uint64         `json:"seed"`
			Size reproduce.Size `json:"size"`
		} `json:"settings"`
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Name != "srht" || got.Settings.Seed != 2 || !got.Settings.Size.Quick {
		t.Errorf("name %q, seed %d, quick %v; want srht, 2, true", got.Name, got.Settings.Seed, got.Settings.Size.Quick)
	}
}
