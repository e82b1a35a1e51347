// Package onnxpb holds the Go types of the ONNX protobuf schema: onnx.proto of ONNX 1.12
// (IR version 8, proto2, Apache-2.0, copied unchanged beside this file) compiled by
// protoc-gen-go, so that a build needs no protoc.
//
// Regenerate with protoc and google.golang.org/protobuf/cmd/protoc-gen-go (the version of
// google.golang.org/protobuf in go.mod) on PATH; the M option places the schema, whose
// proto package is "onnx", in this Go package without editing the copied file.
package onnxpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go_opt=Monnx.proto=github.com/cairnhq/cairn/entk/onnx/onnxpb onnx.proto
