/*
 * Shared code of the cxlpod guest tools: options, cross-host join and
 * barriers in the coherent window, JSON output, timing, checksums.
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Coherent-window layout used by the tools (one tool runs at a time):
 *   [0, 128 KiB)       sync block (struct sync_block): join + barrier,
 *                      five lines per possible host (82 KiB for 256)
 *   [128 KiB, ...)     tool data (TOOL_COH_OFF)
 * The non-coherent area is used from its start by the tool that runs.
 *
 * Exit codes (all tools):
 *   0 ok / every outcome as expected
 *   1 usage error
 *   2 setup error (no device, library error, geometry too small)
 *   3 wrong result: litmus mismatch, checksum / sum mismatch,
 *     "corruption detected", torn or missing record
 *   4 peer problem: barrier timeout, a peer host failed, aborted by a peer
 */
#ifndef CXLPOD_TOOL_H
#define CXLPOD_TOOL_H

#include "libcxlpod.h"
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define EXIT_OK 0
#define EXIT_USAGE 1
#define EXIT_SETUP 2
#define EXIT_WRONG 3
#define EXIT_PEER 4

#define TOOL_COH_OFF (128u << 10)
#define SYNC_MAGIC 0x434e5953504c5843ull /* "CXLPSYNC" */

struct pline {
	volatile uint64_t v;
	uint64_t pad[7];
} __attribute__((aligned(64)));

struct sync_block {
	struct pline magic, epoch, go, nhosts, tool, abort;
	struct pline hello[CXLPOD_MAX_HOSTS];
	struct pline welcome[CXLPOD_MAX_HOSTS];
	struct pline ready[CXLPOD_MAX_HOSTS];
	struct pline arrive[CXLPOD_MAX_HOSTS];
	struct pline value[CXLPOD_MAX_HOSTS]; /* per-host scratch for reductions */
};
_Static_assert(sizeof(struct sync_block) <= TOOL_COH_OFF,
	       "the sync block of CXLPOD_MAX_HOSTS hosts fits before the tool data");

struct tool {
	const char *name;
	cxlpod *p;
	struct cxlpod_info info;
	int rank, nhosts;
	bool json;
	bool no_common; /* tool_parse(): no common options (a tool without the pool) */
	enum cxlpod_method method;
	bool method_both; /* --method both (litmus) */
	double timeout_s;
	uint8_t *coh; /* tool data in the coherent window (after the sync block) */
	size_t coh_len;
	uint8_t *nc; /* non-coherent area */
	size_t nc_len;
	struct sync_block *sync;
	uint64_t epoch, bar_gen;
	int peer_err; /* set when a barrier failed */
	unsigned alive_next; /* tool_peers_alive(): where the next check starts */
};

/* Parse the common options at argv[*i]; returns 1 if consumed, 0 if not,
 * -1 on error (message printed). */
int tool_common_opt(struct tool *t, int argc, char **argv, int *i);
const char *tool_common_usage(void);

/* A tool's own options, for tool_parse(): a table ended by {NULL} */
enum topt_kind {
	TOPT_FLAG, /* bool: set to true */
	TOPT_INT,  /* int */
	TOPT_U64,  /* uint64_t */
	TOPT_SIZE, /* size_t, with a K/M/G suffix (parse_size_arg) */
	TOPT_DBL,  /* double */
	TOPT_STR,  /* const char * */
};
struct topt {
	const char *name; /* "--lines" */
	enum topt_kind kind;
	void *dst;
	double min, max; /* numbers: the accepted range, checked when max > min */
};
#define TOOL_HELP (-1)
/* Parse argv: the common options, then OPTS.  -h / --help prints usage()
 * and returns TOOL_HELP (the tool exits 0); a word that is not an option
 * goes to *positional (one, when positional is not NULL).  Returns 0,
 * TOOL_HELP, or EXIT_USAGE after printing what is wrong. */
int tool_parse(struct tool *t, int argc, char **argv, const struct topt *opts,
	       void (*usage)(void), const char **positional);
/* The same with up to MAX words (in order, into words[0..*n)); after "--"
 * every argument is a word, even one that starts with '-'.  t->no_common
 * leaves the common options out (they are unknown options then). */
int tool_parse_words(struct tool *t, int argc, char **argv, const struct topt *opts,
		     void (*usage)(void), const char **words, int max, int *n);
/* Open the pool, resolve rank/nhosts (options > CXLPOD_HOST_ID/NHOSTS env >
 * device host id / 1).  Returns an exit code (0 ok). */
int tool_open(struct tool *t);
void tool_close(struct tool *t);
/* Cross-host join: rank 0 calls reset(arg) (clear the tool's shared state)
 * before anyone proceeds; every rank gets the run's epoch (random, also a
 * good per-run seed).  Returns exit code. */
int tool_join(struct tool *t, unsigned tool_id, void (*reset)(struct tool *, void *), void *arg);
/* Barrier among all ranks; returns 0 or EXIT_PEER. */
int tool_barrier(struct tool *t);
/* Tell the peers to give up (they fail their next barrier with EXIT_PEER). */
void tool_abort(struct tool *t);
/* Spin until *addr >= want (coherent window); 0 or EXIT_PEER on timeout. */
int tool_wait_ge(struct tool *t, volatile uint64_t *addr, uint64_t want);
int tool_wait_eq(struct tool *t, volatile uint64_t *addr, uint64_t want);
/* Check that the other ranks are still alive (device host table): up to
 * TOOL_PEERS_PER_CHECK of them a call, on from where the last call stopped
 * (a waiter checks every half second or so: what that costs stays the same
 * whatever the pod's size); the first rank that finds one failed aborts
 * the run for every rank.  0, or EXIT_PEER. */
#define TOOL_PEERS_PER_CHECK 16
int tool_peers_alive(struct tool *t);

double now_s(void);
uint64_t rand64(void);
uint64_t splitmix64(uint64_t *s);
uint64_t fnv1a(const void *p, size_t n);
uint64_t parse_size_arg(const char *s); /* 0 on error */
/* N, 0xN, with a K/M/G suffix; 0 is a size too.  0, or -1 on error. */
int parse_size_full(const char *s, uint64_t *out);
/* One step of a polling wait: pause, then sleeps of 20 us, 200 us, 2 ms and,
 * after about a second, 100 ms as *spins (0 at the start of the wait) grows */
void poll_pause(unsigned *spins);
/* Pin the calling thread to CPU @cpu: 0, or -errno */
int tool_pin_cpu(int cpu);

/* Library call wrapper: on error print and return EXIT_SETUP. */
#define LIBCALL(t, call)                                                                       \
	do {                                                                                   \
		int _e = (call);                                                               \
		if (_e) {                                                                      \
			fprintf(stderr, "%s: %s: %s\n", (t)->name, #call, cxlpod_errmsg());   \
			return EXIT_SETUP;                                                     \
		}                                                                              \
	} while (0)

/* JSON line builder */
struct jbuf {
	char *s;
	size_t len, cap;
	int first;
};
void j_begin(struct jbuf *j);
void j_raw(struct jbuf *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void j_key(struct jbuf *j, const char *k); /* writes separator + "k": */
void j_str(struct jbuf *j, const char *k, const char *v);
/* The device's timed-mode counters and charged ns, as JSON members */
struct cxlpod_stats;
void j_timed_stats(struct jbuf *j, const struct cxlpod_stats *st);
void j_int(struct jbuf *j, const char *k, long long v);
void j_uint(struct jbuf *j, const char *k, unsigned long long v);
void j_dbl(struct jbuf *j, const char *k, double v);
void j_bool(struct jbuf *j, const char *k, bool v);
void j_obj_begin(struct jbuf *j, const char *k); /* k may be NULL inside arrays */
void j_obj_end(struct jbuf *j);
void j_arr_begin(struct jbuf *j, const char *k);
void j_arr_end(struct jbuf *j);
void j_end_print(struct jbuf *j); /* closes, prints one line, frees */
void j_common(struct jbuf *j, struct tool *t); /* tool, host, nhosts, backend, method */

#endif
