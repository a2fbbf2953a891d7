/* SPDX-License-Identifier: MIT */
/*
 * Replays a fuzz target's corpus without libFuzzer (any compiler): calls
 * LLVMFuzzerTestOneInput once per file of each directory (or file) given,
 * in name order. A crash or a sanitizer report fails the test; so does an
 * empty corpus, which would test nothing. Prints one line: how many inputs.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/fuzz/fuzz.h"

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long len;

	if (!f || fseek(f, 0, SEEK_END) || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET))
		goto fail;
	/* a copy of its own size, so that ASan catches a read one byte past the input */
	buf = malloc(len ? (size_t)len : 1);
	if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len)
		goto fail;
	fclose(f);
	LLVMFuzzerTestOneInput(buf, (size_t)len);
	free(buf);
	return 0;
fail:
	fprintf(stderr, "replay: %s: %s\n", path, strerror(errno ? errno : EIO));
	if (f)
		fclose(f);
	free(buf);
	return -1;
}

int main(int argc, char **argv)
{
	size_t runs = 0;
	int status = 0;

	for (int i = 1; i < argc; i++) {
		struct dirent **ents;
		struct stat st;
		int n;

		if (stat(argv[i], &st)) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			status |= run_file(argv[i]) ? 1 : 0;
			runs++;
			continue;
		}
		n = scandir(argv[i], &ents, NULL, alphasort);
		if (n < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		for (int j = 0; j < n; j++) {
			char path[4096];

			if (ents[j]->d_name[0] != '.' &&
			    (size_t)snprintf(path, sizeof(path), "%s/%s", argv[i],
					     ents[j]->d_name) < sizeof(path) &&
			    !stat(path, &st) && S_ISREG(st.st_mode)) {
				status |= run_file(path) ? 1 : 0;
				runs++;
			}
			free(ents[j]);
		}
		free(ents);
	}
	printf("replay: %zu inputs\n", runs);
	if (!runs) {
		fprintf(stderr, "replay: no inputs\n");
		return 1;
	}
	return status;
}
