/*
 * Unit tests of libcxlpod on the loopback and model backends (no QEMU).
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include "libcxlpod.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <stdint.h>
#include <unistd.h>

static int failures;
#define CHECK(c)                                                                               \
	do {                                                                                   \
		if (!(c)) {                                                                    \
			fprintf(stderr, "%s:%d: CHECK failed: %s (errmsg: %s)\n", __FILE__,    \
				__LINE__, #c, cxlpod_errmsg());                                \
			failures++;                                                            \
		}                                                                              \
	} while (0)

static char path[256];

static cxlpod *open_spec(const char *spec)
{
	struct cxlpod_opts o = {.loopback = spec};
	cxlpod *p = NULL;
	int e = cxlpod_open(&p, &o);
	CHECK(e == 0 && p);
	return p;
}

static void test_errors(void)
{
	cxlpod *p = (cxlpod *)1;
	struct cxlpod_opts o = {.loopback = "/nonexistent-dir/x:1M:4M"};
	CHECK(cxlpod_open(&p, &o) == ENOENT && p == NULL);
	CHECK(strstr(cxlpod_errmsg(), "nonexistent") != NULL);
	char spec[300];
	snprintf(spec, sizeof(spec), "%s:8M:4M", path); /* coherent > size */
	o.loopback = spec;
	CHECK(cxlpod_open(&p, &o) == EINVAL);
	snprintf(spec, sizeof(spec), "%s:1M:4M:bogus", path);
	CHECK(cxlpod_open(&p, &o) == EINVAL);
	/* device backend with a bogus PCI address: ENODEV, no abort */
	struct cxlpod_opts d = {.pci = "9999:99:99.9"};
	unsetenv("CXLPOD_LOOPBACK");
	CHECK(cxlpod_open(&p, &d) == ENODEV);
	CHECK(cxlpod_open(NULL, &d) == EINVAL);
	CHECK(cxlpod_writeback(NULL, path, 64) == EINVAL);
	CHECK(cxlpod_close(NULL) == 0);
	/* CXLPOD_METHOD: a spec that opens without it is refused with a bogus
	 * one (and opens with a good one) */
	snprintf(spec, sizeof(spec), "%s:1M:4M", path);
	CHECK(cxlpod_open(&p, &o) == 0 && p);
	cxlpod_close(p);
	setenv("CXLPOD_METHOD", "bogus", 1);
	CHECK(cxlpod_open(&p, &o) == EINVAL && p == NULL);
	CHECK(strstr(cxlpod_errmsg(), "CXLPOD_METHOD='bogus'") != NULL);
	setenv("CXLPOD_METHOD", "doorbell", 1);
	CHECK(cxlpod_open(&p, &o) == 0 && p);
	cxlpod_close(p);
	unsetenv("CXLPOD_METHOD");
}

static void test_basic(void)
{
	char spec[300];
	snprintf(spec, sizeof(spec), "%s:1M:4M", path);
	cxlpod *p = open_spec(spec);
	if (!p)
		return;
	struct cxlpod_info in;
	CHECK(cxlpod_get_info(p, &in) == 0);
	CHECK(in.backend == CXLPOD_BACKEND_LOOPBACK);
	CHECK(in.size == 4u << 20 && in.coherent_size == 1u << 20 && in.line_size == 64);
	CHECK(in.method == CXLPOD_METHOD_DOORBELL);
	CHECK(in.caps & CXLPOD_CAP_ATOMICS);
	void *cb, *nb;
	size_t cl, nl;
	CHECK(cxlpod_area(p, CXLPOD_AREA_COHERENT, &cb, &cl) == 0 && cl == 1u << 20);
	CHECK(cxlpod_area(p, CXLPOD_AREA_NONCOHERENT, &nb, &nl) == 0 && nl == 3u << 20);
	CHECK((char *)nb == (char *)cb + cl);
	CHECK(cxlpod_area(p, 7, &cb, &cl) == EINVAL);
	void *a;
	uint64_t off;
	enum cxlpod_area ar;
	CHECK(cxlpod_ptr(p, 4096, &a) == 0 && a == (char *)cb + 4096);
	CHECK(cxlpod_offset(p, a, &off) == 0 && off == 4096);
	CHECK(cxlpod_ptr(p, 4u << 20, &a) == EINVAL);
	CHECK(cxlpod_offset(p, &off, &off) == EINVAL);
	CHECK(cxlpod_area_of(p, nb, &ar) == 0 && ar == CXLPOD_AREA_NONCOHERENT);
	CHECK(cxlpod_area_of(p, cb, &ar) == 0 && ar == CXLPOD_AREA_COHERENT);

	/* coherence ops: range checks, len 0, unaligned ranges round out */
	CHECK(cxlpod_writeback(p, nb, 0) == 0);
	CHECK(cxlpod_writeback(p, (char *)nb + 3, 100) == 0);
	CHECK(cxlpod_invalidate(p, cb, cl + nl) == 0);
	CHECK(cxlpod_flush(p, (char *)nb + nl - 64, 65) == EINVAL);
	CHECK(strstr(cxlpod_errmsg(), "outside") != NULL);
	CHECK(cxlpod_flush(p, path, 64) == EINVAL);
	CHECK(cxlpod_fence(p) == 0);
	struct cxlpod_stats st;
	CHECK(cxlpod_stats(p, &st) == 0 && st.lib_writeback == 2 && st.lib_fence == 1);
	CHECK(st.lib_bytes == 128 + (3u << 20));

	/* methods */
	CHECK(cxlpod_set_method(p, CXLPOD_METHOD_DOORBELL) == 0);
	int e = cxlpod_set_method(p, CXLPOD_METHOD_NATIVE);
	CHECK(e == 0 || e == ENOTSUP);
	CHECK(cxlpod_set_method(p, 42) == EINVAL);
	CHECK(strcmp(cxlpod_method_name(CXLPOD_METHOD_NATIVE), "native") == 0);

	/* atomics: only aligned words in the coherent window */
	uint64_t *w = (uint64_t *)((char *)cb + 128), v, old;
	CHECK(cxlpod_atomic_store(p, w, 5) == 0);
	CHECK(cxlpod_atomic_fetch_add(p, w, 3, &old) == 0 && old == 5);
	CHECK(cxlpod_atomic_load(p, w, &v) == 0 && v == 8);
	CHECK(cxlpod_atomic_cas(p, w, 7, 100, &old) == 0 && old == 8);
	CHECK(cxlpod_atomic_cas(p, w, 8, 100, &old) == 0 && old == 8 && *w == 100);
	CHECK(cxlpod_atomic_exchange(p, w, 1, &old) == 0 && old == 100 && *w == 1);
	CHECK(cxlpod_atomic_fetch_add(p, (uint64_t *)((char *)w + 4), 1, NULL) == EINVAL);
	CHECK(cxlpod_atomic_fetch_add(p, (uint64_t *)nb, 1, NULL) == EINVAL);
	CHECK(strstr(cxlpod_errmsg(), "coherent") != NULL);
	CHECK(cxlpod_atomic_load(p, &v, &v) == EINVAL);

	/* hosts */
	unsigned id, mh;
	uint64_t live;
	enum cxlpod_host_state hs;
	CHECK(cxlpod_host_id(p, &id) == 0 && id == 0);
	CHECK(cxlpod_max_hosts(p, &mh) == 0 && mh == 1);
	CHECK(cxlpod_hosts_live(p, &live) == 0 && live == 1);
	uint64_t words[CXLPOD_HOST_WORDS] = { 0 };
	CHECK(CXLPOD_HOST_WORDS * 64 >= CXLPOD_MAX_HOSTS);
	CHECK(cxlpod_hosts_live_map(p, words, CXLPOD_HOST_WORDS) == 0 && words[0] == 1 &&
	      (CXLPOD_HOST_WORDS == 1 || words[CXLPOD_HOST_WORDS - 1] == 0));
	CHECK(cxlpod_host_state(p, 0, &hs, NULL) == 0 && hs == CXLPOD_HOST_LIVE);
	CHECK(cxlpod_host_state(p, 5, &hs, NULL) == EINVAL);

	/* cross-process atomics through the shared file */
	*w = 0;
	for (int c = 0; c < 4; c++)
		if (fork() == 0) {
			cxlpod *q = open_spec(spec);
			void *qb;
			size_t ql;
			cxlpod_area(q, CXLPOD_AREA_COHERENT, &qb, &ql);
			for (int i = 0; i < 20000; i++)
				cxlpod_atomic_fetch_add(q, (uint64_t *)((char *)qb + 128), 1, NULL);
			cxlpod_close(q);
			_exit(0);
		}
	while (wait(NULL) > 0)
		;
	CHECK(*w == 80000);
	CHECK(cxlpod_close(p) == 0);
	/* registers-only open needs the device: fails cleanly without one */
	struct cxlpod_opts ro = {.pci = "9999:99:99.9", .flags = CXLPOD_OPEN_REGS_ONLY};
	char *lb = getenv("CXLPOD_LOOPBACK");
	CHECK(lb == NULL);
	CHECK(cxlpod_open(&p, &ro) == ENODEV);
}

/* Model backend: the non-coherent area keeps per-process images. */
static void test_model(void)
{
	char spec[300];
	snprintf(spec, sizeof(spec), "%s.model:1M:4M:nc", path);
	unlink(spec);
	snprintf(spec, sizeof(spec), "%s.model", path);
	unlink(spec);
	snprintf(spec, sizeof(spec), "%s.model:1M:4M:nc", path);
	cxlpod *p = open_spec(spec);
	if (!p)
		return;
	struct cxlpod_info in;
	cxlpod_get_info(p, &in);
	CHECK(in.backend == CXLPOD_BACKEND_MODEL);
	void *cb, *nb;
	size_t cl, nl;
	cxlpod_area(p, CXLPOD_AREA_COHERENT, &cb, &cl);
	cxlpod_area(p, CXLPOD_AREA_NONCOHERENT, &nb, &nl);
	volatile uint64_t *flag = (uint64_t *)cb, *flag2 = (uint64_t *)cb + 8;
	volatile uint64_t *d = (uint64_t *)nb;
	*flag = *flag2 = 0;
	d[0] = 0x5a5a; /* in the pool and in our image before the writer opens */
	CHECK(cxlpod_flush(p, (void *)d, 128) == 0);
	CHECK(d[0] == 0x5a5a);
	pid_t pid = fork();
	if (pid == 0) { /* writer */
		cxlpod *q = open_spec(spec);
		void *qb;
		size_t ql;
		cxlpod_area(q, CXLPOD_AREA_NONCOHERENT, &qb, &ql);
		volatile uint64_t *qd = qb;
		qd[0] = 111;                /* line 0: written back */
		qd[8] = 222;                /* line 1: never written back */
		cxlpod_writeback(q, qb, 8);
		cxlpod_fence(q);
		*flag = 1;
		while (*flag2 == 0)
			usleep(100);
		_exit(qd[8] == 222 ? 0 : 1); /* own stores stay visible to itself */
	}
	while (*flag == 0)
		usleep(100);
	CHECK(d[0] == 0x5a5a); /* stale until invalidate (the pool has 111) */
	CHECK(cxlpod_invalidate(p, (void *)d, 128) == 0);
	CHECK(d[0] == 111);
	CHECK(d[8] != 222); /* line 1 never written back */
	*flag2 = 1;
	int status;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* the dead writer's unflushed line is lost */
	CHECK(cxlpod_invalidate(p, (void *)d, 128) == 0 && d[8] != 222);
	/* false sharing: whole-line writeback clobbers the other word */
	d[1] = 7;
	if ((pid = fork()) == 0) {
		cxlpod *q = open_spec(spec);
		void *qb;
		size_t ql;
		cxlpod_area(q, CXLPOD_AREA_NONCOHERENT, &qb, &ql);
		((volatile uint64_t *)qb)[2] = 9;
		cxlpod_writeback(q, qb, 64);
		_exit(0);
	}
	waitpid(pid, &status, 0);
	CHECK(cxlpod_writeback(p, (void *)d, 64) == 0); /* our line overwrites theirs */
	CHECK(cxlpod_invalidate(p, (void *)d, 64) == 0);
	CHECK(d[1] == 7 && d[2] != 9);
	cxlpod_close(p);
}

/*
 * Model backend: a handle opened while another process writes lines back.
 * Its image and its twin must be one copy of the pool, so that a line the
 * new handle never stored to is never dirty in it.  The open used to copy
 * the pool into the image and then, in a second pass, into the twin,
 * without the pool's lock: a line written back between the two passes
 * was dirty in the new handle, and its next writeback put the older line
 * back over the other process's newer one.
 *
 * The writer fills the first word of every line of the non-coherent area
 * with its round number and writes the whole area back, round after round.
 * Each time, the test opens a handle meanwhile, asks the writer to pause
 * (a word in the coherent window; the writer answers with its last round),
 * writes the new handle's whole area back without having stored anything,
 * and reads the pool file: every line must still hold the last round.
 */
static void test_model_open_race(void)
{
	char file[300], spec[320];
	const size_t coh = 1u << 20, nc = 8u << 20;
	const int opens = 60;
	int stale_opens = 0, worst = 0, status, i;

	snprintf(file, sizeof(file), "%s.race", path);
	unlink(file);
	snprintf(spec, sizeof(spec), "%s:1M:9M:nc", file);
	cxlpod *p = open_spec(spec);
	if (!p)
		return;
	void *cb, *nb;
	size_t cl, nl;
	cxlpod_area(p, CXLPOD_AREA_COHERENT, &cb, &cl);
	cxlpod_area(p, CXLPOD_AREA_NONCOHERENT, &nb, &nl);
	CHECK(nl == nc);
	/* coherent words: [0] pause request, [8] the writer's last round while
	 * paused (0: running), [16] stop */
	volatile uint64_t *ctl = cb;
	ctl[0] = ctl[8] = ctl[16] = 0;
	FILE *f = fopen(file, "r");
	CHECK(f != NULL);
	pid_t pid = fork();
	if (pid == 0) {
		cxlpod *q = open_spec(spec);
		void *qb;
		size_t ql;
		if (!q)
			_exit(2);
		cxlpod_area(q, CXLPOD_AREA_NONCOHERENT, &qb, &ql);
		for (uint64_t v = 1; !ctl[16]; v++) {
			for (size_t o = 0; o < ql; o += 64)
				*(volatile uint64_t *)((char *)qb + o) = v;
			if (cxlpod_writeback(q, qb, ql))
				_exit(3);
			if (ctl[0]) {
				__atomic_store_n(&ctl[8], v, __ATOMIC_SEQ_CST);
				while (ctl[0] && !ctl[16])
					usleep(100);
				__atomic_store_n(&ctl[8], 0, __ATOMIC_SEQ_CST);
			}
		}
		cxlpod_close(q);
		_exit(0);
	}
	uint64_t *line = malloc(nc);
	for (i = 0; i < opens && f; i++) {
		cxlpod *q = open_spec(spec); /* while the writer writes back */
		if (!q)
			break;
		void *qb;
		size_t ql;
		cxlpod_area(q, CXLPOD_AREA_NONCOHERENT, &qb, &ql);
		__atomic_store_n(&ctl[0], 1, __ATOMIC_SEQ_CST);
		uint64_t last;
		while (!(last = __atomic_load_n(&ctl[8], __ATOMIC_SEQ_CST)))
			usleep(100);
		CHECK(cxlpod_writeback(q, qb, ql) == 0); /* nothing stored: no-op */
		CHECK(pread(fileno(f), line, nc, coh) == (ssize_t)nc);
		int older = 0;
		for (size_t o = 0; o < nc / 8; o += 8)
			older += line[o] != last;
		if (older)
			stale_opens++;
		worst = older > worst ? older : worst;
		cxlpod_close(q);
		__atomic_store_n(&ctl[0], 0, __ATOMIC_SEQ_CST);
		while (__atomic_load_n(&ctl[8], __ATOMIC_SEQ_CST))
			usleep(100);
	}
	ctl[16] = 1;
	waitpid(pid, &status, 0);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	printf("model open during writebacks: %d opens, %d of them wrote older lines back "
	       "(at most %d lines)\n", i, stale_opens, worst);
	CHECK(i == opens);
	CHECK(stale_opens == 0);
	free(line);
	if (f)
		fclose(f);
	cxlpod_close(p);
	unlink(file);
}

/* The doorbell lock's file of register file @regs (CXLPOD_DB_LOCK_DIR is
 * this test's directory, set in main()): removed after each test. */
static void unlink_db_lock(const char *regs)
{
	struct stat sb;
	char name[600];
	if (stat(regs, &sb) == 0) {
		snprintf(name, sizeof(name), "%s/cxlpod-db-%llx-%llx", getenv("CXLPOD_DB_LOCK_DIR"),
			 (unsigned long long)sb.st_dev, (unsigned long long)sb.st_ino);
		CHECK(unlink(name) == 0);
	}
}

/*
 * The doorbell's registers are one set per device: two processes that ring
 * at once must not mix their DB_OFFSET / DB_LEN.  CXLPOD_TEST_REGS gives
 * the loopback handles a shared fake register block; a doorbell reports
 * EIO (status 0x100) when the registers at DB_OP are not the ones it wrote.
 * Returns how many of the children's doorbells saw mixed registers.
 */
static long doorbell_race(int nproc, int iters, double max_s)
{
	char regs[300], spec[300];
	long mixed = 0;
	int fds[8][2];

	snprintf(regs, sizeof(regs), "%s.regs", path);
	snprintf(spec, sizeof(spec), "%s:1M:4M", path);
	setenv("CXLPOD_TEST_REGS", regs, 1);
	for (int c = 0; c < nproc; c++) {
		CHECK(pipe(fds[c]) == 0);
		if (fork() == 0) {
			struct cxlpod_opts o = {.loopback = spec};
			cxlpod *q = NULL;
			long bad = 0;
			if (cxlpod_open(&q, &o))
				_exit(2);
			uint8_t *b;
			size_t l;
			cxlpod_area(q, CXLPOD_AREA_NONCOHERENT, (void **)&b, &l);
			struct timespec t0, t;
			clock_gettime(CLOCK_MONOTONIC, &t0);
			for (int i = 0; i < iters; i++) {
				/* each process its own offset and length */
				int e = cxlpod_writeback(q, b + c * 65536, 64 * (c + 1));
				if (e == EIO)
					bad++;
				else if (e) {
					/* the lock itself failed: not a pass */
					fprintf(stderr, "doorbell: %s\n", cxlpod_errmsg());
					_exit(4);
				}
				clock_gettime(CLOCK_MONOTONIC, &t);
				if (t.tv_sec - t0.tv_sec + (t.tv_nsec - t0.tv_nsec) / 1e9 > max_s)
					break;
			}
			cxlpod_close(q);
			if (write(fds[c][1], &bad, sizeof(bad)) != sizeof(bad))
				_exit(3);
			_exit(0);
		}
		close(fds[c][1]);
	}
	for (int c = 0; c < nproc; c++) {
		long bad = 0;
		int status;
		CHECK(read(fds[c][0], &bad, sizeof(bad)) == sizeof(bad));
		close(fds[c][0]);
		mixed += bad;
		wait(&status);
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	unsetenv("CXLPOD_TEST_REGS");
	unlink_db_lock(regs);
	unlink(regs);
	return mixed;
}

static void test_doorbell_procs(void)
{
	/* the control: without the lock the registers do get mixed */
	setenv("CXLPOD_TEST_NO_DB_LOCK", "1", 1);
	long unlocked = doorbell_race(2, 200000, 5.0);
	unsetenv("CXLPOD_TEST_NO_DB_LOCK");
	long locked = doorbell_race(2, 20000, 20.0);
	printf("doorbell across processes: %ld mixed without the lock, %ld with it\n",
	       unlocked, locked);
	CHECK(unlocked > 0);
	CHECK(locked == 0);
}

/*
 * A process that dies holding the doorbell lock (between its register
 * writes) must not block the others: the next caller takes the lock over.
 * The lock is also held across a call that a second thread of the same
 * process makes at the same time (threads exclude each other too).
 */
static void *ring_many(void *arg)
{
	cxlpod *q = arg;
	uint8_t *b;
	size_t l;
	long bad = 0;
	cxlpod_area(q, CXLPOD_AREA_NONCOHERENT, (void **)&b, &l);
	for (int i = 0; i < 20000; i++)
		if (cxlpod_writeback(q, b + ((uintptr_t)pthread_self() % 7) * 4096, 128) == EIO)
			bad++;
	return (void *)bad;
}

static void test_doorbell_owner_dies(void)
{
	char regs[300], spec[300];
	snprintf(regs, sizeof(regs), "%s.regs", path);
	snprintf(spec, sizeof(spec), "%s:1M:4M", path);
	setenv("CXLPOD_TEST_REGS", regs, 1);
	struct cxlpod_opts o = {.loopback = spec};
	pid_t pid = fork();
	if (pid == 0) {
		cxlpod *q = NULL;
		uint8_t *b;
		size_t l;
		if (cxlpod_open(&q, &o))
			_exit(2);
		cxlpod_area(q, CXLPOD_AREA_NONCOHERENT, (void **)&b, &l);
		setenv("CXLPOD_TEST_DB_DIE", "1", 1);
		cxlpod_writeback(q, b, 64); /* exits holding the lock */
		_exit(3);
	}
	int status;
	CHECK(waitpid(pid, &status, 0) == pid);
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	cxlpod *p = NULL;
	CHECK(cxlpod_open(&p, &o) == 0);
	uint8_t *b;
	size_t l;
	CHECK(cxlpod_area(p, CXLPOD_AREA_NONCOHERENT, (void **)&b, &l) == 0);
	/* a lock left held would hang here: the alarm turns that into a failure */
	alarm(20);
	CHECK(cxlpod_writeback(p, b, 64) == 0);
	pthread_t t[2];
	void *bad[2];
	for (int i = 0; i < 2; i++)
		CHECK(pthread_create(&t[i], NULL, ring_many, p) == 0);
	for (int i = 0; i < 2; i++)
		CHECK(pthread_join(t[i], &bad[i]) == 0);
	alarm(0);
	printf("doorbell lock: taken over from a dead holder; two threads mixed %ld + %ld times\n",
	       (long)bad[0], (long)bad[1]);
	CHECK(bad[0] == 0 && bad[1] == 0);
	cxlpod_close(p);
	unsetenv("CXLPOD_TEST_REGS");
	unlink_db_lock(regs);
	unlink(regs);
}

int main(int argc, char **argv)
{
	snprintf(path, sizeof(path), "%s/cxlpod-unit-%d", argc > 1 ? argv[1] : "/tmp", getpid());
	setenv("CXLPOD_DB_LOCK_DIR", argc > 1 ? argv[1] : "/tmp", 1);
	unsetenv("CXLPOD_HOST_ID");
	unsetenv("CXLPOD_NHOSTS");
	unsetenv("CXLPOD_METHOD");
	test_basic();
	test_errors();
	test_model();
	test_model_open_race();
	test_doorbell_procs();
	test_doorbell_owner_dies();
	unlink(path);
	char m[300];
	snprintf(m, sizeof(m), "%s.model", path);
	unlink(m);
	if (failures) {
		fprintf(stderr, "test_libcxlpod: %d failures\n", failures);
		return 1;
	}
	printf("test_libcxlpod: all checks passed\n");
	return 0;
}
