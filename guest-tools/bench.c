/*
 * cxlpod-bench: dependent-load latency (pointer chase), sequential read and
 * write bandwidth, and the cost of writeback / invalidate / flush per line
 * and per MiB, for guest RAM (malloc), the coherent window and the
 * non-coherent area, side by side with ratios to RAM.
 *
 * With --raw and no cxl-shm device (e.g. a stock cxl-type3 region) the
 * whole /dev/daxN.M is measured as one area named "dax" (backend raw-dax,
 * no coherence operations).
 *
 * Runs on one host; with several hosts at once each uses its own slice
 * (rank / nhosts) of each area.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "tool.h"

#include <setjmp.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

struct ops {
	bool ok;
	enum cxlpod_method method;
	double wb_line_ns, inv_line_ns, flush_line_ns;
	double wb_mib_us, inv_mib_us, flush_mib_us;
};

struct res {
	const char *name;
	bool ok;
	size_t size, lat_size, lat_small_size;
	double lat_ns, lat_small_ns, read_mbps, write_mbps;
	int nops; /* measured methods, ops[0] is the primary one */
	struct ops ops[2];
};

static double min_time = 0.2;
static int repeat = 1; /* best of this many runs of each measurement */
static bool lat_only;  /* --latency-only: no bandwidth, no coherence operations */

/* Sattolo's algorithm: one random cycle over all lines. */
static int build_chase(uint8_t *buf, size_t size, uint64_t seed)
{
	size_t n = size / 64;
	uint32_t *perm = malloc(n * sizeof(*perm));
	if (!perm)
		return -1;
	for (size_t i = 0; i < n; i++)
		perm[i] = i;
	for (size_t i = n - 1; i > 0; i--) {
		size_t j = splitmix64(&seed) % i;
		uint32_t tmp = perm[i];
		perm[i] = perm[j];
		perm[j] = tmp;
	}
	for (size_t i = 0; i < n; i++)
		*(void **)(buf + (size_t)perm[i] * 64) = buf + (size_t)perm[(i + 1) % n] * 64;
	free(perm);
	return 0;
}

static double chase(uint8_t *buf, size_t size)
{
	size_t n = size / 64;
	size_t loads = n < 100000 ? 100000 : n;
	void *volatile sink;
	void **q = (void **)buf;
	/* one untimed lap: the first touch of a page (fault, TLB fill) is not
	 * part of the load latency */
	for (size_t i = 0; i < n; i++)
		q = *q;
	for (;;) {
		double t0 = now_s();
		for (size_t i = 0; i < loads; i += 8) {
			q = *q; q = *q; q = *q; q = *q;
			q = *q; q = *q; q = *q; q = *q;
		}
		double dt = now_s() - t0;
		sink = q;
		(void)sink;
		if (dt >= min_time || loads > ((size_t)1 << 34))
			return dt * 1e9 / loads;
		loads *= dt > 0 ? (size_t)(min_time / dt) + 1 : 10;
	}
}

/* 64-bit loads, four independent sums */
static double read_bw(uint8_t *buf, size_t size)
{
	volatile uint64_t sink;
	size_t reps = 1;
	for (;;) {
		double t0 = now_s();
		uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
		for (size_t r = 0; r < reps; r++) {
			const volatile uint64_t *p = (const volatile uint64_t *)buf;
			for (size_t i = 0; i < size / 8; i += 4) {
				s0 += p[i]; s1 += p[i + 1]; s2 += p[i + 2]; s3 += p[i + 3];
			}
		}
		double dt = now_s() - t0;
		sink = s0 + s1 + s2 + s3;
		(void)sink;
		if (dt >= min_time || reps > 100000)
			return (double)size * reps / dt / 1e6;
		reps *= dt > 0 ? (size_t)(min_time / dt) + 1 : 10;
	}
}

/* 64-bit stores of varying values (so the compiler cannot turn the loop
 * into memset, whose `rep stosb` TCG runs byte by byte) */
static void fill(uint8_t *buf, size_t size, uint64_t v)
{
	volatile uint64_t *p = (volatile uint64_t *)buf;
	for (size_t i = 0; i < size / 8; i += 4) {
		p[i] = v + i; p[i + 1] = v + i + 1; p[i + 2] = v + i + 2; p[i + 3] = v + i + 3;
	}
}

static double write_bw(uint8_t *buf, size_t size)
{
	size_t reps = 1;
	for (;;) {
		double t0 = now_s();
		for (size_t r = 0; r < reps; r++)
			fill(buf, size, r);
		__asm__ volatile("" ::: "memory");
		double dt = now_s() - t0;
		if (dt >= min_time || reps > 100000)
			return (double)size * reps / dt / 1e6;
		reps *= dt > 0 ? (size_t)(min_time / dt) + 1 : 10;
	}
}

typedef int (*opfn)(cxlpod *, const void *, size_t);

/* Per-line cost: dirty `lines` lines (or not), then one op per line. */
static int per_line(cxlpod *p, uint8_t *buf, size_t lines, opfn op, bool dirty, double *ns)
{
	if (dirty)
		for (size_t i = 0; i < lines; i++)
			buf[i * 64] ^= 1;
	double t0 = now_s();
	for (size_t i = 0; i < lines; i++) {
		int e = op(p, buf + i * 64, 64);
		if (e)
			return e;
	}
	cxlpod_fence(p);
	*ns = (now_s() - t0) * 1e9 / lines;
	return 0;
}

static int per_mib(cxlpod *p, uint8_t *buf, size_t size, opfn op, bool dirty, double *us)
{
	size_t mibs = size >> 20;
	double total = 0;
	for (size_t m = 0; m < mibs; m++) {
		uint8_t *b = buf + (m << 20);
		if (dirty)
			for (size_t i = 0; i < (1u << 20); i += 64)
				b[i] ^= 1;
		double t0 = now_s();
		int e = op(p, b, 1u << 20);
		if (e)
			return e;
		cxlpod_fence(p);
		total += now_s() - t0;
	}
	*us = total * 1e6 / mibs;
	return 0;
}

static int measure_ops(struct tool *t, struct ops *o, uint8_t *buf, size_t size, size_t op_lines)
{
	/* warm-up, untimed: the first write-back of each pool page pays
	 * for page faults / block allocation in the pool file */
	for (size_t i = 0; i < size; i += 64)
		buf[i] ^= 1;
	if (cxlpod_flush(t->p, buf, size)) {
		fprintf(stderr, "%s: flush: %s\n", t->name, cxlpod_errmsg());
		return EXIT_SETUP;
	}
	cxlpod_fence(t->p);
	if (per_line(t->p, buf, op_lines, cxlpod_writeback, true, &o->wb_line_ns) ||
	    per_line(t->p, buf, op_lines, cxlpod_invalidate, false, &o->inv_line_ns) ||
	    per_line(t->p, buf, op_lines, cxlpod_flush, true, &o->flush_line_ns) ||
	    per_mib(t->p, buf, size, cxlpod_writeback, true, &o->wb_mib_us) ||
	    per_mib(t->p, buf, size, cxlpod_invalidate, false, &o->inv_mib_us) ||
	    per_mib(t->p, buf, size, cxlpod_flush, true, &o->flush_mib_us)) {
		fprintf(stderr, "%s: coherence op failed: %s\n", t->name, cxlpod_errmsg());
		return EXIT_SETUP;
	}
	o->ok = true;
	return 0;
}

/* Measure one area: bandwidth on [buf, buf+size), latency on
 * [buf, buf+lat_size), then the coherence operations with each method. */
static int measure(struct tool *t, struct res *r, uint8_t *buf, size_t size, size_t lat_size,
		   const enum cxlpod_method *methods, int nmethods, size_t op_lines)
{
	r->size = size;
	r->lat_size = lat_size;
	fill(buf, size > lat_size ? size : lat_size, 0);
	r->write_mbps = r->read_mbps = 0;
	r->lat_ns = r->lat_small_ns = 0;
	for (int k = 0; k < repeat && !lat_only; k++) {
		double w = write_bw(buf, size), rd = read_bw(buf, size);
		r->write_mbps = w > r->write_mbps ? w : r->write_mbps;
		r->read_mbps = rd > r->read_mbps ? rd : r->read_mbps;
	}
	if (build_chase(buf, lat_size, 42)) {
		fprintf(stderr, "%s: out of memory\n", t->name);
		return EXIT_SETUP;
	}
	for (int k = 0; k < repeat; k++) {
		double l = chase(buf, lat_size);
		r->lat_ns = (k == 0 || l < r->lat_ns) ? l : r->lat_ns;
	}
	if (r->lat_small_size) {
		/* a working set whose pages fit the (emulated) TLB: the cost of
		 * one dependent load without page walks */
		if (build_chase(buf, r->lat_small_size, 43)) {
			fprintf(stderr, "%s: out of memory\n", t->name);
			return EXIT_SETUP;
		}
		for (int k = 0; k < repeat; k++) {
			double l = chase(buf, r->lat_small_size);
			r->lat_small_ns = (k == 0 || l < r->lat_small_ns) ? l : r->lat_small_ns;
		}
	}
	r->nops = 0;
	for (int m = 0; m < nmethods; m++) {
		if (cxlpod_set_method(t->p, methods[m])) {
			fprintf(stderr, "%s: %s\n", t->name, cxlpod_errmsg());
			return EXIT_SETUP;
		}
		struct ops *o = &r->ops[r->nops++];
		o->method = methods[m];
		int rc = measure_ops(t, o, buf, size, op_lines < size / 64 ? op_lines : size / 64);
		if (rc)
			return rc;
	}
	if (nmethods)
		cxlpod_set_method(t->p, methods[0]);
	r->ok = true;
	return 0;
}

static double ratio(double a, double b) { return b > 0 ? a / b : 0; }

/* --curve: the cost of one call of each coherence operation, per size */
#define CURVE_MAX 12
struct curve_pt {
	size_t size;
	double ns[2][3];    /* [method][wb, inv, flush]: ns per call */
	double memcpy_ns;   /* a guest memcpy of the same size, RAM to RAM */
};

/* Time calls of @op over @size bytes at @buf (dirtied first, untimed, when
 * @dirty) until @min_s of calls have run; ns per call. */
static int curve_op(cxlpod *p, uint8_t *buf, size_t size, opfn op, bool dirty, double *ns)
{
	double spent = 0;
	size_t calls = 0;
	while (spent < min_time || calls < 3) {
		if (dirty)
			for (size_t i = 0; i < size; i += 64)
				buf[i] ^= 1;
		double t0 = now_s();
		int e = op(p, buf, size);
		if (e)
			return e;
		cxlpod_fence(p);
		spent += now_s() - t0;
		calls++;
	}
	*ns = spent * 1e9 / calls;
	return 0;
}

static double curve_memcpy(uint8_t *dst, const uint8_t *src, size_t size)
{
	double spent = 0;
	size_t calls = 0;
	while (spent < min_time || calls < 3) {
		double t0 = now_s();
		for (int k = 0; k < 16; k++) {
			memcpy(dst, src, size);
			__asm__ volatile("" ::: "memory");
		}
		spent += now_s() - t0;
		calls += 16;
	}
	return spent * 1e9 / calls;
}

/* Sizes 64 B, 256 B, ... up to @max (x4 steps), in the non-coherent area */
static int measure_curve(struct tool *t, uint8_t *buf, size_t max,
			 const enum cxlpod_method *methods, int nmethods,
			 struct curve_pt *pts, int *npts)
{
	static const opfn ops[3] = {cxlpod_writeback, cxlpod_invalidate, cxlpod_flush};
	uint8_t *src = aligned_alloc(4096, max), *dst = aligned_alloc(4096, max);
	int n = 0;
	if (!src || !dst) {
		fprintf(stderr, "%s: out of memory\n", t->name);
		return EXIT_SETUP;
	}
	memset(src, 1, max);
	memset(dst, 2, max);
	/* untimed: the pool pages of the range exist and are in sync */
	for (size_t i = 0; i < max; i += 64)
		buf[i] ^= 1;
	if (cxlpod_flush(t->p, buf, max)) {
		fprintf(stderr, "%s: flush: %s\n", t->name, cxlpod_errmsg());
		return EXIT_SETUP;
	}
	for (size_t sz = 64; sz <= max && n < CURVE_MAX; sz *= 4, n++) {
		struct curve_pt *c = &pts[n];
		c->size = sz;
		c->memcpy_ns = curve_memcpy(dst, src, sz);
		for (int m = 0; m < nmethods; m++) {
			cxlpod_set_method(t->p, methods[m]);
			for (int o = 0; o < 3; o++) {
				double best = 0;
				for (int r = 0; r < repeat; r++) {
					double v;
					if (curve_op(t->p, buf, sz, ops[o], o != 1, &v)) {
						fprintf(stderr, "%s: coherence op failed: %s\n",
							t->name, cxlpod_errmsg());
						return EXIT_SETUP;
					}
					if (!r || v < best)
						best = v;
				}
				c->ns[m][o] = best;
			}
		}
	}
	cxlpod_set_method(t->p, methods[0]);
	free(src);
	free(dst);
	*npts = n;
	return 0;
}

static void j_ops(struct jbuf *j, const struct ops *o)
{
	j_dbl(j, "wb_line_ns", o->wb_line_ns);
	j_dbl(j, "inv_line_ns", o->inv_line_ns);
	j_dbl(j, "flush_line_ns", o->flush_line_ns);
	j_dbl(j, "wb_MiB_us", o->wb_mib_us);
	j_dbl(j, "inv_MiB_us", o->inv_mib_us);
	j_dbl(j, "flush_MiB_us", o->flush_mib_us);
}

#ifndef MIN
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#endif

/* ---- --far: the figures of scripts/bench-remote.sh ------------------------------------
 * What a host on another machine than the pool's pays, beside a local host:
 * coherence operations in the non-coherent area (one-line calls and 1 MiB
 * calls, each method), and single accesses to the coherent window (on a
 * remote host every one is a request to the pool's service): a dependent
 * load, an 8-byte store and a locked fetch-add.  Each access figure is
 * timed until --min-time has passed (at least 64 accesses), so that a
 * remote host's round trips need no 100000-load chase. */
struct far_res {
	double load_ns, store_ns, xadd_ns, ram_load_ns, ram_xadd_ns;
	size_t loads, stores, xadds;
	bool xadd_cut; /* the timer cut the xadds off (none retired: xadd_ns -1) */
};

/* dependent loads over @lines lines (a chase built with plain stores) */
static double far_chase(uint8_t *buf, size_t lines, size_t *count)
{
	void **q = (void **)buf;
	size_t n = 0;
	double t0 = now_s(), dt;
	do {
		for (int k = 0; k < 64; k++)
			q = *q;
		n += 64;
		dt = now_s() - t0;
	} while (dt < min_time);
	void *volatile sink = q;
	(void)sink;
	(void)lines;
	*count = n;
	return dt * 1e9 / n;
}

static double far_store(uint8_t *buf, size_t lines, size_t *count)
{
	volatile uint64_t *w = (volatile uint64_t *)buf;
	size_t n = 0;
	double t0 = now_s(), dt;
	do {
		for (int k = 0; k < 64; k++, n++)
			w[(n % lines) * 8] = n;
		dt = now_s() - t0;
	} while (dt < min_time);
	*count = n;
	return dt * 1e9 / n;
}

/* lock xadd on one word of each line in turn.  A locked read-modify-write
 * that never retires (seen on a remote host, whose coherent window has no
 * cross-host atomics: docs/benchmarks.md section 9) is cut off by a timer
 * after FAR_XADD_LIMIT_S: the signal is delivered between the instruction's
 * runs and the handler jumps out of the loop.  Returns -1 when no xadd
 * retired before the timer, and the time per xadd of those that did. */
#define FAR_XADD_LIMIT_S 10
static sigjmp_buf far_jb;

static void far_on_alarm(int sig)
{
	(void)sig;
	siglongjmp(far_jb, 1);
}

static double far_xadd(uint8_t *buf, size_t lines, size_t *count, bool *cut)
{
	uint64_t *w = (uint64_t *)buf;
	volatile size_t n = 0;
	volatile double t0 = now_s(), dt = 0;
	struct sigaction sa = {.sa_handler = far_on_alarm}, old;
	struct itimerval it = {.it_value = {.tv_sec = FAR_XADD_LIMIT_S}}, off = {{0, 0}, {0, 0}};

	*cut = false;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, &old);
	if (sigsetjmp(far_jb, 1)) {
		*cut = true;
		dt = now_s() - t0;
	} else {
		setitimer(ITIMER_REAL, &it, NULL);
		do {
			for (int k = 0; k < 64; k++, n++)
				__atomic_fetch_add(&w[(n % lines) * 8 + 1], 1, __ATOMIC_SEQ_CST);
			dt = now_s() - t0;
		} while (dt < min_time);
	}
	setitimer(ITIMER_REAL, &off, NULL);
	sigaction(SIGALRM, &old, NULL);
	*count = n;
	return n ? dt * 1e9 / n : -1;
}

static int far_ring(uint8_t *buf, size_t lines)
{
	/* one cycle through the lines in order: each load its own line */
	for (size_t i = 0; i < lines; i++)
		*(void **)(buf + i * 64) = buf + ((i + 1) % lines) * 64;
	return 0;
}

static int far_measure(struct tool *t, struct far_res *f, size_t coh_lines)
{
	uint8_t *c = t->coh + (size_t)t->rank * (coh_lines * 64 + 4096);
	size_t len = coh_lines * 64;
	uint8_t *ram = aligned_alloc(4096, len);
	if (!ram) {
		fprintf(stderr, "%s: out of memory\n", t->name);
		return EXIT_SETUP;
	}
	memset(ram, 0, len);
	far_ring(ram, coh_lines);
	size_t dummy;
	bool cut;
	for (int k = 0; k < repeat; k++) {
		double v = far_chase(ram, coh_lines, &dummy);
		f->ram_load_ns = (!k || v < f->ram_load_ns) ? v : f->ram_load_ns;
		v = far_xadd(ram, coh_lines, &dummy, &cut);
		f->ram_xadd_ns = (!k || v < f->ram_xadd_ns) ? v : f->ram_xadd_ns;
	}
	if (t->coh_len < (size_t)(t->rank + 1) * (len + 4096)) {
		fprintf(stderr, "%s: the coherent window is too small for --far\n", t->name);
		free(ram);
		return EXIT_SETUP;
	}
	for (int k = 0; k < repeat; k++) {
		size_t n;
		double v = far_store(c, coh_lines, &n);
		if (!k || v < f->store_ns)
			f->store_ns = v, f->stores = n;
	}
	far_ring(c, coh_lines);
	for (int k = 0; k < repeat; k++) {
		size_t n;
		double v = far_chase(c, coh_lines, &n);
		if (!k || v < f->load_ns)
			f->load_ns = v, f->loads = n;
	}
	/* last: a remote host's xadd may never retire (then once, cut off) */
	for (int k = 0; k < repeat; k++) {
		size_t n;
		double v = far_xadd(c, coh_lines, &n, &cut);
		if (cut && !n) {
			f->xadd_ns = -1, f->xadds = 0, f->xadd_cut = true;
			break;
		}
		if (!k || v < f->xadd_ns)
			f->xadd_ns = v, f->xadds = n, f->xadd_cut = cut;
	}
	free(ram);
	return 0;
}

static int far_main(struct tool *t, size_t size, size_t op_lines, size_t coh_lines)
{
	enum cxlpod_method methods[2];
	int nmethods = 0;
	struct ops ops[2] = {{0}};
	struct far_res f = {0};
	const size_t MiB = 1u << 20;
	size_t nc_slice = (t->nc_len / t->nhosts) & ~(MiB - 1);
	int rc;

	if (t->info.backend != CXLPOD_BACKEND_DEVICE) {
		fprintf(stderr, "%s: --far measures a cxl-shm device\n", t->name);
		return EXIT_SETUP;
	}
	methods[nmethods++] = CXLPOD_METHOD_DOORBELL;
	if (t->method_both && t->info.native_usable)
		methods[nmethods++] = CXLPOD_METHOD_NATIVE;
	if (size > nc_slice)
		size = nc_slice;
	if (size < MiB) {
		fprintf(stderr, "%s: the non-coherent area is too small for --far\n", t->name);
		return EXIT_SETUP;
	}
	uint8_t *b = t->nc + (size_t)t->rank * nc_slice;
	for (int m = 0; m < nmethods; m++) {
		struct ops best = {0};
		if (cxlpod_set_method(t->p, methods[m])) {
			fprintf(stderr, "%s: %s\n", t->name, cxlpod_errmsg());
			return EXIT_SETUP;
		}
		for (int k = 0; k < repeat; k++) {
			struct ops o = {0};
			if ((rc = measure_ops(t, &o, b, size, MIN(op_lines, size / 64))))
				return rc;
			if (!k)
				best = o;
#define FAR_BEST(x) best.x = o.x < best.x ? o.x : best.x
			FAR_BEST(wb_line_ns); FAR_BEST(inv_line_ns); FAR_BEST(flush_line_ns);
			FAR_BEST(wb_mib_us); FAR_BEST(inv_mib_us); FAR_BEST(flush_mib_us);
#undef FAR_BEST
		}
		best.method = methods[m];
		ops[m] = best;
	}
	cxlpod_set_method(t->p, methods[0]);
	if ((rc = far_measure(t, &f, coh_lines)))
		return rc;

	bool atomics = t->info.caps & CXLPOD_CAP_ATOMICS;
	if (t->json) {
		struct jbuf j;
		j_begin(&j);
		j_common(&j, t);
		j_bool(&j, "ok", true);
		j_str(&j, "action", "far");
		j_uint(&j, "size", size);
		j_uint(&j, "op_lines", MIN(op_lines, size / 64));
		j_uint(&j, "coh_lines", coh_lines);
		j_int(&j, "repeat", repeat);
		j_dbl(&j, "min_time", min_time);
		j_uint(&j, "caps", t->info.caps);
		j_bool(&j, "caps_atomics", atomics);
		j_bool(&j, "caps_direct", t->info.caps & CXLPOD_CAP_DIRECT);
		j_obj_begin(&j, "ops");
		for (int m = 0; m < nmethods; m++) {
			j_obj_begin(&j, cxlpod_method_name(methods[m]));
			j_ops(&j, &ops[m]);
			j_obj_end(&j);
		}
		j_obj_end(&j);
		j_obj_begin(&j, "coherent");
		j_dbl(&j, "load_ns", f.load_ns);
		j_dbl(&j, "store_ns", f.store_ns);
		j_dbl(&j, "xadd_ns", f.xadd_ns);
		j_uint(&j, "loads", f.loads);
		j_uint(&j, "stores", f.stores);
		j_uint(&j, "xadds", f.xadds);
		j_bool(&j, "xadd_cut", f.xadd_cut);
		j_int(&j, "xadd_limit_s", FAR_XADD_LIMIT_S);
		j_obj_end(&j);
		j_obj_begin(&j, "ram");
		j_dbl(&j, "load_ns", f.ram_load_ns);
		j_dbl(&j, "xadd_ns", f.ram_xadd_ns);
		j_obj_end(&j);
		j_end_print(&j);
	} else {
		printf("cxlpod-bench --far: host %d/%d, CAPS 0x%x (ATOMICS %s, DIRECT %s)\n",
		       t->rank, t->nhosts, t->info.caps, atomics ? "yes" : "no",
		       t->info.caps & CXLPOD_CAP_DIRECT ? "yes" : "no");
		for (int m = 0; m < nmethods; m++)
			printf("%-9s wb %.0f ns/line, inv %.0f ns/line, flush %.0f ns/line; "
			       "wb %.0f us/MiB, inv %.0f us/MiB, flush %.0f us/MiB\n",
			       cxlpod_method_name(methods[m]), ops[m].wb_line_ns,
			       ops[m].inv_line_ns, ops[m].flush_line_ns, ops[m].wb_mib_us,
			       ops[m].inv_mib_us, ops[m].flush_mib_us);
		printf("coherent window (%zu lines): load %.0f ns, store %.0f ns, ", coh_lines,
		       f.load_ns, f.store_ns);
		if (f.xadd_cut && !f.xadds)
			printf("lock xadd: none retired in %d s", FAR_XADD_LIMIT_S);
		else
			printf("lock xadd %.0f ns", f.xadd_ns);
		printf("%s; guest RAM: load %.1f ns, lock xadd %.1f ns\n",
		       atomics ? "" : " (not atomic across hosts here)", f.ram_load_ns,
		       f.ram_xadd_ns);
	}
	return 0;
}

static void usage(void)
{
	printf("usage: cxlpod-bench [--size BYTES(16M)] [--lat-size BYTES] [--pool-size BYTES]\n"
	       "                    [--pool-lat-size BYTES] [--lat-small BYTES] [--repeat N]\n"
	       "                    [--min-time S(0.2)] [--quick]\n"
	       "                    [--method doorbell|native|both] [--raw] [--latency-only]\n"
	       "                    [--touch-all] [--curve MAX] [--far [--coh-lines N]]\n"
	       "                    [options]\n"
	       "  --size           bandwidth buffer per area (RAM and pool areas)\n"
	       "  --lat-size       pointer-chase working set (default: --size)\n"
	       "  --pool-size      bandwidth buffer in the pool areas (default: --size)\n"
	       "  --pool-lat-size  chase working set in the pool areas (default: --lat-size)\n"
	       "  --lat-small      also chase over this small set (64K..; e.g. 256K: pages that\n"
	       "                   fit the TLB, so no page walks), reported as lat_small_ns\n"
	       "  --repeat N       run each measurement N times, report the best (1)\n"
	       "  --min-time       minimum duration of each timed measurement\n"
	       "  --method both    coherence-operation costs with the doorbell and natively\n"
	       "  --raw            measure a plain dax device (stock cxl-type3), area \"dax\"\n"
	       "  --latency-only   only the pointer chases (no bandwidth, no coherence\n"
	       "                   operations): quick in mode=timed, where every access\n"
	       "                   goes through the device\n"
	       "  --touch-all      no benchmark: store to every line of this host's pool\n"
	       "                   areas, write the non-coherent area back, exit (for host\n"
	       "                   memory measurements)\n"
	       "  --curve MAX      also the cost of one writeback / invalidate / flush call\n"
	       "                   of 64 B, 256 B, ... up to MAX bytes (x4 steps) in the\n"
	       "                   non-coherent area, each method, beside a guest memcpy\n"
	       "                   of the same size (\"curve\" in JSON)\n"
	       "  --far            only what scripts/bench-remote.sh compares between a local\n"
	       "                   and a remote host: writeback / invalidate / flush of one\n"
	       "                   line a call (up to 4096 lines) and of 1 MiB a call over\n"
	       "                   --size, each method; then, each timed for --min-time, a\n"
	       "                   dependent load, an 8-byte store and a lock xadd in the\n"
	       "                   coherent window over --coh-lines lines (64), and the\n"
	       "                   load and xadd in guest RAM; with CAPS (ATOMICS: whether\n"
	       "                   the xadd is atomic across hosts)\n"
	       "%s",
	       tool_common_usage());
}

/* --touch-all: dirty every line of both areas (whole pool of this host) and
 * write the non-coherent area back, so the device holds its largest image. */
static int touch_all(struct tool *t)
{
	double t0 = now_s();
	fill(t->coh, t->coh_len & ~(size_t)31, 0x5a5a);
	fill(t->nc, t->nc_len & ~(size_t)31, 0xa5a5);
	if (t->nc_len && cxlpod_writeback(t->p, t->nc, t->nc_len)) {
		fprintf(stderr, "%s: writeback: %s\n", t->name, cxlpod_errmsg());
		return EXIT_SETUP;
	}
	cxlpod_fence(t->p);
	double dt = now_s() - t0;
	if (t->json) {
		struct jbuf j;
		j_begin(&j);
		j_common(&j, t);
		j_bool(&j, "ok", true);
		j_str(&j, "action", "touch-all");
		j_uint(&j, "coherent_bytes", t->coh_len);
		j_uint(&j, "noncoherent_bytes", t->nc_len);
		j_dbl(&j, "seconds", dt);
		j_end_print(&j);
	} else {
		printf("cxlpod-bench: touched %zu MiB of the coherent window and %zu MiB of the "
		       "non-coherent area (written back) in %.2f s\n",
		       t->coh_len >> 20, t->nc_len >> 20, dt);
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct tool t = {.name = "cxlpod-bench", .rank = -1};
	size_t size = 0, lat_size = 0, pool_size = 0, pool_lat_size = 0, lat_small = 0;
	size_t op_lines = 4096;
	size_t curve_max = 0;
	struct curve_pt curve[CURVE_MAX];
	int ncurve = 0;
	bool touch = false, far = false;
	size_t coh_lines = 64;
	bool quick = false;
	double min_time_arg = 0;
	const struct topt opts[] = {
		{"--size", TOPT_SIZE, &size, 1 << 20, 1e15},
		{"--lat-size", TOPT_SIZE, &lat_size, 1 << 20, 1e15},
		{"--pool-size", TOPT_SIZE, &pool_size, 1 << 20, 1e15},
		{"--pool-lat-size", TOPT_SIZE, &pool_lat_size, 1 << 20, 1e15},
		{"--lat-small", TOPT_SIZE, &lat_small, 64 << 10, 1 << 20},
		{"--repeat", TOPT_INT, &repeat, 1, 100},
		{"--min-time", TOPT_DBL, &min_time_arg, 0.001, 3600},
		{"--quick", TOPT_FLAG, &quick, 0, 0},
		{"--touch-all", TOPT_FLAG, &touch, 0, 0},
		{"--latency-only", TOPT_FLAG, &lat_only, 0, 0},
		{"--curve", TOPT_SIZE, &curve_max, 64, 1e15},
		{"--far", TOPT_FLAG, &far, 0, 0},
		{"--coh-lines", TOPT_SIZE, &coh_lines, 2, 1 << 16},
		{NULL, TOPT_FLAG, NULL, 0, 0},
	};
	int pr = tool_parse(&t, argc, argv, opts, usage, NULL);
	if (pr)
		return pr == TOOL_HELP ? 0 : pr;
	lat_small &= ~(size_t)0xffff;
	/* --quick: smaller defaults; options given explicitly win */
	if (!size)
		size = quick ? 2u << 20 : 16u << 20;
	if (quick)
		op_lines = 1024;
	min_time = min_time_arg ? min_time_arg : quick ? 0.05 : min_time;
	const size_t MiB = 1u << 20;
	size &= ~(MiB - 1);
	if (!lat_size)
		lat_size = size;
	if (!pool_size)
		pool_size = size;
	if (!pool_lat_size)
		pool_lat_size = lat_size;
	lat_size &= ~(MiB - 1);
	pool_size &= ~(MiB - 1);
	pool_lat_size &= ~(MiB - 1);
	if (size == 0) {
		fprintf(stderr, "cxlpod-bench: --size must be at least 1M\n");
		return EXIT_USAGE;
	}
	int rc = tool_open(&t);
	if (rc)
		return rc;
	if (far) {
		rc = far_main(&t, size, op_lines, coh_lines);
		tool_close(&t);
		return rc;
	}
	if (touch) {
		rc = touch_all(&t);
		tool_close(&t);
		return rc;
	}
	bool raw = t.info.backend == CXLPOD_BACKEND_RAW_DAX;

	/* which methods the coherence operations are measured with */
	enum cxlpod_method methods[2];
	int nmethods = 0;
	if (!raw && !lat_only) {
		if (t.method_both) {
			methods[nmethods++] = CXLPOD_METHOD_DOORBELL;
			if (t.info.native_usable)
				methods[nmethods++] = CXLPOD_METHOD_NATIVE;
			else if (!t.json)
				printf("cxlpod-bench: native method not usable here, skipped\n");
		} else {
			methods[nmethods++] = t.info.method;
		}
	}

	struct res res[3] = {{.name = "ram"}, {.name = raw ? "dax" : "coherent"},
			     {.name = "noncoherent"}};
	for (int i = 0; i < 3; i++)
		res[i].lat_small_size = lat_small;
	size_t ram_len = size > lat_size ? size : lat_size;
	uint8_t *ram = aligned_alloc(2u << 20, ram_len);
	if (!ram) {
		fprintf(stderr, "cxlpod-bench: out of memory\n");
		return EXIT_SETUP;
	}
	/* each host uses its own slice of each area */
	size_t coh_slice = (t.coh_len / t.nhosts) & ~(MiB - 1);
	size_t nc_slice = (t.nc_len / t.nhosts) & ~(MiB - 1);
#define MIN(a, b) ((a) < (b) ? (a) : (b))
	/* an area smaller than asked for is measured whole (its slice) */
	size_t coh_bw = MIN(pool_size, coh_slice), coh_lat = MIN(pool_lat_size, coh_slice);
	size_t nc_bw = MIN(pool_size, nc_slice), nc_lat = MIN(pool_lat_size, nc_slice);

	if (!t.json)
		printf("cxlpod-bench: host %d/%d, backend %s, method %s, RAM %zu MiB (chase %zu "
		       "MiB), pool areas %zu MiB (chase %zu MiB)\n",
		       t.rank, t.nhosts, cxlpod_backend_name(t.info.backend),
		       raw ? "none" : t.method_both ? "both" : cxlpod_method_name(t.info.method),
		       size >> 20, lat_size >> 20, pool_size >> 20, pool_lat_size >> 20);
	if ((rc = measure(&t, &res[0], ram, size, lat_size, NULL, 0, 0)))
		return rc;
	if (coh_slice && (rc = measure(&t, &res[1], t.coh + t.rank * coh_slice, coh_bw, coh_lat,
				       methods, nmethods, op_lines)))
		return rc;
	if (nc_slice) {
		uint8_t *b = t.nc + t.rank * nc_slice;
		if (cxlpod_flush(t.p, b, nc_bw > nc_lat ? nc_bw : nc_lat)) {
			fprintf(stderr, "cxlpod-bench: flush: %s\n", cxlpod_errmsg());
			return EXIT_SETUP;
		}
		if ((rc = measure(&t, &res[2], b, nc_bw, nc_lat, methods, nmethods, op_lines)))
			return rc;
	}
	if (curve_max && nmethods && nc_slice) {
		if (curve_max > nc_slice)
			curve_max = nc_slice;
		if ((rc = measure_curve(&t, t.nc + t.rank * nc_slice, curve_max, methods,
					nmethods, curve, &ncurve)))
			return rc;
	}

	if (!t.json) {
		printf("%-12s %5s %5s %10s %12s %12s", "area", "MiB", "chase", "lat ns",
		       "read MB/s", "write MB/s");
		if (lat_small)
			printf(" %10s", "lat(small)");
		printf("\n");
		for (int i = 0; i < 3; i++) {
			if (!res[i].ok) {
				if (!(raw && i == 2))
					printf("%-12s (area too small, skipped)\n", res[i].name);
				continue;
			}
			if (lat_only)
				printf("%-12s %5s %5zu %10.1f %12s %12s", res[i].name, "-",
				       res[i].lat_size >> 20, res[i].lat_ns, "-", "-");
			else
				printf("%-12s %5zu %5zu %10.1f %12.0f %12.0f", res[i].name,
				       res[i].size >> 20, res[i].lat_size >> 20, res[i].lat_ns,
				       res[i].read_mbps, res[i].write_mbps);
			if (lat_small)
				printf(" %10.1f", res[i].lat_small_ns);
			if (i > 0 && lat_only)
				printf("   x%.2f lat vs ram", ratio(res[i].lat_ns, res[0].lat_ns));
			else if (i > 0)
				printf("   x%.2f lat, x%.2f read, x%.2f write vs ram",
				       ratio(res[i].lat_ns, res[0].lat_ns),
				       ratio(res[i].read_mbps, res[0].read_mbps),
				       ratio(res[i].write_mbps, res[0].write_mbps));
			printf("\n");
		}
		for (int m = 0; m < nmethods; m++) {
			printf("coherence operations (%s):\n", cxlpod_method_name(methods[m]));
			printf("%-12s %12s %12s %13s %12s %12s %12s\n", "area", "wb ns/line",
			       "inv ns/line", "flush ns/line", "wb us/MiB", "inv us/MiB",
			       "flush us/MiB");
			for (int i = 1; i < 3; i++) {
				const struct ops *o = &res[i].ops[m];
				if (res[i].ok && m < res[i].nops)
					printf("%-12s %12.1f %12.1f %13.1f %12.1f %12.1f %12.1f\n",
					       res[i].name, o->wb_line_ns, o->inv_line_ns,
					       o->flush_line_ns, o->wb_mib_us, o->inv_mib_us,
					       o->flush_mib_us);
			}
		}
		if (!raw && t.info.mode == CXLPOD_MODE_TIMED) {
			struct cxlpod_stats st;
			if (!cxlpod_stats(t.p, &st))
				printf("timed mode (device totals): hits %llu misses %llu cache "
				       "evictions %llu lines written back %llu; back-invalidates %llu "
				       "snoops %llu snoop-filter evictions %llu stale reads %llu; "
				       "charged %.3f ms\n",
				       (unsigned long long)st.dev_hits,
				       (unsigned long long)st.dev_misses,
				       (unsigned long long)st.dev_cache_evictions,
				       (unsigned long long)st.dev_wb_lines,
				       (unsigned long long)st.dev_back_invalidates,
				       (unsigned long long)st.dev_snoops,
				       (unsigned long long)st.dev_sf_evictions,
				       (unsigned long long)st.dev_stale_reads,
				       st.dev_charged_ns / 1e6);
		}
		if (ncurve) {
			printf("cost of one call (ns), non-coherent area, every line dirty for "
			       "writeback/flush:\n%10s %12s", "bytes", "guest memcpy");
			for (int m = 0; m < nmethods; m++)
				printf("  %9.9s wb %9.9s inv %9.9s flush",
				       cxlpod_method_name(methods[m]), cxlpod_method_name(methods[m]),
				       cxlpod_method_name(methods[m]));
			printf("\n");
			for (int c = 0; c < ncurve; c++) {
				printf("%10zu %12.0f", curve[c].size, curve[c].memcpy_ns);
				for (int m = 0; m < nmethods; m++)
					printf("  %12.0f %13.0f %15.0f", curve[c].ns[m][0],
					       curve[c].ns[m][1], curve[c].ns[m][2]);
				printf("\n");
			}
		}
		if (t.info.backend == CXLPOD_BACKEND_LOOPBACK)
			printf("(loopback: coherence operations are no-ops)\n");
		if (raw)
			printf("(raw dax: no cxl-shm registers, no coherence operations)\n");
	} else {
		struct jbuf j;
		j_begin(&j);
		j_common(&j, &t);
		j_bool(&j, "ok", true);
		j_uint(&j, "size", size);
		j_uint(&j, "lat_size", lat_size);
		j_uint(&j, "pool_size", pool_size);
		j_uint(&j, "pool_lat_size", pool_lat_size);
		j_uint(&j, "lat_small_size", lat_small);
		j_int(&j, "repeat", repeat);
		j_bool(&j, "latency_only", lat_only);
		j_str(&j, "mode", raw ? "raw" : t.info.mode == CXLPOD_MODE_TIMED ? "timed" : "direct");
		j_uint(&j, "latency_ns", t.info.latency_ns);
		j_str(&j, "dax", t.info.dax);
		j_uint(&j, "pool_bytes", t.info.size);
		j_uint(&j, "coherent_size", t.info.coherent_size);
		j_obj_begin(&j, "areas");
		for (int i = 0; i < 3; i++) {
			if (!res[i].ok)
				continue;
			j_obj_begin(&j, res[i].name);
			j_uint(&j, "size", res[i].size);
			j_uint(&j, "lat_size", res[i].lat_size);
			j_dbl(&j, "lat_ns", res[i].lat_ns);
			if (lat_small)
				j_dbl(&j, "lat_small_ns", res[i].lat_small_ns);
			if (!lat_only) {
				j_dbl(&j, "read_MBps", res[i].read_mbps);
				j_dbl(&j, "write_MBps", res[i].write_mbps);
			}
			if (i > 0)
				j_dbl(&j, "lat_ratio", ratio(res[i].lat_ns, res[0].lat_ns));
			if (i > 0 && !lat_only) {
				j_dbl(&j, "read_ratio", ratio(res[i].read_mbps, res[0].read_mbps));
				j_dbl(&j, "write_ratio", ratio(res[i].write_mbps, res[0].write_mbps));
			}
			if (res[i].nops) {
				/* the primary method's costs at the top level */
				j_ops(&j, &res[i].ops[0]);
				j_obj_begin(&j, "ops");
				for (int m = 0; m < res[i].nops; m++) {
					j_obj_begin(&j, cxlpod_method_name(res[i].ops[m].method));
					j_ops(&j, &res[i].ops[m]);
					j_obj_end(&j);
				}
				j_obj_end(&j);
			}
			j_obj_end(&j);
		}
		j_obj_end(&j);
		if (ncurve) {
			static const char *const opn[3] = {"wb_ns", "inv_ns", "flush_ns"};
			j_arr_begin(&j, "curve");
			for (int c = 0; c < ncurve; c++) {
				j_obj_begin(&j, NULL);
				j_uint(&j, "size", curve[c].size);
				j_dbl(&j, "guest_memcpy_ns", curve[c].memcpy_ns);
				for (int m = 0; m < nmethods; m++) {
					j_obj_begin(&j, cxlpod_method_name(methods[m]));
					for (int o = 0; o < 3; o++)
						j_dbl(&j, opn[o], curve[c].ns[m][o]);
					j_obj_end(&j);
				}
				j_obj_end(&j);
			}
			j_arr_end(&j);
		}
		if (!raw && t.info.mode == CXLPOD_MODE_TIMED) {
			struct cxlpod_stats st;
			if (!cxlpod_stats(t.p, &st)) {
				j_obj_begin(&j, "timed");
				j_uint(&j, "lines_written_back", st.dev_wb_lines);
				j_timed_stats(&j, &st);
				j_obj_end(&j);
			}
		}
		j_end_print(&j);
	}
	free(ram);
	tool_close(&t);
	return 0;
}
