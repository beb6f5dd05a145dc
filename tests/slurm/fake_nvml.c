/*
 * A stand-in for the NVIDIA driver's libnvidia-ml.so.1: every NVML call Slurm's gpu/nvml
 * plugin makes (nm -D --undefined-only gpu_nvml.so, 22.05's and Ubuntu 23.11.4's), as a
 * node with FAKE_NVML_GPUS GPUs named FAKE_NVML_NAME would answer. GPU i has minor number i, so
 * its device file is /dev/nvidia<i>; it is close to every CPU; NVLink, MIG and clock control
 * are "not supported", as NVML says of features a device lacks.
 *
 * Built against NVML's own header (nvml.h of libnvidia-ml-dev), so the types and the
 * versioned names (nvmlInit_v2, ...) are NVML's. It proves what the plugin makes of NVML's
 * answers, not that a real GPU answers so.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nvml.h>

static unsigned int gpu_count(void)
{
	const char *count = getenv("FAKE_NVML_GPUS");
	return count ? (unsigned int)atoi(count) : 0;
}

static int index_of(nvmlDevice_t device)
{
	return (int)(uintptr_t)device - 1;
}

nvmlReturn_t nvmlInit(void) { return NVML_SUCCESS; }
nvmlReturn_t nvmlShutdown(void) { return NVML_SUCCESS; }
const char *nvmlErrorString(nvmlReturn_t result) { return result ? "fake: not supported" : "ok"; }

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	snprintf(version, length, "580.00.00-fake");
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
	snprintf(version, length, "13.580.00-fake");
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *count)
{
	*count = gpu_count();
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
	if (index >= gpu_count())
		return NVML_ERROR_INVALID_ARGUMENT;
	*device = (nvmlDevice_t)(uintptr_t)(index + 1);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
	const char *fake = getenv("FAKE_NVML_NAME");
	(void)device;
	snprintf(name, length, "%s", fake ? fake : "NVIDIA Fake GPU");
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
	snprintf(uuid, length, "GPU-fake-%d", index_of(device));
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
	memset(pci, 0, sizeof(*pci));
	pci->bus = (unsigned int)index_of(device) + 1;
	snprintf(pci->busId, sizeof(pci->busId), "00000000:%02X:00.0", pci->bus);
	snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "0000:%02X:00.0", pci->bus);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor)
{
	*minor = (unsigned int)index_of(device);
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCpuAffinity(nvmlDevice_t device, unsigned int size,
				      unsigned long *cpus)
{
	long online = sysconf(_SC_NPROCESSORS_ONLN);
	(void)device;
	memset(cpus, 0, size * sizeof(*cpus));
	for (long cpu = 0; cpu < online && cpu < (long)(size * 8 * sizeof(*cpus)); cpu++)
		cpus[cpu / (8 * sizeof(*cpus))] |= 1UL << (cpu % (8 * sizeof(*cpus)));
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int l, nvmlEnableState_t *s)
{
	(void)d; (void)l; (void)s;
	return NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo(nvmlDevice_t d, unsigned int l, nvmlPciInfo_t *p)
{
	(void)d; (void)l; (void)p;
	return NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *current, unsigned int *pending)
{
	(void)d;
	*current = *pending = NVML_DEVICE_MIG_DISABLE;
	return NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned int *count)
{
	(void)d;
	*count = 0;
	return NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned int i, nvmlDevice_t *m)
{
	(void)d; (void)i; (void)m;
	return NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned int *id)
{
	(void)d; (void)id;
	return NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t d, unsigned int *id)
{
	(void)d; (void)id;
	return NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t d, nvmlDeviceAttributes_t *a)
{
	(void)d; (void)a;
	return NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t d, nvmlClockType_t t, unsigned int *c)
{
	(void)d; (void)t; (void)c;
	return NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetSupportedMemoryClocks(nvmlDevice_t d, unsigned int *n, unsigned int *c)
{
	(void)d; (void)c;
	*n = 0;
	return NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceGetSupportedGraphicsClocks(nvmlDevice_t d, unsigned int m, unsigned int *n,
						  unsigned int *c)
{
	(void)d; (void)m; (void)c;
	*n = 0;
	return NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceSetApplicationsClocks(nvmlDevice_t d, unsigned int m, unsigned int g)
{
	(void)d; (void)m; (void)g;
	return NVML_ERROR_NOT_SUPPORTED;
}

nvmlReturn_t nvmlDeviceResetApplicationsClocks(nvmlDevice_t d)
{
	(void)d;
	return NVML_ERROR_NOT_SUPPORTED;
}

/* Slurm 23.11's plugin also reads GPU use (gpu_p_usage_read); 22.05's does not: no processes. */
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *n,
						  nvmlProcessInfo_t *p)
{
	(void)d; (void)p;
	*n = 0;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned int *n,
						   nvmlProcessInfo_t *p)
{
	(void)d; (void)p;
	*n = 0;
	return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t d, nvmlProcessUtilizationSample_t *u,
					     unsigned int *n, unsigned long long last)
{
	(void)d; (void)u; (void)last;
	*n = 0;
	return NVML_ERROR_NOT_SUPPORTED;
}

/*
 * nvml.h maps nvmlInit to nvmlInit_v2 (defined above); the driver's library exports the
 * first version too, under its own name, and Slurm's configure links against that one.
 */
#undef nvmlInit
nvmlReturn_t nvmlInit(void) { return NVML_SUCCESS; }
