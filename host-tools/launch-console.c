/*
 * The `console` subcommand: relay a terminal (or a pipe) to a host's
 * serial console socket (a GLib main loop with a watch on each side).
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

/* A console session: the main loop relays stdin and the socket. */
struct console {
    int sock;
    const char *why;        /* why the session ended */
    GMainLoop *loop;
    guint in_watch;         /* stdin (0: it ended) */
    guint linger;           /* after stdin ended: quiet-output timer */
};

static void console_end(struct console *c, const char *why)
{
    c->why = why;
    g_main_loop_quit(c->loop);
}

/* After stdin ended (piped input): leave once the guest's output has been
 * quiet for CONSOLE_LINGER_MS. */
static gboolean on_linger(gpointer data)
{
    struct console *c = data;
    c->linger = 0;
    console_end(c, "input ended");
    return G_SOURCE_REMOVE;
}

static void restart_linger(struct console *c)
{
    if (c->linger) {
        g_source_remove(c->linger);
    }
    c->linger = g_timeout_add(CONSOLE_LINGER_MS, on_linger, c);
}

/* One read of a ready descriptor: the bytes read, 0 at its end or on an
 * error, -1 when there is nothing after all (try again). */
static ssize_t read_ready(int fd, char *b, size_t len)
{
    ssize_t n = read(fd, b, len);

    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
        return -1;
    }
    return n < 0 ? 0 : n;
}

/* Guest output to the terminal. */
static gboolean on_socket(gint fd, GIOCondition cond, gpointer data)
{
    struct console *c = data;
    char b[4096];
    ssize_t n = read_ready(fd, b, sizeof(b));

    (void)cond;
    if (n < 0) {
        return G_SOURCE_CONTINUE;
    }
    if (n == 0) {
        console_end(c, "the guest's console closed (QEMU exited?)");
        return G_SOURCE_REMOVE;
    }
    if (!write_all(STDOUT_FILENO, b, (size_t)n)) {
        console_end(c, "cannot write to the terminal");
        return G_SOURCE_REMOVE;
    }
    if (!c->in_watch) {
        restart_linger(c);
    }
    return G_SOURCE_CONTINUE;
}

/* Terminal input to the guest; Ctrl-] (on a terminal) detaches. */
static gboolean on_stdin(gint fd, GIOCondition cond, gpointer data)
{
    struct console *c = data;
    char b[4096];
    ssize_t n = read_ready(fd, b, sizeof(b));

    (void)cond;
    if (n < 0) {
        return G_SOURCE_CONTINUE;
    }
    if (n == 0) {
        c->in_watch = 0;
        restart_linger(c);
        return G_SOURCE_REMOVE;
    }
    char *esc = g_tio_saved ? memchr(b, 0x1d, (size_t)n) : NULL;
    size_t send = esc ? (size_t)(esc - b) : (size_t)n;
    if (send && !write_all(c->sock, b, send)) {
        console_end(c, "the guest's console closed");
        return G_SOURCE_REMOVE;
    }
    if (esc) {
        console_end(c, "detached");
        return G_SOURCE_REMOVE;
    }
    return G_SOURCE_CONTINUE;
}

int console_main(int argc, char **argv)
{
    long host;
    int nw;
    g_autofree char **w = subcommand_words(argc, argv, "WORKDIR I",
        "Attach the terminal to host I's serial console of the pod run in "
        "WORKDIR\n(started with --interactive); Ctrl-] detaches.",
        2, 2, &nw);
    if (!w) {
        return EXIT_USAGE;
    }
    if (!parse_int(w[1], 0, MAX_HOSTS - 1, &host)) {
        fprintf(stderr, PROG " console: host '%s' is not a number in "
                "[0, %d]\n", w[1], MAX_HOSTS - 1);
        return EXIT_USAGE;
    }
    char *path = g_strdup_printf("%s/host%ld.console", w[0], host);
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
    struct console c = {
        .sock = s, .why = "detached", .loop = g_main_loop_new(NULL, FALSE),
    };
    c.in_watch = g_unix_fd_add(STDIN_FILENO, G_IO_IN | G_IO_HUP | G_IO_ERR,
                               on_stdin, &c);
    g_unix_fd_add(s, G_IO_IN | G_IO_HUP | G_IO_ERR, on_socket, &c);
    g_main_loop_run(c.loop);
    g_main_loop_unref(c.loop);
    const char *why = c.why;
    restore_tty();
    fprintf(stderr, "\r\n" PROG ": %s\n", why);
    close(s);
    g_free(path);
    return EXIT_OK;
}
