package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoBenchUntrainedFlag: --untrained reaches the daemon's configuration as
// model.untrained, so combined with a weights file in --config it is refused (by the
// configuration's validation in demo, by the feature pipeline bench builds first).
func TestDemoBenchUntrainedFlag(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "cairn.yaml")
	if err := os.WriteFile(cfg, []byte("model: {weights: \"w.safetensors\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"demo", "bench"} {
		code, _, errs := runCmd(cmd, "--untrained", "--config", cfg, "--n", "20", "--http", "127.0.0.1:0", "--embedded-broker", "127.0.0.1:0")
		if code == 0 || !strings.Contains(errs, "untrained") || !strings.Contains(errs, "w.safetensors") || strings.Contains(errs, "not defined") {
			t.Errorf("%s --untrained with a weights file: exit %d, stderr %q; want a refusal naming untrained", cmd, code, errs)
		}
	}
}
