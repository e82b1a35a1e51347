package fit

// The eigensolver's reduction to tridiagonal form, with its matrix-vector products on
// all cores.
//
// Dsytrd reduces the upper triangle of A to T = QᵀAQ in panels of nb columns: Dlatrd
// reduces a panel, forming each reflector's W column with a symmetric matrix-vector
// product (Dsymv) over the part of A still to reduce, then Dsyr2k updates that part.
// The Dsymv products are most of the reduction's work (at M = 512, about a tenth of
// PCI's), on one core in gonum. Here they are split by columns of the product (symv):
// each output entry gets the same operations in the same order as gonum's loop, so T
// and Q, and the eigenpairs, are mat.EigenSym's bit for bit (TestEigenSymCores). The
// rest is gonum's Dsytrd and Dlatrd step for step, upper triangle only (adapted from
// gonum v0.17.0, lapack/gonum/dsytrd.go and dlatrd.go, Copyright ©2016 The Gonum
// Authors, BSD-style licence).

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/cairnhq/cairn/internal/base/par"
)

const (
	// symvCols is symv's column chunk: each chunk costs about n multiply-adds per
	// column whatever its place (the rows above it and its own rows' right parts).
	symvCols = 64
	// symvMinN is the smallest order whose product runs on more than one goroutine
	// (about 10 µs of work below it, less than waking a second one costs).
	symvMinN = 128
)

// dsytrdUpper is gonum's Dsytrd(blas.Upper, n, a, lda, d, e, tau, work, lwork) with
// dlatrdUpper for Dlatrd; lwork must be at least 1.
func dsytrdUpper(n int, a []float64, lda int, d, e, tau, work []float64, lwork int) {
	if n == 0 {
		return
	}
	nb := lapackImpl.Ilaenv(1, "DSYTRD", "U", n, -1, -1, -1)
	nx := n
	if 1 < nb && nb < n {
		nx = max(nb, lapackImpl.Ilaenv(3, "DSYTRD", "U", n, -1, -1, -1))
		if nx < n {
			if lwork < n*nb {
				nb = max(lwork/n, 1)
				if nb < lapackImpl.Ilaenv(2, "DSYTRD", "U", n, -1, -1, -1) {
					nx = n
				}
			}
		} else {
			nx = n
		}
	} else {
		nb = 1
	}
	ldwork := nb
	bi := blas64.Implementation()
	kk := n - ((n-nx+nb-1)/nb)*nb
	for i := n - nb; i >= kk; i -= nb {
		dlatrdUpper(i+nb, nb, a, lda, e, tau, work, ldwork)
		bi.Dsyr2k(blas.Upper, blas.NoTrans, i, nb, -1, a[i:], lda, work, ldwork, 1, a, lda)
		for j := i; j < i+nb; j++ {
			a[(j-1)*lda+j] = e[j-1]
			d[j] = a[j*lda+j]
		}
	}
	lapackImpl.Dsytd2(blas.Upper, kk, a, lda, d, e, tau)
}

// dlatrdUpper is gonum's Dlatrd(blas.Upper, n, nb, a, lda, e, tau, w, ldw) with symv
// for its Dsymv(Upper, i, 1, a, lda, a[i:], lda, 0, w[iw:], ldw).
func dlatrdUpper(n, nb int, a []float64, lda int, e, tau, w []float64, ldw int) {
	bi := blas64.Implementation()
	xb, yb := make([]float64, n), make([]float64, n) // x and y = A x of symv, contiguous
	for i := n - 1; i >= n-nb; i-- {
		iw := i - n + nb
		if i < n-1 {
			bi.Dgemv(blas.NoTrans, i+1, n-i-1, -1, a[i+1:], lda, w[i*ldw+iw+1:], 1, 1, a[i:], lda)
			bi.Dgemv(blas.NoTrans, i+1, n-i-1, -1, w[iw+1:], ldw, a[i*lda+i+1:], 1, 1, a[i:], lda)
		}
		if i == 0 {
			continue
		}
		e[i-1], tau[i-1] = lapackImpl.Dlarfg(i, a[(i-1)*lda+i], a[i:], lda)
		a[(i-1)*lda+i] = 1
		xs, ys := xb[:i], yb[:i]
		for k := range i {
			xs[k] = a[k*lda+i]
		}
		symv(ys, a, lda, xs)
		for k, v := range ys {
			w[k*ldw+iw] = v
		}
		if i < n-1 {
			bi.Dgemv(blas.Trans, i, n-i-1, 1, w[iw+1:], ldw, a[i:], lda, 0, w[(i+1)*ldw+iw:], ldw)
			bi.Dgemv(blas.NoTrans, i, n-i-1, -1, a[i+1:], lda, w[(i+1)*ldw+iw:], ldw, 1, w[iw:], ldw)
			bi.Dgemv(blas.Trans, i, n-i-1, 1, a[i+1:], lda, a[i:], lda, 0, w[(i+1)*ldw+iw:], ldw)
			bi.Dgemv(blas.NoTrans, i, n-i-1, -1, w[iw+1:], ldw, w[(i+1)*ldw+iw:], ldw, 1, w[iw:], ldw)
		}
		bi.Dscal(i, tau[i-1], w[iw:], ldw)
		alpha := -0.5 * tau[i-1] * bi.Ddot(i, w[iw:], ldw, a[i:], lda)
		bi.Daxpy(i, alpha, a[i:], lda, w[iw:], ldw)
	}
}

// symv writes y = A x for the symmetric n×n A (n = len(x) = len(y)) held in the upper
// triangle of a (stride lda): gonum's Dsymv(Upper, n, 1, a, lda, x, 1, 0, y, 1), which
// is the loop
//
//	y = 0
//	for i := range n {
//		s := x[i]·a[i][i]
//		for j := i+1; j < n; j++ { s += x[j]·a[i][j]; y[j] += x[i]·a[i][j] }
//		y[i] += s
//	}
//
// with the entries of y in chunks of symvCols side by side (internal/base/par). The
// chunk [lo, hi) runs the loop's rows i < hi in the same order, keeping the updates of
// its own entries: y[j] still gets the rows i < j one after the other, then its own
// row's sum, so every entry has the loop's bits. (With α = 1, gonum's x[i]·α and α·s
// are x[i] and s exactly.)
func symv(y, a []float64, lda int, x []float64) {
	n := len(x)
	workers := 1
	if n >= symvMinN {
		workers = par.Workers(n, symvCols)
	}
	if n == 1 {
		y[0] = 0
		y[0] += a[0] * x[0] // gonum's n = 1 case: alpha·a[0]·x[0]
		return
	}
	par.For(n, symvCols, workers, func(_, lo, hi int) {
		clear(y[lo:hi])
		for i := range lo {
			xv := x[i]
			row := a[i*lda : i*lda+hi]
			for j := lo; j < hi; j++ {
				y[j] += xv * row[j]
			}
		}
		for i := lo; i < hi; i++ {
			xv := x[i]
			row := a[i*lda : i*lda+n]
			s := x[i] * row[i]
			for j := i + 1; j < hi; j++ {
				v := row[j]
				s += x[j] * v
				y[j] += xv * v
			}
			for j := hi; j < n; j++ {
				s += x[j] * row[j]
			}
			y[i] += s
		}
	})
}
