/*
 * The JSON-lines writer of the heap dump, apart from the heap walker so the
 * format can be tested on its own: one record (everything a line says about
 * an object) in, one line in ObjectSpace.dump_all's format out, streamed
 * through a FILE* in large buffered writes. Field names, order and the
 * rules for optional fields follow the target version's objspace_dump.c;
 * strings are escaped by the one JSON escaper (base/json.h), which escapes
 * what dump_append_string_value escapes and, where dump_all would write a
 * byte that is not UTF-8 (a String whose coderange says 7-bit but whose
 * bytes are not), writes \ufffd, so the dump stays valid JSON.
 */
#ifndef RBP_HEAP_DUMP_H
#define RBP_HEAP_DUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "base/strbuf.h"
#include "context/release.h"

typedef struct rbp_dump_writer {
    FILE *f;
    rbp_strbuf line;        /* pending output, flushed past a threshold */
    uint64_t bytes;         /* written to f so far */
    bool error;             /* a write failed (sticky) */
} rbp_dump_writer;

/* Reads n bytes of a string's contents at offset off. */
typedef bool (*rbp_dump_read_fn)(void *ctx, uint64_t off, void *buf, size_t n);

typedef struct rbp_dump_rec {
    const rbp_release *rel;     /* the target's release: its dump_all rules (rel->dump) */
    uint64_t address;
    int type;                   /* T_ type */
    int imemo_type;
    uint64_t klass;             /* written as "class" when nonzero */
    bool frozen;
    uint64_t shape_id;          /* written from 3.2 on, with slot_size */
    uint32_t slot_size;
    /* T_STRING and T_SYMBOL (the symbol's name) */
    bool embedded, fstring, chilled, shared, broken;
    uint64_t bytesize;
    bool has_capacity;
    uint64_t capacity;
    bool has_value;             /* the value is written (dump_all's rules, decided by the caller) */
    rbp_dump_read_fn read_value;
    void *value_ctx;
    const char *encoding;       /* NULL: not written (ASCII-8BIT) */
    int coderange;              /* 0 unknown, 1 7bit, 2 valid, 3 broken; written from 3.3 on */
    /* T_ARRAY */
    uint64_t length;
    /* T_HASH */
    uint64_t size;
    bool has_default;
    uint64_t default_value;
    /* T_OBJECT */
    uint64_t ivars;
    bool too_complex;
    /* T_CLASS, T_MODULE, T_ICLASS */
    uint64_t superclass;
    const char *name;
    const char *real_class_name;
    bool singleton;
    bool has_variation_count;   /* T_CLASS, written from 3.3 on */
    int variation_count;
    /* T_DATA, T_FILE, T_FLOAT */
    const char *struct_name;    /* typed data's wrap_struct_name */
    bool has_fd;
    int fd;
    bool has_float;
    double float_value;
    /* every type */
    const uint64_t *refs;
    size_t nrefs;
    uint64_t memsize;
} rbp_dump_rec;

void rbp_dump_writer_init(rbp_dump_writer *w, FILE *f);
/* Appends one object's line (ends with '\n'). */
void rbp_dump_write(rbp_dump_writer *w, const rbp_dump_rec *r);
/* Writes what is pending; false if any write failed. */
bool rbp_dump_writer_flush(rbp_dump_writer *w);
void rbp_dump_writer_free(rbp_dump_writer *w);

/* dump_all's type names ("STRING", "IMEMO"...) and imemo names ("iseq"). */
const char *rbp_dump_type_name(int type);
const char *rbp_dump_imemo_name(int imemo_type, const rbp_release *rel);

#endif
