/* SPDX-License-Identifier: MIT */
#include "import.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cmd.h"
#include "collect/collect.h"
#include "session.h"
#include "sampler/perfdata.h"

static int profile_error(const char *path, int err, const struct profile_read_error *e)
{
	if (err == -EINVAL && e->what)
		return error("cannot read %s: %s (at %s offset %llu); it is not a complete dlflame "
			     "profile: record it again",
			     path, e->what, e->in_payload ? "decompressed" : "byte",
			     (unsigned long long)e->offset);
	if (err == -ENOENT)
		return error("cannot read %s: no such file; record one with 'dlflame record -- "
			     "COMMAND' or name it with -i",
			     path);
	return error("cannot read %s: %s", path, strerror(-err));
}

static void set_str(struct profile *p, uint32_t *field, const char *s)
{
	int64_t id = profile__string(p, s, strlen(s));

	*field = id > 0 ? (uint32_t)id : 0;
}

static int import_perfdata(const char *path, struct profile **out)
{
	struct profile *prof = profile__new();
	struct symbolizer *sym = symbolizer__new();
	struct perfdata_error e = { 0 };
	struct perfdata_info info;
	struct collector *col = prof && sym ? collector__new(prof, sym) : NULL;
	const struct collect_stats *cs;
	int err, ret = EXIT_BAD;

	if (!col) {
		error("out of memory");
		goto out;
	}
	/*
	 * Kernel frames of a perf.data are named from this machine's kallsyms,
	 * as perf does; it is read meanwhile, they are named at the end.
	 */
	symbolizer__load_kallsyms_async(sym, "/proc/kallsyms");
	err = perfdata__read(path, collector__record, col, &info, &e);
	if (err == -EINVAL && e.what) {
		error("cannot read %s: %s (%s record at byte offset %llu); the perf.data is corrupt "
		      "or truncated: record it again",
		      path, e.what, e.record ? e.record : "?", (unsigned long long)e.offset);
		goto out;
	}
	if (err == -EOPNOTSUPP && e.what) {
		error("cannot read %s: %s (%s record at byte offset %llu); not corrupt, but not what "
		      "dlflame reads (docs/perfdata.md lists what it reads)",
		      path, e.what, e.record ? e.record : "?", (unsigned long long)e.offset);
		goto out;
	}
	if (err) {
		error("cannot read %s: %s", path, strerror(-err));
		goto out;
	}
	/* threads still switched out when perf stopped are charged up to its last record */
	cs = collector__stats(col);
	err = collector__finish(col, cs->last_time);
	if (err) {
		error("cannot import %s: %s", path, strerror(-err));
		goto out;
	}
	warn_dropped(cs);
	if (info.unknown)
		warning("%s: %llu records of kinds dlflame does not know (the first: type %u, from a "
			"later perf?) were skipped; the samples are read whole",
			path, (unsigned long long)info.unknown, info.unknown_type);
	struct pf_meta *m = profile__meta(prof);
	m->start_time = cs->first_time;
	m->end_time = cs->last_time;
	m->lost = info.lost;
	m->freq = info.freq;
	m->finalized = info.finalized;
	set_str(prof, &m->event, info.event);
	set_str(prof, &m->command, path);
	*out = prof;
	prof = NULL;
	ret = 0;
out:
	collector__free(col);
	symbolizer__free(sym);
	profile__free(prof);
	return ret;
}

/* Whether boot (a string id of p) is the boot id of the running kernel. */
static bool same_boot(const struct profile *p, uint32_t boot)
{
	char id[64] = "";
	FILE *f;

	if (!boot || !(f = fopen("/proc/sys/kernel/random/boot_id", "re")))
		return false;
	if (!fgets(id, sizeof(id), f))
		id[0] = '\0';
	fclose(f);
	id[strcspn(id, "\n")] = '\0';
	return !strcmp(id, profile__str(p, boot));
}

/*
 * A recorder killed before it named its frames left their locations: name
 * them now from the module files still on disk (and kallsyms, if the
 * kernel is the one that ran the recording).
 */
static int name_recovered(const char *path, struct profile *p)
{
	struct collect_recover_stats st;
	struct symbolizer *sym;
	bool boot;
	int err;

	if (!profile__nr_locs(p))
		return 0;
	sym = symbolizer__new();
	if (!sym)
		return error("out of memory");
	boot = same_boot(p, profile__boot_id(p));
	if (boot && symbolizer__load_kallsyms(sym, "/proc/kallsyms"))
		boot = false;
	err = collector__name_recovered(p, sym, boot, &st);
	symbolizer__free(sym);
	if (err)
		return error("cannot name the frames of %s: %s", path, strerror(-err));
	if (st.frames_unnamed)
		warning("%llu frames of %s stay unnamed: %llu of the files it ran are gone or were "
			"replaced since it was recorded",
			(unsigned long long)st.frames_unnamed, path,
			(unsigned long long)st.modules_missing);
	return 0;
}

int load_input(const char *path, struct profile **out)
{
	struct profile_read_error e = { 0 };
	uint8_t magic[8];
	ssize_t n = 0;
	int fd, err;

	if (strcmp(path, "-") == 0)
		return import_perfdata(path, out); /* only perf's pipe format streams */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd >= 0) {
		n = read(fd, magic, sizeof(magic));
		close(fd);
	}
	if (n == (ssize_t)sizeof(magic) && perfdata__is_perf_file(magic, sizeof(magic)))
		return import_perfdata(path, out);
	err = profile__read(path, out, &e);
	if (err)
		return profile_error(path, err, &e);
	err = name_recovered(path, *out);
	if (err) {
		profile__free(*out);
		*out = NULL;
	}
	return err;
}
