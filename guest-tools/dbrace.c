/*
 * cxlpod-dbrace: every BAR5 access of a guest's vCPUs served correctly
 * while another vCPU's long doorbell operation runs.
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The doorbell runs an op on the ringing vCPU's thread, outside QEMU's
 * global lock; meanwhile the other vCPUs' register reads, their writes of
 * DB_OFFSET / DB_LEN and their own DB_OP writes must be served
 * (docs/interfaces.md, section 1).  On rank 0, N threads, each pinned to
 * its own vCPU, share BAR5 (mapped from resource5, as libcxlpod maps it):
 *
 *   thread 0      --ops times: dirties --big-dirty lines of the big range
 *                 (the non-coherent area after the small threads' lines)
 *                 and rings one --big-op (flush, default, or writeback) of
 *                 the whole big range;
 *   threads 1..   meanwhile, in a loop: read the identify registers (each
 *                 value against the first read, and against the geometry
 *                 given with --expect-*), every statistic (never going
 *                 backwards), DB_STATUS (0 or 5, busy) and DB_LINES (the
 *                 count of an op of this run); and, while thread 0's op
 *                 runs, ring a writeback of --small-lines fresh lines of
 *                 their own just written with a pattern: the op queues
 *                 behind the big op (the doorbell completes
 *                 asynchronously), then runs; DB_STATUS reads busy until
 *                 both are done.
 *
 * The device has one set of doorbell registers a host, and documents that
 * software serialises its use of them (libcxlpod holds its lock from the
 * DB_OFFSET write to the DB_STATUS read, so it never has two ops rung at
 * once).  This tool does not use libcxlpod's lock (it rings the registers
 * itself; run nothing else that rings the doorbell in the guest meanwhile)
 * but one of its own with the same rule, except for one documented hand-
 * over: thread 0 rings with no op in flight (it checks DB_STATUS is not
 * busy while holding the lock); once another thread reads DB_STATUS busy
 * after that ring, thread 0's DB_OP write has taken DB_OFFSET and DB_LEN
 * ("a DB_OP write takes DB_OFFSET and DB_LEN as they are then"; busy "from
 * a ring until every op rung has completed"), so that thread may take the
 * lock over and ring its own op, which then runs once the big one has
 * completed.  It holds the lock until it has read its result: DB_STATUS 0
 * and DB_LINES = --small-lines, exactly (nothing else can be rung
 * meanwhile).  Thread 0 reads its own result only when no hand-over
 * happened; every op of both kinds is checked in the statistics: at the
 * end, the ops, written-back lines and dropped lines they count grew by
 * exactly what this run rang.
 *
 * Every other rank checks the pool: after the run it invalidates the small
 * threads' lines and finds in them the bytes of every small op (each op
 * writes fresh lines, so every op of the run is checked, not just the
 * last).  Rank 0 reports the checkers' counts too.
 *
 *   cxlpod-dbrace [--threads N] [--ops N] [--big-op flush|writeback]
 *                 [--big-dirty N] [--small-lines N] [--slots N]
 *                 [--expect-size SIZE] [--expect-coherent SIZE]
 *                 [--expect-hosts N] [common options]
 *
 * Exit codes: 0 every access right; 3 a wrong read, a wrong result, a
 * missing op or missing bytes in the pool; 2 setup (no device, no BAR5,
 * fewer vCPUs than threads, geometry too small); 4 peer timeout.
 */
#define _GNU_SOURCE
#include "tool.h"
#include "cxl-shm-regs.h" /* the device's BAR5 register map */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define TOOL_ID 9
#define MAX_THREADS 16

/* the lock word: thread id + 1 (0 = free), a flag while thread 0's DB_OP
 * write may be in flight, and thread 0's ring number (no ABA) */
#define H_ID_MASK 0xffull
#define H_RINGING 0x100ull
#define H_GEN_SHIFT 16

struct ident {
	uint32_t magic, version, host_id, max_hosts;
	uint64_t size, coherent;
	uint32_t line, mode, latency, caps, wb_mode, evict;
};
#define IDENT_READS 12 /* registers read by read_ident() */

/* in the coherent window (t->coh): what rank 0 rang, what the checkers saw */
struct ctl {
	struct pline nthreads, slots, lines;
	struct pline count[MAX_THREADS];
	struct pline checked[CXLPOD_MAX_HOSTS], bad[CXLPOD_MAX_HOSTS];
};

struct thr {
	int id, cpu, cpu_end;
	uint64_t rounds, reads, wrong, busy, rounds_in_busy, stat_reads, backwards;
	uint64_t rings, ring_wrong, queued, own_results, handed_over;
	double ring_s, ring_s_max;
	uint64_t last[CXLSHM_STAT_NR];
};

static volatile uint8_t *regs;
static struct ident want;
static uint64_t lines0; /* DB_LINES before the run */
static _Atomic uint64_t holder;
/* where thread 0 is (for the message of a wrong result): its op number
 * and step (1 dirtying, 2 lock taken, 3 ringing, 4 returned) */
static atomic_int big_step, big_no;
static atomic_int stop;
static atomic_flag told = ATOMIC_FLAG_INIT;
static char first_wrong[400] = "";

/* the run's geometry */
static int nthreads = 4, ops = 20, small_lines = 2;
static size_t big_dirty = 1024, slots = 4096;
static uint32_t big_op = CXLSHM_OP_FLUSH;
static uint64_t big_off, big_len, big_lines, small_off, epoch;
static uint8_t *small_base, *big_base;

static inline uint32_t rd32(unsigned a) { return *(volatile uint32_t *)(regs + a); }
static inline uint64_t rd64(unsigned a) { return *(volatile uint64_t *)(regs + a); }
static inline void wr32(unsigned a, uint32_t v) { *(volatile uint32_t *)(regs + a) = v; }
static inline void wr64(unsigned a, uint64_t v) { *(volatile uint64_t *)(regs + a) = v; }

static void wrong(struct thr *th, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void wrong(struct thr *th, const char *fmt, ...)
{
	th->wrong++;
	if (!atomic_flag_test_and_set(&told)) {
		va_list ap;
		int n = th->id < 0 ? snprintf(first_wrong, sizeof(first_wrong), "after the run: ")
				   : snprintf(first_wrong, sizeof(first_wrong), "thread %d: ", th->id);
		va_start(ap, fmt);
		vsnprintf(first_wrong + n, sizeof(first_wrong) - n, fmt, ap);
		va_end(ap);
		fprintf(stderr, "cxlpod-dbrace: %s\n", first_wrong);
	}
}

static void read_ident(struct ident *v)
{
	v->magic = rd32(A_CXLSHM_MAGIC);
	v->version = rd32(A_CXLSHM_VERSION);
	v->host_id = rd32(A_CXLSHM_HOST_ID);
	v->max_hosts = rd32(A_CXLSHM_MAX_HOSTS);
	v->size = rd64(A_CXLSHM_SIZE);
	v->coherent = rd64(A_CXLSHM_COHERENT_SIZE);
	v->line = rd32(A_CXLSHM_LINE_SIZE);
	v->mode = rd32(A_CXLSHM_MODE);
	v->latency = rd32(A_CXLSHM_LATENCY_NS);
	v->caps = rd32(A_CXLSHM_CAPS);
	v->wb_mode = rd32(A_CXLSHM_WB_MODE);
	v->evict = rd32(A_CXLSHM_EVICT_RATE);
}

static uint64_t pattern(int thread, uint64_t seq, uint64_t line, unsigned word)
{
	uint64_t s = epoch ^ ((uint64_t)thread << 56) ^ (seq << 24) ^ (line << 3) ^ word;
	return splitmix64(&s) | 1; /* never 0: a fresh line is dirty */
}

static uint8_t *slot_addr(int thread, uint64_t slot)
{
	return small_base + ((uint64_t)(thread - 1) * slots + slot) * small_lines * CXLPOD_LINE;
}

static void fill(uint8_t *a, size_t lines, int thread, uint64_t seq)
{
	for (size_t l = 0; l < lines; l++)
		for (unsigned w = 0; w < CXLPOD_LINE / 8; w++)
			((volatile uint64_t *)a)[l * 8 + w] = pattern(thread, seq, l, w);
}

/* DB_STATUS: 0 (every op of this run succeeds) or busy */
static uint32_t status(struct thr *th)
{
	uint32_t st = rd32(A_CXLSHM_DB_STATUS);
	th->reads++;
	if (st == CXLSHM_DB_BUSY)
		th->busy++;
	else if (st != CXLSHM_DB_OK)
		wrong(th, "DB_STATUS read %u (no op of this run is refused)", st);
	return st;
}

#define CHECK(th, f, fmt)                                                                     \
	do {                                                                                   \
		if (v.f != want.f)                                                             \
			wrong(th, #f " read " fmt ", not " fmt, v.f, want.f);                  \
	} while (0)

/*
 * DB_STATUS once the ops rung so far are done (the device runs them in a
 * thread of its own: busy until then)
 */
static uint32_t wait_done(struct thr *th)
{
	unsigned spins = 0;
	uint32_t st;

	while ((st = status(th)) == CXLSHM_DB_BUSY)
		poll_pause(&spins);
	return st;
}

/* One round of reads: DB_STATUS, the identify registers, DB_LINES, every
 * statistic, DB_STATUS again */
static void read_round(struct thr *th)
{
	struct ident v;
	bool busy0 = status(th) == CXLSHM_DB_BUSY;

	read_ident(&v);
	th->reads += IDENT_READS;
	CHECK(th, magic, "0x%x");
	CHECK(th, version, "%u");
	CHECK(th, host_id, "%u");
	CHECK(th, max_hosts, "%u");
	CHECK(th, size, "0x%" PRIx64);
	CHECK(th, coherent, "0x%" PRIx64);
	CHECK(th, line, "%u");
	CHECK(th, mode, "%u");
	CHECK(th, latency, "%u");
	CHECK(th, caps, "0x%x");
	CHECK(th, wb_mode, "%u");
	CHECK(th, evict, "%u");
	uint64_t n = rd64(A_CXLSHM_DB_LINES);
	th->reads++;
	if (n != lines0 && n != (uint64_t)small_lines &&
	    n != (big_op == CXLSHM_OP_FLUSH ? big_lines : big_dirty))
		wrong(th, "DB_LINES read %llu: the count of no op of this run",
		      (unsigned long long)n);
	for (int k = 0; k < CXLSHM_STAT_NR; k++) {
		uint64_t s = rd64(A_CXLSHM_STAT(k));
		th->stat_reads++;
		if (s < th->last[k]) {
			th->backwards++;
			wrong(th, "statistic %d went back from %llu to %llu", k,
			      (unsigned long long)th->last[k], (unsigned long long)s);
		}
		th->last[k] = s;
	}
	if (status(th) == CXLSHM_DB_BUSY && busy0)
		th->rounds_in_busy++;
	th->rounds++;
}
#undef CHECK

static void *big_thread(void *arg)
{
	struct thr *th = arg;
	uint64_t stride = big_lines / big_dirty;

	for (int op = 0; op < ops; op++) {
		uint64_t gen = (uint64_t)(op + 1) << H_GEN_SHIFT, mine = gen | 1, zero = 0;
		unsigned spins = 0;

		atomic_store(&big_no, op);
		atomic_store(&big_step, 1);
		for (uint64_t l = 0; l < big_dirty; l++)
			fill(big_base + l * stride * CXLPOD_LINE, 1, 0, (uint64_t)op + 1);
		while (!atomic_compare_exchange_weak(&holder, &zero, mine)) {
			zero = 0;
			poll_pause(&spins);
		}
		atomic_store(&big_step, 2);
		/* the lock held and no hand-over pending: nothing can be in flight */
		if (status(th) == CXLSHM_DB_BUSY)
			wrong(th, "DB_STATUS busy with no op rung");
		wr64(A_CXLSHM_DB_OFFSET, big_off);
		wr64(A_CXLSHM_DB_LEN, big_len);
		if (rd64(A_CXLSHM_DB_OFFSET) != big_off || rd64(A_CXLSHM_DB_LEN) != big_len)
			wrong(th, "DB_OFFSET / DB_LEN do not read back as written");
		th->reads += 2;
		uint64_t before = rd64(A_CXLSHM_STAT(big_op == CXLSHM_OP_FLUSH ? CXLSHM_STAT_FLUSH_OPS
										: CXLSHM_STAT_WB_OPS));
		atomic_store(&holder, mine | H_RINGING);
		atomic_store(&big_step, 3);
		double t0 = now_s();
		wr32(A_CXLSHM_DB_OP, big_op);
		double dt = now_s() - t0;
		atomic_store(&big_step, 4);
		th->rings++;
		th->ring_s += dt;
		if (dt > th->ring_s_max)
			th->ring_s_max = dt;
		uint64_t ringing = mine | H_RINGING;
		if (atomic_compare_exchange_strong(&holder, &ringing, mine)) {
			/* not handed over: the result is ours, once the op is done */
			uint32_t st = wait_done(th);
			uint64_t n = rd64(A_CXLSHM_DB_LINES);
			uint64_t want_n = big_op == CXLSHM_OP_FLUSH ? big_lines : big_dirty;
			th->own_results++;
			if (st != CXLSHM_DB_OK || n != want_n)
				wrong(th, "big op %d: DB_STATUS %u, DB_LINES %llu (want 0, %llu)", op,
				      st, (unsigned long long)n, (unsigned long long)want_n);
			atomic_store(&holder, 0);
		} else {
			/*
			 * handed over: the other thread reads the result; the
			 * op is counted once it is done (the doorbell completes
			 * asynchronously), which DB_STATUS says
			 */
			th->handed_over++;
			wait_done(th);
		}
		uint64_t after = rd64(A_CXLSHM_STAT(big_op == CXLSHM_OP_FLUSH ? CXLSHM_STAT_FLUSH_OPS
									       : CXLSHM_STAT_WB_OPS));
		if (after < before + 1)
			wrong(th, "big op %d returned but its statistic went %llu -> %llu", op,
			      (unsigned long long)before, (unsigned long long)after);
	}
	atomic_store(&stop, 1);
	th->cpu_end = sched_getcpu();
	return NULL;
}

static void small_ring(struct thr *th)
{
	uint8_t *a = slot_addr(th->id, th->rings);
	uint64_t off = small_off + (uint64_t)(a - small_base), len = (uint64_t)small_lines * CXLPOD_LINE;

	wr64(A_CXLSHM_DB_OFFSET, off);
	wr64(A_CXLSHM_DB_LEN, len);
	/* served at once, while the big op runs */
	if (rd64(A_CXLSHM_DB_OFFSET) != off || rd64(A_CXLSHM_DB_LEN) != len)
		wrong(th, "DB_OFFSET / DB_LEN do not read back as written");
	uint64_t before = rd64(A_CXLSHM_STAT(CXLSHM_STAT_WB_OPS));
	th->reads += 3;
	if (status(th) == CXLSHM_DB_BUSY)
		th->queued++;
	double t0 = now_s();
	wr32(A_CXLSHM_DB_OP, CXLSHM_OP_WRITEBACK);
	/* the doorbell completes asynchronously: busy until the op is done */
	uint32_t st = wait_done(th);
	double dt = now_s() - t0;
	uint64_t n = rd64(A_CXLSHM_DB_LINES), after = rd64(A_CXLSHM_STAT(CXLSHM_STAT_WB_OPS));
	th->reads += 2;
	th->ring_s += dt;
	if (dt > th->ring_s_max)
		th->ring_s_max = dt;
	if (st != CXLSHM_DB_OK || n != (uint64_t)small_lines || after < before + 1) {
		/* how long it stays busy, where thread 0 is */
		int step = atomic_load(&big_step), no = atomic_load(&big_no);
		uint64_t h = atomic_load(&holder), busy_reads = 0;
		double t1 = now_s();
		while (rd32(A_CXLSHM_DB_STATUS) == CXLSHM_DB_BUSY && now_s() - t1 < 10)
			busy_reads++;
		th->ring_wrong++;
		wrong(th, "small op %llu (%.1f ms in DB_OP): DB_STATUS %u, DB_LINES %llu, "
			  "writebacks %llu -> %llu (want 0, %d, one more); lock 0x%llx, thread 0 "
			  "at op %d step %d; busy %llu more reads, %.1f ms, then DB_STATUS %u "
			  "DB_LINES %llu, writebacks %llu, flushes %llu",
		      (unsigned long long)th->rings, dt * 1e3, st, (unsigned long long)n,
		      (unsigned long long)before, (unsigned long long)after, small_lines,
		      (unsigned long long)h, no, step, (unsigned long long)busy_reads,
		      (now_s() - t1) * 1e3, rd32(A_CXLSHM_DB_STATUS),
		      (unsigned long long)rd64(A_CXLSHM_DB_LINES),
		      (unsigned long long)rd64(A_CXLSHM_STAT(CXLSHM_STAT_WB_OPS)),
		      (unsigned long long)rd64(A_CXLSHM_STAT(CXLSHM_STAT_FLUSH_OPS)));
	}
	th->rings++;
}

static void *small_thread(void *arg)
{
	struct thr *th = arg;
	bool filled = false;

	while (!atomic_load(&stop)) {
		read_round(th);
		if (th->rings >= slots)
			continue;
		if (!filled) { /* fresh lines of its own: all dirty */
			fill(slot_addr(th->id, th->rings), small_lines, th->id, th->rings);
			filled = true;
		}
		uint64_t h = atomic_load(&holder);
		if ((h & (H_ID_MASK | H_RINGING)) != (1 | H_RINGING))
			continue;
		/* thread 0's ring is in flight once DB_STATUS reads busy after it */
		if (status(th) != CXLSHM_DB_BUSY ||
		    !atomic_compare_exchange_strong(&holder, &h, (h & ~(H_ID_MASK | H_RINGING)) |
									 (uint64_t)(th->id + 1)))
			continue;
		__atomic_thread_fence(__ATOMIC_SEQ_CST); /* the pattern reaches the image */
		small_ring(th);
		atomic_store(&holder, 0);
		filled = false;
	}
	th->cpu_end = sched_getcpu();
	return NULL;
}

static void *run_thread(void *arg)
{
	struct thr *th = arg;
	int e = tool_pin_cpu(th->cpu);
	if (e)
		fprintf(stderr, "cxlpod-dbrace: thread %d: cannot pin to cpu %d: %s\n", th->id,
			th->cpu, strerror(-e));
	return th->id ? small_thread(th) : big_thread(th);
}

static void reset(struct tool *t, void *arg)
{
	(void)arg;
	memset(t->coh, 0, sizeof(struct ctl));
}

static void usage(void)
{
	printf("usage: cxlpod-dbrace [--threads N(4)] [--ops N(20)] [--big-op flush|writeback]\n"
	       "       [--big-dirty N(1024)] [--small-lines N(2)] [--slots N(4096)]\n"
	       "       [--expect-size SIZE] [--expect-coherent SIZE] [--expect-hosts N]\n"
	       "       [options]\n"
	       "Rank 0: thread 0 rings --ops big doorbell ops over the non-coherent area\n"
	       "while threads 1..N-1 (each pinned to its own vCPU) read every identify\n"
	       "register and statistic and ring small writebacks of their own lines\n"
	       "queued behind the big op; every value and every result is checked.\n"
	       "Other ranks then check that the pool holds every small op's bytes.\n%s",
	       tool_common_usage());
}

static int checker(struct tool *t, struct ctl *c)
{
	uint64_t checked = 0, bad = 0;
	int n = (int)c->nthreads.v;

	nthreads = n;
	slots = c->slots.v;
	small_lines = (int)c->lines.v;
	small_base = t->nc;
	LIBCALL(t, cxlpod_invalidate(t->p, small_base,
				     (size_t)(n - 1) * slots * small_lines * CXLPOD_LINE));
	for (int i = 1; i < n; i++) {
		for (uint64_t s = 0; s < c->count[i].v; s++) {
			const volatile uint64_t *a = (const volatile uint64_t *)slot_addr(i, s);
			bool ok = true;
			for (int l = 0; l < small_lines; l++)
				for (unsigned w = 0; w < CXLPOD_LINE / 8; w++)
					ok &= a[l * 8 + w] == pattern(i, s, l, w);
			checked++;
			if (!ok && !bad++)
				fprintf(stderr, "cxlpod-dbrace: thread %d's op %llu: bytes missing "
						"in the pool\n", i, (unsigned long long)s);
		}
	}
	c->checked[t->rank].v = checked;
	c->bad[t->rank].v = bad;
	if (tool_barrier(t))
		return EXIT_PEER;
	if (t->json) {
		struct jbuf j;
		j_begin(&j);
		j_common(&j, t);
		j_str(&j, "role", "checker");
		j_uint(&j, "small_ops_checked", checked);
		j_uint(&j, "small_ops_missing", bad);
		j_bool(&j, "ok", !bad);
		j_end_print(&j);
	} else {
		printf("dbrace: host %d checked %llu small ops in the pool: %llu missing\n", t->rank,
		       (unsigned long long)checked, (unsigned long long)bad);
	}
	return bad ? EXIT_WRONG : 0;
}

int main(int argc, char **argv)
{
	struct tool t = {.name = "cxlpod-dbrace", .rank = -1};
	const char *op_arg = NULL;
	size_t exp_size = 0, exp_coh = 0;
	int exp_hosts = 0;
	const struct topt opts[] = {
		{"--threads", TOPT_INT, &nthreads, 2, MAX_THREADS},
		{"--ops", TOPT_INT, &ops, 1, 1000000},
		{"--big-op", TOPT_STR, &op_arg, 0, 0},
		{"--big-dirty", TOPT_SIZE, &big_dirty, 1, 1 << 24},
		{"--small-lines", TOPT_INT, &small_lines, 1, 4096},
		{"--slots", TOPT_SIZE, &slots, 1, 1 << 20},
		{"--expect-size", TOPT_SIZE, &exp_size, 0, 0},
		{"--expect-coherent", TOPT_SIZE, &exp_coh, 0, 0},
		{"--expect-hosts", TOPT_INT, &exp_hosts, 1, CXLPOD_MAX_HOSTS},
		{NULL, TOPT_FLAG, NULL, 0, 0},
	};
	int pr = tool_parse(&t, argc, argv, opts, usage, NULL);
	if (pr)
		return pr == TOOL_HELP ? 0 : pr;
	if (op_arg && !strcmp(op_arg, "writeback"))
		big_op = CXLSHM_OP_WRITEBACK;
	else if (op_arg && strcmp(op_arg, "flush")) {
		fprintf(stderr, "cxlpod-dbrace: --big-op flush|writeback\n");
		return EXIT_USAGE;
	}
	int rc = tool_open(&t);
	if (rc)
		return rc;
	if (t.info.backend != CXLPOD_BACKEND_DEVICE) {
		fprintf(stderr, "cxlpod-dbrace: needs the cxl-shm device (backend is %s)\n",
			cxlpod_backend_name(t.info.backend));
		return EXIT_SETUP;
	}
	struct ctl *c = (struct ctl *)t.coh;
	if (tool_join(&t, TOOL_ID, reset, NULL))
		return EXIT_PEER;
	epoch = t.epoch;
	if (t.rank != 0) {
		if (tool_barrier(&t)) /* rank 0's run is over */
			return EXIT_PEER;
		return checker(&t, c);
	}

	/* rank 0: the registers, as libcxlpod maps them */
	char path[300];
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resource5", t.info.pci);
	int fd = open(path, O_RDWR | O_SYNC | O_CLOEXEC);
	void *m = fd < 0 ? MAP_FAILED : mmap(NULL, CXLSHM_REGS_SIZE, PROT_READ | PROT_WRITE,
					     MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		fprintf(stderr, "cxlpod-dbrace: %s: %s\n", path, strerror(errno));
		tool_abort(&t);
		return EXIT_SETUP;
	}
	regs = m;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	small_off = t.info.coherent_size;
	small_base = t.nc;
	uint64_t small_len = (uint64_t)(nthreads - 1) * slots * small_lines * CXLPOD_LINE;
	big_off = small_off + small_len;
	big_len = big_off < t.info.size ? t.info.size - big_off : 0;
	big_lines = big_len / CXLPOD_LINE;
	big_base = small_base + small_len;
	if (ncpu < nthreads || big_lines < big_dirty) {
		fprintf(stderr, "cxlpod-dbrace: %d threads need %d vCPUs (the guest has %ld) and "
				"%zu lines of the big range (%llu left after the small ops' "
				"%llu bytes)\n", nthreads, nthreads, ncpu, big_dirty,
			(unsigned long long)big_lines, (unsigned long long)small_len);
		tool_abort(&t);
		return EXIT_SETUP;
	}

	/* the first read: as libcxlpod read it at open, as the launcher gave it */
	struct thr th[MAX_THREADS] = {0};
	read_ident(&want);
	lines0 = rd64(A_CXLSHM_DB_LINES);
	for (int i = 0; i < nthreads; i++) {
		th[i].id = i;
		th[i].cpu = i;
		th[i].cpu_end = -1;
	}
	if (want.magic != CXLSHM_MAGIC_VALUE || want.version != CXLSHM_VERSION_VALUE ||
	    want.line != CXLPOD_LINE || want.host_id != t.info.host_id ||
	    want.max_hosts != t.info.max_hosts || want.size != t.info.size ||
	    want.coherent != t.info.coherent_size || want.mode != t.info.mode ||
	    (exp_size && want.size != exp_size) || (exp_coh && want.coherent != exp_coh) ||
	    (exp_hosts && want.max_hosts != (uint32_t)exp_hosts))
		wrong(&th[0], "identify registers before the run: magic 0x%x version %u line %u "
			      "host %u of %u, size 0x%llx coherent 0x%llx mode %u (library: host "
			      "%u of %u, size 0x%llx coherent 0x%llx; expected size 0x%zx "
			      "coherent 0x%zx hosts %d, 0 = any)",
		      want.magic, want.version, want.line, want.host_id, want.max_hosts,
		      (unsigned long long)want.size, (unsigned long long)want.coherent, want.mode,
		      t.info.host_id, t.info.max_hosts, (unsigned long long)t.info.size,
		      (unsigned long long)t.info.coherent_size, exp_size, exp_coh, exp_hosts);
	uint64_t s0[CXLSHM_STAT_NR], s1[CXLSHM_STAT_NR];
	for (int k = 0; k < CXLSHM_STAT_NR; k++)
		s0[k] = rd64(A_CXLSHM_STAT(k));

	pthread_t pt[MAX_THREADS];
	double t0 = now_s();
	for (int i = 0; i < nthreads; i++) {
		memcpy(th[i].last, s0, sizeof(s0));
		if (pthread_create(&pt[i], NULL, run_thread, &th[i])) {
			fprintf(stderr, "cxlpod-dbrace: pthread_create failed\n");
			tool_abort(&t);
			return EXIT_SETUP;
		}
	}
	for (int i = 0; i < nthreads; i++)
		pthread_join(pt[i], NULL);
	double secs = now_s() - t0;
	for (int k = 0; k < CXLSHM_STAT_NR; k++)
		s1[k] = rd64(A_CXLSHM_STAT(k));

	/* the totals, and every op in the statistics */
	struct thr sum = {.id = -1};
	uint64_t small_ops = 0;
	for (int i = 0; i < nthreads; i++) {
		sum.rounds += th[i].rounds;
		sum.reads += th[i].reads + th[i].stat_reads;
		sum.wrong += th[i].wrong;
		sum.busy += th[i].busy;
		sum.rounds_in_busy += th[i].rounds_in_busy;
		sum.stat_reads += th[i].stat_reads;
		sum.backwards += th[i].backwards;
		sum.ring_wrong += th[i].ring_wrong;
		sum.queued += th[i].queued;
		if (i) {
			small_ops += th[i].rings;
			c->count[i].v = th[i].rings;
		}
	}
	bool flush = big_op == CXLSHM_OP_FLUSH;
	struct {
		const char *name;
		int k;
		uint64_t want;
	} d[] = {
		{"wb_ops", CXLSHM_STAT_WB_OPS, small_ops + (flush ? 0 : (uint64_t)ops)},
		{"inv_ops", CXLSHM_STAT_INV_OPS, 0},
		{"flush_ops", CXLSHM_STAT_FLUSH_OPS, flush ? (uint64_t)ops : 0},
		{"wb_lines", CXLSHM_STAT_WB_LINES, small_ops * small_lines + (uint64_t)ops * big_dirty},
		{"inv_lines", CXLSHM_STAT_INV_LINES, flush ? (uint64_t)ops * big_lines : 0},
		{"errors", CXLSHM_STAT_ERRORS, 0},
	};
	bool stats_ok = true;
	for (size_t k = 0; k < sizeof(d) / sizeof(d[0]); k++) {
		if (s1[d[k].k] - s0[d[k].k] != d[k].want) {
			stats_ok = false;
			wrong(&sum, "statistic %s grew by %llu in the run, not by the %llu it rang",
			      d[k].name, (unsigned long long)(s1[d[k].k] - s0[d[k].k]),
			      (unsigned long long)d[k].want);
		}
	}

	/* the checkers read the pool */
	c->nthreads.v = nthreads;
	c->slots.v = slots;
	c->lines.v = small_lines;
	uint64_t checked = 0, missing = 0;
	int prc = tool_barrier(&t); /* publishes the counts */
	if (!prc)
		prc = tool_barrier(&t); /* the checkers are done */
	for (int r = 1; r < t.nhosts && !prc; r++) {
		checked += c->checked[r].v;
		missing += c->bad[r].v;
	}
	bool ok = !sum.wrong && !missing && !prc;

	if (t.json) {
		struct jbuf j;
		j_begin(&j);
		j_common(&j, &t);
		j_str(&j, "role", "ringer");
		j_int(&j, "threads", nthreads);
		j_int(&j, "vcpus", (int)ncpu);
		j_dbl(&j, "seconds", secs);
		j_str(&j, "big_op", flush ? "flush" : "writeback");
		j_int(&j, "big_ops", ops);
		j_uint(&j, "big_lines", big_lines);
		j_uint(&j, "big_dirty", big_dirty);
		j_dbl(&j, "big_op_ms_avg", th[0].rings ? th[0].ring_s / th[0].rings * 1e3 : 0);
		j_dbl(&j, "big_op_ms_max", th[0].ring_s_max * 1e3);
		j_uint(&j, "big_handed_over", th[0].handed_over);
		j_uint(&j, "big_own_results", th[0].own_results);
		j_uint(&j, "small_ops", small_ops);
		j_uint(&j, "small_ops_queued", sum.queued);
		j_uint(&j, "small_ops_wrong", sum.ring_wrong);
		j_int(&j, "small_lines", small_lines);
		j_uint(&j, "rounds", sum.rounds);
		j_uint(&j, "reads", sum.reads);
		j_uint(&j, "busy_reads", sum.busy);
		j_uint(&j, "rounds_in_busy", sum.rounds_in_busy);
		j_uint(&j, "stat_reads", sum.stat_reads);
		j_uint(&j, "stat_backwards", sum.backwards);
		j_uint(&j, "wrong", sum.wrong);
		j_bool(&j, "stats_exact", stats_ok);
		j_uint(&j, "pool_checked", checked);
		j_uint(&j, "pool_missing", missing);
		j_str(&j, "first_wrong", first_wrong);
		j_arr_begin(&j, "per_thread");
		for (int i = 0; i < nthreads; i++) {
			j_obj_begin(&j, NULL);
			j_int(&j, "cpu", th[i].cpu_end);
			j_uint(&j, "rings", th[i].rings);
			j_uint(&j, "reads", th[i].reads + th[i].stat_reads);
			j_uint(&j, "busy_reads", th[i].busy);
			j_uint(&j, "wrong", th[i].wrong);
			j_dbl(&j, "ring_ms_max", th[i].ring_s_max * 1e3);
			j_obj_end(&j);
		}
		j_arr_end(&j);
		j_bool(&j, "ok", ok);
		j_end_print(&j);
	} else {
		printf("dbrace: %d big %s ops of %llu lines (%.1f ms each), %llu small ops "
		       "(%llu queued behind one), %llu reads (%llu busy), %llu wrong; pool: %llu "
		       "ops checked, %llu missing: %s\n",
		       ops, flush ? "flush" : "writeback", (unsigned long long)big_lines,
		       th[0].rings ? th[0].ring_s / th[0].rings * 1e3 : 0,
		       (unsigned long long)small_ops, (unsigned long long)sum.queued,
		       (unsigned long long)sum.reads, (unsigned long long)sum.busy,
		       (unsigned long long)sum.wrong, (unsigned long long)checked,
		       (unsigned long long)missing, ok ? "OK" : "FAIL");
	}
	munmap(m, CXLSHM_REGS_SIZE);
	close(fd);
	tool_close(&t);
	return prc ? prc : ok ? 0 : EXIT_WRONG;
}
