/* device.h - choosing where a stage computes: the CPU or a CUDA GPU.
 *
 * --device auto|cpu|cuda (env ANDREA_DEVICE).  auto takes the GPU when the
 * build has CUDA and a device is present, the CPU otherwise.
 */
#ifndef ANDREA_DEVICE_H
#define ANDREA_DEVICE_H

#include <stddef.h>

typedef enum { AT_DEV_CPU = 0, AT_DEV_CUDA = 1 } at_device;

/* Number of usable CUDA devices; 0 in a CPU-only build or without a GPU. */
int at_cuda_devices(void);
/* Resolves "auto", "cpu" or "cuda".  Returns 0; -2 for an unknown name;
 * -1 when cuda is asked for where none can be used; err says why. */
int at_device_resolve(const char *want, at_device *dev, char *err,
		      size_t errlen);

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
