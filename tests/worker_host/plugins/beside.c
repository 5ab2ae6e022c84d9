/* libsp_beside.so (beside.h). */
#include "beside.h"

#include <string.h>

__attribute__((visibility("default"))) size_t sp_beside_shout(const char* in, size_t len, char* out,
                                                              size_t cap) {
  static const char tail[] = " (from beside)";
  size_t n = 0;
  for (size_t i = 0; i < len && n < cap; ++i) {
    const char c = in[i];
    out[n++] = (c >= 'a' && c <= 'z') ? (char)(c - 'a' + 'A') : c;
  }
  for (size_t i = 0; i + 1 < sizeof tail && n < cap; ++i) out[n++] = tail[i];
  return n;
}
