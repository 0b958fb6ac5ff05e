#include "textflag.h"

// func int80Child(nr, a1, a2, a3, a4, a5 uint32) int32
//
// Forks (native fork); the child makes one i386 system call through
// int 0x80 and exits through the native exit_group with 0 when the call
// succeeded or its errno when it failed. No Go code runs in the child. The
// parent returns the child's pid, or -errno when fork failed.
TEXT ·int80Child(SB), NOSPLIT, $0-28
	MOVQ	$57, AX // fork
	SYSCALL
	CMPQ	AX, $0
	JNE	parent
	MOVL	nr+0(FP), AX
	MOVL	a1+4(FP), BX
	MOVL	a2+8(FP), CX
	MOVL	a3+12(FP), DX
	MOVL	a4+16(FP), SI
	MOVL	a5+20(FP), DI
	INT	$0x80
	NEGL	AX // a failed call returns -errno
	CMPL	AX, $0
	JGT	exit
	XORL	AX, AX
exit:
	MOVL	AX, DI
	MOVQ	$231, AX // exit_group
	SYSCALL
parent:
	MOVL	AX, ret+24(FP)
	RET
