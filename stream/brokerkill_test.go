package stream

import (
	"bufio"
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// brokerChildEnv, set to a directory, makes TestEmbeddedBrokerKill9 run as the child:
// an embedded broker on that directory, written to and compacted until it is killed.
const brokerChildEnv = "TEST_CAIRN_BROKER_CHILD"

const killTopic = "t.kill"

// TestEmbeddedBrokerKill9: the embedded broker, persisting to a DataDir, is killed with
// SIGKILL at random moments while a client in its process writes keyed records
// (re-used keys and tombstones, as cairn.train gets) and compacts after every write, as
// the daemon's erasure and models publisher do. Every restart must hold at least every
// record the child reported acknowledged: the partition's end offset never goes back.
func TestEmbeddedBrokerKill9(t *testing.T) {
	if dir := os.Getenv(brokerChildEnv); dir != "" {
		brokerChild(t, dir)
		return
	}
	if testing.Short() {
		t.Skip("kills a child process 25 times")
	}
	const kills = 25
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(9, 9))
	var acked int64 // the highest end offset a child reported after an acknowledged write
	for k := range kills {
		cmd := exec.Command(os.Args[0], "-test.run=^TestEmbeddedBrokerKill9$", "-test.v")
		cmd.Env = append(os.Environ(), brokerChildEnv+"="+dir, "TEST_CAIRN_BROKER_SEED="+strconv.Itoa(k))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 1024)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		killAt := time.After(time.Duration(300+r.IntN(500)) * time.Millisecond)
		started := false
	read:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					t.Fatalf("start %d: the child exited: %v", k+1, cmd.Wait())
				}
				var end int64
				if n, _ := fmt.Sscanf(l, "started end=%d", &end); n == 1 {
					started = true
					if end < acked {
						_ = cmd.Process.Kill()
						_ = cmd.Wait()
						t.Fatalf("start %d: the partition ends at %d after a kill; %d records were acknowledged before it; files:\n%s",
							k+1, end, acked, listFiles(dir))
					}
				} else {
					acked = max(acked, ackedEnd(l))
				}
			case <-killAt:
				if started {
					break read
				}
				killAt = time.After(100 * time.Millisecond)
			}
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		for l := range lines { // acknowledgements printed before the kill count too
			acked = max(acked, ackedEnd(l))
		}
	}
	if acked == 0 {
		t.Fatal("no write was acknowledged")
	}
	t.Logf("%d kills; %d records acknowledged in all", kills, acked)
}

// ackedEnd is the end offset of a child's "acked end=N" line, else 0.
func ackedEnd(line string) int64 {
	var end int64
	if n, _ := fmt.Sscanf(line, "acked end=%d", &end); n == 1 {
		return end
	}
	return 0
}

// brokerChild is the child's side: start the broker on dir, report its end offset, then
// write and compact until killed, reporting each acknowledged end offset.
func brokerChild(t *testing.T, dir string) {
	ctx := context.Background()
	b, err := StartBroker(ctx, BrokerConfig{Addr: "127.0.0.1:0", Partitions: 1, Topics: []string{killTopic}, DataDir: dir,
		TopicConfigs: map[string]map[string]string{killTopic: {"cleanup.policy": "compact"}}})
	if err != nil {
		t.Fatal(err)
	}
	kc := Config{Brokers: []string{b.Addr()}}
	ends, err := EndOffsets(ctx, kc, killTopic)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("started end=%d\n", ends[0])
	w := newTestWriter(t, b.Addr(), nil)
	seed, _ := strconv.Atoi(os.Getenv("TEST_CAIRN_BROKER_SEED"))
	r := rand.New(rand.NewPCG(uint64(seed), 3))
	for i := 0; ; i++ {
		var msgs []Message
		for range 1 + r.IntN(20) {
			key := fmt.Appendf(nil, "k%d", r.IntN(200))
			var val []byte
			if r.IntN(8) != 0 {
				val = []byte(strings.Repeat("v", 1+r.IntN(2000)))
			}
			msgs = append(msgs, Message{Topic: killTopic, Key: key, Value: val})
		}
		if err := w.Write(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
		ends, err := EndOffsets(ctx, kc, killTopic)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Printf("acked end=%d\n", ends[0])
		if err := b.Compact(); err != nil {
			t.Fatal(err)
		}
	}
}

// listFiles lists the files under dir with their sizes, for failure messages.
func listFiles(dir string) string {
	var b strings.Builder
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fmt.Fprintf(&b, "%s %d\n", rel, info.Size())
		return nil
	})
	return b.String()
}
