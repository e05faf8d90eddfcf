// A test-only backend: the real CPU backend, except that running a plan whose
// description contains $YIRAGE_TEST_CRASH_PLAN kills the process, the way a
// kernel with a wild pointer would. Lets integration tests check that such a
// candidate is blamed, retried on fresh workers and finally marked failed,
// while the job completes. With $YIRAGE_TEST_LUCKY_PLAN set, timings are
// synthetic, so that a test of how results are chosen does not depend on
// the load of the machine: the baseline 100 us, every other plan 50 to 89
// us by its description, and a plan whose description contains
// $YIRAGE_TEST_LUCKY_PLAN 1 us in the first module (batch) that compiles it
// and 1000 us in every later one (a noisy machine's lucky draw, which a
// final round must see through).
#include <dlfcn.h>
#include <signal.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "backends/backend_api.h"
#include "yirage/v1/backend.pb.h"

namespace {

const YirageBackendV1* g_cpu = nullptr;
YirageBackendV1 g_table;
std::mutex g_mu;
std::set<std::pair<YirageModule*, int>> g_doomed;  // (module, plan index)
// (module, plan index) -> the synthetic time of its plan.
std::map<std::pair<YirageModule*, int>, double> g_synthetic_us;
std::set<std::string> g_lucky_seen;  // descriptions compiled so far

const YirageBackendV1* Cpu() {
  if (g_cpu) return g_cpu;
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(&Cpu), &info);
  std::string self = info.dli_fname ? info.dli_fname : "";
  std::string dir = self.substr(0, self.rfind('/') + 1);
  void* handle = dlopen((dir + "libyirage_backend_cpu.so").c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) return nullptr;
  auto get = reinterpret_cast<YirageBackendGetV1Fn>(dlsym(handle, YIRAGE_BACKEND_ENTRY_POINT));
  g_cpu = get ? get() : nullptr;
  return g_cpu;
}

int Compile(const void* request, size_t request_len, YirageModule** module, void** response,
            size_t* response_len, char** error) {
  int rc = Cpu()->compile(request, request_len, module, response, response_len, error);
  const char* target = std::getenv("YIRAGE_TEST_CRASH_PLAN");
  const char* lucky = std::getenv("YIRAGE_TEST_LUCKY_PLAN");
  yirage::v1::CompileRequest parsed;
  if (rc == YIRAGE_OK && parsed.ParseFromArray(request, static_cast<int>(request_len))) {
    std::lock_guard<std::mutex> lock(g_mu);
    for (int i = 0; i < parsed.plans_size(); ++i) {
      const std::string& d = parsed.plans(i).description();
      if (target && *target && d.find(target) != std::string::npos) g_doomed.insert({*module, i});
      if (lucky && *lucky) {
        double us = parsed.plans(i).baseline() ? 100.0 : 50.0 + std::hash<std::string>{}(d) % 40;
        if (d.find(lucky) != std::string::npos) us = g_lucky_seen.insert(d).second ? 1.0 : 1000.0;
        g_synthetic_us[{*module, i}] = us;
      }
    }
  }
  return rc;
}

int Run(YirageModule* module, int32_t plan_index, const void* const* inputs, void* const* outputs,
        char** error) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_doomed.count({module, plan_index})) raise(SIGSEGV);
  }
  return Cpu()->run(module, plan_index, inputs, outputs, error);
}

int Time(YirageModule* module, int32_t plan_index, const void* const* inputs, void* const* outputs,
         const YirageTimingOptions* options, YirageTiming* timing, char** error) {
  int rc = Cpu()->time(module, plan_index, inputs, outputs, options, timing, error);
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = g_synthetic_us.find({module, plan_index});
  if (rc == YIRAGE_OK && it != g_synthetic_us.end()) {
    timing->median_us = it->second;
    timing->min_us = it->second;
  }
  return rc;
}

// Forgets the module's plans: a later module may get its address.
void Release(YirageModule* module) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    std::erase_if(g_doomed, [&](const auto& k) { return k.first == module; });
    std::erase_if(g_synthetic_us, [&](const auto& k) { return k.first.first == module; });
  }
  Cpu()->release(module);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const YirageBackendV1* YirageBackendGetV1() {
  const YirageBackendV1* cpu = Cpu();
  if (!cpu) return nullptr;
  g_table = *cpu;
  g_table.compile = &Compile;
  g_table.run = &Run;
  g_table.time = &Time;
  g_table.release = &Release;
  return &g_table;
}
