/*
 * cxlpod-resetrace: a guest resets its own cxl-shm device from one vCPU,
 * again and again, while its other vCPUs store, flush and store
 * non-temporally through it; another host works on and watches the pool.
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Rank 0, N threads each pinned to its own vCPU:
 *
 *   thread 0      --resets times, after a random pause of up to
 *                 --pause-ms: resets the device through the kernel
 *                 (/sys/bus/pci/devices/BDF/reset: the kernel saves the
 *                 config space, does a secondary bus reset of the root
 *                 port, restores the config space) and then commits HDM
 *                 decoder 0 again through the component registers of BAR0,
 *                 from the values it had before the first reset (a bus
 *                 reset clears the decoders; the kernel's CXL driver does
 *                 not commit them again, it only warns);
 *   threads 1..   meanwhile, in a loop over --lines lines of their own in
 *                 the non-coherent area: store a new version of a line
 *                 (8 words, each the line's number and the version), make
 *                 it durable with clwb, clflushopt or non-temporal stores
 *                 (in turn) and sfence, and, when no reset began or was in
 *                 progress from before the stores until after the fence,
 *                 invalidate it and read it back from the pool: it must
 *                 hold exactly that version ("acked").  Once a reset is
 *                 over, each of the thread's lines is read back before its
 *                 next store: every word must be a version of that line
 *                 between the last
 *                 acked one and the last one stored (the reset may drop
 *                 unflushed stores, never an acked line; it never mixes
 *                 lines).  At the end every line gets a final version,
 *                 checked exactly.
 *
 * The exact read-back invalidates with clflushopt, which writes a line the
 * fence left dirty back first: a fence that failed to land a line is
 * caught by the other host (it never finds that version, or the final
 * one), not by the read-back.
 *
 * What a store made while the decoder is not committed does (between the
 * bus reset and the commit) is not checked: it reaches no device (QEMU's
 * CXL window drops it and reads 0; hardware may return all ones or
 * poison), see docs/failure-model.md.  The device itself must never lose
 * an acked line, never let a reset tear a line it is writing back, and
 * never keep a line lock across the reset that another host then waits
 * for.
 *
 * Every other rank, meanwhile: writes, writes back, invalidates and reads
 * back lines of its own in the same 4 KiB pages as rank 0's (the hosts
 * share each page's line lock; each op checked exactly, the slowest round
 * reported), and reads rank 0's lines again and again (every word must
 * name its line and never go back to an older version).  When rank 0 is
 * done it checks every final version and rank 0's generation in the host
 * table (one more per reset).
 *
 *   cxlpod-resetrace [--threads N] [--resets N] [--lines N] [--pause-ms MS]
 *                    [common options]
 *
 * Exit codes: 0 every check passed; 3 a lost, torn or wrong line, a wrong
 * op of the other host, a wrong generation; 2 setup (no device, no native
 * instructions, fewer vCPUs than threads, no committed decoder, a reset
 * or commit that failed); 4 peer timeout.
 */
#define _GNU_SOURCE
#include "tool.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define TOOL_ID 10
#define MAX_THREADS 16
#define MAX_LINES 4096 /* lines of all writer threads together */
/* rank 0's lines fill the first half of each 4 KiB page of the start of
 * the non-coherent area, the other ranks' own lines the second half: the
 * hosts share each page's line lock */
#define PAGE_LINES 64
#define HALF 32

/* the component registers: the CXL.cachemem block at BAR0 + 4 KiB, its
 * capability array, the HDM decoder capability (ID 5) and decoder 0 */
#define CM_OFFSET 0x1000
#define CM_MAP 0x2000
#define HDM_CAP_ID 5
#define HDM_GCTL 0x4
#define HDM_DEC0 0x10 /* base lo, base hi, size lo, size hi, ctrl, skip lo, skip hi */
#define HDM_CTRL_COMMIT (1u << 9)
#define HDM_CTRL_COMMITTED (1u << 10)
#define HDM_CTRL_ERR (1u << 11)
#define DEC_REGS 7

/* in the coherent window (t->coh) */
struct ctl {
	struct pline phase; /* 1: rank 0's resets are over, final versions set */
	struct pline nlines, resets, gen0, host0; /* rank 0's generation before, its host id */
	struct pline checked[CXLPOD_MAX_HOSTS], wrong[CXLPOD_MAX_HOSTS];
	uint64_t final[MAX_LINES];
};

struct thr {
	int id, cpu, cpu_end, first, n;
	uint64_t seen_done; /* the last completed reset this thread has seen */
	uint64_t stores, acked, verified, skipped, overlapped, after_reset, lost, bad;
	uint64_t by_method[3];
};

static const char *const method_name[3] = {"clwb", "clflushopt", "nt"};
static _Atomic uint64_t started, done;
static atomic_int stop;
static atomic_flag told = ATOMIC_FLAG_INIT;
static char first_wrong[400] = "";
static int nthreads = 4, resets = 8, lines_per = 32, pause_ms = 200;
static volatile uint64_t *base; /* rank 0's lines: the start of the non-coherent area */
static uint64_t cur[MAX_LINES], acked[MAX_LINES];
static uint8_t need_check[MAX_LINES];
static volatile uint32_t *hdm; /* decoder capability, mapped from BAR0 */
static uint32_t saved[DEC_REGS], saved_gctl;
static double reset_s, reset_s_max, commit_s_max;
static char reset_path[300], reset_method[64];
static int reset_err;

static void wrong(struct thr *th, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void wrong(struct thr *th, const char *fmt, ...)
{
	if (th)
		th->bad++;
	if (!atomic_flag_test_and_set(&told)) {
		va_list ap;
		int n = th ? snprintf(first_wrong, sizeof(first_wrong), "thread %d: ", th->id) : 0;
		va_start(ap, fmt);
		vsnprintf(first_wrong + n, sizeof(first_wrong) - n, fmt, ap);
		va_end(ap);
		fprintf(stderr, "cxlpod-resetrace: %s\n", first_wrong);
	}
}

static inline uint64_t word_of(uint64_t line, uint64_t ver) { return line << 48 | ver; }
static inline uint64_t line_of(uint64_t w) { return w >> 48; }
static inline uint64_t ver_of(uint64_t w) { return w & ((1ull << 48) - 1); }

static inline volatile uint64_t *line0(uint64_t g)
{
	return base + ((g / HALF) * PAGE_LINES + g % HALF) * 8;
}

static inline void sfence(void) { __asm__ volatile("sfence" ::: "memory"); }
static inline void clwb(volatile void *a)
{
	__asm__ volatile("clwb %0" : "+m"(*(volatile char *)a) : : "memory");
}
static inline void clflushopt(volatile void *a)
{
	__asm__ volatile("clflushopt %0" : "+m"(*(volatile char *)a) : : "memory");
}
static inline void movnti(volatile uint64_t *a, uint64_t v)
{
	__asm__ volatile("movnti %1, %0" : "=m"(*a) : "r"(v) : "memory");
}

/* Read line g from the pool: drop this host's (clean) copy, then load.
 * Returns false when a reset began meanwhile (the words mean nothing). */
static bool read_back(uint64_t g, uint64_t s0, uint64_t w[8])
{
	volatile uint64_t *l = line0(g);
	clflushopt(l);
	sfence();
	for (int k = 0; k < 8; k++)
		w[k] = l[k];
	return atomic_load(&started) == s0;
}

/* A line a reset overlapped, once no reset is in progress: every word a
 * version of this line between the last acked and the last stored. */
static void check_after_reset(struct thr *th, uint64_t g, uint64_t s0)
{
	uint64_t w[8];
	if (!read_back(g, s0, w))
		return; /* another reset began: check after that one */
	need_check[g] = 0;
	th->after_reset++;
	for (int k = 0; k < 8; k++) {
		if (!w[k] && !acked[g])
			continue; /* never acked: the pool may still hold its zeros */
		if (line_of(w[k]) != g || ver_of(w[k]) < acked[g] || ver_of(w[k]) > cur[g]) {
			th->lost++;
			wrong(th, "after a reset, line %" PRIu64 " word %d is 0x%016" PRIx64
				  " (line %" PRIu64 " version %" PRIu64 "); want line %" PRIu64
				  " version %" PRIu64 "..%" PRIu64 " (acked..stored)",
			      g, k, w[k], line_of(w[k]), ver_of(w[k]), g, acked[g], cur[g]);
			return;
		}
	}
}

/* One new version of line g, made durable with method m; true if acked */
static bool store_line(struct thr *th, uint64_t g, int m)
{
	volatile uint64_t *l = line0(g);
	uint64_t s0 = atomic_load(&started), d0 = atomic_load(&done);
	uint64_t v, w[8];

	if (d0 != th->seen_done && s0 == d0) {
		/* a reset is over: every line of this thread is checked after it,
		 * not only those whose stores it overlapped */
		for (int i = 0; i < th->n; i++)
			need_check[th->first + i] = 1;
		th->seen_done = d0;
	}
	if (need_check[g] && s0 == d0)
		check_after_reset(th, g, s0);
	v = word_of(g, ++cur[g]);
	for (int k = 0; k < 8; k++) {
		if (m == 2)
			movnti(&l[k], v);
		else
			l[k] = v;
	}
	if (m == 0)
		clwb(l);
	else if (m == 1)
		clflushopt(l);
	sfence();
	/* sfence does not order the load below; the fence's work is done */
	atomic_thread_fence(memory_order_seq_cst);
	th->stores++;
	th->by_method[m]++;
	if (s0 != d0 || atomic_load(&started) != s0) {
		th->overlapped++;
		need_check[g] = 1;
		return false;
	}
	acked[g] = cur[g];
	th->acked++;
	if (!read_back(g, s0, w)) {
		th->skipped++;
		return true;
	}
	th->verified++;
	for (int k = 0; k < 8; k++) {
		if (w[k] != v) {
			th->lost++;
			wrong(th, "line %" PRIu64 " (%s, no reset near it): word %d reads 0x%016" PRIx64
				  " from the pool, not the acked 0x%016" PRIx64,
			      g, method_name[m], k, w[k], v);
			break;
		}
	}
	return true;
}

static void *writer(struct thr *th)
{
	unsigned it = 0;
	while (!atomic_load(&stop) || atomic_load(&started) != atomic_load(&done)) {
		for (int i = 0; i < th->n; i++)
			store_line(th, (uint64_t)(th->first + i), (int)(it++ % 3));
	}
	/* the final version of every line, acked and read back exactly */
	for (int i = 0; i < th->n; i++) {
		uint64_t g = (uint64_t)(th->first + i);
		if (!store_line(th, g, 0))
			wrong(th, "line %" PRIu64 ": its final store overlapped a reset after the "
				  "last one", g);
		if (need_check[g])
			wrong(th, "line %" PRIu64 ": never checked after a reset", g);
	}
	return NULL;
}

static int commit_decoder(double *secs)
{
	double t0 = now_s();
	hdm[HDM_GCTL / 4] = saved_gctl;
	for (int k = 0; k < DEC_REGS; k++)
		if (k != 4)
			hdm[HDM_DEC0 / 4 + k] = saved[k];
	hdm[HDM_DEC0 / 4 + 4] = (saved[4] & ~(HDM_CTRL_COMMITTED | HDM_CTRL_ERR)) | HDM_CTRL_COMMIT;
	uint32_t c;
	while (!((c = hdm[HDM_DEC0 / 4 + 4]) & (HDM_CTRL_COMMITTED | HDM_CTRL_ERR))) {
		if (now_s() - t0 > 10) {
			fprintf(stderr, "cxlpod-resetrace: decoder 0 not committed after 10 s "
					"(control 0x%08x)\n", c);
			return EXIT_SETUP;
		}
		usleep(100);
	}
	*secs = now_s() - t0;
	if (c & HDM_CTRL_ERR) {
		fprintf(stderr, "cxlpod-resetrace: committing decoder 0 failed: control 0x%08x\n", c);
		return EXIT_SETUP;
	}
	for (int k = 0; k < DEC_REGS; k++) {
		uint32_t r = hdm[HDM_DEC0 / 4 + k];
		if (k != 4 && r != saved[k]) {
			fprintf(stderr, "cxlpod-resetrace: decoder 0 register %d reads 0x%08x after "
					"the commit, not 0x%08x\n", k, r, saved[k]);
			return EXIT_SETUP;
		}
	}
	return 0;
}

static void *resetter(struct thr *th)
{
	uint64_t seed = (uint64_t)th->id ^ (uint64_t)(now_s() * 1e9);
	for (int r = 0; r < resets && !reset_err; r++) {
		usleep((useconds_t)(splitmix64(&seed) % ((uint64_t)pause_ms * 1000 + 1)));
		atomic_fetch_add(&started, 1);
		double t0 = now_s(), cs = 0;
		int fd = open(reset_path, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, "1", 1) != 1) {
			fprintf(stderr, "cxlpod-resetrace: reset %d: %s: %s\n", r + 1, reset_path,
				strerror(errno));
			reset_err = EXIT_SETUP;
		}
		if (fd >= 0)
			close(fd);
		if (!reset_err)
			reset_err = commit_decoder(&cs);
		double s = now_s() - t0;
		reset_s += s;
		reset_s_max = s > reset_s_max ? s : reset_s_max;
		commit_s_max = cs > commit_s_max ? cs : commit_s_max;
		atomic_store(&done, atomic_load(&started));
	}
	atomic_store(&stop, 1);
	return NULL;
}

static void *run_thread(void *arg)
{
	struct thr *th = arg;
	int e = tool_pin_cpu(th->cpu);
	if (e)
		fprintf(stderr, "cxlpod-resetrace: thread %d: cannot pin to cpu %d: %s\n", th->id,
			th->cpu, strerror(-e));
	if (th->id)
		writer(th);
	else
		resetter(th);
	th->cpu_end = sched_getcpu();
	return NULL;
}

/* Map decoder 0's registers and keep its committed values */
static int map_decoder(struct tool *t)
{
	char path[300];
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resource0", t->info.pci);
	int fd = open(path, O_RDWR | O_SYNC | O_CLOEXEC);
	void *m = fd < 0 ? MAP_FAILED : mmap(NULL, CM_MAP, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		fprintf(stderr, "cxlpod-resetrace: %s: %s\n", path, strerror(errno));
		return EXIT_SETUP;
	}
	close(fd);
	volatile uint32_t *cm = (volatile uint32_t *)((uint8_t *)m + CM_OFFSET);
	unsigned n = (cm[0] >> 24) & 0xff, off = 0;
	for (unsigned i = 1; i <= n && i < 64; i++)
		if ((cm[i] & 0xffff) == HDM_CAP_ID)
			off = cm[i] >> 20;
	if (!off || off + HDM_DEC0 + 4 * DEC_REGS > CM_MAP - CM_OFFSET) {
		fprintf(stderr, "cxlpod-resetrace: no HDM decoder capability in %s (header 0x%08x)\n",
			path, cm[0]);
		return EXIT_SETUP;
	}
	hdm = cm + off / 4;
	saved_gctl = hdm[HDM_GCTL / 4];
	for (int k = 0; k < DEC_REGS; k++)
		saved[k] = hdm[HDM_DEC0 / 4 + k];
	if (!(saved[4] & HDM_CTRL_COMMITTED)) {
		fprintf(stderr, "cxlpod-resetrace: decoder 0 is not committed (control 0x%08x)\n",
			saved[4]);
		return EXIT_SETUP;
	}
	snprintf(reset_path, sizeof(reset_path), "/sys/bus/pci/devices/%s/reset", t->info.pci);
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/reset_method", t->info.pci);
	FILE *f = fopen(path, "r");
	if (!f || !fgets(reset_method, sizeof(reset_method), f) || !*reset_method) {
		fprintf(stderr, "cxlpod-resetrace: %s: no reset method\n", path);
		if (f)
			fclose(f);
		return EXIT_SETUP;
	}
	fclose(f);
	reset_method[strcspn(reset_method, "\n")] = 0;
	return 0;
}

static void reset(struct tool *t, void *arg)
{
	(void)arg;
	memset(t->coh, 0, sizeof(struct ctl));
}

static void usage(void)
{
	printf("usage: cxlpod-resetrace [--threads N(4)] [--resets N(8)] [--lines N(32)]\n"
	       "       [--pause-ms MS(200)] [options]\n"
	       "Rank 0: thread 0 resets the device (the kernel's PCI reset, then decoder 0\n"
	       "committed again) --resets times while threads 1..N-1 store, flush and read\n"
	       "back --lines lines each; no acked line may be lost, no line torn or mixed.\n"
	       "Other ranks meanwhile work on their own lines and watch rank 0's.\n%s",
	       tool_common_usage());
}

/* The other ranks: own ops, rank 0's lines watched, then the final check */
static int observer(struct tool *t, struct ctl *c)
{
	uint64_t nl = c->nlines.v, pages = (nl + HALF - 1) / HALF;
	uint64_t k = HALF / (uint64_t)(t->nhosts - 1), first = HALF + (uint64_t)(t->rank - 1) * k;
	uint64_t ops = 0, ops_wrong = 0, reads = 0, word_wrong = 0, backwards = 0, ver = 0;
	static uint64_t last[MAX_LINES][8];
	double op_max = 0, t0 = now_s();

	while (!__atomic_load_n(&c->phase.v, __ATOMIC_ACQUIRE)) {
		double o0 = now_s();
		ver++;
		for (uint64_t p = 0; p < pages; p++) {
			volatile uint64_t *own = base + (p * PAGE_LINES + first) * 8;
			for (uint64_t i = 0; i < k * 8; i++)
				own[i] = word_of(p * k + i / 8, ver);
			LIBCALL(t, cxlpod_writeback(t->p, (const void *)own, k * CXLPOD_LINE));
		}
		LIBCALL(t, cxlpod_fence(t->p));
		for (uint64_t p = 0; p < pages; p++) {
			volatile uint64_t *own = base + (p * PAGE_LINES + first) * 8;
			LIBCALL(t, cxlpod_invalidate(t->p, (const void *)own, k * CXLPOD_LINE));
			for (uint64_t i = 0; i < k * 8; i++)
				if (own[i] != word_of(p * k + i / 8, ver) && !ops_wrong++)
					fprintf(stderr, "cxlpod-resetrace: host %d: own line %" PRIu64
							" reads 0x%016" PRIx64 " after its writeback and "
							"invalidate, not 0x%016" PRIx64 "\n",
						t->rank, p * k + i / 8, own[i], word_of(p * k + i / 8, ver));
		}
		ops++;
		double o = now_s() - o0;
		op_max = o > op_max ? o : op_max;
		/* rank 0's lines, as the pool has them now */
		for (uint64_t p = 0; p < pages; p++)
			LIBCALL(t, cxlpod_invalidate(t->p, (const void *)line0(p * HALF), HALF * CXLPOD_LINE));
		for (uint64_t g = 0; g < nl; g++) {
			for (int w8 = 0; w8 < 8; w8++) {
				uint64_t w = line0(g)[w8];
				if (w && line_of(w) != g && !word_wrong++)
					fprintf(stderr, "cxlpod-resetrace: host %d: rank 0's line %" PRIu64
							" word %d names line %" PRIu64 "\n", t->rank, g, w8,
						line_of(w));
				if (ver_of(w) < ver_of(last[g][w8]) && !backwards++)
					fprintf(stderr, "cxlpod-resetrace: host %d: rank 0's line %" PRIu64
							" word %d went back from version %" PRIu64 " to %" PRIu64 "\n",
						t->rank, g, w8, ver_of(last[g][w8]), ver_of(w));
				last[g][w8] = w;
			}
		}
		reads++;
		if (now_s() - t0 > t->timeout_s) {
			fprintf(stderr, "cxlpod-resetrace: host %d: rank 0 not done after %.0f s\n",
				t->rank, t->timeout_s);
			return EXIT_PEER;
		}
	}
	/* the final versions */
	uint64_t final_wrong = 0;
	for (uint64_t p = 0; p < pages; p++)
		LIBCALL(t, cxlpod_invalidate(t->p, (const void *)line0(p * HALF), HALF * CXLPOD_LINE));
	for (uint64_t g = 0; g < nl; g++)
		for (int w8 = 0; w8 < 8; w8++)
			if (line0(g)[w8] != word_of(g, c->final[g]) && !final_wrong++)
				fprintf(stderr, "cxlpod-resetrace: host %d: rank 0's line %" PRIu64 " word %d "
						"reads 0x%016" PRIx64 ", not its final 0x%016" PRIx64 "\n",
					t->rank, g, w8, line0(g)[w8], word_of(g, c->final[g]));
	enum cxlpod_host_state st;
	uint64_t gen = 0;
	LIBCALL(t, cxlpod_host_state(t->p, (unsigned)c->host0.v, &st, &gen));
	bool gen_ok = gen == c->gen0.v + c->resets.v && st == CXLPOD_HOST_LIVE;
	if (!gen_ok)
		fprintf(stderr, "cxlpod-resetrace: host %d: rank 0 is %s, generation %" PRIu64
				", after %" PRIu64 " resets from generation %" PRIu64 " (want live, %"
				PRIu64 ")\n", t->rank, cxlpod_host_state_name(st), gen, c->resets.v,
			c->gen0.v, c->gen0.v + c->resets.v);
	uint64_t bad = ops_wrong + word_wrong + backwards + final_wrong + !gen_ok;
	c->checked[t->rank].v = nl;
	c->wrong[t->rank].v = bad;
	if (tool_barrier(t))
		return EXIT_PEER;
	if (t->json) {
		struct jbuf j;
		j_begin(&j);
		j_common(&j, t);
		j_str(&j, "role", "observer");
		j_uint(&j, "own_ops", ops);
		j_uint(&j, "own_ops_wrong", ops_wrong);
		j_dbl(&j, "own_op_ms_max", op_max * 1e3);
		j_uint(&j, "watch_rounds", reads);
		j_uint(&j, "word_wrong", word_wrong);
		j_uint(&j, "backwards", backwards);
		j_uint(&j, "final_checked", nl);
		j_uint(&j, "final_wrong", final_wrong);
		j_uint(&j, "rank0_generation", gen);
		j_uint(&j, "rank0_generation_before", c->gen0.v);
		j_bool(&j, "ok", !bad);
		j_end_print(&j);
	} else {
		printf("resetrace: host %d: %llu own ops (%llu wrong, slowest %.1f ms), %llu rounds "
		       "over rank 0's lines (%llu wrong words, %llu backwards), %llu final lines "
		       "(%llu wrong), rank 0 at generation %llu: %s\n",
		       t->rank, (unsigned long long)ops, (unsigned long long)ops_wrong, op_max * 1e3,
		       (unsigned long long)reads, (unsigned long long)word_wrong,
		       (unsigned long long)backwards, (unsigned long long)nl,
		       (unsigned long long)final_wrong, (unsigned long long)gen, bad ? "FAIL" : "OK");
	}
	return bad ? EXIT_WRONG : 0;
}

int main(int argc, char **argv)
{
	struct tool t = {.name = "cxlpod-resetrace", .rank = -1};
	const struct topt opts[] = {
		{"--threads", TOPT_INT, &nthreads, 2, MAX_THREADS},
		{"--resets", TOPT_INT, &resets, 1, 100000},
		{"--lines", TOPT_INT, &lines_per, 1, 1024},
		{"--pause-ms", TOPT_INT, &pause_ms, 0, 60000},
		{NULL, TOPT_FLAG, NULL, 0, 0},
	};
	int pr = tool_parse(&t, argc, argv, opts, usage, NULL);
	if (pr)
		return pr == TOOL_HELP ? 0 : pr;
	if ((uint64_t)(nthreads - 1) * lines_per > MAX_LINES) {
		fprintf(stderr, "cxlpod-resetrace: %d writer threads of %d lines: more than %d lines\n",
			nthreads - 1, lines_per, MAX_LINES);
		return EXIT_USAGE;
	}
	int rc = tool_open(&t);
	if (rc)
		return rc;
	if (t.info.backend != CXLPOD_BACKEND_DEVICE) {
		fprintf(stderr, "cxlpod-resetrace: needs the cxl-shm device (backend is %s)\n",
			cxlpod_backend_name(t.info.backend));
		return EXIT_SETUP;
	}
	struct ctl *c = (struct ctl *)t.coh;
	uint64_t nl = (uint64_t)(nthreads - 1) * lines_per;
	uint64_t span = (nl + HALF - 1) / HALF * PAGE_LINES * CXLPOD_LINE;
	if (sizeof(*c) > t.coh_len || span > t.nc_len || t.nhosts > HALF + 1) {
		fprintf(stderr, "cxlpod-resetrace: %llu lines of %d hosts do not fit the pool\n",
			(unsigned long long)nl, t.nhosts);
		return EXIT_SETUP;
	}
	base = (volatile uint64_t *)t.nc;
	if (tool_join(&t, TOOL_ID, reset, NULL))
		return EXIT_PEER;
	if (t.rank != 0) {
		if (tool_barrier(&t)) /* rank 0 has published the geometry */
			return EXIT_PEER;
		return observer(&t, c);
	}

	/* rank 0 */
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	int src = 0;
	if (ncpu < nthreads) {
		fprintf(stderr, "cxlpod-resetrace: %d threads need %d vCPUs (the guest has %ld)\n",
			nthreads, nthreads, ncpu);
		src = EXIT_SETUP;
	} else if (!t.info.cpu_clwb || !t.info.native_usable) {
		fprintf(stderr, "cxlpod-resetrace: needs clwb and clflushopt routed to the device "
				"(cpu clwb %d, native usable %d)\n", t.info.cpu_clwb, t.info.native_usable);
		src = EXIT_SETUP;
	} else {
		src = map_decoder(&t);
	}
	if (src) {
		tool_abort(&t);
		return src;
	}
	struct cxlpod_stats st0, st1;
	LIBCALL(&t, cxlpod_stats(t.p, &st0));
	c->nlines.v = nl;
	enum cxlpod_host_state st;
	uint64_t gen0 = 0;
	LIBCALL(&t, cxlpod_host_state(t.p, t.info.host_id, &st, &gen0));
	c->host0.v = t.info.host_id;
	c->gen0.v = gen0;
	if (tool_barrier(&t))
		return EXIT_PEER;

	/* from here until every reset is over, this host touches no shared
	 * state of the pod: while decoder 0 is not committed its window reads 0 */
	struct thr th[MAX_THREADS] = {0};
	pthread_t pt[MAX_THREADS];
	double t0 = now_s();
	for (int i = 0; i < nthreads; i++) {
		th[i].id = i;
		th[i].cpu = i;
		th[i].cpu_end = -1;
		th[i].first = i ? (i - 1) * lines_per : 0;
		th[i].n = i ? lines_per : 0;
		if (pthread_create(&pt[i], NULL, run_thread, &th[i])) {
			fprintf(stderr, "cxlpod-resetrace: pthread_create failed\n");
			atomic_store(&stop, 1);
			resets = 0;
			for (int k = 0; k < i; k++)
				pthread_join(pt[k], NULL);
			tool_abort(&t);
			return EXIT_SETUP;
		}
	}
	for (int i = 0; i < nthreads; i++)
		pthread_join(pt[i], NULL);
	double secs = now_s() - t0;
	LIBCALL(&t, cxlpod_stats(t.p, &st1));
	uint64_t did = atomic_load(&done);

	struct thr sum = {.id = -1};
	for (int i = 1; i < nthreads; i++) {
		sum.stores += th[i].stores;
		sum.acked += th[i].acked;
		sum.verified += th[i].verified;
		sum.skipped += th[i].skipped;
		sum.overlapped += th[i].overlapped;
		sum.after_reset += th[i].after_reset;
		sum.lost += th[i].lost;
		sum.bad += th[i].bad;
		for (int m = 0; m < 3; m++)
			sum.by_method[m] += th[i].by_method[m];
	}
	bool resets_counted = st1.dev_resets - st0.dev_resets == did;
	if (!resets_counted)
		wrong(NULL, "the device counted %llu resets, the tool made %llu",
		      (unsigned long long)(st1.dev_resets - st0.dev_resets), (unsigned long long)did);
	for (uint64_t g = 0; g < nl; g++)
		c->final[g] = cur[g];
	c->resets.v = did;
	__atomic_store_n(&c->phase.v, 1, __ATOMIC_RELEASE);
	int prc = tool_barrier(&t); /* the observers are done */
	uint64_t checked = 0, obs_wrong = 0;
	for (int r = 1; r < t.nhosts && !prc; r++) {
		checked += c->checked[r].v;
		obs_wrong += c->wrong[r].v;
	}
	bool ok = !reset_err && !sum.bad && resets_counted && !first_wrong[0] && !obs_wrong && !prc &&
		  (int)did == resets;

	if (t.json) {
		struct jbuf j;
		j_begin(&j);
		j_common(&j, &t);
		j_str(&j, "role", "resetter");
		j_int(&j, "threads", nthreads);
		j_int(&j, "vcpus", (int)ncpu);
		j_str(&j, "reset_method", reset_method);
		j_dbl(&j, "seconds", secs);
		j_uint(&j, "resets", did);
		j_uint(&j, "dev_resets", st1.dev_resets - st0.dev_resets);
		j_dbl(&j, "reset_ms_avg", did ? reset_s / (double)did * 1e3 : 0);
		j_dbl(&j, "reset_ms_max", reset_s_max * 1e3);
		j_dbl(&j, "commit_ms_max", commit_s_max * 1e3);
		j_uint(&j, "lines", nl);
		j_uint(&j, "stores", sum.stores);
		j_obj_begin(&j, "by_method");
		for (int m = 0; m < 3; m++)
			j_uint(&j, method_name[m], sum.by_method[m]);
		j_obj_end(&j);
		j_uint(&j, "acked", sum.acked);
		j_uint(&j, "verified", sum.verified);
		j_uint(&j, "verify_skipped", sum.skipped);
		j_uint(&j, "overlapped", sum.overlapped);
		j_uint(&j, "checked_after_reset", sum.after_reset);
		j_uint(&j, "lost", sum.lost);
		j_uint(&j, "wrong", sum.bad);
		j_uint(&j, "observer_checked", checked);
		j_uint(&j, "observer_wrong", obs_wrong);
		j_str(&j, "first_wrong", first_wrong);
		j_arr_begin(&j, "per_thread");
		for (int i = 0; i < nthreads; i++) {
			j_obj_begin(&j, NULL);
			j_int(&j, "cpu", th[i].cpu_end);
			j_uint(&j, "stores", th[i].stores);
			j_uint(&j, "overlapped", th[i].overlapped);
			j_obj_end(&j);
		}
		j_arr_end(&j);
		j_bool(&j, "ok", ok);
		j_end_print(&j);
	} else {
		printf("resetrace: %llu resets (%s, %.0f ms avg) beside %llu stores of %llu lines "
		       "(%llu acked and read back, %llu overlapped a reset, %llu checked after one): "
		       "%llu lost, %llu wrong; observers: %llu wrong: %s\n",
		       (unsigned long long)did, reset_method, did ? reset_s / (double)did * 1e3 : 0,
		       (unsigned long long)sum.stores, (unsigned long long)nl,
		       (unsigned long long)sum.verified, (unsigned long long)sum.overlapped,
		       (unsigned long long)sum.after_reset, (unsigned long long)sum.lost,
		       (unsigned long long)sum.bad, (unsigned long long)obs_wrong, ok ? "OK" : "FAIL");
	}
	tool_close(&t);
	if (prc)
		return prc;
	if (reset_err)
		return reset_err;
	return ok ? 0 : EXIT_WRONG;
}
