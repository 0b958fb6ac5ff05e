#include "textflag.h"

// func int80Child(nr, a1, a2, a3, a4, a5, domain uint32) int32
//
// Forks (native fork); the child makes one i386 system call through
// int 0x80 and exits through the native exit_group with its errno when the
// call failed, else with 0. When domain is not 0 the call is to make a
// socket of that family: a success counts only when what it returned is
// such a socket (native getsockopt SO_DOMAIN), else the child exits with
// 255 (a call served as another, as gVisor serves int 0x80 as a 64-bit
// call of the same number, returns success without a socket). No Go code
// runs in the child. The parent returns the child's pid, or -errno when
// fork failed.
TEXT ·int80Child(SB), NOSPLIT, $48-36
	MOVQ	$57, AX // fork
	SYSCALL
	CMPQ	AX, $0
	JNE	parent
	// SIGSEGV back to the kernel's default: where int 0x80 is not served
	// (a kernel without IA32 emulation) it faults, and Go's handler, copied
	// from the parent, would print the parent's goroutines instead of the
	// child dying by the signal.
	MOVQ	$0, 16(SP) // struct sigaction: SIG_DFL, no flags, no mask
	MOVQ	$0, 24(SP)
	MOVQ	$0, 32(SP)
	MOVQ	$0, 40(SP)
	MOVQ	$11, DI // SIGSEGV
	LEAQ	16(SP), SI
	XORQ	DX, DX
	MOVQ	$8, R10
	MOVQ	$13, AX // rt_sigaction
	SYSCALL
	MOVL	nr+0(FP), AX
	MOVL	a1+4(FP), BX
	MOVL	a2+8(FP), CX
	MOVL	a3+12(FP), DX
	MOVL	a4+16(FP), SI
	MOVL	a5+20(FP), DI
	INT	$0x80
	CMPL	AX, $0
	JLT	failed // a failed call returns -errno
	MOVL	domain+24(FP), BX
	CMPL	BX, $0
	JEQ	succeeded
	// getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &val, &len)
	MOVL	AX, DI
	MOVQ	$1, SI
	MOVQ	$39, DX
	MOVL	$0, 0(SP)
	MOVL	$4, 4(SP)
	LEAQ	0(SP), R10
	LEAQ	4(SP), R8
	MOVQ	$55, AX // getsockopt
	SYSCALL
	CMPQ	AX, $0
	JNE	notmade
	MOVL	0(SP), AX
	CMPL	AX, BX
	JNE	notmade
succeeded:
	XORL	DI, DI
	JMP	exit
failed:
	NEGL	AX
	MOVL	AX, DI
	JMP	exit
notmade:
	MOVL	$255, DI
exit:
	MOVQ	$231, AX // exit_group
	SYSCALL
parent:
	MOVL	AX, ret+32(FP)
	RET
