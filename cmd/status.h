/* SPDX-License-Identifier: MIT */
/*
 * The live status line of a recording: the bottom line of the terminal,
 * kept out of the trainer's output by a scroll region over the lines above
 * it (as apt draws its progress), or nothing at all.
 */
#ifndef DLFLAME_STATUS_H
#define DLFLAME_STATUS_H

#include <stdbool.h>

/*
 * Reserve the terminal's bottom line when stderr is a terminal that can
 * keep one: a TERM other than dumb or unknown, a size (TIOCGWINSZ) of at
 * least 3 lines, and this process in its foreground. Returns whether it
 * did; without it, status_draw and status_close do nothing. Until
 * status_close, Ctrl-Z and SIGQUIT give the terminal back first, and a
 * resize moves the line.
 */
bool status_open(void);
/* Redraw the line with text (cut to the width), following a resize. */
void status_draw(const char *text);
/* Clear the line and give the whole terminal back; the cursor stays where the output left it. */
void status_close(void);

#endif
