#include "backends/cpu/cpu_module.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_codegen.h"
#include "backends/cpu/cpu_probe.h"
#include "backends/cpu/temp_dirs.h"

namespace yirage::backends::cpu {
namespace {

// A timing's wall clock (flushes included) ends it, once min_runs are in,
// past this many times its target_seconds.
constexpr double kMaxWallFactor = 20.0;

// Generated modules link the OpenMP runtime. Unloading it with the last
// module would pull the code from under its idle pool threads, so pin it.
void PinOpenMpRuntime() {
  for (const char* name : {"libgomp.so.1", "libomp.so", "libomp.so.5", "libiomp5.so"}) {
    dlopen(name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  }
}

// Once a process: the folders of CPU workers that died without cleaning up.
void RemoveStaleModuleDirsOnce() {
  static const int removed = RemoveStaleModuleDirs(TempRoot());
  (void)removed;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CpuModule>> CpuModule::Create(int num_plans) {
  RemoveStaleModuleDirsOnce();
  std::string templ = absl::StrCat(TempRoot(), "/yirage_cpu_", getpid(), "_XXXXXX");
  if (mkdtemp(templ.data()) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp(", templ, "): ", std::strerror(errno)));
  }
  return std::unique_ptr<CpuModule>(new CpuModule(templ, num_plans));
}

CpuModule::~CpuModule() {
  for (Entry& e : plans_) {
    if (e.fini != nullptr) e.fini();
  }
  for (void* h : handles_) dlclose(h);
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

absl::StatusOr<std::vector<absl::Status>> CpuModule::Load(const std::string& library,
                                                          absl::Span<const int> plan_indices) {
  std::lock_guard<std::mutex> lock(mu_);
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* err = dlerror();
    return absl::InternalError(
        absl::StrCat("dlopen(", library, "): ", err != nullptr ? err : "unknown error"));
  }
  PinOpenMpRuntime();
  handles_.push_back(handle);
  std::vector<absl::Status> result;
  for (int i : plan_indices) {
    if (i < 0 || i >= num_plans()) {
      result.push_back(absl::InvalidArgumentError(absl::StrCat("plan index ", i, " out of range")));
      continue;
    }
    auto fn = reinterpret_cast<PlanFn>(dlsym(handle, PlanEntryName(i).c_str()));
    auto init = reinterpret_cast<int (*)()>(dlsym(handle, PlanInitName(i).c_str()));
    auto fini = reinterpret_cast<FiniFn>(dlsym(handle, PlanFiniName(i).c_str()));
    if (fn == nullptr || init == nullptr || fini == nullptr) {
      result.push_back(
          absl::InternalError(absl::StrCat("plan ", i, ": entry points missing in ", library)));
      continue;
    }
    if (const int rc = init(); rc != 0) {
      fini();
      // 2: a library the plan calls is missing (cpu_codegen.cc).
      result.push_back(rc == 2 ? absl::FailedPreconditionError(absl::StrCat(
                                     "plan ", i,
                                     ": OpenBLAS (libopenblas.so.0) not found: its library "
                                     "matmuls cannot run (Debian: apt-get install libopenblas0)"))
                               : absl::ResourceExhaustedError(absl::StrCat(
                                     "plan ", i, ": allocating its scratch buffers failed")));
      continue;
    }
    plans_[i] = Entry{fn, fini};
    result.push_back(absl::OkStatus());
  }
  return result;
}

bool CpuModule::loaded(int plan) const {
  return plan >= 0 && plan < num_plans() && plans_[plan].fn != nullptr;
}

absl::Status CpuModule::CheckPlan(int plan) const {
  if (plan < 0 || plan >= num_plans()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan index ", plan, " out of range (module has ", num_plans(), " plans)"));
  }
  if (plans_[plan].fn == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("plan ", plan, " did not compile"));
  }
  return absl::OkStatus();
}

absl::Status CpuModule::Run(int plan, const void* const* inputs, void* const* outputs) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = CheckPlan(plan); !s.ok()) return s;
  if (plans_[plan].fn(inputs, outputs) != 0) {
    return absl::InternalError(absl::StrCat("plan ", plan, ": not initialized"));
  }
  return absl::OkStatus();
}

absl::StatusOr<YirageTiming> CpuModule::Time(int plan, const void* const* inputs,
                                             void* const* outputs,
                                             const YirageTimingOptions* options) {
  std::lock_guard<std::mutex> lock(mu_);
  if (absl::Status s = CheckPlan(plan); !s.ok()) return s;
  // reuse_io needs nothing here: the kernels read and write the caller's
  // host buffers, so there is no copy to skip.
  YirageTimingOptions o{2, 100, 0.05, 3, 0, 0};
  if (options != nullptr) o = *options;
  const int warmup = std::max(0, o.warmup_runs);
  const int max_runs = o.max_runs > 0 ? o.max_runs : 100;
  const double target = o.target_seconds > 0 ? o.target_seconds : 0.05;
  const int min_runs = std::min(max_runs, std::max(1, o.min_runs));
  const int64_t flush_bytes = o.flush_bytes == 0 ? DefaultFlushBytes() : o.flush_bytes;
  if (flush_bytes > 0 && static_cast<int64_t>(flush_.size()) != flush_bytes) {
    flush_.assign(static_cast<size_t>(flush_bytes), 0);
  }
  const PlanFn fn = plans_[plan].fn;
  volatile unsigned char sink = 0;
  auto flush = [&](int run) {
    if (flush_.empty()) return;
    std::memset(flush_.data(), run & 0xff, flush_.size());
    sink = sink + flush_[static_cast<size_t>(run) % flush_.size()];
  };

  for (int i = 0; i < warmup; ++i) {
    if (fn(inputs, outputs) != 0) return absl::InternalError("plan not initialized");
  }
  // The flushes count against the wall clock too: past kMaxWallFactor
  // times the target, min_runs end the timing (a flush of twice a large
  // last-level cache, 960 MiB on a VM that reports 480, takes about 0.1 s a
  // run, which would turn 100 runs of a 100 us kernel into 10 s).
  const auto start = std::chrono::steady_clock::now();
  auto wall = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<double> times;
  double total = 0;
  while (static_cast<int>(times.size()) < max_runs &&
         (static_cast<int>(times.size()) < min_runs ||
          (total < target && wall() < kMaxWallFactor * target))) {
    flush(static_cast<int>(times.size()));
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = fn(inputs, outputs);
    const auto t1 = std::chrono::steady_clock::now();
    if (rc != 0) return absl::InternalError("plan not initialized");
    const double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
    times.push_back(us);
    total += us * 1e-6;
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  YirageTiming timing;
  timing.median_us = n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  timing.min_us = sorted.front();
  timing.runs = static_cast<int32_t>(n);
  return timing;
}

}  // namespace yirage::backends::cpu
