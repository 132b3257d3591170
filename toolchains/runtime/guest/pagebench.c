// SPDX-License-Identifier: GPL-2.0
/*
 * sizewatch's page_bench: N alloc_pages(GFP_KERNEL, order) + __free_pages pairs per order,
 * each order's loop between two marker instructions that sizewatch's QEMU plugin counts
 * between (toolchains/runtime/plugin.c). Modelled on Jesper Brouer's page_bench01, which
 * measured the same loop in cycles; here the count of executed instructions is exact.
 * Built out of tree against the very build dir whose vmlinux is measured; when done it
 * leaves QEMU through the isa-debug-exit port.
 */
#include <linux/gfp.h>
#include <linux/init.h>
#include <linux/io.h>
#include <linux/kernel.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

#define MAX_ORDERS 16
static int orders[MAX_ORDERS] = { 0, 1, 2, 3, 4, 5, 6, 7, 8 };
static int norders = 9;
module_param_array(orders, int, &norders, 0444);
MODULE_PARM_DESC(orders, "the orders to measure, in this order");
static int pairs = 10000;
module_param(pairs, int, 0444);
MODULE_PARM_DESC(pairs, "alloc/free pairs counted per order");
static int warmup = 1000;
module_param(warmup, int, 0444);
MODULE_PARM_DESC(warmup, "pairs run before the window opens (fills the per-CPU lists)");
static int exit_port = 0xf4;
module_param(exit_port, int, 0444);
MODULE_PARM_DESC(exit_port, "isa-debug-exit I/O port written when done (0: none)");

/* nopl 0x5357PPOO(%rax): PP 01 opens, 02 closes the window of order OO */
#define MARK(phase, o) asm volatile(".byte 0x0f, 0x1f, 0x80\n\t.long 0x53570000 + (" #phase " << 8) + " #o ::: "memory")
#define MARKS(o) case o: if (phase == 1) MARK(1, o); else MARK(2, o); break;

static noinline void mark(int phase, int order)
{
	switch (order) {
	MARKS(0) MARKS(1) MARKS(2) MARKS(3) MARKS(4) MARKS(5) MARKS(6) MARKS(7)
	MARKS(8) MARKS(9) MARKS(10) MARKS(11) MARKS(12) MARKS(13) MARKS(14) MARKS(15)
	}
}

static noinline int run_pairs(int order, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		struct page *page = alloc_pages(GFP_KERNEL, order);

		if (unlikely(!page))
			return i;
		__free_pages(page, order);
	}
	return n;
}

static int __init pagebench_init(void)
{
	int i, done[MAX_ORDERS];

	if (pairs < 1) {
		pr_err("sizewatch-pagebench: pairs must be at least 1\n");
		return -EINVAL;
	}
	for (i = 0; i < norders; i++) {
		if (orders[i] < 0 || orders[i] >= MAX_ORDER || orders[i] >= MAX_ORDERS) {
			pr_err("sizewatch-pagebench: order %d out of range (0..%d)\n", orders[i], MAX_ORDER - 1);
			return -EINVAL;
		}
	}
	/* nothing is printed until every window is closed: console output between windows would
	 * tie the guest's timing (and so where timer interrupts land) to the host's */
	for (i = 0; i < norders; i++) {
		run_pairs(orders[i], warmup);
		mark(1, orders[i]);
		done[i] = run_pairs(orders[i], pairs);
		mark(2, orders[i]);
	}
	for (i = 0; i < norders; i++)
		pr_info("sizewatch-pagebench: order %d pairs %d done %d\n", orders[i], pairs, done[i]);
	pr_info("sizewatch-pagebench: finished\n");
	if (exit_port)
		outb(0x31, exit_port);          /* QEMU exits with status (0x31 << 1) | 1 = 99 */
	return 0;
}

static void __exit pagebench_exit(void)
{
}

module_init(pagebench_init);
module_exit(pagebench_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("sizewatch: executed instructions of the page allocator's fast path");
