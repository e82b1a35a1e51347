// Package serving is what answers queries and audits deletions on a fitted model, with no
// I/O: the immutable serving form of a model version (Model, built by New from an Input),
// its certified answers (Model.Answer, and Model.AnswerBatch, which gives a batch the
// same answers bit for bit while reading the exact rows once), the deletion effect of appendix D
// (Model.DeletionEffect), the masks that drop deleted landmarks at once (Model.WithMask),
// model identity (ModelID, Meta), the rebuilding of a stored version (Restore) and its
// export (NewExport).
//
// # Contracts
//
// A Model is immutable once New returns: a mask change or a new evaluation draw makes a
// new Model, so readers that loaded one never see it change and may share it across
// goroutines. Answer and AnswerBatch write only into the caller's Workspace (one per goroutine) and
// counts nothing; CountDraw counts one answer against a sketched model's draw, and is
// safe for concurrent use. Inputs are not modified; New keeps references to the slices
// and matrices of its Input, which the caller must not change afterwards.
//
// Randomness: a sketched model's evaluation draw is the named stream Settings.DrawName
// under Settings.Seed, and the deletion effect's random sets the stream
// "daemon/audit/<request>" (names kept from when this code lived in daemon, so stored
// states and audits replay byte for byte).
package serving
