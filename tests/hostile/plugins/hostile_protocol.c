/* The protocol-abuse plugin of the hostile suite (tests/hostile/protocol_test.cpp): a worker
 * that keeps the channel's framing but breaks its conversation, and a plugin that declares
 * what it should not. Strict C99 against <sandpool/plugin.h> only.
 *
 * Types (declared unless the config says otherwise, see below):
 *   echo    result = payload (prefixed "captured: " when the config has "capture")
 *   forge   "R B H T K N P THEN HEX": appends N records of kind K to the result ring, each
 *           carrying the bytes HEX decodes to (with the task's id over their first 8 bytes
 *           when P is 1), waiting for room as the manager reads and ringing its doorbell
 *           (fd 4). The ring's offset and size are the header's u64 words at offsets R and
 *           B, its head and tail words are at H and T (offsetof from the test, so this file
 *           needs no copy of the layout). Then THEN: "wait" waits up to 60 s to be killed
 *           (returning would let the host write at the ring position it keeps privately,
 *           which the forged records moved), "exit" exits at once.
 *
 * Init finds the shared region in /proc/self/maps (before seccomp). plugin_config:
 *   "declare_hex": "HEX,HEX,..."  the declared types, each hex-encoded (any bytes)
 *   "declare_many": N             N types "t0" .. "t<N-1>" (at most 4096)
 *   "capture"                     see echo */
#define _GNU_SOURCE
#include <sandpool/plugin.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_TYPES 4096
#define MAX_TYPE_BYTES 512

static const char* default_types[] = {"echo", "forge", NULL};
static char* declared[MAX_TYPES + 1];
static const sp_host_api* host;
static unsigned char* region;
static int capture;

SP_EXPORT uint32_t sp_plugin_abi_version(void) { return SP_PLUGIN_ABI_VERSION; }

SP_EXPORT const char* const* sp_plugin_task_types(void) {
  return declared[0] != NULL ? (const char* const*)declared : default_types;
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* Decodes hex digits from *at until a character that is not one; returns the byte count, or
 * -1 when it would pass `size` or the digits are odd. */
static long unhex(const char** at, unsigned char* out, size_t size) {
  size_t n = 0;
  while (hex_value(**at) >= 0) {
    int hi = hex_value((*at)[0]), lo = hex_value((*at)[1]);
    if (lo < 0 || n == size) return -1;
    out[n++] = (unsigned char)(hi * 16 + lo);
    *at += 2;
  }
  return (long)n;
}

/* The value after "key": in the config (spaces skipped), or NULL. */
static const char* value_of(const char* config, const char* key) {
  const char* at = strstr(config, key);
  if (at == NULL) return NULL;
  at += strlen(key);
  while (*at == ' ') ++at;
  return at;
}

/* "declare_hex": "HEX,HEX" or "declare_many": N from the config; 0, or 1 when malformed. */
static int read_declared(const char* config) {
  const char* at = value_of(config, "\"declare_hex\":");
  const char* many = value_of(config, "\"declare_many\":");
  size_t n = 0;
  if (many != NULL) {
    long count = strtol(many, NULL, 10);
    for (; count > 0 && n < MAX_TYPES && (long)n < count; ++n) {
      declared[n] = malloc(16);
      if (declared[n] == NULL) return 1;
      snprintf(declared[n], 16, "t%lu", (unsigned long)n);
    }
    return 0;
  }
  if (at == NULL || *at != '"') return at == NULL ? 0 : 1;
  ++at;
  while (n < MAX_TYPES) {
    unsigned char buf[MAX_TYPE_BYTES];
    long len = unhex(&at, buf, sizeof buf);
    if (len < 0) return 1;
    declared[n] = malloc((size_t)len + 1);
    if (declared[n] == NULL) return 1;
    memcpy(declared[n], buf, (size_t)len);
    declared[n][len] = '\0';
    ++n;
    if (*at != ',') break;
    ++at;
  }
  return 0;
}

SP_EXPORT int sp_plugin_init(const sp_host_api* h, const char* config_json, size_t config_len,
                             void** state) {
  char line[512];
  FILE* maps = fopen("/proc/self/maps", "r");
  (void)config_len;
  host = h;
  *state = NULL;
  capture = strstr(config_json, "\"capture\"") != NULL;
  if (maps == NULL) return 1;
  while (fgets(line, sizeof line, maps) != NULL) {
    unsigned long start = 0;
    if (strstr(line, "memfd:sandpool-region") != NULL && sscanf(line, "%lx-", &start) == 1) {
      region = (unsigned char*)start;
      break;
    }
  }
  fclose(maps);
  if (region == NULL) {
    static const char msg[] = "hostile_protocol: shared region not found in /proc/self/maps";
    host->log(NULL, 3, msg, sizeof msg - 1);
    return 1;
  }
  return read_declared(config_json);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

static void ring_doorbell(void) {
  const uint64_t one = 1;
  if (write(4, &one, sizeof one) < 0) return;
}

struct ring {
  unsigned char* base;
  uint64_t bytes;
  uint64_t* head;
  uint64_t* tail;
};

/* Appends one record (header + body, padded to 8) once the manager has made room; returns
 * 0, or -1 when no room came within 30 s. */
static int append_record(const struct ring* r, uint16_t kind, const unsigned char* body,
                         size_t len) {
  const uint64_t need = 8 + ((len + 7) & ~(uint64_t)7);
  const uint64_t head = __atomic_load_n(r->head, __ATOMIC_RELAXED);
  const double until = now_s() + 30.0;
  uint32_t header[2];
  size_t i;
  while (head + need - __atomic_load_n(r->tail, __ATOMIC_ACQUIRE) > r->bytes) {
    if (now_s() > until) return -1;
    ring_doorbell();
    nap_us(200);
  }
  header[0] = (uint32_t)len;
  header[1] = kind; /* kind in the low 16 bits, flags 0 */
  for (i = 0; i < sizeof header; ++i) {
    r->base[(head + i) & (r->bytes - 1)] = ((const unsigned char*)header)[i];
  }
  for (i = 0; i < len; ++i) r->base[(head + 8 + i) & (r->bytes - 1)] = body[i];
  __atomic_store_n(r->head, head + need, __ATOMIC_RELEASE);
  return 0;
}

/* "forge ...": see the top of the file. Returns SP_FAIL for a malformed order. */
static int forge(const sp_task* task) {
  static unsigned char body[1u << 20];
  char* args = malloc(task->payload_len + 1);
  unsigned long ring_at, bytes_at, head_at, tail_at, kind, count, patch, n;
  uint64_t ring_offset;
  char then[8];
  int used = 0;
  const char* hex;
  long len;
  struct ring r;
  if (args == NULL) return SP_FAIL;
  memcpy(args, task->payload, task->payload_len);
  args[task->payload_len] = '\0';
  if (sscanf(args, "%lu %lu %lu %lu %lu %lu %lu %7s %n", &ring_at, &bytes_at, &head_at, &tail_at,
             &kind, &count, &patch, then, &used) != 8) {
    free(args);
    return SP_FAIL;
  }
  hex = args + used;
  len = unhex(&hex, body, sizeof body);
  free(args);
  if (len < 8) return SP_FAIL;
  if (patch == 1) memcpy(body, &task->id, sizeof task->id);
  memcpy(&ring_offset, region + ring_at, sizeof ring_offset);
  memcpy(&r.bytes, region + bytes_at, sizeof r.bytes);
  if (r.bytes == 0 || (r.bytes & (r.bytes - 1)) != 0) return SP_FAIL;
  r.base = region + ring_offset;
  r.head = (uint64_t*)(region + head_at);
  r.tail = (uint64_t*)(region + tail_at);
  for (n = 0; n < count; ++n) {
    if (append_record(&r, (uint16_t)kind, body, (size_t)len) != 0) break;
    if (n % 8 == 7) ring_doorbell();
  }
  ring_doorbell();
  if (strcmp(then, "exit") == 0) _exit(0);
  {
    const double until = now_s() + 60.0;
    while (now_s() < until) nap_us(10 * 1000);
  }
  return SP_FAIL;
}

SP_EXPORT int sp_plugin_handle(void* state, const sp_task* task, sp_call* call) {
  static const char prefix[] = "captured: ";
  (void)state;
  if (task->type_len == 5 && memcmp(task->type, "forge", 5) == 0) return forge(task);
  if (capture) host->write_result(call, prefix, sizeof prefix - 1);
  host->write_result(call, task->payload, task->payload_len);
  return SP_OK;
}
