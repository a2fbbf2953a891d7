/* SPDX-License-Identifier: MIT */
/*
 * dlflame record: launch a command or attach to running processes, sample
 * on-CPU stacks and context switches, symbolize, write dlflame.data.
 */
#include "cmd.h"
#include "util/util.h"
#include "options.h"
#include "probes.h"
#include "session.h"
#include "quality.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_OUTPUT "dlflame.data"
/* samples held in memory (32 bytes each) before they move to a temporary file */
#define DEFAULT_SPILL_SAMPLES (256 * 1024)

struct record_opts {
	uint64_t freq;
	const char *output;
	bool forward_exit;
	bool no_offcpu;
	bool no_faults;
	struct target_opts target;
	const char *probe_specs[SAMPLER_MAX_PROBES];
	size_t nr_probe_specs;
	uint32_t probe_stack; /* --probe-stack; 0: the sampler's default */
	uint32_t buffer_mb; /* --buffer; 0: the sampler's default */
	bool probe_ops; /* --probe-ops */
	bool probe_coll; /* --probe-collectives */
	bool no_probe_coll; /* --no-probe-collectives */
	const char *probe_ops_list; /* its LIST, or NULL: the default set */
	const char *cgroup; /* --cgroup PATH */
	int cgroup_fd; /* its directory, -1 without --cgroup */
};

static void record_usage(FILE *f)
{
	fprintf(f,
		"Usage: dlflame record [OPTIONS] -- COMMAND [ARGS...]\n"
		"       dlflame record [OPTIONS] -p PID[,PID...] | -t TID[,TID...] [-d SECONDS]\n"
		"       dlflame record [OPTIONS] --cgroup PATH [-d SECONDS]\n\n"
		"Run COMMAND, or attach to running processes, sample their on-CPU stacks and\n"
		"the stacks where their threads block (every thread and child process),\n"
		"symbolize them and write a self-contained profile.\n\n"
		"Options:\n"
		"  -F, --freq HZ            samples per second per CPU (default %d)\n"
		"  -g, --call-graph MODE    how user stacks are walked: 'dwarf[,BYTES]' copies\n"
		"                           BYTES of stack per sample and unwinds it with the\n"
		"                           binaries' CFI (default dwarf,32768; BYTES a multiple\n"
		"                           of 8 up to 65528); 'fp' follows frame pointers\n"
		"      --no-offcpu          do not record context switches (no blocked time)\n"
		"      --no-faults          do not sample page faults (where memory is first\n"
		"                           touched: report --faults, --memory); launch mode only\n"
		"      --probe [MODULE:]FUNCTION\n"
		"                           count and time every call of FUNCTION (uprobes; MODULE\n"
		"                           a path or a library's name, else COMMAND and the\n"
		"                           libraries it needs); see report --calls\n"
		"      --probe-stack BYTES  stack copied at each probed call (default 8192): more\n"
		"                           reaches the Python frames under deep native code\n"
		"                           (PyTorch: 32768), but bursts of calls lose records\n"
		"      --probe-ops[=LIST]   count and time PyTorch's operators (uprobes on their\n"
		"                           dispatcher entries in libtorch_cpu): LIST as torch names\n"
		"                           them, e.g. conv2d,addmm,add.Tensor (also given as\n"
		"                           '--probe-ops LIST -- COMMAND'); without it, the layer,\n"
		"                           loss and optimizer operators most trainers use, forward\n"
		"                           and backward; see report --ops\n"
		"      --probe-collectives  count and time each gloo collective per rank (uprobes\n"
		"                           in libtorch_cpu): report --ranks then tells, for every\n"
		"                           all-reduce, which rank arrived last; the default as\n"
		"                           root where PyTorch has gloo (quietly, without it)\n"
		"      --no-probe-collectives  judge the straggler from sampled waits only\n" NO_PYTHON_USAGE
			PYTHON_FRAMES_USAGE
		"  -p, --pid PID[,PID...]   attach to these processes, every thread of each,\n"
		"                           including threads created while recording\n"
		"  -t, --tid TID[,TID...]   attach to these threads only\n"
		"      --cgroup PATH        every process of this cgroup v2 directory and the\n"
		"                           ones below it (a container, a pod), including those\n"
		"                           started while recording; until -d or Ctrl-C\n"
		"  -d, --duration SECONDS   stop after this long (default: until Ctrl-C or the\n"
		"                           targets exit)\n"
		"      --buffer MIB         how far the recording may fall behind the kernel\n"
		"                           (default 1024, or an eighth of the memory): past\n"
		"                           three quarters samples are kept without their\n"
		"                           stacks, past all of it records are lost\n"
		"  -o, --output FILE        profile to write (default dlflame.data)\n"
		"      --forward-exit       exit with COMMAND's exit status (128+N if killed by signal N)\n"
		"  -h, --help               show this help\n\n"
		"A launched COMMAND gets ONEDNN_JIT_PROFILE=2 and DNNL_JIT_PROFILE=2 in its\n"
		"environment (unless either is set) so that oneDNN's JIT kernels are named.\n"
		"Ctrl-C (or SIGTERM/SIGHUP) stops the recording; the profile is still written.\n"
		"An attached process is never stopped or signalled.\n\n"
		"Examples:\n"
		"  dlflame record -- ./mlp 200\n"
		"  OMP_NUM_THREADS=2 dlflame record -F 499 -o mlp.data -- ./mlp 500\n"
		"  dlflame record -g fp -- ./a.out\n"
		"  dlflame record -p 4242 -d 30\n",
		SAMPLER_DEFAULT_FREQ);
}

static uint64_t max_sample_rate(void)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_max_sample_rate", "r");
	unsigned long long v = 100000;

	if (f) {
		if (fscanf(f, "%llu", &v) != 1)
			v = 100000;
		fclose(f);
	}
	return v;
}

static int parse_args(int argc, char **argv, struct record_opts *o, int *cmd_index)
{
	enum {
		OPT_FORWARD_EXIT = 256,
		OPT_NO_OFFCPU,
		OPT_PROBE,
		OPT_FAULTS,
		OPT_NO_FAULTS,
		OPT_PROBE_STACK,
		OPT_PROBE_OPS,
		OPT_PROBE_COLL,
		OPT_NO_PROBE_COLL,
		OPT_CGROUP,
		OPT_BUFFER,
	};
	static const struct option longopts[] = {
		{ "freq", required_argument, NULL, 'F' },
		{ "call-graph", required_argument, NULL, 'g' },
		{ "no-python", no_argument, NULL, OPT_NO_PYTHON },
		{ "python-frames", required_argument, NULL, OPT_PYTHON_FRAMES },
		{ "no-offcpu", no_argument, NULL, OPT_NO_OFFCPU },
		{ "probe", required_argument, NULL, OPT_PROBE },
		{ "probe-stack", required_argument, NULL, OPT_PROBE_STACK },
		{ "probe-ops", optional_argument, NULL, OPT_PROBE_OPS },
		{ "probe-collectives", no_argument, NULL, OPT_PROBE_COLL },
		{ "no-probe-collectives", no_argument, NULL, OPT_NO_PROBE_COLL },
		{ "faults", no_argument, NULL, OPT_FAULTS }, /* the default; kept for old scripts */
		{ "no-faults", no_argument, NULL, OPT_NO_FAULTS },
		{ "pid", required_argument, NULL, 'p' },
		{ "cgroup", required_argument, NULL, OPT_CGROUP },
		{ "tid", required_argument, NULL, 't' },
		{ "duration", required_argument, NULL, 'd' },
		{ "output", required_argument, NULL, 'o' },
		{ "forward-exit", no_argument, NULL, OPT_FORWARD_EXIT },
		{ "buffer", required_argument, NULL, OPT_BUFFER },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	uint64_t max_rate = max_sample_rate();
	int c, err;

	optind = 1;
	opterr = 0;
	/* '+': stop at the first non-option, which starts the command */
	while ((c = getopt_long(argc, argv, "+:F:g:p:t:d:o:h", longopts, NULL)) != -1) {
		switch (c) {
		case 'F':
			if (parse_u64(optarg, 10, 1, max_rate, &o->freq))
				return usage_error("record",
						   "-F takes a frequency from 1 to %llu Hz "
						   "(kernel.perf_event_max_sample_rate), got '%s'",
						   (unsigned long long)max_rate, optarg);
			break;
		case OPT_NO_OFFCPU:
			o->no_offcpu = true;
			break;
		case OPT_FAULTS:
			o->no_faults = false;
			break;
		case OPT_NO_FAULTS:
			o->no_faults = true;
			break;
		case OPT_PROBE:
			if (o->nr_probe_specs == SAMPLER_MAX_PROBES)
				return usage_error("record", "at most %d --probe options",
						   SAMPLER_MAX_PROBES);
			o->probe_specs[o->nr_probe_specs++] = optarg;
			break;
		case OPT_PROBE_COLL:
			o->probe_coll = true;
			break;
		case OPT_NO_PROBE_COLL:
			o->no_probe_coll = true;
			break;
		case OPT_PROBE_OPS:
			o->probe_ops = true;
			o->probe_ops_list = optarg;
			break;
		case OPT_PROBE_STACK: {
			uint64_t bytes;

			if (parse_u64(optarg, 10, 8, 65528, &bytes) || bytes % 8)
				return usage_error(
					"record",
					"--probe-stack takes bytes, a multiple of 8 from 8 "
					"to 65528, got '%s'",
					optarg);
			o->probe_stack = (uint32_t)bytes;
			break;
		}
		case OPT_BUFFER: {
			uint64_t mb;

			if (parse_u64(optarg, 10, SAMPLER_MIN_BUFFER_MB, 1u << 20, &mb))
				return usage_error(
					"record", "--buffer takes MiB from %d to 1048576, got '%s'",
					SAMPLER_MIN_BUFFER_MB, optarg);
			o->buffer_mb = (uint32_t)mb;
			break;
		}
		case 'g':
		case 'p':
		case 't':
		case 'd':
		case OPT_NO_PYTHON:
		case OPT_PYTHON_FRAMES:
			err = target_opts__parse(&o->target, "record", c, optarg);
			if (err)
				return err;
			break;
		case 'o':
			if (!*optarg)
				return usage_error("record", "-o needs a file name");
			o->output = optarg;
			break;
		case OPT_FORWARD_EXIT:
			o->forward_exit = true;
			break;
		case OPT_CGROUP: {
			int fd;

			if (o->cgroup_fd >= 0)
				return usage_error("record", "give --cgroup once");
			/* a bad PATH: one line (what, why, what to do), exit 2 */
			fd = open(optarg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
			if (fd < 0) {
				error("--cgroup %s: %s; give a cgroup v2 directory, e.g. "
				      "/sys/fs/cgroup/system.slice/docker-ID.scope",
				      optarg, strerror(errno));
				return EXIT_USAGE;
			}
			if (sampler__cgroup_check(fd)) {
				close(fd);
				error("--cgroup %s is not a cgroup v2 directory; give one under the "
				      "cgroup2 mount (grep cgroup2 /proc/mounts), e.g. "
				      "/sys/fs/cgroup/system.slice/docker-ID.scope",
				      optarg);
				return EXIT_USAGE;
			}
			o->cgroup_fd = fd;
			o->cgroup = optarg;
			break;
		}
		case 'h':
			record_usage(stdout);
			return -1;
		case ':':
			return usage_error("record", "option '%s' needs a value", argv[optind - 1]);
		default:
			return usage_error("record", "unknown option '%s'", argv[optind - 1]);
		}
	}
	/* '--probe-ops LIST -- COMMAND': the word before the -- is the list */
	if (o->probe_ops && !o->probe_ops_list && optind + 1 < argc &&
	    !strcmp(argv[optind + 1], "--")) {
		o->probe_ops_list = argv[optind];
		optind += 2;
	}
	if (o->probe_coll && o->no_probe_coll)
		return usage_error("record", "--probe-collectives and --no-probe-collectives: "
					     "give one");
	if (o->cgroup && (o->target.nr_pids || optind < argc))
		return usage_error("record", "--cgroup records a whole cgroup: give no command "
					     "and no -p/-t with it");
	if (o->cgroup && (o->nr_probe_specs || o->probe_ops || o->probe_coll))
		return usage_error("record", "--probe and --probe-ops need a command or -p, not "
					     "--cgroup");
	if (o->cgroup) {
		*cmd_index = optind;
		return 0;
	}
	if (o->target.nr_pids && optind < argc)
		return usage_error("record", "give either a command or -p/-t, not both ('%s')",
				   argv[optind]);
	if (!o->target.nr_pids && optind >= argc)
		return usage_error(
			"record",
			"no command to record (put it after --) and no -p PID to attach to");
	if (o->target.nr_pids && o->forward_exit)
		return usage_error("record", "--forward-exit needs a launched command");
	if (o->probe_stack && !o->nr_probe_specs && !o->probe_ops && !o->probe_coll)
		return usage_error("record", "--probe-stack goes with --probe or --probe-ops");
	if (o->target.threads_only && (o->nr_probe_specs || o->probe_ops || o->probe_coll))
		return usage_error("record", "--probe follows whole processes: use -p, not -t");
	if ((o->nr_probe_specs || o->probe_ops || o->probe_coll) &&
	    o->target.callgraph != CALLGRAPH_DWARF)
		return usage_error("record", "--probe needs --call-graph dwarf (the default)");
	*cmd_index = optind;
	return 0;
}

static char *join_args(char **argv)
{
	size_t len = 1;
	char *s;

	for (char **a = argv; *a; a++)
		len += strlen(*a) + 1;
	s = malloc(len);
	if (!s)
		return NULL;
	s[0] = '\0';
	for (char **a = argv; *a; a++) {
		if (a != argv)
			strcat(s, " ");
		strcat(s, *a);
	}
	return s;
}

/* ---- record ------------------------------------------------------------- */

/* The probes could not be opened: what is missing; the recording goes on without them. */
static void warn_probes(int err)
{
	if (err == -ENODEV)
		warning("no uprobe PMU (/sys/bus/event_source/devices/uprobe: a kernel with "
			"CONFIG_UPROBE_EVENTS): recording without probes");
	else if (err == -EACCES || err == -EPERM)
		warning("uprobes need root (or CAP_PERFMON with kernel.perf_event_paranoid 1 or "
			"lower): recording without probes");
	else
		warning("cannot open the probes (%s): recording without probes", strerror(-err));
}

static void describe_exit(int status, const char *cmd)
{
	if (WIFSIGNALED(status))
		warning("%s was killed by signal %d (%s); the recording up to then is kept", cmd,
			WTERMSIG(status), strsignal(WTERMSIG(status)));
	else if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		warning("%s exited with status 127 (it may have failed to start)", cmd);
	else if (WIFEXITED(status) && WEXITSTATUS(status))
		warning("%s exited with status %d; the recording up to then is kept "
			"(--forward-exit exits with it)",
			cmd, WEXITSTATUS(status));
}

static int exit_code_of(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return EXIT_BAD;
}

/*
 * A long recording keeps its samples in an unlinked file next to the output,
 * not in memory. DLFLAME_SPILL_SAMPLES (0 never spills) lets tests spill early.
 */
static int set_spill(struct profile *prof, const char *output)
{
	const char *env = getenv("DLFLAME_SPILL_SAMPLES");
	uint64_t at = DEFAULT_SPILL_SAMPLES;
	char *copy = strdup(output);
	int err;

	if (!copy)
		return error("out of memory");
	if (env && parse_u64(env, 10, 0, SIZE_MAX, &at)) {
		warning("ignoring DLFLAME_SPILL_SAMPLES=%s: not a number of samples", env);
		at = DEFAULT_SPILL_SAMPLES;
	}
	err = profile__set_spill(prof, (size_t)at, dirname(copy));
	free(copy);
	if (err)
		return error("out of memory");
	return 0;
}

int cmd_record(int argc, char **argv)
{
	struct record_opts o = { .freq = SAMPLER_DEFAULT_FREQ,
				 .output = DEFAULT_OUTPUT,
				 .target = TARGET_OPTS_DEFAULT,
				 .cgroup_fd = -1 };
	struct sampler_opts so = { 0 };
	struct session ss = { 0 };
	struct probe_set probes = { 0 };
	bool coll_auto = false; /* the collectives probed by default */
	const struct sampler_stats *st;
	const struct collect_stats *cs;
	char msg[512], offcpu[64] = "", ends[256], **env = NULL, **cmd = NULL;
	struct quality_hints hints = { 0 };
	char *command = NULL;
	pid_t child = -1;
	int status = 0, cmd_index = 0, err, err2, ret = EXIT_BAD;
	bool child_done = false;
	uint64_t t0;

	err = parse_args(argc, argv, &o, &cmd_index);
	if (err) {
		free(o.target.pids);
		if (o.cgroup_fd >= 0)
			close(o.cgroup_fd);
		return err < 0 ? EXIT_OK : err;
	}
	if (!o.target.nr_pids && !o.cgroup)
		cmd = argv + cmd_index;

	err = check_output_dir(o.output);
	if (err) {
		free(o.target.pids);
		return error("cannot write %s: %s; choose another path with -o", o.output,
			     strerror(-err));
	}

	so.freq = o.freq;
	so.callgraph = o.target.callgraph;
	so.stack_size = o.target.stack_size;
	so.offcpu = !o.no_offcpu;
	for (size_t i = 0; i < o.nr_probe_specs; i++) {
		char exe[64];

		/* without a MODULE: the command, or the first attached process's executable */
		if (!cmd)
			snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)o.target.pids[0]);
		ret = probes_resolve(&probes, o.probe_specs[i], cmd ? cmd[0] : exe,
				     cmd ? 0 : o.target.pids[0]);
		if (ret != EXIT_OK)
			goto out;
	}
	if (o.probe_ops) {
		ret = probes_resolve_ops(&probes, o.probe_ops_list);
		if (ret != EXIT_OK)
			goto out;
	}
	/*
	 * The default as root: a distributed PyTorch job's straggler is judged
	 * from each collective's hand-over (sampled waits name a rank that is
	 * merely a little slower, 2-3 runs in 10); a job without gloo, or a
	 * machine without it, is recorded as before, and nothing is said.
	 */
	if (!o.probe_coll && !o.no_probe_coll && !o.cgroup && !o.target.threads_only &&
	    o.target.callgraph == CALLGRAPH_DWARF && geteuid() == 0 &&
	    probes_runs_python(cmd, o.target.pids, o.target.nr_pids) &&
	    probes_resolve_collectives(&probes, true) == EXIT_OK)
		coll_auto = true;
	if (o.probe_coll || coll_auto) {
		ret = o.probe_coll ? probes_resolve_collectives(&probes, false) : EXIT_OK;
		if (ret != EXIT_OK)
			goto out;
		/*
		 * A few collectives a step: a copy deep enough for the Python
		 * frames under the autograd engine and c10d (which tell set-up
		 * from training) costs little, unless other probes share it.
		 */
		if (!o.probe_stack && !o.probe_ops && !o.nr_probe_specs)
			o.probe_stack = 32768;
	}
	ret = EXIT_BAD;
	so.probes = probes.probes;
	so.nr_probes = probes.n;
	so.probe_stack_size = o.probe_stack;
	so.buffer_mb = o.buffer_mb;
	if (probes.nr_anywhere) {
		/* a library loaded during the recording may define a FUNCTION given without MODULE */
		so.on_map = probes_on_map;
		so.on_map_ctx = &probes;
	}
	/*
	 * Page faults (launch mode, unless --no-faults): a sample every
	 * SAMPLER_FAULT_PERIOD faults, each weighted by the faults it stands
	 * for (its layout has no period field: see the sampler's events).
	 */
	so.fault_period = !o.no_faults && cmd ? SAMPLER_FAULT_PERIOD : 0;
	if (session__open(&ss, &so,
			  o.target.no_python			     ? SESSION_PY_NONE
			  : o.target.python_frames == PY_FRAMES_READ ? SESSION_PY_READ
			  : o.target.python_frames == PY_FRAMES_BPF  ? SESSION_PY_BPF
								     : SESSION_PY_AUTO) ||
	    set_spill(ss.prof, o.output))
		goto out;
	probes.sampler = ss.s;
	ss.watch_maps = so.on_map != NULL;
	ss.offcpu = so.offcpu;

	t0 = monotonic_ns();
	if (o.cgroup) {
		if (session__cgroup(&ss, o.cgroup_fd, o.cgroup))
			goto out;
		session__handle_signals();
	} else if (o.target.nr_pids) {
		if (session__attach(&ss, o.target.pids, o.target.nr_pids, o.target.threads_only))
			goto out;
		if (sampler__stats(ss.s)->probe_err &&
		    !(coll_auto && !o.nr_probe_specs && !o.probe_ops))
			warn_probes(sampler__stats(ss.s)->probe_err);
		session__handle_signals();
	} else {
		env = session__child_env();
		if (!env) {
			error("out of memory");
			goto out;
		}
		err = sampler__launch(ss.s, cmd, env, &child);
		if (err) {
			error("cannot record '%s': %s", cmd[0],
			      sampler__open_strerror(err, msg, sizeof(msg)));
			goto out;
		}
		/* its rank from the environment it is given, even if it is gone before its exec's record is read */
		if (collector__rank_from_envp(ss.col, (uint32_t)child, env))
			error("out of memory");
		if (sampler__stats(ss.s)->kernel_excluded)
			warn_kernel_excluded(ss.offcpu);
		if (sampler__stats(ss.s)->probe_err &&
		    !(coll_auto && !o.nr_probe_specs && !o.probe_ops))
			warn_probes(sampler__stats(ss.s)->probe_err);
		session__handle_signals();
		t0 = monotonic_ns();
		err = sampler__start(ss.s);
		if (err) {
			error("cannot start '%s': %s", cmd[0],
			      sampler__open_strerror(err, msg, sizeof(msg)));
			goto out;
		}
	}

	command = cmd ? join_args(cmd) : NULL;
	session__journal(&ss, o.output, o.freq, command);
	err = session__run(&ss, child, o.target.duration_ns, &status, &child_done);
	if (err) {
		/* keep what was recorded: write it, then report the failure */
		error("recording stopped early: %s", strerror(-err));
	}
	if (cmd) {
		if (!child_done && waitpid(child, &status, WNOHANG) == child)
			child_done = true;
		if (child_done)
			describe_exit(status, cmd[0]);
		else
			warning("%s (pid %d) is still running; it is no longer recorded", cmd[0],
				child);
	}

	session__fill_meta(&ss, o.freq, cmd ? command : ss.command);
	/* the hints go with the profile: every report says the same, once */
	err2 = quality_store_hints(ss.prof, ss.sym);
	if (!err2)
		err2 = quality_hints_load(ss.prof, &hints);
	if (err2)
		warning("cannot find the modules without symbols: %s", strerror(-err2));
	int werr = profile__write(ss.prof, o.output);
	if (werr) {
		error("cannot write %s: %s", o.output, strerror(-werr));
		goto out;
	}
	double secs = (double)(monotonic_ns() - t0) / 1e9;
	st = sampler__stats(ss.s);
	cs = collector__stats(ss.col);
	if (ss.offcpu)
		snprintf(offcpu, sizeof(offcpu), ", %.2f s blocked", (double)cs->offcpu_ns / 1e9);
	render_ends_line(cs->samples ? cs->oncpu_ends : cs->offcpu_end_ns, ends, sizeof(ends));
	info("%.2f s, %llu samples%s, %llu lost, %s%s%zu threads -> %s; next: dlflame report%s%s "
	     "--svg",
	     secs, (unsigned long long)cs->samples, offcpu, (unsigned long long)st->lost, ends,
	     *ends ? ", " : "", profile__nr_threads(ss.prof), o.output,
	     strcmp(o.output, DEFAULT_OUTPUT) ? " -i " : "",
	     strcmp(o.output, DEFAULT_OUTPUT) ? o.output : "");
	session__warnings(&ss);
	probes_report_late(&probes);
	probes_warn_unmapped(&probes, ss.sym);
	quality_hint_line(&hints, strcmp(o.output, DEFAULT_OUTPUT) ? o.output : NULL);
	if (cs->samples == 0 && !cs->offcpu_samples)
		warning("no samples were recorded: %s ran for too short a time",
			cmd ? cmd[0] : "the target");
	if (err)
		ret = EXIT_BAD;
	else if (o.forward_exit && child_done)
		ret = exit_code_of(status);
	else
		ret = EXIT_OK;
out:
	quality_hints_free(&hints);
	session__close(&ss);
	probes_free(&probes);
	free(command);
	free(env);
	free(o.target.pids);
	if (o.cgroup_fd >= 0)
		close(o.cgroup_fd);
	return ret;
}
