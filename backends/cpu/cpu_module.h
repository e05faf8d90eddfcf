// A loaded set of compiled plans: the dlopen'd shared libraries of one compile
// request, their private temp directory, and run/time entry points.
#ifndef YIRAGE_BACKENDS_CPU_CPU_MODULE_H_
#define YIRAGE_BACKENDS_CPU_CPU_MODULE_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/backend_api.h"

namespace yirage::backends::cpu {

// Thread-safe: calls into the generated code are serialized by a mutex (the
// plans' scratch buffers are shared module state).
class CpuModule {
 public:
  // Creates an empty module with `num_plans` plans (none loaded yet) and a
  // private directory from mkdtemp under $TMPDIR (or /tmp), named
  // yirage_cpu_<pid>_XXXXXX. The first call of a process removes the folders
  // that processes no longer running left there (RemoveStaleModuleDirs).
  static absl::StatusOr<std::unique_ptr<CpuModule>> Create(int num_plans);

  // Runs every loaded plan's _fini, dlcloses the libraries and removes the
  // directory with everything in it.
  ~CpuModule();
  CpuModule(const CpuModule&) = delete;
  CpuModule& operator=(const CpuModule&) = delete;

  const std::string& dir() const { return dir_; }
  int num_plans() const { return static_cast<int>(plans_.size()); }

  // dlopens `library` and binds plans `plan_indices` (yirage_plan_<i> and its
  // _init/_fini), running _init. Returns one status per index: an error for a
  // plan whose symbols are missing or whose _init failed. Returns an error
  // (and binds nothing) when the library cannot be loaded.
  absl::StatusOr<std::vector<absl::Status>> Load(const std::string& library,
                                                 absl::Span<const int> plan_indices);

  bool loaded(int plan) const;

  // Runs the plan once. REQUIRES: buffers as backend_api.h describes.
  absl::Status Run(int plan, const void* const* inputs, void* const* outputs);

  // Warm-up runs, then timed runs of one call each (steady_clock) with a cache
  // flush outside the timed region between runs. `options` may be null
  // (defaults: 2 warm-ups, 100 runs max, 0.05 s, 3 runs min, flush 2x LLC).
  absl::StatusOr<YirageTiming> Time(int plan, const void* const* inputs, void* const* outputs,
                                    const YirageTimingOptions* options);

 private:
  using PlanFn = int (*)(const void* const*, void* const*);
  using FiniFn = void (*)();
  struct Entry {
    PlanFn fn = nullptr;
    FiniFn fini = nullptr;
  };

  CpuModule(std::string dir, int num_plans) : dir_(std::move(dir)), plans_(num_plans) {}
  absl::Status CheckPlan(int plan) const;

  std::string dir_;
  std::vector<void*> handles_;
  std::vector<Entry> plans_;
  std::mutex mu_;
  std::vector<unsigned char> flush_;  // guarded by mu_
};

}  // namespace yirage::backends::cpu

#endif  // YIRAGE_BACKENDS_CPU_CPU_MODULE_H_
