// AVX2/FMA kernels for amd64; see simd_amd64.go for their contracts and simd.go for the
// portable loops they compute. Every function here is called only when hasAVX2FMA is
// true and only with the lengths its Go wrapper checked.

#include "textflag.h"

// func fmaRows2x16(zp, zq, cp, cq, w []float64, ldw int)
//
// For i in 0..15: zp[i] += Σ_k cp[k]·w[k·ldw+i] and zq[i] += Σ_k cq[k]·w[k·ldw+i],
// k = 0, 1, …, len(cp)−1 in order, one fused multiply-add per term.
TEXT ·fmaRows2x16(SB), NOSPLIT, $0-128
	MOVQ zp_base+0(FP), DI
	MOVQ zq_base+24(FP), R8
	MOVQ cp_base+48(FP), SI
	MOVQ cp_len+56(FP), CX
	MOVQ cq_base+72(FP), R9
	MOVQ w_base+96(FP), DX
	MOVQ ldw+120(FP), R10
	SHLQ $3, R10

	VMOVUPD 0(DI), Y0
	VMOVUPD 32(DI), Y1
	VMOVUPD 64(DI), Y2
	VMOVUPD 96(DI), Y3
	VMOVUPD 0(R8), Y4
	VMOVUPD 32(R8), Y5
	VMOVUPD 64(R8), Y6
	VMOVUPD 96(R8), Y7
	TESTQ CX, CX
	JE    store2

loop2:
	VBROADCASTSD (SI), Y8
	VBROADCASTSD (R9), Y9
	VMOVUPD      0(DX), Y10
	VMOVUPD      32(DX), Y11
	VMOVUPD      64(DX), Y12
	VMOVUPD      96(DX), Y13
	VFMADD231PD  Y10, Y8, Y0
	VFMADD231PD  Y11, Y8, Y1
	VFMADD231PD  Y12, Y8, Y2
	VFMADD231PD  Y13, Y8, Y3
	VFMADD231PD  Y10, Y9, Y4
	VFMADD231PD  Y11, Y9, Y5
	VFMADD231PD  Y12, Y9, Y6
	VFMADD231PD  Y13, Y9, Y7
	ADDQ         $8, SI
	ADDQ         $8, R9
	ADDQ         R10, DX
	DECQ         CX
	JNE          loop2

store2:
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	VMOVUPD Y4, 0(R8)
	VMOVUPD Y5, 32(R8)
	VMOVUPD Y6, 64(R8)
	VMOVUPD Y7, 96(R8)
	VZEROUPPER
	RET

// func fmaRows1x16(zp, cp, w []float64, ldw int)
//
// fmaRows2x16 for one row.
TEXT ·fmaRows1x16(SB), NOSPLIT, $0-80
	MOVQ zp_base+0(FP), DI
	MOVQ cp_base+24(FP), SI
	MOVQ cp_len+32(FP), CX
	MOVQ w_base+48(FP), DX
	MOVQ ldw+72(FP), R10
	SHLQ $3, R10

	VMOVUPD 0(DI), Y0
	VMOVUPD 32(DI), Y1
	VMOVUPD 64(DI), Y2
	VMOVUPD 96(DI), Y3
	TESTQ CX, CX
	JE    store1

loop1:
	VBROADCASTSD (SI), Y8
	VFMADD231PD  0(DX), Y8, Y0
	VFMADD231PD  32(DX), Y8, Y1
	VFMADD231PD  64(DX), Y8, Y2
	VFMADD231PD  96(DX), Y8, Y3
	ADDQ         $8, SI
	ADDQ         R10, DX
	DECQ         CX
	JNE          loop1

store1:
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	VZEROUPPER
	RET

// func mulAVX(dst, a, b []float64)
//
// dst[i] = a[i]·b[i] for i < len(b), exactly as the scalar loop (one rounding each).
TEXT ·mulAVX(SB), NOSPLIT, $0-72
	MOVQ dst_base+0(FP), DI
	MOVQ a_base+24(FP), SI
	MOVQ b_base+48(FP), DX
	MOVQ b_len+56(FP), CX

mul16:
	CMPQ    CX, $16
	JLT     mul1
	VMOVUPD 0(SI), Y0
	VMOVUPD 32(SI), Y1
	VMOVUPD 64(SI), Y2
	VMOVUPD 96(SI), Y3
	VMULPD  0(DX), Y0, Y0
	VMULPD  32(DX), Y1, Y1
	VMULPD  64(DX), Y2, Y2
	VMULPD  96(DX), Y3, Y3
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	ADDQ    $128, DI
	ADDQ    $128, SI
	ADDQ    $128, DX
	SUBQ    $16, CX
	JMP     mul16

mul1:
	TESTQ  CX, CX
	JE     muldone
	VMOVSD 0(SI), X0
	VMULSD 0(DX), X0, X0
	VMOVSD X0, 0(DI)
	ADDQ   $8, DI
	ADDQ   $8, SI
	ADDQ   $8, DX
	DECQ   CX
	JMP    mul1

muldone:
	VZEROUPPER
	RET

// func scaleAVX(v []float64, c float64)
//
// v[i] *= c, exactly as the scalar loop.
TEXT ·scaleAVX(SB), NOSPLIT, $0-32
	MOVQ         v_base+0(FP), DI
	MOVQ         v_len+8(FP), CX
	VBROADCASTSD c+24(FP), Y15

scale16:
	CMPQ    CX, $16
	JLT     scale1
	VMULPD  0(DI), Y15, Y0
	VMULPD  32(DI), Y15, Y1
	VMULPD  64(DI), Y15, Y2
	VMULPD  96(DI), Y15, Y3
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	ADDQ    $128, DI
	SUBQ    $16, CX
	JMP     scale16

scale1:
	TESTQ  CX, CX
	JE     scaledone
	VMULSD 0(DI), X15, X0
	VMOVSD X0, 0(DI)
	ADDQ   $8, DI
	DECQ   CX
	JMP    scale1

scaledone:
	VZEROUPPER
	RET

// func fwhtContig8AVX(v []float64)
//
// fwhtRadix8Contig: H_8 on each contiguous group of 8 (len(v) a multiple of 8), the same
// additions and subtractions on the same operands, in vector lanes. Stride 1 within a
// 4-vector x = [a b c d]: s = x + swap(x) = [a+b · c+d ·], t = swap(x) − x = [· a−b · c−d],
// blend. Stride 2: the same with the 128-bit halves swapped. Stride 4: across the two
// 4-vectors of the group.
TEXT ·fwhtContig8AVX(SB), NOSPLIT, $0-24
	MOVQ v_base+0(FP), DI
	MOVQ v_len+8(FP), CX
	SHRQ $3, CX
	TESTQ CX, CX
	JE   c8done

c8loop:
	VMOVUPD     0(DI), Y0
	VMOVUPD     32(DI), Y1
	// stride 1
	VPERMILPD   $5, Y0, Y2
	VPERMILPD   $5, Y1, Y3
	VADDPD      Y2, Y0, Y4
	VADDPD      Y3, Y1, Y5
	VSUBPD      Y0, Y2, Y6
	VSUBPD      Y1, Y3, Y7
	VBLENDPD    $10, Y6, Y4, Y0
	VBLENDPD    $10, Y7, Y5, Y1
	// stride 2
	VPERM2F128  $1, Y0, Y0, Y2
	VPERM2F128  $1, Y1, Y1, Y3
	VADDPD      Y2, Y0, Y4
	VADDPD      Y3, Y1, Y5
	VSUBPD      Y0, Y2, Y6
	VSUBPD      Y1, Y3, Y7
	VBLENDPD    $12, Y6, Y4, Y0
	VBLENDPD    $12, Y7, Y5, Y1
	// stride 4
	VADDPD      Y1, Y0, Y2
	VSUBPD      Y1, Y0, Y3
	VMOVUPD     Y2, 0(DI)
	VMOVUPD     Y3, 32(DI)
	ADDQ        $64, DI
	DECQ        CX
	JNE         c8loop

c8done:
	VZEROUPPER
	RET

// func fwhtRadix8AVX(v []float64, h int)
//
// fwhtRadix8(v, h) for h a positive multiple of 4 (len(v) a multiple of 8h): the same
// butterflies, four columns j at a time.
TEXT ·fwhtRadix8AVX(SB), NOSPLIT, $0-32
	MOVQ v_base+0(FP), SI
	MOVQ v_len+8(FP), DX
	MOVQ h+24(FP), R8
	SHLQ $3, R8               // h in bytes
	LEAQ (R8)(R8*2), R9       // 3h
	MOVQ R8, R10
	SHLQ $3, R10              // 8h
	SHLQ $3, DX
	ADDQ SI, DX               // end of v

r8outer:
	CMPQ SI, DX
	JAE  r8done
	MOVQ SI, BX
	LEAQ (SI)(R8*1), R11      // end of the columns of this group

r8inner:
	CMPQ    BX, R11
	JAE     r8next
	LEAQ    (BX)(R8*4), CX
	VMOVUPD (BX), Y0
	VMOVUPD (BX)(R8*1), Y1
	VMOVUPD (BX)(R8*2), Y2
	VMOVUPD (BX)(R9*1), Y3
	VMOVUPD (CX), Y4
	VMOVUPD (CX)(R8*1), Y5
	VMOVUPD (CX)(R8*2), Y6
	VMOVUPD (CX)(R9*1), Y7
	// a0 = x0+x1 (Y8), a1 = x0−x1 (Y0), a2 (Y9), a3 (Y2), a4 (Y10), a5 (Y4), a6 (Y11), a7 (Y6)
	VADDPD  Y1, Y0, Y8
	VSUBPD  Y1, Y0, Y0
	VADDPD  Y3, Y2, Y9
	VSUBPD  Y3, Y2, Y2
	VADDPD  Y5, Y4, Y10
	VSUBPD  Y5, Y4, Y4
	VADDPD  Y7, Y6, Y11
	VSUBPD  Y7, Y6, Y6
	// b0 = a0+a2 (Y1), b2 = a0−a2 (Y8), b1 = a1+a3 (Y3), b3 = a1−a3 (Y0),
	// b4 = a4+a6 (Y5), b6 = a4−a6 (Y10), b5 = a5+a7 (Y7), b7 = a5−a7 (Y4)
	VADDPD  Y9, Y8, Y1
	VSUBPD  Y9, Y8, Y8
	VADDPD  Y2, Y0, Y3
	VSUBPD  Y2, Y0, Y0
	VADDPD  Y11, Y10, Y5
	VSUBPD  Y11, Y10, Y10
	VADDPD  Y6, Y4, Y7
	VSUBPD  Y6, Y4, Y4
	// x0 = b0+b4, x4 = b0−b4, x1 = b1+b5, x5 = b1−b5, x2 = b2+b6, x6 = b2−b6,
	// x3 = b3+b7, x7 = b3−b7
	VADDPD  Y5, Y1, Y12
	VSUBPD  Y5, Y1, Y13
	VADDPD  Y7, Y3, Y14
	VSUBPD  Y7, Y3, Y15
	VMOVUPD Y12, (BX)
	VMOVUPD Y13, (CX)
	VMOVUPD Y14, (BX)(R8*1)
	VMOVUPD Y15, (CX)(R8*1)
	VADDPD  Y10, Y8, Y12
	VSUBPD  Y10, Y8, Y13
	VADDPD  Y4, Y0, Y14
	VSUBPD  Y4, Y0, Y15
	VMOVUPD Y12, (BX)(R8*2)
	VMOVUPD Y13, (CX)(R8*2)
	VMOVUPD Y14, (BX)(R9*1)
	VMOVUPD Y15, (CX)(R9*1)
	ADDQ    $32, BX
	JMP     r8inner

r8next:
	ADDQ R10, SI
	JMP  r8outer

r8done:
	VZEROUPPER
	RET

// func fwhtRadix4AVX(v []float64, h int)
//
// fwhtRadix4(v, h) for h a positive multiple of 4 (len(v) a multiple of 4h).
TEXT ·fwhtRadix4AVX(SB), NOSPLIT, $0-32
	MOVQ v_base+0(FP), SI
	MOVQ v_len+8(FP), DX
	MOVQ h+24(FP), R8
	SHLQ $3, R8
	LEAQ (R8)(R8*2), R9
	MOVQ R8, R10
	SHLQ $2, R10              // 4h
	SHLQ $3, DX
	ADDQ SI, DX

r4outer:
	CMPQ SI, DX
	JAE  r4done
	MOVQ SI, BX
	LEAQ (SI)(R8*1), R11

r4inner:
	CMPQ    BX, R11
	JAE     r4next
	VMOVUPD (BX), Y0
	VMOVUPD (BX)(R8*1), Y1
	VMOVUPD (BX)(R8*2), Y2
	VMOVUPD (BX)(R9*1), Y3
	VADDPD  Y1, Y0, Y4        // a0
	VSUBPD  Y1, Y0, Y5        // a1
	VADDPD  Y3, Y2, Y6        // a2
	VSUBPD  Y3, Y2, Y7        // a3
	VADDPD  Y6, Y4, Y0
	VSUBPD  Y6, Y4, Y2
	VADDPD  Y7, Y5, Y1
	VSUBPD  Y7, Y5, Y3
	VMOVUPD Y0, (BX)
	VMOVUPD Y1, (BX)(R8*1)
	VMOVUPD Y2, (BX)(R8*2)
	VMOVUPD Y3, (BX)(R9*1)
	ADDQ    $32, BX
	JMP     r4inner

r4next:
	ADDQ R10, SI
	JMP  r4outer

r4done:
	VZEROUPPER
	RET

// func fwhtRadix2AVX(v []float64, h int)
//
// fwhtRadix2(v, h) for h a positive multiple of 4 (len(v) a multiple of 2h).
TEXT ·fwhtRadix2AVX(SB), NOSPLIT, $0-32
	MOVQ v_base+0(FP), SI
	MOVQ v_len+8(FP), DX
	MOVQ h+24(FP), R8
	SHLQ $3, R8
	MOVQ R8, R10
	SHLQ $1, R10              // 2h
	SHLQ $3, DX
	ADDQ SI, DX

r2outer:
	CMPQ SI, DX
	JAE  r2done
	MOVQ SI, BX
	LEAQ (SI)(R8*1), R11

r2inner:
	CMPQ    BX, R11
	JAE     r2next
	VMOVUPD (BX), Y0
	VMOVUPD (BX)(R8*1), Y1
	VADDPD  Y1, Y0, Y2
	VSUBPD  Y1, Y0, Y3
	VMOVUPD Y2, (BX)
	VMOVUPD Y3, (BX)(R8*1)
	ADDQ    $32, BX
	JMP     r2inner

r2next:
	ADDQ R10, SI
	JMP  r2outer

r2done:
	VZEROUPPER
	RET

// func gerFMA(dst []float64, ld int, x []float64, inc, m int, y []float64)
//
// For i < m: dst[i·ld+k] += x[i·inc]·y[k] for k < len(y), one fused multiply-add each:
// each row in turn, in 16-, 4- and 1-wide steps.
TEXT ·gerFMA(SB), NOSPLIT, $0-96
	MOVQ dst_base+0(FP), R8
	MOVQ ld+24(FP), R9
	SHLQ $3, R9
	MOVQ x_base+32(FP), R10
	MOVQ inc+56(FP), R11
	SHLQ $3, R11
	MOVQ m+64(FP), R12
	MOVQ y_base+72(FP), R13
	MOVQ y_len+80(FP), R14

gerrow:
	TESTQ        R12, R12
	JE           gerdone
	VBROADCASTSD (R10), Y15
	MOVQ         R8, DI
	MOVQ         R13, SI
	MOVQ         R14, CX

ger16:
	CMPQ        CX, $16
	JLT         ger4
	VMOVUPD     0(DI), Y0
	VMOVUPD     32(DI), Y1
	VMOVUPD     64(DI), Y2
	VMOVUPD     96(DI), Y3
	VFMADD231PD 0(SI), Y15, Y0
	VFMADD231PD 32(SI), Y15, Y1
	VFMADD231PD 64(SI), Y15, Y2
	VFMADD231PD 96(SI), Y15, Y3
	VMOVUPD     Y0, 0(DI)
	VMOVUPD     Y1, 32(DI)
	VMOVUPD     Y2, 64(DI)
	VMOVUPD     Y3, 96(DI)
	ADDQ        $128, DI
	ADDQ        $128, SI
	SUBQ        $16, CX
	JMP         ger16

ger4:
	CMPQ        CX, $4
	JLT         ger1
	VMOVUPD     0(DI), Y0
	VFMADD231PD 0(SI), Y15, Y0
	VMOVUPD     Y0, 0(DI)
	ADDQ        $32, DI
	ADDQ        $32, SI
	SUBQ        $4, CX
	JMP         ger4

ger1:
	TESTQ       CX, CX
	JE          gernext
	VMOVSD      0(DI), X0
	VFMADD231SD 0(SI), X15, X0
	VMOVSD      X0, 0(DI)
	ADDQ        $8, DI
	ADDQ        $8, SI
	DECQ        CX
	JMP         ger1

gernext:
	ADDQ R9, R8
	ADDQ R11, R10
	DECQ R12
	JMP  gerrow

gerdone:
	VZEROUPPER
	RET

// func acc4x12(dst []float64, ld int, src []float64, inc int, offs, rows []int32, mat []float64, k int)
//
// For i < 4, c < 12: dst[i·ld+c] += src[offs[r]+i·inc]·mat[rows[r]·k+c], r = 0, 1, …,
// len(offs)−1 in order, one fused multiply-add per term, the 48 sums held in registers.
TEXT ·acc4x12(SB), NOSPLIT, $0-144
	MOVQ dst_base+0(FP), DI
	MOVQ ld+24(FP), R8
	SHLQ $3, R8
	MOVQ src_base+32(FP), SI
	MOVQ inc+56(FP), R9
	SHLQ $3, R9
	MOVQ offs_base+64(FP), R10
	MOVQ offs_len+72(FP), CX
	MOVQ rows_base+88(FP), R11
	MOVQ mat_base+112(FP), R12
	MOVQ k+136(FP), R13
	SHLQ $3, R13
	LEAQ (R9)(R9*2), R14      // 3·inc
	LEAQ (DI)(R8*2), BX       // row 2

	VMOVUPD 0(DI), Y0
	VMOVUPD 32(DI), Y1
	VMOVUPD 64(DI), Y2
	VMOVUPD 0(DI)(R8*1), Y3
	VMOVUPD 32(DI)(R8*1), Y4
	VMOVUPD 64(DI)(R8*1), Y5
	VMOVUPD 0(BX), Y6
	VMOVUPD 32(BX), Y7
	VMOVUPD 64(BX), Y8
	VMOVUPD 0(BX)(R8*1), Y9
	VMOVUPD 32(BX)(R8*1), Y10
	VMOVUPD 64(BX)(R8*1), Y11
	TESTQ   CX, CX
	JE      a412store

a412loop:
	MOVLQSX      (R10), AX
	LEAQ         (SI)(AX*8), AX
	MOVLQSX      (R11), DX
	IMULQ        R13, DX
	ADDQ         R12, DX
	VMOVUPD      0(DX), Y12
	VMOVUPD      32(DX), Y13
	VMOVUPD      64(DX), Y14
	VBROADCASTSD (AX), Y15
	VFMADD231PD  Y12, Y15, Y0
	VFMADD231PD  Y13, Y15, Y1
	VFMADD231PD  Y14, Y15, Y2
	VBROADCASTSD (AX)(R9*1), Y15
	VFMADD231PD  Y12, Y15, Y3
	VFMADD231PD  Y13, Y15, Y4
	VFMADD231PD  Y14, Y15, Y5
	VBROADCASTSD (AX)(R9*2), Y15
	VFMADD231PD  Y12, Y15, Y6
	VFMADD231PD  Y13, Y15, Y7
	VFMADD231PD  Y14, Y15, Y8
	VBROADCASTSD (AX)(R14*1), Y15
	VFMADD231PD  Y12, Y15, Y9
	VFMADD231PD  Y13, Y15, Y10
	VFMADD231PD  Y14, Y15, Y11
	ADDQ         $4, R10
	ADDQ         $4, R11
	DECQ         CX
	JNE          a412loop

a412store:
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 0(DI)(R8*1)
	VMOVUPD Y4, 32(DI)(R8*1)
	VMOVUPD Y5, 64(DI)(R8*1)
	VMOVUPD Y6, 0(BX)
	VMOVUPD Y7, 32(BX)
	VMOVUPD Y8, 64(BX)
	VMOVUPD Y9, 0(BX)(R8*1)
	VMOVUPD Y10, 32(BX)(R8*1)
	VMOVUPD Y11, 64(BX)(R8*1)
	VZEROUPPER
	RET

// func acc1x12(dst, src []float64, offs, rows []int32, mat []float64, k int)
//
// acc4x12 for one row: dst[c] += src[offs[r]]·mat[rows[r]·k+c], c < 12.
TEXT ·acc1x12(SB), NOSPLIT, $0-128
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ offs_base+48(FP), R10
	MOVQ offs_len+56(FP), CX
	MOVQ rows_base+72(FP), R11
	MOVQ mat_base+96(FP), R12
	MOVQ k+120(FP), R13
	SHLQ $3, R13

	VMOVUPD 0(DI), Y0
	VMOVUPD 32(DI), Y1
	VMOVUPD 64(DI), Y2
	TESTQ   CX, CX
	JE      a112store

a112loop:
	MOVLQSX      (R10), AX
	MOVLQSX      (R11), DX
	IMULQ        R13, DX
	ADDQ         R12, DX
	VBROADCASTSD (SI)(AX*8), Y15
	VFMADD231PD  0(DX), Y15, Y0
	VFMADD231PD  32(DX), Y15, Y1
	VFMADD231PD  64(DX), Y15, Y2
	ADDQ         $4, R10
	ADDQ         $4, R11
	DECQ         CX
	JNE          a112loop

a112store:
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VZEROUPPER
	RET
