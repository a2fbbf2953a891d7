/* SPDX-License-Identifier: MIT */
/* The temporary directory and file writing of fuzz.h. */
#include "tests/fuzz/fuzz.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "profile/profile.h"
#include "util/util.h"

#define MAX_NAMES 4

static char dir[PATH_MAX];
static struct {
	const char *name;
	char path[PATH_MAX];
} names[MAX_NAMES];

static void remove_dir(void)
{
	for (int i = 0; i < MAX_NAMES && names[i].name; i++)
		unlink(names[i].path);
	rmdir(dir);
}

const char *fuzz_tmp_path(const char *name)
{
	const char *tmp = getenv("TMPDIR");
	int i;

	if (!dir[0]) {
		if (!tmp || !*tmp)
			tmp = "/tmp";
		if ((size_t)snprintf(dir, sizeof(dir), "%s/dlflame-fuzz.XXXXXX", tmp) >=
			    sizeof(dir) ||
		    !mkdtemp(dir)) {
			dir[0] = '\0';
			return NULL;
		}
		atexit(remove_dir);
	}
	for (i = 0; i < MAX_NAMES && names[i].name; i++)
		if (!strcmp(names[i].name, name))
			return names[i].path;
	if (i == MAX_NAMES || (size_t)snprintf(names[i].path, sizeof(names[i].path), "%s/%s", dir,
					       name) >= sizeof(names[i].path))
		return NULL;
	names[i].name = name;
	return names[i].path;
}

int fuzz_write_file(const char *path, const uint8_t *data, size_t size)
{
	size_t done = 0;
	int fd;

	/*
	 * A new file each time: ext4 flushes a file truncated and rewritten
	 * at close (auto_da_alloc), which made each run cost milliseconds.
	 */
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -1;
	while (done < size) {
		ssize_t n = write(fd, data + done, size - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(fd);
			return -1;
		}
		done += (size_t)n;
	}
	return close(fd) ? -1 : 0;
}

uint8_t *fuzz_profile_file(const uint8_t *data, size_t size, size_t *len)
{
	uLongf zlen;
	uint8_t *out;

	if (size >= 7 && !memcmp(data, PROFILE_MAGIC, 7)) {
		out = malloc(size ? size : 1);
		if (out)
			memcpy(out, data, size);
		*len = size;
		return out;
	}
	if (!size)
		return NULL;
	zlen = compressBound((uLong)(size - 1));
	out = calloc(1, 40 + zlen);
	if (!out || compress2(out + 40, &zlen, data + 1, (uLong)(size - 1), 1) != Z_OK) {
		free(out);
		return NULL;
	}
	/* bits 2-3: 0 version 1 or 2 (bit 0), 1 version 3, 2 or 3 version 4 */
	uint32_t version =
		(data[0] >> 2 & 3) ? ((data[0] >> 2 & 3) == 1 ? 3 : 4) : (data[0] & 1 ? 2 : 1);
	uLong crc = 0;

	memcpy(out, PROFILE_MAGIC, 8);
	put_le32(out + 8, version);
	put_le32(out + 12, data[0] & 2 ? 1 : 0);
	put_le64(out + 16, size - 1);
	put_le64(out + 24, zlen);
	/* version 3 on, the checksum covers header bytes 8-31 first */
	if (version >= 3)
		crc = crc32(0, out + 8, 24);
	put_le32(out + 32, (uint32_t)crc32(crc, out + 40, (uInt)zlen));
	*len = 40 + zlen;
	return out;
}
