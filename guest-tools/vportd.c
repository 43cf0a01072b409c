/*
 * cxlpod-vportd NAME CMD [ARGS...]: serve the virtio-serial port NAME with
 * CMD, one connection after the other.  CMD runs with the port as its
 * standard input and output each time the host side connects (a client on
 * the port's QEMU chardev socket), so `sshd -i` behind it gives the host
 * an ssh login (cxlpod-launch ssh DIR I) without any network between the
 * host and the guest.
 *
 * Every connection starts with a handshake (handshake() below): QEMU's
 * chardev takes the next client as soon as one goes, faster than the
 * guest can tell, so an earlier CMD may still be reading when the next
 * client's bytes arrive.  The proxy repeats its hello until this side,
 * with no CMD running, answers it; only then does the client's stream
 * begin, and a CMD never sees another client's bytes.  While no host is connected, a read
 * returns 0 at once; the driver sends SIGIO to an O_ASYNC owner when that
 * changes, so the wait costs nothing.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define VPORTS "/sys/class/virtio-ports"
/* the handshake of every connection with cxlpod-launch proxy */
#define VPORT_HELLO "cxlpod-vport-hello-2"
#define VPORT_READY "cxlpod-vport-ready-2"
#define VPORT_GO "cxlpod-vport-go-2"

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
 * One line from the port, byte by byte (what follows stays in the port).
 * False when the host went (a read of 0) or the line was too long.
 */
static bool read_line(int fd, const sigset_t *set, char *line, size_t size)
{
	size_t n = 0;

	for (;;) {
		char c;
		ssize_t r = read(fd, &c, 1);

		if (r == 0 || (r < 0 && errno == EAGAIN)) {
			if (n)
				return false;   /* the host went mid-line */
			wait_change(set);       /* no host: wait for one */
			continue;
		}
		if (r < 0) {
			if (errno != EINTR)
				sleep(1);
			continue;
		}
		if (c == '\n') {
			line[n < size ? n : size - 1] = '\0';
			return n < size;
		}
		if (n < size)
			line[n] = c;
		n++;
	}
}

/*
 * The start of a connection: HELLO NONCE (repeated by the proxy until it
 * is answered), READY NONCE back, then GO from the proxy, after which the
 * stream is the client's.  An earlier CMD that was still reading the port
 * when this client came may eat some HELLOs (it dies of them), so only a
 * HELLO read here is answered; other lines before GO are dropped.  A
 * client may also go after our READY without its GO (a proxy killed by a
 * timeout): the next client's HELLO carries another NONCE and is answered
 * in turn; repeats of the NONCE already answered are dropped, so a client
 * gets one READY.
 */
static void handshake(int fd, const sigset_t *set)
{
	const size_t hl = strlen(VPORT_HELLO) + 1;
	char line[128], nonce[128] = "", reply[160];

	for (;;) {
		if (!read_line(fd, set, line, sizeof(line)))
			continue;
		if (!strcmp(line, VPORT_GO)) {
			if (nonce[0])
				return;
			continue;
		}
		if (strncmp(line, VPORT_HELLO " ", hl) || !line[hl] ||
		    !strcmp(line + hl, nonce))
			continue;
		snprintf(nonce, sizeof(nonce), "%s", line + hl);
		snprintf(reply, sizeof(reply), VPORT_READY " %s\n", nonce);
		if (write(fd, reply, strlen(reply)) < 0)
			nonce[0] = '\0';
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

		handshake(fd, &set);
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
