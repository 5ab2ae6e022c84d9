/* libsp_beside.so: the library with_library.c links, installed beside the plugin. */
#ifndef SANDPOOL_TESTS_BESIDE_H
#define SANDPOOL_TESTS_BESIDE_H

#include <stddef.h>

/* Writes the upper-cased `in` followed by " (from beside)" into `out` (at most `cap`
 * bytes, truncated); returns the bytes written. */
size_t sp_beside_shout(const char* in, size_t len, char* out, size_t cap);

#endif
