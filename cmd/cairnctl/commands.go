package main

import (
	"context"
	"io"

	"github.com/cairnhq/cairn/internal/cli"
)

// root is cairnctl's command tree. Each leaf's Flags function (in the file of its
// command) registers the flags and returns the function that runs it.
func root() *cli.Command {
	return &cli.Command{
		Name:     "cairnctl",
		Synopsis: "cairn's operator CLI: offline checks and tools, and the commands that talk to a daemon",
		Subcommands: []*cli.Command{
			{Name: "verify", Synopsis: "checks of the error model and the certificates built on it", Subcommands: []*cli.Command{
				{Name: "srht", Synopsis: "Monte-Carlo variance of <Su,Sv> over SRHT draws vs Thm. srht-exact and the JL rate", Flags: verifySRHTCmd},
				{Name: "two-axis", Synopsis: "Var K_{h,s} on a backbone pair vs Prop. two-axis", Flags: verifyTwoAxisCmd},
				{Name: "certificate", Synopsis: "soundness count of Thm. topk against the exact kernel", Flags: verifyCertificateCmd},
				{Name: "product-rule", Synopsis: "measured vs predicted Var(KΩ) (eq. product-rule)", Flags: verifyProductRuleCmd},
			}},
			{Name: "entk", Synopsis: "eNTK tools", Subcommands: []*cli.Command{
				{Name: "kernel", Synopsis: "the eNTK Gram matrix of the rows of a CSV: exact (--exact) or sketched (--h, --s)", Flags: entkKernelCmd},
			}},
			{Name: "select", Synopsis: "landmark selection per view, budget curve and d_eff", Flags: selectCmd},
			{Name: "fit", Synopsis: "stage-2 coefficient fit, k-NN and linear-probe evaluation, ω statistics", Flags: fitCmd},
			{Name: "explain", Synopsis: "certified top-K attribution of one test row, with the fit floor", Flags: explainCmd},
			{Name: "train", Synopsis: "supervised training of an entk backbone, written as safetensors", Flags: trainCmd},
			{Name: "validate", Synopsis: "cairn's rankings against retraining: LDS on seeded halves (network and encoder), per-query deletion test, TRAK and random baselines", Flags: validateCmd},
			{Name: "audit", Synopsis: "the identifiability table of the paper's appendix D", Flags: auditCmd, Subcommands: []*cli.Command{
				{Name: "verify", Synopsis: "walk the audit hash chain of cairn.audits or of a stopped daemon's file", Flags: auditVerifyCmd},
				{Name: "key", Synopsis: "the running daemon's audit signing key (public half), to pin for audit verify --key", Flags: auditKeyCmd},
				{Name: "receipt", Synopsis: "the erasure receipt of a request: what was erased and from where, its audit records checked (json or html)", Flags: auditReceiptCmd},
			}},
			{Name: "produce", Synopsis: "stream a data set into cairn.train as upserts", Flags: produceCmd},
			{Name: "query", Synopsis: "ask a certified top-K; with --wait print the attribution", Flags: queryCmd},
			{Name: "delete", Synopsis: "delete a point; with --wait print its audit", Flags: deleteCmd},
			{Name: "erase", Synopsis: "erase a data subject's points (or --unblock the subject); with --wait print the audit", Flags: eraseCmd},
			{Name: "subject", Synopsis: "data subjects", Subcommands: []*cli.Command{
				{Name: "hash", Synopsis: "the keyed hash by which cairn names a subject (from the daemon's subject.key)", Flags: subjectHashCmd},
			}},
			{Name: "status", Synopsis: "the daemon's /status", Flags: statusCmd},
			{Name: "model", Synopsis: "served models", Subcommands: []*cli.Command{
				{Name: "export", Synopsis: "print a model version from a running daemon or a stopped daemon's file", Flags: modelExportCmd},
				{Name: "inspect", Args: "FILE.onnx", Synopsis: "what cairn sees in an ONNX export: operators, input shape, parameters, coverage under --params, warnings and the export recipe", Flags: modelInspectCmd},
			}},
			{Name: "check", Synopsis: "check a stopped daemon's state file: pages, records, audit chain", Flags: checkCmd},
			{Name: "demo", Synopsis: "run the daemon and its main job in process (NDJSON events, then a summary)", Flags: demoCmd},
			{Name: "reproduce", Synopsis: "regenerate a table of the paper from cairn's code, the paper's number beside cairn's in every cell", Flags: reproduceCmd},
			{Name: "bench", Synopsis: "ingest rate, query latency, certified rate and resident memory of an in-process daemon", Flags: benchCmd},
			{Name: "bench-scale", Synopsis: "a deployment of cairnd processes: replica query throughput, a replica killed under load, a standby's takeover", Flags: benchScaleCmd},
		},
	}
}

// run runs cairnctl with args (without the program name) and returns its exit status.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return root().Main(ctx, args, cli.Stdio{In: stdin, Out: stdout, Err: stderr})
}
