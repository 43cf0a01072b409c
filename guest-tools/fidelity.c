/*
 * cxlpod-fidelity: guest-level checks that the device never produces an
 * outcome CXL 3.0 hardware cannot (docs/device.md, outcome table).
 *
 *   own-stores  one host, several vCPUs: store threads (pinned to CPUs
 *               1..S) each own word s of every line of a non-coherent
 *               range and store a counting pattern into it, and all of
 *               them `lock add` word 7 of every line; a flusher on CPU 0
 *               writes back, invalidates and flushes the range (whole
 *               range and single lines) in a loop.  Before each store a
 *               thread re-reads its word: any value other than its own
 *               last store is a lost store.  At the end every word and
 *               every counter must be exact, in the host's view and (after
 *               a flush) in the pool.  Hardware never loses a host's own
 *               store: a line invalidated under a store is fetched again
 *               and the store applies on top.   expected: 0 lost
 *   torn        every host: fill each of L shared non-coherent lines with
 *               one tag (host, round; word w holds tag + w), write back,
 *               fence, invalidate, read every line; every line read must
 *               hold exactly one tag (or the initial zeros).  Rank 0 checks
 *               the pool's lines again at the end.   expected: 0 torn
 *   nt          rank 0 (the writer) copies a buffer into the non-coherent
 *               area with one non-temporal instruction per region (movnti
 *               32/64, movntq, movntdq, movntps, movntpd, vmovntdq,
 *               vmovntps, vmovntpd, maskmovq, maskmovdqu, vmaskmovdqu, the
 *               last also with a partial byte mask), executes `sfence`,
 *               then publishes with a plain store in the coherent window;
 *               the readers wait for the flag, invalidate the region and
 *               compare every byte.  A control region copied with plain
 *               stores + sfence (no writeback) must stay old for the
 *               readers: it shows the check can fail.
 *               expected: every NT region new (writer and readers), the
 *               control old for the readers
 *
 *   nt-merge    rank 1 changes part of every line of a region that rank 0
 *               holds clean (bytes 32..63, or the odd bytes for
 *               vmaskmovdqu-half) and writes it back; rank 0 then stores
 *               the other part with one non-temporal instruction, sfence,
 *               publishes; every host invalidates and reads.  A
 *               non-temporal store writes only its own bytes (and the
 *               byte mask's) to memory: the line must hold both hosts'
 *               bytes.  A device that wrote rank 0's whole stale line
 *               back would show rank 1's bytes old.
 *               expected: every byte new, on every host
 *
 * --method doorbell|native|both: the coherence operations of own-stores
 * and torn (and the readers' invalidate in nt); both runs the test once
 * with each.
 *
 * Exit codes: 0 every outcome as expected, 3 a wrong outcome, 1 usage,
 * 2 setup (no device, too few CPUs, CPU lacks an instruction), 4 peer.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include "tool.h"

#include <cpuid.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOOL_ID 8
#define MAX_STORERS 7

/* ---- own-stores ----------------------------------------------------------------------- */

struct own {
	struct tool *t;
	volatile uint64_t *base; /* L lines */
	size_t lines;
	double seconds;
	int storers;
	volatile int go, stop;
	/* per store thread */
	uint64_t rounds[MAX_STORERS];
	uint64_t lost[MAX_STORERS];
	uint64_t first_bad[MAX_STORERS][3]; /* line, got, want */
	/* flusher */
	uint64_t ops;
	int lib_err;
};

static uint64_t own_tag(int s, uint64_t r, size_t k)
{
	return r ? (1ull << 63) | r << 16 | (uint64_t)s << 8 | (k & 0xff) : 0;
}

struct own_arg {
	struct own *o;
	int s;
};

static void *own_storer(void *arg)
{
	struct own_arg *a = arg;
	struct own *o = a->o;
	int s = a->s;
	tool_pin_cpu(1 + s);
	while (!o->go)
		__builtin_ia32_pause();
	uint64_t r = 0;
	while (!o->stop) {
		for (size_t k = 0; k < o->lines; k++) {
			volatile uint64_t *w = o->base + 8 * k;
			uint64_t got = w[s], want = own_tag(s, r, k);
			if (got != want) {
				if (!o->lost[s]++) {
					o->first_bad[s][0] = k;
					o->first_bad[s][1] = got;
					o->first_bad[s][2] = want;
				}
			}
			w[s] = own_tag(s, r + 1, k);
			__atomic_fetch_add((uint64_t *)&w[7], 1, __ATOMIC_RELAXED);
		}
		r++;
	}
	o->rounds[s] = r;
	return NULL;
}

static int own_flusher(struct own *o)
{
	cxlpod *p = o->t->p;
	size_t len = o->lines * CXLPOD_LINE;
	uint64_t s = o->t->epoch | 1;
	double t0 = now_s();
	while (now_s() - t0 < o->seconds) {
		for (int i = 0; i < 64; i++) {
			uint64_t x = splitmix64(&s);
			const void *a = (const void *)o->base;
			size_t l = len;
			if (x & 1) { /* one line */
				a = (const void *)(o->base + 8 * ((x >> 8) % o->lines));
				l = CXLPOD_LINE;
			}
			int e;
			switch ((x >> 1) % 3) {
			case 0: e = cxlpod_invalidate(p, a, l); break;
			case 1: e = cxlpod_flush(p, a, l); break;
			default:
				e = cxlpod_writeback(p, a, l);
				if (!e)
					e = cxlpod_fence(p);
			}
			if (e) {
				o->lib_err = 1;
				return EXIT_SETUP;
			}
			o->ops++;
		}
	}
	return 0;
}

struct own_result {
	enum cxlpod_method method;
	int storers;
	uint64_t stores, lost, final_bad, counter_bad, pool_bad, ops;
	bool ok;
};

static int run_own(struct tool *t, size_t lines, double seconds, struct own_result *res)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int storers = ncpu - 1 > MAX_STORERS ? MAX_STORERS : (int)ncpu - 1;
	if (storers < 1) {
		fprintf(stderr, "%s: own-stores needs >= 2 vCPUs (have %ld; --smp)\n", t->name,
			ncpu);
		return EXIT_SETUP;
	}
	size_t len = lines * CXLPOD_LINE;
	size_t region = (len + 4095) & ~(size_t)4095;
	if ((size_t)(t->rank + 1) * region > t->nc_len) {
		fprintf(stderr, "%s: own-stores range does not fit\n", t->name);
		return EXIT_SETUP;
	}
	struct own o = {.t = t, .lines = lines, .seconds = seconds, .storers = storers};
	o.base = (volatile uint64_t *)(t->nc + (size_t)t->rank * region);
	/* the range starts as zeros in the image and the pool */
	LIBCALL(t, cxlpod_invalidate(t->p, (const void *)o.base, len));
	memset((void *)o.base, 0, len);
	LIBCALL(t, cxlpod_flush(t->p, (const void *)o.base, len));
	LIBCALL(t, cxlpod_fence(t->p));
	pthread_t th[MAX_STORERS];
	struct own_arg args[MAX_STORERS];
	if (tool_pin_cpu(0))
		fprintf(stderr, "%s: cannot pin the flusher to cpu 0\n", t->name);
	for (int s = 0; s < storers; s++) {
		args[s] = (struct own_arg){&o, s};
		if (pthread_create(&th[s], NULL, own_storer, &args[s])) {
			fprintf(stderr, "%s: pthread_create failed\n", t->name);
			return EXIT_SETUP;
		}
	}
	o.go = 1;
	int rc = own_flusher(&o);
	o.stop = 1;
	for (int s = 0; s < storers; s++)
		pthread_join(th[s], NULL);
	if (rc) {
		fprintf(stderr, "%s: flusher: %s\n", t->name, cxlpod_errmsg());
		return rc;
	}
	memset(res, 0, sizeof(*res));
	res->method = t->info.method;
	res->storers = storers;
	res->ops = o.ops;
	uint64_t sum = 0;
	for (int s = 0; s < storers; s++) {
		res->stores += o.rounds[s] * lines;
		res->lost += o.lost[s];
		sum += o.rounds[s];
		if (o.lost[s])
			fprintf(stderr,
				"%s: thread %d lost %llu stores; first: line %llu read 0x%llx, its "
				"last store was 0x%llx\n",
				t->name, s, (unsigned long long)o.lost[s],
				(unsigned long long)o.first_bad[s][0],
				(unsigned long long)o.first_bad[s][1],
				(unsigned long long)o.first_bad[s][2]);
	}
	for (int pass = 0; pass < 2; pass++) {
		if (pass) { /* the pool's copy */
			LIBCALL(t, cxlpod_flush(t->p, (const void *)o.base, len));
			LIBCALL(t, cxlpod_fence(t->p));
			LIBCALL(t, cxlpod_invalidate(t->p, (const void *)o.base, len));
		}
		uint64_t bad = 0, cbad = 0;
		for (size_t k = 0; k < lines; k++) {
			for (int s = 0; s < storers; s++)
				bad += o.base[8 * k + s] != own_tag(s, o.rounds[s], k);
			cbad += o.base[8 * k + 7] != sum;
		}
		if (pass)
			res->pool_bad = bad + cbad;
		else {
			res->final_bad = bad;
			res->counter_bad = cbad;
		}
	}
	res->ok = !res->lost && !res->final_bad && !res->counter_bad && !res->pool_bad;
	return 0;
}

/* ---- torn ----------------------------------------------------------------------------- */

#define TORN_WORD 0x0101010101010101ull

struct torn_result {
	enum cxlpod_method method;
	uint64_t rounds, fetched, torn, foreign, pool_torn;
	uint64_t seen_host[CXLPOD_MAX_HOSTS];
	bool ok;
};

static uint64_t torn_tag(int host, uint64_t round)
{
	return (uint64_t)(host + 1) << 48 | (round & 0xffffffffffull) << 8;
}

/* 0 one tag (or zeros; *host = -1 for zeros), 1 torn, 2 foreign */
static int torn_check(const volatile uint64_t *l, int nhosts, int *host)
{
	uint64_t w[8];
	for (int i = 0; i < 8; i++)
		w[i] = l[i];
	*host = -1;
	bool zero = true;
	for (int i = 0; i < 8; i++)
		zero &= w[i] == 0;
	if (zero)
		return 0;
	for (int i = 0; i < 8; i++)
		if (w[i] != w[0] + (uint64_t)i * TORN_WORD)
			return 1;
	int h = (int)(w[0] >> 48) - 1;
	if (h < 0 || h >= nhosts || (w[0] & 0xff))
		return 2;
	*host = h;
	return 0;
}

static int run_torn(struct tool *t, size_t lines, double seconds, struct torn_result *res)
{
	volatile uint64_t *base = (volatile uint64_t *)t->nc;
	size_t len = lines * CXLPOD_LINE;
	memset(res, 0, sizeof(*res));
	res->method = t->info.method;
	if (t->rank == 0) {
		LIBCALL(t, cxlpod_invalidate(t->p, (const void *)base, len));
		memset((void *)base, 0, len);
		LIBCALL(t, cxlpod_flush(t->p, (const void *)base, len));
		LIBCALL(t, cxlpod_fence(t->p));
	}
	if (tool_barrier(t))
		return EXIT_PEER;
	double t0 = now_s();
	uint64_t r = 0;
	while (now_s() - t0 < seconds) {
		r++;
		uint64_t tag = torn_tag(t->rank, r);
		for (size_t k = 0; k < lines; k++)
			for (int i = 0; i < 8; i++)
				base[8 * k + i] = tag + (uint64_t)i * TORN_WORD;
		LIBCALL(t, cxlpod_writeback(t->p, (const void *)base, len));
		LIBCALL(t, cxlpod_fence(t->p));
		LIBCALL(t, cxlpod_invalidate(t->p, (const void *)base, len));
		for (size_t k = 0; k < lines; k++) {
			int h, c = torn_check(base + 8 * k, t->nhosts, &h);
			res->fetched++;
			if (c == 1) {
				if (!res->torn++)
					fprintf(stderr, "%s: torn line %zu: %016llx %016llx ... %016llx\n",
						t->name, k, (unsigned long long)base[8 * k],
						(unsigned long long)base[8 * k + 1],
						(unsigned long long)base[8 * k + 7]);
			} else if (c == 2)
				res->foreign++;
			else if (h >= 0)
				res->seen_host[h]++;
		}
	}
	res->rounds = r;
	if (tool_barrier(t))
		return EXIT_PEER;
	if (t->rank == 0) {
		LIBCALL(t, cxlpod_invalidate(t->p, (const void *)base, len));
		for (size_t k = 0; k < lines; k++) {
			int h;
			res->pool_torn += torn_check(base + 8 * k, t->nhosts, &h) != 0;
		}
	}
	/* every host's data reached the others at least once */
	int others = 0;
	for (int h = 0; h < t->nhosts; h++)
		others += h != t->rank && res->seen_host[h];
	res->ok = !res->torn && !res->foreign && !res->pool_torn &&
		  (t->nhosts == 1 || others > 0);
	if (tool_barrier(t))
		return EXIT_PEER;
	return 0;
}

/* ---- nt ------------------------------------------------------------------------------- */

enum {
	NT_MOVNTI32,
	NT_MOVNTI64,
	NT_MOVNTQ,
	NT_MOVNTDQ,
	NT_MOVNTPS,
	NT_MOVNTPD,
	NT_VMOVNTDQ,
	NT_VMOVNTPS,
	NT_VMOVNTPD,
	NT_MASKMOVQ,
	NT_MASKMOVDQU,
	NT_VMASKMOVDQU,
	NT_VMASKMOVDQU_HALF,
	NT_PLAIN, /* control: plain stores + sfence, no writeback */
	NT_N
};
static const char *nt_name[NT_N] = {
	"movnti32",  "movnti64",  "movntq",    "movntdq",     "movntps",
	"movntpd",   "vmovntdq",  "vmovntps",  "vmovntpd",    "maskmovq",
	"maskmovdqu", "vmaskmovdqu", "vmaskmovdqu-half", "plain-control",
};
#define NT_REGION (8u << 10) /* two pages: the copy crosses a page boundary */

static bool cpu_has_avx(void)
{
	unsigned a, b, c, d;
	if (!__get_cpuid(1, &a, &b, &c, &d))
		return false;
	if (!(c & bit_AVX) || !(c & bit_OSXSAVE))
		return false;
	unsigned lo, hi;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return (lo & 6) == 6;
}

/* the half mask of vmaskmovdqu-half: even bytes of every 16 */
static bool nt_written(int ins, size_t i)
{
	return ins != NT_VMASKMOVDQU_HALF || !(i & 1);
}

/* copy with LOAD into register REG (CLOB: its clobber name), then the
 * non-temporal STORE, STEP bytes at a time */
#define NT_LOOP(step, load, store, reg, clob)                                                 \
	for (i = 0; i < len; i += (step))                                                      \
		__asm__ volatile(load " (%1), %%" reg "\n\t" store " %%" reg ", (%0)"           \
				 ::"r"(dst + i), "r"(src + i)                                          \
				 : "memory", clob)

static void nt_copy(int ins, uint8_t *dst, const uint8_t *src, size_t len)
{
	static const uint8_t ones[16] __attribute__((aligned(16))) = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
	static const uint8_t half[16] __attribute__((aligned(16))) = {
		0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0, 0xff, 0};
	size_t i;
	switch (ins) {
	case NT_MOVNTI32:
		for (i = 0; i < len; i += 4)
			__asm__ volatile("movnti %1, %0"
					 : "=m"(*(uint32_t *)(dst + i))
					 : "r"(*(const uint32_t *)(src + i)));
		break;
	case NT_MOVNTI64:
		for (i = 0; i < len; i += 8)
			__asm__ volatile("movnti %1, %0"
					 : "=m"(*(uint64_t *)(dst + i))
					 : "r"(*(const uint64_t *)(src + i)));
		break;
	case NT_MOVNTQ:
		NT_LOOP(8, "movq", "movntq", "mm0", "mm0");
		__asm__ volatile("emms");
		break;
	case NT_MOVNTDQ:
		NT_LOOP(16, "movdqu", "movntdq", "xmm0", "xmm0");
		break;
	case NT_MOVNTPS:
		NT_LOOP(16, "movups", "movntps", "xmm0", "xmm0");
		break;
	case NT_MOVNTPD:
		NT_LOOP(16, "movupd", "movntpd", "xmm0", "xmm0");
		break;
	case NT_VMOVNTDQ:
		NT_LOOP(32, "vmovdqu", "vmovntdq", "ymm0", "xmm0");
		__asm__ volatile("vzeroupper");
		break;
	case NT_VMOVNTPS:
		NT_LOOP(32, "vmovups", "vmovntps", "ymm0", "xmm0");
		__asm__ volatile("vzeroupper");
		break;
	case NT_VMOVNTPD:
		NT_LOOP(32, "vmovupd", "vmovntpd", "ymm0", "xmm0");
		__asm__ volatile("vzeroupper");
		break;
	case NT_MASKMOVQ:
		for (i = 0; i < len; i += 8)
			__asm__ volatile("movq (%1), %%mm0\n\tmovq (%2), %%mm1\n\t"
					 "maskmovq %%mm1, %%mm0"
					 ::"D"(dst + i), "r"(src + i), "r"(ones)
					 : "memory", "mm0", "mm1");
		__asm__ volatile("emms");
		break;
	case NT_MASKMOVDQU:
	case NT_VMASKMOVDQU:
	case NT_VMASKMOVDQU_HALF: {
		const uint8_t *m = ins == NT_VMASKMOVDQU_HALF ? half : ones;
		for (i = 0; i < len; i += 16) {
			if (ins == NT_MASKMOVDQU)
				__asm__ volatile("movdqu (%1), %%xmm0\n\tmovdqa (%2), %%xmm1\n\t"
						 "maskmovdqu %%xmm1, %%xmm0"
						 ::"D"(dst + i), "r"(src + i), "r"(m)
						 : "memory", "xmm0", "xmm1");
			else
				__asm__ volatile("vmovdqu (%1), %%xmm0\n\tvmovdqa (%2), %%xmm1\n\t"
						 "vmaskmovdqu %%xmm1, %%xmm0"
						 ::"D"(dst + i), "r"(src + i), "r"(m)
						 : "memory", "xmm0", "xmm1");
		}
		break;
	}
	case NT_PLAIN:
		memcpy(dst, src, len);
		break;
	}
}

struct nt_ctl {
	struct pline flag; /* round published by the writer (plain store) */
};

struct nt_result {
	int ins;
	const char *check; /* writer-reread | reader */
	const char *expect; /* new | old */
	uint64_t new_, old, other; /* bytes */
	bool ok;
};

static void nt_fill(uint8_t *b, size_t len, uint64_t epoch, int ins, int is_new)
{
	uint64_t s = epoch ^ ((uint64_t)ins << 40) ^ ((uint64_t)is_new << 32);
	for (size_t i = 0; i < len; i += 8) {
		uint64_t v = splitmix64(&s);
		memcpy(b + i, &v, 8);
	}
}

/* Bytes as expected (a byte whose old and new values are equal counts as
 * expected), as the other of old / new, or neither. */
static void nt_classify(const volatile uint8_t *got, const uint8_t *oldb, const uint8_t *newb,
			int ins, size_t len, bool want_new, struct nt_result *r)
{
	r->new_ = r->old = r->other = 0;
	for (size_t i = 0; i < len; i++) {
		uint8_t g = got[i], n = nt_written(ins, i) ? newb[i] : oldb[i], o = oldb[i];
		if (g == (want_new ? n : o))
			*(want_new ? &r->new_ : &r->old) += 1;
		else if (g == (want_new ? o : n))
			*(want_new ? &r->old : &r->new_) += 1;
		else
			r->other++;
	}
	r->ok = (want_new ? r->new_ : r->old) == len;
}

/* One region's start: the pool and the writer's image hold OLD, clean */
static int nt_old(struct tool *t, uint8_t *dst, const uint8_t *oldb, bool writer)
{
	if (writer) {
		LIBCALL(t, cxlpod_invalidate(t->p, dst, NT_REGION));
		memcpy(dst, oldb, NT_REGION);
		LIBCALL(t, cxlpod_flush(t->p, dst, NT_REGION));
		LIBCALL(t, cxlpod_fence(t->p));
	}
	return tool_barrier(t) ? EXIT_PEER : 0;
}

static int run_nt(struct tool *t, struct nt_result *res, int *nres)
{
	bool writer = t->rank == 0, avx = cpu_has_avx();
	struct nt_ctl *ctl = (struct nt_ctl *)t->coh;
	if (NT_N * NT_REGION > t->nc_len) {
		fprintf(stderr, "%s: nt regions do not fit the non-coherent area\n", t->name);
		return EXIT_SETUP;
	}
	if (!avx) {
		fprintf(stderr, "%s: the CPU has no usable AVX (vmovnt*, vmaskmovdqu): use a CPU "
				"model with AVX (the launcher's -cpu max has it)\n",
			t->name);
		tool_abort(t);
		return EXIT_SETUP;
	}
	if (writer)
		tool_pin_cpu(0);
	uint8_t *oldb = aligned_alloc(64, NT_REGION), *newb = aligned_alloc(64, NT_REGION);
	if (!oldb || !newb)
		return EXIT_SETUP;
	int rc;
	*nres = 0;
	for (int ins = 0; ins < NT_N; ins++) {
		uint8_t *dst = t->nc + (size_t)ins * NT_REGION;
		nt_fill(oldb, NT_REGION, t->epoch, ins, 0);
		nt_fill(newb, NT_REGION, t->epoch, ins, 1);
		if ((rc = nt_old(t, dst, oldb, writer)))
			return rc;
		if (!writer) /* the readers' images hold OLD too */
			LIBCALL(t, cxlpod_invalidate(t->p, dst, NT_REGION));
		if (tool_barrier(t))
			return EXIT_PEER;
		struct nt_result *r = &res[(*nres)++];
		r->ins = ins;
		if (writer) {
			nt_copy(ins, dst, newb, NT_REGION);
			__asm__ volatile("sfence" ::: "memory");
			/* publish with a plain store: not itself a fence point */
			__atomic_store_n(&ctl->flag.v, (t->epoch << 8) | (uint64_t)(ins + 1),
					 __ATOMIC_RELEASE);
			r->check = "writer-reread";
			r->expect = "new";
			nt_classify(dst, oldb, newb, ins, NT_REGION, true, r);
		} else {
			if (tool_wait_eq(t, &ctl->flag.v, (t->epoch << 8) | (uint64_t)(ins + 1)))
				return EXIT_PEER;
			LIBCALL(t, cxlpod_invalidate(t->p, dst, NT_REGION));
			r->check = "reader";
			r->expect = ins == NT_PLAIN ? "old" : "new";
			nt_classify(dst, oldb, newb, ins, NT_REGION, ins != NT_PLAIN, r);
		}
		if (tool_barrier(t))
			return EXIT_PEER;
	}
	free(oldb);
	free(newb);
	return 0;
}

/* nt-merge: rank 0's bytes of a line (the rest are rank 1's) */
static bool merge_mine(int ins, size_t i)
{
	return ins == NT_VMASKMOVDQU_HALF ? !(i & 1) : i % CXLPOD_LINE < CXLPOD_LINE / 2;
}

static int run_nt_merge(struct tool *t, struct nt_result *res, int *nres)
{
	bool writer = t->rank == 0, peer = t->rank == 1;
	struct nt_ctl *ctl = (struct nt_ctl *)t->coh;
	if (t->nhosts < 2) {
		fprintf(stderr, "%s: nt-merge needs 2 or more hosts\n", t->name);
		return EXIT_SETUP;
	}
	if (NT_N * NT_REGION > t->nc_len) {
		fprintf(stderr, "%s: nt regions do not fit the non-coherent area\n", t->name);
		return EXIT_SETUP;
	}
	if (!cpu_has_avx()) {
		fprintf(stderr, "%s: the CPU has no usable AVX (vmovnt*, vmaskmovdqu)\n", t->name);
		tool_abort(t);
		return EXIT_SETUP;
	}
	uint8_t *oldb = aligned_alloc(64, NT_REGION), *newb = aligned_alloc(64, NT_REGION);
	uint8_t *want = aligned_alloc(64, NT_REGION);
	if (!oldb || !newb || !want)
		return EXIT_SETUP;
	int rc;
	*nres = 0;
	for (int ins = 0; ins < NT_PLAIN; ins++) {
		uint8_t *dst = t->nc + (size_t)ins * NT_REGION;
		size_t part = ins == NT_VMASKMOVDQU_HALF ? CXLPOD_LINE : CXLPOD_LINE / 2;
		nt_fill(oldb, NT_REGION, t->epoch ^ 0x6d65, ins, 0);
		nt_fill(newb, NT_REGION, t->epoch ^ 0x6d65, ins, 1);
		if ((rc = nt_old(t, dst, oldb, writer)))
			return rc;
		if (peer) { /* rank 1 writes its bytes of every line back */
			LIBCALL(t, cxlpod_invalidate(t->p, dst, NT_REGION));
			for (size_t i = 0; i < NT_REGION; i++)
				if (!merge_mine(ins, i))
					dst[i] = newb[i];
			LIBCALL(t, cxlpod_writeback(t->p, dst, NT_REGION));
			LIBCALL(t, cxlpod_fence(t->p));
		}
		if (tool_barrier(t))
			return EXIT_PEER;
		if (writer) {
			/* the writer's part of each line, stale bytes beside it */
			for (size_t l = 0; l < NT_REGION; l += CXLPOD_LINE)
				nt_copy(ins, dst + l, newb + l, part);
			__asm__ volatile("sfence" ::: "memory");
			__atomic_store_n(&ctl->flag.v, (t->epoch << 8) | (uint64_t)(ins + 0x41),
					 __ATOMIC_RELEASE);
		} else if (tool_wait_eq(t, &ctl->flag.v, (t->epoch << 8) | (uint64_t)(ins + 0x41))) {
			return EXIT_PEER;
		}
		LIBCALL(t, cxlpod_invalidate(t->p, dst, NT_REGION));
		/* every byte new: the writer's (where its mask wrote) and rank 1's */
		for (size_t i = 0; i < NT_REGION; i++)
			want[i] = merge_mine(ins, i) && !nt_written(ins, i) ? oldb[i] : newb[i];
		struct nt_result *r = &res[(*nres)++];
		r->ins = ins;
		r->check = "merge";
		r->expect = "new";
		nt_classify(dst, oldb, want, NT_MOVNTI64, NT_REGION, true, r);
		if (tool_barrier(t))
			return EXIT_PEER;
	}
	free(oldb);
	free(newb);
	free(want);
	return 0;
}

/* ---- main ----------------------------------------------------------------------------- */

static void usage(void)
{
	printf("usage: cxlpod-fidelity own-stores|torn|nt|nt-merge [--lines N] [--seconds S]\n"
	       "                       [--method doorbell|native|both] [options]\n"
	       "  own-stores  one host, >= 2 vCPUs: no store is lost to a concurrent\n"
	       "              writeback / invalidate / flush (lines default 64)\n"
	       "  torn        every host writes back and fetches the same lines: every\n"
	       "              line read holds one writeback (lines default 16)\n"
	       "  nt          rank 0 copies with each non-temporal instruction + sfence,\n"
	       "              the others see every byte (and a plain-store control stays old)\n"
	       "  nt-merge    rank 0's non-temporal stores to lines that rank 1 changed\n"
	       "              write only their bytes: every host sees both (>= 2 hosts)\n"
	       "  --seconds S per method, own-stores and torn (default 3)\n%s",
	       tool_common_usage());
}

int main(int argc, char **argv)
{
	struct tool t = {.name = "cxlpod-fidelity", .rank = -1};
	const char *test = NULL;
	size_t lines = 0;
	double seconds = 3;
	const struct topt opts[] = {
		{"--lines", TOPT_SIZE, &lines, 1, 4096},
		{"--seconds", TOPT_DBL, &seconds, 0.001, 3600},
		{NULL, TOPT_FLAG, NULL, 0, 0},
	};
	int pr = tool_parse(&t, argc, argv, opts, usage, &test);
	if (pr)
		return pr == TOOL_HELP ? 0 : pr;
	if (!test || (strcmp(test, "own-stores") && strcmp(test, "torn") && strcmp(test, "nt") &&
		      strcmp(test, "nt-merge"))) {
		fprintf(stderr, "cxlpod-fidelity: name a test: own-stores, torn, nt or nt-merge\n");
		return EXIT_USAGE;
	}
	bool own = !strcmp(test, "own-stores"), torn = !strcmp(test, "torn");
	if (!lines)
		lines = own ? 64 : 16;
	bool both = t.method_both;
	if (both)
		t.method = CXLPOD_METHOD_DOORBELL;
	int rc = tool_open(&t);
	if (rc)
		return rc;
	if (t.info.backend != CXLPOD_BACKEND_DEVICE) {
		fprintf(stderr, "cxlpod-fidelity: needs the cxl-shm device (backend is %s)\n",
			cxlpod_backend_name(t.info.backend));
		return EXIT_SETUP;
	}
	if (lines * CXLPOD_LINE > t.nc_len) {
		fprintf(stderr, "cxlpod-fidelity: %zu lines do not fit the non-coherent area\n",
			lines);
		return EXIT_SETUP;
	}
	if (tool_join(&t, TOOL_ID, NULL, NULL))
		return EXIT_PEER;

	struct jbuf j;
	j_begin(&j);
	j_common(&j, &t);
	j_str(&j, "test", test);
	j_arr_begin(&j, "results");
	bool all_ok = true;
	bool ntm = !strcmp(test, "nt-merge");
	int nm = both && !strncmp(test, "nt", 2) ? 1 : both ? 2 : 1;
	for (int m = 0; m < nm && !rc; m++) {
		if (m > 0) {
			if (!t.info.native_usable) {
				fprintf(stderr, "cxlpod-fidelity: native method not usable here\n");
				rc = EXIT_SETUP;
				break;
			}
			if (cxlpod_set_method(t.p, CXLPOD_METHOD_NATIVE)) {
				fprintf(stderr, "cxlpod-fidelity: %s\n", cxlpod_errmsg());
				rc = EXIT_SETUP;
				break;
			}
			cxlpod_get_info(t.p, &t.info);
		}
		const char *mn = cxlpod_method_name(t.info.method);
		if (own) {
			struct own_result r;
			if ((rc = run_own(&t, lines, seconds, &r)))
				break;
			all_ok &= r.ok;
			if (!t.json)
				printf("own-stores: %s: %d store threads, %llu stores, %llu coherence "
				       "ops: %llu lost, %llu words and %llu counters wrong, %llu wrong "
				       "in the pool: %s\n",
				       mn, r.storers, (unsigned long long)r.stores,
				       (unsigned long long)r.ops, (unsigned long long)r.lost,
				       (unsigned long long)r.final_bad, (unsigned long long)r.counter_bad,
				       (unsigned long long)r.pool_bad, r.ok ? "ok" : "WRONG");
			j_obj_begin(&j, NULL);
			j_str(&j, "method", mn);
			j_int(&j, "store_threads", r.storers);
			j_uint(&j, "stores", r.stores);
			j_uint(&j, "coherence_ops", r.ops);
			j_uint(&j, "lost", r.lost);
			j_uint(&j, "words_wrong", r.final_bad);
			j_uint(&j, "counters_wrong", r.counter_bad);
			j_uint(&j, "pool_wrong", r.pool_bad);
			j_bool(&j, "ok", r.ok);
			j_obj_end(&j);
		} else if (torn) {
			struct torn_result r;
			if ((rc = run_torn(&t, lines, seconds, &r)))
				break;
			all_ok &= r.ok;
			uint64_t others = 0;
			for (int h = 0; h < t.nhosts; h++)
				others += h != t.rank ? r.seen_host[h] : 0;
			if (!t.json)
				printf("torn: %s: host %d: %llu rounds, %llu lines fetched (%llu from "
				       "other hosts): %llu torn, %llu foreign, %llu torn in the pool: "
				       "%s\n",
				       mn, t.rank, (unsigned long long)r.rounds,
				       (unsigned long long)r.fetched, (unsigned long long)others,
				       (unsigned long long)r.torn, (unsigned long long)r.foreign,
				       (unsigned long long)r.pool_torn, r.ok ? "ok" : "WRONG");
			j_obj_begin(&j, NULL);
			j_str(&j, "method", mn);
			j_uint(&j, "rounds", r.rounds);
			j_uint(&j, "fetched", r.fetched);
			j_uint(&j, "from_others", others);
			j_uint(&j, "torn", r.torn);
			j_uint(&j, "foreign", r.foreign);
			j_uint(&j, "pool_torn", r.pool_torn);
			j_bool(&j, "ok", r.ok);
			j_obj_end(&j);
		} else {
			struct nt_result res[NT_N];
			int n = 0;
			if ((rc = ntm ? run_nt_merge(&t, res, &n) : run_nt(&t, res, &n)))
				break;
			for (int k = 0; k < n; k++) {
				struct nt_result *r = &res[k];
				all_ok &= r->ok;
				if (!t.json)
					printf("nt: %-16s host %d %-13s %5llu new, %5llu old, %llu other "
					       "bytes of %u: %s (expected %s)\n",
					       nt_name[r->ins], t.rank, r->check,
					       (unsigned long long)r->new_, (unsigned long long)r->old,
					       (unsigned long long)r->other, NT_REGION,
					       r->ok ? "ok" : "WRONG", r->expect);
				j_obj_begin(&j, NULL);
				j_str(&j, "insn", nt_name[r->ins]);
				j_str(&j, "check", r->check);
				j_str(&j, "expect", r->expect);
				j_uint(&j, "new", r->new_);
				j_uint(&j, "old", r->old);
				j_uint(&j, "other", r->other);
				j_bool(&j, "ok", r->ok);
				j_obj_end(&j);
			}
		}
	}
	j_arr_end(&j);
	if (!rc && !all_ok)
		rc = EXIT_WRONG;
	j_bool(&j, "ok", rc == 0);
	if (t.json)
		j_end_print(&j);
	else {
		free(j.s);
		printf("fidelity: %s: host %d: %s\n", test, t.rank, rc == 0 ? "PASS" : "FAIL");
	}
	tool_close(&t);
	return rc;
}
