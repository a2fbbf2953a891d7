/* SPDX-License-Identifier: MIT */
/* Build-ids of files and of a profile's frames: the container tests' checks (buildids.h). */
#include <criterion/criterion.h>
#include <string.h>

#include "buildids.h"
#include "profile/profile.h"
#include "run.h"

/* The GNU build-id of a file, lower-case hex (free it). */
char *build_id(const char *dir, const char *path)
{
	const char *argv[] = { "/usr/bin/readelf", "-n", path, NULL };
	struct run_result r = run(dir, NULL, NULL, argv);
	char *at, *id;

	cr_assert_eq(r.status, 0, "readelf -n %s: %s", path, r.err);
	at = strstr(r.out, "Build ID: ");
	cr_assert_not_null(at, "%s has no build-id", path);
	at += 10;
	id = strndup(at, strspn(at, "0123456789abcdef"));
	run_free(&r);
	return id;
}

/*
 * How many frames of modules named module (exact basename) the profile
 * holds; each must carry build-id want (none came from another file of
 * that name, the host's).
 */
size_t frames_of(const char *data, const char *module, const char *want)
{
	struct profile *p = NULL;
	struct profile_read_error e = { 0 };
	size_t n = 0;

	cr_assert_eq(profile__read(data, &p, &e), 0, "%s", e.what ? e.what : "read failed");
	for (size_t i = 0; i < profile__nr_frames(p); i++) {
		const struct pf_frame *f = profile__get_frame(p, (uint32_t)i);
		const char *bid;

		if (strcmp(profile__str(p, f->module), module))
			continue;
		bid = f->build_id ? profile__str(p, f->build_id) : "";
		cr_assert_str_eq(bid, want,
				 "a frame of %s (%s) has build-id %s, not the container's", module,
				 profile__str(p, f->name), bid);
		n++;
	}
	profile__free(p);
	return n;
}
