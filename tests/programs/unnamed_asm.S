/* A function whose DWARF has a line for every instruction but no
 * DW_TAG_subprogram: one compile unit (stmt_list, low_pc, high_pc) written
 * by hand, as hand-written assembly, some generated code and LTO partitions
 * leave it. binutils' addr2line names such an address by the ELF symbol
 * that holds it (its symbol-table fallback), which perf --inline prints as
 * the plain frame line; tests/native.rs checks jobprof does the same. */
	.file 1 "unnamed_asm.c"
	.text
	.globl	unnamed_spin
	.type	unnamed_spin, @function
unnamed_spin:
.Lbegin:
	.loc 1 5
	mov	%rdi, %rax
	.loc 1 6
	add	$1, %rax
	.loc 1 7
	ret
.Lend:
	.size	unnamed_spin, .-unnamed_spin

	.section .debug_abbrev,"",@progbits
.Labbrev:
	.uleb128 1	/* abbreviation 1 */
	.uleb128 0x11	/* DW_TAG_compile_unit */
	.byte 0		/* no children */
	.uleb128 0x10	/* DW_AT_stmt_list */
	.uleb128 0x17	/* DW_FORM_sec_offset */
	.uleb128 0x11	/* DW_AT_low_pc */
	.uleb128 0x01	/* DW_FORM_addr */
	.uleb128 0x12	/* DW_AT_high_pc */
	.uleb128 0x07	/* DW_FORM_data8 (a length) */
	.uleb128 0x13	/* DW_AT_language */
	.uleb128 0x0b	/* DW_FORM_data1 */
	.byte 0, 0
	.byte 0

	.section .debug_info,"",@progbits
	.long .Linfo_end - .Linfo_start
.Linfo_start:
	.value 4	/* DWARF 4 */
	.long .Labbrev
	.byte 8
	.uleb128 1
	.long .Lline
	.quad .Lbegin
	.quad .Lend - .Lbegin
	.byte 0x0c	/* DW_LANG_C99 */
.Linfo_end:

	.section .debug_line,"",@progbits
.Lline:

	.section .note.GNU-stack,"",@progbits
