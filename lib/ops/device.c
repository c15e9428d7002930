/* device.c - device selection (device.h). */
#include "ops/device.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

static double min_work = AT_AUTO_MIN_WORK;

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
		*dev = AT_DEV_AUTO;
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

void at_device_auto_min_work(double seconds)
{
	min_work = seconds;
}

int at_auto_wants_gpu(double madds, double bytes, int threads)
{
	double cpu = madds / ((threads > 1 ? threads : 1) * AT_AUTO_CPU_MADDS);
	double gpu = min_work + bytes / AT_AUTO_COPY_BYTES;
	return cpu > gpu;
}

#ifdef ANDREA_CUDA
/* Whether the NVIDIA driver shows a device here, from its files alone:
 * where it does not, looking further would load libcuda for nothing.
 * /dev/nvidiactl is there wherever the kernel driver runs (containers
 * given a GPU included), /dev/dxg under WSL. */
static int driver_files(void)
{
	return access("/dev/nvidiactl", F_OK) == 0 ||
	       access("/proc/driver/nvidia/gpus", F_OK) == 0 ||
	       access("/dev/dxg", F_OK) == 0;
}
#endif

at_device at_device_auto(double madds, double bytes, int threads)
{
	static int decided = -1; /* -1, or the at_device of this process */
	if (decided >= 0)
		return (at_device)decided;
	decided = AT_DEV_CPU;
#ifdef ANDREA_CUDA
	char why[160];
	if (at_auto_wants_gpu(madds, bytes, threads) && driver_files() &&
	    at_cuda_probe(why, sizeof why) > 0)
		decided = AT_DEV_CUDA;
#endif
	return (at_device)decided;
}
