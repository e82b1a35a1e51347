package client_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cairnhq/cairn/client"
	"github.com/cairnhq/cairn/stream"
)

// TestConcurrentAsks: requests asked at once on one client, by id and by vector, each
// get the answer to their own request, and deleting while others ask returns its audit.
func TestConcurrentAsks(t *testing.T) {
	c, err := client.New(client.Config{Kafka: stream.Config{Brokers: brokers()}, AnswerTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n+1)
	for i := range n {
		wg.Go(func() {
			q := stream.QueryEvent{Request: fmt.Sprintf("conc-%d", i), K: 1 + i%3}
			if i%2 == 0 {
				q.ID = fmt.Sprintf("p%d", 20+i)
			} else {
				q.X = examplePoint(20 + i).X
			}
			a, err := c.Ask(ctx, q)
			switch {
			case err != nil:
				errs[i] = err
			case a.Request != q.Request || len(a.TopK) != q.K:
				errs[i] = fmt.Errorf("request %s: answer to %s with %d landmarks, want %d", q.Request, a.Request, len(a.TopK), q.K)
			}
		})
	}
	wg.Go(func() {
		a, err := c.DeleteAndWait(ctx, "p39", "conc-delete")
		if err == nil && (a.Request != "conc-delete" || a.ID != "p39" || !a.Known) {
			err = fmt.Errorf("audit %s", a.Raw)
		}
		errs[n] = err
	})
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
