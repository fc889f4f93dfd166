/* A stand-in libnvidia-ml.so.1 for tests without a GPU. It serves what the file named by
 * $FAKE_NVML_SCRIPT says, re-read on every call so a test can change it mid-run (write a temp
 * file and rename it over). One directive a line:
 *   driver VERSION
 *   init_error CODE                 nvmlInit_v2 returns CODE
 *   count_error CODE                nvmlDeviceGetCount_v2 returns CODE
 *   gpu INDEX UUID BUSID TOTAL RESERVED FREE USED NAME...   (INDEX in order from 0)
 *   proc INDEX PID USED             a compute process on GPU INDEX
 *   fail INDEX CALL CODE            CALL (handle|uuid|name|pci|memory|procs) on GPU INDEX fails
 * Only the v2 memory call is exported (a v1 caller would fail to load it), and it checks the
 * struct version as the real library does. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

#define OK 0
#define ERR_INVALID_ARGUMENT 2
#define ERR_INSUFFICIENT_SIZE 7
#define ERR_VERSION_MISMATCH 25
#define MAXG 16
#define MAXP 64

struct gpu { char uuid[96], bus[32], name[96]; unsigned long long total, reserved, free, used; };
struct fail { int gpu; char call[16]; int code; };
static struct gpu gpus[MAXG];
static int ngpu, init_error, count_error, nfail, nproc;
static struct fail fails[32];
static unsigned pidv[MAXP], pgpu[MAXP];
static unsigned long long pused[MAXP];
static char driver[64];

static void load(void) {
    ngpu = init_error = count_error = nfail = nproc = 0;
    strcpy(driver, "0.0");
    const char *path = getenv("FAKE_NVML_SCRIPT");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        int i, n = 0;
        struct gpu g;
        if (sscanf(line, "driver %63s", driver) == 1) continue;
        if (sscanf(line, "init_error %d", &init_error) == 1) continue;
        if (sscanf(line, "count_error %d", &count_error) == 1) continue;
        if (sscanf(line, "gpu %d %95s %31s %llu %llu %llu %llu %n", &i, g.uuid, g.bus, &g.total,
                   &g.reserved, &g.free, &g.used, &n) == 7 && i == ngpu && ngpu < MAXG) {
            snprintf(g.name, sizeof g.name, "%s", line + n);
            gpus[ngpu++] = g;
            continue;
        }
        if (nproc < MAXP && sscanf(line, "proc %u %u %llu", &pgpu[nproc], &pidv[nproc], &pused[nproc]) == 3) {
            nproc++;
            continue;
        }
        if (nfail < 32 && sscanf(line, "fail %d %15s %d", &fails[nfail].gpu, fails[nfail].call, &fails[nfail].code) == 3)
            nfail++;
    }
    fclose(f);
}

static int failing(int gpu, const char *call) {
    for (int i = 0; i < nfail; i++)
        if (fails[i].gpu == gpu && strcmp(fails[i].call, call) == 0) return fails[i].code;
    return 0;
}

static int dev_index(nvmlDevice_t d) { return (int)((uintptr_t)d) - 1; }

static nvmlReturn_t put_str(char *dst, unsigned len, const char *src) {
    if (strlen(src) + 1 > len) return ERR_INSUFFICIENT_SIZE;
    strcpy(dst, src);
    return OK;
}

#define DEVICE(call)                                          \
    load();                                                   \
    int i = dev_index(dev);                                   \
    if (i < 0 || i >= ngpu) return ERR_INVALID_ARGUMENT;      \
    int e = failing(i, call);                                 \
    if (e) return e;

nvmlReturn_t nvmlInit_v2(void) { load(); return init_error; }
nvmlReturn_t nvmlShutdown(void) { return OK; }
const char *nvmlErrorString(nvmlReturn_t r) { (void)r; return "fake NVML error"; }

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    load();
    return put_str(version, length, driver);
}

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    load();
    if (count_error) return count_error;
    *count = (unsigned)ngpu;
    return OK;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *dev) {
    load();
    if (index >= (unsigned)ngpu) return ERR_INVALID_ARGUMENT;
    int e = failing((int)index, "handle");
    if (e) return e;
    *dev = (nvmlDevice_t)(uintptr_t)(index + 1);
    return OK;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t dev, char *uuid, unsigned int length) {
    DEVICE("uuid");
    return put_str(uuid, length, gpus[i].uuid);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t dev, char *name, unsigned int length) {
    DEVICE("name");
    return put_str(name, length, gpus[i].name);
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t dev, nvmlPciInfo_t *pci) {
    DEVICE("pci");
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busId, sizeof pci->busId, "%s", gpus[i].bus);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%.15s", gpus[i].bus);
    return OK;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t dev, nvmlMemory_v2_t *m) {
    DEVICE("memory");
    if (m->version != ((unsigned)sizeof(nvmlMemory_v2_t) | (2u << 24))) return ERR_VERSION_MISMATCH;
    m->total = gpus[i].total;
    m->reserved = gpus[i].reserved;
    m->free = gpus[i].free;
    m->used = gpus[i].used;
    return OK;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t dev, unsigned int *count,
                                                     nvmlProcessInfo_t *infos) {
    DEVICE("procs");
    unsigned n = 0;
    for (int p = 0; p < nproc; p++) n += pgpu[p] == (unsigned)i;
    if (infos == NULL || *count < n) {
        *count = n;
        return n == 0 ? OK : ERR_INSUFFICIENT_SIZE;
    }
    unsigned k = 0;
    for (int p = 0; p < nproc; p++) {
        if (pgpu[p] != (unsigned)i) continue;
        infos[k].pid = pidv[p];
        infos[k].usedGpuMemory = pused[p];
        infos[k].gpuInstanceId = 0xFFFFFFFFu;
        infos[k].computeInstanceId = 0xFFFFFFFFu;
        k++;
    }
    *count = k;
    return OK;
}
