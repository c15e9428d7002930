// device_check.cu - the error path: an allocation far beyond the device
// becomes the one-line message the stages print, leaves nothing sticky
// behind, and the poison kernel fills what it is given.
#include "harness.cuh"

int main(int argc, char **argv)
{
	h_init(argc, argv, "device-check");
	char detail[600];

	// 2^20 rows of 2^20: 4 TiB of scores; the host pointers are never
	// touched because the device allocation fails first
	int rc = at_cuda_softmax_host(NULL, NULL, (size_t)1 << 20, 1 << 20);
	const char *want = "CUDA: out of memory allocating 4.0 TiB for scores";
	snprintf(detail, sizeof detail, "rc %d, \"%s\"", rc, at_cuda_error());
	h_result(rc == -1 && strcmp(at_cuda_error(), want) == 0,
		 "out of memory is one line", detail);

	// the device still works afterwards
	std::vector<float> s = h_randn(3 * 5), p(s.size()), ref(s.size());
	at_softmax_rows(ref.data(), s.data(), 3, 5);
	rc = at_cuda_softmax_host(p.data(), s.data(), 3, 5);
	double err = 0;
	for (size_t i = 0; i < p.size(); i++)
		err = fmax(err, fabs(p[i] - ref[i]));
	snprintf(detail, sizeof detail, "rc %d, max abs err %.1e", rc, err);
	h_result(rc == 0 && err < 1e-6, "the GPU works after the failure", detail);

	// the poison kernel, over a grid-stride loop's worth
	size_t n = h_full ? (size_t)65535 * 16 * 256 + 7 : ((size_t)1 << 20) + 7;
	float *d;
	H_CUDA(cudaMalloc(&d, n * sizeof *d));
	H_CUDA(cudaMemset(d, 0, n * sizeof *d));
	H_OP(at_cuda_poison(d, n));
	std::vector<float> back = h_download(d, n);
	size_t nan = 0;
	for (float x : back)
		nan += std::isnan(x);
	snprintf(detail, sizeof detail, "%zu of %zu NaN", nan, n);
	h_result(nan == n, "poison fills every element", detail);
	H_CUDA(cudaFree(d));
	return h_finish();
}
