/* The native DWARF reader: elfutils' libdw walks the DIEs, Python gets the inline facts.
 *
 * Why: the pure-Python walker (analyzer/dwarf/walker.py) costs ~1 us per DIE, 16 s for the
 * 14 million DIEs of a Debian vmlinux; libdw (the library pahole uses) walks them in ~1.3 s.
 * Only DW_TAG_subprogram and DW_TAG_inlined_subroutine are turned into Python tuples, with
 * the same fields and the same rules as the walker (analyzer/dwarf/native.py builds the model
 * dataclasses from them, and maps file indexes to names with the walker's own line table
 * reader, so both engines name files identically).
 *
 * Input is an ELF image in memory (a buffer: the mapped file of a vmlinux, or an image that
 * native.py packs from the relocated debug sections of a .o). libdw reports damaged DWARF as
 * errors: they become DwarfError with libdw's message and the DIE offset.
 *
 * Reader(buffer, string budget, range budget)   (see the budgets in Reader)
 *   .units()        -> [(unit offset, DW_AT_name or None)] of every unit
 *   .unit(offset)   -> None (not a compile/partial unit) or
 *                      (version, address size, offset size, name, comp_dir, producer,
 *                       stmt_list or None, str_offsets_base or None,
 *                       [subprogram tuples], [inlined tuples])
 *   subprogram: (offset, name, linkage_name, decl_file index, decl_line, inline, external,
 *                declaration, ranges, origin)
 *   inlined:    (origin, container, parent_origin, ranges, call_file index, call_line)
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>

static PyObject *DwarfError;
static PyObject *Unsuitable;    /* a file libdw would read at a cost out of proportion to its size */

/* attributes in one abbreviation: compilers write a few dozen; libdw looks an attribute up by
 * scanning its DIE's abbreviation, so 200k of them cost minutes per 20k DIEs */
#define MAX_ABBREV_ATTRS 256

/* how deep DIEs may nest: a real file nests a few dozen levels; a damaged one must not
 * exhaust the C stack */
#define MAX_DEPTH 512

typedef struct {
    PyObject_HEAD
    Py_buffer view;
    int have_view;
    Elf *elf;
    Dwarf *dw;
    PyObject *strings;          /* const char * (as int) -> str: names shared by many DIEs */
    /* what decoding may cost, set from the sections' sizes (the walker's budgets): strings
     * at overlapping offsets and range lists shared by many DIEs must not turn a small file into
     * gigabytes of Python objects */
    long long string_budget;
    long long range_budget;
} Reader;

/* PyErr_Format has no %llx: offsets are formatted here */
static void error_at_as(PyObject *type, const char *section, unsigned long long off, const char *what,
                        const char *why)
{
    char buf[512];
    if (why)
        snprintf(buf, sizeof buf, "%s at %s+0x%llx: %s", what, section, off, why);
    else
        snprintf(buf, sizeof buf, "%s at %s+0x%llx", what, section, off);
    PyErr_SetString(type, buf);
}

static void error_at(const char *section, unsigned long long off, const char *what, const char *why)
{
    error_at_as(DwarfError, section, off, what, why);
}

static int fail(const char *what, Dwarf_Off off)
{
    error_at(".debug_info", off, what, dwarf_errmsg(-1));
    return -1;
}

static PyObject *str_of(Reader *r, const char *s)
{
    if (s == NULL)
        Py_RETURN_NONE;
    PyObject *key = PyLong_FromVoidPtr((void *)s);
    if (key == NULL)
        return NULL;
    PyObject *got = PyDict_GetItemWithError(r->strings, key);
    if (got != NULL) {
        Py_DECREF(key);
        Py_INCREF(got);
        return got;
    }
    if (PyErr_Occurred()) {
        Py_DECREF(key);
        return NULL;
    }
    size_t n = strlen(s);
    r->string_budget -= (long long)n + 1;
    if (r->string_budget < 0) {
        Py_DECREF(key);
        PyErr_SetString(DwarfError, "strings overlap beyond any real file (decoded string budget spent)");
        return NULL;
    }
    got = PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, "surrogateescape");
    if (got == NULL || PyDict_SetItem(r->strings, key, got) < 0) {
        Py_DECREF(key);
        Py_XDECREF(got);
        return NULL;
    }
    Py_DECREF(key);
    return got;
}

static PyObject *attr_string(Reader *r, Dwarf_Die *die, unsigned int at)
{
    Dwarf_Attribute a;
    if (dwarf_attr(die, at, &a) == NULL)
        Py_RETURN_NONE;
    const char *s = dwarf_formstring(&a);
    if (s == NULL) {
        fail("unreadable string attribute", dwarf_dieoffset(die));
        return NULL;
    }
    return str_of(r, s);
}

/* an unsigned constant attribute, or None */
static PyObject *attr_udata(Dwarf_Die *die, unsigned int at)
{
    Dwarf_Attribute a;
    Dwarf_Word v;
    if (dwarf_attr(die, at, &a) == NULL)
        Py_RETURN_NONE;
    if (dwarf_formudata(&a, &v) != 0) {
        fail("attribute not a number", dwarf_dieoffset(die));
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(v);
}

static int attr_flag(Dwarf_Die *die, unsigned int at, int *out)
{
    Dwarf_Attribute a;
    bool v = false;
    *out = 0;
    if (dwarf_attr(die, at, &a) == NULL)
        return 0;
    if (dwarf_formflag(&a, &v) != 0)
        return fail("flag attribute not a flag", dwarf_dieoffset(die));
    *out = v ? 1 : 0;
    return 0;
}

/* abstract_origin, else specification: the referenced DIE's .debug_info offset, or -1 */
static int origin_of(Dwarf_Die *die, long long *out)
{
    static const unsigned int ats[2] = {DW_AT_abstract_origin, DW_AT_specification};
    *out = -1;
    for (int i = 0; i < 2; i++) {
        Dwarf_Attribute a;
        Dwarf_Die target;
        if (dwarf_attr(die, ats[i], &a) == NULL)
            continue;
        if (dwarf_formref_die(&a, &target) == NULL)
            return fail("unreadable reference", dwarf_dieoffset(die));
        *out = (long long)dwarf_dieoffset(&target);
        return 0;
    }
    return 0;
}

/* the walker's rule: DW_AT_ranges (empty ranges dropped), else low_pc..high_pc (none when
 * empty), else low_pc alone as one byte */
static PyObject *ranges_of(Reader *r, Dwarf_Die *die)
{
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    Dwarf_Addr lo, hi, base, s, e;
    if (dwarf_hasattr(die, DW_AT_ranges)) {
        ptrdiff_t o = 0;
        while ((o = dwarf_ranges(die, o, &base, &s, &e)) > 0) {
            r->range_budget -= 16;     /* as the walker counts: two addresses an entry */
            if (r->range_budget < 0) {
                Py_DECREF(out);
                error_at(".debug_info", dwarf_dieoffset(die),
                         "range lists overlap beyond any real file (decode budget spent)", NULL);
                return NULL;
            }
            if (e <= s)
                continue;
            PyObject *t = Py_BuildValue("(KK)", (unsigned long long)s, (unsigned long long)e);
            if (t == NULL || PyList_Append(out, t) < 0) {
                Py_XDECREF(t);
                Py_DECREF(out);
                return NULL;
            }
            Py_DECREF(t);
        }
        if (o < 0) {
            Py_DECREF(out);
            fail("unreadable range list", dwarf_dieoffset(die));
            return NULL;
        }
        return out;
    }
    if (!dwarf_hasattr(die, DW_AT_low_pc))
        return out;
    if (dwarf_lowpc(die, &lo) != 0) {
        Py_DECREF(out);
        fail("unreadable DW_AT_low_pc", dwarf_dieoffset(die));
        return NULL;
    }
    if (dwarf_hasattr(die, DW_AT_high_pc)) {
        if (dwarf_highpc(die, &hi) != 0) {
            Py_DECREF(out);
            fail("unreadable DW_AT_high_pc", dwarf_dieoffset(die));
            return NULL;
        }
        if (hi <= lo)
            return out;
    } else {
        hi = lo + 1;
    }
    PyObject *t = Py_BuildValue("(KK)", (unsigned long long)lo, (unsigned long long)hi);
    if (t == NULL || PyList_Append(out, t) < 0) {
        Py_XDECREF(t);
        Py_DECREF(out);
        return NULL;
    }
    Py_DECREF(t);
    return out;
}

static PyObject *offset_or_none(long long v)
{
    if (v < 0)
        Py_RETURN_NONE;
    return PyLong_FromLongLong(v);
}

typedef struct {
    Reader *r;
    PyObject *subprograms;
    PyObject *inlined;
} Walk;

/* the children of ``parent``; container: the enclosing concrete subprogram (-1 none),
 * inl_origin: the origin of the nearest enclosing inlined_subroutine (-1 none or none yet) */
static int walk(Walk *w, Dwarf_Die *parent, long long container, int in_inlined, long long inl_origin,
                int depth)
{
    Dwarf_Die die;
    int rc = dwarf_child(parent, &die);
    if (rc < 0)
        return fail("unreadable DIE", dwarf_dieoffset(parent));
    if (rc > 0)
        return 0;
    if (depth > MAX_DEPTH) {
        error_at(".debug_info", dwarf_dieoffset(parent), "DIEs nested deeper than any real file", NULL);
        return -1;
    }
    do {
        int tag = dwarf_tag(&die);
        Dwarf_Off off = dwarf_dieoffset(&die);
        long long child_container = container, origin = -1;
        int child_in_inlined = in_inlined;
        long long child_inl_origin = inl_origin;
        if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
            if (origin_of(&die, &origin) < 0)
                return -1;
            PyObject *rng = ranges_of(w->r, &die);
            if (rng == NULL)
                return -1;
            PyObject *t = NULL;
            if (tag == DW_TAG_subprogram) {
                int external, declaration;
                PyObject *linkage = NULL;
                if (attr_flag(&die, DW_AT_external, &external) < 0 ||
                    attr_flag(&die, DW_AT_declaration, &declaration) < 0) {
                    Py_DECREF(rng);
                    return -1;
                }
                if (dwarf_hasattr(&die, DW_AT_linkage_name))
                    linkage = attr_string(w->r, &die, DW_AT_linkage_name);
                else
                    linkage = attr_string(w->r, &die, DW_AT_MIPS_linkage_name);
                PyObject *name = linkage ? attr_string(w->r, &die, DW_AT_name) : NULL;
                PyObject *df = name ? attr_udata(&die, DW_AT_decl_file) : NULL;
                PyObject *dl = df ? attr_udata(&die, DW_AT_decl_line) : NULL;
                PyObject *inl = dl ? attr_udata(&die, DW_AT_inline) : NULL;
                PyObject *og = inl ? offset_or_none(origin) : NULL;
                if (og)
                    t = Py_BuildValue("(KNNNNNOONN)", (unsigned long long)off, name, linkage, df, dl, inl,
                                      external ? Py_True : Py_False, declaration ? Py_True : Py_False,
                                      rng, og);
                else {
                    Py_XDECREF(name); Py_XDECREF(linkage); Py_XDECREF(df); Py_XDECREF(dl); Py_XDECREF(inl);
                    Py_DECREF(rng);
                }
                if (t == NULL || PyList_Append(w->subprograms, t) < 0) {
                    Py_XDECREF(t);
                    return -1;
                }
                if (PyList_GET_SIZE(PyTuple_GET_ITEM(t, 8)) > 0 && container < 0 && dwarf_haschildren(&die))
                    child_container = (long long)off;
                Py_DECREF(t);
            } else {
                if (origin >= 0) {
                    PyObject *cf = attr_udata(&die, DW_AT_call_file);
                    PyObject *cl = cf ? attr_udata(&die, DW_AT_call_line) : NULL;
                    PyObject *ct = cl ? offset_or_none(container) : NULL;
                    PyObject *po = ct ? (in_inlined ? offset_or_none(inl_origin) : (Py_INCREF(Py_None), Py_None))
                                      : NULL;
                    if (po)
                        t = Py_BuildValue("(LNNNNN)", origin, ct, po, rng, cf, cl);
                    else {
                        Py_XDECREF(cf); Py_XDECREF(cl); Py_XDECREF(ct);
                        Py_DECREF(rng);
                    }
                    if (t == NULL || PyList_Append(w->inlined, t) < 0) {
                        Py_XDECREF(t);
                        return -1;
                    }
                    Py_DECREF(t);
                } else {
                    Py_DECREF(rng);
                }
                child_in_inlined = 1;
                child_inl_origin = origin;
            }
        }
        if (dwarf_haschildren(&die) &&
            walk(w, &die, child_container, child_in_inlined, child_inl_origin, depth + 1) < 0)
            return -1;
        rc = dwarf_siblingof(&die, &die);
        if (rc < 0)
            return fail("unreadable DIE sibling", off);
    } while (rc == 0);
    return 0;
}

static size_t section_size(Elf *elf, const char *want, const unsigned char **data)
{
    size_t shstrndx;
    Elf_Scn *scn = NULL;
    *data = NULL;
    if (elf_getshdrstrndx(elf, &shstrndx) != 0)
        return 0;
    while ((scn = elf_nextscn(elf, scn)) != NULL) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) == NULL)
            continue;
        const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
        if (name && strcmp(name, want) == 0) {
            Elf_Data *d = elf_rawdata(scn, NULL);
            if (d == NULL)
                return 0;
            *data = d->d_buf;
            return d->d_size;
        }
    }
    return 0;
}

static int uleb(const unsigned char *b, size_t n, size_t *p, unsigned long long *v)
{
    unsigned long long r = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (*p >= n)
            return -1;
        unsigned char c = b[(*p)++];
        if (shift < 64)
            r |= (unsigned long long)(c & 0x7f) << shift;
        if (c < 0x80) {
            *v = r;
            return 0;
        }
    }
    return -1;
}

static int cmp_off(const void *a, const void *b)
{
    Dwarf_Off x = *(const Dwarf_Off *)a, y = *(const Dwarf_Off *)b;
    return x < y ? -1 : x > y;
}

/* libdw parses a unit's abbreviation table lazily from the unit's offset and keeps what it
 * parsed per unit: units pointing into the middle of one long table would make it parse and
 * keep that table once per unit. Compilers write one table per unit (or share one): refused
 * here are tables that run into the next one or past the section, at the cost of one pass. */
static int check_abbrevs(Reader *self)
{
    const unsigned char *b;
    size_t n = section_size(self->elf, ".debug_abbrev", &b);
    size_t cap = 256, count = 0;
    Dwarf_Off *offs = PyMem_Malloc(cap * sizeof *offs);
    Dwarf_Off off = 0, next, abbrev;
    size_t hsize;
    if (offs == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    while (dwarf_next_unit(self->dw, off, &next, &hsize, NULL, &abbrev, NULL, NULL, NULL, NULL) == 0) {
        if (count == cap) {
            Dwarf_Off *more = PyMem_Realloc(offs, 2 * cap * sizeof *offs);
            if (more == NULL) {
                PyMem_Free(offs);
                PyErr_NoMemory();
                return -1;
            }
            offs = more;
            cap *= 2;
        }
        offs[count++] = abbrev;
        off = next;
    }
    qsort(offs, count, sizeof *offs, cmp_off);
    int rc = 0;
    for (size_t i = 0; i < count && rc == 0; i++) {
        if (i > 0 && offs[i] == offs[i - 1])
            continue;
        size_t limit = n, p = offs[i];
        for (size_t j = i + 1; j < count; j++)
            if (offs[j] != offs[i]) {
                limit = offs[j] < n ? offs[j] : n;
                break;
            }
        unsigned long long code, tag, at, form, skip;
        for (;;) {
            if (p >= limit || uleb(b, limit, &p, &code) < 0)
                goto bad;
            if (code == 0)
                break;
            if (uleb(b, limit, &p, &tag) < 0 || p >= limit)
                goto bad;
            p++;                                    /* DW_CHILDREN_* */
            for (int nattr = 0;; nattr++) {
                if (uleb(b, limit, &p, &at) < 0 || uleb(b, limit, &p, &form) < 0)
                    goto bad;
                if (at == 0 && form == 0)
                    break;
                if (nattr >= MAX_ABBREV_ATTRS) {
                    error_at_as(Unsuitable, ".debug_abbrev", offs[i], "abbreviation table",
                                "an abbreviation with more attributes than any compiler writes");
                    rc = -1;
                    goto done;
                }
                if (form == DW_FORM_implicit_const && uleb(b, limit, &p, &skip) < 0)
                    goto bad;
            }
        }
        continue;
bad:
        error_at_as(Unsuitable, ".debug_abbrev", offs[i], "abbreviation table", "runs into the next table or past "
                    "the section (abbreviation tables overlap beyond any real file)");
        rc = -1;
    }
done:
    PyMem_Free(offs);
    return rc;
}

static int Reader_init(Reader *self, PyObject *args, PyObject *kw)
{
    PyObject *buf;
    if (!PyArg_ParseTuple(args, "OLL", &buf, &self->string_budget, &self->range_budget))
        return -1;
    if (PyObject_GetBuffer(buf, &self->view, PyBUF_SIMPLE) < 0)
        return -1;
    self->have_view = 1;
    self->strings = PyDict_New();
    if (self->strings == NULL)
        return -1;
    elf_version(EV_CURRENT);
    self->elf = elf_memory((char *)self->view.buf, (size_t)self->view.len);
    if (self->elf == NULL) {
        PyErr_Format(DwarfError, "not an ELF image libelf reads: %s", elf_errmsg(-1));
        return -1;
    }
    self->dw = dwarf_begin_elf(self->elf, DWARF_C_READ, NULL);
    if (self->dw == NULL) {
        PyErr_Format(DwarfError, "libdw cannot read the DWARF: %s", dwarf_errmsg(-1));
        return -1;
    }
    return check_abbrevs(self);
}

static void Reader_dealloc(Reader *self)
{
    if (self->dw)
        dwarf_end(self->dw);
    if (self->elf)
        elf_end(self->elf);
    if (self->have_view)
        PyBuffer_Release(&self->view);
    Py_XDECREF(self->strings);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int ready(Reader *self)
{
    if (self->dw == NULL) {
        PyErr_SetString(DwarfError, "Reader not initialised");
        return 0;
    }
    return 1;
}

static PyObject *Reader_units(Reader *self, PyObject *unused)
{
    if (!ready(self))
        return NULL;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        return NULL;
    Dwarf_Off off = 0, next;
    size_t hsize;
    int rc;
    while ((rc = dwarf_next_unit(self->dw, off, &next, &hsize, NULL, NULL, NULL, NULL, NULL, NULL)) == 0) {
        Dwarf_Die cu;
        PyObject *name;
        if (dwarf_offdie(self->dw, off + hsize, &cu) == NULL) {
            fail("unreadable unit DIE", off + hsize);
            Py_DECREF(out);
            return NULL;
        }
        name = attr_string(self, &cu, DW_AT_name);
        PyObject *t = name ? Py_BuildValue("(KN)", (unsigned long long)off, name) : NULL;
        if (t == NULL || PyList_Append(out, t) < 0) {
            Py_XDECREF(t);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(t);
        off = next;
    }
    if (rc < 0) {
        fail("unreadable unit header", off);
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

static PyObject *Reader_unit(Reader *self, PyObject *arg)
{
    if (!ready(self))
        return NULL;
    unsigned long long off = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred())
        return NULL;
    Dwarf_Off next;
    size_t hsize;
    Dwarf_Half version;
    Dwarf_Off abbrev;
    uint8_t asz, osz;
    if (dwarf_next_unit(self->dw, off, &next, &hsize, &version, &abbrev, &asz, &osz, NULL, NULL) != 0) {
        fail("unreadable unit header", off);
        return NULL;
    }
    Dwarf_Die cu;
    if (dwarf_offdie(self->dw, off + hsize, &cu) == NULL) {
        fail("unreadable unit DIE", off + hsize);
        return NULL;
    }
    int tag = dwarf_tag(&cu);
    if (tag != DW_TAG_compile_unit && tag != DW_TAG_partial_unit)
        Py_RETURN_NONE;
    Walk w = {self, PyList_New(0), PyList_New(0)};
    PyObject *name = NULL, *dir = NULL, *producer = NULL, *stmt = NULL, *sob = NULL, *res = NULL;
    if (w.subprograms == NULL || w.inlined == NULL)
        goto out;
    if ((name = attr_string(self, &cu, DW_AT_name)) == NULL || (dir = attr_string(self, &cu, DW_AT_comp_dir)) == NULL ||
        (producer = attr_string(self, &cu, DW_AT_producer)) == NULL)
        goto out;
    {
        Dwarf_Attribute a;
        Dwarf_Word v;
        if (dwarf_attr(&cu, DW_AT_stmt_list, &a) != NULL && dwarf_formudata(&a, &v) == 0)
            stmt = PyLong_FromUnsignedLongLong(v);
        else {
            stmt = Py_None;
            Py_INCREF(stmt);
        }
        if (dwarf_attr(&cu, DW_AT_str_offsets_base, &a) != NULL && dwarf_formudata(&a, &v) == 0)
            sob = PyLong_FromUnsignedLongLong(v);
        else {
            sob = Py_None;
            Py_INCREF(sob);
        }
        if (stmt == NULL || sob == NULL)
            goto out;
    }
    if (dwarf_haschildren(&cu) && walk(&w, &cu, -1, 0, -1, 0) < 0)
        goto out;
    res = Py_BuildValue("(iiiOOOOOOO)", (int)version, (int)asz, (int)osz, name, dir, producer, stmt, sob,
                        w.subprograms, w.inlined);
out:
    Py_XDECREF(name);
    Py_XDECREF(dir);
    Py_XDECREF(producer);
    Py_XDECREF(stmt);
    Py_XDECREF(sob);
    Py_XDECREF(w.subprograms);
    Py_XDECREF(w.inlined);
    return res;
}

static PyMethodDef Reader_methods[] = {
    {"units", (PyCFunction)Reader_units, METH_NOARGS, "[(unit offset, DW_AT_name)] of every unit"},
    {"unit", (PyCFunction)Reader_unit, METH_O, "the inline facts of the unit at this offset (see the module)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ReaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "analyzer.dwarf._libdw.Reader",
    .tp_basicsize = sizeof(Reader),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "libdw over an ELF image in a buffer",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Reader_init,
    .tp_dealloc = (destructor)Reader_dealloc,
    .tp_methods = Reader_methods,
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_libdw", "libdw-backed inline facts", -1, NULL};

PyMODINIT_FUNC PyInit__libdw(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyType_Ready(&ReaderType) < 0)
        return NULL;
    DwarfError = PyErr_NewException("analyzer.dwarf._libdw.DwarfError", PyExc_ValueError, NULL);
    Unsuitable = PyErr_NewException("analyzer.dwarf._libdw.Unsuitable", DwarfError, NULL);
    Py_INCREF(&ReaderType);
    PyModule_AddObject(m, "Reader", (PyObject *)&ReaderType);
    PyModule_AddObject(m, "DwarfError", DwarfError);
    PyModule_AddObject(m, "Unsuitable", Unsuitable);
    return m;
}
