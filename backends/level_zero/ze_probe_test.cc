#include "backends/level_zero/ze_probe.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "backends/backend_api.h"
#include "backends/level_zero/ze_loader.h"
#include "core/builtin_chips.h"
#include "core/chip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace yirage::backends::level_zero {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr uint64_t kGiB = uint64_t{1} << 30;

// What the fake loader reports: one driver with these devices.
struct FakeDevice {
  ze_device_type_t type = ZE_DEVICE_TYPE_GPU;
  std::string name;
  uint32_t slices = 1, subslices_per_slice = 1, eus_per_subslice = 8, simd_width = 16;
  uint32_t clock_mhz = 0;
  std::vector<uint64_t> memories;  // bytes per memory
  uint32_t memory_clock_mhz = 0, bus_width = 0;
  uint64_t cache_bytes = 0;
  std::vector<uint32_t> sub_group_sizes = {16, 32};
};

struct FakeLoader {
  ze_result_t init_rc = ZE_RESULT_SUCCESS;
  uint32_t drivers = 1;
  std::vector<FakeDevice> devices;
};

FakeLoader* g_fake = nullptr;

ze_device_handle_t Handle(size_t i) { return reinterpret_cast<ze_device_handle_t>(i + 1); }
const FakeDevice& Device(ze_device_handle_t h) {
  return g_fake->devices[reinterpret_cast<uintptr_t>(h) - 1];
}

// A ZeApi whose functions answer from *g_fake.
ZeApi FakeApi() {
  ZeApi api;
  api.library = "fake";
  api.zeInit = [](ze_init_flags_t flags) {
    EXPECT_EQ(flags, ZE_INIT_FLAG_GPU_ONLY);
    return g_fake->init_rc;
  };
  api.zeDriverGet = [](uint32_t* n, ze_driver_handle_t* out) {
    if (out != nullptr) {
      for (uint32_t i = 0; i < std::min(*n, g_fake->drivers); ++i) {
        out[i] = reinterpret_cast<ze_driver_handle_t>(uintptr_t{0x100} + i);
      }
    }
    *n = g_fake->drivers;
    return ZE_RESULT_SUCCESS;
  };
  api.zeDeviceGet = [](ze_driver_handle_t, uint32_t* n, ze_device_handle_t* out) {
    const uint32_t have = static_cast<uint32_t>(g_fake->devices.size());
    if (out != nullptr) {
      for (uint32_t i = 0; i < std::min(*n, have); ++i) out[i] = Handle(i);
    }
    *n = have;
    return ZE_RESULT_SUCCESS;
  };
  api.zeDeviceGetProperties = [](ze_device_handle_t h, ze_device_properties_t* p) {
    EXPECT_EQ(p->stype, ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES);
    const FakeDevice& d = Device(h);
    p->type = d.type;
    p->vendorId = 0x8086;
    p->deviceId = 0x0bd5;
    p->flags = ZE_DEVICE_PROPERTY_FLAG_ECC;
    p->coreClockRate = d.clock_mhz;
    p->maxMemAllocSize = d.memories.empty() ? 0 : d.memories[0];
    p->numThreadsPerEU = 8;
    p->physicalEUSimdWidth = d.simd_width;
    p->numEUsPerSubslice = d.eus_per_subslice;
    p->numSubslicesPerSlice = d.subslices_per_slice;
    p->numSlices = d.slices;
    std::strncpy(p->name, d.name.c_str(), sizeof(p->name) - 1);
    return ZE_RESULT_SUCCESS;
  };
  api.zeDeviceGetComputeProperties = [](ze_device_handle_t h, ze_device_compute_properties_t* p) {
    EXPECT_EQ(p->stype, ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES);
    const FakeDevice& d = Device(h);
    p->maxTotalGroupSize = 1024;
    p->maxSharedLocalMemory = 128 * 1024;
    p->numSubGroupSizes = static_cast<uint32_t>(d.sub_group_sizes.size());
    for (size_t i = 0; i < d.sub_group_sizes.size(); ++i)
      p->subGroupSizes[i] = d.sub_group_sizes[i];
    return ZE_RESULT_SUCCESS;
  };
  api.zeDeviceGetMemoryProperties = [](ze_device_handle_t h, uint32_t* n,
                                       ze_device_memory_properties_t* out) {
    const FakeDevice& d = Device(h);
    const uint32_t have = static_cast<uint32_t>(d.memories.size());
    if (out != nullptr) {
      for (uint32_t i = 0; i < std::min(*n, have); ++i) {
        EXPECT_EQ(out[i].stype, ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES);
        out[i].totalSize = d.memories[i];
        out[i].maxClockRate = d.memory_clock_mhz;
        out[i].maxBusWidth = d.bus_width;
      }
    }
    *n = have;
    return ZE_RESULT_SUCCESS;
  };
  api.zeDeviceGetCacheProperties = [](ze_device_handle_t h, uint32_t* n,
                                      ze_device_cache_properties_t* out) {
    const FakeDevice& d = Device(h);
    if (out != nullptr && *n >= 1) out[0].cacheSize = d.cache_bytes;
    *n = 1;
    return ZE_RESULT_SUCCESS;
  };
  return api;
}

FakeDevice Max1550() {
  FakeDevice d;
  d.name = "Intel(R) Data Center GPU Max 1550";
  d.slices = 2;
  d.subslices_per_slice = 64;
  d.eus_per_subslice = 8;
  d.clock_mhz = 1600;
  d.memories = {64 * kGiB, 64 * kGiB};  // one per tile
  d.memory_clock_mhz = 1600;
  d.bus_width = 4096;
  d.cache_bytes = uint64_t{408} << 20;
  return d;
}

json Probe(FakeLoader fake, bool* usable, ZeApi api = FakeApi()) {
  g_fake = &fake;
  const std::string out = ProbeJson(absl::StatusOr<const ZeApi*>(&api), usable);
  g_fake = nullptr;
  json j = json::parse(out, nullptr, false);
  EXPECT_TRUE(j.is_object()) << out;
  return j;
}

std::string MatchedChip(const json& device) {
  auto chips = core::BuiltinChips();
  EXPECT_TRUE(chips.ok()) << chips.status();
  if (!chips.ok()) return "(error)";
  auto m = core::MatchDevice(device, "level_zero", *chips);
  return m.has_value() ? m->chip_id : "(none)";
}

TEST(LevelZeroProbeTest, DescribesAMax1550AndMatchesItsChip) {
  FakeLoader fake;
  fake.devices = {Max1550()};
  bool usable = false;
  json j = Probe(fake, &usable);
  EXPECT_TRUE(usable);
  EXPECT_EQ(j["backend"], "level_zero");
  EXPECT_EQ(j["name"], "Intel(R) Data Center GPU Max 1550");
  EXPECT_EQ(j["vendor"], "intel");
  EXPECT_EQ(j["device_id"], "0x0bd5");
  EXPECT_EQ(j["compute_units"], 128);
  EXPECT_EQ(j["eu_count"], 1024);
  EXPECT_EQ(j["clock_khz"], 1600000);
  EXPECT_EQ(j["memory_bytes"], 128 * kGiB);
  EXPECT_EQ(j["memory_count"], 2);
  EXPECT_EQ(j["memory_clock_khz"], 1600000);
  EXPECT_EQ(j["memory_bus_width_bits"], 4096);
  EXPECT_EQ(j["l2_bytes"], uint64_t{408} << 20);
  EXPECT_EQ(j["max_threads_per_block"], 1024);
  EXPECT_EQ(j["shared_mem_per_block"], 128 * 1024);
  EXPECT_EQ(j["sub_group_sizes"], json::array({16, 32}));
  EXPECT_EQ(j["warp_size"], 16);
  EXPECT_EQ(j["ecc"], true);
  EXPECT_EQ(j["device_count"], 1);
  EXPECT_FALSE(j.contains("reason"));
  EXPECT_EQ(MatchedChip(j), "max_1550");
  auto chip = core::ChipFromDevice(j, "level_zero");
  ASSERT_TRUE(chip.ok()) << chip.status();
  EXPECT_EQ(chip->vendor(), "intel");
  EXPECT_EQ(chip->compute().num_compute_units(), 128);
  EXPECT_EQ(chip->compute().warp_size(), 16);
  EXPECT_EQ(chip->compute().clock_mhz(), 1600);
  EXPECT_EQ(chip->compute().shared_mem_per_block_kb(), 128);
  EXPECT_EQ(chip->compute().l2_cache_mb(), 408);
}

TEST(LevelZeroProbeTest, SkipsNonGpuDevicesAndMatchesAnArcB580) {
  FakeDevice other;
  other.type = ZE_DEVICE_TYPE_VPU;
  other.name = "Intel(R) AI Boost";
  FakeDevice b580;
  b580.name = "Intel(R) Arc(TM) B580 Graphics";
  b580.slices = 1;
  b580.subslices_per_slice = 20;
  b580.memories = {12 * kGiB};
  b580.sub_group_sizes = {16, 32};
  FakeLoader fake;
  fake.devices = {other, b580};
  bool usable = false;
  json j = Probe(fake, &usable);
  EXPECT_TRUE(usable);
  EXPECT_EQ(j["name"], "Intel(R) Arc(TM) B580 Graphics");
  EXPECT_EQ(j["device_count"], 1);
  EXPECT_EQ(MatchedChip(j), "arc_b580");
}

TEST(LevelZeroProbeTest, MissingLoaderIsNoDeviceWithTheLoadError) {
  bool usable = true;
  json j = json::parse(ProbeJson(absl::StatusOr<const ZeApi*>(absl::NotFoundError(
                                     "libze_loader.so.1 not found (dlopen: ...)")),
                                 &usable));
  EXPECT_FALSE(usable);
  EXPECT_EQ(j["backend"], "level_zero");
  EXPECT_THAT(j["reason"].get<std::string>(), StartsWith("libze_loader.so.1 not found"));
}

TEST(LevelZeroProbeTest, FailingInitIsNoDevice) {
  FakeLoader fake;
  fake.init_rc = ZE_RESULT_ERROR_UNINITIALIZED;
  bool usable = true;
  json j = Probe(fake, &usable);
  EXPECT_FALSE(usable);
  EXPECT_THAT(j["reason"].get<std::string>(),
              StartsWith("zeInit: ZE_RESULT_ERROR_UNINITIALIZED (0x78000001): no Level Zero GPU "
                         "driver"));
}

TEST(LevelZeroProbeTest, NoDriverOrNoGpuIsNoDevice) {
  FakeLoader fake;
  fake.drivers = 0;
  bool usable = true;
  EXPECT_EQ(Probe(fake, &usable)["reason"], "zeDriverGet: no Level Zero driver");
  EXPECT_FALSE(usable);

  fake.drivers = 1;
  FakeDevice npu;
  npu.type = ZE_DEVICE_TYPE_VPU;
  npu.name = "Intel(R) AI Boost";
  fake.devices = {npu};
  EXPECT_THAT(Probe(fake, &usable)["reason"].get<std::string>(), HasSubstr("no GPU device"));
  EXPECT_FALSE(usable);
}

TEST(LevelZeroProbeTest, ResultNames) {
  EXPECT_EQ(ZeResultName(ZE_RESULT_ERROR_UNINITIALIZED), "ZE_RESULT_ERROR_UNINITIALIZED");
  EXPECT_EQ(ZeResultName(static_cast<ze_result_t>(0x12345)), "ze_result_t 0x00012345");
}

TEST(LevelZeroProbeTest, UnloadableLibraryIsNoDeviceNamingTheDlopenError) {
  absl::StatusOr<const ZeApi*> api = OpenZeLoader({"libyirage_no_such_runtime.so"});
  ASSERT_FALSE(api.ok());
  EXPECT_EQ(api.status().code(), absl::StatusCode::kNotFound);
  bool usable = true;
  json j = json::parse(ProbeJson(api, &usable));
  EXPECT_FALSE(usable);
  EXPECT_THAT(j["reason"].get<std::string>(),
              StartsWith("libze_loader.so.1 not found (dlopen: libyirage_no_such_runtime.so: "));
  EXPECT_THAT(j["reason"].get<std::string>(), HasSubstr("cannot open shared object file"));
}

// This machine has no Intel GPU: the real probe (libze_loader may or may not
// be installed) says NO_DEVICE with a reason, and every other entry point
// says it is detection only.
TEST(LevelZeroBackendTest, RealProbeOnThisMachineReportsNoDevice) {
  const std::string path = std::string(YIRAGE_BIN_DIR) + "/libyirage_backend_level_zero.so";
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  auto get = reinterpret_cast<YirageBackendGetV1Fn>(dlsym(handle, YIRAGE_BACKEND_ENTRY_POINT));
  ASSERT_NE(get, nullptr);
  const YirageBackendV1* backend = get();
  EXPECT_EQ(backend->abi_version, YIRAGE_BACKEND_ABI_VERSION);
  EXPECT_STREQ(backend->name, "level_zero");
  char* json_out = nullptr;
  const int rc = backend->probe(&json_out);
  ASSERT_NE(json_out, nullptr);
  const std::string out = json_out;
  backend->free_buffer(json_out);
  std::printf("level_zero probe on this machine: %s\n", out.c_str());
  if (rc == YIRAGE_OK) GTEST_SKIP() << "this machine has an Intel GPU: " << out;
  EXPECT_EQ(rc, YIRAGE_NO_DEVICE);
  json j = json::parse(out);
  EXPECT_EQ(j["backend"], "level_zero");
  ASSERT_TRUE(j["reason"].is_string());
  EXPECT_FALSE(j["reason"].get<std::string>().empty());

  YirageModule* module = nullptr;
  void* response = nullptr;
  size_t response_len = 0;
  char* error = nullptr;
  EXPECT_EQ(backend->compile("", 0, &module, &response, &response_len, &error), YIRAGE_ERROR);
  ASSERT_NE(error, nullptr);
  EXPECT_THAT(std::string(error), HasSubstr("only detects devices"));
  backend->free_buffer(error);
  error = nullptr;
  EXPECT_EQ(backend->run(nullptr, 0, nullptr, nullptr, &error), YIRAGE_ERROR);
  backend->free_buffer(error);
  error = nullptr;
  YirageTiming timing{};
  EXPECT_EQ(backend->time(nullptr, 0, nullptr, nullptr, nullptr, &timing, &error), YIRAGE_ERROR);
  backend->free_buffer(error);
}

}  // namespace
}  // namespace yirage::backends::level_zero
