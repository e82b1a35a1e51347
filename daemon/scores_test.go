package daemon

import (
	"fmt"
	"testing"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/stream"
)

// TestQueryScores: the daemon's query decoder accepts exactly certify's rankings as a
// query's "score", and so does stream's own default list (what clients such as cairnctl
// validate with), so neither can name a ranking the answers do not know.
func TestQueryScores(t *testing.T) {
	d, err := New(e2eConfig(t.TempDir()), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, lim := range []stream.Limits{d.query.lim, {InputDim: 1}} {
		for _, name := range []string{"entk", "displacement", "representer", "influence", "ENTK", ""} {
			_, known := certify.ParseRanking(name)
			raw := fmt.Sprintf(`{"v":1,"request":"q","id":"p","score":%q}`, name)
			if _, err := stream.DecodeQuery([]byte(raw), lim); (err == nil) != (known == nil) {
				t.Errorf("limits %v: score %q decoded with %v, certify.ParseRanking: %v", lim.Scores, name, err, known)
			}
		}
		if n := len(certify.Rankings); lim.Scores != nil && len(lim.Scores) != n {
			t.Errorf("daemon scores %v, want certify's %d rankings", lim.Scores, n)
		}
	}
}
