#include "backends/cpu/cpu_probe.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace yirage::backends::cpu {
namespace {

std::string ReadTrimmed(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return std::string(absl::StripAsciiWhitespace(s));
}

// "32K" -> 32768, "16M" -> 16 MiB, "1024" -> 1024; 0 when unparsable.
int64_t ParseSize(std::string s) {
  if (s.empty()) return 0;
  int64_t mult = 1;
  const char suffix = s.back();
  if (suffix == 'K' || suffix == 'k') mult = 1024;
  if (suffix == 'M' || suffix == 'm') mult = 1024 * 1024;
  if (suffix == 'G' || suffix == 'g') mult = 1024LL * 1024 * 1024;
  if (mult != 1) s.pop_back();
  int64_t v = 0;
  if (!absl::SimpleAtoi(s, &v)) return 0;
  return v * mult;
}

}  // namespace

CacheSizes ReadCacheSizes() {
  CacheSizes sizes;
  int last_level = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = absl::StrCat("/sys/devices/system/cpu/cpu0/cache/index", i, "/");
    const std::string level_text = ReadTrimmed(dir + "level");
    if (level_text.empty()) break;
    int level = 0;
    if (!absl::SimpleAtoi(level_text, &level)) continue;
    const std::string type = ReadTrimmed(dir + "type");
    if (type == "Instruction") continue;
    const int64_t size = ParseSize(ReadTrimmed(dir + "size"));
    if (level == 1) sizes.l1d = size;
    if (level == 2) sizes.l2 = size;
    if (level == 3) sizes.l3 = size;
    if (level >= last_level && size > 0) {
      last_level = level;
      sizes.last_level = size;
    }
  }
  return sizes;
}

int64_t DefaultFlushBytes() {
  static const int64_t bytes = [] {
    const int64_t llc = ReadCacheSizes().last_level;
    return std::max<int64_t>(2 * llc, int64_t{32} << 20);
  }();
  return bytes;
}

int OpenMpThreads() {
  if (const char* env = std::getenv("OMP_NUM_THREADS"); env != nullptr) {
    const std::string first = std::string(env).substr(0, std::string(env).find(','));
    int n = 0;
    if (absl::SimpleAtoi(first, &n) && n > 0) return n;
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  return static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
}

std::string ProbeJson(const CpuCompiler& compiler, const std::string& scratch_dir, bool* usable) {
  nlohmann::json j;
  j["backend"] = "cpu";
  std::string vendor, model, flags;
  std::set<std::pair<std::string, std::string>> cores;  // (physical id, core id)
  {
    std::ifstream in("/proc/cpuinfo");
    std::string line, physical_id;
    while (std::getline(in, line)) {
      const size_t colon = line.find(':');
      if (colon == std::string::npos) continue;
      const std::string key(absl::StripAsciiWhitespace(line.substr(0, colon)));
      const std::string value(absl::StripAsciiWhitespace(line.substr(colon + 1)));
      if (key == "vendor_id" && vendor.empty()) vendor = value;
      if (key == "CPU implementer" && vendor.empty()) vendor = "arm:" + value;
      if ((key == "model name" || key == "Model") && model.empty()) model = value;
      if ((key == "flags" || key == "Features") && flags.empty()) flags = value;
      if (key == "physical id") physical_id = value;
      if (key == "core id") cores.insert({physical_id, value});
    }
  }
  const int logical = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  j["vendor"] = vendor;
  j["model"] = model;
  j["cores_logical"] = logical;
  j["cores_physical"] = cores.empty() ? logical : static_cast<int>(cores.size());
  j["omp_threads"] = OpenMpThreads();

  const std::set<std::string> have = [&] {
    std::set<std::string> s;
    for (absl::string_view f : absl::StrSplit(flags, ' ', absl::SkipEmpty())) {
      s.insert(std::string(f));
    }
    return s;
  }();
  nlohmann::json simd = nlohmann::json::array();
  for (const char* f : {"sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
                        "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16",
                        "amx_int8", "asimd", "asimdhp", "sve", "sve2", "bf16"}) {
    if (have.count(f) != 0) simd.push_back(f);
  }
  if (have.count("asimd") != 0 || have.count("neon") != 0) simd.push_back("neon");
  j["simd"] = simd;

  const CacheSizes caches = ReadCacheSizes();
  j["cache_bytes"] = {{"l1d", caches.l1d}, {"l2", caches.l2}, {"l3", caches.l3}};
  int64_t mem_kb = 0;
  {
    std::ifstream in("/proc/meminfo");
    std::string key;
    while (in >> key) {
      if (key == "MemTotal:") {
        in >> mem_kb;
        break;
      }
      std::string rest;
      std::getline(in, rest);
    }
  }
  j["memory_bytes"] = mem_kb * 1024;

  const std::string log = scratch_dir + "/version.log";
  absl::StatusOr<std::string> version = compiler.Version(log);
  j["compiler"] = {{"path", compiler.path()},
                   {"version", version.ok() ? *version : std::string()},
                   {"flags", CpuCompiler::Flags()},
                   // What -march=native compiles for here: exported kernels
                   // are built for it unless their user asks otherwise.
                   {"march", version.ok() ? compiler.NativeMarch(log) : std::string()}};
  *usable = version.ok();
  if (!version.ok()) {
    j["reason"] = absl::StrCat("the C++ compiler the CPU backend needs is unusable: ",
                               version.status().message());
  }
  return j.dump();
}

}  // namespace yirage::backends::cpu
