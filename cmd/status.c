/* SPDX-License-Identifier: MIT */
/*
 * The live status line, on the terminal's bottom line, outside a scroll
 * region (DECSTBM) that holds every line above it: the trainer's output
 * scrolls there and never meets the status. Only the sequences every VT100
 * descendant has are used (DECSTBM, DECSC/DECRC, CUP, EL, ED, IND, RI), no
 * terminfo. Each redraw is one write(): a tty takes it whole, so it cannot
 * land in the middle of the trainer's own writes, and the cursor and
 * attributes the trainer left are saved and restored around it.
 *
 * A resize resets a terminal's scroll region, and the trainer's next line
 * would be written over the old status line: the SIGWINCH handler itself
 * clears it and sets the region again at once. Ctrl-Z gives the terminal
 * back to the shell until the recording is continued in the foreground;
 * SIGQUIT gives it back before the core dump. The state is in file statics
 * because those handlers, which any thread may run, need it; there is one
 * terminal and one recording.
 */
#include "status.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#define ESC "\033"
#define SAVE ESC "7" /* DECSC: cursor, attributes */
#define RESTORE ESC "8" /* DECRC */

static volatile sig_atomic_t st_fd = -1; /* the terminal; -1: no status line */
static volatile sig_atomic_t st_rows; /* the terminal's lines: the status is on the last */
static volatile sig_atomic_t st_cols;
static volatile sig_atomic_t st_active; /* the region is set (not while stopped, not too small) */
static struct sigaction old_winch, old_tstp, old_cont, old_quit;

/* Sequences built without stdio: the signal handlers build them too. */
struct seq {
	char buf[256];
	size_t len;
};

static void seq_str(struct seq *s, const char *str)
{
	size_t n = strlen(str);

	if (n > sizeof(s->buf) - s->len)
		n = sizeof(s->buf) - s->len;
	memcpy(s->buf + s->len, str, n);
	s->len += n;
}

static void seq_num(struct seq *s, unsigned v)
{
	char digits[12], out[12];
	size_t n = 0;

	do
		digits[n++] = (char)('0' + v % 10);
	while ((v /= 10) && n < sizeof(digits));
	for (size_t i = 0; i < n; i++)
		out[i] = digits[n - 1 - i];
	out[n] = '\0';
	seq_str(s, out);
}

/* The whole buffer, or give up: a terminal that will not take it gets no more. */
static void put(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t w = write(fd, s, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		s += w;
		n -= (size_t)w;
	}
}

static bool term_size(int fd, unsigned *rows, unsigned *cols)
{
	struct winsize ws;

	if (ioctl(fd, TIOCGWINSZ, &ws) || ws.ws_row < 3 || ws.ws_col < 20)
		return false;
	*rows = ws.ws_row;
	*cols = ws.ws_col;
	return true;
}

static bool foreground(int fd)
{
	return tcgetpgrp(fd) == getpgrp();
}

/* The whole screen scrolls again, the status line cleared; the cursor stays. */
static void seq_give_back(struct seq *s, unsigned rows)
{
	seq_str(s, SAVE ESC "[r" ESC "[");
	seq_num(s, rows);
	seq_str(s, ";1H" ESC "[2K" RESTORE);
}

/*
 * The scroll region over lines 1..rows-1. First a line feed and back (IND,
 * RI: both keep the column): at the bottom, the screen scrolls one line so
 * that the cursor's line is not the one the status takes.
 */
static void seq_reserve(struct seq *s, unsigned rows)
{
	seq_str(s, SAVE ESC "[r" RESTORE ESC "D" ESC "M" SAVE ESC "[1;");
	seq_num(s, rows - 1);
	seq_str(s, "r" RESTORE);
}

/*
 * Set the region for the terminal's size now, or none when it is too small
 * or not ours. clear_below: first erase from the cursor down, where a
 * resize may have left the old status line inside the scrolling lines
 * (only the trainer's cursor line and blank ones are below it otherwise).
 */
static void reserve(int fd, bool clear_below)
{
	struct seq s = { .len = 0 };
	unsigned rows, cols;

	if (!foreground(fd))
		return; /* continued in the background: the shell's terminal */
	if (clear_below)
		seq_str(&s, SAVE ESC "[J" RESTORE);
	if (term_size(fd, &rows, &cols)) {
		seq_reserve(&s, rows);
		st_rows = (sig_atomic_t)rows;
		st_cols = (sig_atomic_t)cols;
		st_active = 1;
	} else if (st_active) {
		seq_str(&s, SAVE ESC "[r" RESTORE);
		st_active = 0;
	}
	put(fd, s.buf, s.len);
}

static void give_back(int fd)
{
	struct seq s = { .len = 0 };

	if (!st_active)
		return;
	st_active = 0;
	seq_give_back(&s, (unsigned)st_rows);
	put(fd, s.buf, s.len);
}

static void on_winch(int sig)
{
	int saved = errno, fd = st_fd;

	(void)sig;
	if (fd >= 0)
		reserve(fd, st_active);
	errno = saved;
}

/* Ctrl-Z: the shell gets the whole terminal while the recording is stopped. */
static void on_tstp(int sig)
{
	int saved = errno, fd = st_fd;
	struct sigaction dfl = { .sa_handler = SIG_DFL }, self;
	sigset_t set;

	if (fd >= 0)
		give_back(fd);
	sigemptyset(&dfl.sa_mask);
	sigaction(sig, &dfl, &self);
	sigemptyset(&set);
	sigaddset(&set, sig);
	raise(sig);
	sigprocmask(SIG_UNBLOCK, &set, NULL); /* stops here until SIGCONT */
	sigaction(sig, &self, NULL);
	errno = saved;
}

/* Continued (fg, or bg: then not the foreground, and no region until fg). */
static void on_cont(int sig)
{
	int saved = errno, fd = st_fd;

	(void)sig;
	if (fd >= 0 && !st_active)
		reserve(fd, false);
	errno = saved;
}

/* SIGQUIT dumps core: the terminal first. */
static void on_quit(int sig)
{
	struct sigaction dfl = { .sa_handler = SIG_DFL };
	int fd = st_fd;

	if (fd >= 0)
		give_back(fd);
	sigemptyset(&dfl.sa_mask);
	sigaction(sig, &dfl, NULL);
	raise(sig); /* delivered when the handler returns */
}

static bool term_can(void)
{
	const char *term = getenv("TERM");

	return term && *term && strcmp(term, "dumb") && strcmp(term, "unknown");
}

bool status_open(void)
{
	struct sigaction sa = { 0 };
	unsigned rows, cols;
	int fd = STDERR_FILENO;
	sigset_t all, old;

	if (st_fd >= 0 || !isatty(fd) || !term_can() || !foreground(fd) ||
	    !term_size(fd, &rows, &cols))
		return false;
	/* the handlers see a terminal only once it is set up */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	sigemptyset(&sa.sa_mask);
	/* any thread may take them: its reads go on (a poll() returns either way) */
	sa.sa_flags = SA_RESTART;
	sa.sa_handler = on_winch;
	sigaction(SIGWINCH, &sa, &old_winch);
	sa.sa_handler = on_tstp;
	sigaction(SIGTSTP, &sa, &old_tstp);
	sa.sa_handler = on_cont;
	sigaction(SIGCONT, &sa, &old_cont);
	sa.sa_handler = on_quit;
	sigaction(SIGQUIT, &sa, &old_quit);
	st_active = 0;
	st_fd = fd;
	reserve(fd, false);
	sigprocmask(SIG_SETMASK, &old, NULL);
	return st_active;
}

void status_draw(const char *text)
{
	char buf[1024];
	size_t len = strlen(text), n = 0, cols = (size_t)st_cols;
	struct seq s = { .len = 0 };
	int fd = st_fd;

	if (fd < 0 || !st_active || !foreground(fd))
		return;
	/* the line, cut short of the last column (no wrap), in plain attributes */
	seq_str(&s, SAVE ESC "[");
	seq_num(&s, (unsigned)st_rows);
	seq_str(&s, ";1H" ESC "[0m" ESC "[2K");
	if (len > cols - 1)
		len = cols - 1;
	if (len > sizeof(buf) - s.len - sizeof(RESTORE))
		len = sizeof(buf) - s.len - sizeof(RESTORE);
	memcpy(buf, s.buf, s.len);
	n = s.len;
	memcpy(buf + n, text, len);
	n += len;
	memcpy(buf + n, RESTORE, sizeof(RESTORE) - 1);
	n += sizeof(RESTORE) - 1;
	put(fd, buf, n);
}

void status_close(void)
{
	sigset_t all, old;
	int fd = st_fd;

	if (fd < 0)
		return;
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, &old);
	sigaction(SIGWINCH, &old_winch, NULL);
	sigaction(SIGTSTP, &old_tstp, NULL);
	sigaction(SIGCONT, &old_cont, NULL);
	sigaction(SIGQUIT, &old_quit, NULL);
	give_back(fd);
	st_fd = -1;
	sigprocmask(SIG_SETMASK, &old, NULL);
}
