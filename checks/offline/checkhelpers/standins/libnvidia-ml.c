/* A stand-in for the NVIDIA driver's libnvidia-ml.so.1 on a machine without a GPU, written from the
 * NVML API as nvidia-ml-py 13.610.43 calls it (pynvml.py: nvmlInitWithFlags, nvmlDeviceGetCount_v2,
 * nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetPciInfo_v3 with struct nvmlPciInfo_t, nvmlMemory_t, the
 * NVML_ERROR_* codes and buffer sizes). It answers for the cards described in the environment:
 *
 *   STANDIN_NVML_DEVICES  devices separated by ';', each
 *                         name|pciDeviceId|pciSubSystemId|memory total bytes|major.minor|uuid|busId|mig|cores
 *                         (ids in hex as NVML gives them: device << 16 | vendor; mig 0/1, or '-' and
 *                         cores '-' for "not supported")
 *   STANDIN_NVML_DRIVER   driver version string        STANDIN_NVML_CUDA   CUDA driver version (13000)
 *   STANDIN_NVML_INIT     an NVML error code nvmlInitWithFlags returns (9: driver not loaded)
 *
 * Built by checks/offline/checkhelpers/driver_standins.py with the soname libnvidia-ml.so.1, as the real one has. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;
enum { OK = 0, UNINITIALIZED = 1, INVALID_ARGUMENT = 2, NOT_SUPPORTED = 3, INSUFFICIENT_SIZE = 7 };

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

static int initialized;

/* Field `field` (0-based, '|'-separated) of device `index`, copied into out; 0 when absent. */
static int field(unsigned int index, int field, char *out, size_t size) {
    const char *all = getenv("STANDIN_NVML_DEVICES");
    if (all == NULL) return 0;
    const char *p = all;
    for (unsigned int i = 0; i < index; i++) {
        p = strchr(p, ';');
        if (p == NULL) return 0;
        p++;
    }
    for (int f = 0; f < field; f++) {
        const char *bar = strchr(p, '|'), *semi = strchr(p, ';');
        if (bar == NULL || (semi != NULL && semi < bar)) return 0;
        p = bar + 1;
    }
    size_t n = strcspn(p, "|;");
    if (n + 1 > size) n = size - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 1;
}

static unsigned int count(void) {
    const char *all = getenv("STANDIN_NVML_DEVICES");
    if (all == NULL || *all == '\0') return 0;
    unsigned int n = 1;
    for (const char *p = all; *p; p++) n += *p == ';';
    return n;
}

static int index_of(nvmlDevice_t device, unsigned int *index) {
    unsigned long i = (unsigned long)device;
    if (i == 0 || i > count()) return 0;
    *index = (unsigned int)(i - 1);
    return 1;
}

static nvmlReturn_t copy_string(const char *value, char *out, unsigned int length) {
    if (out == NULL) return INVALID_ARGUMENT;
    if (strlen(value) + 1 > length) return INSUFFICIENT_SIZE;
    strcpy(out, value);
    return OK;
}

nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    const char *fail = getenv("STANDIN_NVML_INIT");
    if (fail != NULL && atoi(fail) != 0) return atoi(fail);
    initialized = 1;
    return OK;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    if (!initialized) return UNINITIALIZED;
    initialized = 0;
    return OK;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case OK: return "Success";
    case UNINITIALIZED: return "Uninitialized";
    case INVALID_ARGUMENT: return "Invalid Argument";
    case NOT_SUPPORTED: return "Not Supported";
    case INSUFFICIENT_SIZE: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    if (!initialized) return UNINITIALIZED;
    const char *v = getenv("STANDIN_NVML_DRIVER");
    return copy_string(v ? v : "0.0", version, length);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *version) {
    if (!initialized) return UNINITIALIZED;
    const char *v = getenv("STANDIN_NVML_CUDA");
    *version = v ? atoi(v) : 0;
    return OK;
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *n) {
    if (!initialized) return UNINITIALIZED;
    *n = count();
    return OK;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (!initialized) return UNINITIALIZED;
    if (index >= count()) return INVALID_ARGUMENT;
    *device = (nvmlDevice_t)(unsigned long)(index + 1);
    return OK;
}

#define DEVICE_FIELD(k, buf)                                                   \
    unsigned int i;                                                            \
    char buf[128];                                                             \
    if (!initialized) return UNINITIALIZED;                                    \
    if (!index_of(device, &i) || !field(i, k, buf, sizeof buf)) return INVALID_ARGUMENT;

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    DEVICE_FIELD(0, value)
    return copy_string(value, name, length);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    DEVICE_FIELD(1, id)
    char subsystem[32], bus[64];
    if (!field(i, 2, subsystem, sizeof subsystem) || !field(i, 6, bus, sizeof bus)) return INVALID_ARGUMENT;
    memset(pci, 0, sizeof *pci);
    pci->pciDeviceId = (unsigned int)strtoul(id, NULL, 16);
    pci->pciSubSystemId = (unsigned int)strtoul(subsystem, NULL, 16);
    strncpy(pci->busId, bus, sizeof pci->busId - 1);
    strncpy(pci->busIdLegacy, bus, sizeof pci->busIdLegacy - 1);
    return OK;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    DEVICE_FIELD(3, total)
    memory->total = strtoull(total, NULL, 10);
    memory->used = 0;
    memory->free = memory->total;
    return OK;
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    DEVICE_FIELD(4, cc)
    if (sscanf(cc, "%d.%d", major, minor) != 2) return INVALID_ARGUMENT;
    return OK;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    DEVICE_FIELD(5, value)
    return copy_string(value, uuid, length);
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending) {
    DEVICE_FIELD(7, mig)
    if (strcmp(mig, "-") == 0) return NOT_SUPPORTED;
    *current = *pending = (unsigned int)atoi(mig);
    return OK;
}

nvmlReturn_t nvmlDeviceGetNumGpuCores(nvmlDevice_t device, unsigned int *cores) {
    DEVICE_FIELD(8, value)
    if (strcmp(value, "-") == 0) return NOT_SUPPORTED;
    *cores = (unsigned int)strtoul(value, NULL, 10);
    return OK;
}
