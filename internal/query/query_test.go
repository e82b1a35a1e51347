package query

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/certify"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/internal/metrics"
	"github.com/cairnhq/cairn/internal/ui"
	"github.com/cairnhq/cairn/stream"
)

// TestQueryScores: the query decoder accepts exactly certify's rankings as a query's
// "score", and so does stream's own default list (what clients such as cairnctl
// validate with), so neither can name a ranking the answers do not know.
func TestQueryScores(t *testing.T) {
	lim, err := Limits(config.Default(), 4)
	if err != nil {
		t.Fatal(err)
	}
	for _, lim := range []stream.Limits{lim, {InputDim: 1}} {
		names := []string{"influence", "ENTK", "graddot", ""}
		for _, r := range certify.Rankings {
			names = append(names, string(r))
		}
		for _, name := range names {
			_, known := certify.ParseRanking(name)
			raw := fmt.Sprintf(`{"v":1,"request":"q","id":"p","score":%q}`, name)
			if _, err := stream.DecodeQuery([]byte(raw), lim); (err == nil) != (known == nil) {
				t.Errorf("limits %v: score %q decoded with %v, certify.ParseRanking: %v", lim.Scores, name, err, known)
			}
		}
		if n := len(certify.Rankings); lim.Scores != nil && len(lim.Scores) != n {
			t.Errorf("query scores %v, want certify's %d rankings", lim.Scores, n)
		}
	}
}

// TestBatchDeadLetters: without a model every query is a dead letter with its reason
// (an invalid message, a query by id where no points are stored, no model), answered
// offsets are skipped, and Account counts dead letters in the metrics, not as answers.
func TestBatchDeadLetters(t *testing.T) {
	cfg := config.Default()
	lim, err := Limits(cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New()
	a := New(Config{Daemon: cfg, Limits: lim, Log: zerolog.Nop(), Metrics: m, UI: ui.NewRecorder(4, 4)})
	enc := func(ev stream.QueryEvent) []byte {
		v, err := stream.EncodeQuery(ev, lim)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	topic := cfg.Kafka.Topics.Queries
	batch := []stream.Message{
		{Topic: topic, Offset: 0, Value: []byte("{")},
		{Topic: topic, Offset: 1, Value: enc(stream.QueryEvent{Request: "by-id", ID: "p1"})},
		{Topic: topic, Offset: 2, Value: enc(stream.QueryEvent{Request: "by-x", X: []float64{1, 2}})},
		{Topic: topic, Offset: 3, Value: enc(stream.QueryEvent{Request: "again", X: []float64{1, 2}})},
	}
	outs := a.Batch(nil, nil, batch, func(m stream.Message) bool { return m.Offset == 3 })
	want := []stream.Reason{stream.ReasonBadJSON, stream.ReasonUnavailable, stream.ReasonUnavailable}
	for i, o := range outs[:3] {
		if o.Skip || o.Topic != cfg.Kafka.Topics.DLQ || o.verdict != "" {
			t.Errorf("message %d: %+v, want a dead letter", i, o)
			continue
		}
		var dl stream.DeadLetter
		if err := json.Unmarshal(o.Value, &dl); err != nil {
			t.Fatalf("message %d: dead letter %q: %v", i, o.Value, err)
		}
		if dl.Reason != want[i] {
			t.Errorf("message %d: reason %q, want %q", i, dl.Reason, want[i])
		}
	}
	if !outs[3].Skip {
		t.Error("an answered offset was answered again")
	}
	a.Account(outs, nil)
	if n := a.Count(); n != 0 {
		t.Errorf("%d answers counted for dead letters", n)
	}
	if _, err := a.Answer(nil, stream.QueryEvent{Request: "q", X: []float64{1, 2}}); err == nil {
		t.Error("Answer without a model: no error")
	}
}
