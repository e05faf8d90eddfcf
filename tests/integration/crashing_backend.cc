// A test-only backend: the real CPU backend, except that running a plan whose
// description contains $YIRAGE_TEST_CRASH_PLAN kills the process, the way a
// kernel with a wild pointer would. Lets integration tests check that such a
// candidate is blamed, retried on fresh workers and finally marked failed,
// while the job completes.
#include <dlfcn.h>
#include <signal.h>

#include <cstdlib>
#include <cstring>
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
  yirage::v1::CompileRequest parsed;
  if (rc == YIRAGE_OK && target && *target &&
      parsed.ParseFromArray(request, static_cast<int>(request_len))) {
    std::lock_guard<std::mutex> lock(g_mu);
    for (int i = 0; i < parsed.plans_size(); ++i) {
      if (parsed.plans(i).description().find(target) != std::string::npos) {
        g_doomed.insert({*module, i});
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

}  // namespace

extern "C" __attribute__((visibility("default"))) const YirageBackendV1* YirageBackendGetV1() {
  const YirageBackendV1* cpu = Cpu();
  if (!cpu) return nullptr;
  g_table = *cpu;
  g_table.compile = &Compile;
  g_table.run = &Run;
  return &g_table;
}
