package stream

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cairnhq/cairn/internal/base/rng"
	"github.com/twmb/franz-go/pkg/kfake"
)

// rngReader adapts a seeded stream to io.Reader for key generation. (Recent
// Go versions may ignore the reader and use system entropy for keys; nothing
// the test checks depends on the key's value.)
type rngReader struct{ next func() uint64 }

func (r rngReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r.next())
	}
	return len(p), nil
}

// TestTLS writes and reads through a kfake broker that serves TLS with a
// self-signed certificate, trusting it through TLSConfig.CAFile, and checks
// that a client trusting only the system roots is refused.
func TestTLS(t *testing.T) {
	const topic = "t.tls"
	r := rng.New(1, "stream/test/tls")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rngReader{r.Uint64})
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "cairn-test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rngReader{r.Uint64}, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topic),
		kfake.TLS(&tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	cfg := Config{Brokers: c.ListenAddrs(), TLS: TLSConfig{Enable: true, CAFile: caFile}}
	w, err := NewWriter(WriterConfig{Kafka: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(ctx, Message{Topic: topic, Key: []byte("k"), Value: []byte("over tls")}); err != nil {
		t.Fatalf("Write over TLS: %v", err)
	}
	rd, err := NewReader(ReaderConfig{Kafka: cfg, Topics: []string{topic}, Start: storedOffsets{}.start})
	if err != nil {
		t.Fatal(err)
	}
	got := runReader(t, rd, newCollector(1), 5*time.Second)
	if len(got) != 1 || string(got[0].Value) != "over tls" {
		t.Errorf("read %v, want one message", got)
	}

	untrusted := Config{Brokers: c.ListenAddrs(), TLS: TLSConfig{Enable: true}}
	wu, err := NewWriter(WriterConfig{Kafka: untrusted, Attempts: 2, BackoffMin: 10 * time.Millisecond, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer wu.Close()
	if err := wu.Write(ctx, Message{Topic: topic, Key: []byte("k"), Value: []byte("x")}); err == nil {
		t.Error("Write trusting only system roots succeeded against a self-signed broker")
	}
}
