// Package certify is part of cairn; see DESIGN.md section 2 for its role.
// Its contracts are written here as the package grows.
package certify
