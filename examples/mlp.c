/* SPDX-License-Identifier: MIT */
/*
 * mlp: a multilayer-perceptron trainer on the oneDNN C API, the workload that
 * dlflame is demonstrated and tested on.
 *
 * Network 784-512-256-10 (inner product + ReLU, twice, then inner product and
 * softmax), batch 64, f32, plain nc/oi layouts, one CPU engine and stream.
 * The data is synthetic and MNIST-shaped: each class has a fixed 28x28
 * prototype of a few strokes, and a sample is its prototype shifted, dimmed
 * and drowned in noise. The primitives are created once and executed every
 * iteration, as in a real trainer: that is what makes oneDNN generate and run
 * its JIT kernels.
 *
 * usage: mlp [ITERATIONS]   (default 1500; threads follow OMP_NUM_THREADS)
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_debug.h>

#define BATCH 64
#define SIDE 28
#define PIXELS (SIDE * SIDE)
#define STROKES 3
#define SHIFT 2
#define NOISE 1.2f
#define NOISE_POOL 65536
#define NLAYERS 3
#define NCLASSES 10
#define DEFAULT_ITERATIONS 1500
#define LEARNING_RATE 0.05f

static const int64_t dims[NLAYERS + 1] = { PIXELS, 512, 256, NCLASSES };

/* Names of the primitives (fields of struct net), for error messages. */
static const char *const ip_fwd_names[] = { "ip_fwd[0]", "ip_fwd[1]", "ip_fwd[2]" };
static const char *const ip_bwd_data_names[] = { "", "ip_bwd_data[1]", "ip_bwd_data[2]" };
static const char *const ip_bwd_weights_names[] = { "ip_bwd_weights[0]", "ip_bwd_weights[1]",
						    "ip_bwd_weights[2]" };
static const char *const relu_fwd_names[] = { "relu_fwd[0]", "relu_fwd[1]" };
static const char *const relu_bwd_names[] = { "relu_bwd[0]", "relu_bwd[1]" };

/*
 * Every oneDNN call goes through CHECK (or check with the name of the
 * primitive it concerns): a failure names the call and exits 1.
 */
#define CHECK(call) check((call), #call, NULL, __LINE__)

static void check(dnnl_status_t s, const char *call, const char *what, int line)
{
	if (s == dnnl_success)
		return;
	fprintf(stderr, "mlp: %.*s%s%s failed at mlp.c:%d: %s\n", (int)strcspn(call, "("), call,
		what ? " for " : "", what ? what : "", line, dnnl_status2str(s));
	exit(1);
}

struct net {
	dnnl_engine_t engine;
	dnnl_stream_t stream;
	/* Parameters and their gradients; W[l] is out x in (oi), b[l] is out. */
	dnnl_memory_t w[NLAYERS], b[NLAYERS], dw[NLAYERS], db[NLAYERS];
	/*
	 * Activations: x is the input, h[l] the output of inner product l,
	 * a[l] = relu(h[l]) for the hidden layers, p = softmax(h[2]).
	 * dh and da are the gradients of the loss with respect to h and a.
	 */
	dnnl_memory_t x, h[NLAYERS], a[NLAYERS - 1], p;
	dnnl_memory_t dh[NLAYERS], da[NLAYERS - 1];
	/* Primitives; ip_bwd_data[0] stays NULL: no gradient for the input. */
	dnnl_primitive_t ip_fwd[NLAYERS], ip_bwd_data[NLAYERS];
	dnnl_primitive_t ip_bwd_weights[NLAYERS];
	dnnl_primitive_t relu_fwd[NLAYERS - 1], relu_bwd[NLAYERS - 1];
	dnnl_primitive_t softmax;
	int labels[BATCH];
};

/* splitmix64: a small, fixed-seed generator, so every run sees the same data. */
static uint64_t rng_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static float rng_float(uint64_t *state)
{
	return (float)(rng_next(state) >> 40) * (1.0f / 16777216.0f);
}

/*
 * oneDNN 3.0 replaced the operation descriptors of the 2.x C API (a
 * dnnl_*_desc_t filled by dnnl_*_desc_init, then one generic
 * dnnl_primitive_desc_create) by one dnnl_*_primitive_desc_create per
 * primitive, and made memory descriptors opaque handles. The trainer is the
 * same on both: the few calls that differ are below, chosen by the headers'
 * version (dnnl_version() says which library runs; main() checks the two
 * agree).
 */
#if DNNL_VERSION_MAJOR >= 3
typedef const_dnnl_memory_desc_t md_t;
#else
typedef const dnnl_memory_desc_t *md_t;
#endif

static dnnl_memory_t new_memory(dnnl_engine_t engine, int ndims, const int64_t *d,
				dnnl_format_tag_t tag)
{
	dnnl_memory_t m;
#if DNNL_VERSION_MAJOR >= 3
	dnnl_memory_desc_t md;

	CHECK(dnnl_memory_desc_create_with_tag(&md, ndims, d, dnnl_f32, tag));
	CHECK(dnnl_memory_create(&m, md, engine, DNNL_MEMORY_ALLOCATE));
	CHECK(dnnl_memory_desc_destroy(md));
#else
	dnnl_memory_desc_t md;

	CHECK(dnnl_memory_desc_init_by_tag(&md, ndims, d, dnnl_f32, tag));
	CHECK(dnnl_memory_create(&m, &md, engine, DNNL_MEMORY_ALLOCATE));
#endif
	return m;
}

static dnnl_memory_t new_matrix(dnnl_engine_t engine, int64_t rows, int64_t cols,
				dnnl_format_tag_t tag)
{
	int64_t d[2] = { rows, cols };

	return new_memory(engine, 2, d, tag);
}

static float *data_of(dnnl_memory_t m)
{
	void *ptr;

	CHECK(dnnl_memory_get_data_handle(m, &ptr));
	return ptr;
}

static md_t desc_of(dnnl_memory_t m)
{
	md_t md;

	CHECK(dnnl_memory_get_memory_desc(m, &md));
	return md;
}

/* The primitive descriptors the trainer uses, on either API. */
static dnnl_primitive_desc_t ip_fwd_pd(const struct net *n, const char *what, md_t src, md_t w,
				       md_t b, md_t dst)
{
	dnnl_primitive_desc_t pd;
#if DNNL_VERSION_MAJOR >= 3
	check(dnnl_inner_product_forward_primitive_desc_create(
		      &pd, n->engine, dnnl_forward_training, src, w, b, dst, NULL),
	      "dnnl_inner_product_forward_primitive_desc_create", what, __LINE__);
#else
	dnnl_inner_product_desc_t d;

	CHECK(dnnl_inner_product_forward_desc_init(&d, dnnl_forward_training, src, w, b, dst));
	check(dnnl_primitive_desc_create(&pd, &d, NULL, n->engine, NULL),
	      "dnnl_primitive_desc_create", what, __LINE__);
#endif
	return pd;
}

static dnnl_primitive_desc_t ip_bwd_weights_pd(const struct net *n, const char *what, md_t src,
					       md_t dw, md_t db, md_t ddst,
					       const_dnnl_primitive_desc_t hint)
{
	dnnl_primitive_desc_t pd;
#if DNNL_VERSION_MAJOR >= 3
	check(dnnl_inner_product_backward_weights_primitive_desc_create(&pd, n->engine, src, dw, db,
									ddst, hint, NULL),
	      "dnnl_inner_product_backward_weights_primitive_desc_create", what, __LINE__);
#else
	dnnl_inner_product_desc_t d;

	CHECK(dnnl_inner_product_backward_weights_desc_init(&d, src, dw, db, ddst));
	check(dnnl_primitive_desc_create(&pd, &d, NULL, n->engine, hint),
	      "dnnl_primitive_desc_create", what, __LINE__);
#endif
	return pd;
}

static dnnl_primitive_desc_t ip_bwd_data_pd(const struct net *n, const char *what, md_t dsrc,
					    md_t w, md_t ddst, const_dnnl_primitive_desc_t hint)
{
	dnnl_primitive_desc_t pd;
#if DNNL_VERSION_MAJOR >= 3
	check(dnnl_inner_product_backward_data_primitive_desc_create(&pd, n->engine, dsrc, w, ddst,
								     hint, NULL),
	      "dnnl_inner_product_backward_data_primitive_desc_create", what, __LINE__);
#else
	dnnl_inner_product_desc_t d;

	CHECK(dnnl_inner_product_backward_data_desc_init(&d, dsrc, w, ddst));
	check(dnnl_primitive_desc_create(&pd, &d, NULL, n->engine, hint),
	      "dnnl_primitive_desc_create", what, __LINE__);
#endif
	return pd;
}

static dnnl_primitive_desc_t relu_fwd_pd(const struct net *n, const char *what, md_t src, md_t dst)
{
	dnnl_primitive_desc_t pd;
#if DNNL_VERSION_MAJOR >= 3
	check(dnnl_eltwise_forward_primitive_desc_create(&pd, n->engine, dnnl_forward_training,
							 dnnl_eltwise_relu, src, dst, 0.0f, 0.0f,
							 NULL),
	      "dnnl_eltwise_forward_primitive_desc_create", what, __LINE__);
#else
	dnnl_eltwise_desc_t d;

	(void)dst; /* 2.x: the destination has the source's layout */
	CHECK(dnnl_eltwise_forward_desc_init(&d, dnnl_forward_training, dnnl_eltwise_relu, src,
					     0.0f, 0.0f));
	check(dnnl_primitive_desc_create(&pd, &d, NULL, n->engine, NULL),
	      "dnnl_primitive_desc_create", what, __LINE__);
#endif
	return pd;
}

/* dsrc = relu'(src) * ddst */
static dnnl_primitive_desc_t relu_bwd_pd(const struct net *n, const char *what, md_t dsrc,
					 md_t ddst, md_t src, const_dnnl_primitive_desc_t hint)
{
	dnnl_primitive_desc_t pd;
#if DNNL_VERSION_MAJOR >= 3
	check(dnnl_eltwise_backward_primitive_desc_create(&pd, n->engine, dnnl_eltwise_relu, dsrc,
							  ddst, src, 0.0f, 0.0f, hint, NULL),
	      "dnnl_eltwise_backward_primitive_desc_create", what, __LINE__);
#else
	dnnl_eltwise_desc_t d;

	(void)dsrc; /* 2.x: one diff descriptor for both */
	CHECK(dnnl_eltwise_backward_desc_init(&d, dnnl_eltwise_relu, ddst, src, 0.0f, 0.0f));
	check(dnnl_primitive_desc_create(&pd, &d, NULL, n->engine, hint),
	      "dnnl_primitive_desc_create", what, __LINE__);
#endif
	return pd;
}

static dnnl_primitive_desc_t softmax_pd(const struct net *n, md_t src, md_t dst)
{
	dnnl_primitive_desc_t pd;
#if DNNL_VERSION_MAJOR >= 3
	check(dnnl_softmax_forward_primitive_desc_create(&pd, n->engine, dnnl_forward_training,
							 dnnl_softmax_accurate, src, dst, 1, NULL),
	      "dnnl_softmax_forward_primitive_desc_create", "softmax", __LINE__);
#else
	dnnl_softmax_desc_t d;

	(void)dst;
	CHECK(dnnl_softmax_forward_desc_init(&d, dnnl_forward_training, src, 1));
	check(dnnl_primitive_desc_create(&pd, &d, NULL, n->engine, NULL),
	      "dnnl_primitive_desc_create", "softmax", __LINE__);
#endif
	return pd;
}

/*
 * The primitive of pd. When pd_out is set the primitive descriptor is kept
 * there (a forward one is the hint of its backward passes); otherwise it is
 * destroyed at once.
 */
static dnnl_primitive_t new_primitive(const char *what, dnnl_primitive_desc_t pd,
				      dnnl_primitive_desc_t *pd_out)
{
	dnnl_primitive_t prim;

	check(dnnl_primitive_create(&prim, pd), "dnnl_primitive_create", what, __LINE__);
	if (pd_out)
		*pd_out = pd;
	else
		CHECK(dnnl_primitive_desc_destroy(pd));
	return prim;
}

static void execute(const struct net *n, dnnl_primitive_t prim, const char *what, int nargs,
		    const dnnl_exec_arg_t *args)
{
	check(dnnl_primitive_execute(prim, n->stream, nargs, args), "dnnl_primitive_execute", what,
	      __LINE__);
}

static void init_net(struct net *n)
{
	uint64_t seed = 42;

	memset(n, 0, sizeof(*n));
	CHECK(dnnl_engine_create(&n->engine, dnnl_cpu, 0));
	CHECK(dnnl_stream_create(&n->stream, n->engine, dnnl_stream_default_flags));

	n->x = new_matrix(n->engine, BATCH, dims[0], dnnl_nc);
	n->p = new_matrix(n->engine, BATCH, NCLASSES, dnnl_nc);
	for (int l = 0; l < NLAYERS; l++) {
		int64_t in = dims[l], out = dims[l + 1];
		float *w, *b;
		/* He initialisation, uniform: variance 2 / fan-in. */
		float scale = sqrtf(6.0f / (float)in);

		n->w[l] = new_matrix(n->engine, out, in, dnnl_oi);
		n->dw[l] = new_matrix(n->engine, out, in, dnnl_oi);
		n->b[l] = new_memory(n->engine, 1, &dims[l + 1], dnnl_x);
		n->db[l] = new_memory(n->engine, 1, &dims[l + 1], dnnl_x);
		n->h[l] = new_matrix(n->engine, BATCH, out, dnnl_nc);
		n->dh[l] = new_matrix(n->engine, BATCH, out, dnnl_nc);
		if (l < NLAYERS - 1) {
			n->a[l] = new_matrix(n->engine, BATCH, out, dnnl_nc);
			n->da[l] = new_matrix(n->engine, BATCH, out, dnnl_nc);
		}
		w = data_of(n->w[l]);
		b = data_of(n->b[l]);
		for (int64_t i = 0; i < out * in; i++)
			w[i] = (2.0f * rng_float(&seed) - 1.0f) * scale;
		for (int64_t i = 0; i < out; i++)
			b[i] = 0.0f;
	}

	for (int l = 0; l < NLAYERS; l++) {
		dnnl_memory_t src = l ? n->a[l - 1] : n->x;
		dnnl_primitive_desc_t fwd_pd, relu_pd;

		n->ip_fwd[l] =
			new_primitive(ip_fwd_names[l],
				      ip_fwd_pd(n, ip_fwd_names[l], desc_of(src), desc_of(n->w[l]),
						desc_of(n->b[l]), desc_of(n->h[l])),
				      &fwd_pd);
		n->ip_bwd_weights[l] =
			new_primitive(ip_bwd_weights_names[l],
				      ip_bwd_weights_pd(n, ip_bwd_weights_names[l], desc_of(src),
							desc_of(n->dw[l]), desc_of(n->db[l]),
							desc_of(n->dh[l]), fwd_pd),
				      NULL);
		if (l > 0)
			n->ip_bwd_data[l] = new_primitive(
				ip_bwd_data_names[l],
				ip_bwd_data_pd(n, ip_bwd_data_names[l], desc_of(n->da[l - 1]),
					       desc_of(n->w[l]), desc_of(n->dh[l]), fwd_pd),
				NULL);
		CHECK(dnnl_primitive_desc_destroy(fwd_pd));

		if (l == NLAYERS - 1)
			break;
		n->relu_fwd[l] = new_primitive(
			relu_fwd_names[l],
			relu_fwd_pd(n, relu_fwd_names[l], desc_of(n->h[l]), desc_of(n->a[l])),
			&relu_pd);
		n->relu_bwd[l] =
			new_primitive(relu_bwd_names[l],
				      relu_bwd_pd(n, relu_bwd_names[l], desc_of(n->dh[l]),
						  desc_of(n->da[l]), desc_of(n->h[l]), relu_pd),
				      NULL);
		CHECK(dnnl_primitive_desc_destroy(relu_pd));
	}
	n->softmax = new_primitive("softmax",
				   softmax_pd(n, desc_of(n->h[NLAYERS - 1]), desc_of(n->p)), NULL);
}

static void free_net(struct net *n)
{
	for (int l = 0; l < NLAYERS; l++) {
		CHECK(dnnl_primitive_destroy(n->ip_fwd[l]));
		CHECK(dnnl_primitive_destroy(n->ip_bwd_weights[l]));
		if (n->ip_bwd_data[l])
			CHECK(dnnl_primitive_destroy(n->ip_bwd_data[l]));
		CHECK(dnnl_memory_destroy(n->w[l]));
		CHECK(dnnl_memory_destroy(n->b[l]));
		CHECK(dnnl_memory_destroy(n->dw[l]));
		CHECK(dnnl_memory_destroy(n->db[l]));
		CHECK(dnnl_memory_destroy(n->h[l]));
		CHECK(dnnl_memory_destroy(n->dh[l]));
		if (l == NLAYERS - 1)
			continue;
		CHECK(dnnl_primitive_destroy(n->relu_fwd[l]));
		CHECK(dnnl_primitive_destroy(n->relu_bwd[l]));
		CHECK(dnnl_memory_destroy(n->a[l]));
		CHECK(dnnl_memory_destroy(n->da[l]));
	}
	CHECK(dnnl_primitive_destroy(n->softmax));
	CHECK(dnnl_memory_destroy(n->x));
	CHECK(dnnl_memory_destroy(n->p));
	CHECK(dnnl_stream_destroy(n->stream));
	CHECK(dnnl_engine_destroy(n->engine));
}

/*
 * One 28x28 prototype per class, like a handwritten digit: a few random
 * strokes, two pixels wide, inside the central 20x20 box.
 */
static void make_prototypes(float *protos)
{
	uint64_t seed = 7;

	memset(protos, 0, sizeof(*protos) * NCLASSES * dims[0]);
	for (int c = 0; c < NCLASSES; c++) {
		float *img = protos + c * dims[0];

		for (int s = 0; s < STROKES; s++) {
			float x0 = 4 + 19 * rng_float(&seed), y0 = 4 + 19 * rng_float(&seed);
			float x1 = 4 + 19 * rng_float(&seed), y1 = 4 + 19 * rng_float(&seed);

			for (int t = 0; t <= 32; t++) {
				int x = (int)(x0 + (x1 - x0) * t / 32);
				int y = (int)(y0 + (y1 - y0) * t / 32);

				img[y * SIDE + x] = img[y * SIDE + x + 1] = 1.0f;
				img[(y + 1) * SIDE + x] = img[(y + 1) * SIDE + x + 1] = 1.0f;
			}
		}
	}
}

/*
 * Uniform noise in [-NOISE/2, NOISE/2), made once: a batch reads it from a
 * random offset per sample, which is much cheaper than a generator call per
 * pixel and keeps the trainer's time in oneDNN, where a real one spends it.
 */
static void make_noise(float *noise)
{
	uint64_t seed = 11;

	for (int i = 0; i < NOISE_POOL; i++)
		noise[i] = NOISE * (rng_float(&seed) - 0.5f);
}

/*
 * row = clamp(brightness * row + noise, 0, 1); restrict and the fixed length
 * let gcc -O2 vectorize it to maxps/minps, without branches.
 */
static void brighten_clamp(float *restrict row, const float *restrict nz, float brightness)
{
	for (int j = 0; j < PIXELS; j++) {
		float v = brightness * row[j] + nz[j];

		v = v > 0.0f ? v : 0.0f;
		row[j] = v < 1.0f ? v : 1.0f;
	}
}

/*
 * A fresh batch: a random label per sample, and its prototype shifted by up
 * to SHIFT pixels each way, at a random brightness, with every pixel
 * perturbed by noise and clamped to [0, 1].
 */
__attribute__((noinline)) static void make_batch(struct net *n, const float *protos,
						 const float *noise, uint64_t *seed)
{
	float *data = data_of(n->x);

	for (int i = 0; i < BATCH; i++) {
		int label = (int)(rng_next(seed) % NCLASSES);
		int dx = (int)(rng_next(seed) % (2 * SHIFT + 1)) - SHIFT;
		int dy = (int)(rng_next(seed) % (2 * SHIFT + 1)) - SHIFT;
		int shift = dy * SIDE + dx;
		const float *proto = protos + label * dims[0];
		float brightness = 0.4f + 0.6f * rng_float(seed);
		float *row = data + i * dims[0];
		const float *nz = noise + rng_next(seed) % (NOISE_POOL - dims[0]);

		n->labels[i] = label;
		/*
		 * The strokes keep more than SHIFT pixels off every edge, so the
		 * 2-D shift is a 1-D shift of the flattened image.
		 */
		memset(row, 0, sizeof(*row) * PIXELS);
		if (shift >= 0)
			memcpy(row + shift, proto, sizeof(*row) * (size_t)(PIXELS - shift));
		else
			memcpy(row, proto - shift, sizeof(*row) * (size_t)(PIXELS + shift));
		brighten_clamp(row, nz, brightness);
	}
}

__attribute__((noinline)) static void forward(struct net *n)
{
	for (int l = 0; l < NLAYERS; l++) {
		dnnl_exec_arg_t ip[] = {
			{ DNNL_ARG_SRC, l ? n->a[l - 1] : n->x },
			{ DNNL_ARG_WEIGHTS, n->w[l] },
			{ DNNL_ARG_BIAS, n->b[l] },
			{ DNNL_ARG_DST, n->h[l] },
		};

		execute(n, n->ip_fwd[l], ip_fwd_names[l], 4, ip);
		if (l < NLAYERS - 1) {
			dnnl_exec_arg_t relu[] = {
				{ DNNL_ARG_SRC, n->h[l] },
				{ DNNL_ARG_DST, n->a[l] },
			};

			execute(n, n->relu_fwd[l], relu_fwd_names[l], 2, relu);
		}
	}
	{
		dnnl_exec_arg_t sm[] = {
			{ DNNL_ARG_SRC, n->h[NLAYERS - 1] },
			{ DNNL_ARG_DST, n->p },
		};

		execute(n, n->softmax, "softmax", 2, sm);
	}
	CHECK(dnnl_stream_wait(n->stream));
}

/*
 * Mean cross-entropy of the softmax output against the labels, and its
 * gradient with respect to the logits: (p - onehot) / batch.
 */
__attribute__((noinline)) static double softmax_xent(struct net *n)
{
	const float *p = data_of(n->p);
	float *dz = data_of(n->dh[NLAYERS - 1]);
	double loss = 0.0;

	for (int i = 0; i < BATCH; i++) {
		const float *pi = p + i * NCLASSES;
		float *dzi = dz + i * NCLASSES;
		float py = pi[n->labels[i]];

		loss -= log(py > 1e-30f ? py : 1e-30f);
		for (int c = 0; c < NCLASSES; c++)
			dzi[c] = (pi[c] - (c == n->labels[i] ? 1.0f : 0.0f)) / BATCH;
	}
	return loss / BATCH;
}

__attribute__((noinline)) static void backward(struct net *n)
{
	for (int l = NLAYERS - 1; l >= 0; l--) {
		dnnl_exec_arg_t bw[] = {
			{ DNNL_ARG_SRC, l ? n->a[l - 1] : n->x },
			{ DNNL_ARG_DIFF_DST, n->dh[l] },
			{ DNNL_ARG_DIFF_WEIGHTS, n->dw[l] },
			{ DNNL_ARG_DIFF_BIAS, n->db[l] },
		};

		execute(n, n->ip_bwd_weights[l], ip_bwd_weights_names[l], 4, bw);
		if (l == 0)
			break;
		{
			dnnl_exec_arg_t bd[] = {
				{ DNNL_ARG_DIFF_DST, n->dh[l] },
				{ DNNL_ARG_WEIGHTS, n->w[l] },
				{ DNNL_ARG_DIFF_SRC, n->da[l - 1] },
			};
			dnnl_exec_arg_t relu[] = {
				{ DNNL_ARG_SRC, n->h[l - 1] },
				{ DNNL_ARG_DIFF_DST, n->da[l - 1] },
				{ DNNL_ARG_DIFF_SRC, n->dh[l - 1] },
			};

			execute(n, n->ip_bwd_data[l], ip_bwd_data_names[l], 3, bd);
			execute(n, n->relu_bwd[l - 1], relu_bwd_names[l - 1], 3, relu);
		}
	}
	CHECK(dnnl_stream_wait(n->stream));
}

/*
 * y -= lr * x, in blocks of eight that gcc -O2 vectorizes (its cost model
 * there does not vectorize a loop of unknown length).
 */
static void axpy(float *restrict y, const float *restrict x, float lr, int64_t len)
{
	int64_t i = 0;

	for (; i + 8 <= len; i += 8)
		for (int k = 0; k < 8; k++)
			y[i + k] -= lr * x[i + k];
	for (; i < len; i++)
		y[i] -= lr * x[i];
}

/* Plain SGD: param -= lr * grad. */
__attribute__((noinline)) static void sgd_update(struct net *n, float lr)
{
	for (int l = 0; l < NLAYERS; l++) {
		axpy(data_of(n->w[l]), data_of(n->dw[l]), lr, dims[l + 1] * dims[l]);
		axpy(data_of(n->b[l]), data_of(n->db[l]), lr, dims[l + 1]);
	}
}

/* Only digits: no sign, spaces or trailing characters; at least 1. */
static long parse_iterations(const char *s)
{
	char *end;
	long v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || *end || v < 1)
		return -1;
	return v;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	long iterations = DEFAULT_ITERATIONS, every;
	double first_loss = 0.0, loss = 0.0, sum = 0.0, t0, elapsed;
	long count = 0;
	uint64_t data_seed = 1;
	struct net n;
	float *protos, *noise;

	if (argc > 2) {
		fprintf(stderr, "usage: mlp [ITERATIONS]\n");
		return 2;
	}
	if (argc == 2) {
		iterations = parse_iterations(argv[1]);
		if (iterations < 0) {
			fprintf(stderr, "mlp: ITERATIONS must be a positive integer, got '%s'\n",
				argv[1]);
			return 2;
		}
	}
	every = iterations >= 10 ? iterations / 10 : 1;
	if (dnnl_version()->major != DNNL_VERSION_MAJOR) {
		fprintf(stderr,
			"mlp: built for oneDNN %d.x but runs with libdnnl %d.%d: rebuild it against "
			"the installed oneDNN\n",
			DNNL_VERSION_MAJOR, dnnl_version()->major, dnnl_version()->minor);
		return 1;
	}

	protos = malloc(sizeof(*protos) * NCLASSES * dims[0]);
	noise = malloc(sizeof(*noise) * NOISE_POOL);
	if (!protos || !noise) {
		fprintf(stderr, "mlp: out of memory\n");
		return 1;
	}
	make_prototypes(protos);
	make_noise(noise);
	init_net(&n);

	/* Progress lines show the mean loss since the previous line. */
	t0 = now();
	for (long it = 1; it <= iterations; it++) {
		make_batch(&n, protos, noise, &data_seed);
		forward(&n);
		sum += softmax_xent(&n);
		count++;
		backward(&n);
		sgd_update(&n, LEARNING_RATE);
		if (it == 1 || it % every == 0 || it == iterations) {
			loss = sum / count;
			if (it == 1)
				first_loss = loss;
			printf("mlp: iteration %ld/%ld loss %.4f\n", it, iterations, loss);
			fflush(stdout);
			sum = 0.0;
			count = 0;
		}
	}
	elapsed = now() - t0;

	printf("mlp: %ld iterations, batch %d, %.1f samples/s, loss %.4f -> %.4f\n", iterations,
	       BATCH, (double)iterations * BATCH / elapsed, first_loss, loss);
	free_net(&n);
	free(protos);
	free(noise);
	return 0;
}
