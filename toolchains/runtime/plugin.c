/*
 * sizewatch's QEMU TCG plugin: executed guest instructions counted by address between two
 * marker instructions (issue 26). Built by toolchains/runtime/qemu.py against the
 * qemu-plugin.h of the installed QEMU's own source package; loaded with
 *     -plugin sizewatch-count.so,out=PATH
 *
 * Every kernel-half instruction TCG translates gets an inline 64-bit counter (one add per
 * executed instruction, no callback: the cheapest thing the API offers). The guest's benchmark
 * module marks its loops with `nopl 0x5357PPOO(%rax)` (0f 1f 80 + disp32; PP 01 begin / 02 end,
 * OO the order), a 7-byte nop no compiler emits with that displacement. A begin marker zeroes
 * every counter; an end marker writes the non-zero ones:
 *     W <order>                          a window began
 *     I <hex address> <count> <size>     an instruction executed <count> times in it
 *     E <order>                          the window ended
 * Counters are keyed by address: TCG translates an address again after a TB flush or text
 * patching (ftrace, alternatives, jump labels), and the same counter is reused.
 * With whole=1 the markers are ignored and every counter since boot is written at exit as
 * window 255 (what the tests compare with QEMU's own -d exec log).
 * One vCPU (-smp 1): the inline adds are not atomic.
 */
#include <glib.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

#define KERNEL_HALF 0xffff800000000000ULL
#define MARK_MAGIC 0x5357u
#define CHUNK 65536

typedef struct {
    uint64_t count;
    uint64_t vaddr;
    uint32_t size;
} Counter;

static GHashTable *by_addr;          /* vaddr -> Counter* */
static GPtrArray *chunks;            /* Counter[CHUNK] each: stable addresses for the inline adds */
static size_t used = CHUNK;
static FILE *out;
static int open_window = -1;
static uint64_t max_counters = 8u << 20;   /* 8 Mi distinct instructions: far past a kernel's text */
static size_t n_counters;
static int whole;                    /* whole=1: never zero, dump everything at exit as window 255 */

static Counter *counter_for(uint64_t vaddr, uint32_t size)
{
    Counter *c = g_hash_table_lookup(by_addr, (gconstpointer)(uintptr_t)vaddr);
    if (c) {
        c->size = size;
        return c;
    }
    if (n_counters >= max_counters)
        return NULL;
    if (used == CHUNK) {
        g_ptr_array_add(chunks, g_new0(Counter, CHUNK));
        used = 0;
    }
    c = &((Counter *)g_ptr_array_index(chunks, chunks->len - 1))[used++];
    c->vaddr = vaddr;
    c->size = size;
    n_counters++;
    g_hash_table_insert(by_addr, (gpointer)(uintptr_t)vaddr, c);
    return c;
}

static void for_each_counter(void (*fn)(Counter *))
{
    for (guint i = 0; i < chunks->len; i++) {
        Counter *chunk = g_ptr_array_index(chunks, i);
        size_t n = (i + 1 == chunks->len) ? used : CHUNK;
        for (size_t j = 0; j < n; j++)
            fn(&chunk[j]);
    }
}

static void zero(Counter *c) { c->count = 0; }

static void dump(Counter *c)
{
    if (c->count)
        fprintf(out, "I %" PRIx64 " %" PRIu64 " %u\n", c->vaddr, c->count, c->size);
}

static void on_marker(unsigned int vcpu, void *udata)
{
    unsigned int mark = (unsigned int)(uintptr_t)udata;
    unsigned int phase = (mark >> 8) & 0xff, order = mark & 0xff;

    if (!out || whole)
        return;
    if (phase == 1) {
        for_each_counter(zero);
        open_window = (int)order;
        fprintf(out, "W %u\n", order);
    } else if (phase == 2 && open_window == (int)order) {
        for_each_counter(dump);
        fprintf(out, "E %u\n", order);
        fflush(out);
        open_window = -1;
    }
}

static int marker_of(struct qemu_plugin_insn *insn, unsigned int *mark)
{
    const uint8_t *b = qemu_plugin_insn_data(insn);
    uint32_t disp;

    if (qemu_plugin_insn_size(insn) != 7 || b[0] != 0x0f || b[1] != 0x1f || b[2] != 0x80)
        return 0;
    memcpy(&disp, b + 3, 4);
    if ((disp >> 16) != MARK_MAGIC)
        return 0;
    *mark = disp & 0xffff;
    return 1;
}

static void on_translate(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    size_t n = qemu_plugin_tb_n_insns(tb);

    for (size_t i = 0; i < n; i++) {
        struct qemu_plugin_insn *insn = qemu_plugin_tb_get_insn(tb, i);
        uint64_t vaddr = qemu_plugin_insn_vaddr(insn);
        unsigned int mark;
        Counter *c;

        if (vaddr < KERNEL_HALF)
            continue;
        if (marker_of(insn, &mark))
            qemu_plugin_register_vcpu_insn_exec_cb(insn, on_marker, QEMU_PLUGIN_CB_NO_REGS,
                                                   (void *)(uintptr_t)mark);
        c = counter_for(vaddr, (uint32_t)qemu_plugin_insn_size(insn));
        if (c)
            qemu_plugin_register_vcpu_insn_exec_inline(insn, QEMU_PLUGIN_INLINE_ADD_U64, &c->count, 1);
    }
}

static void at_qemu_exit(qemu_plugin_id_t id, void *p)
{
    if (out && whole) {
        fprintf(out, "W 255\n");
        for_each_counter(dump);
        fprintf(out, "E 255\n");
    }
    if (out) {
        fclose(out);
        out = NULL;
    }
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info,
                                           int argc, char **argv)
{
    const char *path = NULL;

    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "out=", 4) == 0)
            path = argv[i] + 4;
        else if (strcmp(argv[i], "whole=1") == 0)
            whole = 1;
        else if (strncmp(argv[i], "max=", 4) == 0)
            max_counters = strtoull(argv[i] + 4, NULL, 10);
        else {
            fprintf(stderr, "sizewatch-count: unknown argument %s\n", argv[i]);
            return -1;
        }
    }
    if (!path) {
        fprintf(stderr, "sizewatch-count: out=PATH is required\n");
        return -1;
    }
    if (info->system_emulation == false || info->target_name == NULL ||
        strcmp(info->target_name, "x86_64") != 0) {
        fprintf(stderr, "sizewatch-count: runs in qemu-system-x86_64 only\n");
        return -1;
    }
    out = fopen(path, "w");
    if (!out) {
        perror(path);
        return -1;
    }
    setvbuf(out, NULL, _IOFBF, 1 << 20);
    by_addr = g_hash_table_new(g_direct_hash, g_direct_equal);
    chunks = g_ptr_array_new();
    qemu_plugin_register_vcpu_tb_trans_cb(id, on_translate);
    qemu_plugin_register_atexit_cb(id, at_qemu_exit, NULL);
    return 0;
}
