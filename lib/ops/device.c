/* device.c - device selection. */
#include "ops/device.h"

#include <stdio.h>
#include <string.h>

int at_cuda_devices(void)
{
#ifdef ANDREA_CUDA
	return at_cuda_device_count();
#else
	return 0;
#endif
}

int at_device_resolve(const char *want, at_device *dev, char *err,
		      size_t errlen)
{
	if (!want || !*want || strcmp(want, "auto") == 0) {
		*dev = at_cuda_devices() > 0 ? AT_DEV_CUDA : AT_DEV_CPU;
		return 0;
	}
	if (strcmp(want, "cpu") == 0) {
		*dev = AT_DEV_CPU;
		return 0;
	}
	if (strcmp(want, "cuda") == 0) {
#ifndef ANDREA_CUDA
		snprintf(err, errlen, "--device cuda: this build has no CUDA support");
		return -1;
#else
		char why[160];
		if (at_cuda_probe(why, sizeof why) == 0) {
			snprintf(err, errlen, "--device cuda: no usable CUDA "
				 "device (%s)", why);
			return -1;
		}
		*dev = AT_DEV_CUDA;
		return 0;
#endif
	}
	snprintf(err, errlen, "--device '%s': expected auto, cpu or cuda", want);
	return -2;
}
