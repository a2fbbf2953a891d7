/* SPDX-License-Identifier: MIT */
/*
 * dlflame merge: profiles of one distributed job, recorded on several
 * hosts (one `dlflame record` each), joined into one profile that every
 * report, --per-rank, --ranks and diff read.
 */
#include "cmd.h"
#include "import.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "profile/filter.h"
#include "profile/profile.h"

static void merge_usage(FILE *f)
{
	fputs("Usage: dlflame merge FILE FILE... -o OUT\n\n"
	      "Join profiles of one job recorded on several hosts (one dlflame record per\n"
	      "host): every process keeps its host and rank, and sample times are placed on\n"
	      "one clock by the hosts' wall clocks. Frames are named already: nothing needs\n"
	      "the other hosts' files.\n\n"
	      "  -o, --output OUT      the merged profile (required)\n"
	      "  -h, --help            show this help\n\n"
	      "Examples:\n"
	      "  dlflame merge host0.data host1.data -o job.data\n"
	      "  dlflame report -i job.data --ranks\n",
	      f);
}

int cmd_merge(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *output = NULL;
	struct profile **in = NULL, *out = NULL;
	int c, n = 0, ret = EXIT_BAD, err;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (!*optarg)
				return usage_error("merge", "-o needs a file name");
			output = optarg;
			break;
		case 'h':
			merge_usage(stdout);
			return EXIT_OK;
		case ':':
			return usage_error("merge", "option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("merge", "unknown option '%s'", argv[optind - 1]);
		}
	}
	if (!output)
		return usage_error("merge", "say where the merged profile goes: -o OUT");
	if (argc - optind < 2)
		return usage_error("merge", "give two or more profiles to merge");
	n = argc - optind;
	in = calloc((size_t)n, sizeof(*in));
	if (!in)
		return error("out of memory");
	for (int i = 0; i < n; i++) {
		if (load_input(argv[optind + i], &in[i]))
			goto out;
		if (profile__file_version(in[i]) != profile__file_version(in[0])) {
			error("%s is a version %u profile and %s version %u: merge profiles recorded "
			      "by the same dlflame (record the older one again)",
			      argv[optind], profile__file_version(in[0]), argv[optind + i],
			      profile__file_version(in[i]));
			goto out;
		}
		if (!profile__cmeta(in[i])->finalized)
			warning("%s was not finalized (the recorder was killed); merging what it "
				"holds",
				argv[optind + i]);
	}
	for (int i = 0; i < n; i++) {
		for (int k = i + 1; k < n; k++) {
			struct profile_clash cl;

			err = profile__merge_clash(in[i], in[k], &cl);
			if (err == -EEXIST && cl.process)
				error("%s and %s both hold process %u of host %s: the same recording "
				      "twice? nothing written",
				      argv[optind + i], argv[optind + k], cl.pid, cl.host);
			else if (err == -EEXIST)
				error("%s and %s both hold rank %u (on %s and %s): profiles of "
				      "different jobs? nothing written",
				      argv[optind + i], argv[optind + k], cl.rank, cl.host,
				      cl.other_host);
			else if (err)
				error("cannot compare %s and %s: %s", argv[optind + i],
				      argv[optind + k], strerror(-err));
			if (err)
				goto out;
		}
	}
	out = profile__new();
	if (!out) {
		error("out of memory");
		goto out;
	}
	for (int i = 0; i < n; i++) {
		err = profile__merge(out, in[i], i == 0);
		if (err) {
			error("cannot merge %s: %s", argv[optind + i],
			      err == -EINVAL ? "the profile is inconsistent (a corrupt file?)"
					     : strerror(-err));
			goto out;
		}
	}
	err = profile__write(out, output);
	if (err) {
		error("cannot write %s: %s", output, strerror(-err));
		goto out;
	}
	info("merged %d profiles (%zu samples, %zu processes with ranks) -> %s", n,
	     profile__nr_samples(out), profile__nr_processes(out), output);
	ret = EXIT_OK;
out:
	for (int i = 0; i < n; i++)
		profile__free(in[i]);
	free(in);
	profile__free(out);
	return ret;
}
