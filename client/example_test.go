package client_test

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/config"
	"github.com/cairnhq/cairn/stream"
)

// A compliance pipeline: stream a point in, ask what an input rests on, delete the
// point, wait for its signed audit and verify the whole audit chain against the
// daemon's pinned key.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := client.FromDaemon(config.Default(), brokers()) // the daemon's configuration
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg.HTTP.Addr = httpAddr()
	c, err := client.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	label := int64(1)
	if err := c.Upsert(ctx, client.Point{ID: "alice-1", X: []float64{0.5, 0.5, 0.5, 1}, Label: &label}); err != nil {
		fmt.Println(err)
		return
	}
	a, err := c.Ask(ctx, stream.QueryEvent{X: []float64{0.4, 0.6, 0.5, 1}, K: 5})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("landmarks named:", len(a.TopK))

	audit, err := c.DeleteAndWait(ctx, "alice-1", "erase-alice-1")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("audit:", audit.Request, audit.ID, "known", audit.Known)

	keys, err := c.AuditKeys(ctx) // pin it: keep it outside the daemon
	if err != nil {
		fmt.Println(err)
		return
	}
	rep, err := c.VerifyAudits(ctx, keys)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("chain ok:", rep.OK, "signatures", rep.Signatures)
	// Output:
	// landmarks named: 5
	// audit: erase-alice-1 alice-1 known true
	// chain ok: true signatures verified
}

// A client of the HTTP surface only: without brokers, the Kafka methods refuse.
func ExampleNew() {
	c, err := client.New(client.Config{HTTP: client.HTTP{Addr: httpAddr()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	st, err := c.Status(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("ready:", st.Ready)
	_, err = c.SendQuery(context.Background(), stream.QueryEvent{ID: "p0"})
	fmt.Println(errors.Is(err, client.ErrNoBrokers))
	// Output:
	// ready: true
	// true
}

func ExampleFromDaemon() {
	cfg, err := client.FromDaemon(config.Default(), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("brokers:", cfg.Kafka.Brokers)
	fmt.Println("train topic:", cfg.Topics.Train)
	fmt.Println("max k:", cfg.Limits.MaxK, "scores:", cfg.Limits.Scores)
	fmt.Println("http:", cfg.HTTP.Addr)
	// Output:
	// brokers: [127.0.0.1:9092]
	// train topic: cairn.train
	// max k: 100 scores: [gradient_cosine gradient entk displacement representer]
	// http: 127.0.0.1:8080
}

func ExampleConfig_Validate() {
	err := client.Config{Kafka: stream.Config{Brokers: []string{"nohost"}}, AnswerTimeout: -time.Second}.Validate()
	fmt.Println(errors.Is(err, client.ErrConfig))
	fmt.Println("problems:", len(strings.Split(err.Error(), "\n")))
	// Output:
	// true
	// problems: 2
}

func ExampleNewRequestID() {
	id, err := client.NewRequestID("q")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(id[:2], len(id))
	// Output: q- 18
}

func ExampleClient_Topics() {
	c, err := client.New(client.Config{Topics: config.Topics{Queries: "team-a.queries"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Topics().Queries, c.Topics().Attributions)
	// Output: team-a.queries cairn.attributions
}

func ExampleClient_Close() {
	c, err := client.New(client.Config{Kafka: stream.Config{Brokers: brokers()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(c.Close(), c.Close())
	// Output: <nil> <nil>
}

// Every point is validated before any is sent: a non-finite value is refused here,
// naming the point, as the daemon would have dead-lettered it.
func ExampleClient_Upsert() {
	c, err := client.New(client.Config{Kafka: stream.Config{Brokers: brokers()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx := context.Background()
	err = c.Upsert(ctx,
		client.Point{ID: "p100", X: []float64{1, 0, 0.5, 0}},
		client.Point{ID: "p101", X: []float64{0, 1, 0.5, 2}})
	fmt.Println("sent:", err == nil)
	err = c.Upsert(ctx, client.Point{ID: "p102", X: []float64{math.Inf(1), 0, 0, 0}})
	fmt.Println("refused:", errors.Is(err, stream.ErrRejected))
	// Output:
	// sent: true
	// refused: true
}

func ExampleClient_SendQuery() {
	c, err := client.New(client.Config{Kafka: stream.Config{Brokers: brokers()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	s, err := c.SendQuery(context.Background(), stream.QueryEvent{Request: "batch-7", ID: "p2", K: 3, Score: "displacement"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Request, "sent to", s.Topic, "answered on", s.AnswerTopic)
	// Output: batch-7 sent to cairn.queries answered on cairn.attributions
}

func ExampleClient_Ask() {
	c, err := client.New(client.Config{Kafka: stream.Config{Brokers: brokers()}, AnswerTimeout: time.Minute})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	a, err := c.Ask(context.Background(), stream.QueryEvent{Request: "ask-1", ID: "p0", K: 3, Score: "entk"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(a.Request, len(a.TopK), a.Score, a.Model > 0)
	// Output: ask-1 3 entk true
}

// A query the daemon rejects comes back as its dead letter.
func ExampleDeadLetterError() {
	c, err := client.New(client.Config{Kafka: stream.Config{Brokers: brokers()}, AnswerTimeout: time.Minute})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	_, err = c.Ask(context.Background(), stream.QueryEvent{Request: "who", ID: "nobody"})
	var dl *client.DeadLetterError
	if errors.As(err, &dl) {
		fmt.Println(dl.Request, dl.DeadLetter.Reason, errors.Is(err, client.ErrDeadLettered))
	}
	// Output: who unknown_id true
}

func ExampleClient_SendDelete() {
	c, err := client.New(client.Config{Kafka: stream.Config{Brokers: brokers()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	s, err := c.SendDelete(context.Background(), "p9", "forget-p9")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(s.Topic, "key", string(s.Key), "audit on", s.AnswerTopic)
	// Output: cairn.train key p9 audit on cairn.audits
}

func ExampleClient_DeleteAndWait() {
	c, err := client.New(client.Config{Kafka: stream.Config{Brokers: brokers()}, AnswerTimeout: time.Minute})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	a, err := c.DeleteAndWait(context.Background(), "p7", "")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(a.ID, "known", a.Known, "signed", a.KeyID != "", "model after", a.ModelAfter > a.ModelBefore)
	// Output: p7 known true signed true model after true
}

// Watch the audit topic from now on, then send a deletion: its audit cannot be missed.
func ExampleClient_Watch() {
	c, err := client.New(client.Config{Kafka: stream.Config{Brokers: brokers()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := c.Watch(ctx, c.Topics().Audits)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	s, err := c.SendDelete(ctx, "p8", "")
	if err != nil {
		fmt.Println(err)
		return
	}
	for {
		m, err := w.Next(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		var a stream.Audit
		if string(m.Key) == s.Request && json.Unmarshal(m.Value, &a) == nil {
			fmt.Println("audit of", a.ID)
			break
		}
	}
	// Output: audit of p8
}

func ExampleWatcher_Next() {
	c, err := client.New(client.Config{Kafka: stream.Config{Brokers: brokers()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := c.Watch(ctx, c.Topics().Attributions)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	for i := range 3 {
		if _, err := c.SendQuery(ctx, stream.QueryEvent{Request: fmt.Sprintf("next-%d", i), ID: "p3"}); err != nil {
			fmt.Println(err)
			return
		}
	}
	var got []string
	for len(got) < 3 {
		m, err := w.Next(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		if strings.HasPrefix(string(m.Key), "next-") {
			got = append(got, string(m.Key))
		}
	}
	slices.Sort(got) // answers of different partitions come in any order
	fmt.Println(got)
	// Output: [next-0 next-1 next-2]
}

func ExampleWatcher_Await() {
	c, err := client.New(client.Config{Kafka: stream.Config{Brokers: brokers()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	w, err := c.Watch(ctx, c.Topics().Attributions, c.Topics().DLQ)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer w.Close()
	for _, id := range []string{"p4", "p5"} { // one request at a time on a Watcher
		s, err := c.SendQuery(ctx, stream.QueryEvent{ID: id, K: 2})
		if err != nil {
			fmt.Println(err)
			return
		}
		m, err := w.Await(ctx, s)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(m.Topic, string(m.Key) == s.Request)
	}
	// Output:
	// cairn.attributions true
	// cairn.attributions true
}

func ExampleWatcher_Close() {
	c, err := client.New(client.Config{Kafka: stream.Config{Brokers: brokers()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	w, err := c.Watch(context.Background(), c.Topics().Status)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(w.Close(), w.Close())
	// Output: <nil> <nil>
}

func ExampleClient_Status() {
	c, err := client.New(client.Config{HTTP: client.HTTP{Addr: httpAddr()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	st, err := c.Status(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("ready", st.Ready, "role", st.Role, "serving a model", st.Model > 0, "raw JSON", json.Valid(st.Raw))
	// Output: ready true role primary serving a model true raw JSON true
}

func ExampleClient_Model() {
	c, err := client.New(client.Config{HTTP: client.HTTP{Addr: httpAddr()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	m, err := c.Model(context.Background(), 0) // the serving version
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.Arch, len(m.Landmarks) > 0)
	// Output: mlp:4-16-4 true
}

func ExampleClient_AuditKeys() {
	c, err := client.New(client.Config{HTTP: client.HTTP{Addr: httpAddr()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	keys, err := c.AuditKeys(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	for id, pub := range keys {
		fmt.Println(len(id), len(pub))
	}
	// Output: 16 32
}

func ExampleClient_VerifyAudits() {
	c, err := client.New(client.Config{Kafka: stream.Config{Brokers: brokers()}, HTTP: client.HTTP{Addr: httpAddr()}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	keys, err := c.AuditKeys(ctx) // or client.ReadKeys of a pinned copy
	if err != nil {
		fmt.Println(err)
		return
	}
	rep, err := c.VerifyAudits(ctx, keys)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rep.OK, rep.Records > 0, len(rep.Forged), rep.Signatures, rep.Source)
	// Output: true true 0 verified kafka:cairn.audits
}

func ExampleParseKeys() {
	pub := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	for _, pinned := range []string{
		hex.EncodeToString(pub), // a bare hex key
		`{"public_key":"` + hex.EncodeToString(pub) + `","key_id":"…"}`, // GET /audit/key
	} {
		keys, err := client.ParseKeys([]byte(pinned))
		if err != nil {
			fmt.Println(err)
			return
		}
		for id := range keys {
			fmt.Println(id)
		}
	}
	// Output:
	// 139e3940e64b5491
	// 139e3940e64b5491
}

func ExampleReadKeys() {
	dir, err := os.MkdirTemp("", "keys")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "audit.pub")
	pub := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	if err := os.WriteFile(path, []byte(hex.EncodeToString(pub)+"\n"), 0o644); err != nil {
		fmt.Println(err)
		return
	}
	keys, err := client.ReadKeys(path)
	fmt.Println(len(keys), err)
	// Output: 1 <nil>
}

// The chain rule by hand: hash = SHA-256(prev_hash ‖ body), from the zero hash. A body
// altered afterwards breaks the chain at its seq.
func ExampleVerifyMessages() {
	var msgs []stream.Message
	prev := make([]byte, sha256.Size)
	for seq := uint64(1); seq <= 2; seq++ {
		body := fmt.Sprintf(`{"request":"r%d","id":"p%d"}`, seq, seq)
		h := sha256.Sum256(append(append([]byte(nil), prev...), body...))
		v, err := json.Marshal(map[string]any{"seq": seq, "prev_hash": hex.EncodeToString(prev), "hash": hex.EncodeToString(h[:]), "body": body})
		if err != nil {
			fmt.Println(err)
			return
		}
		msgs = append(msgs, stream.Message{Topic: "cairn.audits", Offset: int64(seq - 1), Value: v})
		prev = h[:]
	}
	rep := client.VerifyMessages(msgs, nil, nil)
	fmt.Println(rep.OK, rep.Records, rep.Signatures)

	msgs[1].Value = []byte(strings.Replace(string(msgs[1].Value), `\"p2\"`, `\"p9\"`, 1))
	rep = client.VerifyMessages(msgs, nil, nil)
	fmt.Println(rep.OK, *rep.FirstBadSeq)
	// Output:
	// true 2 not checked: no trusted key
	// false 2
}

func ExampleVerifyStore() {
	rep, err := client.VerifyStore(stoppedDataDir()) // a stopped daemon that deleted one point
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rep.OK, rep.Records, len(rep.Head))
	// Output: true 1 64
}

func ExampleExportStored() {
	dir, cfg := stoppedDataDir(), stoppedConfig() // the daemon's directory and configuration
	e, err := client.ExportStored(cfg, dir, 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	deleted := false
	for _, l := range e.Landmarks {
		deleted = deleted || l.ID == "p1"
	}
	fmt.Println(e.Arch, "lists the deleted p1:", deleted)
	// Output: mlp:4-16-4 lists the deleted p1: false
}

func ExampleCheckStore() {
	rep, err := client.CheckStore(stoppedDataDir(), time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rep.OK, rep.Keys["points"])
	// Output: true 39
}
