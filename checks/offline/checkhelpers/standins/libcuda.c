/* A stand-in for the NVIDIA driver's libcuda.so.1 (soname libcuda.so.1, as the real one): only the
 * entry point the tests call, cuDriverGetVersion (CUDA driver API: CUresult cuDriverGetVersion(int *)),
 * answering STANDIN_CUDA_VERSION (default 13000). Built by checks/offline/checkhelpers/driver_standins.py. */
#include <stdlib.h>

int cuDriverGetVersion(int *version) {
    const char *v = getenv("STANDIN_CUDA_VERSION");
    *version = v ? atoi(v) : 13000;
    return 0;
}
