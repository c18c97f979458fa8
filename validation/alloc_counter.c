/*
 * alloc_counter.c -- LD_PRELOAD shim that counts live heap bytes, by path.
 *
 * Independent cross-check for headroom's validation harness (see README.md).
 * It interposes the malloc family (malloc, calloc, realloc, reallocarray, free,
 * posix_memalign, aligned_alloc, memalign, valloc, pvalloc) and anonymous
 * mmap/munmap/mremap, forwards to glibc (__libc_* entry points / raw syscalls,
 * so no dlsym bootstrap is needed) and keeps, per category, the live byte
 * count (sum of *requested* sizes of blocks not yet freed) and its peak:
 *
 *   AC_C10     posix_memalign called from inside libc10.so, i.e. c10::alloc_cpu
 *              (the DefaultCPUAllocator behind every CPU tensor storage; it uses
 *              posix_memalign(&p, 64, nbytes))
 *   AC_ALIGNED every other aligned allocation (posix_memalign/aligned_alloc/
 *              memalign/valloc/pvalloc not called from libc10.so: oneDNN,
 *              libstdc++ aligned new, ...)
 *   AC_MALLOC  malloc/calloc/realloc/reallocarray (Python objects > 512 B,
 *              std::vector, BLAS work arrays, profiler buffers, ...)
 *   AC_MMAP    anonymous mmap called directly by user code (Python arenas,
 *              JIT code buffers, ...). glibc's own internal mmap for large
 *              malloc blocks is NOT seen here (it is counted in AC_MALLOC).
 *
 * Python reads the counters with ctypes (the symbols are global because the
 * library is preloaded):  ac_read(int64_t out[AC_NFIELDS]), ac_reset_peaks(),
 * ac_big_events(...).  Build: see Makefile (cc -shared -fPIC -O2 ... -ldl).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

enum { AC_C10 = 0, AC_ALIGNED = 1, AC_MALLOC = 2, AC_MMAP = 3, AC_NCAT = 4 };

/* ---- counters ---------------------------------------------------------- */
static int64_t g_cur[AC_NCAT], g_peak[AC_NCAT], g_calls[AC_NCAT];
static int64_t g_unmatched_free, g_table_full;

/* ---- big-allocation log (non-c10 allocations >= g_big_threshold) ------- */
#define AC_BIG_MAX 4096
typedef struct { int64_t bytes; uint64_t caller; int64_t cat; } big_ev_t;
static big_ev_t g_big[AC_BIG_MAX];
static int64_t g_nbig;
static int64_t g_big_threshold = 1 << 20;

/* ---- spinlock --------------------------------------------------------- */
static volatile char g_lock;
static inline void lock(void) { while (__atomic_test_and_set(&g_lock, __ATOMIC_ACQUIRE)) { } }
static inline void unlock(void) { __atomic_clear(&g_lock, __ATOMIC_RELEASE); }

/* ---- pointer -> (size, category) open-addressing table ----------------- */
#define TBL_BITS 24
#define TBL_SIZE (1UL << TBL_BITS)
typedef struct { uintptr_t key; uint64_t val; } slot_t; /* val = size<<2 | cat */
static slot_t *g_tbl;

static inline size_t h(uintptr_t p) { return (size_t)((p >> 4) * 0x9E3779B97F4A7C15ULL >> (64 - TBL_BITS)); }

static int tbl_init(void) {
  if (g_tbl) return 1;
  void *m = (void *)syscall(SYS_mmap, NULL, TBL_SIZE * sizeof(slot_t), PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return 0;
  g_tbl = (slot_t *)m;
  return 1;
}

static void tbl_put(uintptr_t k, uint64_t v) {
  if (!tbl_init()) return;
  size_t i = h(k);
  for (size_t n = 0; n < TBL_SIZE; n++, i = (i + 1) & (TBL_SIZE - 1)) {
    if (g_tbl[i].key == 0 || g_tbl[i].key == k) { g_tbl[i].key = k; g_tbl[i].val = v; return; }
  }
  g_table_full++;
}

/* removes k; returns 1 and its value if present (backward-shift deletion) */
static int tbl_take(uintptr_t k, uint64_t *v) {
  if (!g_tbl) return 0;
  size_t i = h(k);
  for (;;) {
    if (g_tbl[i].key == 0) return 0;
    if (g_tbl[i].key == k) break;
    i = (i + 1) & (TBL_SIZE - 1);
  }
  *v = g_tbl[i].val;
  size_t j = i;
  for (;;) {
    j = (j + 1) & (TBL_SIZE - 1);
    if (g_tbl[j].key == 0) break;
    size_t home = h(g_tbl[j].key);
    /* can slot j move to hole i?  yes unless home lies cyclically in (i, j] */
    int in_range = (i <= j) ? (home > i && home <= j) : (home > i || home <= j);
    if (!in_range) { g_tbl[i] = g_tbl[j]; i = j; }
  }
  g_tbl[i].key = 0; g_tbl[i].val = 0;
  return 1;
}

static inline void count_add(void *p, size_t n, int cat, uintptr_t caller) {
  if (!p) return;
  lock();
  tbl_put((uintptr_t)p, ((uint64_t)n << 2) | (uint64_t)cat);
  g_cur[cat] += (int64_t)n;
  g_calls[cat]++;
  if (g_cur[cat] > g_peak[cat]) g_peak[cat] = g_cur[cat];
  if (cat != AC_C10 && (int64_t)n >= g_big_threshold && g_nbig < AC_BIG_MAX) {
    g_big[g_nbig].bytes = (int64_t)n; g_big[g_nbig].caller = caller; g_big[g_nbig].cat = cat; g_nbig++;
  }
  unlock();
}

static inline void count_del(void *p) {
  if (!p) return;
  uint64_t v;
  lock();
  if (tbl_take((uintptr_t)p, &v)) g_cur[v & 3] -= (int64_t)(v >> 2);
  else g_unmatched_free++;
  unlock();
}

/* ---- is the caller inside libc10.so? ---------------------------------- */
static uintptr_t g_c10_lo, g_c10_hi; /* text range of libc10.so once loaded */
static int find_c10_cb(struct dl_phdr_info *info, size_t sz, void *data) {
  (void)sz; (void)data;
  const char *n = info->dlpi_name;
  if (!n || !strstr(n, "/libc10.so")) return 0;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
      g_c10_lo = info->dlpi_addr + ph->p_vaddr;
      g_c10_hi = g_c10_lo + ph->p_memsz;
      return 1;
    }
  }
  return 0;
}
static int g_in_lookup;
static inline int from_c10(uintptr_t caller) {
  if (!g_c10_lo && !g_in_lookup) { g_in_lookup = 1; dl_iterate_phdr(find_c10_cb, NULL); g_in_lookup = 0; }
  return g_c10_lo && caller >= g_c10_lo && caller < g_c10_hi;
}

/* ---- interposed entry points ------------------------------------------ */
#define CALLER ((uintptr_t)__builtin_return_address(0))

void *malloc(size_t n) { void *p = __libc_malloc(n); count_add(p, n, AC_MALLOC, CALLER); return p; }

void *calloc(size_t a, size_t b) {
  void *p = __libc_calloc(a, b);
  count_add(p, a * b, AC_MALLOC, CALLER);
  return p;
}

void free(void *p) { if (!p) return; count_del(p); __libc_free(p); }

void *realloc(void *old, size_t n) {
  if (!old) return malloc(n);
  if (n == 0) { free(old); return NULL; }
  uint64_t v = 0; int had;
  lock(); had = tbl_take((uintptr_t)old, &v); unlock();
  void *p = __libc_realloc(old, n);
  if (!p) { /* old block untouched: restore */
    if (had) { lock(); tbl_put((uintptr_t)old, v); unlock(); }
    return NULL;
  }
  if (had) { lock(); g_cur[v & 3] -= (int64_t)(v >> 2); unlock(); }
  count_add(p, n, AC_MALLOC, CALLER);
  return p;
}

void *reallocarray(void *old, size_t a, size_t b) {
  size_t n;
  if (__builtin_mul_overflow(a, b, &n)) { errno = ENOMEM; return NULL; }
  return realloc(old, n);
}

static inline void *aligned_impl(size_t al, size_t n, uintptr_t caller) {
  void *p = __libc_memalign(al, n);
  count_add(p, n, from_c10(caller) ? AC_C10 : AC_ALIGNED, caller);
  return p;
}

int posix_memalign(void **out, size_t al, size_t n) {
  if (al % sizeof(void *) != 0 || (al & (al - 1)) != 0 || al == 0) return EINVAL;
  int saved = errno;
  void *p = aligned_impl(al, n, CALLER);
  if (!p) { errno = saved; return ENOMEM; }
  *out = p;
  return 0;
}
void *aligned_alloc(size_t al, size_t n) { return aligned_impl(al, n, CALLER); }
void *memalign(size_t al, size_t n) { return aligned_impl(al, n, CALLER); }
void *valloc(size_t n) { return aligned_impl((size_t)sysconf(_SC_PAGESIZE), n, CALLER); }
void *pvalloc(size_t n) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  return aligned_impl(pg, (n + pg - 1) / pg * pg, CALLER);
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  void *p = (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
  if (p != MAP_FAILED && (flags & MAP_ANONYMOUS)) count_add(p, len, AC_MMAP, CALLER);
  return p;
}
void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
    __attribute__((alias("mmap")));

int munmap(void *addr, size_t len) {
  long r = syscall(SYS_munmap, addr, len);
  if (r == 0) {
    uint64_t v;
    lock();
    if (tbl_take((uintptr_t)addr, &v)) {
      size_t had = (size_t)(v >> 2);
      g_cur[v & 3] -= (int64_t)(len < had ? len : had);
      /* partial unmap from the front: keep the tail tracked */
      if (len < had) tbl_put((uintptr_t)addr + len, ((uint64_t)(had - len) << 2) | (v & 3));
    }
    unlock();
  }
  return (int)r;
}

void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
  void *newaddr = NULL;
  if (flags & MREMAP_FIXED) {
    __builtin_va_list ap; __builtin_va_start(ap, flags);
    newaddr = __builtin_va_arg(ap, void *);
    __builtin_va_end(ap);
  }
  void *p = (void *)syscall(SYS_mremap, old, old_len, new_len, flags, newaddr);
  if (p != MAP_FAILED) {
    uint64_t v;
    lock();
    if (tbl_take((uintptr_t)old, &v)) {
      g_cur[v & 3] -= (int64_t)(v >> 2);
      unlock();
      count_add(p, new_len, (int)(v & 3), CALLER);
    } else {
      unlock();
    }
  }
  return p;
}

/* ---- API for Python (ctypes) ------------------------------------------ */
#define AC_NFIELDS 14
/* out: cur[4], peak[4], calls[4], unmatched_free, table_full */
void ac_read(int64_t *out) {
  lock();
  for (int c = 0; c < AC_NCAT; c++) { out[c] = g_cur[c]; out[4 + c] = g_peak[c]; out[8 + c] = g_calls[c]; }
  out[12] = g_unmatched_free; out[13] = g_table_full;
  unlock();
}
void ac_reset_peaks(void) {
  lock();
  for (int c = 0; c < AC_NCAT; c++) g_peak[c] = g_cur[c];
  g_nbig = 0;
  unlock();
}
int ac_nfields(void) { return AC_NFIELDS; }
void ac_set_big_threshold(int64_t b) { g_big_threshold = b; }
/* copies up to n big events (bytes, caller address, category); returns count */
int64_t ac_big_events(int64_t *out, int64_t n) {
  lock();
  int64_t k = g_nbig < n ? g_nbig : n;
  for (int64_t i = 0; i < k; i++) {
    out[3 * i] = g_big[i].bytes; out[3 * i + 1] = (int64_t)g_big[i].caller; out[3 * i + 2] = g_big[i].cat;
  }
  unlock();
  return k;
}
