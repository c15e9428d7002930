/* device.h - choosing where a stage computes: the CPU or a CUDA GPU.
 *
 * --device auto|cpu|cuda (env ANDREA_DEVICE).  cpu and cuda are decided
 * when the command line is read.  auto is decided later, by the size of
 * the work: starting CUDA costs a process a few tenths of a second (the
 * driver, the context, cuBLAS, the weights' upload), more than the CPU
 * needs for the stages at the sizes of one sequence, so auto stays on the
 * CPU, without touching CUDA at all, until a piece of work is large enough
 * to pay for that start (at_device_auto).
 */
#ifndef ANDREA_DEVICE_H
#define ANDREA_DEVICE_H

#include <stddef.h>

/* AT_DEV_AUTO: --device auto, not decided yet (at_device_auto decides). */
typedef enum { AT_DEV_CPU = 0, AT_DEV_CUDA = 1, AT_DEV_AUTO = 2 } at_device;

/* Number of usable CUDA devices; 0 in a CPU-only build or without a GPU.
 * Initialises the CUDA driver where there is one. */
int at_cuda_devices(void);
/* Resolves "auto" (or NULL, or ""), "cpu" or "cuda".  auto gives
 * AT_DEV_AUTO and touches nothing of CUDA; cuda probes the device now.
 * Returns 0; -2 for an unknown name; -1 when cuda is asked for where none
 * can be used; err says why. */
int at_device_resolve(const char *want, at_device *dev, char *err,
		      size_t errlen);

/* auto's rule, for work of `madds` multiply-adds whose GPU path copies
 * `bytes` between host and device, on a CPU that would compute it with
 * `threads` threads (below 1 counts as 1).  Estimates
 *
 *     cpu = madds / (threads * AT_AUTO_CPU_MADDS)        seconds
 *     gpu = min_work + bytes / AT_AUTO_COPY_BYTES        seconds
 *
 * and returns 1 when cpu > gpu, 0 otherwise.  min_work is what starting
 * CUDA costs a process (at_device_auto_min_work).  Pure: no CUDA, no
 * state beyond min_work. */
int at_auto_wants_gpu(double madds, double bytes, int threads);

/* The device auto takes for a process: the first call decides and every
 * later call returns the same device whatever its size, so that a tool
 * does not move between devices.  A caller gives the size of its first
 * piece of work (or of all the work it is about to do, a training run's
 * steps, say) as for at_auto_wants_gpu.  Below the threshold it returns
 * AT_DEV_CPU and touches nothing of CUDA; above it, it looks for a GPU (a
 * cheap look at the driver's device files first, then at_cuda_probe) and
 * returns AT_DEV_CUDA where one is usable, AT_DEV_CPU otherwise: it never
 * fails.  Always AT_DEV_CPU in a build without CUDA.  Not thread-safe:
 * call it from one thread. */
at_device at_device_auto(double madds, double bytes, int threads);

/* The seconds that at_auto_wants_gpu counts for starting CUDA
 * (ANDREA_AUTO_MIN_WORK, read by the command-line layer; default
 * AT_AUTO_MIN_WORK).  Measured by bench/run-auto.sh. */
void at_device_auto_min_work(double seconds);

#define AT_AUTO_MIN_WORK 0.3 /* s: CUDA driver + context + cuBLAS + upload */
#define AT_AUTO_COPY_BYTES 1e10 /* B/s between pageable host memory and GPU */
/* multiply-adds per second of one CPU thread in the matrix products:
 * OpenBLAS's sgemm, or the plain C loop of a build without it (measured
 * on one core of an AMD EPYC: 33-40e9 and 1.4-2.7e9) */
#ifdef ANDREA_CBLAS
#define AT_AUTO_CPU_MADDS 2e10
#else
#define AT_AUTO_CPU_MADDS 2e9
#endif

#ifdef ANDREA_CUDA
/* kernels/common/device.cu */
int at_cuda_device_count(void);
/* The device count, or 0 with the reason in why when no device can run
 * this build's kernels (no driver, no GPU, a GPU older than the build's
 * -arch). */
int at_cuda_probe(char *why, size_t len);
/* Fills n floats on the device with NaN: harnesses poison output buffers
 * so that an element a kernel forgets to write cannot pass a check. */
int at_cuda_poison(float *dev_ptr, size_t n);
#endif

#endif
