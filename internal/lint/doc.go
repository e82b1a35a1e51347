// Package lint holds the repository's code rules that matter as tests: package synopses
// that read as whole sentences in go doc, no issue numbers in code, one spelling per
// sentinel, no absolute path of a build machine in any tracked file, internal's layers
// and the lists of their packages in package internal's and package base's
// documentation, and links in the Markdown and the code's references to docs/ that
// name files and headings that exist. It has no code of its own; run its tests with
// go test ./internal/lint.
package lint
