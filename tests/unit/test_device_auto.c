/* test_device_auto.c - the contract of --device auto (ops/device.h): the
 * rule at_auto_wants_gpu against its formula and the stages' estimates
 * (ops/stages.h), the threshold's override, at_device_resolve leaving auto
 * undecided, and at_device_auto keeping its first decision. */
#include "ops/device.h"
#include "ops/stages.h"

#include "check.h"

enum { C = 768, H = 12, D = 64, V = 257 };

/* Whether auto would take the GPU for any stage of the pipeline at B=1, T,
 * ANDREA-120M widths, on `threads` CPU threads. */
static int any_stage_on_gpu(int T, int threads)
{
	at_work w[] = {at_work_embed(1, T, C, V), at_work_qkv(1, T, C, C),
		       at_work_scores(H, T, D), at_work_mask((size_t)H * T * T),
		       at_work_softmax((size_t)H * T, T),
		       at_work_attend(1, H, T, D, 1)};
	int any = 0;
	for (int i = 0; i < 6; i++)
		any |= at_auto_wants_gpu(w[i].madds, w[i].bytes, threads);
	return any;
}

int main(void)
{
	/* the formula at its edge: one thread, no bytes, the start cost */
	double edge = AT_AUTO_MIN_WORK * AT_AUTO_CPU_MADDS;
	CHECK(!at_auto_wants_gpu(0, 0, 1));
	CHECK(!at_auto_wants_gpu(0.99 * edge, 0, 1));
	CHECK(at_auto_wants_gpu(1.01 * edge, 0, 1));
	CHECK(!at_auto_wants_gpu(1.01 * edge, 0, 2)); /* threads divide */
	CHECK(at_auto_wants_gpu(2.02 * edge, 0, 2));
	/* the copies count against the GPU */
	CHECK(!at_auto_wants_gpu(1.01 * edge, 0.02 * AT_AUTO_MIN_WORK *
						      AT_AUTO_COPY_BYTES, 1));
	/* threads below 1 count as 1 */
	CHECK(at_auto_wants_gpu(1.01 * edge, 0, 0) ==
	      at_auto_wants_gpu(1.01 * edge, 0, 1));
	CHECK(at_auto_wants_gpu(1.01 * edge, 0, -3));

	/* the six stages of one sequence up to T = 1024 stay on the CPU with
	 * 8 threads or more; a batch of 64 sequences' qkv does not */
	for (int T = 64; T <= 1024; T *= 4)
		for (int threads = 8; threads <= 128; threads *= 2)
			CHECK(!any_stage_on_gpu(T, threads));
	at_work big = at_work_qkv(64, 1024, C, C);
	CHECK(at_auto_wants_gpu(big.madds, big.bytes, 8));
	/* the estimates grow with the work */
	CHECK(at_work_scores(H, 2048, D).madds == 4 * at_work_scores(H, 1024, D).madds);
	CHECK(at_work_qkv(2, 100, C, C).bytes > at_work_qkv(1, 100, C, C).bytes);
	CHECK(at_work_attend(1, H, 64, D, 1).madds > at_work_attend(1, H, 64, D, 0).madds);
	CHECK(at_work_mask(1000).madds == 0 && at_work_mask(1000).bytes == 8000);

	/* the override: no start cost moves the products, never the mask
	 * (its copies alone cost more than the CPU's pass) */
	at_work qkv = at_work_qkv(1, 1024, C, C), mask = at_work_mask(12u << 20);
	at_device_auto_min_work(0);
	CHECK(at_auto_wants_gpu(qkv.madds, qkv.bytes, 8));
	CHECK(!at_auto_wants_gpu(mask.madds, mask.bytes, 1));
	at_device_auto_min_work(1e9);
	CHECK(!at_auto_wants_gpu(big.madds, big.bytes, 8));
	at_device_auto_min_work(AT_AUTO_MIN_WORK);
	CHECK(at_auto_wants_gpu(big.madds, big.bytes, 8));

	/* auto stays undecided until the work comes */
	at_device dev = AT_DEV_CUDA;
	char err[200];
	CHECK(at_device_resolve("auto", &dev, err, sizeof err) == 0 &&
	      dev == AT_DEV_AUTO);
	dev = AT_DEV_CUDA;
	CHECK(at_device_resolve(NULL, &dev, err, sizeof err) == 0 &&
	      dev == AT_DEV_AUTO);
	dev = AT_DEV_CUDA;
	CHECK(at_device_resolve("", &dev, err, sizeof err) == 0 &&
	      dev == AT_DEV_AUTO);
	CHECK(at_device_resolve("cpu", &dev, err, sizeof err) == 0 &&
	      dev == AT_DEV_CPU);
	CHECK(at_device_resolve("tpu", &dev, err, sizeof err) == -2);

	/* the first work decides for the process: small, so the CPU, without
	 * looking for a GPU; later work, however large, stays there */
	CHECK(at_device_auto(0, 0, 1) == AT_DEV_CPU);
	CHECK(at_device_auto(1e18, 0, 1) == AT_DEV_CPU);
	at_exec e = {.dev = AT_DEV_AUTO};
	CHECK(at_stage_streams(&e, at_work_scores(H, 1 << 14, D)));
	return check_finish("test_device_auto");
}
