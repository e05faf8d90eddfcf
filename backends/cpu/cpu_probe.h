// Describes the host CPU (and the compiler the backend needs) for probe().
#ifndef YIRAGE_BACKENDS_CPU_CPU_PROBE_H_
#define YIRAGE_BACKENDS_CPU_CPU_PROBE_H_

#include <cstdint>
#include <string>

#include "backends/cpu/cpu_compiler.h"

namespace yirage::backends::cpu {

struct CacheSizes {
  int64_t l1d = 0;  // bytes, 0 when unknown
  int64_t l2 = 0;
  int64_t l3 = 0;
  int64_t last_level = 0;  // the largest data/unified cache
};

// Cache sizes of cpu0 from /sys/devices/system/cpu/cpu0/cache. Thread-safe.
CacheSizes ReadCacheSizes();

// Bytes written between timed runs to evict caches: twice the last-level
// cache, at least 32 MiB. Thread-safe.
int64_t DefaultFlushBytes();

// Threads an OpenMP parallel region uses by default: the first value of
// OMP_NUM_THREADS if set, else the CPUs in this process's affinity mask.
int OpenMpThreads();

// The probe() JSON object: vendor, model, cores, threads, SIMD features,
// caches, memory and the compiler. Sets *usable to false and adds "reason"
// when the compiler cannot be run. `scratch_dir` is a writable directory.
std::string ProbeJson(const CpuCompiler& compiler, const std::string& scratch_dir, bool* usable);

}  // namespace yirage::backends::cpu

#endif  // YIRAGE_BACKENDS_CPU_CPU_PROBE_H_
