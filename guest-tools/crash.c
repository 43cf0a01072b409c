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

static void reset(struct tool *t, void *arg)
{
	struct hdr *h = arg;
	(void)t;
	h->count.v = 0;
	h->done.v = 0;
	h->epoch.v = 0;
	h->magic.v = 0;
}

static int report(struct tool *t, const char *why, uint64_t published, struct rstate *st)
{
	bool ok = st->torn == 0 && st->missing == 0 && st->verified == published;
	if (!t->json) {
		printf("crash: reader host %d: writer %s; published %llu records, verified %llu "
		       "intact, %llu torn, %llu missing\n",
		       t->rank, why, (unsigned long long)published, (unsigned long long)st->verified,
		       (unsigned long long)st->torn, (unsigned long long)st->missing);
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
		j_end_print(&j);
	}
	return ok ? 0 : EXIT_WRONG;
}

int main(int argc, char **argv)
{
	struct tool t = {.name = "cxlpod-crash", .rank = -1};
	const char *role = NULL;
	int writer = 0;
	uint64_t records = 0, crash_at = 1000;
	size_t rs = 256;
	double idle = 30;
	unsigned delay_us = 0;
	bool noflush = false;
	for (int i = 1; i < argc; i++) {
		int r = tool_common_opt(&t, argc, argv, &i);
		if (r < 0)
			return EXIT_USAGE;
		if (r)
			continue;
		if (!strcmp(argv[i], "--role") && i + 1 < argc)
			role = argv[++i];
		else if (!strcmp(argv[i], "--writer") && i + 1 < argc)
			writer = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--records") && i + 1 < argc)
			records = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--crash-at") && i + 1 < argc)
			crash_at = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--record-size") && i + 1 < argc)
			rs = parse_size_arg(argv[++i]);
		else if (!strcmp(argv[i], "--idle") && i + 1 < argc)
			idle = atof(argv[++i]);
		else if (!strcmp(argv[i], "--delay-us") && i + 1 < argc)
			delay_us = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--no-flush"))
			noflush = true;
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
			printf("usage: cxlpod-crash [--role writer|reader|verify] [--writer H(0)]\n"
			       "       [--records N(all that fit, max 1M)] [--crash-at K(1000)]\n"
			       "       [--record-size B(256)] [--delay-us U(0)] [--idle S(30)]\n"
			       "       [--no-flush] [options]\n%s",
			       tool_common_usage());
			return 0;
		} else {
			fprintf(stderr, "cxlpod-crash: unknown option %s\n", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (rs < 64 || rs % 64) {
		fprintf(stderr, "cxlpod-crash: --record-size must be a multiple of 64\n");
		return EXIT_USAGE;
	}
	int rc = tool_open(&t);
	if (rc)
		return rc;
	if (!role)
		role = t.rank == writer ? "writer" : "reader";
	struct hdr *h = (struct hdr *)t.coh;
	uint64_t cap = t.nc_len / rs;
	if (cap > (1u << 20))
		cap = 1u << 20;
	if (!records || records > cap)
		records = cap;

	if (!strcmp(role, "verify")) {
		struct rstate st = {0};
		if (h->magic.v != CRASH_MAGIC || h->recsize.v != rs) {
			fprintf(stderr, "cxlpod-crash: no crash-test header in the pool\n");
			return EXIT_SETUP;
		}
		uint64_t n = __atomic_load_n(&h->count.v, __ATOMIC_ACQUIRE);
		if ((rc = verify_range(&t, h, &st, 0, n, h->epoch.v)))
			return rc;
		return report(&t, h->done.v == h->epoch.v ? "finished" : "stopped", n, &st);
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
		h->writer.v = t.rank;
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
		for (uint64_t i = 0; i < records; i++) {
			uint8_t *r = t.nc + i * rs;
			make_record(r, rs, t.epoch, i);
			if (!noflush && (cxlpod_writeback(t.p, r, rs) || cxlpod_fence(t.p))) {
				fprintf(stderr, "cxlpod-crash: %s\n", cxlpod_errmsg());
				return EXIT_SETUP;
			}
			__atomic_store_n(&h->count.v, i + 1, __ATOMIC_SEQ_CST);
			if (i + 1 == crash_at) {
				printf("CRASH-POINT records=%llu\n", (unsigned long long)crash_at);
				fflush(stdout);
			}
			if (delay_us) {
				struct timespec ts = {delay_us / 1000000, (delay_us % 1000000) * 1000L};
				nanosleep(&ts, NULL);
			}
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
	rc = report(&t, why, seen, &st);
	tool_close(&t);
	return rc;
}
