/*
 * The C JSON writer (core/src/base/json.c) driven from standard input, so
 * that tests/tools/test_json_text.py can hold Python's JSON helper against
 * it on any document: each input line is one call of the writer, in the
 * style of the commands' documents (RBP_JSON_INDENT1), and the document it
 * builds is written to standard output as it is.
 *
 *   {  }  [  ]        an object or array, opened or closed
 *   k HEX             a key (its bytes in hex)
 *   s HEX             a string value (its bytes in hex: any bytes)
 *   u N  /  i N       an unsigned / a signed 64-bit integer
 *   f TEXT            a number already formatted (a float)
 *   t  /  F  /  z     true / false / null
 *
 * Exit status: 0, or 2 for a line it does not know.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"

/* The bytes of a hex string, into out; their count. */
static size_t unhex(const char *hex, char *out)
{
    size_t n = 0;
    for (; hex[0] && hex[1] && hex[0] != '\n'; hex += 2) {
        char pair[3] = {hex[0], hex[1], '\0'};
        out[n++] = (char)strtoul(pair, NULL, 16);
    }
    return n;
}

/* One line's call; false for a line it does not know. */
static bool apply(rbp_json *j, char *line, char *bytes)
{
    const char *arg = line[0] && line[1] == ' ' ? line + 2 : "";
    switch (line[0]) {
    case '{': rbp_json_object(j); return true;
    case '}': rbp_json_object_end(j); return true;
    case '[': rbp_json_array(j); return true;
    case ']': rbp_json_array_end(j); return true;
    case 't': rbp_json_bool(j, true); return true;
    case 'F': rbp_json_bool(j, false); return true;
    case 'z': rbp_json_null(j); return true;
    case 'u': rbp_json_u64(j, strtoull(arg, NULL, 10)); return true;
    case 'i': rbp_json_i64(j, strtoll(arg, NULL, 10)); return true;
    case 'f':
        line[strcspn(line, "\n")] = '\0';
        rbp_json_number_text(j, arg);
        return true;
    case 'k':
        bytes[unhex(arg, bytes)] = '\0';   /* a key is a C string: the helper's keys hold no NUL */
        rbp_json_key(j, bytes);
        return true;
    case 's': rbp_json_strn(j, bytes, unhex(arg, bytes)); return true;
    default: return false;
    }
}

int main(void)
{
    rbp_strbuf b;
    rbp_sb_init(&b);
    rbp_json j;
    rbp_json_init(&j, &b, RBP_JSON_INDENT1);
    size_t cap = 0;
    char *line = NULL;
    while (getline(&line, &cap, stdin) > 0) {
        char *bytes = malloc(cap / 2 + 1);
        bool ok = bytes && apply(&j, line, bytes);
        free(bytes);
        if (!ok) {
            fprintf(stderr, "json_writer_ops: not a writer call: %s", line);
            return 2;
        }
    }
    free(line);
    char *doc = rbp_sb_take(&b);
    if (!doc) return 1;
    fputs(doc, stdout);
    free(doc);
    return 0;
}
