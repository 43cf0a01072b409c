/*
 * libcxlpod -- guest library for the cxlpod CXL shared-memory pod.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The pool seen by a guest is one mapping of /dev/daxN.M, split in two areas:
 *
 *   coherent window   [0, coherent_size)       hardware coherent across hosts;
 *                                              plain loads/stores and atomics
 *                                              just work (like local RAM).
 *   non-coherent area [coherent_size, size)    every host works on its own
 *                                              cached image of the pool:
 *                                              its stores stay private until
 *                                              written back, its loads return
 *                                              its own (possibly stale) copy
 *                                              until it invalidates.
 *
 * Which call is needed when (the whole protocol, modeled on libpmem2's
 * flush + drain):
 *
 *   PUBLISH (writer)   store data in the non-coherent area;
 *                      cxlpod_writeback(p, data, len);     (copy dirty lines
 *                                                           to the pool)
 *                      cxlpod_fence(p);                    (wait for them)
 *                      then store the flag / index in the COHERENT window
 *                      (a release store or an atomic).
 *
 *   CONSUME (reader)   see the flag / index in the coherent window (acquire);
 *                      cxlpod_invalidate(p, data, len);    (drop the stale
 *                                                           copy; complete on
 *                                                           return)
 *                      then load the data.
 *
 *   BOTH               cxlpod_flush() = writeback + invalidate of a range,
 *                      e.g. to hand a buffer back and forth or before a
 *                      read-modify-write of shared data.
 *
 * Rules that are easy to get wrong:
 *   - Never publish a flag in the non-coherent area: other hosts polling it
 *     never see it change unless they invalidate on every poll.
 *   - Write-back is per 64-byte line and copies the WHOLE line: two hosts
 *     writing different bytes of one non-coherent line clobber each other
 *     (false sharing loses data).  Give every writer its own lines.
 *   - Invalidate writes a dirty line back first (like clflush), so it never
 *     loses the host's own stores, but it can clobber another host's data if
 *     this host dirtied the same line.
 *   - Atomics (C11 / __atomic builtins, or the cxlpod_atomic_* helpers) are
 *     only cross-host atomic in the coherent window, and only if the device
 *     reports CXLPOD_CAP_ATOMICS.  In the non-coherent area they are atomic
 *     only within this host's image.
 *   - A host that crashes loses everything it has not written back.
 *
 * Ranges: coherence operations take a virtual address inside the mapping and
 * a length; the range is rounded out to whole lines.  A length of 0 is a
 * no-op.  Parts of the range in the coherent window need no operation and
 * are skipped.  A range outside the mapping fails with EINVAL.
 *
 * Methods: the coherence operations are carried out either by the device's
 * doorbell registers (BAR5; works everywhere, one MMIO round trip per call)
 * or by native instructions (clwb / clflushopt + sfence; only when the CPU
 * has them AND the device reports CXLPOD_CAP_NATIVE_OPS, i.e. the emulator
 * routes them to the device).  The method is chosen explicitly with
 * cxlpod_set_method() (or CXLPOD_METHOD=doorbell|native) and reported by
 * cxlpod_get_info(); nothing falls back silently.  As on hardware, a
 * native instruction on a page this process has not mapped yet faults the
 * page in and is retried.
 *
 * Loopback backend: with CXLPOD_LOOPBACK=/path/file[:coherent_size[:size]]
 * (sizes accept K/M/G suffixes; defaults 16M and 64M) or opts.loopback,
 * cxlpod_open() maps a plain shared file instead of the device; all areas
 * are then coherent and the coherence operations are no-ops.  Several
 * processes on one host can share one loopback file.  Host id comes from
 * CXLPOD_HOST_ID, the host count from CXLPOD_NHOSTS.
 *
 * Model backend (for tests): CXLPOD_LOOPBACK=/path/file:coherent:size:nc
 * works like loopback, but each process gets a private image of the
 * non-coherent area with the device's semantics in software: stores stay
 * in the image until writeback (whole dirty 64-byte lines), loads see the
 * image until invalidate.  Both methods run the same software model.
 *
 * Errors: every function returns 0 or a positive errno value (EINVAL,
 * ENODEV, ENOTSUP, EIO, ...) and never aborts.  cxlpod_errmsg() returns a
 * human-readable message for the last failure in the calling thread.
 *
 * Thread safety: a cxlpod handle may be shared by threads; doorbell
 * operations are serialized by the library.  Two PROCESSES in one guest must
 * not use the doorbell at the same time (the register block is one per
 * device); use the native method or one process per guest.
 */
#ifndef LIBCXLPOD_H
#define LIBCXLPOD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CXLPOD_LIB_VERSION 1

#define CXLPOD_LINE 64u
#define CXLPOD_MAX_HOSTS 256u

/* cxlpod_info.caps: the bits of the device's CAPS register (libcxlpod.c
 * checks them against hw-cxl/cxl-shm-regs.h, the register map) */
#define CXLPOD_CAP_NATIVE_OPS 0x1u /* clflush/clflushopt/clwb reach the device */
#define CXLPOD_CAP_ATOMICS 0x2u    /* coherent-window atomics are cross-host */
#define CXLPOD_CAP_DIRECT 0x4u     /* direct mapping active */

typedef struct cxlpod cxlpod;

enum cxlpod_backend {
	CXLPOD_BACKEND_DEVICE = 1,   /* cxl-shm device + /dev/daxN.M */
	CXLPOD_BACKEND_LOOPBACK = 2, /* plain shared file, all coherent */
	CXLPOD_BACKEND_MODEL = 3,    /* shared file + software model of the
					non-coherent area (testing) */
	CXLPOD_BACKEND_RAW_DAX = 4,  /* a plain dax device without the cxl-shm
					register block (e.g. stock cxl-type3),
					only with CXLPOD_OPEN_RAW_DAX */
};

enum cxlpod_method {
	CXLPOD_METHOD_DEFAULT = 0,  /* CXLPOD_METHOD env, else doorbell */
	CXLPOD_METHOD_DOORBELL = 1, /* BAR5 doorbell registers */
	CXLPOD_METHOD_NATIVE = 2,   /* clwb / clflushopt + sfence */
};

enum cxlpod_area {
	CXLPOD_AREA_COHERENT = 0,
	CXLPOD_AREA_NONCOHERENT = 1,
};

enum cxlpod_mode { CXLPOD_MODE_DIRECT = 0, CXLPOD_MODE_TIMED = 1 };

enum cxlpod_host_state {
	CXLPOD_HOST_FREE = 0,
	CXLPOD_HOST_LIVE = 1,
	CXLPOD_HOST_FAILED = 2, /* died without leaving */
	CXLPOD_HOST_LEFT = 3,   /* clean exit */
};

/* Options for cxlpod_open(); NULL or zeroed fields take the environment. */
struct cxlpod_opts {
	const char *loopback;      /* "path[:coh[:size]]"; env CXLPOD_LOOPBACK */
	const char *pci;           /* PCI address "0000:0d:00.0"; env CXLPOD_PCI */
	const char *dax;           /* "/dev/dax0.0"; env CXLPOD_DAX */
	enum cxlpod_method method; /* env CXLPOD_METHOD=doorbell|native */
	unsigned flags;            /* CXLPOD_OPEN_*; env CXLPOD_RAW_DAX=1 adds
				      CXLPOD_OPEN_RAW_DAX */
};

/* Open the device's registers only (identity, host table, statistics),
 * without mapping the pool: for diagnostics when no dax device exists.
 * cxlpod_area() then fails with ENODEV, the coherence ops with EINVAL. */
#define CXLPOD_OPEN_REGS_ONLY 0x1u
/* Raw dax fallback: when no cxl-shm device is found (and no PCI address was
 * given), map a plain dax device instead (opts.dax / CXLPOD_DAX, else the
 * first /dev/daxN.M), e.g. the region of a stock cxl-type3 device, so that
 * tools can measure it.  Also enabled by the environment CXLPOD_RAW_DAX=1.
 * The whole device is then the "coherent window" (stock devices are
 * single-host and fully coherent), the coherence operations are no-ops,
 * caps is 0, host id / host count come from CXLPOD_HOST_ID / CXLPOD_NHOSTS,
 * version is 0, pci is "none", backend is CXLPOD_BACKEND_RAW_DAX ("raw-dax").
 * Without it, a missing cxl-shm device is ENODEV as before. */
#define CXLPOD_OPEN_RAW_DAX 0x2u

struct cxlpod_info {
	enum cxlpod_backend backend;
	unsigned version;       /* device register VERSION (loopback: 0) */
	unsigned host_id;       /* device HOST_ID (loopback: CXLPOD_HOST_ID) */
	unsigned max_hosts;     /* device MAX_HOSTS (loopback: CXLPOD_NHOSTS) */
	uint64_t size;          /* pool data size */
	uint64_t coherent_size; /* coherent window [0, coherent_size) */
	unsigned line_size;     /* 64 */
	unsigned mode;          /* enum cxlpod_mode */
	unsigned latency_ns;    /* injected latency */
	unsigned caps;          /* CXLPOD_CAP_* (loopback: ATOMICS) */
	int wb_deferred;        /* device WB_MODE: clwb/clflushopt/NT stores take
				 * effect at the vCPU's next fence (1) or at once (0) */
	unsigned evict_rate;    /* device EVICT_RATE: random evictions per ms, 0 off */
	enum cxlpod_method method; /* current method */
	int cpu_clflushopt;     /* CPUID says clflushopt exists */
	int cpu_clwb;           /* CPUID says clwb exists */
	int native_usable;      /* cpu has clflushopt and caps has NATIVE_OPS */
	char pci[32];           /* PCI address (device backend) */
	char dax[256];          /* dax device or loopback file path */
};

/* Counters: dev_* come from the device (0 on loopback), lib_* count the
 * calls made through this handle. */
struct cxlpod_stats {
	uint64_t dev_wb_ops, dev_inv_ops, dev_flush_ops;
	uint64_t dev_wb_lines, dev_inv_lines, dev_native_ops, dev_errors;
	uint64_t dev_conflicts; /* writebacks over another host's newer bytes */
	uint64_t dev_evicted, dev_nt_lines, dev_deferred, dev_resets;
	/* mode=timed: the cache model and the snoop filter */
	uint64_t dev_hits, dev_misses, dev_cache_evictions;
	uint64_t dev_back_invalidates, dev_snoops, dev_sf_evictions;
	uint64_t dev_stale_reads; /* loads of a copy older than the pool */
	uint64_t dev_charged_ns;  /* latency charged (both modes) */
	uint64_t lib_writeback, lib_invalidate, lib_flush, lib_fence;
	uint64_t lib_bytes; /* bytes covered by coherence operations */
};

/* Open the pool.  Device backend: scan /sys/bus/pci/devices for class
 * 0x050210 with a resource5 whose MAGIC matches, then the dax device whose
 * size equals SIZE; needs root.  Returns 0 and *out, or an errno. */
int cxlpod_open(cxlpod **out, const struct cxlpod_opts *opts);
/* Unmap and free; p may be NULL. */
int cxlpod_close(cxlpod *p);

/* Message for the last failure in this thread (never NULL). */
const char *cxlpod_errmsg(void);

int cxlpod_get_info(cxlpod *p, struct cxlpod_info *info);
/* Base address and length of an area. */
int cxlpod_area(cxlpod *p, enum cxlpod_area area, void **base, size_t *len);
/* Pool offset <-> address; EINVAL if outside the mapping. */
int cxlpod_ptr(cxlpod *p, uint64_t offset, void **addr);
int cxlpod_offset(cxlpod *p, const void *addr, uint64_t *offset);
/* Which area an address is in; EINVAL if outside the mapping. */
int cxlpod_area_of(cxlpod *p, const void *addr, enum cxlpod_area *area);

/* Choose how coherence operations are done.  NATIVE fails with ENOTSUP if
 * the CPU lacks clflushopt or the device lacks CXLPOD_CAP_NATIVE_OPS
 * (on loopback only the CPU is checked). */
int cxlpod_set_method(cxlpod *p, enum cxlpod_method m);
const char *cxlpod_method_name(enum cxlpod_method m);
/* "device", "loopback", "model" or "raw-dax" */
const char *cxlpod_backend_name(enum cxlpod_backend b);

/* Coherence operations on [addr, addr+len) (see the top of this file).
 * writeback: copy this host's dirty lines to the pool (lines stay cached).
 *            With NATIVE it is asynchronous: call cxlpod_fence() before
 *            publishing.
 * invalidate: drop this host's copy (dirty lines are written back first);
 *            complete on return, later loads see the pool.
 * flush:     writeback + invalidate; like writeback, fence before
 *            publishing.
 * fence:     orders all earlier writebacks/flushes and stores before later
 *            stores (sfence/mfence); cheap, always call it before publishing.
 */
int cxlpod_writeback(cxlpod *p, const void *addr, size_t len);
int cxlpod_invalidate(cxlpod *p, const void *addr, size_t len);
int cxlpod_flush(cxlpod *p, const void *addr, size_t len);
int cxlpod_fence(cxlpod *p);

/* Coherent-window atomics on naturally aligned 64-bit words.  EINVAL if the
 * address is not 8-byte aligned or not in the coherent window.  They are
 * sequentially consistent.  Plain __atomic builtins on the same addresses
 * are equivalent (these just check the address). */
int cxlpod_atomic_load(cxlpod *p, uint64_t *addr, uint64_t *val);
int cxlpod_atomic_store(cxlpod *p, uint64_t *addr, uint64_t val);
int cxlpod_atomic_fetch_add(cxlpod *p, uint64_t *addr, uint64_t add, uint64_t *old);
int cxlpod_atomic_exchange(cxlpod *p, uint64_t *addr, uint64_t val, uint64_t *old);
/* Compare-and-swap: *old receives the previous value; swapped iff
 * *old == expected.  Returns 0 either way (the call itself succeeded). */
int cxlpod_atomic_cas(cxlpod *p, uint64_t *addr, uint64_t expected, uint64_t desired,
		      uint64_t *old);

/* Host table. */
int cxlpod_host_id(cxlpod *p, unsigned *id);
int cxlpod_max_hosts(cxlpod *p, unsigned *n);
/* Hosts 0-63 live: bit h set for host h */
int cxlpod_hosts_live(cxlpod *p, uint64_t *bitmap);
/* Every host: bit h % 64 of words[h / 64] for host h (nwords words filled;
 * CXLPOD_HOST_WORDS cover CXLPOD_MAX_HOSTS) */
#define CXLPOD_HOST_WORDS ((CXLPOD_MAX_HOSTS + 63) / 64)
int cxlpod_hosts_live_map(cxlpod *p, uint64_t *words, unsigned nwords);
int cxlpod_host_state(cxlpod *p, unsigned host, enum cxlpod_host_state *state, uint64_t *gen);
const char *cxlpod_host_state_name(enum cxlpod_host_state s);

int cxlpod_stats(cxlpod *p, struct cxlpod_stats *st);

#ifdef __cplusplus
}
#endif
#endif
