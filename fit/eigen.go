package fit

// The symmetric eigensolver of the spectral initializers, with the eigenvector
// rotations on all cores.
//
// mat.EigenSym runs LAPACK's Dsyev (gonum's lapack/gonum): Dsytrd reduces A to a
// tridiagonal T = QᵀAQ, Dorgtr forms Q, and Dsteqr finds T's eigenvalues by implicit QL
// and QR sweeps, applying each sweep's plane rotations to the columns of Z = Q (Dlasr).
// At M = 512 those rotations are nine tenths of the work. The sweeps' rotations depend
// on T alone, never on Z, and every row of Z gets the same rotations independently of
// the others, so here each sweep's rotations are only recorded, and the recorded sweeps
// are applied at the end (or whenever the record reaches Z's size) to blocks of Z's rows
// side by side (internal/base/par), each block by gonum's own Dlasr, sweep after sweep
// in the order they were made: one fork and join for all the sweeps instead of one per
// sweep, and each block of rows stays in cache through all of them. The rest is gonum's
// Dsyev and Dsteqr step for step (adapted from gonum v0.17.0, lapack/gonum/dsyev.go and
// dsteqr.go, Copyright ©2016 The Gonum Authors, BSD-style licence), so every row of Z
// gets Dlasr's operations in Dsteqr's order and the values and vectors are
// mat.EigenSym's bit for bit (TestEigenSymCores).

import (
	"math"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
	"gonum.org/v1/gonum/lapack"
	"gonum.org/v1/gonum/lapack/gonum"
	"gonum.org/v1/gonum/mat"

	"github.com/cairnhq/cairn/internal/base/par"
)

// lapackImpl is the LAPACK mat.EigenSym uses (lapack64's default; cairn installs no
// other).
var lapackImpl gonum.Implementation

// Machine constants of gonum's LAPACK (lapack/gonum/lapack.go).
const (
	dlamchE = 0x1p-53     // relative machine precision
	dlamchP = 2 * dlamchE // precision times the base
	dlamchS = 0x1p-1022   // safe minimum: its reciprocal does not overflow
	// rotRows is the rows of Z per block of the recorded sweeps. Dlasr walks a block
	// column by column, and at M = 512 Z's rows lie 4 KiB apart, in the same sets of
	// the L1 cache: with 8 rows (16 lines per rotation, 32 KiB a block) PCI's whole
	// eigensolver at M = 512 took 0.24 s on one core of the build machine, with 32 rows
	// 1.2 s.
	rotRows = 8
	// rotMinWork is the fewest entries the recorded sweeps update on more than one
	// goroutine (a few tens of microseconds of work).
	rotMinWork = 1 << 15
	maxIter    = 30 // Dsteqr's sweeps per eigenvalue before it gives up
	scaleDn    = 1  // Dsteqr's block scaled down (its norm above ssfmax)
	scaleUp    = 2  // and up (below ssfmin)
)

// eigenSym returns the eigenvalues of s in ascending order and the orthonormal
// eigenvectors in the columns of z, or ok false where the QL/QR iteration did not
// converge: mat.EigenSym.Factorize(s, true) with its Values and VectorsTo, bit for bit.
// s is not modified.
func eigenSym(s *mat.SymDense) (w []float64, z *mat.Dense, ok bool) {
	n := s.SymmetricDim()
	sd := mat.NewSymDense(n, nil)
	sd.CopySym(s)
	a, lda := sd.RawSymmetric().Data, sd.RawSymmetric().Stride
	w = make([]float64, n)
	if !dsyev(n, a, lda, w) {
		return nil, nil, false
	}
	return w, mat.NewDense(n, n, a), true
}

// dsyev is gonum's Dsyev(EVCompute, Upper, n, a, lda, w, work, lwork) with the optimal
// lwork that mat.EigenSym queries, Dsytrd replaced by dsytrdUpper (sytrd.go) and Dsteqr
// by steqr.
func dsyev(n int, a []float64, lda int, w []float64) bool {
	nb := lapackImpl.Ilaenv(1, "DSYTRD", "U", n, -1, -1, -1)
	lwork := max(1, (nb+2)*n)
	work := make([]float64, lwork)
	if n == 1 {
		w[0], a[0] = a[0], 1
		return true
	}
	smlnum := dlamchS / dlamchP
	rmin, rmax := math.Sqrt(smlnum), math.Sqrt(1/smlnum)
	// Scale the matrix to the allowable range, if necessary.
	anrm := lapackImpl.Dlansy(lapack.MaxAbs, blas.Upper, n, a, lda, work)
	scaled, sigma := false, 0.0
	if anrm > 0 && anrm < rmin {
		scaled, sigma = true, rmin/anrm
	} else if anrm > rmax {
		scaled, sigma = true, rmax/anrm
	}
	if scaled {
		lapackImpl.Dlascl(lapack.UpperTri, 0, 0, 1, sigma, n, n, a, lda)
	}
	inde, indtau, indwork := 0, n, 2*n
	llwork := lwork - indwork
	dsytrdUpper(n, a, lda, w, work[inde:], work[indtau:], work[indwork:], llwork)
	lapackImpl.Dorgtr(blas.Upper, n, a, lda, work[indtau:], work[indwork:], llwork)
	st := &steqr{n: n, d: w, e: work[inde:], z: a, ldz: lda, work: work[indtau:], nmaxit: n * maxIter}
	if !st.run() {
		return false
	}
	if scaled {
		blas64.Implementation().Dscal(n, 1/sigma, w, 1)
	}
	return true
}

// steqr is gonum's Dsteqr(EVOrig, n, d, e, z, ldz, work) in progress: the tridiagonal's
// diagonal d (its eigenvalues at the end) and off-diagonal e, the eigenvectors z, the
// current sweep's rotations in work, the sweeps recorded but not yet applied to z (cs,
// sweeps), the sweep count and the scaling state, which, as in gonum's, carries over
// from one unreduced block to the next.
type steqr struct {
	n, ldz       int
	d, e, z      []float64
	work         []float64
	cs           []float64 // the recorded sweeps' cosines and sines
	sweeps       []sweep
	jtot, nmaxit int
	iscale       int
}

// sweep is one recorded Dlasr(Right, Variable, direct) call on the mm columns of z from
// col on: its cosines are cs[at : at+mm−1] and its sines cs[at+mm−1 : at+2(mm−1)].
type sweep struct {
	direct      lapack.Direct
	col, mm, at int
}

// Dsteqr's thresholds.
const (
	eps2   = dlamchE * dlamchE
	safmin = dlamchS
)

var (
	ssfmax = math.Sqrt(1/safmin) / 3
	ssfmin = math.Sqrt(safmin) / eps2
)

// run is Dsteqr's outer loop: it splits T into unreduced blocks, scales each into
// range, reduces it by QL or QR sweeps, undoes the scaling, and at the end sorts the
// eigenpairs by increasing eigenvalue. It reports whether every off-diagonal vanished.
func (st *steqr) run() bool {
	n, d, e := st.n, st.d, st.e
	l1 := 0
	for {
		if l1 > n-1 {
			st.apply()
			st.sort()
			return true
		}
		if l1 > 0 {
			e[l1-1] = 0
		}
		m := st.split(l1)
		l, lend := l1, m
		lsv, lendsv := l, lend
		l1 = m + 1
		if lend == l {
			continue
		}
		// Scale the submatrix in rows and columns l to lend.
		anorm := lapackImpl.Dlanst(lapack.MaxAbs, lend-l+1, d[l:], e[l:])
		switch {
		case anorm == 0:
			continue
		case anorm > ssfmax:
			st.iscale = scaleDn
			st.scale(anorm, ssfmax, l, lend)
		case anorm < ssfmin:
			st.iscale = scaleUp
			st.scale(anorm, ssfmin, l, lend)
		}
		// Choose between QL and QR.
		if math.Abs(d[lend]) < math.Abs(d[l]) {
			lend, l = lsv, lendsv
		}
		if lend > l {
			st.ql(l, lend)
		} else {
			st.qr(l, lend)
		}
		switch st.iscale {
		case scaleDn:
			st.scale(ssfmax, anorm, lsv, lendsv)
		case scaleUp:
			st.scale(ssfmin, anorm, lsv, lendsv)
		}
		if st.jtot >= st.nmaxit {
			break
		}
	}
	st.apply()
	for i := 0; i < n-1; i++ {
		if e[i] != 0 {
			return false
		}
	}
	return true
}

// split returns the end m ≥ l1 of the unreduced block starting at l1: the first m whose
// off-diagonal is negligible (set to 0 then), or n−1.
func (st *steqr) split(l1 int) int {
	d, e := st.d, st.e
	m := l1
	for ; m < st.n-1; m++ {
		test := math.Abs(e[m])
		if test == 0 {
			break
		}
		if test <= (math.Sqrt(math.Abs(d[m]))*math.Sqrt(math.Abs(d[m+1])))*dlamchE {
			e[m] = 0
			break
		}
	}
	return m
}

// scale multiplies d[l..lend] and e[l..lend−1] by to/from (Dlascl, the vectors seen as
// one-column matrices).
func (st *steqr) scale(from, to float64, l, lend int) {
	lapackImpl.Dlascl(lapack.General, 0, 0, from, to, lend-l+1, 1, st.d[l:], 1)
	lapackImpl.Dlascl(lapack.General, 0, 0, from, to, lend-l, 1, st.e[l:], 1)
}

// rotate records the plane rotations c = work[at:], s = work[n−1+at:] for the mm
// columns of z from col on (Dlasr Right, Variable, direct), to be applied by apply;
// when the record holds as many entries as z, it applies them first.
func (st *steqr) rotate(direct lapack.Direct, at, col, mm int) {
	n := st.n
	if len(st.cs)+2*(mm-1) > max(n*n, 2*(n-1)) {
		st.apply()
	}
	st.sweeps = append(st.sweeps, sweep{direct: direct, col: col, mm: mm, at: len(st.cs)})
	st.cs = append(st.cs, st.work[at:at+mm-1]...)
	st.cs = append(st.cs, st.work[n-1+at:n-1+at+mm-1]...)
}

// apply applies the recorded sweeps to z in the order they were recorded, in blocks of
// rotRows rows side by side when they update at least rotMinWork entries, and clears
// the record. It is
//
//	for _, w := range sweeps { Dlasr(Right, Variable, w.direct, n, w.mm, c, s, z[w.col:], ldz) }
//
// with the rows split: Dlasr updates each row of z from that row alone, so every row
// gets the same operations in the same order whatever the blocks.
func (st *steqr) apply() {
	n, ldz := st.n, st.ldz
	work := 0
	for _, w := range st.sweeps {
		work += n * w.mm
	}
	workers := 1
	if work >= rotMinWork {
		workers = par.Workers(n, rotRows)
	}
	par.For(n, rotRows, workers, func(_, lo, hi int) {
		for _, w := range st.sweeps {
			c, s := st.cs[w.at:w.at+w.mm-1], st.cs[w.at+w.mm-1:w.at+2*(w.mm-1)]
			lapackImpl.Dlasr(blas.Right, lapack.Variable, w.direct, hi-lo, w.mm, c, s, st.z[lo*ldz+w.col:], ldz)
		}
	})
	st.cs, st.sweeps = st.cs[:0], st.sweeps[:0]
}

// ql reduces the block l..lend (l < lend) by implicit QL sweeps, as Dsteqr does, until
// its eigenvalues are found or the sweeps run out.
func (st *steqr) ql(l, lend int) {
	n, d, e, work := st.n, st.d, st.e, st.work
	for {
		m := lend
		if l != lend { // look for a small subdiagonal element
			for m = l; m < lend; m++ {
				if v := math.Abs(e[m]); v*v <= (eps2*math.Abs(d[m]))*math.Abs(d[m+1])+safmin {
					break
				}
			}
		}
		if m < lend {
			e[m] = 0
		}
		p := d[l]
		if m == l { // an eigenvalue found
			if l++; l > lend {
				return
			}
			continue
		}
		if m == l+1 { // a 2×2 block: its eigensystem directly
			d[l], d[l+1], work[l], work[n-1+l] = lapackImpl.Dlaev2(d[l], e[l], d[l+1])
			st.rotate(lapack.Backward, l, l, 2)
			e[l] = 0
			if l += 2; l > lend {
				return
			}
			continue
		}
		if st.jtot == st.nmaxit {
			return
		}
		st.jtot++
		// Form the shift, then the sweep's rotations, saved in work.
		g := (d[l+1] - p) / (2 * e[l])
		r := lapackImpl.Dlapy2(g, 1)
		g = d[m] - p + e[l]/(g+math.Copysign(r, g))
		s, c := 1.0, 1.0
		p = 0.0
		for i := m - 1; i >= l; i-- {
			f := s * e[i]
			b := c * e[i]
			c, s, r = lapackImpl.Dlartg(g, f)
			if i != m-1 {
				e[i+1] = r
			}
			g = d[i+1] - p
			r = (d[i]-g)*s + 2*c*b
			p = s * r
			d[i+1] = g + p
			g = c*r - b
			work[i], work[n-1+i] = c, -s
		}
		st.rotate(lapack.Backward, l, l, m-l+1)
		d[l] -= p
		e[l] = g
	}
}

// qr reduces the block lend..l (lend < l) by implicit QR sweeps, as Dsteqr does.
func (st *steqr) qr(l, lend int) {
	n, d, e, work := st.n, st.d, st.e, st.work
	for {
		m := lend
		if l != lend { // look for a small superdiagonal element
			for m = l; m > lend; m-- {
				if v := math.Abs(e[m-1]); v*v <= (eps2*math.Abs(d[m])*math.Abs(d[m-1]) + safmin) {
					break
				}
			}
		}
		if m > lend {
			e[m-1] = 0
		}
		p := d[l]
		if m == l { // an eigenvalue found
			if l--; l < lend {
				return
			}
			continue
		}
		if m == l-1 { // a 2×2 block
			d[l-1], d[l], work[m], work[n-1+m] = lapackImpl.Dlaev2(d[l-1], e[l-1], d[l])
			st.rotate(lapack.Forward, m, l-1, 2)
			e[l-1] = 0
			if l -= 2; l < lend {
				return
			}
			continue
		}
		if st.jtot == st.nmaxit {
			return
		}
		st.jtot++
		g := (d[l-1] - p) / (2 * e[l-1])
		r := lapackImpl.Dlapy2(g, 1)
		g = d[m] - p + (e[l-1])/(g+math.Copysign(r, g))
		s, c := 1.0, 1.0
		p = 0.0
		for i := m; i < l; i++ {
			f := s * e[i]
			b := c * e[i]
			c, s, r = lapackImpl.Dlartg(g, f)
			if i != m {
				e[i-1] = r
			}
			g = d[i] - p
			r = (d[i+1]-g)*s + 2*c*b
			p = s * r
			d[i] = g + p
			g = c*r - b
			work[i], work[n-1+i] = c, s
		}
		st.rotate(lapack.Forward, m, m, l-m+1)
		d[l] -= p
		e[l-1] = g
	}
}

// sort orders the eigenvalues increasingly by Dsteqr's selection sort, swapping the
// columns of z with them.
func (st *steqr) sort() {
	n, d, z, ldz := st.n, st.d, st.z, st.ldz
	for ii := 1; ii < n; ii++ {
		i := ii - 1
		k, p := i, d[i]
		for j := ii; j < n; j++ {
			if d[j] < p {
				k, p = j, d[j]
			}
		}
		if k != i {
			d[k], d[i] = d[i], p
			for r := range n {
				z[r*ldz+i], z[r*ldz+k] = z[r*ldz+k], z[r*ldz+i]
			}
		}
	}
}
