// AVX2/FMA and AVX-512 dot-product blocks for amd64; see dots.go for the contract. Each lane sum is
// the FMA chain of dot's lane l, so the results equal dot's bit for bit.

#include "textflag.h"

// LANES_ARGS loads the arguments (lanes, f []float64, ldf int, z []float64, ldz, n int)
// of the Acc kernels: DI lanes, SI f, R8 ldf and R9 ldz in bytes, DX z, CX n/4, and
// R10 the row of f two below SI.
#define LANES_ARGS \
	MOVQ lanes_base+0(FP), DI \
	MOVQ f_base+24(FP), SI    \
	MOVQ ldf+48(FP), R8       \
	SHLQ $3, R8               \
	MOVQ z_base+56(FP), DX    \
	MOVQ ldz+80(FP), R9       \
	SHLQ $3, R9               \
	MOVQ n+88(FP), CX         \
	SHRQ $2, CX               \
	LEAQ (SI)(R8*2), R10

// func dotLanes4x3Acc(lanes, f []float64, ldf int, z []float64, ldz, n int)
//
// For i < 4, j < 3, l < 4: lanes[(i·3+j)·4+l] is carried on (from 0 when the caller
// cleared it) by the fma chain over t < n/4 of f[i·ldf+4t+l]·z[j·ldz+4t+l] (n a multiple
// of 4), so chunks of a length in turn give the whole length's chains.
TEXT ·dotLanes4x3Acc(SB), NOSPLIT, $0-96
	LANES_ARGS
	LEAQ (DX)(R9*2), R11
	VMOVUPD 0(DI), Y0
	VMOVUPD 32(DI), Y1
	VMOVUPD 64(DI), Y2
	VMOVUPD 96(DI), Y3
	VMOVUPD 128(DI), Y4
	VMOVUPD 160(DI), Y5
	VMOVUPD 192(DI), Y6
	VMOVUPD 224(DI), Y7
	VMOVUPD 256(DI), Y8
	VMOVUPD 288(DI), Y9
	VMOVUPD 320(DI), Y10
	VMOVUPD 352(DI), Y11
	TESTQ  CX, CX
	JE     d43astore

d43aloop:
	VMOVUPD     (DX), Y12
	VMOVUPD     (DX)(R9*1), Y13
	VMOVUPD     (R11), Y14
	VMOVUPD     (SI), Y15
	VFMADD231PD Y15, Y12, Y0
	VFMADD231PD Y15, Y13, Y1
	VFMADD231PD Y15, Y14, Y2
	VMOVUPD     (SI)(R8*1), Y15
	VFMADD231PD Y15, Y12, Y3
	VFMADD231PD Y15, Y13, Y4
	VFMADD231PD Y15, Y14, Y5
	VMOVUPD     (R10), Y15
	VFMADD231PD Y15, Y12, Y6
	VFMADD231PD Y15, Y13, Y7
	VFMADD231PD Y15, Y14, Y8
	VMOVUPD     (R10)(R8*1), Y15
	VFMADD231PD Y15, Y12, Y9
	VFMADD231PD Y15, Y13, Y10
	VFMADD231PD Y15, Y14, Y11
	ADDQ        $32, SI
	ADDQ        $32, DX
	ADDQ        $32, R10
	ADDQ        $32, R11
	DECQ        CX
	JNE         d43aloop

d43astore:
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	VMOVUPD Y4, 128(DI)
	VMOVUPD Y5, 160(DI)
	VMOVUPD Y6, 192(DI)
	VMOVUPD Y7, 224(DI)
	VMOVUPD Y8, 256(DI)
	VMOVUPD Y9, 288(DI)
	VMOVUPD Y10, 320(DI)
	VMOVUPD Y11, 352(DI)
	VZEROUPPER
	RET

// func dotLanes8x4Acc(lanes, f []float64, ldf int, z []float64, ldz, n int)
//
// dotLanes4x3Acc on 8×4 pairs with AVX-512: each ZMM register holds the four lanes of
// two pairs, rows 2p and 2p+1 of f against row b of z (lanes 0–3 and 4–7), so every
// lane runs Dot's chain. For p < 4, b < 4, l < 4, r < 2: lanes[(p·4+b)·8+r·4+l] is
// carried on by the fma chain over t < n/4 of f[(2p+r)·ldf+4t+l]·z[b·ldz+4t+l] (n a
// multiple of 4).
TEXT ·dotLanes8x4Acc(SB), NOSPLIT, $0-96
	LANES_ARGS
	LEAQ (R10)(R8*2), R12
	LEAQ (R12)(R8*2), R13
	LEAQ (DX)(R9*2), R11
	VMOVUPD 0(DI), Z0
	VMOVUPD 64(DI), Z1
	VMOVUPD 128(DI), Z2
	VMOVUPD 192(DI), Z3
	VMOVUPD 256(DI), Z4
	VMOVUPD 320(DI), Z5
	VMOVUPD 384(DI), Z6
	VMOVUPD 448(DI), Z7
	VMOVUPD 512(DI), Z8
	VMOVUPD 576(DI), Z9
	VMOVUPD 640(DI), Z10
	VMOVUPD 704(DI), Z11
	VMOVUPD 768(DI), Z12
	VMOVUPD 832(DI), Z13
	VMOVUPD 896(DI), Z14
	VMOVUPD 960(DI), Z15
	TESTQ CX, CX
	JE    d84store

d84loop:
	VMOVUPD         (SI), Y24
	VINSERTF64X4    $1, (SI)(R8*1), Z24, Z24
	VMOVUPD         (R10), Y25
	VINSERTF64X4    $1, (R10)(R8*1), Z25, Z25
	VMOVUPD         (R12), Y26
	VINSERTF64X4    $1, (R12)(R8*1), Z26, Z26
	VMOVUPD         (R13), Y27
	VINSERTF64X4    $1, (R13)(R8*1), Z27, Z27
	VBROADCASTF64X4 (DX), Z28
	VBROADCASTF64X4 (DX)(R9*1), Z29
	VBROADCASTF64X4 (R11), Z30
	VBROADCASTF64X4 (R11)(R9*1), Z31
	VFMADD231PD     Z28, Z24, Z0
	VFMADD231PD     Z29, Z24, Z1
	VFMADD231PD     Z30, Z24, Z2
	VFMADD231PD     Z31, Z24, Z3
	VFMADD231PD     Z28, Z25, Z4
	VFMADD231PD     Z29, Z25, Z5
	VFMADD231PD     Z30, Z25, Z6
	VFMADD231PD     Z31, Z25, Z7
	VFMADD231PD     Z28, Z26, Z8
	VFMADD231PD     Z29, Z26, Z9
	VFMADD231PD     Z30, Z26, Z10
	VFMADD231PD     Z31, Z26, Z11
	VFMADD231PD     Z28, Z27, Z12
	VFMADD231PD     Z29, Z27, Z13
	VFMADD231PD     Z30, Z27, Z14
	VFMADD231PD     Z31, Z27, Z15
	ADDQ            $32, SI
	ADDQ            $32, R10
	ADDQ            $32, R12
	ADDQ            $32, R13
	ADDQ            $32, DX
	ADDQ            $32, R11
	DECQ            CX
	JNE             d84loop

d84store:
	VMOVUPD Z0, 0(DI)
	VMOVUPD Z1, 64(DI)
	VMOVUPD Z2, 128(DI)
	VMOVUPD Z3, 192(DI)
	VMOVUPD Z4, 256(DI)
	VMOVUPD Z5, 320(DI)
	VMOVUPD Z6, 384(DI)
	VMOVUPD Z7, 448(DI)
	VMOVUPD Z8, 512(DI)
	VMOVUPD Z9, 576(DI)
	VMOVUPD Z10, 640(DI)
	VMOVUPD Z11, 704(DI)
	VMOVUPD Z12, 768(DI)
	VMOVUPD Z13, 832(DI)
	VMOVUPD Z14, 896(DI)
	VMOVUPD Z15, 960(DI)
	VZEROUPPER
	RET

// func dotLanes1x4(lanes, f, z []float64, ldz, n int)
//
// For j < 4, l < 4: lanes[j·4+l] = fma chain over t < n/4 of f[4t+l]·z[j·ldz+4t+l].
TEXT ·dotLanes1x4(SB), NOSPLIT, $0-88
	MOVQ lanes_base+0(FP), DI
	MOVQ f_base+24(FP), SI
	MOVQ z_base+48(FP), DX
	MOVQ ldz+72(FP), R9
	SHLQ $3, R9
	MOVQ n+80(FP), CX
	SHRQ $2, CX
	LEAQ (DX)(R9*2), R11
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	TESTQ  CX, CX
	JE     d14store

d14loop:
	VMOVUPD     (SI), Y15
	VFMADD231PD (DX), Y15, Y0
	VFMADD231PD (DX)(R9*1), Y15, Y1
	VFMADD231PD (R11), Y15, Y2
	VFMADD231PD (R11)(R9*1), Y15, Y3
	ADDQ        $32, SI
	ADDQ        $32, DX
	ADDQ        $32, R11
	DECQ        CX
	JNE         d14loop

d14store:
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	VZEROUPPER
	RET

// func dot32Lanes1x4Acc(lanes, f []float64, z []float32, ldz, n int)
//
// For j < 4, l < 4: lanes[j·4+l] = fma chain over t < n/4 of f[4t+l]·float64(z[j·ldz+4t+l]),
// continuing from the value already in lanes[j·4+l] (zero: Dot32's lane l). VCVTPS2PD
// widens four float32 exactly. A chain cut into pieces this way has the bits of the
// uncut chain.
TEXT ·dot32Lanes1x4Acc(SB), NOSPLIT, $0-88
	MOVQ lanes_base+0(FP), DI
	MOVQ f_base+24(FP), SI
	MOVQ z_base+48(FP), DX
	MOVQ ldz+72(FP), R9
	SHLQ $2, R9
	MOVQ n+80(FP), CX
	SHRQ $2, CX
	LEAQ (DX)(R9*2), R11
	VMOVUPD 0(DI), Y0
	VMOVUPD 32(DI), Y1
	VMOVUPD 64(DI), Y2
	VMOVUPD 96(DI), Y3
	TESTQ  CX, CX
	JE     d32astore

d32aloop:
	VMOVUPD     (SI), Y15
	VCVTPS2PD   (DX), Y4
	VCVTPS2PD   (DX)(R9*1), Y5
	VCVTPS2PD   (R11), Y6
	VCVTPS2PD   (R11)(R9*1), Y7
	VFMADD231PD Y4, Y15, Y0
	VFMADD231PD Y5, Y15, Y1
	VFMADD231PD Y6, Y15, Y2
	VFMADD231PD Y7, Y15, Y3
	ADDQ        $32, SI
	ADDQ        $16, DX
	ADDQ        $16, R11
	DECQ        CX
	JNE         d32aloop

d32astore:
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	VZEROUPPER
	RET

// func addAVX(dst, src []float64)
//
// For i < len(src): dst[i] += src[i] (AddTo), sixteen entries a step.
TEXT ·addAVX(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX

addAVX16:
	CMPQ CX, $16
	JLT  addAVX1
	VMOVUPD 0(DI), Y0
	VMOVUPD 32(DI), Y1
	VMOVUPD 64(DI), Y2
	VMOVUPD 96(DI), Y3
	VADDPD 0(SI), Y0, Y0
	VADDPD 32(SI), Y1, Y1
	VADDPD 64(SI), Y2, Y2
	VADDPD 96(SI), Y3, Y3
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	ADDQ $128, DI
	ADDQ $128, SI
	SUBQ $16, CX
	JMP  addAVX16

addAVX1:
	TESTQ CX, CX
	JE    addAVXdone
	VMOVSD (DI), X0
	VADDSD (SI), X0, X0
	VMOVSD X0, (DI)
	ADDQ $8, DI
	ADDQ $8, SI
	DECQ CX
	JMP  addAVX1

addAVXdone:
	VZEROUPPER
	RET

// func setAVX(dst, src []float64)
//
// For i < len(src): dst[i] = 0 + src[i] (SetTo), sixteen entries a step.
TEXT ·setAVX(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	VXORPD Y15, Y15, Y15

setAVX16:
	CMPQ CX, $16
	JLT  setAVX1
	VADDPD 0(SI), Y15, Y0
	VADDPD 32(SI), Y15, Y1
	VADDPD 64(SI), Y15, Y2
	VADDPD 96(SI), Y15, Y3
	VMOVUPD Y0, 0(DI)
	VMOVUPD Y1, 32(DI)
	VMOVUPD Y2, 64(DI)
	VMOVUPD Y3, 96(DI)
	ADDQ $128, DI
	ADDQ $128, SI
	SUBQ $16, CX
	JMP  setAVX16

setAVX1:
	TESTQ CX, CX
	JE    setAVXdone
	VADDSD (SI), X15, X0
	VMOVSD X0, (DI)
	ADDQ $8, DI
	ADDQ $8, SI
	DECQ CX
	JMP  setAVX1

setAVXdone:
	VZEROUPPER
	RET
