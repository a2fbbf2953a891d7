/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "profile/profile.h"
#include "render/render.h"

/* One frame of a test stack; len 0 means strlen(name). */
struct fr {
	const char *name;
	size_t len;
	enum frame_kind kind;
};

/* clang-format off */
#define U(s) { s, 0, FRAME_USER }
#define K(s) { s, 0, FRAME_KERNEL }
#define J(s) { s, 0, FRAME_JIT }
#define I(s) { s, 0, FRAME_INLINED }
#define S(s) { s, 0, FRAME_SPECIAL }
/* a name with embedded NULs: its length from the literal */
#define RAW(s) { s, sizeof(s) - 1, FRAME_USER }
/* clang-format on */

static struct profile *p;

static void setup(void)
{
	p = profile__new();
	cr_assert_not_null(p);
}

static void teardown(void)
{
	profile__free(p);
	p = NULL;
}

static uint32_t str(const char *s, size_t len)
{
	int64_t id = profile__string(p, s, len ? len : strlen(s));

	cr_assert_geq(id, 0);
	return (uint32_t)id;
}

static uint32_t thread(const char *comm, uint32_t tid)
{
	int64_t id = profile__thread(p, 100, tid, str(comm, 0));

	cr_assert_geq(id, 0);
	return (uint32_t)id;
}

static uint32_t stack(const struct fr *f, size_t n)
{
	uint32_t s = 0;

	for (size_t i = 0; i < n; i++) {
		int64_t fid = profile__frame(p, str(f[i].name, f[i].len), 0, f[i].kind);
		int64_t sid;

		cr_assert_geq(fid, 0);
		sid = profile__stack(p, s, (uint32_t)fid);
		cr_assert_geq(sid, 0);
		s = (uint32_t)sid;
	}
	return s;
}

#define STACK(...)                                \
	stack((const struct fr[]){ __VA_ARGS__ }, \
	      sizeof((const struct fr[]){ __VA_ARGS__ }) / sizeof(struct fr))

static void add(uint32_t thr, uint32_t stk, enum sample_kind kind, uint64_t weight, int times)
{
	for (int i = 0; i < times; i++) {
		struct pf_sample s = {
			.time = 1000 + (uint64_t)i,
			.weight = weight,
			.stack = stk,
			.thread = thr,
			.kind = kind,
		};
		cr_assert_eq(profile__add_sample(p, &s), 0);
	}
}

/* Render into a malloc'ed NUL-terminated string. */
static char *folded(const struct render_select *sel)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int err;

	cr_assert_not_null(f);
	err = render_folded(p, sel, f);
	cr_assert_eq(fclose(f), 0);
	cr_assert_eq(err, 0, "render_folded: %d", err);
	return buf;
}

static char *svg(const struct render_select *sel, const struct svg_opts *opts, size_t *len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);
	int err;

	cr_assert_not_null(f);
	err = render_svg(p, sel, opts, f);
	cr_assert_eq(fclose(f), 0);
	cr_assert_eq(err, 0, "render_svg: %d", err);
	if (len)
		*len = n;
	return buf;
}

static size_t count(const char *hay, size_t len, const char *needle)
{
	size_t n = 0, nl = strlen(needle);

	for (const char *h = hay; (h = memmem(h, len - (size_t)(h - hay), needle, nl)); h += nl)
		n++;
	return n;
}

/*
 * Write buf to a temp file and run xmllint on it: --noout, or an XPath
 * expression whose value goes to result. Returns xmllint's exit status.
 */
static int xmllint_xpath(const char *buf, size_t len, const char *xpath, char *result, size_t size)
{
	char path[] = "/tmp/dlflame-test-XXXXXX.svg";
	char cmd[512];
	int fd = mkstemps(path, 4), status;
	FILE *f;

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, buf, len), (ssize_t)len);
	close(fd);
	if (xpath)
		snprintf(cmd, sizeof(cmd), "xmllint --xpath '%s' %s", xpath, path);
	else
		snprintf(cmd, sizeof(cmd), "xmllint --noout %s", path);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	if (result) {
		size_t n = fread(result, 1, size - 1, f);

		result[n] = '\0';
	}
	status = pclose(f);
	unlink(path);
	cr_assert(WIFEXITED(status));
	return WEXITSTATUS(status);
}

static int xmllint(const char *buf, size_t len)
{
	return xmllint_xpath(buf, len, NULL, NULL, 0);
}

/* big enough for any output here: a write error shows only when flushed */
static char stdio_buf[1 << 20];

TestSuite(folded, .init = setup, .fini = teardown, .timeout = 30);
TestSuite(svg, .init = setup, .fini = teardown, .timeout = 30);
TestSuite(escape, .timeout = 10);

Test(folded, golden)
{
	uint32_t t1 = thread("trainer", 1), t2 = thread("omp worker", 2);
	uint32_t s_mm = STACK(U("main"), U("train"), U("matmul"));
	uint32_t s_wr = STACK(U("main"), U("train"), U("write"), K("ksys_write"), K("vfs_write"));
	uint32_t s_jit = STACK(U("start_thread"), I("omp_body"), J("brgemm_kernel"));
	uint32_t s_tr = STACK(U("start_thread"), S("[truncated]"));
	/* print identically once sanitised: merged into one line */
	uint32_t s_semi = STACK(U("main"), U("a;b"));
	uint32_t s_colon = STACK(U("main"), U("a:b"));
	char *out;

	add(t1, s_mm, SAMPLE_ONCPU, 1000, 3);
	add(t1, s_wr, SAMPLE_ONCPU, 1000, 2);
	add(t2, s_jit, SAMPLE_ONCPU, 1000, 4);
	add(t2, s_tr, SAMPLE_ONCPU, 1000, 1);
	add(t1, s_semi, SAMPLE_ONCPU, 1000, 1);
	add(t1, s_colon, SAMPLE_ONCPU, 1000, 2);
	add(t1, s_mm, SAMPLE_OFFCPU, 5000000, 7); /* not selected by default */
	add(t2, s_mm, SAMPLE_ONCPU, 1000, 1); /* same stack, other comm */

	out = folded(NULL);
	cr_assert_str_eq(out, "omp worker;main;train;matmul 1\n"
			      "omp worker;start_thread;[truncated] 1\n"
			      "omp worker;start_thread;omp_body_[i];brgemm_kernel_[j] 4\n"
			      "trainer;main;a:b 3\n"
			      "trainer;main;train;matmul 3\n"
			      "trainer;main;train;write;ksys_write_[k];vfs_write_[k] 2\n");
	free(out);
}

Test(folded, kinds_and_ns_weights)
{
	uint32_t t = thread("mlp", 1);
	uint32_t s1 = STACK(U("main"), K("schedule"));
	uint32_t s2 = STACK(U("main"), U("poll"));
	struct render_select sel = { .kinds = { [SAMPLE_OFFCPU] = true }, .weight_ns = true };
	char *out;

	add(t, s1, SAMPLE_OFFCPU, 1499, 1); /* 1.499 us */
	add(t, s1, SAMPLE_OFFCPU, 1000, 1); /* together 2.499 us -> 2 */
	add(t, s2, SAMPLE_OFFCPU, 2500000, 1); /* 2500 us */
	add(t, s2, SAMPLE_RUNQUEUE, 9000000, 1);
	add(t, s2, SAMPLE_ONCPU, 1000000, 5);
	add(t, STACK(U("main"), U("tiny")), SAMPLE_OFFCPU, 499, 1); /* rounds to 0: no line */

	out = folded(&sel);
	cr_assert_str_eq(out, "mlp;main;poll 2500\nmlp;main;schedule_[k] 2\n");
	free(out);

	sel.kinds[SAMPLE_RUNQUEUE] = true;
	sel.weight_ns = false;
	out = folded(&sel);
	cr_assert_str_eq(out, "mlp;main;poll 2\nmlp;main;schedule_[k] 2\nmlp;main;tiny 1\n");
	free(out);
}

/* Lines sort as `LC_ALL=C sort` sorts them, the count included. */
Test(folded, sorted_bytewise)
{
	uint32_t t = thread("c", 1);

	add(t, STACK(U("b 1")), SAMPLE_ONCPU, 1, 3);
	add(t, STACK(U("b")), SAMPLE_ONCPU, 1, 5);
	add(t, STACK(U("B")), SAMPLE_ONCPU, 1, 1);
	add(t, STACK(U("\xc3\xa9")), SAMPLE_ONCPU, 1, 1);
	add(t, STACK(U("b"), U("x")), SAMPLE_ONCPU, 1, 1);
	char *out = folded(NULL);

	cr_assert_str_eq(out, "c;B 1\nc;b 1 3\nc;b 5\nc;b;x 1\nc;\xc3\xa9 1\n");
	free(out);
}

Test(folded, hostile_names_add_no_frame_or_line)
{
	static const struct fr hostile[] = {
		U("a;b;c"),
		U("line\nbreak"),
		U("\x1b[31mred\x1b[0m"),
		RAW("nul\0inside"),
		U("bad\xff\xc3utf8"),
		U("cr\r;\t"),
		U("\xc2\x9b"
		  "2J"), /* C1 CSI */
		U(""),
		U(" 12"),
	};
	uint32_t t = thread("evil;comm\n\x1b", 1);
	size_t n = sizeof(hostile) / sizeof(hostile[0]);
	char *out, *line;
	size_t lines = 0;

	for (size_t i = 0; i < n; i++)
		add(t, stack(&hostile[i], 1), SAMPLE_ONCPU, 1, 1);
	/* the whole list as one deep stack too */
	add(t, stack(hostile, n), SAMPLE_ONCPU, 1, 1);

	out = folded(NULL);
	for (const char *c = out; *c; c++)
		cr_assert((unsigned char)*c >= 0x20 || *c == '\n', "control byte %#x in output",
			  *c);
	for (char *save = NULL, *s = out; (line = strtok_r(s, "\n", &save)); s = NULL) {
		size_t semis = 0;

		for (const char *c = line; *c; c++)
			semis += *c == ';';
		/* comm;frame is one ';', the deep stack has n */
		cr_assert(semis == 1 || semis == n, "line %zu has %zu ';': %s", lines, semis, line);
		cr_assert_eq(strncmp(line, "evil:comm??;", 12), 0, "%s", line);
		lines++;
	}
	cr_assert_eq(lines, n + 1);
	free(out);
}

Test(folded, large_profile)
{
	uint32_t thr[4] = { thread("a", 1), thread("b", 2), thread("a", 3), thread("c", 4) };
	uint32_t stk[64];
	char *out, name[32];
	uint64_t sum = 0;

	for (int i = 0; i < 64; i++) {
		snprintf(name, sizeof(name), "leaf%02d", i);
		stk[i] = stack((const struct fr[]){ U("main"), U("loop"), U(name) }, 3);
	}
	for (uint32_t i = 0; i < 1000000; i++) {
		struct pf_sample s = { .weight = 1,
				       .stack = stk[(i / 4) % 64],
				       .thread = thr[i % 4] };
		cr_assert_eq(profile__add_sample(p, &s), 0);
	}
	out = folded(NULL);
	for (char *l = out; (l = strchr(l, ' ')); l++)
		sum += strtoull(l + 1, NULL, 10);
	cr_assert_eq(sum, 1000000);
	cr_assert_eq(count(out, strlen(out), "\n"), 3 * 64); /* comms a, b, c */
	free(out);
}

Test(folded, write_errors)
{
	FILE *full = fopen("/dev/full", "w"), *ro = fopen("/dev/null", "r");

	add(thread("x", 1), STACK(U("main")), SAMPLE_ONCPU, 1, 1);
	cr_assert_not_null(full);
	cr_assert_not_null(ro);
	cr_assert_eq(render_folded(p, NULL, full), -ENOSPC);
	cr_assert_eq(render_folded(p, NULL, ro), -EBADF);
	fclose(full);
	fclose(ro);

	/* a buffer that holds it all: the error shows only when flushed */
	full = fopen("/dev/full", "w");
	cr_assert_not_null(full);
	cr_assert_eq(setvbuf(full, stdio_buf, _IOFBF, sizeof(stdio_buf)), 0);
	cr_assert_eq(render_folded(p, NULL, full), -ENOSPC);
	fclose(full);
}

Test(escape, folded_name)
{
	static const struct {
		const char *in;
		size_t len;
		const char *out;
	} cases[] = {
		{ "plain", 5, "plain" },
		{ "a;b", 3, "a:b" },
		{ "", 0, "[unnamed]" },
		{ "\x1b[1m\n\t\x7f", 7, "?[1m???" },
		{ "n\0l", 3, "n?l" },
		{ "\xff", 1, "\xef\xbf\xbd" },
		{ "x\xc3", 2, "x\xef\xbf\xbd" }, /* truncated sequence */
		{ "\xc3\xa9t\xc3\xa9", 5, "\xc3\xa9t\xc3\xa9" }, /* valid: kept */
		{ "\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd" }, /* overlong */
		{ "\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* surrogate */
		{ "\xe2\x82", 2, "\xef\xbf\xbd" }, /* maximal subpart: one U+FFFD */
		{ "\xf0\x9f\x94\xa5", 4, "\xf0\x9f\x94\xa5" },
		{ "\xc2\x85", 2, "?" }, /* C1 NEL */
	};
	char buf[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = render_folded_name(cases[i].in, cases[i].len, buf, sizeof(buf));

		cr_assert_str_eq(buf, cases[i].out, "case %zu", i);
		cr_assert_eq(n, strlen(cases[i].out), "case %zu", i);
	}
	/* short buffer: snprintf-like, never half a character */
	cr_assert_eq(render_folded_name("a\xc3\xa9", 3, buf, 3), 3);
	cr_assert_str_eq(buf, "a");
	cr_assert_eq(render_folded_name("abc", 3, buf, 0), 3);
}

static char *escaped(const char *s, size_t len)
{
	char *buf = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&buf, &n);

	cr_assert_not_null(f);
	cr_assert_eq(render_xml_escape(s, len, f), 0);
	fclose(f);
	return buf;
}

Test(escape, xml)
{
	static const struct {
		const char *in;
		size_t len;
		const char *out;
	} cases[] = {
		{ "<a href=\"x\">&'", 14, "&lt;a href=&quot;x&quot;&gt;&amp;&#39;" },
		{ "]]>", 3, "]]&gt;" },
		{ "&amp;", 5, "&amp;amp;" },
		{ "\t\n\r\x01\x7f\0", 6, "??????" },
		{ "\xef\xbf\xbe\xef\xbf\xbf", 6, "\xef\xbf\xbd\xef\xbf\xbd" }, /* U+FFFE, U+FFFF */
		{ "\xff\xc3", 2, "\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xe6\x97\xa5\xe6\x9c\xac", 6, "\xe6\x97\xa5\xe6\x9c\xac" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *out = escaped(cases[i].in, cases[i].len);

		cr_assert_str_eq(out, cases[i].out, "case %zu", i);
		free(out);
	}
}

Test(escape, xml_write_error)
{
	FILE *full = fopen("/dev/full", "w");
	char big[70000];

	memset(big, '<', sizeof(big));
	cr_assert_not_null(full);
	setvbuf(full, NULL, _IONBF, 0);
	cr_assert_eq(render_xml_escape(big, sizeof(big), full), -ENOSPC);
	fclose(full);
}

static const struct fr hostile_svg[] = {
	U("<script>alert(1)</script>"),
	U("\"onload=\"x"),
	U("' onmouseover='alert(2)"),
	U("]]>"),
	U("&amp;"),
	U("<![CDATA[x]]>"),
	U("\x1b[31m"),
	RAW("nul\0byte"),
	U("\xff\xc3"),
	U("\xef\xbf\xbe"),
	K("</title><script>alert(3)</script>"),
	J("<?xml version=\"1.0\"?>"),
	I("<!-- -->"),
	S("\r\n\t"),
	U(""),
};

Test(svg, hostile_names_are_well_formed)
{
	uint32_t t = thread("<script>alert(4)</script>", 1);
	size_t n = sizeof(hostile_svg) / sizeof(hostile_svg[0]), len;
	struct svg_opts opts = {
		.title = "<script>alert(5)</script>",
		.subtitle = "]]><x/>",
		.countname = "\"samples'",
	};
	unsigned long frames;
	char *out, res[64];

	for (size_t i = 0; i < n; i++)
		add(t, stack(&hostile_svg[i], 1), SAMPLE_ONCPU, 1, (int)i + 1);
	add(t, stack(hostile_svg, n), SAMPLE_ONCPU, 1, 50);

	out = svg(NULL, &opts, &len);
	cr_assert_eq(strlen(out), len, "NUL byte in the SVG");
	cr_assert_eq(xmllint(out, len), 0);
	cr_assert_eq(count(out, len, "<script>alert"), 0);
	cr_assert_eq(count(out, len, "<script"), 1);
	cr_assert_eq(count(out, len, "]]>"), 1, "only the script's CDATA ends");
	cr_assert_eq(count(out, len, "\x1b"), 0);
	/* as the parser sees it: no handler attribute, one script, one title per frame */
	cr_assert_eq(xmllint_xpath(out, len, "count(//@*[starts-with(name(), \"on\")])", res,
				   sizeof(res)),
		     0);
	cr_assert_eq(strtoul(res, NULL, 10), 0, "%s", res);
	cr_assert_eq(
		xmllint_xpath(out, len, "count(//*[local-name()=\"script\"])", res, sizeof(res)),
		0);
	cr_assert_eq(strtoul(res, NULL, 10), 1, "%s", res);
	cr_assert_eq(xmllint_xpath(out, len, "count(//*[local-name()=\"g\"][@class=\"f\"])", res,
				   sizeof(res)),
		     0);
	frames = strtoul(res, NULL, 10);
	cr_assert_eq(
		xmllint_xpath(out, len, "count(//*[local-name()=\"title\"])", res, sizeof(res)), 0);
	cr_assert_eq(strtoul(res, NULL, 10), frames);
	/* all, the comm, n single frames and the deep chain's n - 1 more */
	cr_assert_eq(frames, 2 + n + n - 1, "%lu frames", frames);
	cr_assert_gt(count(out, len, "&lt;script&gt;alert(1)&lt;/script&gt; ("), 0);
	cr_assert(strstr(out, "xmlns=\"http://www.w3.org/2000/svg\""));
	cr_assert(strstr(out, "viewBox=\"0 0 1200 "));
	free(out);
}

Test(svg, random_bytes_are_well_formed)
{
	uint32_t t = thread("fuzz", 1);
	unsigned seed = 12345;
	size_t len;
	char *out;

	for (int i = 0; i < 300; i++) {
		char name[24];
		struct fr f = { name, 1 + (size_t)(rand_r(&seed) % sizeof(name)), FRAME_USER };

		for (size_t j = 0; j < f.len; j++)
			name[j] = (char)(rand_r(&seed) & 0xff);
		/* a long chain, so that labels of all lengths get cut */
		add(t, stack((const struct fr[]){ U("main"), f }, 2), SAMPLE_ONCPU, 1, 1 + i % 7);
	}
	out = svg(NULL, NULL, &len);
	cr_assert_eq(strlen(out), len);
	cr_assert_eq(xmllint(out, len), 0);
	free(out);
}

/* x and width of the rect in the <g> whose title starts with `title`. */
static void rect_of(const char *doc, const char *title, double *x, double *w)
{
	char needle[256];
	const char *g, *r;

	snprintf(needle, sizeof(needle), "<title>%s", title);
	g = strstr(doc, needle);
	cr_assert_not_null(g, "no frame %s", title);
	r = strstr(g, "<rect ");
	cr_assert_not_null(r);
	cr_assert_eq(sscanf(r, "<rect x=\"%lf\" y=\"%*[0-9.]\" width=\"%lf\"", x, w), 2);
}

Test(svg, widths_follow_weights)
{
	uint32_t t = thread("mlp", 1);
	double drawable = 1200 - 2 * 10;
	double x_all, w_all, x_main, w_main, x_a, w_a, x_b, w_b, x_c, w_c;
	char *out;

	add(t, STACK(U("main"), U("b_gemm")), SAMPLE_ONCPU, 1, 5);
	add(t, STACK(U("main"), U("a_relu")), SAMPLE_ONCPU, 1, 3);
	add(t, STACK(U("main"), U("b_gemm"), K("page_fault")), SAMPLE_ONCPU, 1, 2);
	out = svg(NULL, NULL, NULL);

	rect_of(out, "all (10 samples, 100.00%)", &x_all, &w_all);
	rect_of(out, "main (10 samples, 100.00%)", &x_main, &w_main);
	rect_of(out, "a_relu (3 samples, 30.00%)", &x_a, &w_a);
	rect_of(out, "b_gemm (7 samples, 70.00%)", &x_b, &w_b);
	rect_of(out, "page_fault (2 samples, 20.00%)", &x_c, &w_c);
	cr_assert_float_eq(w_all, drawable, 0.01);
	cr_assert_float_eq(w_main, w_all, 0.01);
	cr_assert_float_eq(w_a, 0.3 * drawable, 0.01);
	cr_assert_float_eq(w_a + w_b, w_main, 0.02);
	cr_assert_float_eq(w_c, 0.2 * drawable, 0.01);
	/* siblings in name order, children from their parent's left edge */
	cr_assert_float_eq(x_a, 10, 0.01);
	cr_assert_float_eq(x_b, x_a + w_a, 0.01);
	cr_assert_float_eq(x_c, x_b, 0.01);
	cr_assert(strstr(out, "data-s=\"3\" data-w=\"7\"><title>b_gemm"));
	free(out);
}

Test(svg, thousands_and_countname)
{
	uint32_t t = thread("mlp", 1), s = STACK(U("main"));
	struct render_select sel = { .kinds = { [SAMPLE_OFFCPU] = true }, .weight_ns = true };
	struct svg_opts opts = { .countname = "us" };
	char *out;

	add(t, s, SAMPLE_ONCPU, 1, 1234567);
	out = svg(NULL, NULL, NULL);
	cr_assert(strstr(out, "<title>main (1,234,567 samples, 100.00%)</title>"));
	free(out);
	add(t, s, SAMPLE_OFFCPU, 2500000, 3);
	out = svg(&sel, &opts, NULL);
	cr_assert(strstr(out, "<title>main (7,500 us, 100.00%)</title>"), "%s", out);
	free(out);
}

Test(svg, prune_below_minwidth)
{
	uint32_t t = thread("mlp", 1);
	struct svg_opts opts = { .minwidth = 0.001 };
	char *out;

	add(t, STACK(U("main"), U("hot")), SAMPLE_ONCPU, 1, 99999);
	add(t, STACK(U("main"), U("rare"), U("rare_child")), SAMPLE_ONCPU, 1, 1);
	/* 1/100000 of 1180 px = 0.0118 px: under the default 0.1 */
	out = svg(NULL, NULL, NULL);
	cr_assert(strstr(out, "<title>hot ("));
	cr_assert_null(strstr(out, "<title>rare ("));
	cr_assert_null(strstr(out, "<title>rare_child ("));
	free(out);
	out = svg(NULL, &opts, NULL);
	cr_assert(strstr(out, "<title>rare ("));
	cr_assert(strstr(out, "<title>rare_child ("));
	free(out);
}

/* The empty label of the frame whose title starts with `title`. */
static bool label_empty(const char *doc, const char *title)
{
	char needle[256];
	const char *g, *end;

	snprintf(needle, sizeof(needle), "<title>%s", title);
	g = strstr(doc, needle);
	cr_assert_not_null(g, "no frame %s", title);
	end = strstr(g, "</g>");
	cr_assert_not_null(end);
	return end - g > 12 && !memcmp(end - 8, "></text>", 8);
}

Test(svg, labels_are_cut_to_fit)
{
	uint32_t t = thread("mlp", 1);
	char *out;

	add(t, STACK(U("main"), U("a_function_with_a_rather_long_name_indeed")), SAMPLE_ONCPU, 1,
	    1);
	add(t, STACK(U("main"), U("b_function")), SAMPLE_ONCPU, 1, 1);
	add(t, STACK(U("main"), U("b_function"), U("narrow")), SAMPLE_ONCPU, 1, 1);
	add(t, STACK(U("main"), U("z")), SAMPLE_ONCPU, 1, 77);
	out = svg(NULL, NULL, NULL);
	/* 2 of 80 samples: 29.5 px fits 4 characters of 7.08 px, two kept and ".." */
	cr_assert(strstr(out, ">b_..</text>"), "%s", out);
	/* 1 of 80: 14.75 px fits 2, too few for a label */
	cr_assert(label_empty(out, "a_function_with_a_rather_long_name_indeed ("));
	cr_assert(label_empty(out, "narrow ("));
	cr_assert(!label_empty(out, "z ("));
	cr_assert(strstr(out, ">z</text>"));
	free(out);
}

Test(svg, empty_profile)
{
	size_t len;
	char *out = svg(NULL, NULL, &len);

	cr_assert_eq(xmllint(out, len), 0);
	cr_assert(strstr(out, "No samples"));
	free(out);
}

Test(svg, bad_options)
{
	struct svg_opts narrow = { .width = 5 }, negative = { .minwidth = -1 };
	FILE *f = fopen("/dev/null", "w");

	cr_assert_eq(render_svg(p, NULL, &narrow, f), -EINVAL);
	cr_assert_eq(render_svg(p, NULL, &negative, f), -EINVAL);
	fclose(f);
}

Test(svg, write_errors)
{
	FILE *full = fopen("/dev/full", "w"), *ro = fopen("/dev/null", "r");

	add(thread("x", 1), STACK(U("main")), SAMPLE_ONCPU, 1, 1);
	cr_assert_eq(render_svg(p, NULL, NULL, full), -ENOSPC);
	cr_assert_eq(render_svg(p, NULL, NULL, ro), -EBADF);
	fclose(full);
	fclose(ro);

	/* a buffer that holds it all: the error shows only when flushed */
	full = fopen("/dev/full", "w");
	cr_assert_not_null(full);
	cr_assert_eq(setvbuf(full, stdio_buf, _IOFBF, sizeof(stdio_buf)), 0);
	cr_assert_eq(render_svg(p, NULL, NULL, full), -ENOSPC);
	fclose(full);
}

/* ---- quality: stack completeness and nameless modules ---- */

TestSuite(quality, .init = setup, .fini = teardown, .timeout = 30);

/* A stack of (name, module) user frames, root first, ending as end says. */
static uint32_t mod_stack(const char *const (*f)[2], size_t n, enum stack_end end)
{
	uint32_t s = 0;

	for (size_t i = 0; i < n; i++) {
		int64_t fid = profile__frame(p, str(f[i][0], 0), str(f[i][1], 0), FRAME_USER);
		int64_t sid;

		cr_assert_geq(fid, 0);
		sid = profile__stack(p, s, (uint32_t)fid);
		cr_assert_geq(sid, 0);
		s = (uint32_t)sid;
	}
	cr_assert_eq(profile__set_stack_end(p, s, end), 0);
	return s;
}

Test(quality, ends_line_names_the_biggest_causes)
{
	uint64_t w[STACK_END_MAX] = { 0 };
	char buf[256];

	cr_assert_eq(render_ends_line(w, buf, sizeof(buf)), 0, "no weight, no line");
	cr_assert_str_eq(buf, "");
	w[STACK_END_COMPLETE] = 9990;
	w[STACK_END_COPY] = 4;
	w[STACK_END_JIT] = 5;
	w[STACK_END_ERROR] = 1;
	render_ends_line(w, buf, sizeof(buf));
	/* 99.9, never rounded up to the whole; the three causes, biggest first */
	cr_assert_str_eq(buf, "99.9% of stacks complete; cut: JIT caller not recovered 0.1%, "
			      "stack copy exhausted 0.1%, unwind error 0.1%");
	w[STACK_END_DEPTH] = 2;
	render_ends_line(w, buf, sizeof(buf));
	cr_assert_null(strstr(buf, "unwind error"), "only three causes: %s", buf);
	/* unknown ends (an older profile) do not count against completeness */
	memset(w, 0, sizeof(w));
	w[STACK_END_COMPLETE] = 3;
	w[STACK_END_UNKNOWN] = 1;
	render_ends_line(w, buf, sizeof(buf));
	cr_assert_str_eq(buf, "100.0% of stacks complete");
	w[STACK_END_COMPLETE] = 0;
	render_ends_line(w, buf, sizeof(buf));
	cr_assert_str_eq(buf, "how stacks ended was not recorded (an older profile)");
	/* a short buffer is cut, still terminated */
	w[STACK_END_COMPLETE] = 3;
	cr_assert_eq(render_ends_line(w, buf, 8), 7);
	cr_assert_str_eq(buf, "100.0% ");
}

Test(quality, stack_ends_follow_the_selection)
{
	const char *const whole[][2] = { { "_start", "app" }, { "main", "app" } };
	const char *const cut[][2] = { { "[truncated]", "" }, { "work", "app" } };
	uint32_t t = thread("app", 1), sw = mod_stack(whole, 2, STACK_END_COMPLETE),
		 sc = mod_stack(cut, 2, STACK_END_COPY);
	struct render_select wall = { .kinds = { true, true, false }, .weight_ns = true };
	uint64_t w[STACK_END_MAX];

	add(t, sw, SAMPLE_ONCPU, 10, 3);
	add(t, sc, SAMPLE_ONCPU, 10, 1);
	add(t, sc, SAMPLE_OFFCPU, 1000, 1);
	cr_assert_eq(render_stack_ends(p, NULL, w), 0);
	cr_assert_eq(w[STACK_END_COMPLETE], 3);
	cr_assert_eq(w[STACK_END_COPY], 1);
	cr_assert_eq(render_stack_ends(p, &wall, w), 0);
	cr_assert_eq(w[STACK_END_COMPLETE], 30);
	cr_assert_eq(w[STACK_END_COPY], 1010);
}

Test(quality, hints_name_modules_without_symbols)
{
	const char *const a[][2] = { { "libc.so.6+0x1098e0", "libc.so.6" },
				     { "[libdnnl.so+0x40]", "libdnnl.so" },
				     { "libc.so.6+0x2000", "libc.so.6" } };
	const char *const b[][2] = { { "_start", "app" },
				     { "main", "app" },
				     { "app+0x10 is a name", "lib" } };
	const char *const c[][2] = { { "_start", "app" }, { "app+0x20", "app" } };
	uint32_t t = thread("app", 1), sa = mod_stack(a, 3, STACK_END_COMPLETE),
		 sb = mod_stack(b, 3, STACK_END_COMPLETE), sc = mod_stack(c, 2, STACK_END_COMPLETE);
	struct render_symbol_hint h[4];
	size_t n;

	add(t, sa, SAMPLE_ONCPU, 1, 60); /* libc twice in one stack: counted once */
	add(t, sb, SAMPLE_ONCPU, 1, 36);
	add(t, sc, SAMPLE_ONCPU, 1, 4);
	cr_assert_eq(render_symbol_hints(p, NULL, 0.05, h, 4, &n), 0);
	cr_assert_eq(n, 2, "libc.so.6 and libdnnl.so, not app at 4%%: %zu", n);
	cr_assert_str_eq(h[0].module, "libc.so.6");
	cr_assert_eq(h[0].weight, 60);
	cr_assert_float_eq(h[0].share, 0.6, 1e-9);
	cr_assert_str_eq(h[1].module, "libdnnl.so");
	cr_assert_eq(render_symbol_hints(p, NULL, 0.01, h, 4, &n), 0);
	cr_assert_eq(n, 3);
	cr_assert_str_eq(h[2].module, "app");
	/* on-CPU samples are chosen: off-CPU ones alone are too few to judge by */
	struct render_select off = { .kinds = { [SAMPLE_OFFCPU] = true } };

	add(t, sa, SAMPLE_OFFCPU, 1000, 49);
	cr_assert_eq(render_symbol_hints(p, &off, 0.05, h, 4, &n), 0);
	cr_assert_eq(n, 0, "49 samples: no hint");
	add(t, sa, SAMPLE_OFFCPU, 1000, 1);
	cr_assert_eq(render_symbol_hints(p, &off, 0.05, h, 4, &n), 0);
	cr_assert_eq(n, 2, "50 samples");
}

/*
 * The streamed folded output against the plain definition: one line per
 * distinct text, counts summed, in `LC_ALL=C sort` order. Random trees
 * whose names are prefixes of each other and hold bytes below ';' (space,
 * parentheses, digits, ':'), equal names of different frames, comms that
 * differ the same way, empty stacks and blocks under half a microsecond.
 */
struct ref_line {
	char text[512];
	uint64_t w;
};

static int ref_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ref_line *)a)->text, ((const struct ref_line *)b)->text);
}

Test(folded, streamed_order_is_sort_order)
{
	static const char
		*const names[] = { "f",	  "f(int)", "f ", "f0",		  "f:x", "g",
				   "g-1", "g!",	    "",	  "f(int) const", "f;" /* as f: */ };
	static const char *const comms[] = { "py", "py 1", "py(2)", "py:3", "python" };
	unsigned seed = 12345;

	for (int round = 0; round < 40; round++) {
		struct ref_line *ref = calloc(4000, sizeof(*ref));
		size_t nref = 0;
		bool by_ns = round & 1;
		struct render_select sel = {
			.kinds = { [SAMPLE_ONCPU] = true, [SAMPLE_OFFCPU] = true },
			.weight_ns = by_ns
		};
		char *out, *want;
		size_t wlen = 0;
		FILE *wf;

		cr_assert_not_null(ref);
		teardown();
		setup();
		for (int i = 0; i < 300; i++) {
			struct pf_sample s = { .time = (uint64_t)i };
			char text[512];
			int depth = rand_r(&seed) % 6, n;
			int64_t parent = 0;
			const char *comm = comms[rand_r(&seed) % 5];

			n = snprintf(text, sizeof(text), "%s", comm);
			for (int d = 0; d < depth; d++) {
				size_t k =
					(size_t)rand_r(&seed) % (sizeof(names) / sizeof(names[0]));
				/* two modules: equal names, different frames */
				int64_t fr = profile__frame_str(
					p, names[k], rand_r(&seed) & 1 ? "a" : "b", FRAME_USER);

				cr_assert_geq(fr, 0);
				parent = profile__stack(p, (uint32_t)parent, (uint32_t)fr);
				cr_assert_geq(parent, 0);
				n += snprintf(text + n, sizeof(text) - (size_t)n, ";%s",
					      k == 10  ? "f:"
					      : k == 8 ? "[unnamed]"
						       : names[k]);
			}
			s.stack = (uint32_t)parent;
			s.thread = thread(comm, (uint32_t)(rand_r(&seed) % 3));
			s.kind = rand_r(&seed) & 1 ? SAMPLE_OFFCPU : SAMPLE_ONCPU;
			s.weight = (uint64_t)(rand_r(&seed) % 3000);
			cr_assert_eq(profile__add_sample(p, &s), 0);
			if (!by_ns)
				s.weight = 1;
			if (!s.weight)
				continue;
			size_t k;
			for (k = 0; k < nref && strcmp(ref[k].text, text); k++)
				;
			if (k == nref)
				snprintf(ref[nref++].text, sizeof(ref[0].text), "%s", text);
			ref[k].w += s.weight;
		}
		/* the whole lines, "text count", sorted as bytes */
		for (size_t k = 0; k < nref; k++) {
			uint64_t c = by_ns ? ref[k].w / 1000 + (ref[k].w % 1000 >= 500) : ref[k].w;
			size_t l = strlen(ref[k].text);

			if (c)
				snprintf(ref[k].text + l, sizeof(ref[0].text) - l, " %llu",
					 (unsigned long long)c);
			else
				ref[k].text[0] = '\0';
		}
		qsort(ref, nref, sizeof(*ref), ref_cmp);
		wf = open_memstream(&want, &wlen);
		cr_assert_not_null(wf);
		for (size_t k = 0; k < nref; k++)
			if (ref[k].text[0])
				fprintf(wf, "%s\n", ref[k].text);
		cr_assert_eq(fclose(wf), 0);
		out = folded(&sel);
		cr_assert_str_eq(out, want, "round %d", round);
		free(out);
		free(want);
		free(ref);
	}
}

/* ---- report --ops ------------------------------------------------------------ */

TestSuite(ops, .init = setup, .fini = teardown, .timeout = 30);

static bool op_is(const char *name, const char *want, bool redispatch)
{
	struct render_op_ref ref;

	if (!render_op_parse(name, strlen(name), &ref))
		return want == NULL;
	return want && ref.len == strlen(want) && !memcmp(ref.s, want, ref.len) &&
	       ref.redispatch == redispatch;
}

Test(ops, parse_names)
{
	/* demangled with parameters, without, with a line or a clone suffix */
	cr_assert(op_is("at::_ops::conv2d::call(at::Tensor const&, long)", "conv2d", false));
	cr_assert(op_is("at::_ops::conv2d::call", "conv2d", false));
	cr_assert(op_is("at::_ops::add_Tensor::redispatch(c10::DispatchKeySet, at::Tensor const&)",
			"add_Tensor", true));
	cr_assert(op_is("at::_ops::relu::call (Operators_2.cpp:123)", "relu", false));
	cr_assert(op_is("at::_ops::relu::call [clone .cold]", "relu", false));
	/* not an operator entry */
	cr_assert(op_is("at::_ops::conv2d::schema", NULL, false));
	cr_assert(op_is("at::_ops::conv2d::callx", NULL, false));
	cr_assert(op_is("at::_ops::::call", NULL, false));
	cr_assert(op_is("at::_ops::con;v2d::call", NULL, false));
	cr_assert(op_is("at::_ops::conv2d", NULL, false));
	cr_assert(op_is("at::native::conv2d(at::Tensor const&)", NULL, false));
	cr_assert(op_is("xat::_ops::conv2d::call", NULL, false));
	cr_assert(op_is("", NULL, false));
	cr_assert(!render_op_parse(NULL, 0, &(struct render_op_ref){ 0 }));
	/* a name longer than any operator's: none */
	{
		char big[600] = "at::_ops::";

		memset(big + 10, 'a', 400);
		strcpy(big + 410, "::call");
		cr_assert(op_is(big, NULL, false));
	}
	/* embedded NUL: the length counts, the NUL ends the operator's name */
	cr_assert(!render_op_parse("at::_ops::relu\0::call", 21, &(struct render_op_ref){ 0 }));
}

Test(ops, overload_names)
{
	struct render_op_names n;
	char buf[256];

	render_op_names_init(&n);
	cr_assert_eq(render_op_names_add(&n, "add.Tensor", 10), 0);
	cr_assert_eq(render_op_names_add(&n, "_cast_Byte", 10), 0);
	cr_assert_eq(render_op_names_add(&n, "max_pool2d_with_indices_backward.grad_input", 43), 0);
	cr_assert_eq(render_op_names_add(&n, "relu", 4), 0);
	cr_assert_eq(render_op_names_add(&n, "add.Tensor", 10), 0); /* again: no change */
	/* hostile or malformed schema names are refused */
	cr_assert_eq(render_op_names_add(&n, "a.b.c", 5), -EINVAL);
	cr_assert_eq(render_op_names_add(&n, ".x", 2), -EINVAL);
	cr_assert_eq(render_op_names_add(&n, "x.", 2), -EINVAL);
	cr_assert_eq(render_op_names_add(&n, "a b", 3), -EINVAL);
	cr_assert_eq(render_op_names_add(&n, "a\nb", 3), -EINVAL);
	cr_assert_eq(render_op_names_add(&n, "", 0), -EINVAL);

	render_op_name(&n, "add_Tensor", 10, buf, sizeof(buf));
	cr_assert_str_eq(buf, "aten::add.Tensor");
	render_op_name(&n, "_cast_Byte", 10, buf, sizeof(buf));
	cr_assert_str_eq(buf, "aten::_cast_Byte");
	render_op_name(&n, "max_pool2d_with_indices_backward_grad_input", 43, buf, sizeof(buf));
	cr_assert_str_eq(buf, "aten::max_pool2d_with_indices_backward.grad_input");
	/* not in the schemas: shown whole */
	render_op_name(&n, "mul__Tensor", 11, buf, sizeof(buf));
	cr_assert_str_eq(buf, "aten::mul__Tensor");
	render_op_name(NULL, "mul__Tensor", 11, buf, sizeof(buf));
	cr_assert_str_eq(buf, "aten::mul__Tensor");
	/* cut to the buffer */
	cr_assert_eq(render_op_name(&n, "add_Tensor", 10, buf, 8), 7);
	cr_assert_str_eq(buf, "aten::a");
	render_op_names_free(&n);
}

static char *ops_table(const struct render_select *sel, const struct ops_opts *o)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	cr_assert_not_null(f);
	cr_assert_eq(render_ops(p, sel, o, f), 0);
	fclose(f);
	return text;
}

/* The SELF ms, TOTAL ms and (if any) COUNT of the row ending in name; false if none. */
static bool ops_row(const char *table, const char *name, double *self, double *total,
		    unsigned long *count)
{
	for (const char *l = table; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] == '\n')) {
		size_t n = strcspn(l, "\n"), nl = strlen(name);
		double a, b, c;

		*count = 0;
		if (n < nl + 2 || memcmp(l + n - nl - 2, "  ", 2) || memcmp(l + n - nl, name, nl))
			continue;
		if (sscanf(l, "%lf %*f%% %*f%% %lf %*f%% %lu", &a, &b, count) < 2)
			continue;
		(void)c;
		*self = a;
		*total = b;
		return true;
	}
	return false;
}

/*
 * The dispatcher's nesting: conv2d -> convolution (call, then its
 * redispatch past autograd: one level) -> mkldnn_convolution. Self goes to
 * the innermost level, total to each once; no operator counted apart.
 */
Test(ops, nesting_self_total)
{
	uint32_t t = thread("python3", 1);
	uint32_t conv =
		STACK(U("main"), U("at::_ops::conv2d::call(at::Tensor const&)"),
		      U("at::_ops::convolution::call(at::Tensor const&)"),
		      U("torch::autograd::VariableType::convolution"),
		      U("at::_ops::convolution::redispatch(c10::DispatchKeySet)"),
		      U("at::_ops::mkldnn_convolution::call(at::Tensor const&)"), U("dnnl_kernel"));
	uint32_t conv_self = STACK(U("main"), U("at::_ops::conv2d::call(at::Tensor const&)"),
				   U("at::_ops::convolution::call(at::Tensor const&)"),
				   U("torch::autograd::VariableType::convolution"),
				   U("at::_ops::convolution::redispatch(c10::DispatchKeySet)"),
				   U("at::native::convolution"));
	/* an operator within itself: its total once */
	uint32_t rec =
		STACK(U("main"), U("at::_ops::to_dtype::call"), U("at::_ops::_to_copy::call"),
		      U("at::_ops::to_dtype::call"), U("copy"));
	uint32_t none = STACK(U("main"), U("PyEval"));
	struct render_select sel = { .kinds = { [SAMPLE_ONCPU] = true } };
	struct ops_opts o = { 0 };
	double self, total;
	unsigned long count;
	char *text;

	add(t, conv, SAMPLE_ONCPU, 1000000, 6);
	add(t, conv_self, SAMPLE_ONCPU, 1000000, 2);
	add(t, rec, SAMPLE_ONCPU, 1000000, 1);
	add(t, none, SAMPLE_ONCPU, 1000000, 1);
	text = ops_table(&sel, &o);
	cr_log_info("%s", text);
	cr_assert(strstr(text, "Operators: 9.0 ms of 10.0 ms on-CPU in 5 operators (90.0%); in no "
			       "operator: 1.0 ms (10.0%)"),
		  "%s", text);
	cr_assert(strstr(text, "Times sampled, calls not counted"), "%s", text);
	cr_assert(ops_row(text, "aten::mkldnn_convolution", &self, &total, &count));
	cr_assert_float_eq(self, 6.0, 1e-9);
	cr_assert_float_eq(total, 6.0, 1e-9);
	cr_assert(ops_row(text, "aten::convolution", &self, &total, &count));
	cr_assert_float_eq(self, 2.0, 1e-9);
	cr_assert_float_eq(total, 8.0, 1e-9);
	cr_assert(ops_row(text, "aten::conv2d", &self, &total, &count));
	cr_assert_float_eq(self, 0.0, 1e-9);
	cr_assert_float_eq(total, 8.0, 1e-9);
	cr_assert(ops_row(text, "aten::to_dtype", &self, &total, &count));
	cr_assert_float_eq(self, 1.0, 1e-9);
	cr_assert_float_eq(total, 1.0, 1e-9);
	cr_assert(ops_row(text, "aten::_to_copy", &self, &total, &count));
	cr_assert_float_eq(self, 0.0, 1e-9);
	cr_assert_float_eq(total, 1.0, 1e-9);
	free(text);
}

/* Probed entries' calls: COUNT, AVG, MIN, MAX; by caller: the Python line outside the outermost. */
Test(ops, calls_and_callers)
{
	uint32_t t = thread("python3", 1);
	int64_t py = profile__frame(p, str("forward (net.py:12)", 0), 0, FRAME_PYTHON);
	uint32_t call, in_call, sampled;
	struct render_select sel = { .kinds = { [SAMPLE_ONCPU] = true } };
	struct ops_opts o = { .by_caller = true };
	double self, total;
	unsigned long count;
	char *text;

	cr_assert_geq(py, 0);
	call = (uint32_t)profile__stack(p, STACK(U("main")), (uint32_t)py);
	in_call = (uint32_t)profile__stack(
		p, call, (uint32_t)profile__frame(p, str("pyfunc", 0), 0, FRAME_USER));
	sampled = (uint32_t)profile__stack(
		p, in_call,
		(uint32_t)profile__frame(p, str("at::_ops::relu::call", 0), 0, FRAME_USER));
	add(t, sampled, SAMPLE_ONCPU, 1000000, 3);
	add(t, sampled, SAMPLE_CALL, 2000000, 1);
	add(t, sampled, SAMPLE_CALL, 4000000, 1);
	text = ops_table(&sel, &o);
	cr_log_info("%s", text);
	cr_assert(strstr(text, "Calls: 2 of 1 probed operators"), "%s", text);
	cr_assert(ops_row(text, "aten::relu <- forward (net.py:12)", &self, &total, &count), "%s",
		  text);
	cr_assert_float_eq(self, 3.0, 1e-9);
	cr_assert_eq(count, 2);
	cr_assert(strstr(text, "       2     3.000     2.000     4.000  aten::relu"), "%s", text);
	free(text);
}

/*
 * report --ranks: a rank that waited seconds at start-up for the others'
 * store (TCPStore, under init_process_group) is not the one the others wait
 * for; the straggler is judged on training-time waits only.
 */
static uint32_t rank_stack(const char *const *native, const char *const *py, const char *pyfile)
{
	int64_t s = 0;

	for (size_t i = 0; native[i]; i++) {
		int64_t fr =
			profile__frame_str(p, native[i], "/usr/lib/libtorch_cpu.so", FRAME_USER);

		cr_assert_geq(fr, 0);
		/* Python callers sit between the interpreter's frames and the library */
		if (i == 1)
			for (size_t k = 0; py[k]; k++) {
				int64_t name = profile__string(p, py[k], strlen(py[k]));
				int64_t file = profile__string(p, pyfile, strlen(pyfile));
				/* as the collector stores them: the file is the module too */
				struct pf_frame pf = { .name = (uint32_t)name,
						       .module = (uint32_t)file,
						       .file = (uint32_t)file,
						       .line = 10 + (uint32_t)k,
						       .kind = FRAME_PYTHON };
				int64_t pfr = profile__frame_full(p, &pf);

				cr_assert_geq(pfr, 0);
				s = profile__stack(p, (uint32_t)s, (uint32_t)pfr);
				cr_assert_geq(s, 0);
			}
		s = profile__stack(p, (uint32_t)s, (uint32_t)fr);
		cr_assert_geq(s, 0);
	}
	return (uint32_t)s;
}

static void rank_process(uint32_t pid, uint32_t rank)
{
	struct pf_process proc = { .pid = pid, .rank = rank, .local_rank = rank, .world_size = 2 };

	cr_assert_eq(profile__set_process(p, &proc), 0);
}

static void rank_sample(uint32_t pid, uint32_t stack, uint32_t kind, uint64_t ms, uint64_t t)
{
	int64_t comm = profile__string(p, "python3", 7);
	int64_t th = profile__thread(p, pid, pid, (uint32_t)comm);
	struct pf_sample s = { .time = t,
			       .weight = ms * 1000000ULL,
			       .stack = stack,
			       .thread = (uint32_t)th,
			       .kind = kind };

	cr_assert_geq(th, 0);
	cr_assert_eq(profile__add_sample(p, &s), 0);
}

Test(ranks, start_up_waits_never_decide_the_straggler, .init = setup, .fini = teardown)
{
	const char *store[] = {
		"_start", "_PyEval_EvalFrameDefault",
		"c10d::TCPStore::TCPStore(std::string, c10d::TCPStoreOptions const&)",
		"c10d::TCPStore::waitForWorkers()", NULL
	};
	const char *store_py[] = { "<module>", "init_process_group", "_create_c10d_store", NULL };
	const char *reduce[] = { "_start", "_PyEval_EvalFrameDefault",
				 "c10d::Reducer::finalize_backward()",
				 "c10d::ProcessGroupGloo::wait", NULL };
	const char *reduce_py[] = { "<module>", "train_step", "backward", NULL };
	const char *work[] = { "_start", "_PyEval_EvalFrameDefault", "at::native::tanh", NULL };
	const char *work_py[] = { "<module>", "extra_work", NULL };
	uint32_t s_store, s_reduce, s_work;
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	s_store = rank_stack(store, store_py,
			     "/usr/lib/python3/dist-packages/torch/distributed/rendezvous.py");
	s_reduce = rank_stack(reduce, reduce_py,
			      "/usr/lib/python3/dist-packages/torch/autograd/__init__.py");
	s_work = rank_stack(work, work_py, "/work/ddp_train.py");
	rank_process(100, 0);
	rank_process(200, 1);
	/* rank 1 started first: 1.5 s waiting for rank 0's store; rank 0 none */
	rank_sample(200, s_store, SAMPLE_OFFCPU, 1500, 1);
	/* training: rank 1 computes more, rank 0 waits 1.4 s for it in all-reduces, rank 1 0.05 s */
	rank_sample(200, s_work, SAMPLE_ONCPU, 3000, 2);
	rank_sample(100, s_work, SAMPLE_ONCPU, 1000, 2);
	rank_sample(100, s_reduce, SAMPLE_OFFCPU, 1400, 3);
	rank_sample(200, s_reduce, SAMPLE_OFFCPU, 50, 3);
	f = open_memstream(&buf, &len);
	cr_assert_not_null(f);
	cr_assert_eq(render_ranks(p, f), 0);
	fclose(f);
	cr_log_info("%s", buf);
	cr_assert_not_null(strstr(buf, "straggler: rank 1:"), "%s", buf);
	cr_assert_not_null(strstr(buf, "SET-UP s"), "%s", buf);
	/* rank 1's row: 0.05 s in comm, 1.5 s set-up; its most waited place is the all-reduce */
	cr_assert_not_null(
		strstr(buf, "      0.050      1.500  c10d::ProcessGroupGloo::wait < backward"),
		"%s", buf);
	cr_assert_null(strstr(buf, "TCPStore::"),
		       "a set-up wait named where a rank waited most: %s", buf);
	free(buf);
}

/*
 * report --ranks with the collectives probed (record --probe-collectives):
 * the n-th training-time hand-over of each rank is the same collective;
 * the rank whose hand-over came last at most of them, while the others
 * spent longer in them, is the straggler. DDP's constructor's broadcast is
 * set-up, whichever rank came late to it. Judged the same on a profile
 * relabelled for output (Python frames named "qualname (file.py)").
 */
static size_t count_lines_with(const char *text, const char *what)
{
	size_t n = 0;

	for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		const char *end = strchr(l, '\n'), *at = strstr(l, what);

		n += at && (!end || at < end);
	}
	return n;
}

static char *ranks_text(bool relabel)
{
	struct profile *q = relabel ? profile__relabel(p, false) : NULL;
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	cr_assert_not_null(f);
	cr_assert(!relabel || q);
	cr_assert_eq(render_ranks(q ? q : p, f), 0);
	fclose(f);
	profile__free(q);
	cr_log_info("%s", buf);
	return buf;
}

static void coll_stacks(uint32_t *setup, uint32_t *train, uint32_t *run)
{
	const char *bcast[] = { "_start", "_PyEval_EvalFrameDefault",
				"c10d::ProcessGroupGloo::broadcast(std::vector<at::Tensor>&)",
				"c10d::ProcessGroupGloo::enqueue(c10::intrusive_ptr<AsyncWork>)",
				NULL };
	const char *bcast_py[] = { "<module>", "DistributedDataParallel.__init__",
				   "_sync_module_states", NULL };
	const char *reduce[] = { "_start", "_PyEval_EvalFrameDefault",
				 "c10d::ProcessGroupGloo::allreduce(std::vector<at::Tensor>&)",
				 "c10d::ProcessGroupGloo::enqueue(c10::intrusive_ptr<AsyncWork>)",
				 NULL };
	const char *reduce_py[] = { "<module>", "train_step", "backward", NULL };
	const char *worker[] = {
		"start_thread", "c10d::ProcessGroupGloo::runLoop(int)",
		"c10d::ProcessGroupGloo::AsyncWork::execute(c10::intrusive_ptr<AsyncWork>)", NULL
	};
	const char *none[] = { NULL };

	*setup = rank_stack(bcast, bcast_py,
			    "/usr/lib/python3/dist-packages/torch/nn/parallel/distributed.py");
	*train = rank_stack(reduce, reduce_py,
			    "/usr/lib/python3/dist-packages/torch/autograd/__init__.py");
	*run = rank_stack(worker, none, "");
}

#define MS 1000000ULL

Test(ranks, probed_collectives_name_the_last_to_arrive, .init = setup, .fini = teardown)
{
	uint32_t s_setup, s_train, s_run;
	uint64_t t = 10000 * MS;
	char *text;

	coll_stacks(&s_setup, &s_train, &s_run);
	rank_process(100, 0);
	rank_process(200, 1);
	/* set-up: rank 1 came 5 s late to DDP's broadcast; rank 0's worker waited for it */
	rank_sample(100, s_setup, SAMPLE_CALL, 0, 1000 * MS);
	rank_sample(100, s_run, SAMPLE_CALL, 5000, 1000 * MS);
	/* ... and rank 1's Python frames were not read there: rank 0's stack tells */
	rank_sample(200, s_train, SAMPLE_CALL, 0, 6000 * MS);
	rank_sample(200, s_run, SAMPLE_CALL, 1, 6000 * MS);
	/* training: rank 1 hands over 20 ms after rank 0, but for one step where it is first */
	for (int k = 0; k < 10; k++, t += 100 * MS) {
		uint64_t late = k == 4 ? 0 : 20 * MS, early = k == 4 ? 1 * MS : 0;

		rank_sample(100, s_train, SAMPLE_CALL, 0, t + early);
		rank_sample(100, s_run, SAMPLE_CALL, 21, t + early);
		rank_sample(200, s_train, SAMPLE_CALL, 0, t + late);
		rank_sample(200, s_run, SAMPLE_CALL, 1, t + late);
	}
	for (int relabel = 0; relabel < 2; relabel++) {
		text = ranks_text(relabel);
		cr_assert_not_null(strstr(text,
					  "rank 0: 10 collectives in training (1 in set-up), "
					  "0.210 s in them, median 21.0 ms; arrived last at 1 "
					  "of 10"),
				   "%s", text);
		cr_assert_not_null(strstr(text, "rank 1: 10 collectives in training (1 in set-up), "
						"0.010 s in them, median 1.0 ms; arrived last at 9 "
						"of 10"),
				   "%s", text);
		cr_assert_not_null(strstr(text, "straggler: rank 1: it arrived last at 9 of 10"),
				   "%s", text);
		cr_assert_eq(count_lines_with(text, "straggler:"), 1, "%s", text);
		free(text);
	}
}

/* Ranks that arrive in turn and spend alike in the collectives: no straggler. */
Test(ranks, probed_collectives_alike_name_none, .init = setup, .fini = teardown)
{
	uint32_t s_setup, s_train, s_run;
	uint64_t t = 10000 * MS;
	char *text;

	coll_stacks(&s_setup, &s_train, &s_run);
	rank_process(100, 0);
	rank_process(200, 1);
	for (int k = 0; k < 10; k++, t += 100 * MS) {
		rank_sample(100, s_train, SAMPLE_CALL, 0, t + (k % 2 ? MS : 0));
		rank_sample(100, s_run, SAMPLE_CALL, 2, t + (k % 2 ? MS : 0));
		rank_sample(200, s_train, SAMPLE_CALL, 0, t + (k % 2 ? 0 : MS));
		rank_sample(200, s_run, SAMPLE_CALL, 2, t + (k % 2 ? 0 : MS));
	}
	text = ranks_text(false);
	cr_assert_not_null(strstr(text, "straggler: none: the ranks spent alike"), "%s", text);
	cr_assert_eq(count_lines_with(text, "straggler:"), 1, "%s", text);
	free(text);
}

/*
 * A rank always last by half a millisecond over a long run (the launcher
 * shares its CPU): its lateness is noise beside the training's span, no
 * straggler.
 */
Test(ranks, probed_collectives_late_by_noise_name_none, .init = setup, .fini = teardown)
{
	uint32_t s_setup, s_train, s_run;
	uint64_t t = 10000 * MS;
	char *text;

	coll_stacks(&s_setup, &s_train, &s_run);
	rank_process(100, 0);
	rank_process(200, 1);
	for (int k = 0; k < 100; k++, t += 1000 * MS) {
		rank_sample(100, s_train, SAMPLE_CALL, 0, t);
		rank_sample(100, s_run, SAMPLE_CALL, 1, t);
		rank_sample(200, s_train, SAMPLE_CALL, 0, t + MS / 2);
		rank_sample(200, s_run, SAMPLE_CALL, 0, t + MS / 2);
	}
	text = ranks_text(false);
	cr_assert_not_null(strstr(text,
				  "rank 1: 100 collectives in training (0 in set-up), "
				  "0.000 s in them, median 0.0 ms; arrived last at 100 of 100"),
			   "%s", text);
	cr_assert_not_null(strstr(text, "straggler: none: the ranks spent alike"), "%s", text);
	free(text);
}

/*
 * Sampled waits only (no probes): rank 1 waits least in communication
 * because it was preempted meanwhile, not because it worked more: no
 * straggler, and why.
 */
Test(ranks, sampled_late_for_want_of_a_cpu_is_no_straggler, .init = setup, .fini = teardown)
{
	const char *reduce[] = { "_start", "_PyEval_EvalFrameDefault",
				 "c10d::Reducer::finalize_backward()",
				 "c10d::ProcessGroupGloo::wait", NULL };
	const char *reduce_py[] = { "<module>", "train_step", "backward", NULL };
	const char *work[] = { "_start", "_PyEval_EvalFrameDefault", "at::native::tanh", NULL };
	const char *work_py[] = { "<module>", "forward", NULL };
	uint32_t s_reduce, s_work;
	uint64_t t = 10000 * MS;
	char *text;

	s_reduce = rank_stack(reduce, reduce_py,
			      "/usr/lib/python3/dist-packages/torch/autograd/__init__.py");
	s_work = rank_stack(work, work_py, "/work/ddp_train.py");
	rank_process(100, 0);
	rank_process(200, 1);
	for (int k = 0; k < 10; k++, t += 100 * MS) {
		rank_sample(100, s_work, SAMPLE_ONCPU, 50, t);
		rank_sample(200, s_work, SAMPLE_ONCPU, 50, t);
		rank_sample(200, s_work, SAMPLE_RUNQUEUE, 40, t + 10 * MS);
		rank_sample(100, s_reduce, SAMPLE_OFFCPU, 45, t + 50 * MS);
		rank_sample(200, s_reduce, SAMPLE_OFFCPU, 5, t + 90 * MS);
	}
	text = ranks_text(false);
	cr_assert_not_null(strstr(text,
				  "straggler: none: rank 1 waited least in communication "
				  "(0.050 s, the others 0.450 s on average), but it waited "
				  "0.360 s longer than they did for a CPU and ran 0.000 s more"),
			   "%s", text);
	cr_assert_eq(count_lines_with(text, "straggler:"), 1, "%s", text);
	free(text);
}

/*
 * A rank last to hand over because it waited for a CPU (preempted: more
 * runnable threads than CPUs), not because it had more to do: no
 * straggler, and why. The same lateness with more work of its own: the
 * straggler.
 */
static char *late_rank(uint64_t runq_ms, uint64_t work_ms)
{
	uint32_t s_setup, s_train, s_run;
	uint64_t t = 10000 * MS;

	coll_stacks(&s_setup, &s_train, &s_run);
	rank_process(100, 0);
	rank_process(200, 1);
	for (int k = 0; k < 10; k++, t += 100 * MS) {
		rank_sample(100, s_train, SAMPLE_CALL, 0, t);
		rank_sample(100, s_run, SAMPLE_CALL, 21, t);
		rank_sample(200, s_train, SAMPLE_CALL, 0, t + 20 * MS);
		rank_sample(200, s_run, SAMPLE_CALL, 1, t + 20 * MS);
		/* each step: 50 ms on a CPU each, and rank 1's extra */
		rank_sample(100, s_train, SAMPLE_ONCPU, 50, t + 30 * MS);
		rank_sample(200, s_train, SAMPLE_ONCPU, 50 + work_ms, t + 30 * MS);
		rank_sample(200, s_train, SAMPLE_RUNQUEUE, runq_ms, t + 40 * MS);
	}
	/* before training (import, set-up): waits for a CPU that do not count */
	rank_sample(100, s_train, SAMPLE_RUNQUEUE, 5000, 1000 * MS);
	return ranks_text(false);
}

Test(ranks, late_for_want_of_a_cpu_is_no_straggler, .init = setup, .fini = teardown)
{
	char *text = late_rank(20, 1);

	cr_assert_not_null(strstr(text,
				  "straggler: none: rank 1 arrived last at 10 of 10 "
				  "collectives and the others spent 0.200 s more in them, but "
				  "it waited 0.180 s longer than they did for a CPU and ran "
				  "0.009 s more"),
			   "%s", text);
	cr_assert_eq(count_lines_with(text, "straggler:"), 1, "%s", text);
	free(text);
}

Test(ranks, late_for_more_work_is_the_straggler, .init = setup, .fini = teardown)
{
	char *text = late_rank(1, 20);

	cr_assert_not_null(strstr(text, "straggler: rank 1: it arrived last at 10 of 10"), "%s",
			   text);
	cr_assert_eq(count_lines_with(text, "straggler:"), 1, "%s", text);
	free(text);
}

/*
 * DDP's constructor's first collective (the parameters' shapes checked)
 * with no Python frames read on either rank: its native frame says set-up.
 */
Test(ranks, probed_setup_told_by_native_frames, .init = setup, .fini = teardown)
{
	const char *verify[] = { "_start",
				 "_PyEval_EvalFrameDefault",
				 "c10d::verify_params_across_processes(c10::intrusive_ptr<c10d::"
				 "ProcessGroup> const&, std::vector<at::Tensor> const&)",
				 "c10d::ProcessGroupGloo::allgather(std::vector<at::Tensor>&)",
				 "c10d::ProcessGroupGloo::enqueue(c10::intrusive_ptr<AsyncWork>)",
				 NULL };
	const char *none[] = { NULL };
	uint32_t s_setup, s_train, s_run, s_verify = rank_stack(verify, none, "");
	uint64_t t = 10000 * MS;
	char *text;

	coll_stacks(&s_setup, &s_train, &s_run);
	rank_process(100, 0);
	rank_process(200, 1);
	rank_sample(100, s_verify, SAMPLE_CALL, 0, 1000 * MS);
	rank_sample(100, s_run, SAMPLE_CALL, 3000, 1000 * MS);
	rank_sample(200, s_verify, SAMPLE_CALL, 0, 4000 * MS);
	rank_sample(200, s_run, SAMPLE_CALL, 1, 4000 * MS);
	for (int k = 0; k < 10; k++, t += 100 * MS) {
		rank_sample(100, s_train, SAMPLE_CALL, 0, t);
		rank_sample(100, s_run, SAMPLE_CALL, 2, t);
		rank_sample(200, s_train, SAMPLE_CALL, 0, t);
		rank_sample(200, s_run, SAMPLE_CALL, 2, t);
	}
	text = ranks_text(false);
	for (int r = 0; r < 2; r++) {
		char line[64];

		snprintf(line, sizeof(line), "rank %d: 10 collectives in training (1 in set-up)",
			 r);
		cr_assert_not_null(strstr(text, line), "%s", text);
	}
	free(text);
}

/* --per-rank (and --per-thread) name each thread's comm after its rank: a row per rank and operator. */
Test(ops, per_rank_rows)
{
	uint32_t r0 = thread("rank 0", 1), r1 = thread("rank 1", 2);
	uint32_t mm = STACK(U("main"), U("at::_ops::mm::call"), U("gemm"));
	struct render_select sel = { .kinds = { [SAMPLE_ONCPU] = true } };
	struct ops_opts o = { .by_root = true };
	double self, total;
	unsigned long count;
	char *text;

	add(r0, mm, SAMPLE_ONCPU, 1000000, 3);
	add(r1, mm, SAMPLE_ONCPU, 1000000, 5);
	/* a call's stack ends in the probed entry; one ending elsewhere is no operator's call */
	add(r1, STACK(U("main"), U("at::_ops::mm::call")), SAMPLE_CALL, 1000000, 2);
	add(r1, mm, SAMPLE_CALL, 1000000, 1);
	text = ops_table(&sel, &o);
	cr_log_info("%s", text);
	cr_assert(ops_row(text, "[rank 0] aten::mm", &self, &total, &count), "%s", text);
	cr_assert_float_eq(self, 3.0, 1e-9);
	cr_assert(ops_row(text, "[rank 1] aten::mm", &self, &total, &count), "%s", text);
	cr_assert_float_eq(self, 5.0, 1e-9);
	cr_assert_eq(count, 2);
	free(text);
}
