/*
 * cxlpod-vportd NAME CMD [ARGS...]: serve the virtio-serial port NAME with
 * CMD, one connection after the other.  CMD runs with the port as its
 * standard input and output each time the host side connects (a client on
 * the port's QEMU chardev socket), so `sshd -i` behind it gives the host
 * an ssh login (cxlpod-launch ssh DIR I) without any network between the
 * host and the guest.
 *
 * Every connection starts with the line "cxlpod-vport-hello-1" (the
 * launcher's proxy sends it); CMD starts only after it.  QEMU's chardev
 * takes the next client as soon as one goes, faster than the guest can
 * tell, so the line, not the connection state, marks where a connection
 * begins: what an earlier one left unread is dropped, and a CMD never
 * answers a client that is gone.  While no host is connected, a read
 * returns 0 at once; the driver sends SIGIO to an O_ASYNC owner when that
 * changes, so the wait costs nothing.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define VPORTS "/sys/class/virtio-ports"
/* the first line of every connection (cxlpod-launch proxy sends it) */
#define VPORT_HELLO "cxlpod-vport-hello-1"

/* /dev/vportXpY of the port named NAME; 0 when found. */
static int find_port(const char *name, char *dev, size_t n)
{
	DIR *d = opendir(VPORTS);
	struct dirent *e;
	int rc = -1;

	if (!d)
		return -1;
	while (rc && (e = readdir(d))) {
		char p[512], got[256];
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(p, sizeof(p), VPORTS "/%s/name", e->d_name);
		f = fopen(p, "r");
		if (!f)
			continue;
		if (fgets(got, sizeof(got), f)) {
			got[strcspn(got, "\n")] = '\0';
			if (!strcmp(got, name)) {
				snprintf(dev, n, "/dev/%s", e->d_name);
				rc = 0;
			}
		}
		fclose(f);
	}
	closedir(d);
	return rc;
}

/*
 * Wait for SIGIO (the host connected or went), at most one second: the
 * read after it decides, so a lost signal costs a second, not a hang.
 */
static void wait_change(const sigset_t *set)
{
	struct timespec ts = { .tv_sec = 1 };

	sigtimedwait(set, NULL, &ts);
}

/*
 * Read the port byte by byte until a line equal to HELLO: what came before
 * it (the tail of an earlier connection) is dropped, what follows it stays
 * in the port for the command.  A read of 0 means the host is not
 * connected: wait for it.
 */
static void wait_hello(int fd, const sigset_t *set)
{
	char line[sizeof(VPORT_HELLO) + 1];
	size_t n = 0;

	for (;;) {
		char c;
		ssize_t r = read(fd, &c, 1);

		if (r == 0 || (r < 0 && errno == EAGAIN)) {
			wait_change(set);
			continue;
		}
		if (r < 0) {
			if (errno != EINTR)
				sleep(1);
			continue;
		}
		if (c == '\n') {
			if (n == strlen(VPORT_HELLO) && !memcmp(line, VPORT_HELLO, n))
				return;
			n = 0;
		} else if (n < sizeof(line)) {
			line[n++] = c;
		} else {
			n = sizeof(line); /* too long: not the hello */
		}
	}
}

int main(int argc, char **argv)
{
	char dev[300];
	sigset_t set;
	int fd, tries = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: cxlpod-vportd NAME CMD [ARGS...]\n");
		return 1;
	}
	while (find_port(argv[1], dev, sizeof(dev))) {
		if (++tries == 300) {
			fprintf(stderr, "cxlpod-vportd: no virtio-serial port named %s in " VPORTS "\n",
				argv[1]);
			return 2;
		}
		usleep(100 * 1000);
	}
	fd = open(dev, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "cxlpod-vportd: %s: %s\n", dev, strerror(errno));
		return 2;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGIO);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if (fcntl(fd, F_SETOWN, getpid()) < 0 ||
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC) < 0)
		fprintf(stderr, "cxlpod-vportd: O_ASYNC on %s: %s (polling each second)\n", dev,
			strerror(errno));
	for (;;) {
		pid_t pid;
		int st;

		wait_hello(fd, &set);
		pid = fork();
		if (pid < 0) {
			fprintf(stderr, "cxlpod-vportd: fork: %s\n", strerror(errno));
			sleep(1);
			continue;
		}
		if (pid == 0) {
			sigprocmask(SIG_UNBLOCK, &set, NULL);
			if (dup2(fd, 0) < 0 || dup2(fd, 1) < 0)
				_exit(127);
			execv(argv[2], argv + 2);
			fprintf(stderr, "cxlpod-vportd: %s: %s\n", argv[2], strerror(errno));
			_exit(127);
		}
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
	}
}
