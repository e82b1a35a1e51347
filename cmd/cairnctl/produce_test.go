package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestProduceStopsOnCancel: produce blocked on a broker that never answers returns
// soon after its context ends, reports the rows acknowledged so far (none) and fails.
func TestProduceStopsOnCancel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() { // accept and never answer; closed with ln and the test
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	var out, errb bytes.Buffer
	start := time.Now()
	code := run(ctx, []string{"produce", "--brokers", ln.Addr().String(), "--data", "csv:" + writeCSV(t, 20, 3), "--batch", "5"}, nil, &out, &errb)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("produce took %v after cancel, want prompt return", took)
	}
	var rep produceReport
	if code != 1 || json.Unmarshal(out.Bytes(), &rep) != nil || rep.Produced != 0 || !strings.Contains(errb.String(), "stopped after 0 of 20 rows") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1, a report of 0 rows and the stop named", code, out.String(), errb.String())
	}
}
