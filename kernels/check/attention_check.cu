// attention_check.cu - at_cuda_attention_forward against the staged
// pipeline's ops on the CPU (at_scores_forward, at_mask_causal,
// at_softmax_rows, at_attend_forward) for out, and against a double
// log-sum-exp for lse: causal and not, every head width bucket of the
// kernel (D = 1 .. 256), T = 1 and T not a multiple of the tile, in
// fp32 (the tensor cores' split operands where D % 4 == 0 and D <= 128,
// the FMA kernel otherwise) and in TF32; then timings at B = 8, H = 12,
// D = 64.  The backward (at_cuda_attention_backward) against the
// explicit gradients in double.  Both also with the heads side by side in
// rows (at_heads), as the training engine hands them over, and (not with
// --quick) at a few rows of one head of 8192, where the sums are longest.
#include "harness.cuh"
#include "attention_ref.cuh"

// out and lse of the four stages on the CPU (lse in double).
static void reference(std::vector<float> &out, std::vector<float> &lse,
		      const std::vector<float> &q, const std::vector<float> &k,
		      const std::vector<float> &v, int BH, int T, int D,
		      float scale, int causal)
{
	std::vector<float> s((size_t)BH * T * T), p(s.size());
	at_scores_forward(s.data(), q.data(), k.data(), BH, T, D, scale);
	if (causal)
		at_mask_causal(s.data(), BH, T, -INFINITY);
	at_softmax_rows(p.data(), s.data(), (size_t)BH * T, T);
	at_attend_forward(out.data(), p.data(), v.data(), BH, T, D);
	for (size_t r = 0; r < (size_t)BH * T; r++) {
		const float *x = s.data() + r * T;
		double mx = -INFINITY, sum = 0;
		for (int j = 0; j < T; j++)
			mx = x[j] > mx ? x[j] : mx;
		for (int j = 0; j < T; j++)
			sum += exp((double)x[j] - mx);
		lse[r] = (float)(mx + log(sum));
	}
}

// TF32 operands keep 11 bits: the outputs' relative error is about 1e-3.
static double tolerance(int tf32, double fp32)
{
	return tf32 ? 5e-3 : fp32;
}

// lse against the double one: its absolute error is the relative error
// it leaves in each exp(s - lse) of the backward pass (a relative measure
// would fail a lone score near 0 that the split operands leave 1e-6 off).
static void compare_lse(const char *what, const float *dev,
			const std::vector<float> &ref, double tol)
{
	std::vector<float> got = h_download(dev, ref.size());
	double worst = 0;
	for (size_t i = 0; i < ref.size(); i++) {
		double e = fabs((double)got[i] - ref[i]);
		worst = std::isfinite(e) ? fmax(worst, e) : INFINITY;
		if (worst == INFINITY)
			break;
	}
	char detail[96];
	snprintf(detail, sizeof detail, "max abs err %.2e (tol %.0e)", worst,
		 tol);
	h_result(worst <= tol, what, detail);
}

static void check(int BH, int T, int D, int causal, int tf32,
		  float scale = 0)
{
	if (scale == 0)
		scale = 1.0f / sqrtf((float)D);
	size_t n = (size_t)BH * T * D, rows = (size_t)BH * T;
	std::vector<float> q = h_randn(n), k = h_randn(n), v = h_randn(n);
	std::vector<float> out(n), lse(rows);
	reference(out, lse, q, k, v, BH, T, D, scale, causal);
	float *dq = h_upload(q), *dk = h_upload(k), *dv = h_upload(v);
	float *dout = h_dev(n), *dlse = h_dev(rows);
	H_OP(at_cuda_attention_forward(dout, dlse, dq, dk, dv, BH, T, D, scale,
				       causal, tf32, NULL));
	const char *mode = tf32 ? "tf32" : "fp32";
	char what[160];
	snprintf(what, sizeof what, "attention %s %s BH=%d T=%d D=%d out",
		 mode, causal ? "causal" : "full", BH, T, D);
	h_compare(what, dout, out.data(), n, tolerance(tf32, 1e-5));
	snprintf(what, sizeof what, "attention %s %s BH=%d T=%d D=%d lse",
		 mode, causal ? "causal" : "full", BH, T, D);
	compare_lse(what, dlse, lse, tolerance(tf32, 1e-5));
	for (float *p : {dq, dk, dv, dout, dlse})
		H_CUDA(cudaFree(p));
}

static void check_bwd(int BH, int T, int D, int causal, int tf32)
{
	float scale = 1.0f / sqrtf((float)D);
	size_t n = (size_t)BH * T * D, rows = (size_t)BH * T;
	std::vector<float> q = h_randn(n), k = h_randn(n), v = h_randn(n),
			   g = h_randn(n);
	std::vector<float> r[5];
	attention_reference(r, q, k, v, g, BH, T, D, scale, causal);
	const std::vector<float> &gq = r[2], &gk = r[3], &gv = r[4];
	float *dq = h_upload(q), *dk = h_upload(k), *dv = h_upload(v),
	      *dg = h_upload(g), *dout = h_dev(n), *dlse = h_dev(rows),
	      *delta = h_dev(rows), *rq = h_dev(n), *rk = h_dev(n), *rv = h_dev(n);
	H_OP(at_cuda_attention_forward(dout, dlse, dq, dk, dv, BH, T, D, scale,
				       causal, tf32, NULL));
	H_OP(at_cuda_attention_backward(rq, rk, rv, dq, dk, dv, dout, dlse, dg,
					delta, BH, T, D, scale, causal, tf32,
					NULL));
	const char *names[3] = {"dq", "dk", "dv"};
	float *got[3] = {rq, rk, rv};
	const std::vector<float> *want[3] = {&gq, &gk, &gv};
	for (int i = 0; i < 3; i++) {
		char what[160];
		snprintf(what, sizeof what,
			 "attention backward %s %s BH=%d T=%d D=%d %s",
			 tf32 ? "tf32" : "fp32", causal ? "causal" : "full", BH,
			 T, D, names[i]);
		h_compare(what, got[i], want[i]->data(), n,
			  tolerance(tf32, 1e-5));
	}
	for (float *p : {dq, dk, dv, dg, dout, dlse, delta, rq, rk, rv})
		H_CUDA(cudaFree(p));
}

// x [BH,T,D] as rows [B,T,ld] holding H heads side by side, NaN between.
static std::vector<float> as_rows(const std::vector<float> &x, int BH, int H,
				  int T, int D, int ld)
{
	std::vector<float> y((size_t)BH / H * T * ld, NAN);
	for (int bh = 0; bh < BH; bh++)
		for (int t = 0; t < T; t++)
			for (int d = 0; d < D; d++)
				y[(size_t)(bh / H) * T * ld + (size_t)t * ld +
				  (bh % H) * D + d] = x[((size_t)bh * T + t) * D + d];
	return y;
}

// Forward and backward with every view in rows of ld = H * D + pad floats
// (at_heads {H, ld}, as the training engine passes them) against the
// oracle of the packed heads; the NaN between the heads must be neither
// read (it would reach the results) nor written.
static void check_rows(int B, int H, int T, int D, int pad, int tf32)
{
	int BH = B * H, ld = H * D + pad;
	at_heads rows = {H, ld};
	float scale = 1.0f / sqrtf((float)D);
	size_t n = (size_t)BH * T * D, nr = (size_t)B * T * ld;
	std::vector<float> q = h_randn(n), k = h_randn(n), v = h_randn(n),
			   g = h_randn(n);
	std::vector<float> r[5];
	attention_reference(r, q, k, v, g, BH, T, D, scale, 1);
	float *dq = h_upload(as_rows(q, BH, H, T, D, ld)),
	      *dk = h_upload(as_rows(k, BH, H, T, D, ld)),
	      *dv = h_upload(as_rows(v, BH, H, T, D, ld)),
	      *dg = h_upload(as_rows(g, BH, H, T, D, ld)), *dout = h_dev(nr),
	      *dlse = h_dev((size_t)BH * T), *delta = h_dev((size_t)BH * T),
	      *rq = h_dev(nr), *rk = h_dev(nr), *rv = h_dev(nr);
	H_OP(at_cuda_attention_forward(dout, dlse, dq, dk, dv, BH, T, D, scale,
				       1, tf32, &rows));
	H_OP(at_cuda_attention_backward(rq, rk, rv, dq, dk, dv, dout, dlse, dg,
					delta, BH, T, D, scale, 1, tf32,
					&rows));
	const char *names[5] = {"out", "lse", "dq", "dk", "dv"};
	float *got[5] = {dout, dlse, rq, rk, rv};
	for (int i = 0; i < 5; i++) {
		char what[160];
		snprintf(what, sizeof what,
			 "attention rows %s B=%d H=%d T=%d D=%d ld=%d %s",
			 tf32 ? "tf32" : "fp32", B, H, T, D, ld, names[i]);
		if (i == 1)
			compare_lse(what, dlse, r[1], tolerance(tf32, 1e-5));
		else
			h_compare(what, got[i],
				  as_rows(r[i], BH, H, T, D, ld).data(), nr,
				  tolerance(tf32, 1e-5));
	}
	for (float *p : {dq, dk, dv, dg, dout, dlse, delta, rq, rk, rv})
		H_CUDA(cudaFree(p));
}

// The relative error of rows `rows` of got against want (rows of D).
static double worst_row(const std::vector<float> &got,
			const std::vector<double> &want, const int *rows,
			int nrows, int D)
{
	double worst = 0;
	for (int r = 0; r < nrows; r++) {
		double num = 0, den = 0;
		for (int d = 0; d < D; d++) {
			double w = want[(size_t)r * D + d],
			       e = got[(size_t)rows[r] * D + d] - w;
			num += e * e;
			den += w * w;
		}
		double rel = sqrt(num / den);
		worst = std::isfinite(rel) ? fmax(worst, rel) : INFINITY;
	}
	return worst;
}

// One causal head of T rows of D against double at a few rows: out and dq of
// queries that see thousands of keys, dk and dv of keys that thousands of
// queries see.  The whole-array checks above are too short to show what an
// accumulator's rounding does over 8192 terms (the fp32 forward once
// summed P.V across all its key tiles in mma.sync's accumulator and was
// 6e-5 off at T = 8192).
static void check_long_rows(int T, int D)
{
	const float scale = 1.0f / sqrtf((float)D);
	size_t n = (size_t)T * D;
	std::vector<float> q = h_randn(n), k = h_randn(n), v = h_randn(n),
			   g = h_randn(n);
	const int queries[] = {T - 1, T / 2 - 1, T / 3, 7 * T / 8},
		  keys[] = {0, 1, T / 8, T / 2};
	const int NQ = 4, NK = 4;
	std::vector<double> out, gq, gk, gv;
	attention_rows_reference(out, gq, gk, gv, q, k, v, g, T, D, scale,
				 queries, NQ, keys, NK);
	float *dq = h_upload(q), *dk = h_upload(k), *dv = h_upload(v),
	      *dg = h_upload(g), *dout = h_dev(n), *dlse = h_dev(T),
	      *ddelta = h_dev(T), *rq = h_dev(n), *rk = h_dev(n), *rv = h_dev(n);
	for (int tf32 = 0; tf32 <= 1; tf32++) {
		H_OP(at_cuda_attention_forward(dout, dlse, dq, dk, dv, 1, T, D,
					       scale, 1, tf32, NULL));
		H_OP(at_cuda_attention_backward(rq, rk, rv, dq, dk, dv, dout,
						dlse, dg, ddelta, 1, T, D,
						scale, 1, tf32, NULL));
		const char *names[4] = {"out", "dq", "dk", "dv"};
		const float *got[4] = {dout, rq, rk, rv};
		const std::vector<double> *want[4] = {&out, &gq, &gk, &gv};
		for (int x = 0; x < 4; x++) {
			double worst = worst_row(h_download(got[x], n), *want[x],
						 x < 2 ? queries : keys,
						 x < 2 ? NQ : NK, D);
			char what[128], detail[96];
			snprintf(what, sizeof what,
				 "attention long rows %s causal T=%d D=%d %s",
				 tf32 ? "tf32" : "fp32", T, D, names[x]);
			snprintf(detail, sizeof detail,
				 "worst row rel err %.2e (tol %.0e)", worst,
				 tolerance(tf32, 1e-5));
			h_result(worst <= tolerance(tf32, 1e-5), what, detail);
		}
	}
	for (float *p : {dq, dk, dv, dg, dout, dlse, ddelta, rq, rk, rv})
		H_CUDA(cudaFree(p));
}

static void timing(int T, int tf32)
{
	const int BH = 8 * 12, D = 64;
	size_t n = (size_t)BH * T * D;
	float *dq = h_upload(h_randn(n)), *dk = h_upload(h_randn(n)),
	      *dv = h_upload(h_randn(n)), *dout = h_dev(n);
	float ms = h_time_ms([&] {
		at_cuda_attention_forward(dout, NULL, dq, dk, dv, BH, T, D,
					  0.125f, 1, tf32, NULL);
	}, 20);
	const char *mode = tf32 ? "tf32" : "fp32";
	char what[96];
	snprintf(what, sizeof what, "attention %s causal B=8 H=12 T=%d D=64",
		 mode, T);
	double flops = 4.0 * BH * T * (T + 1) / 2.0 * D;
	printf("time %s: %.4f ms, %.1f TFLOP/s\n", what, ms,
	       flops / ms / 1e9);
	size_t rows = (size_t)BH * T;
	float *lse = h_dev(rows), *delta = h_dev(rows), *dg = h_upload(h_randn(n)),
	      *rq = h_dev(n), *rk = h_dev(n), *rv = h_dev(n);
	at_cuda_attention_forward(dout, lse, dq, dk, dv, BH, T, D, 0.125f, 1,
				  tf32, NULL);
	float bms = h_time_ms([&] {
		at_cuda_attention_backward(rq, rk, rv, dq, dk, dv, dout, lse, dg,
					   delta, BH, T, D, 0.125f, 1, tf32,
					   NULL);
	}, 10);
	printf("time attention backward %s causal B=8 H=12 T=%d D=64: %.4f ms, "
	       "%.1f TFLOP/s (forward + backward %.4f ms)\n", mode, T, bms,
	       2.5 * flops / bms / 1e9, ms + bms);
	fflush(stdout);
	for (float *p : {dq, dk, dv, dout, lse, delta, dg, rq, rk, rv})
		H_CUDA(cudaFree(p));
}

int main(int argc, char **argv)
{
	h_init(argc, argv, "attention-check");
	static const int shapes[][3] = {
		{1, 1, 1},   {3, 1, 16},  {2, 2, 7},    {2, 17, 15}, {3, 63, 32},
		{2, 64, 64}, {2, 65, 33}, {1, 130, 64}, {2, 200, 100},
		{1, 129, 128}, {1, 97, 200}, {1, 70, 256}, {1, 1, 64},
		{2, 191, 36},
	};
	for (int tf32 = 0; tf32 <= 1; tf32++)
		for (auto &s : shapes)
			for (int causal = 1; causal >= 0; causal--)
				check(s[0], s[1], s[2], causal, tf32);
	check(2, 50, 24, 1, 0, 1.0f); // --no-scale
	static const int bwd_shapes[][3] = {
		{1, 1, 1},   {2, 7, 15},   {2, 33, 32}, {1, 64, 64},
		{2, 77, 64}, {1, 50, 128}, {1, 40, 256}, {1, 1, 64},
		{2, 130, 36}, {1, 129, 96}, {3, 200, 16},
	};
	for (int tf32 = 0; tf32 <= 1; tf32++)
		for (auto &s : bwd_shapes)
			for (int causal = 1; causal >= 0; causal--)
				check_bwd(s[0], s[1], s[2], causal, tf32);
	// B, H, T, D, pad: tensor cores (D % 4 == 0, ld % 4 == 0) and FMA
	static const int row_shapes[][5] = {
		{2, 3, 67, 64, 0}, {2, 2, 130, 32, 4}, {1, 4, 1, 64, 0},
		{2, 3, 50, 36, 8}, {1, 2, 70, 128, 4}, {2, 2, 33, 15, 1},
		{1, 3, 40, 64, 2},
	};
	for (int tf32 = 0; tf32 <= 1; tf32++)
		for (auto &s : row_shapes)
			check_rows(s[0], s[1], s[2], s[3], s[4], tf32);
	if (h_full) {
		check(4, 1000, 64, 1, 0);
		check_long_rows(8192, 64);
		check_long_rows(8192, 128);
		for (int tf32 = 0; tf32 <= 1; tf32++)
			for (int T : {1024, 4096, 16384})
				timing(T, tf32);
	}
	return h_finish();
}
