/*
 * pod-counter: a small program written against libcxlpod, the example
 * project of docs/ci.md.  Run on every host of a pod at once, it checks
 * the two things a pod program relies on:
 *
 *   - a counter in the coherent window that every host adds to with
 *     atomics ends exactly at hosts x adds;
 *   - a record each host writes in the non-coherent area, written back and
 *     fenced before its "done" flag (an atomic in the coherent window), is
 *     what every other host reads after invalidating.
 *
 *   pod-counter [--adds N] [--timeout SECONDS]
 *
 * Prints "pod-counter: host H of N: PASS ..." and exits 0, or FAIL and 1.
 * Build: cc pod-counter.c $(pkg-config --cflags --libs cxlpod).
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <libcxlpod.h>

#define LINE 64
/* coherent window: the counter, then one "done" word a host */
#define COUNTER_OFF 0
#define DONE_OFF(h) (LINE + (uint64_t)(h) * 8)
/* non-coherent area: one record (one line) a host */
#define RECORD_OFF(coh, h) ((coh) + (uint64_t)(h) * LINE)

struct record {
	uint64_t magic, host, adds, words[5];
};
#define MAGIC 0x706f64636f756e74ull /* "podcount" */

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void nap(void)
{
	nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000 * 1000 }, NULL);
}

int main(int argc, char **argv)
{
	long adds = 10000;
	double timeout = 120;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--adds") && i + 1 < argc)
			adds = atol(argv[++i]);
		else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
			timeout = atof(argv[++i]);
		else {
			fprintf(stderr, "usage: pod-counter [--adds N] [--timeout SECONDS]\n");
			return 2;
		}
	}

	cxlpod *p;
	struct cxlpod_info in;
	uint8_t *base;
	uint64_t *ctr, v;
	if (cxlpod_open(&p, NULL) || cxlpod_get_info(p, &in) ||
	    cxlpod_ptr(p, 0, (void **)&base)) {
		fprintf(stderr, "pod-counter: %s\n", cxlpod_errmsg());
		return 1;
	}
	unsigned me = in.host_id, n = in.max_hosts;
	ctr = (uint64_t *)(base + COUNTER_OFF);

	/* 1. everybody adds; the last host to finish sees the exact total */
	for (long i = 0; i < adds; i++) {
		if (cxlpod_atomic_fetch_add(p, ctr, 1, &v)) {
			fprintf(stderr, "pod-counter: fetch_add: %s\n", cxlpod_errmsg());
			return 1;
		}
	}

	/* 2. publish a record: store, write back, fence, then the flag */
	struct record *mine = (struct record *)(base + RECORD_OFF(in.coherent_size, me));
	*mine = (struct record){ MAGIC, me, (uint64_t)adds, { me, me, me, me, me } };
	if (cxlpod_writeback(p, mine, sizeof(*mine)) || cxlpod_fence(p) ||
	    cxlpod_atomic_store(p, (uint64_t *)(base + DONE_OFF(me)), 1)) {
		fprintf(stderr, "pod-counter: publish: %s\n", cxlpod_errmsg());
		return 1;
	}

	/* 3. wait for every host's flag, then read its record */
	double t0 = now();
	unsigned bad = 0;
	for (unsigned h = 0; h < n; h++) {
		uint64_t done = 0;
		while (cxlpod_atomic_load(p, (uint64_t *)(base + DONE_OFF(h)), &done) == 0 && !done) {
			if (now() - t0 > timeout) {
				printf("pod-counter: host %u of %u: FAIL host %u never published\n", me, n, h);
				return 1;
			}
			nap();
		}
		struct record *r = (struct record *)(base + RECORD_OFF(in.coherent_size, h));
		if (cxlpod_invalidate(p, r, sizeof(*r))) {
			fprintf(stderr, "pod-counter: invalidate: %s\n", cxlpod_errmsg());
			return 1;
		}
		if (r->magic != MAGIC || r->host != h || r->adds != (uint64_t)adds ||
		    r->words[4] != h) {
			printf("pod-counter: host %u: host %u's record is wrong (magic %#llx host %llu)\n",
			       me, h, (unsigned long long)r->magic, (unsigned long long)r->host);
			bad++;
		}
	}
	/* every host added before publishing, so the total is final now */
	cxlpod_atomic_load(p, ctr, &v);
	int ok = !bad && v == (uint64_t)adds * n;
	printf("pod-counter: host %u of %u: %s counter %llu (want %llu), %u of %u records right\n",
	       me, n, ok ? "PASS" : "FAIL", (unsigned long long)v,
	       (unsigned long long)adds * n, n - bad, n);
	cxlpod_close(p);
	return ok ? 0 : 1;
}
