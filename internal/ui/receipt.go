package ui

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"

	"github.com/cairnhq/cairn/internal/receipt"
)

// Receipts is what a Source also implements to serve /ui/erasure/REQ, the erasure
// receipt of a request (package receipt): the daemon builds it from the audit topic,
// checked against its own state. A Source without it answers that path 404.
type Receipts interface {
	// Receipt is the receipt of request, or an error matching receipt.ErrNotFound when
	// no audit record answers it.
	Receipt(ctx context.Context, request string) (*receipt.Receipt, error)
}

// erasure serves /ui/erasure/REQ.
func (h *Handler) erasure(w http.ResponseWriter, r *http.Request) {
	rs, ok := h.src.(Receipts)
	if !ok {
		http.NotFound(w, r)
		return
	}
	req := r.PathValue("req")
	rc, err := rs.Receipt(r.Context(), req)
	switch {
	case errors.Is(err, receipt.ErrNotFound):
		w.WriteHeader(http.StatusNotFound)
		h.render(w, "receipt-missing.html", req)
	case err != nil:
		h.log.Error().Err(err).Str("request", req).Msg("ui: erasure receipt")
		http.Error(w, "the receipt cannot be made: "+err.Error(), http.StatusServiceUnavailable)
	default:
		h.render(w, "receipt.html", rc)
	}
}

// WriteReceipt writes r as one self-contained HTML document: the receipt page with the
// UI's stylesheet inline, print rules included (A4, no navigation), for a file a data
// controller keeps or prints (cairnctl audit receipt --format html).
func WriteReceipt(w io.Writer, r *receipt.Receipt) error {
	t, css, _ := parsePages()
	err := t.ExecuteTemplate(w, "receipt-file.html", struct {
		CSS template.CSS
		R   *receipt.Receipt
	}{template.CSS(css), r})
	if err != nil {
		return fmt.Errorf("ui: receipt %q: %w", r.Request, err)
	}
	return nil
}
