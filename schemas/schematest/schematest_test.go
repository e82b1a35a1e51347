package schematest

import (
	"os"
	"strings"
	"testing"
)

// TestValidate: a record the schema accepts passes, one it refuses fails, and the
// lineage golden event (package lineage's) passes ValidateRunEvent while one without
// its run id does not.
func TestValidate(t *testing.T) {
	good := `{"v":1,"kind":"model","time":"2026-05-01T12:00:00Z","data":{"version":3}}`
	if err := Validate("status", []byte(good)); err != nil {
		t.Errorf("valid status refused: %v", err)
	}
	if err := Validate("status", []byte(`{"v":1,"kind":"model"}`)); err == nil {
		t.Error("status without time and data accepted")
	}
	if err := Validate("nope", []byte(`{}`)); err == nil {
		t.Error("unknown schema accepted")
	}
	b, err := os.ReadFile("../../internal/lineage/testdata/refit_complete.golden.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := ValidateRunEvent(b); err != nil {
		t.Errorf("golden RunEvent refused: %v", err)
	}
	bad := strings.Replace(string(b), `"runId"`, `"runID"`, 1)
	if err := ValidateRunEvent([]byte(bad)); err == nil {
		t.Error("RunEvent without runId accepted")
	}
}
