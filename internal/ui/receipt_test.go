package ui

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"

	"github.com/cairnhq/cairn/internal/ingest"
	"github.com/cairnhq/cairn/internal/receipt"
)

// receiptExample, when set, is the directory the browser test writes the example
// receipt to (erasure-receipt.pdf and .html): go test ./internal/ui -run
// TestReceiptPDF -receipt-example ../../docs/ui
var receiptExample = flag.String("receipt-example", "", "write the example erasure receipt (PDF and HTML) to this directory")

// withReceipts is the fake Source with receipts.
type withReceipts struct {
	fake
	receipts map[string]*receipt.Receipt
}

func (w withReceipts) Receipt(_ context.Context, request string) (*receipt.Receipt, error) {
	if r, ok := w.receipts[request]; ok {
		return r, nil
	}
	return nil, fmt.Errorf("%w %q", receipt.ErrNotFound, request)
}

// exampleReceipt is a verified erasure of three points of one subject; with altered, its
// second record is an altered copy.
func exampleReceipt(altered bool) *receipt.Receipt {
	at := time.Date(2026, 5, 1, 9, 30, 0, 0, time.UTC)
	ts := func(p int, o int64) *ingest.Tombstone {
		return &ingest.Tombstone{Topic: "cairn.train", Partition: p, Offset: o, Policy: "compact"}
	}
	r := &receipt.Receipt{Request: "gdpr-2026-0117", Kind: receipt.KindErasure,
		SubjectHash: "9f2c41d07be35a1186c0fd2e7a94b3c5d61e08f7a2b94c3d5e6f708192a3b4c5",
		Requested:   at, Applied: at.Add(40 * time.Millisecond), Completed: at.Add(2300 * time.Millisecond), Source: "cairn.erasures/1/52",
		Erased: receipt.Erased{
			Points: []receipt.Point{{ID: "cust-42-a", WasLandmark: true, Tombstone: ts(0, 1207)},
				{ID: "cust-42-b", Tombstone: ts(1, 1190)}, {ID: "cust-42-c", PoolLandmark: true, Tombstone: ts(1, 1191)}},
			Store: "3 points about the subject removed from the state file, with their pool records and subject index entries, in the transaction that applied the request; the subject is blocked: its later upserts are refused until an unblock",
			Slots: "the raw inputs of 3 points about the subject zeroed and synced in their slot files after that transaction committed, before any later output was published",
			Topics: []receipt.Tombstones{{Topic: "cairn.train", Partition: 0, Offsets: []int64{1207}, Policy: "compact"},
				{Topic: "cairn.train", Partition: 1, Offsets: []int64{1190, 1191}, Policy: "compact"}},
			ModelBefore: 7, ModelAfter: 8, ModelAfterID: "5be0c2a9d4e1f3a7b6c8d9e0f1a2b3c4", Landmarks: 1},
		Records: []receipt.Record{{Seq: 12, Hash: "c0ffee1d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809",
			PrevHash: "ab01cd23ef4567890123456789abcdef0123456789abcdef0123456789abcdef", KeyID: "4be1c0de9a7f3b21",
			Where: "cairn.audits/2@11", Copies: 1, HashOK: true, Signature: "verified", InChain: true, OK: true}},
		Chain:     receipt.Chain{Source: "kafka:cairn.audits", Records: 12, Head: "c0ffee1d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f809", OK: true, Signatures: "verified"},
		Verified:  true,
		Problems:  []string{},
		CheckedBy: "cairnctl audit receipt: the audit topic, signatures against the pinned key 4be1c0de9a7f3b21",
		Reverify: []string{"cairnctl audit key --http 127.0.0.1:8080 > audit-key.json",
			"cairnctl audit verify --brokers 127.0.0.1:9092 --key audit-key.json",
			"cairnctl audit receipt --request gdpr-2026-0117 --brokers 127.0.0.1:9092 --key audit-key.json --format html > receipt.html"},
	}
	if altered {
		bad := r.Records[0]
		bad.Where, bad.HashOK, bad.OK = "cairn.audits/2@30", false, false
		bad.Problem = "its hash is not SHA-256 of its prev_hash and body: the record was altered"
		r.Records = append(r.Records, bad)
		r.Verified = false
		r.Problems = []string{"record seq 12 at cairn.audits/2@30: " + bad.Problem,
			"the topic holds 2 different records with seq 12 for this request"}
	}
	return r
}

// TestReceiptPage: /ui/erasure/REQ shows the subject's hash, the times, the tombstones
// and the commands to check again; an altered record makes it say it does not verify;
// an unknown request is 404, and so is the path on a Source without receipts.
func TestReceiptPage(t *testing.T) {
	src := withReceipts{fake: newFake(), receipts: map[string]*receipt.Receipt{
		"gdpr-2026-0117": exampleReceipt(false), "gdpr-bad": exampleReceipt(true)}}
	src.receipts["gdpr-bad"].Request = "gdpr-bad"
	h := New(src, Shape{}, zerolog.Nop())
	res, body := serve(t, h, "GET", "/ui/erasure/gdpr-2026-0117")
	if res.StatusCode != 200 || res.Header.Get("Content-Security-Policy") != CSP {
		t.Fatalf("GET receipt: %d, CSP %q", res.StatusCode, res.Header.Get("Content-Security-Policy"))
	}
	for _, want := range []string{"9f2c41d07be35a1186c0fd2e7a94b3c5d61e08f7a2b94c3d5e6f708192a3b4c5", "1190, 1191",
		"cairnctl audit verify --brokers", "Verified:", "2026-05-01 09:30:02 UTC", "cust-42-c", "version 8"} {
		if !strings.Contains(body, want) {
			t.Errorf("receipt page lacks %q", want)
		}
	}
	if _, body := serve(t, h, "GET", "/ui/erasure/gdpr-bad"); !strings.Contains(body, "Does not verify") || !strings.Contains(body, "2 different records with seq 12") {
		t.Errorf("altered receipt does not say so:\n%s", body)
	}
	if res, _ := serve(t, h, "GET", "/ui/erasure/nope"); res.StatusCode != 404 {
		t.Errorf("unknown request: %d, want 404", res.StatusCode)
	}
	if res, _ := serve(t, New(newFake(), Shape{}, zerolog.Nop()), "GET", "/ui/erasure/gdpr-2026-0117"); res.StatusCode != 404 {
		t.Errorf("source without receipts: %d, want 404", res.StatusCode)
	}
}

// TestWriteReceipt: the file form carries the stylesheet inline, print rules included,
// and refers to nothing outside itself.
func TestWriteReceipt(t *testing.T) {
	var b bytes.Buffer
	if err := WriteReceipt(&b, exampleReceipt(false)); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	if !strings.Contains(s, "<style>") || !strings.Contains(s, "@media print") || strings.Contains(s, `href="/ui/static`) {
		t.Errorf("standalone receipt: inline style %v, print rules %v, external stylesheet %v",
			strings.Contains(s, "<style>"), strings.Contains(s, "@media print"), strings.Contains(s, `href="/ui/static`))
	}
}

// TestReceiptPDF loads the receipt page from the handler over HTTP in headless
// Chromium, fails on any console warning or error (a CSP violation included), and
// prints it to PDF on A4 (the print stylesheet's page size).
func TestReceiptPDF(t *testing.T) {
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		t.Skip("no Chromium on PATH")
	}
	src := withReceipts{fake: newFake(), receipts: map[string]*receipt.Receipt{"gdpr-2026-0117": exampleReceipt(false)}}
	srv := httptest.NewServer(New(src, Shape{}, zerolog.Nop()))
	defer srv.Close()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU)
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelA()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	var (
		mu       sync.Mutex
		problems []string
		wg       sync.WaitGroup
	)
	msgs := chromedp.Console(ctx)
	wg.Go(func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleType("warning") || m.Type == chromedp.ConsoleType("error") || m.Type == chromedp.ConsoleException {
				mu.Lock()
				problems = append(problems, fmt.Sprintf("%s: %s", m.Type, m.Text))
				mu.Unlock()
			}
		}
	})
	defer wg.Wait()
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(srv.URL+"/ui/erasure/gdpr-2026-0117"), chromedp.WaitVisible(chromedp.CSS("article.receipt table.records"))); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	pdf, err := chromedp.Run(ctx, chromedp.PrintToPDF(chromedp.PDFPrintBackground(), func(p *page.PrintToPDFParams) { yes := true; p.PreferCSSPageSize = &yes }))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(pdf, []byte("%PDF-")) || len(pdf) < 10<<10 {
		t.Fatalf("PDF of %d bytes starting %q", len(pdf), pdf[:min(len(pdf), 8)])
	}
	t.Logf("receipt printed to PDF in %v: %d bytes", time.Since(start).Round(time.Millisecond), len(pdf))
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	if len(problems) > 0 {
		t.Errorf("the browser reported:\n%s", strings.Join(problems, "\n"))
	}
	mu.Unlock()
	if *receiptExample != "" {
		var html bytes.Buffer
		if err := WriteReceipt(&html, exampleReceipt(false)); err != nil {
			t.Fatal(err)
		}
		for name, b := range map[string][]byte{"erasure-receipt.pdf": pdf, "erasure-receipt.html": html.Bytes()} {
			if err := os.WriteFile(filepath.Join(*receiptExample, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}
