/* SPDX-License-Identifier: MIT */
#include "cmd.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void vmsg(const char *prefix, const char *fmt, va_list ap)
{
	fprintf(stderr, "dlflame: %s", prefix);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

int error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg("", fmt, ap);
	va_end(ap);
	return EXIT_BAD;
}

void warning(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg("warning: ", fmt, ap);
	va_end(ap);
}

void info(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg("", fmt, ap);
	va_end(ap);
}

int usage_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg("", fmt, ap);
	va_end(ap);
	fprintf(stderr, "Try 'dlflame %s --help'.\n", cmd);
	return EXIT_USAGE;
}

int output_open(struct output *o, const char *path)
{
	int fd;

	memset(o, 0, sizeof(*o));
	if (!path || strcmp(path, "-") == 0) {
		o->f = stdout;
		return 0;
	}
	int err = open_output_in_place(path, &fd);
	if (err)
		return err;
	if (fd >= 0) {
		o->f = fdopen(fd, "w");
		if (!o->f) {
			err = -errno;
			close(fd);
			return err;
		}
		o->in_place = true;
		return 0;
	}
	o->path = strdup(path);
	if (!o->path || asprintf(&o->tmp, "%s.tmp.XXXXXX", path) < 0) {
		free(o->path);
		o->path = NULL;
		o->tmp = NULL;
		return -ENOMEM;
	}
	fd = mkstemp(o->tmp);
	if (fd < 0) {
		err = -errno;
		free(o->path);
		free(o->tmp);
		memset(o, 0, sizeof(*o));
		return err;
	}
	fchmod(fd, 0644);
	o->f = fdopen(fd, "w");
	if (!o->f) {
		err = -errno;
		close(fd);
		unlink(o->tmp);
		free(o->path);
		free(o->tmp);
		memset(o, 0, sizeof(*o));
		return err;
	}
	return 0;
}

int output_close(struct output *o, bool ok)
{
	int err = 0;

	if (!o->f)
		return 0;
	if (fflush(o->f) || ferror(o->f))
		err = errno ? -errno : -EIO;
	if (o->in_place) {
		if (fclose(o->f) && !err)
			err = -errno;
		memset(o, 0, sizeof(*o));
		return err;
	}
	if (!o->path) {
		/* stdout stays open for the final check in main() */
		o->f = NULL;
		return err;
	}
	if (!err && fsync(fileno(o->f)) && errno != EINVAL)
		err = -errno;
	if (fclose(o->f) && !err)
		err = -errno;
	if (ok && !err && rename(o->tmp, o->path))
		err = -errno;
	if (!ok || err)
		unlink(o->tmp);
	free(o->path);
	free(o->tmp);
	memset(o, 0, sizeof(*o));
	return err;
}
