#include "backends/hip/hip_probe.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/backend_api.h"
#include "backends/hip/hip_runtime.h"
#include "core/builtin_chips.h"
#include "core/chip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace yirage::backends::hip {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr int64_t kGiB = int64_t{1} << 30;

// What the fake runtime reports.
struct FakeDevice {
  hipError_t init_rc = hipSuccess;
  hipError_t count_rc = hipSuccess;
  int count = 1;
  std::string name;
  std::string gcn_arch_name;
  int compute_units = 0;
  int64_t memory_bytes = 0;
  int warp_size = 64;
  int clock_khz = 0;
  int memory_clock_khz = 0;
  int bus_width = 0;
  int l2_bytes = 0;
  int lds_bytes = 65536;
  int max_threads_per_block = 1024;
};

FakeDevice* g_fake = nullptr;

// A HipApi whose functions answer from *g_fake.
HipApi FakeApi() {
  HipApi api;
  api.library = "fake";
  api.hipInit = [](unsigned int) { return g_fake->init_rc; };
  api.hipGetDeviceCount = [](int* n) {
    *n = g_fake->count_rc == hipSuccess ? g_fake->count : 0;
    return g_fake->count_rc;
  };
  api.hipDeviceGet = [](hipDevice_t* d, int ordinal) {
    *d = ordinal;
    return hipSuccess;
  };
  api.hipDeviceGetName = [](char* name, int len, hipDevice_t) {
    std::strncpy(name, g_fake->name.c_str(), len);
    return hipSuccess;
  };
  api.hipDeviceGetAttribute = [](int* v, hipDeviceAttribute_t a, int) {
    switch (a) {
      case hipDeviceAttributeMultiprocessorCount:
        *v = g_fake->compute_units;
        break;
      case hipDeviceAttributeWarpSize:
        *v = g_fake->warp_size;
        break;
      case hipDeviceAttributeClockRate:
        *v = g_fake->clock_khz;
        break;
      case hipDeviceAttributeMemoryClockRate:
        *v = g_fake->memory_clock_khz;
        break;
      case hipDeviceAttributeMemoryBusWidth:
        *v = g_fake->bus_width;
        break;
      case hipDeviceAttributeL2CacheSize:
        *v = g_fake->l2_bytes;
        break;
      case hipDeviceAttributeMaxSharedMemoryPerBlock:
        *v = g_fake->lds_bytes;
        break;
      case hipDeviceAttributeMaxThreadsPerBlock:
        *v = g_fake->max_threads_per_block;
        break;
      default:
        return hipErrorInvalidValue;
    }
    return hipSuccess;
  };
  api.hipDeviceTotalMem = [](size_t* bytes, hipDevice_t) {
    *bytes = static_cast<size_t>(g_fake->memory_bytes);
    return hipSuccess;
  };
  api.hipRuntimeGetVersion = [](int* v) {
    *v = 60241134;
    return hipSuccess;
  };
  api.hipGetErrorName = [](hipError_t rc) -> const char* {
    switch (rc) {
      case hipErrorNoDevice:
        return "hipErrorNoDevice";
      case hipErrorInvalidDevice:
        return "hipErrorInvalidDevice";
      default:
        return "hipErrorUnknown";
    }
  };
  api.hipGetErrorString = [](hipError_t rc) -> const char* {
    return rc == hipErrorNoDevice ? "no ROCm-capable device is detected" : "unknown";
  };
  api.get_device_properties = [](hipDeviceProp_t* props, int) {
    std::strncpy(props->name, g_fake->name.c_str(), sizeof(props->name) - 1);
    std::strncpy(props->gcnArchName, g_fake->gcn_arch_name.c_str(), sizeof(props->gcnArchName) - 1);
    return hipSuccess;
  };
  return api;
}

FakeDevice Mi300x() {
  FakeDevice d;
  d.name = "AMD Instinct MI300X";
  d.gcn_arch_name = "gfx942:sramecc+:xnack-";
  d.compute_units = 304;
  d.memory_bytes = 192 * kGiB;
  d.clock_khz = 2100000;
  d.memory_clock_khz = 1300000;
  d.bus_width = 8192;
  d.l2_bytes = 4 << 20;
  return d;
}

// Runs the probe against `fake`; *usable says whether it found a device.
json Probe(FakeDevice fake, bool* usable, HipApi api = FakeApi()) {
  g_fake = &fake;
  const std::string out = ProbeJson(absl::StatusOr<const HipApi*>(&api), usable);
  g_fake = nullptr;
  json j = json::parse(out, nullptr, false);
  EXPECT_TRUE(j.is_object()) << out;
  return j;
}

std::string MatchedChip(const json& device) {
  auto chips = core::BuiltinChips();
  EXPECT_TRUE(chips.ok()) << chips.status();
  if (!chips.ok()) return "(error)";
  auto m = core::MatchDevice(device, "hip", *chips);
  return m.has_value() ? m->chip_id : "(none)";
}

TEST(HipProbeTest, DescribesAnMi300xAndMatchesItsChip) {
  bool usable = false;
  json j = Probe(Mi300x(), &usable);
  EXPECT_TRUE(usable);
  EXPECT_EQ(j["backend"], "hip");
  EXPECT_EQ(j["name"], "AMD Instinct MI300X");
  EXPECT_EQ(j["gcn_arch_name"], "gfx942:sramecc+:xnack-");
  EXPECT_EQ(j["compute_units"], 304);
  EXPECT_EQ(j["memory_bytes"], 192 * kGiB);
  EXPECT_EQ(j["warp_size"], 64);
  EXPECT_EQ(j["clock_khz"], 2100000);
  EXPECT_EQ(j["memory_clock_khz"], 1300000);
  EXPECT_EQ(j["memory_bus_width_bits"], 8192);
  EXPECT_EQ(j["l2_bytes"], 4 << 20);
  EXPECT_EQ(j["shared_mem_per_block"], 65536);
  EXPECT_EQ(j["max_threads_per_block"], 1024);
  EXPECT_EQ(j["runtime_version"], 60241134);
  EXPECT_EQ(j["device_count"], 1);
  EXPECT_FALSE(j.contains("reason"));
  EXPECT_EQ(MatchedChip(j), "mi300x");
  // The unknown-device path understands the same keys.
  auto chip = core::ChipFromDevice(j, "hip");
  ASSERT_TRUE(chip.ok()) << chip.status();
  EXPECT_EQ(chip->arch_code(), "gfx942");
  EXPECT_EQ(chip->compute().num_compute_units(), 304);
  EXPECT_EQ(chip->compute().warp_size(), 64);
  EXPECT_EQ(chip->compute().clock_mhz(), 2100);
  EXPECT_EQ(chip->compute().shared_mem_per_block_kb(), 64);
}

TEST(HipProbeTest, ArchNameIsOptionalAndAWrongArchRulesAChipOut) {
  HipApi api = FakeApi();
  api.get_device_properties = nullptr;  // a runtime exporting only R0600
  bool usable = false;
  json j = Probe(Mi300x(), &usable, api);
  EXPECT_TRUE(usable);
  EXPECT_FALSE(j.contains("gcn_arch_name"));
  EXPECT_EQ(MatchedChip(j), "mi300x");

  FakeDevice wrong = Mi300x();
  wrong.gcn_arch_name = "gfx90a:sramecc+:xnack-";
  EXPECT_EQ(MatchedChip(Probe(wrong, &usable)), "(none)");

  // Garbage where the arch name should be is dropped, not reported.
  FakeDevice garbage = Mi300x();
  garbage.gcn_arch_name = "\x01\x02junk";
  EXPECT_FALSE(Probe(garbage, &usable).contains("gcn_arch_name"));
}

TEST(HipProbeTest, MissingLibraryIsNoDeviceWithTheLoadError) {
  bool usable = true;
  const std::string out = ProbeJson(
      absl::StatusOr<const HipApi*>(absl::NotFoundError(
          "libamdhip64.so not found (dlopen: libamdhip64.so: cannot open shared object file)")),
      &usable);
  EXPECT_FALSE(usable);
  json j = json::parse(out);
  EXPECT_EQ(j["backend"], "hip");
  EXPECT_THAT(j["reason"].get<std::string>(), StartsWith("libamdhip64.so not found (dlopen: "));
}

TEST(HipProbeTest, FailingInitIsNoDevice) {
  FakeDevice fake = Mi300x();
  fake.init_rc = hipErrorNoDevice;
  bool usable = true;
  json j = Probe(fake, &usable);
  EXPECT_FALSE(usable);
  EXPECT_THAT(j["reason"].get<std::string>(),
              StartsWith("hipInit: hipErrorNoDevice (100): no ROCm-capable device is detected"));
  EXPECT_FALSE(j.contains("name"));
}

TEST(HipProbeTest, NoDevicesIsNoDevice) {
  FakeDevice fake = Mi300x();
  fake.count = 0;
  bool usable = true;
  json j = Probe(fake, &usable);
  EXPECT_FALSE(usable);
  EXPECT_THAT(j["reason"].get<std::string>(), HasSubstr("0 devices"));

  fake.count_rc = hipErrorNoDevice;
  j = Probe(fake, &usable);
  EXPECT_FALSE(usable);
  EXPECT_EQ(j["reason"],
            "hipGetDeviceCount: hipErrorNoDevice (100): no ROCm-capable device is detected");
}

TEST(HipProbeTest, UnloadableLibraryIsNoDeviceNamingTheDlopenError) {
  absl::StatusOr<const HipApi*> api = OpenHipRuntime({"libyirage_no_such_runtime.so"});
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kNotFound);
  bool usable = true;
  json j = json::parse(ProbeJson(api, &usable));
  EXPECT_FALSE(usable);
  EXPECT_THAT(j["reason"].get<std::string>(),
              StartsWith("libamdhip64.so not found (dlopen: libyirage_no_such_runtime.so: "));
  EXPECT_THAT(j["reason"].get<std::string>(), HasSubstr("cannot open shared object file"));
}

// This machine has no AMD GPU: the real probe (libamdhip64 may or may not be
// installed) says NO_DEVICE with a reason, and every other entry point says
// it is detection only.
TEST(HipBackendTest, RealProbeOnThisMachineReportsNoDevice) {
  const std::string path = std::string(YIRAGE_BIN_DIR) + "/libyirage_backend_hip.so";
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto get = reinterpret_cast<YirageBackendGetV1Fn>(dlsym(handle, YIRAGE_BACKEND_ENTRY_POINT));
  ASSERT_NE(get, nullptr);
  const YirageBackendV1* backend = get();
  EXPECT_EQ(backend->abi_version, YIRAGE_BACKEND_ABI_VERSION);
  EXPECT_STREQ(backend->name, "hip");
  char* json_out = nullptr;
  const int rc = backend->probe(&json_out);
  ASSERT_NE(json_out, nullptr);
  const std::string out = json_out;
  backend->free_buffer(json_out);
  std::printf("hip probe on this machine: %s\n", out.c_str());
  if (rc == YIRAGE_OK) GTEST_SKIP() << "this machine has an AMD GPU: " << out;
  EXPECT_EQ(rc, YIRAGE_NO_DEVICE);
  json j = json::parse(out);
  EXPECT_EQ(j["backend"], "hip");
  ASSERT_TRUE(j["reason"].is_string());
  EXPECT_FALSE(j["reason"].get<std::string>().empty());

  YirageModule* module = nullptr;
  void* response = nullptr;
  size_t response_len = 0;
  char* error = nullptr;
  EXPECT_EQ(backend->compile("", 0, &module, &response, &response_len, &error), YIRAGE_ERROR);
  ASSERT_NE(error, nullptr);
  EXPECT_THAT(std::string(error), HasSubstr("only detects devices"));
  EXPECT_THAT(std::string(error), HasSubstr("not implemented"));
  backend->free_buffer(error);
  EXPECT_EQ(module, nullptr);
  error = nullptr;
  EXPECT_EQ(backend->run(nullptr, 0, nullptr, nullptr, &error), YIRAGE_ERROR);
  backend->free_buffer(error);
  error = nullptr;
  YirageTiming timing{};
  EXPECT_EQ(backend->time(nullptr, 0, nullptr, nullptr, nullptr, &timing, &error), YIRAGE_ERROR);
  backend->free_buffer(error);
}

}  // namespace
}  // namespace yirage::backends::hip
