/*
 * libcxlpod -- see libcxlpod.h.
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include "libcxlpod.h"
#include "cxl-shm-regs.h" /* the device's BAR5 register map */

_Static_assert(CXLPOD_CAP_NATIVE_OPS == R_CXLSHM_CAPS_NATIVE_MASK &&
		       CXLPOD_CAP_ATOMICS == R_CXLSHM_CAPS_ATOMICS_MASK &&
		       CXLPOD_CAP_DIRECT == R_CXLSHM_CAPS_DIRECT_MASK,
	       "cxlpod_info.caps is the CAPS register");

#pragma GCC diagnostic ignored "-Wformat-truncation"

#include <cpuid.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define BAR5_SIZE CXLSHM_REGS_SIZE

/* the doorbell's lock, shared by the processes of the system (doorbell()) */
#define DB_SHARED_MAGIC 0x43584442u /* "CXDB" */
#define DB_SHARED_VERSION 1u

struct db_shared {
	uint32_t magic;     /* DB_SHARED_MAGIC once mu is initialised */
	uint32_t version;
	pthread_mutex_t mu;
};

struct cxlpod;
static int db_shared_open(struct cxlpod *p);

struct cxlpod {
	enum cxlpod_backend backend;
	struct cxlpod_info info;
	uint8_t *base;      /* pool mapping */
	size_t map_len;
	volatile uint8_t *regs; /* BAR5, NULL on loopback */
	int dax_fd, bar_fd;
	/* model backend: base's non-coherent part is this process's private
	 * image; pool_nc is the shared pool, twin the image as last synced */
	uint8_t *pool_nc, *twin;
	void *pool_map;
	size_t nc_len;
	unsigned nhosts_env;
	/* the doorbell lock of every thread and process of the system: a
	 * robust process-shared mutex in a /dev/shm file named after
	 * lock_path (resource5), see db_shared_open() */
	char lock_path[256];
	struct db_shared *db;
	int test_regs;      /* loopback with CXLPOD_TEST_REGS: a fake BAR5 */
	int test_no_lock;   /* CXLPOD_TEST_NO_DB_LOCK: the control run */
	struct cxlpod_stats st;
};

static __thread char errbuf[256] = "no error";

static int fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(errbuf, sizeof(errbuf), fmt, ap);
	va_end(ap);
	return err;
}

const char *cxlpod_errmsg(void) { return errbuf; }

/* ---- register access ---------------------------------------------------- */
static inline uint32_t rd32(cxlpod *p, unsigned off)
{
	return *(volatile uint32_t *)(p->regs + off);
}
static inline uint64_t rd64(cxlpod *p, unsigned off)
{
	/* two 32-bit halves: always accepted by the register block */
	uint64_t lo = *(volatile uint32_t *)(p->regs + off);
	uint64_t hi = *(volatile uint32_t *)(p->regs + off + 4);
	return lo | (hi << 32);
}
static inline void wr32(cxlpod *p, unsigned off, uint32_t v)
{
	*(volatile uint32_t *)(p->regs + off) = v;
}
static inline void wr64(cxlpod *p, unsigned off, uint64_t v)
{
	*(volatile uint64_t *)(p->regs + off) = v;
}

/* ---- helpers ------------------------------------------------------------- */
static int read_sysfs(const char *path, char *buf, size_t n)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t r = read(fd, buf, n - 1);
	close(fd);
	if (r < 0)
		return -1;
	buf[r] = 0;
	while (r > 0 && (buf[r - 1] == '\n' || buf[r - 1] == ' '))
		buf[--r] = 0;
	return 0;
}

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case 'k': case 'K': v <<= 10; end++; break;
	case 'm': case 'M': v <<= 20; end++; break;
	case 'g': case 'G': v <<= 30; end++; break;
	default: break;
	}
	if (*end && *end != ':')
		return -1;
	*out = v;
	return 0;
}

static void cpu_features(struct cxlpod_info *in)
{
	unsigned a, b, c, d;
	in->cpu_clflushopt = in->cpu_clwb = 0;
	if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
		in->cpu_clflushopt = !!(b & (1u << 23));
		in->cpu_clwb = !!(b & (1u << 24));
	}
}

static unsigned env_uint(const char *name, unsigned dflt)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return dflt;
	char *end;
	unsigned long v = strtoul(s, &end, 0);
	return *end ? dflt : (unsigned)v;
}

/* ---- open: loopback ------------------------------------------------------- */
/* Test only: CXLPOD_TEST_REGS=FILE gives a loopback handle a fake register
 * block, a 4 KiB file every process maps shared, so that the doorbell's
 * serialisation across processes can be tested without a device (its
 * DB_OFFSET and DB_LEN are shared like the real ones; see doorbell()). */
static int open_test_regs(cxlpod *p)
{
	const char *path = getenv("CXLPOD_TEST_REGS");
	if (!path || !*path)
		return 0;
	if (strlen(path) >= sizeof(p->lock_path))
		return fail(EINVAL, "CXLPOD_TEST_REGS: path too long");
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return fail(errno, "CXLPOD_TEST_REGS %s: %s", path, strerror(errno));
	if (ftruncate(fd, BAR5_SIZE) < 0) {
		int e = errno;
		close(fd);
		return fail(e, "CXLPOD_TEST_REGS %s: %s", path, strerror(e));
	}
	void *m = mmap(NULL, BAR5_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		int e = errno;
		close(fd);
		return fail(e, "CXLPOD_TEST_REGS %s: mmap: %s", path, strerror(e));
	}
	p->regs = m;
	p->bar_fd = fd;
	p->test_regs = 1;
	snprintf(p->lock_path, sizeof(p->lock_path), "%s", path);
	const char *nl = getenv("CXLPOD_TEST_NO_DB_LOCK");
	p->test_no_lock = nl && *nl && strcmp(nl, "0");
	return db_shared_open(p);
}

static int open_loopback(cxlpod *p, const char *spec)
{
	char path[256];
	uint64_t coh = 16ull << 20, size = 64ull << 20;
	int model = 0;
	const char *colon = strchr(spec, ':');
	size_t plen = colon ? (size_t)(colon - spec) : strlen(spec);
	if (plen == 0 || plen >= sizeof(path))
		return fail(EINVAL, "loopback: bad spec '%s' (path[:coherent[:size]])", spec);
	memcpy(path, spec, plen);
	path[plen] = 0;
	if (colon) {
		if (parse_size(colon + 1, &coh))
			return fail(EINVAL, "loopback: bad coherent size in '%s'", spec);
		const char *c2 = strchr(colon + 1, ':');
		if (c2 && parse_size(c2 + 1, &size))
			return fail(EINVAL, "loopback: bad size in '%s'", spec);
		const char *c3 = c2 ? strchr(c2 + 1, ':') : NULL;
		if (c3 && !strcmp(c3 + 1, "nc"))
			model = 1;
		else if (c3 && strcmp(c3 + 1, "coherent"))
			return fail(EINVAL, "loopback: 4th field of '%s' must be nc or coherent", spec);
	}
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0)
		return fail(errno, "loopback: open %s: %s", path, strerror(errno));
	struct stat sb;
	if (fstat(fd, &sb) < 0) {
		int e = errno;
		close(fd);
		return fail(e, "loopback: stat %s: %s", path, strerror(e));
	}
	int size_given = colon && strchr(colon + 1, ':');
	if (sb.st_size > 0 && !size_given) {
		size = sb.st_size; /* existing file: use it whole */
		if (!colon && coh > size / 4)
			coh = (size / 4) & ~(uint64_t)(CXLPOD_LINE - 1);
	}
	if ((uint64_t)sb.st_size < size && ftruncate(fd, size) < 0) {
		int e = errno;
		close(fd);
		return fail(e, "loopback: resize %s: %s", path, strerror(e));
	}
	if (coh > size || size % CXLPOD_LINE || coh % CXLPOD_LINE) {
		close(fd);
		return fail(EINVAL, "loopback: coherent size %llu > size %llu or unaligned",
			    (unsigned long long)coh, (unsigned long long)size);
	}
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		int e = errno;
		close(fd);
		return fail(e, "loopback: mmap %s: %s", path, strerror(e));
	}
	if (model && size > coh) {
		/* keep the shared mapping as the pool; give the process a private
		 * image of the non-coherent part at the same place in base */
		void *b = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		p->nc_len = size - coh;
		p->twin = malloc(p->nc_len);
		if (b == MAP_FAILED || !p->twin ||
		    mmap(b, coh ? coh : 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
			MAP_FAILED) {
			int e = errno ? errno : ENOMEM;
			if (b != MAP_FAILED)
				munmap(b, size);
			munmap(m, size);
			close(fd);
			return fail(e, "loopback model: mmap: %s", strerror(e));
		}
		p->pool_nc = (uint8_t *)m + coh;
		/*
		 * One copy of the pool, taken under its lock (shared here: a
		 * writeback, model_op(), takes it exclusive), is both the image
		 * and the twin.  Two copies of the pool without the lock let a
		 * line another process wrote back between them count as dirty,
		 * and the next writeback put the older line back over it.
		 */
		int r;
		while ((r = flock(fd, LOCK_SH)) < 0 && errno == EINTR)
			;
		if (r < 0) {
			int e = errno;
			munmap(b, size);
			munmap(m, size);
			free(p->twin);
			p->twin = NULL;
			close(fd);
			return fail(e, "loopback model: flock: %s", strerror(e));
		}
		memcpy((uint8_t *)b + coh, p->pool_nc, p->nc_len);
		flock(fd, LOCK_UN);
		memcpy(p->twin, (uint8_t *)b + coh, p->nc_len);
		p->map_len = size;
		p->base = b;
		p->pool_map = m;
	} else {
		p->base = m;
		p->map_len = size;
	}
	p->backend = model ? CXLPOD_BACKEND_MODEL : CXLPOD_BACKEND_LOOPBACK;
	p->dax_fd = fd;
	p->info.backend = p->backend;
	p->info.version = 0;
	p->nhosts_env = env_uint("CXLPOD_NHOSTS", 1);
	if (p->nhosts_env < 1 || p->nhosts_env > CXLPOD_MAX_HOSTS)
		p->nhosts_env = 1;
	p->info.host_id = env_uint("CXLPOD_HOST_ID", 0);
	p->info.max_hosts = p->nhosts_env;
	p->info.size = size;
	p->info.coherent_size = coh;
	p->info.line_size = CXLPOD_LINE;
	p->info.mode = CXLPOD_MODE_DIRECT;
	p->info.latency_ns = 0;
	p->info.caps = CXLPOD_CAP_ATOMICS;
	snprintf(p->info.dax, sizeof(p->info.dax), "%s", path);
	snprintf(p->info.pci, sizeof(p->info.pci), "loopback");
	return open_test_regs(p);
}

/* ---- open: device ------------------------------------------------------------ */
static int try_pci(cxlpod *p, const char *bdf)
{
	char path[512], buf[64];
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/class", bdf);
	if (read_sysfs(path, buf, sizeof(buf)))
		return fail(ENODEV, "%s: no such PCI device", bdf);
	if (strtoul(buf, NULL, 0) != 0x050210)
		return fail(ENODEV, "%s: class %s is not a CXL memory device", bdf, buf);
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/resource5", bdf);
	int fd = open(path, O_RDWR | O_SYNC | O_CLOEXEC);
	if (fd < 0)
		return fail(errno == ENOENT ? ENODEV : errno, "%s: open resource5: %s", bdf,
			    strerror(errno));
	struct stat sb;
	if (fstat(fd, &sb) == 0 && sb.st_size < BAR5_SIZE) {
		/* a cxl-shm of register block version 1 had 4 KiB: say which */
		volatile uint32_t *r = sb.st_size >= 4096 ?
			mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
		uint32_t magic = 0, version = 0;
		if (r != MAP_FAILED) {
			magic = r[A_CXLSHM_MAGIC / 4];
			version = r[A_CXLSHM_VERSION / 4];
			munmap((void *)r, 4096);
		}
		close(fd);
		if (magic == CXLSHM_MAGIC_VALUE)
			return fail(ENOTSUP, "%s: cxl-shm register block version %u, this library "
				    "knows %u only (use the guest tools built with that QEMU)",
				    bdf, version, CXLSHM_VERSION_VALUE);
		return fail(ENODEV, "%s: BAR5 is %lld bytes, want %d", bdf,
			    (long long)sb.st_size, BAR5_SIZE);
	}
	void *m = mmap(NULL, BAR5_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		int e = errno;
		close(fd);
		return fail(e, "%s: mmap resource5: %s", bdf, strerror(e));
	}
	p->regs = m;
	uint32_t magic = rd32(p, A_CXLSHM_MAGIC);
	if (magic != CXLSHM_MAGIC_VALUE) {
		munmap(m, BAR5_SIZE);
		p->regs = NULL;
		close(fd);
		return fail(ENODEV, "%s: BAR5 magic 0x%08x, not a cxl-shm device", bdf, magic);
	}
	p->bar_fd = fd;
	snprintf(p->lock_path, sizeof(p->lock_path), "%s", path);
	snprintf(p->info.pci, sizeof(p->info.pci), "%s", bdf);
	return db_shared_open(p);
}

static int find_dax(cxlpod *p, char *out, size_t n)
{
	DIR *d = opendir("/sys/bus/dax/devices");
	if (!d)
		return fail(ENODEV, "no /sys/bus/dax/devices (dax driver not loaded?)");
	struct dirent *e;
	int found = 0;
	while ((e = readdir(d))) {
		char path[512 + 256], buf[64];
		if (strncmp(e->d_name, "dax", 3))
			continue;
		snprintf(path, sizeof(path), "/sys/bus/dax/devices/%s/size", e->d_name);
		if (read_sysfs(path, buf, sizeof(buf)))
			continue;
		if (strtoull(buf, NULL, 0) != p->info.size)
			continue;
		snprintf(out, n, "/dev/%s", e->d_name);
		if (access(out, F_OK) == 0) {
			found = 1;
			break;
		}
	}
	closedir(d);
	if (!found)
		return fail(ENODEV, "no /dev/daxX.Y of size %llu (region not created, or "
				    "dax device not bound to device_dax?)",
			    (unsigned long long)p->info.size);
	return 0;
}

static int open_device(cxlpod *p, const char *pci, const char *dax, unsigned flags)
{
	int err = ENODEV;
	if (pci && *pci) {
		err = try_pci(p, pci);
	} else {
		DIR *d = opendir("/sys/bus/pci/devices");
		if (!d)
			return fail(ENODEV, "cannot list /sys/bus/pci/devices: %s", strerror(errno));
		struct dirent *e;
		fail(ENODEV, "no cxl-shm device (PCI class 0x050210 with BAR5 magic CXLP)");
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.')
				continue;
			char path[512], buf[64];
			snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/class", e->d_name);
			if (read_sysfs(path, buf, sizeof(buf)) || strtoul(buf, NULL, 0) != 0x050210)
				continue;
			err = try_pci(p, e->d_name);
			if (!err)
				break;
		}
		closedir(d);
	}
	if (err)
		return err;
	p->backend = CXLPOD_BACKEND_DEVICE;
	struct cxlpod_info *in = &p->info;
	in->backend = CXLPOD_BACKEND_DEVICE;
	in->version = rd32(p, A_CXLSHM_VERSION);
	in->host_id = rd32(p, A_CXLSHM_HOST_ID);
	in->max_hosts = rd32(p, A_CXLSHM_MAX_HOSTS);
	in->size = rd64(p, A_CXLSHM_SIZE);
	in->coherent_size = rd64(p, A_CXLSHM_COHERENT_SIZE);
	in->line_size = rd32(p, A_CXLSHM_LINE_SIZE);
	in->mode = rd32(p, A_CXLSHM_MODE);
	in->latency_ns = rd32(p, A_CXLSHM_LATENCY_NS);
	in->caps = rd32(p, A_CXLSHM_CAPS);
	in->wb_deferred = rd32(p, A_CXLSHM_WB_MODE) == 0;
	in->evict_rate = rd32(p, A_CXLSHM_EVICT_RATE);
	if (in->version != CXLSHM_VERSION_VALUE)
		return fail(ENOTSUP, "%s: register block version %u, this library knows %u only "
			    "(use the guest tools built with that QEMU)", in->pci, in->version,
			    CXLSHM_VERSION_VALUE);
	if (in->line_size != CXLPOD_LINE || in->size == 0 || in->coherent_size > in->size)
		return fail(EIO, "%s: bad geometry (size %llu coherent %llu line %u)", in->pci,
			    (unsigned long long)in->size, (unsigned long long)in->coherent_size,
			    in->line_size);
	if (flags & CXLPOD_OPEN_REGS_ONLY)
		return 0;
	char dpath[256];
	if (dax && *dax)
		snprintf(dpath, sizeof(dpath), "%s", dax);
	else if ((err = find_dax(p, dpath, sizeof(dpath))))
		return err;
	int fd = open(dpath, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return fail(errno, "open %s: %s", dpath, strerror(errno));
	/* device dax: MAP_SHARED only, 2 MiB aligned length (sizes are 256 MiB
	 * multiples, so the whole device is always a valid length) */
	size_t len = (in->size + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		int e = errno;
		close(fd);
		return fail(e, "mmap %s (%zu bytes): %s", dpath, len, strerror(e));
	}
	p->base = m;
	p->map_len = len;
	p->dax_fd = fd;
	snprintf(in->dax, sizeof(in->dax), "%s", dpath);
	return 0;
}

/* ---- open: raw dax (no cxl-shm registers) ------------------------------------ */
static int first_dax(char *out, size_t n)
{
	DIR *d = opendir("/sys/bus/dax/devices");
	if (!d)
		return fail(ENODEV, "raw dax: no /sys/bus/dax/devices (dax driver not loaded?)");
	struct dirent *e;
	char best[256] = "";
	while ((e = readdir(d))) {
		char dev[300];
		if (strncmp(e->d_name, "dax", 3) || strlen(e->d_name) >= sizeof(best))
			continue;
		snprintf(dev, sizeof(dev), "/dev/%s", e->d_name);
		if (access(dev, F_OK))
			continue;
		if (!*best || strcmp(e->d_name, best) < 0) /* lowest name: dax0.0 first */
			snprintf(best, sizeof(best), "%s", e->d_name);
	}
	closedir(d);
	if (!*best)
		return fail(ENODEV, "raw dax: no /dev/daxN.M found");
	snprintf(out, n, "/dev/%s", best);
	return 0;
}

static int open_raw_dax(cxlpod *p, const char *dax)
{
	char dpath[256], spath[512], buf[64];
	int err;
	if (dax && *dax)
		snprintf(dpath, sizeof(dpath), "%s", dax);
	else if ((err = first_dax(dpath, sizeof(dpath))))
		return err;
	const char *name = strrchr(dpath, '/');
	name = name ? name + 1 : dpath;
	uint64_t size;
	struct stat sb;
	int bar = !strncmp(dpath, "/sys/bus/pci/devices/", 21) && !strncmp(name, "resource", 8);
	if (bar) {
		/* a PCI memory BAR (e.g. ivshmem-plain's BAR2): sysfs gives its size */
		if (stat(dpath, &sb) < 0)
			return fail(errno, "raw: %s: %s", dpath, strerror(errno));
		size = sb.st_size;
	} else {
		snprintf(spath, sizeof(spath), "/sys/bus/dax/devices/%s/size", name);
		if (read_sysfs(spath, buf, sizeof(buf)))
			return fail(ENODEV, "raw dax: cannot read %s (not a dax device?)", spath);
		size = strtoull(buf, NULL, 0);
	}
	if (size == 0 || size % CXLPOD_LINE)
		return fail(EIO, "raw dax: %s has size %llu", dpath, (unsigned long long)size);
	int fd = open(dpath, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return fail(errno, "open %s: %s", dpath, strerror(errno));
	/* a dax device maps in 2 MiB units; a BAR file exactly */
	size_t len = bar ? size
		   : (size + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (m == MAP_FAILED) {
		int e = errno;
		close(fd);
		return fail(e, "mmap %s (%zu bytes): %s", dpath, len, strerror(e));
	}
	p->backend = CXLPOD_BACKEND_RAW_DAX;
	p->base = m;
	p->map_len = len;
	p->dax_fd = fd;
	p->nhosts_env = env_uint("CXLPOD_NHOSTS", 1);
	if (p->nhosts_env < 1 || p->nhosts_env > CXLPOD_MAX_HOSTS)
		p->nhosts_env = 1;
	struct cxlpod_info *in = &p->info;
	in->backend = CXLPOD_BACKEND_RAW_DAX;
	in->version = 0;
	in->host_id = env_uint("CXLPOD_HOST_ID", 0);
	in->max_hosts = p->nhosts_env;
	in->size = size;
	in->coherent_size = size; /* stock devices: one host, fully coherent */
	in->line_size = CXLPOD_LINE;
	in->mode = CXLPOD_MODE_DIRECT;
	in->latency_ns = 0;
	in->caps = 0;
	snprintf(in->pci, sizeof(in->pci), "none");
	snprintf(in->dax, sizeof(in->dax), "%s", dpath);
	return 0;
}

int cxlpod_set_method(cxlpod *p, enum cxlpod_method m)
{
	if (!p)
		return fail(EINVAL, "NULL handle");
	switch (m) {
	case CXLPOD_METHOD_DEFAULT:
	case CXLPOD_METHOD_DOORBELL:
		p->info.method = CXLPOD_METHOD_DOORBELL;
		return 0;
	case CXLPOD_METHOD_NATIVE:
		if (!p->info.cpu_clflushopt)
			return fail(ENOTSUP, "native method: CPU has no clflushopt");
		if (p->backend == CXLPOD_BACKEND_DEVICE && !(p->info.caps & CXLPOD_CAP_NATIVE_OPS))
			return fail(ENOTSUP, "native method: device CAPS bit0 clear, guest "
					     "clflushopt/clwb do not reach the device (use doorbell)");
		p->info.method = CXLPOD_METHOD_NATIVE;
		return 0;
	}
	return fail(EINVAL, "unknown method %d", (int)m);
}

const char *cxlpod_method_name(enum cxlpod_method m)
{
	switch (m) {
	case CXLPOD_METHOD_DOORBELL: return "doorbell";
	case CXLPOD_METHOD_NATIVE: return "native";
	default: return "default";
	}
}

const char *cxlpod_backend_name(enum cxlpod_backend b)
{
	switch (b) {
	case CXLPOD_BACKEND_DEVICE: return "device";
	case CXLPOD_BACKEND_LOOPBACK: return "loopback";
	case CXLPOD_BACKEND_MODEL: return "model";
	case CXLPOD_BACKEND_RAW_DAX: return "raw-dax";
	}
	return "unknown";
}

int cxlpod_open(cxlpod **out, const struct cxlpod_opts *opts)
{
	if (!out)
		return fail(EINVAL, "cxlpod_open: out is NULL");
	*out = NULL;
	struct cxlpod_opts o = {0};
	if (opts)
		o = *opts;
	if (!o.loopback)
		o.loopback = getenv("CXLPOD_LOOPBACK");
	if (!o.pci)
		o.pci = getenv("CXLPOD_PCI");
	if (!o.dax)
		o.dax = getenv("CXLPOD_DAX");
	if (o.method == CXLPOD_METHOD_DEFAULT) {
		const char *m = getenv("CXLPOD_METHOD");
		if (m && !strcmp(m, "native"))
			o.method = CXLPOD_METHOD_NATIVE;
		else if (m && *m && strcmp(m, "doorbell"))
			return fail(EINVAL, "CXLPOD_METHOD='%s': want doorbell or native", m);
	}
	cxlpod *p = calloc(1, sizeof(*p));
	if (!p)
		return fail(ENOMEM, "out of memory");
	p->dax_fd = p->bar_fd = -1;
	cpu_features(&p->info);
	const char *raw = getenv("CXLPOD_RAW_DAX");
	if (raw && *raw && strcmp(raw, "0"))
		o.flags |= CXLPOD_OPEN_RAW_DAX;
	int err = (o.loopback && *o.loopback) ? open_loopback(p, o.loopback)
					      : open_device(p, o.pci, o.dax, o.flags);
	/* no cxl-shm device at all (and none asked for by address): a plain dax
	 * device, if the caller accepts one */
	if (err == ENODEV && !(o.loopback && *o.loopback) && !p->regs &&
	    (o.flags & CXLPOD_OPEN_RAW_DAX) && !(o.pci && *o.pci) &&
	    !(o.flags & CXLPOD_OPEN_REGS_ONLY)) {
		char save[sizeof(errbuf)];
		memcpy(save, errbuf, sizeof(save));
		err = open_raw_dax(p, o.dax);
		if (err) {
			char why[sizeof(errbuf)];
			memcpy(why, errbuf, sizeof(why));
			fail(err, "%s; %s", save, why);
		}
	}
	if (!err) {
		p->info.native_usable =
		    p->info.cpu_clflushopt &&
		    (p->backend != CXLPOD_BACKEND_DEVICE || (p->info.caps & CXLPOD_CAP_NATIVE_OPS));
		err = cxlpod_set_method(p, o.method);
	}
	if (err) {
		char save[sizeof(errbuf)];
		memcpy(save, errbuf, sizeof(save));
		cxlpod_close(p);
		memcpy(errbuf, save, sizeof(save));
		return err;
	}
	*out = p;
	return 0;
}

int cxlpod_close(cxlpod *p)
{
	if (!p)
		return 0;
	if (p->base)
		munmap(p->base, p->map_len);
	if (p->pool_map)
		munmap(p->pool_map, p->map_len);
	free(p->twin);
	if (p->regs)
		munmap((void *)p->regs, BAR5_SIZE);
	if (p->dax_fd >= 0)
		close(p->dax_fd);
	if (p->bar_fd >= 0)
		close(p->bar_fd);
	if (p->db)
		munmap(p->db, sizeof(*p->db));
	free(p);
	return 0;
}

int cxlpod_get_info(cxlpod *p, struct cxlpod_info *info)
{
	if (!p || !info)
		return fail(EINVAL, "NULL argument");
	*info = p->info;
	return 0;
}

int cxlpod_area(cxlpod *p, enum cxlpod_area area, void **base, size_t *len)
{
	if (!p || !base || !len)
		return fail(EINVAL, "NULL argument");
	if (!p->base)
		return fail(ENODEV, "pool not mapped (opened with CXLPOD_OPEN_REGS_ONLY)");
	if (area == CXLPOD_AREA_COHERENT) {
		*base = p->base;
		*len = p->info.coherent_size;
	} else if (area == CXLPOD_AREA_NONCOHERENT) {
		*base = p->base + p->info.coherent_size;
		*len = p->info.size - p->info.coherent_size;
	} else {
		return fail(EINVAL, "unknown area %d", (int)area);
	}
	return 0;
}

int cxlpod_ptr(cxlpod *p, uint64_t offset, void **addr)
{
	if (!p || !addr)
		return fail(EINVAL, "NULL argument");
	if (offset >= p->info.size || !p->base)
		return fail(EINVAL, "offset 0x%llx outside pool of %llu bytes",
			    (unsigned long long)offset, (unsigned long long)p->info.size);
	*addr = p->base + offset;
	return 0;
}

int cxlpod_offset(cxlpod *p, const void *addr, uint64_t *offset)
{
	if (!p || !offset)
		return fail(EINVAL, "NULL argument");
	const uint8_t *a = addr;
	if (!p->base || a < p->base || a >= p->base + p->info.size)
		return fail(EINVAL, "address %p outside the pool mapping", addr);
	*offset = (uint64_t)(a - p->base);
	return 0;
}

int cxlpod_area_of(cxlpod *p, const void *addr, enum cxlpod_area *area)
{
	uint64_t off = 0;
	int err = cxlpod_offset(p, addr, &off);
	if (err)
		return err;
	if (area)
		*area = off < p->info.coherent_size ? CXLPOD_AREA_COHERENT : CXLPOD_AREA_NONCOHERENT;
	return 0;
}

/* ---- coherence operations --------------------------------------------------- */
enum { OP_WB = CXLSHM_OP_WRITEBACK, OP_INV = CXLSHM_OP_INVALIDATE, OP_FLUSH = CXLSHM_OP_FLUSH };

/*
 * The register block is one per device, shared by every thread and process
 * of the guest, so a call holds a lock from its DB_OFFSET write to its
 * DB_STATUS read.  The lock is a robust, process-shared mutex in a small
 * file on /dev/shm named after the register file's device and inode: taken
 * and released in user space (no system call unless contended), where the
 * open file description lock it replaces cost two fcntl() calls, about 8 us
 * of a 9 us one-line call under TCG.  Robust: a process that dies holding
 * it hands it to the next caller (EOWNERDEAD), as the kernel released the
 * OFD lock of a dead process.  Every process must see the same /dev/shm
 * (CXLPOD_DB_LOCK_DIR names another directory, the same for all of them).
 */
static int db_shared_open(cxlpod *p)
{
	const char *dir = getenv("CXLPOD_DB_LOCK_DIR");
	char name[512];
	struct stat rs, sb;
	int err = 0;

	if (!dir || !*dir)
		dir = "/dev/shm";
	if (stat(p->lock_path, &rs) < 0)
		return fail(errno, "doorbell lock: %s: %s", p->lock_path, strerror(errno));
	snprintf(name, sizeof(name), "%s/cxlpod-db-%llx-%llx", dir,
		 (unsigned long long)rs.st_dev, (unsigned long long)rs.st_ino);
	int fd = open(name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return fail(errno, "doorbell lock: %s: %s (the doorbell's lock lives there;"
			    " CXLPOD_DB_LOCK_DIR names another directory)", name, strerror(errno));
	/* the creator initialises the mutex under flock, the others wait */
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			err = fail(errno, "doorbell lock: flock %s: %s", name, strerror(errno));
			goto out;
		}
	}
	if (fstat(fd, &sb) < 0) {
		err = fail(errno, "doorbell lock: %s: %s", name, strerror(errno));
		goto out;
	}
	if (sb.st_uid != geteuid() || (sb.st_mode & 077)) {
		err = fail(EPERM, "doorbell lock: %s belongs to uid %u with mode %03o, not to"
			   " this user alone: remove it", name, (unsigned)sb.st_uid,
			   (unsigned)(sb.st_mode & 0777));
		goto out;
	}
	if ((size_t)sb.st_size < sizeof(struct db_shared) &&
	    ftruncate(fd, sizeof(struct db_shared)) < 0) {
		err = fail(errno, "doorbell lock: %s: %s", name, strerror(errno));
		goto out;
	}
	struct db_shared *d = mmap(NULL, sizeof(*d), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (d == MAP_FAILED) {
		err = fail(errno, "doorbell lock: mmap %s: %s", name, strerror(errno));
		goto out;
	}
	if (__atomic_load_n(&d->magic, __ATOMIC_ACQUIRE) != DB_SHARED_MAGIC) {
		pthread_mutexattr_t a;
		pthread_mutexattr_init(&a);
		pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
		pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
		pthread_mutex_init(&d->mu, &a);
		pthread_mutexattr_destroy(&a);
		d->version = DB_SHARED_VERSION;
		__atomic_store_n(&d->magic, DB_SHARED_MAGIC, __ATOMIC_RELEASE);
	} else if (d->version != DB_SHARED_VERSION) {
		munmap(d, sizeof(*d));
		err = fail(EPROTO, "doorbell lock: %s has layout %u, this library %u: remove it"
			   " when no older program runs", name, d->version, DB_SHARED_VERSION);
		goto out;
	}
	p->db = d;
out:
	/* explicitly: the mapping keeps the file description, and its flock, open */
	flock(fd, LOCK_UN);
	close(fd);
	return err;
}

static int db_lock(cxlpod *p)
{
	if (!p->db || p->test_no_lock)
		return 0;
	int e = pthread_mutex_lock(&p->db->mu);
	if (e == EOWNERDEAD) {
		/* its holder died between two register writes: ours come next */
		pthread_mutex_consistent(&p->db->mu);
		e = 0;
	}
	if (e)
		return fail(e, "doorbell lock: %s", strerror(e));
	return 0;
}

static void db_unlock(cxlpod *p)
{
	if (p->db && !p->test_no_lock)
		pthread_mutex_unlock(&p->db->mu);
}

static const char *db_status_name(uint32_t s)
{
	switch (s) {
	case CXLSHM_DB_RANGE: return "out of range";
	case CXLSHM_DB_UNALIGNED: return "unaligned";
	case CXLSHM_DB_ZERO: return "zero length";
	case CXLSHM_DB_BADOP: return "reserved op";
	case CXLSHM_DB_BUSY: return "busy (another vCPU's op in flight)";
	case CXLSHM_DB_FULL: return "dropped (the device's ring was full)";
	case CXLSHM_DB_LOST: return "the pool service is lost (a remote host)";
	case CXLSHM_DB_ERROR: return "the pool service refused a request (a remote host)";
	case 0x100: return "registers mixed with another process's (test registers)";
	default: return "unknown status";
	}
}

static int doorbell(cxlpod *p, int op, uint64_t off, uint64_t len)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST); /* earlier stores reach the image */
	int err = db_lock(p);
	if (err)
		return err;
	if (p->test_regs && getenv("CXLPOD_TEST_DB_DIE"))
		_exit(0); /* test only: die holding the lock */
	wr64(p, A_CXLSHM_DB_OFFSET, off);
	wr64(p, A_CXLSHM_DB_LEN, len);
	if (p->test_regs)
		sched_yield(); /* widen the window a second process could use */
	wr32(p, A_CXLSHM_DB_OP, op);
	/* the op runs in the device's own thread: busy until it is done */
	uint32_t st;
	for (unsigned polls = 0; (st = rd32(p, A_CXLSHM_DB_STATUS)) == CXLSHM_DB_BUSY; polls++) {
		if (polls < 64)
			continue;
		if (polls < 1024)
			sched_yield();
		else /* long: a line another host holds (it may be stopped) */
			usleep(polls < 4096 ? 20 : 1000);
	}
	if (p->test_regs) {
		/* what a device would act on: the shared registers at DB_OP */
		st = (rd64(p, A_CXLSHM_DB_OFFSET) != off ||
		      rd64(p, A_CXLSHM_DB_LEN) != len) ? 0x100 : 0;
	}
	db_unlock(p);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (st)
		return fail(EIO, "doorbell op %d [0x%llx, +0x%llx) refused: status %u (%s)", op,
			    (unsigned long long)off, (unsigned long long)len, st,
			    db_status_name(st));
	return 0;
}

/* Software model of the device's non-coherent area (per 64-byte line,
 * exact dirtiness by twin comparison, one lock for the pool). */
static int model_op(cxlpod *p, int op, uint64_t start, uint64_t end)
{
	uint64_t coh = p->info.coherent_size;
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (flock(p->dax_fd, LOCK_EX) < 0)
		return fail(errno, "model: flock: %s", strerror(errno));
	for (uint64_t o = start - coh; o < end - coh; o += CXLPOD_LINE) {
		uint8_t *img = p->base + coh + o, *tw = p->twin + o, *pool = p->pool_nc + o;
		if (memcmp(img, tw, CXLPOD_LINE)) { /* dirty: write back whole line */
			memcpy(pool, img, CXLPOD_LINE);
			memcpy(tw, img, CXLPOD_LINE);
		}
		if (op != OP_WB) { /* invalidate: refill from the pool */
			memcpy(img, pool, CXLPOD_LINE);
			memcpy(tw, pool, CXLPOD_LINE);
		}
	}
	flock(p->dax_fd, LOCK_UN);
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return 0;
}

static void native_op(cxlpod *p, int op, uint8_t *a, uint8_t *end)
{
	if (op == OP_WB && p->info.cpu_clwb) {
		for (; a < end; a += CXLPOD_LINE) {
			__asm__ volatile("clwb %0" : "+m"(*(volatile char *)a));
		}
	} else {
		for (; a < end; a += CXLPOD_LINE) {
			__asm__ volatile("clflushopt %0" : "+m"(*(volatile char *)a));
		}
	}
	if (op == OP_INV) /* invalidate is complete on return */
		__asm__ volatile("mfence" ::: "memory");
}

static int coherence_op(cxlpod *p, int op, const void *addr, size_t len, const char *what)
{
	if (!p)
		return fail(EINVAL, "%s: NULL handle", what);
	if (op == OP_WB)
		p->st.lib_writeback++;
	else if (op == OP_INV)
		p->st.lib_invalidate++;
	else
		p->st.lib_flush++;
	if (len == 0)
		return 0;
	const uint8_t *a = addr;
	if (!p->base || a < p->base || a >= p->base + p->info.size || len > p->info.size ||
	    (size_t)(a - p->base) > p->info.size - len)
		return fail(EINVAL, "%s: range %p+%zu outside the pool mapping", what, addr, len);
	uint64_t start = (uint64_t)(a - p->base) & ~(uint64_t)(CXLPOD_LINE - 1);
	uint64_t end = ((uint64_t)(a - p->base) + len + CXLPOD_LINE - 1) & ~(uint64_t)(CXLPOD_LINE - 1);
	if (start < p->info.coherent_size)
		start = p->info.coherent_size; /* coherent part needs nothing */
	if (start >= end)
		return 0;
	p->st.lib_bytes += end - start;
	if (p->backend == CXLPOD_BACKEND_LOOPBACK && p->test_regs)
		return doorbell(p, op, start, end - start);
	if (p->backend == CXLPOD_BACKEND_LOOPBACK || p->backend == CXLPOD_BACKEND_RAW_DAX)
		return 0; /* everything is coherent */
	if (p->backend == CXLPOD_BACKEND_MODEL)
		return model_op(p, op, start, end);
	if (p->info.method == CXLPOD_METHOD_NATIVE) {
		native_op(p, op, p->base + start, p->base + end);
		return 0;
	}
	return doorbell(p, op, start, end - start);
}

int cxlpod_writeback(cxlpod *p, const void *addr, size_t len)
{
	return coherence_op(p, OP_WB, addr, len, "writeback");
}
int cxlpod_invalidate(cxlpod *p, const void *addr, size_t len)
{
	return coherence_op(p, OP_INV, addr, len, "invalidate");
}
int cxlpod_flush(cxlpod *p, const void *addr, size_t len)
{
	return coherence_op(p, OP_FLUSH, addr, len, "flush");
}
int cxlpod_fence(cxlpod *p)
{
	if (!p)
		return fail(EINVAL, "fence: NULL handle");
	p->st.lib_fence++;
	/* sfence orders clwb/clflushopt; mfence also orders later loads */
	__asm__ volatile("sfence; mfence" ::: "memory");
	return 0;
}

/* ---- atomics ------------------------------------------------------------------ */
static int check_atomic(cxlpod *p, const uint64_t *addr, const char *what)
{
	if (!p)
		return fail(EINVAL, "%s: NULL handle", what);
	const uint8_t *a = (const uint8_t *)addr;
	if ((uintptr_t)a & 7)
		return fail(EINVAL, "%s: address %p not 8-byte aligned", what, (const void *)addr);
	if (!p->base || a < p->base || a + 8 > p->base + p->info.coherent_size)
		return fail(EINVAL, "%s: address %p not in the coherent window", what,
			    (const void *)addr);
	return 0;
}

int cxlpod_atomic_load(cxlpod *p, uint64_t *addr, uint64_t *val)
{
	int e = check_atomic(p, addr, "atomic_load");
	if (e)
		return e;
	if (!val)
		return fail(EINVAL, "atomic_load: val is NULL");
	*val = __atomic_load_n(addr, __ATOMIC_SEQ_CST);
	return 0;
}
int cxlpod_atomic_store(cxlpod *p, uint64_t *addr, uint64_t val)
{
	int e = check_atomic(p, addr, "atomic_store");
	if (e)
		return e;
	__atomic_store_n(addr, val, __ATOMIC_SEQ_CST);
	return 0;
}
int cxlpod_atomic_fetch_add(cxlpod *p, uint64_t *addr, uint64_t add, uint64_t *old)
{
	int e = check_atomic(p, addr, "atomic_fetch_add");
	if (e)
		return e;
	uint64_t o = __atomic_fetch_add(addr, add, __ATOMIC_SEQ_CST);
	if (old)
		*old = o;
	return 0;
}
int cxlpod_atomic_exchange(cxlpod *p, uint64_t *addr, uint64_t val, uint64_t *old)
{
	int e = check_atomic(p, addr, "atomic_exchange");
	if (e)
		return e;
	uint64_t o = __atomic_exchange_n(addr, val, __ATOMIC_SEQ_CST);
	if (old)
		*old = o;
	return 0;
}
int cxlpod_atomic_cas(cxlpod *p, uint64_t *addr, uint64_t expected, uint64_t desired,
		      uint64_t *old)
{
	int e = check_atomic(p, addr, "atomic_cas");
	if (e)
		return e;
	uint64_t exp = expected;
	__atomic_compare_exchange_n(addr, &exp, desired, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
	if (old)
		*old = exp;
	return 0;
}

/* ---- host table ------------------------------------------------------------------ */
int cxlpod_host_id(cxlpod *p, unsigned *id)
{
	if (!p || !id)
		return fail(EINVAL, "NULL argument");
	*id = p->info.host_id;
	return 0;
}
int cxlpod_max_hosts(cxlpod *p, unsigned *n)
{
	if (!p || !n)
		return fail(EINVAL, "NULL argument");
	*n = p->info.max_hosts;
	return 0;
}
int cxlpod_hosts_live_map(cxlpod *p, uint64_t *words, unsigned nwords)
{
	if (!p || !words)
		return fail(EINVAL, "NULL argument");
	for (unsigned w = 0; w < nwords; w++) {
		if (p->backend != CXLPOD_BACKEND_DEVICE) {
			unsigned n = p->nhosts_env > 64 * w ? p->nhosts_env - 64 * w : 0;
			words[w] = n >= 64 ? ~0ull : ((1ull << n) - 1);
		} else {
			words[w] = w < CXLSHM_HOST_LIVE_WORDS ?
				rd64(p, A_CXLSHM_HOST_LIVE_WORD(w)) : 0;
		}
	}
	return 0;
}
int cxlpod_hosts_live(cxlpod *p, uint64_t *bitmap)
{
	return cxlpod_hosts_live_map(p, bitmap, 1);
}
int cxlpod_host_state(cxlpod *p, unsigned host, enum cxlpod_host_state *state, uint64_t *gen)
{
	if (!p || !state)
		return fail(EINVAL, "NULL argument");
	if (host >= p->info.max_hosts || host >= CXLPOD_MAX_HOSTS)
		return fail(EINVAL, "host %u out of range (max_hosts %u)", host, p->info.max_hosts);
	if (p->backend != CXLPOD_BACKEND_DEVICE) {
		/* no host table: every host below CXLPOD_NHOSTS counts as live */
		*state = CXLPOD_HOST_LIVE;
		if (gen)
			*gen = 1;
		return 0;
	}
	*state = (enum cxlpod_host_state)rd32(p, A_CXLSHM_HOST_STATE(host));
	if (gen)
		*gen = rd64(p, A_CXLSHM_HOST_GEN(host));
	return 0;
}
const char *cxlpod_host_state_name(enum cxlpod_host_state s)
{
	switch (s) {
	case CXLPOD_HOST_FREE: return "free";
	case CXLPOD_HOST_LIVE: return "live";
	case CXLPOD_HOST_FAILED: return "failed";
	case CXLPOD_HOST_LEFT: return "left";
	default: return "unknown";
	}
}

int cxlpod_stats(cxlpod *p, struct cxlpod_stats *st)
{
	if (!p || !st)
		return fail(EINVAL, "NULL argument");
	*st = p->st;
	if (p->backend == CXLPOD_BACKEND_DEVICE) {
		st->dev_wb_ops = rd64(p, A_CXLSHM_STAT(CXLSHM_STAT_WB_OPS));
		st->dev_inv_ops = rd64(p, A_CXLSHM_STAT(CXLSHM_STAT_INV_OPS));
		st->dev_flush_ops = rd64(p, A_CXLSHM_STAT(CXLSHM_STAT_FLUSH_OPS));
		st->dev_wb_lines = rd64(p, A_CXLSHM_STAT(CXLSHM_STAT_WB_LINES));
		st->dev_inv_lines = rd64(p, A_CXLSHM_STAT(CXLSHM_STAT_INV_LINES));
		st->dev_native_ops = rd64(p, A_CXLSHM_STAT(CXLSHM_STAT_NATIVE_OPS));
		st->dev_errors = rd64(p, A_CXLSHM_STAT(CXLSHM_STAT_ERRORS));
		st->dev_conflicts = rd64(p, A_CXLSHM_STAT(CXLSHM_STAT_CONFLICTS));
		st->dev_evicted = rd64(p, A_CXLSHM_STAT(CXLSHM_STAT_EVICTED));
		st->dev_nt_lines = rd64(p, A_CXLSHM_STAT(CXLSHM_STAT_NT_LINES));
		st->dev_deferred = rd64(p, A_CXLSHM_STAT(CXLSHM_STAT_DEFERRED));
		st->dev_resets = rd64(p, A_CXLSHM_STAT(CXLSHM_STAT_RESETS));
		st->dev_hits = rd64(p, A_CXLSHM_STAT(CXLSHM_STAT_HITS));
		st->dev_misses = rd64(p, A_CXLSHM_STAT(CXLSHM_STAT_MISSES));
		st->dev_cache_evictions = rd64(p, A_CXLSHM_STAT(CXLSHM_STAT_CACHE_EVICTIONS));
		st->dev_back_invalidates = rd64(p, A_CXLSHM_STAT(CXLSHM_STAT_BACK_INVAL));
		st->dev_snoops = rd64(p, A_CXLSHM_STAT(CXLSHM_STAT_SNOOPS));
		st->dev_sf_evictions = rd64(p, A_CXLSHM_STAT(CXLSHM_STAT_SF_EVICTIONS));
		st->dev_stale_reads = rd64(p, A_CXLSHM_STAT(CXLSHM_STAT_STALE_READS));
		st->dev_charged_ns = rd64(p, A_CXLSHM_STAT(CXLSHM_STAT_CHARGED_NS));
	}
	return 0;
}
