/*
 * cxlpod-crash: a writer appends checksummed records to the non-coherent
 * area, writes each back, fences, then publishes the record count in the
 * coherent window.  Readers verify every published record, concurrently and
 * again after the writer stopped (finished, or its QEMU was killed: the host
 * table says "failed"): every published record must be intact, never torn.
 *
 * Roles: --role writer|reader|verify (default: rank --writer (0) writes,
 * the other ranks read).  "verify" joins nobody: it checks what the
 * coherent header says was published (e.g. on a host started after the
 * crash).
 * The writer prints "CRASH-POINT records=K" (flushed) once K records
 * (--crash-at, default 1000) are published and keeps appending; a launcher
 * can kill the writer's QEMU when it sees that line.
 * --no-flush: the writer publishes without writeback; readers must then
 * report "corruption detected" (exit 3).
 * --unpublished K: after --crash-at published records the writer stores K
 * more with plain stores only (no writeback, not published), prints
 * CRASH-POINT and waits to be killed; readers count what reached the pool
 * of them (intact / partial / absent): none without eviction, a subset
 * with the device's evict-rate.
 * --log [--lives N]: one log across a writer that is killed and restarted
 * N-1 times (log_writer, log_reader below).
 * Exit codes: 0 all published records intact (reader) / all written
 * (writer); 3 corruption detected (torn or missing published record);
 * 1 usage; 2 setup; 4 peer timeout.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "tool.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CRASH_MAGIC 0x48534152435043ull /* "CPCRASH" */

struct hdr {
	struct pline magic, epoch, count, done, recsize, writer, capacity;
	/* --unpublished K: K records from index `count` stored, not written back */
	struct pline unpub;
	/* --log: the writer's lives, its first and its latest generation */
	struct pline lives, base_gen, last_gen;
};

struct rec_head {
	uint64_t magic, epoch, index, len;
};

static void make_record(uint8_t *r, size_t size, uint64_t epoch, uint64_t idx)
{
	struct rec_head h = {CRASH_MAGIC, epoch, idx, size};
	memcpy(r, &h, sizeof(h));
	uint64_t s = epoch ^ (idx * 0x9e3779b97f4a7c15ull);
	for (size_t i = sizeof(h); i + 16 <= size; i += 8) {
		uint64_t v = splitmix64(&s);
		memcpy(r + i, &v, 8);
	}
	uint64_t c = fnv1a(r, size - 8);
	memcpy(r + size - 8, &c, 8);
}

/* 0 intact, 1 torn (checksum / content wrong), 2 missing (no record) */
static int check_record(const uint8_t *r, size_t size, uint64_t epoch, uint64_t idx)
{
	struct rec_head h;
	memcpy(&h, r, sizeof(h));
	if (h.magic != CRASH_MAGIC || h.epoch != epoch)
		return 2;
	uint64_t c;
	memcpy(&c, r + size - 8, 8);
	if (h.index != idx || h.len != size || c != fnv1a(r, size - 8))
		return 1;
	return 0;
}

struct rstate {
	uint64_t verified, torn, missing;
	int reports;
};

static int verify_range(struct tool *t, struct hdr *h, struct rstate *st, uint64_t from,
			uint64_t to, uint64_t epoch)
{
	size_t rs = h->recsize.v;
	if (to <= from)
		return 0;
	uint8_t *base = t->nc + from * rs;
	if (cxlpod_invalidate(t->p, base, (to - from) * rs)) {
		fprintf(stderr, "cxlpod-crash: %s\n", cxlpod_errmsg());
		return EXIT_SETUP;
	}
	for (uint64_t i = from; i < to; i++) {
		int r = check_record(t->nc + i * rs, rs, epoch, i);
		if (r == 0)
			st->verified++;
		else if (r == 1)
			st->torn++;
		else
			st->missing++;
		if (r && st->reports++ < 5)
			fprintf(stderr, "cxlpod-crash: published record %llu is %s\n",
				(unsigned long long)i, r == 1 ? "TORN" : "MISSING");
	}
	return 0;
}

/*
 * --unpublished: what reached the pool of the K records the dead writer
 * stored after its last publication without writing them back.  Each
 * 64-byte line counts as present when it holds exactly the bytes the
 * writer stored there; a record is intact (every line present), partial
 * (some) or absent (none).
 */
struct ustate {
	uint64_t intact, partial, absent, lines, lines_present;
};

static int classify_unpublished(struct tool *t, struct hdr *h, uint64_t from, uint64_t k,
				uint64_t epoch, struct ustate *u)
{
	size_t rs = h->recsize.v;
	uint8_t want[rs];
	memset(u, 0, sizeof(*u));
	if (!k)
		return 0;
	/* this host's image may hold stale copies: read the pool */
	if (cxlpod_invalidate(t->p, t->nc + from * rs, k * rs)) {
		fprintf(stderr, "cxlpod-crash: %s\n", cxlpod_errmsg());
		return EXIT_SETUP;
	}
	for (uint64_t i = from; i < from + k; i++) {
		const uint8_t *r = t->nc + i * rs;
		unsigned present = 0, lines = rs / CXLPOD_LINE;
		make_record(want, rs, epoch, i);
		for (unsigned l = 0; l < lines; l++)
			present += !memcmp(r + l * CXLPOD_LINE, want + l * CXLPOD_LINE, CXLPOD_LINE);
		u->lines += lines;
		u->lines_present += present;
		if (present == lines)
			u->intact++;
		else if (present)
			u->partial++;
		else
			u->absent++;
	}
	return 0;
}

static void reset(struct tool *t, void *arg)
{
	struct hdr *h = arg;
	(void)t;
	h->count.v = 0;
	h->done.v = 0;
	h->epoch.v = 0;
	h->unpub.v = 0;
	h->lives.v = 0;
	h->magic.v = 0;
}

static int report(struct tool *t, const char *why, uint64_t published, struct rstate *st,
		  const struct ustate *u, uint64_t unpub)
{
	bool ok = st->torn == 0 && st->missing == 0 && st->verified == published;
	if (!t->json) {
		printf("crash: reader host %d: writer %s; published %llu records, verified %llu "
		       "intact, %llu torn, %llu missing\n",
		       t->rank, why, (unsigned long long)published, (unsigned long long)st->verified,
		       (unsigned long long)st->torn, (unsigned long long)st->missing);
		if (unpub)
			printf("crash: unpublished %llu records: %llu intact, %llu partial, %llu "
			       "absent (%llu of %llu lines reached the pool)\n",
			       (unsigned long long)unpub, (unsigned long long)u->intact,
			       (unsigned long long)u->partial, (unsigned long long)u->absent,
			       (unsigned long long)u->lines_present, (unsigned long long)u->lines);
		printf("crash: %s\n", ok ? "OK every published record intact"
					 : "FAIL corruption detected");
	} else {
		struct jbuf j;
		j_begin(&j);
		j_common(&j, t);
		j_str(&j, "role", "reader");
		j_bool(&j, "ok", ok);
		j_bool(&j, "corruption_detected", !ok);
		j_str(&j, "writer", why);
		j_uint(&j, "published", published);
		j_uint(&j, "verified", st->verified);
		j_uint(&j, "torn", st->torn);
		j_uint(&j, "missing", st->missing);
		if (unpub) {
			j_uint(&j, "unpublished", unpub);
			j_uint(&j, "unpublished_intact", u->intact);
			j_uint(&j, "unpublished_partial", u->partial);
			j_uint(&j, "unpublished_absent", u->absent);
			j_uint(&j, "unpublished_lines", u->lines);
			j_uint(&j, "unpublished_lines_present", u->lines_present);
		}
		j_end_print(&j);
	}
	return ok ? 0 : EXIT_WRONG;
}

static void sleep_us(unsigned us)
{
	struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
	nanosleep(&ts, NULL);
}

static int host_gen(struct tool *t, int host, enum cxlpod_host_state *s, uint64_t *gen)
{
	if (t->info.backend != CXLPOD_BACKEND_DEVICE || host >= (int)t->info.max_hosts ||
	    cxlpod_host_state(t->p, host, s, gen)) {
		*s = CXLPOD_HOST_LIVE;
		*gen = 0;
		return -1;
	}
	return 0;
}

/* Append one record: store, write back, fence, publish the count. */
static int append_one(struct tool *t, struct hdr *h, uint64_t i, uint64_t epoch)
{
	size_t rs = h->recsize.v;
	uint8_t *r = t->nc + i * rs;
	make_record(r, rs, epoch, i);
	if (cxlpod_writeback(t->p, r, rs) || cxlpod_fence(t->p)) {
		fprintf(stderr, "cxlpod-crash: %s\n", cxlpod_errmsg());
		return EXIT_SETUP;
	}
	__atomic_store_n(&h->count.v, i + 1, __ATOMIC_SEQ_CST);
	return 0;
}

/*
 * --log, writer: one life of a writer that is killed and restarted.  Life
 * L = CXLPOD_RESTARTED + 1.  Life 1 joins the readers and starts the log;
 * a later life checks that the host table shows it live with the
 * generation after its previous life's, verifies every record published
 * so far, and appends to the same log.  Each life publishes --crash-at
 * records, prints "CRASH-POINT life=L records=N" and, unless it is the
 * last (--lives), goes on appending until it is killed; the last life
 * reads its own records back from the pool and marks the log done.
 */
static int log_writer(struct tool *t, struct hdr *h, size_t rs, uint64_t records,
		      uint64_t crash_at, unsigned lives, unsigned delay_us, double idle)
{
	const char *e = getenv("CXLPOD_RESTARTED");
	unsigned life = (e && *e ? (unsigned)atoi(e) : 0) + 1;
	enum cxlpod_host_state st;
	uint64_t gen;
	int rc;

	host_gen(t, t->rank, &st, &gen);
	if (life == 1) {
		if (cxlpod_flush(t->p, t->nc, records * rs)) {
			fprintf(stderr, "cxlpod-crash: %s\n", cxlpod_errmsg());
			return EXIT_SETUP;
		}
		if (tool_join(t, 6, reset, h))
			return EXIT_PEER;
		h->recsize.v = rs;
		h->writer.v = t->rank;
		h->capacity.v = records;
		h->epoch.v = t->epoch;
		h->base_gen.v = gen;
		h->last_gen.v = gen;
		h->lives.v = 1;
		__atomic_store_n(&h->magic.v, CRASH_MAGIC, __ATOMIC_SEQ_CST);
		if (tool_barrier(t))
			return EXIT_PEER;
		printf("crash: log writer host %d life 1 of %u (generation %llu): new log of "
		       "%zu-byte records\n", t->rank, lives, (unsigned long long)gen, rs);
	} else {
		if (h->magic.v != CRASH_MAGIC || h->recsize.v != rs || h->writer.v != (uint64_t)t->rank) {
			fprintf(stderr, "cxlpod-crash: life %u: no log of this writer in the pool\n",
				life);
			return EXIT_SETUP;
		}
		uint64_t prev = h->last_gen.v;
		bool ok = st == CXLPOD_HOST_LIVE && gen == prev + 1 &&
			  gen == h->base_gen.v + life - 1;
		if (t->info.backend != CXLPOD_BACKEND_DEVICE) {
			ok = true;  /* no host table: nothing to check */
			gen = prev + 1;
		}
		printf("crash: log writer host %d life %u of %u: host table shows it %s with "
		       "generation %llu (previous life %llu, first %llu): %s\n", t->rank, life,
		       lives, cxlpod_host_state_name(st), (unsigned long long)gen,
		       (unsigned long long)prev, (unsigned long long)h->base_gen.v,
		       ok ? "new generation" : "WRONG generation");
		if (!ok)
			return EXIT_WRONG;
		/* everything earlier lives published, through this life's fresh image */
		struct rstate vs = {0};
		uint64_t n = __atomic_load_n(&h->count.v, __ATOMIC_ACQUIRE);
		if ((rc = verify_range(t, h, &vs, 0, n, h->epoch.v)))
			return rc;
		printf("crash: life %u: verified %llu records of earlier lives: %llu intact, %llu "
		       "torn, %llu missing\n", life, (unsigned long long)n,
		       (unsigned long long)vs.verified, (unsigned long long)vs.torn,
		       (unsigned long long)vs.missing);
		if (vs.torn || vs.missing)
			return EXIT_WRONG;
		h->last_gen.v = gen;
		h->lives.v = life;
	}
	fflush(stdout);

	uint64_t epoch = h->epoch.v;
	uint64_t first = __atomic_load_n(&h->count.v, __ATOMIC_ACQUIRE), i = first;
	double t_point = 0;
	for (;; i++) {
		if (i < records) {
			if ((rc = append_one(t, h, i, epoch)))
				return rc;
		} else if (!t_point) {
			fprintf(stderr, "cxlpod-crash: the log is full (%llu records)\n",
				(unsigned long long)records);
			return EXIT_SETUP;
		}
		if (i + 1 - first == crash_at) {
			printf("CRASH-POINT life=%u records=%llu\n", life,
			       (unsigned long long)(i + 1));
			fflush(stdout);
			t_point = now_s();
			if (life >= lives)
				break;
		}
		if (t_point && now_s() - t_point > idle) {
			fprintf(stderr, "cxlpod-crash: life %u of %u was not killed within %.0f s "
				"of its CRASH-POINT\n", life, lives, idle);
			return EXIT_PEER;
		}
		if (delay_us)
			sleep_us(delay_us);
	}

	/* last life: read its own records back from the pool */
	struct rstate vs = {0};
	uint64_t n = i + 1;
	if ((rc = verify_range(t, h, &vs, first, n, epoch)))
		return rc;
	bool ok = !vs.torn && !vs.missing && vs.verified == n - first;
	__atomic_store_n(&h->done.v, epoch, __ATOMIC_SEQ_CST);
	if (!t->json) {
		printf("crash: log writer life %u (last): appended %llu records and read them back: "
		       "%llu intact, %llu torn, %llu missing; log has %llu records\n", life,
		       (unsigned long long)(n - first), (unsigned long long)vs.verified,
		       (unsigned long long)vs.torn, (unsigned long long)vs.missing,
		       (unsigned long long)n);
	} else {
		struct jbuf j;
		j_begin(&j);
		j_common(&j, t);
		j_str(&j, "role", "log-writer");
		j_bool(&j, "ok", ok);
		j_uint(&j, "life", life);
		j_uint(&j, "generation", gen);
		j_uint(&j, "appended", n - first);
		j_uint(&j, "verified", vs.verified);
		j_uint(&j, "records", n);
		j_end_print(&j);
	}
	return ok ? 0 : EXIT_WRONG;
}

/*
 * --log, reader: follows the writer through all its lives.  Every newly
 * published record is verified as it appears; each time the writer's host
 * fails (or shows up with a new generation before this host saw it
 * failed) every record published so far is verified again.  Ends when the
 * writer marked the log done and left (clean exit), when it left without
 * that, or after --idle seconds without progress.
 */
static int log_reader(struct tool *t, struct hdr *h, unsigned lives, double idle)
{
	int rc;
	if (tool_join(t, 6, reset, h))
		return EXIT_PEER;
	if (tool_barrier(t))
		return EXIT_PEER;
	int wr = (int)h->writer.v;
	uint64_t epoch = h->epoch.v;
	struct rstate run = {0};    /* incremental verification */
	uint64_t seen = 0, passes_bad = 0, kills = 0, rejoins = 0, gen_jumps = 0;
	enum cxlpod_host_state s;
	uint64_t wgen;
	host_gen(t, wr, &s, &wgen);
	uint64_t failed_gen = 0;    /* generation whose failure was handled */
	double last_progress = now_s();
	unsigned spins = 0;
	const char *why = "idle";
	struct rstate fin = {0};

	for (;;) {
		uint64_t n = __atomic_load_n(&h->count.v, __ATOMIC_ACQUIRE);
		if (n > seen) {
			if ((rc = verify_range(t, h, &run, seen, n, epoch)))
				return rc;
			seen = n;
			last_progress = now_s();
			spins = 0;
			continue;
		}
		uint64_t g;
		host_gen(t, wr, &s, &g);
		bool died = (s == CXLPOD_HOST_FAILED && g == wgen && failed_gen != g) ||
			    (g > wgen && failed_gen != wgen);
		if (died) {
			/* the writer died: everything it published must be intact */
			struct rstate ps = {0};
			n = __atomic_load_n(&h->count.v, __ATOMIC_ACQUIRE);
			if ((rc = verify_range(t, h, &ps, 0, n, epoch)))
				return rc;
			kills++;
			failed_gen = wgen;
			bool ok = !ps.torn && !ps.missing && ps.verified == n;
			passes_bad += !ok;
			printf("crash: kill %llu: writer generation %llu %s; published %llu records, "
			       "verified %llu intact, %llu torn, %llu missing\n",
			       (unsigned long long)kills, (unsigned long long)wgen,
			       s == CXLPOD_HOST_FAILED ? "failed" : "gone (seen as a new generation)",
			       (unsigned long long)n, (unsigned long long)ps.verified,
			       (unsigned long long)ps.torn, (unsigned long long)ps.missing);
			fflush(stdout);
			seen = n;
			last_progress = now_s();
			continue;
		}
		if (g > wgen) {
			rejoins++;
			gen_jumps += g != wgen + 1;
			printf("crash: writer rejoined with generation %llu%s\n",
			       (unsigned long long)g, g != wgen + 1 ? " (NOT the next one)" : "");
			fflush(stdout);
			wgen = g;
			last_progress = now_s();
			continue;
		}
		bool device = t->info.backend == CXLPOD_BACKEND_DEVICE;
		if (s == CXLPOD_HOST_LEFT || (!device && h->done.v == epoch)) {
			/* (without the device there is no host table: done is the end) */
			why = h->done.v != epoch ? "left without finishing"
					     : device ? "finished and left" : "finished";
			n = __atomic_load_n(&h->count.v, __ATOMIC_ACQUIRE);
			if ((rc = verify_range(t, h, &fin, 0, n, epoch)))
				return rc;
			seen = n;
			break;
		}
		if (now_s() - last_progress > idle) {
			fprintf(stderr, "cxlpod-crash: no progress of the writer for %.0f s\n", idle);
			break;
		}
		poll_pause(&spins);
	}
	bool finished = !strncmp(why, "finished", 8);
	bool lives_ok = !lives || t->info.backend != CXLPOD_BACKEND_DEVICE ||
			(kills == lives - 1 && rejoins == lives - 1);
	bool ok = finished && !passes_bad && !gen_jumps && lives_ok && !run.torn &&
		  !run.missing && !fin.torn && !fin.missing && fin.verified == seen;
	if (!t->json) {
		printf("crash: reader host %d: writer %s after %llu kills and %llu rejoins "
		       "(generation %llu); published %llu records, verified %llu intact, %llu torn, "
		       "%llu missing\n", t->rank, why, (unsigned long long)kills,
		       (unsigned long long)rejoins, (unsigned long long)wgen,
		       (unsigned long long)seen, (unsigned long long)fin.verified,
		       (unsigned long long)(fin.torn + run.torn),
		       (unsigned long long)(fin.missing + run.missing));
		if (!lives_ok)
			printf("crash: expected %u lives (%u kills), saw %llu kills\n", lives,
			       lives - 1, (unsigned long long)kills);
		printf("crash: %s\n", ok ? "OK every published record intact after every kill"
					 : "FAIL corruption detected or writer lost");
	} else {
		struct jbuf j;
		j_begin(&j);
		j_common(&j, t);
		j_str(&j, "role", "log-reader");
		j_bool(&j, "ok", ok);
		j_str(&j, "writer", why);
		j_uint(&j, "kills", kills);
		j_uint(&j, "rejoins", rejoins);
		j_uint(&j, "writer_generation", wgen);
		j_uint(&j, "bad_passes", passes_bad);
		j_uint(&j, "published", seen);
		j_uint(&j, "verified", fin.verified);
		j_uint(&j, "torn", fin.torn + run.torn);
		j_uint(&j, "missing", fin.missing + run.missing);
		j_end_print(&j);
	}
	return ok ? 0 : (passes_bad || run.torn || fin.torn || run.missing || fin.missing)
			       ? EXIT_WRONG : EXIT_PEER;
}

static void usage(void)
{
	printf("usage: cxlpod-crash [--role writer|reader|verify] [--writer H(0)]\n"
	       "       [--records N(all that fit, max 1M)] [--crash-at K(1000)]\n"
	       "       [--record-size B(256)] [--delay-us U(0)] [--idle S(30)]\n"
	       "       [--no-flush] [--unpublished K [--hold-ms M(0)]]\n"
	       "       [--log [--lives N]] [--slot S(0)] [options]\n"
	       "  --slot S         S=1..3: use header S and the S-th quarter of the\n"
	       "                   non-coherent area (two runs side by side)\n"
	       "  --unpublished K  after --crash-at published records, store K more\n"
	       "                   without writeback or publication, wait M ms, print\n"
	       "                   CRASH-POINT and wait to be killed; readers count\n"
	       "                   them intact / partial / absent\n"
	       "  --log            one log across the writer's restarts: each life\n"
	       "                   (CXLPOD_RESTARTED+1) checks its new generation,\n"
	       "                   verifies, appends --crash-at records, prints\n"
	       "                   CRASH-POINT life=L and appends until killed; life N\n"
	       "                   (--lives) finishes; readers re-verify after each kill\n"
	       "%s",
	       tool_common_usage());
}

int main(int argc, char **argv)
{
	struct tool t = {.name = "cxlpod-crash", .rank = -1};
	const char *role = NULL;
	int writer = 0;
	uint64_t records = 0, crash_at = 1000;
	size_t rs = 256;
	double idle = 30;
	int delay_us = 0;
	bool noflush = false, log_mode = false;
	uint64_t unpub = 0;
	int hold_ms = 0, lives = 0, slot = 0;
	const struct topt opts[] = {
		{"--role", TOPT_STR, &role, 0, 0},
		{"--writer", TOPT_INT, &writer, 0, CXLPOD_MAX_HOSTS - 1},
		{"--records", TOPT_U64, &records, 0, 0},
		{"--crash-at", TOPT_U64, &crash_at, 0, 0},
		{"--record-size", TOPT_SIZE, &rs, 64, 1 << 20},
		{"--idle", TOPT_DBL, &idle, 0.001, 86400},
		{"--delay-us", TOPT_INT, &delay_us, 0, 1e7},
		{"--no-flush", TOPT_FLAG, &noflush, 0, 0},
		{"--unpublished", TOPT_U64, &unpub, 0, 0},
		{"--hold-ms", TOPT_INT, &hold_ms, 0, 1e7},
		{"--slot", TOPT_INT, &slot, 0, 3},
		{"--log", TOPT_FLAG, &log_mode, 0, 0},
		{"--lives", TOPT_INT, &lives, 0, 1e6},
		{NULL, TOPT_FLAG, NULL, 0, 0},
	};
	int pr = tool_parse(&t, argc, argv, opts, usage, NULL);
	if (pr)
		return pr == TOOL_HELP ? 0 : pr;
	if (rs < 64 || rs % 64) {
		fprintf(stderr, "cxlpod-crash: --record-size must be a multiple of 64\n");
		return EXIT_USAGE;
	}
	int rc = tool_open(&t);
	if (rc)
		return rc;
	if (!role)
		role = t.rank == writer ? "writer" : "reader";
	if (slot) {
		/* a quarter of the non-coherent area and its own header: two
		 * runs of the tool (one after the other's join) do not meet */
		size_t q = t.nc_len / 4 / CXLPOD_LINE * CXLPOD_LINE;
		t.coh += slot * 4096u;
		t.nc += slot * q;
		t.nc_len = q;
	}
	struct hdr *h = (struct hdr *)t.coh;
	uint64_t cap = t.nc_len / rs;
	if (cap > (1u << 20))
		cap = 1u << 20;
	if (!records || records > cap)
		records = cap;
	if (unpub) {
		if (log_mode || noflush || crash_at + unpub > cap) {
			fprintf(stderr, "cxlpod-crash: --unpublished goes without --log and "
				"--no-flush, and --crash-at + K must fit (%llu records)\n",
				(unsigned long long)cap);
			return EXIT_USAGE;
		}
		records = crash_at + unpub;
	}
	if (log_mode) {
		if (!role)
			role = t.rank == writer ? "writer" : "reader";
		if (!strcmp(role, "writer"))
			rc = log_writer(&t, h, rs, records, crash_at, lives ? lives : 1, delay_us,
					idle);
		else if (!strcmp(role, "reader"))
			rc = log_reader(&t, h, lives, idle);
		else {
			fprintf(stderr, "cxlpod-crash: --log: --role writer|reader\n");
			return EXIT_USAGE;
		}
		tool_close(&t);
		return rc;
	}

	if (!strcmp(role, "verify")) {
		struct rstate st = {0};
		if (h->magic.v != CRASH_MAGIC || h->recsize.v != rs) {
			fprintf(stderr, "cxlpod-crash: no crash-test header in the pool\n");
			return EXIT_SETUP;
		}
		uint64_t n = __atomic_load_n(&h->count.v, __ATOMIC_ACQUIRE);
		if ((rc = verify_range(&t, h, &st, 0, n, h->epoch.v)))
			return rc;
		struct ustate u = {0};
		uint64_t k = h->unpub.v;
		if (k && (rc = classify_unpublished(&t, h, n, k, h->epoch.v, &u)))
			return rc;
		return report(&t, h->done.v == h->epoch.v ? "finished" : "stopped", n, &st, &u, k);
	}
	if (strcmp(role, "writer") && strcmp(role, "reader")) {
		fprintf(stderr, "cxlpod-crash: --role writer|reader|verify\n");
		return EXIT_USAGE;
	}
	bool is_writer = !strcmp(role, "writer");
	if (is_writer && cxlpod_flush(t.p, t.nc, records * rs)) {
		fprintf(stderr, "cxlpod-crash: %s\n", cxlpod_errmsg());
		return EXIT_SETUP;
	}
	if (tool_join(&t, 6, reset, h))
		return EXIT_PEER;

	if (is_writer) {
		h->recsize.v = rs;
		/* the host table is indexed by device host id (ranks may differ) */
		h->writer.v = t.info.backend == CXLPOD_BACKEND_DEVICE ? t.info.host_id
								      : (unsigned)t.rank;
		h->capacity.v = records;
		h->epoch.v = t.epoch;
		__atomic_store_n(&h->magic.v, CRASH_MAGIC, __ATOMIC_SEQ_CST);
		if (tool_barrier(&t))
			return EXIT_PEER;
		if (!t.json)
			printf("crash: writer host %d appending %llu records of %zu bytes%s\n", t.rank,
			       (unsigned long long)records, rs, noflush ? " WITHOUT writeback" : "");
		fflush(stdout);
		double t0 = now_s();
		uint64_t npub = unpub ? crash_at : records;
		for (uint64_t i = 0; i < npub; i++) {
			uint8_t *r = t.nc + i * rs;
			make_record(r, rs, t.epoch, i);
			if (!noflush && (cxlpod_writeback(t.p, r, rs) || cxlpod_fence(t.p))) {
				fprintf(stderr, "cxlpod-crash: %s\n", cxlpod_errmsg());
				return EXIT_SETUP;
			}
			__atomic_store_n(&h->count.v, i + 1, __ATOMIC_SEQ_CST);
			if (i + 1 == crash_at && !unpub) {
				printf("CRASH-POINT records=%llu\n", (unsigned long long)crash_at);
				fflush(stdout);
			}
			if (delay_us)
				sleep_us(delay_us);
		}
		if (unpub) {
			/* K more records with plain stores only: not written back, not
			 * published.  Without eviction none of them reaches the pool
			 * before the kill; with eviction some lines may. */
			__atomic_store_n(&h->unpub.v, unpub, __ATOMIC_SEQ_CST);
			for (uint64_t i = crash_at; i < crash_at + unpub; i++)
				make_record(t.nc + i * rs, rs, t.epoch, i);
			if (hold_ms)
				sleep_us(hold_ms * 1000u);
			printf("CRASH-POINT records=%llu unpublished=%llu\n",
			       (unsigned long long)crash_at, (unsigned long long)unpub);
			fflush(stdout);
			double t1 = now_s();
			while (now_s() - t1 < idle)
				sleep_us(10000);
			fprintf(stderr, "cxlpod-crash: writer with unpublished records was not "
				"killed within %.0f s\n", idle);
			return EXIT_PEER;
		}
		double dt = now_s() - t0;
		__atomic_store_n(&h->done.v, t.epoch, __ATOMIC_SEQ_CST);
		if (!t.json)
			printf("crash: writer done: %llu records in %.3f s (%.0f records/s)\n",
			       (unsigned long long)records, dt, records / dt);
		else {
			struct jbuf j;
			j_begin(&j);
			j_common(&j, &t);
			j_str(&j, "role", "writer");
			j_bool(&j, "ok", true);
			j_uint(&j, "records", records);
			j_dbl(&j, "records_per_s", records / dt);
			j_end_print(&j);
		}
		tool_close(&t);
		return 0;
	}

	/* reader */
	if (tool_barrier(&t))
		return EXIT_PEER;
	struct rstate st = {0};
	uint64_t seen = 0, epoch = h->epoch.v;
	double last_progress = now_s();
	unsigned spins = 0;
	const char *why = "idle";
	int wr = (int)h->writer.v;
	for (;;) {
		uint64_t n = __atomic_load_n(&h->count.v, __ATOMIC_ACQUIRE);
		if (n > seen) {
			if ((rc = verify_range(&t, h, &st, seen, n, epoch)))
				return rc;
			seen = n;
			last_progress = now_s();
			spins = 0;
			continue;
		}
		if (h->done.v == epoch) {
			why = "finished";
			break;
		}
		enum cxlpod_host_state s;
		if (t.info.backend == CXLPOD_BACKEND_DEVICE && wr < (int)t.info.max_hosts &&
		    cxlpod_host_state(t.p, wr, &s, NULL) == 0 &&
		    (s == CXLPOD_HOST_FAILED || s == CXLPOD_HOST_LEFT)) {
			why = s == CXLPOD_HOST_FAILED ? "failed" : "left";
			/* final pass: anything published just before it died */
			n = __atomic_load_n(&h->count.v, __ATOMIC_ACQUIRE);
			if ((rc = verify_range(&t, h, &st, seen, n, epoch)))
				return rc;
			seen = n;
			break;
		}
		if (now_s() - last_progress > idle) {
			why = "idle";
			break;
		}
		poll_pause(&spins);
	}
	struct ustate u = {0};
	uint64_t k = h->unpub.v;
	if (k && !strcmp(why, "failed") &&
	    (rc = classify_unpublished(&t, h, seen, k, epoch, &u)))
		return rc;
	rc = report(&t, why, seen, &st, &u, strcmp(why, "failed") ? 0 : k);
	tool_close(&t);
	return rc;
}
