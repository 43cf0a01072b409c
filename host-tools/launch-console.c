/*
 * The `console` subcommand: relay a terminal (or a pipe) to a host's
 * serial console socket.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */

#include "launch.h"

/* console subcommand                                                  */

static struct termios g_saved_tio;
static bool g_tio_saved;

static void restore_tty(void)
{
    if (g_tio_saved) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &g_saved_tio);
        g_tio_saved = false;
    }
}

bool write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            if (errno == EAGAIN) {
                struct pollfd pf = { .fd = fd, .events = POLLOUT };
                poll(&pf, 1, 1000);
                continue;
            }
            return false;
        }
        p += w;
        n -= (size_t)w;
    }
    return true;
}

int console_main(int argc, char **argv)
{
    long host;
    if (argc != 4 || !parse_int(argv[3], 0, MAX_HOSTS - 1, &host)) {
        fprintf(stderr, "usage: " PROG " console WORKDIR I\n");
        return EXIT_USAGE;
    }
    char *path = g_strdup_printf("%s/host%ld.console", argv[2], host);
    struct sockaddr_un sun = { .sun_family = AF_UNIX };
    if (strlen(path) >= sizeof(sun.sun_path)) {
        die(EXIT_USAGE, "socket path %s is too long", path);
    }
    strcpy(sun.sun_path, path);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0) {
        die(EXIT_USAGE, "socket: %s", strerror(errno));
    }
    if (connect(s, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        die(EXIT_USAGE, "cannot connect to %s: %s (is host %ld running? "
            "start it with " PROG " --interactive)", path, strerror(errno), host);
    }
    signal(SIGPIPE, SIG_IGN);
    fprintf(stderr, PROG ": connected to host %ld console (%s); "
            "Ctrl-] detaches, press Enter for a prompt\n", host, path);
    fprintf(stderr, PROG ": (the console takes one client at a time; a second "
            "client waits until the first detaches)\n");
    if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &g_saved_tio) == 0) {
        struct termios raw = g_saved_tio;
        cfmakeraw(&raw);
        g_tio_saved = true;
        atexit(restore_tty);
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw);
    }
    struct pollfd pf[2] = {
        { .fd = STDIN_FILENO, .events = POLLIN },
        { .fd = s, .events = POLLIN },
    };
    char b[4096];
    const char *why = "detached";
    bool stdin_open = true;
    for (;;) {
        pf[0].fd = stdin_open ? STDIN_FILENO : -1;
        /* after stdin ended (piped input), relay guest output until it has
         * been quiet for CONSOLE_LINGER_MS, then leave */
        int r = poll(pf, 2, stdin_open ? -1 : CONSOLE_LINGER_MS);
        if (r < 0) {
            if (errno == EINTR) {
                continue;
            }
            why = "poll failed";
            break;
        }
        if (r == 0) {
            why = "input ended";
            break;
        }
        if (pf[1].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = read(s, b, sizeof(b));
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
                continue;
            }
            if (n <= 0) {
                why = "the guest's console closed (QEMU exited?)";
                break;
            }
            if (!write_all(STDOUT_FILENO, b, (size_t)n)) {
                why = "cannot write to the terminal";
                break;
            }
        }
        if (stdin_open && (pf[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t n = read(STDIN_FILENO, b, sizeof(b));
            if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
                continue;
            }
            if (n <= 0) {
                stdin_open = false;
                continue;
            }
            char *esc = g_tio_saved ? memchr(b, 0x1d, (size_t)n) : NULL;
            size_t send = esc ? (size_t)(esc - b) : (size_t)n;
            if (send && !write_all(s, b, send)) {
                why = "the guest's console closed";
                break;
            }
            if (esc) {
                break;
            }
        }
    }
    restore_tty();
    fprintf(stderr, "\r\n" PROG ": %s\n", why);
    close(s);
    g_free(path);
    return EXIT_OK;
}
