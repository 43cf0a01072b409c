/*
 * cxlpod-mq: multi-producer / multi-consumer message queue across hosts.
 *
 * A bounded MPMC ring (Vyukov): the cells (sequence number + descriptor)
 * and the head / tail positions live in the COHERENT window and are updated
 * with cross-host atomics; each cell owns a payload slot in the
 * NON-COHERENT area.
 *   producer: claim cell (CAS tail); invalidate slot (the slot was last
 *             written by another host: refresh before overwriting);
 *             write payload; writeback; fence; fill descriptor; publish
 *             cell sequence (release store).
 *   consumer: claim cell (CAS head); read descriptor; invalidate slot;
 *             read payload, verify checksum; release cell.
 * Ranks < --producers (default: half the hosts, rounded up) produce, the
 * other ranks consume, so every message crosses hosts; with --producers N
 * (all) or on a single host every host does both.
 * Every payload's checksum is verified and every (producer, msgno) is
 * accounted for exactly once (counts and sums of msgno per producer).
 * --no-flush skips writeback/invalidate: on the device this must end in
 * "corruption detected" (exit 3).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "tool.h"

#include <stdlib.h>
#include <string.h>

struct cell {
	uint64_t seq;
	uint64_t len, csum, producer, msgno;
	uint64_t pad[3];
} __attribute__((aligned(64)));

struct mqctl {
	struct pline enq, deq, consumed, errors, done_hosts;
	struct pline count[CXLPOD_MAX_HOSTS], msgsum[CXLPOD_MAX_HOSTS];
	struct cell cells[];
};

struct mq {
	struct tool *t;
	struct mqctl *c;
	uint8_t *slots;
	size_t slot_size, size;
	uint64_t nslots;
	bool noflush;
	int verbose_errors;
};

static void reset(struct tool *t, void *arg)
{
	struct mq *q = arg;
	(void)t;
	memset(q->c, 0, sizeof(*q->c));
	for (uint64_t i = 0; i < q->nslots; i++)
		q->c->cells[i].seq = i;
}

static void fill(uint8_t *buf, size_t len, uint64_t epoch, uint64_t prod, uint64_t msgno)
{
	uint64_t s = epoch ^ (prod << 48) ^ (msgno * 0x9e3779b97f4a7c15ull);
	uint64_t hdr[3] = {prod, msgno, epoch};
	size_t i = 0;
	memcpy(buf, hdr, len < sizeof(hdr) ? len : sizeof(hdr));
	for (i = sizeof(hdr); i + 8 <= len; i += 8) {
		uint64_t v = splitmix64(&s);
		memcpy(buf + i, &v, 8);
	}
	for (; i < len; i++)
		buf[i] = (uint8_t)splitmix64(&s);
}

static int enqueue(struct mq *q, uint64_t prod, uint64_t msgno, int *err)
{
	struct mqctl *c = q->c;
	uint64_t pos = __atomic_load_n(&c->enq.v, __ATOMIC_RELAXED);
	struct cell *cell;
	for (;;) {
		cell = &c->cells[pos % q->nslots];
		uint64_t seq = __atomic_load_n(&cell->seq, __ATOMIC_ACQUIRE);
		int64_t dif = (int64_t)(seq - pos);
		if (dif == 0) {
			if (__atomic_compare_exchange_n((uint64_t *)&c->enq.v, &pos, pos + 1, 0,
							__ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
				break;
		} else if (dif < 0) {
			return 0; /* full */
		} else {
			pos = __atomic_load_n(&c->enq.v, __ATOMIC_RELAXED);
		}
	}
	uint8_t *slot = q->slots + (pos % q->nslots) * q->slot_size;
	if (!q->noflush && cxlpod_invalidate(q->t->p, slot, q->size))
		goto fail;
	fill(slot, q->size, q->t->epoch, prod, msgno);
	cell->csum = fnv1a(slot, q->size);
	if (!q->noflush && (cxlpod_writeback(q->t->p, slot, q->size) || cxlpod_fence(q->t->p)))
		goto fail;
	cell->len = q->size;
	cell->producer = prod;
	cell->msgno = msgno;
	__atomic_store_n(&cell->seq, pos + 1, __ATOMIC_RELEASE);
	return 1;
fail:
	fprintf(stderr, "cxlpod-mq: %s\n", cxlpod_errmsg());
	*err = EXIT_SETUP;
	return -1;
}

static int dequeue(struct mq *q, int *err)
{
	struct mqctl *c = q->c;
	uint64_t pos = __atomic_load_n(&c->deq.v, __ATOMIC_RELAXED);
	struct cell *cell;
	for (;;) {
		cell = &c->cells[pos % q->nslots];
		uint64_t seq = __atomic_load_n(&cell->seq, __ATOMIC_ACQUIRE);
		int64_t dif = (int64_t)(seq - (pos + 1));
		if (dif == 0) {
			if (__atomic_compare_exchange_n((uint64_t *)&c->deq.v, &pos, pos + 1, 0,
							__ATOMIC_SEQ_CST, __ATOMIC_RELAXED))
				break;
		} else if (dif < 0) {
			return 0; /* empty */
		} else {
			pos = __atomic_load_n(&c->deq.v, __ATOMIC_RELAXED);
		}
	}
	uint64_t len = cell->len, csum = cell->csum, prod = cell->producer, msgno = cell->msgno;
	uint8_t *slot = q->slots + (pos % q->nslots) * q->slot_size;
	if (!q->noflush && cxlpod_invalidate(q->t->p, slot, len)) {
		fprintf(stderr, "cxlpod-mq: %s\n", cxlpod_errmsg());
		*err = EXIT_SETUP;
		return -1;
	}
	uint64_t hdr[3];
	memcpy(hdr, slot, sizeof(hdr));
	bool bad = len != q->size || fnv1a(slot, len) != csum || hdr[0] != prod ||
		   hdr[1] != msgno || hdr[2] != q->t->epoch;
	__atomic_store_n(&cell->seq, pos + q->nslots, __ATOMIC_RELEASE);
	if (bad) {
		__atomic_fetch_add((uint64_t *)&c->errors.v, 1, __ATOMIC_SEQ_CST);
		if (q->verbose_errors-- > 0)
			fprintf(stderr,
				"cxlpod-mq: bad payload in slot %llu: producer %llu msg %llu "
				"(payload says %llu/%llu)\n",
				(unsigned long long)(pos % q->nslots), (unsigned long long)prod,
				(unsigned long long)msgno, (unsigned long long)hdr[0],
				(unsigned long long)hdr[1]);
	}
	if (prod < CXLPOD_MAX_HOSTS) {
		__atomic_fetch_add((uint64_t *)&c->count[prod].v, 1, __ATOMIC_SEQ_CST);
		__atomic_fetch_add((uint64_t *)&c->msgsum[prod].v, msgno, __ATOMIC_SEQ_CST);
	}
	__atomic_fetch_add((uint64_t *)&c->consumed.v, 1, __ATOMIC_SEQ_CST);
	return 1;
}

static void usage(void)
{
	printf("usage: cxlpod-mq [--messages N(2000) per producer] [--size BYTES(1024)]\n"
	       "                 [--slots N(64)] [--producers P(N/2)] [--no-flush] [options]\n%s",
	       tool_common_usage());
}

int main(int argc, char **argv)
{
	struct tool t = {.name = "cxlpod-mq", .rank = -1};
	struct mq q = {.t = &t, .size = 1024, .nslots = 64, .verbose_errors = 5};
	uint64_t msgs = 2000;
	int producers = 0;
	bool noflush = false;
	const struct topt opts[] = {
		{"--messages", TOPT_U64, &msgs, 1, 1e12},
		{"--size", TOPT_SIZE, &q.size, 24, 1e12},
		{"--slots", TOPT_U64, &q.nslots, 2, 1e9},
		{"--producers", TOPT_INT, &producers, 0, 0},
		{"--no-flush", TOPT_FLAG, &noflush, 0, 0},
		{NULL, TOPT_FLAG, NULL, 0, 0},
	};
	int pr = tool_parse(&t, argc, argv, opts, usage, NULL);
	if (pr)
		return pr == TOOL_HELP ? 0 : pr;
	q.noflush = noflush;
	if (q.size < 24 || q.nslots < 2 || msgs < 1) {
		fprintf(stderr, "cxlpod-mq: --size >= 24, --slots >= 2, --messages >= 1\n");
		return EXIT_USAGE;
	}
	int rc = tool_open(&t);
	if (rc)
		return rc;
	if (producers <= 0 || producers > t.nhosts)
		producers = (t.nhosts + 1) / 2;
	bool consumer = t.rank >= producers || producers == t.nhosts;
	q.slot_size = (q.size + 63) & ~(size_t)63;
	q.c = (struct mqctl *)t.coh;
	q.slots = t.nc;
	if (sizeof(struct mqctl) + q.nslots * sizeof(struct cell) > t.coh_len ||
	    q.nslots * q.slot_size > t.nc_len) {
		fprintf(stderr, "cxlpod-mq: %llu slots of %zu bytes do not fit the pool\n",
			(unsigned long long)q.nslots, q.slot_size);
		return EXIT_SETUP;
	}
	if (!(t.info.caps & CXLPOD_CAP_ATOMICS))
		fprintf(stderr, "cxlpod-mq: warning: device says coherent-window atomics are NOT "
				"cross-host (caps bit1 clear); the queue may break\n");
	/* drop anything this host left dirty in the slots (earlier runs) */
	if (cxlpod_flush(t.p, q.slots, q.nslots * q.slot_size)) {
		fprintf(stderr, "cxlpod-mq: %s\n", cxlpod_errmsg());
		return EXIT_SETUP;
	}
	if (tool_join(&t, 4, reset, &q) || tool_barrier(&t))
		return EXIT_PEER;

	uint64_t total = msgs * producers;
	uint64_t sent = 0;
	bool producer = t.rank < producers;
	uint64_t got = 0;
	double t0 = now_s();
	unsigned spins = 0;
	double last_check = t0;
	while (__atomic_load_n(&q.c->consumed.v, __ATOMIC_ACQUIRE) < total ||
	       (producer && sent < msgs)) {
		int progress = 0, e = 0;
		if (producer && sent < msgs) {
			int r = enqueue(&q, t.rank, sent, &e);
			if (r < 0)
				return e;
			sent += r;
			progress |= r;
		}
		if (consumer) {
			int r = dequeue(&q, &e);
			if (r < 0)
				return e;
			got += r;
			progress |= r;
		}
		if (!progress) {
			poll_pause(&spins);
			double n = now_s();
			if (n - last_check > 1) {
				last_check = n;
				if (tool_peers_alive(&t))
					return EXIT_PEER;
				if (t.epoch && t.sync->abort.v == t.epoch)
					return EXIT_PEER;
			}
			if (n - t0 > t.timeout_s) {
				fprintf(stderr, "cxlpod-mq: timeout: consumed %llu of %llu\n",
					(unsigned long long)q.c->consumed.v, (unsigned long long)total);
				tool_abort(&t);
				return EXIT_PEER;
			}
		} else {
			spins = 0;
		}
	}
	double mine = now_s() - t0;
	if (tool_barrier(&t))
		return EXIT_PEER;
	double elapsed = now_s() - t0; /* everyone done: queue drained */

	uint64_t errors = q.c->errors.v;
	int bad_acct = 0;
	for (int p = 0; p < producers; p++)
		if (q.c->count[p].v != msgs || q.c->msgsum[p].v != msgs * (msgs - 1) / 2)
			bad_acct++;
	if (q.c->consumed.v != total)
		bad_acct++;
	bool ok = errors == 0 && bad_acct == 0;
	double mps = total / elapsed, mbps = total * (double)q.size / elapsed / 1e6;
	if (!ok)
		rc = EXIT_WRONG;
	if (!t.json) {
		printf("cxlpod-mq: host %d/%d (%s), %d producers x %llu messages of %zu bytes, %llu "
		       "slots, method %s%s\n",
		       t.rank, t.nhosts, producer && consumer ? "producer+consumer" : producer ? "producer" : "consumer", producers, (unsigned long long)msgs, q.size,
		       (unsigned long long)q.nslots, cxlpod_method_name(t.info.method),
		       q.noflush ? ", NO FLUSH" : "");
		printf("  this host: sent %llu, received %llu in %.3f s\n", (unsigned long long)sent,
		       (unsigned long long)got, mine);
		printf("  all hosts: %llu messages in %.3f s: %.0f msg/s, %.2f MB/s\n",
		       (unsigned long long)total, elapsed, mps, mbps);
		printf("  checksum errors %llu, accounting errors %d\n", (unsigned long long)errors,
		       bad_acct);
		printf("mq: %s\n", ok ? "OK all payloads verified" : "FAIL corruption detected");
	} else {
		struct jbuf j;
		j_begin(&j);
		j_common(&j, &t);
		j_bool(&j, "ok", ok);
		j_bool(&j, "no_flush", q.noflush);
		j_bool(&j, "corruption_detected", !ok);
		j_int(&j, "producers", producers);
		j_uint(&j, "messages", total);
		j_uint(&j, "size", q.size);
		j_uint(&j, "slots", q.nslots);
		j_uint(&j, "sent", sent);
		j_uint(&j, "received", got);
		j_dbl(&j, "seconds", elapsed);
		j_dbl(&j, "msgs_per_s", mps);
		j_dbl(&j, "MBps", mbps);
		j_uint(&j, "checksum_errors", errors);
		j_int(&j, "accounting_errors", bad_acct);
		j_end_print(&j);
	}
	/* keep the counters until everyone has read them */
	if (tool_barrier(&t))
		return EXIT_PEER;
	tool_close(&t);
	return rc;
}
