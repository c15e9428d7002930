// embed.cu - the embedding gather x = wte[tok] + wpe[t], with the host
// side of andrea-embed.
#include "common/cuda_util.cuh"

// One thread per element (per 4 elements when C % 4 == 0: vec = 4).
template <int VEC>
__global__ static void embed_kernel(float *x, const int32_t *tok,
				    const int *pos, const float *wte,
				    const float *wpe, int T, int C, size_t n)
{
	int cv = C / VEC;
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		size_t bt = i / cv;
		int c = (int)(i % cv) * VEC;
		const float *e = wte + (size_t)tok[bt] * C + c;
		const float *p = wpe + (size_t)(pos ? pos[bt] : bt % T) * C + c;
		if (VEC == 4) {
			float4 a = *(const float4 *)e, b = *(const float4 *)p;
			*(float4 *)(x + bt * C + c) =
				make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
		} else {
			x[bt * C + c] = e[0] + p[0];
		}
	}
}

// Row bt at position pos[bt], or bt % T where pos is NULL.
static int embed(float *x, const int32_t *tokens, const int *pos,
		 const float *wte, const float *wpe, int B, int T, int C)
{
	size_t bt = (size_t)B * T;
	if (bt == 0 || C == 0)
		return 0;
	int aligned = aligned4(x) && aligned4(wte) && aligned4(wpe);
	if (C % 4 == 0 && aligned) {
		size_t n = bt * (C / 4);
		embed_kernel<4><<<at_cu_blocks(n, 256), 256, 0, at_cu_stream>>>(x, tokens, pos, wte,
								wpe, T, C, n);
	} else {
		size_t n = bt * C;
		embed_kernel<1><<<at_cu_blocks(n, 256), 256, 0, at_cu_stream>>>(x, tokens, pos, wte,
								wpe, T, C, n);
	}
	CU_LAUNCHED("embedding kernel");
	return 0;
}

extern "C" int at_cuda_embed_forward(float *x, const int32_t *tokens,
				     const float *wte, const float *wpe, int B,
				     int T, int C)
{
	return embed(x, tokens, NULL, wte, wpe, B, T, C);
}

int at_cu_embed_at(float *x, const int32_t *tokens, const int *pos,
		   const float *wte, const float *wpe, int N, int C)
{
	return embed(x, tokens, pos, wte, wpe, N, 1, C);
}

extern "C" int at_cuda_embed_host(float *x, const int32_t *tokens,
				  const float *wte, const float *wpe, int V,
				  int B, int T, int C)
{
	size_t bt = (size_t)B * T, n = bt * C;
	dev_buf<float> dx, dwte, dwpe;
	dev_buf<int32_t> dtok;
	if (dx.alloc(n, "x") || dtok.alloc(bt, "tokens") ||
	    dwte.alloc((size_t)V * C, "wte") || dwpe.alloc((size_t)T * C, "wpe"))
		return -1;
	CU_CHECK(cudaMemcpy(dtok.p, tokens, bt * sizeof *tokens,
			    cudaMemcpyHostToDevice), "copying tokens to the GPU");
	CU_CHECK(cudaMemcpy(dwte.p, wte, (size_t)V * C * sizeof *wte,
			    cudaMemcpyHostToDevice), "copying wte to the GPU");
	CU_CHECK(cudaMemcpy(dwpe.p, wpe, (size_t)T * C * sizeof *wpe,
			    cudaMemcpyHostToDevice), "copying wpe to the GPU");
	if (at_cuda_embed_forward(dx.p, dtok.p, dwte.p, dwpe.p, B, T, C) < 0)
		return -1;
	CU_CHECK(cudaMemcpy(x, dx.p, n * sizeof *x, cudaMemcpyDeviceToHost),
		 "computing x");
	return 0;
}
