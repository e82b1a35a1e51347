// The AVX-512 loop of ExpShift32 (exp32.go): the same float32 operations, 16 lanes at a
// time.

#include "textflag.h"

DATA expc<>+0(SB)/4, $0xc2ae0000 // lo
DATA expc<>+4(SB)/4, $0x42b00000 // hi
DATA expc<>+8(SB)/4, $0x3fb8aa3b // log2e
DATA expc<>+12(SB)/4, $0x3f318000 // c1
DATA expc<>+16(SB)/4, $0xb95e8083 // c2
DATA expc<>+20(SB)/4, $0x39506967 // p0
DATA expc<>+24(SB)/4, $0x3ab743ce // p1
DATA expc<>+28(SB)/4, $0x3c088908 // p2
DATA expc<>+32(SB)/4, $0x3d2aa9c1 // p3
DATA expc<>+36(SB)/4, $0x3e2aaaaa // p4
DATA expc<>+40(SB)/4, $0x3f000000 // p5
DATA expc<>+44(SB)/4, $0x3f800000 // one
DATA expc<>+48(SB)/4, $127 // exponent bias
GLOBL expc<>(SB), RODATA|NOPTR, $52

// func expShiftLanes(x []float32, shift, scale float32, lanes *[16]float64)
TEXT ·expShiftLanes(SB), NOSPLIT, $0-40
	MOVQ x_base+0(FP), SI
	MOVQ x_len+8(FP), CX
	SHRQ $4, CX
	MOVQ lanes+32(FP), DI
	VBROADCASTSS shift+24(FP), Z20
	VBROADCASTSS scale+28(FP), Z21
	LEAQ expc<>(SB), AX
	VBROADCASTSS 0(AX), Z22  // lo
	VBROADCASTSS 4(AX), Z23  // hi
	VBROADCASTSS 8(AX), Z24  // log2e
	VBROADCASTSS 12(AX), Z25 // c1
	VBROADCASTSS 16(AX), Z26 // c2
	VBROADCASTSS 20(AX), Z27 // p0
	VBROADCASTSS 24(AX), Z28 // p1
	VBROADCASTSS 28(AX), Z29 // p2
	VBROADCASTSS 32(AX), Z30 // p3
	VBROADCASTSS 36(AX), Z31 // p4
	VBROADCASTSS 40(AX), Z16 // p5
	VBROADCASTSS 44(AX), Z17 // one
	VPBROADCASTD 48(AX), Z18 // 127
	VMOVUPD 0(DI), Z10       // lanes 0..7
	VMOVUPD 64(DI), Z11      // lanes 8..15

loop:
	VMOVUPS     0(SI), Z0
	VSUBPS      Z20, Z0, Z0  // v − shift
	VMULPS      Z21, Z0, Z0  // ·scale
	VMAXPS      Z22, Z0, Z0
	VMINPS      Z23, Z0, Z0  // x
	VMULPS      Z24, Z0, Z1
	VRNDSCALEPS $0, Z1, Z1   // k = round-half-even(x·log2e)
	VMULPS      Z25, Z1, Z2
	VSUBPS      Z2, Z0, Z0   // r = x − k·c1
	VMULPS      Z26, Z1, Z2
	VSUBPS      Z2, Z0, Z0   // r −= k·c2
	VMULPS      Z27, Z0, Z3  // p = p0·r
	VADDPS      Z28, Z3, Z3  // + p1
	VMULPS      Z0, Z3, Z3
	VADDPS      Z29, Z3, Z3  // + p2
	VMULPS      Z0, Z3, Z3
	VADDPS      Z30, Z3, Z3  // + p3
	VMULPS      Z0, Z3, Z3
	VADDPS      Z31, Z3, Z3  // + p4
	VMULPS      Z0, Z3, Z3
	VADDPS      Z16, Z3, Z3  // + p5
	VMULPS      Z0, Z0, Z4   // r²
	VMULPS      Z4, Z3, Z3   // p·r²
	VADDPS      Z0, Z3, Z3   // + r
	VADDPS      Z17, Z3, Z3  // + 1
	VCVTPS2DQ   Z1, Z1       // k as int32 (exact: k is integral)
	VPADDD      Z18, Z1, Z1
	VPSLLD      $23, Z1, Z1  // 2^k
	VMULPS      Z1, Z3, Z3
	VMOVUPS     Z3, 0(SI)
	VCVTPS2PD   Y3, Z5
	VEXTRACTF64X4 $1, Z3, Y6
	VCVTPS2PD   Y6, Z6
	VADDPD      Z5, Z10, Z10
	VADDPD      Z6, Z11, Z11
	ADDQ        $64, SI
	DECQ        CX
	JNE         loop

	VMOVUPD Z10, 0(DI)
	VMOVUPD Z11, 64(DI)
	VZEROUPPER
	RET
