#include "backends/level_zero/ze_probe.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace yirage::backends::level_zero {
namespace {

// "zeInit: ZE_RESULT_ERROR_UNINITIALIZED (0x78000001)".
std::string Failed(const char* what, ze_result_t rc) {
  return absl::StrFormat("%s: %s (0x%08x)", what, ZeResultName(rc), static_cast<uint32_t>(rc));
}

}  // namespace

std::string ProbeJson(const absl::StatusOr<const ZeApi*>& loaded, bool* usable) {
  nlohmann::json j;
  j["backend"] = "level_zero";
  *usable = false;
  if (!loaded.ok()) {
    j["reason"] = std::string(loaded.status().message());
    return j.dump();
  }
  const ZeApi& api = **loaded;
  j["library"] = api.library;
  if (ze_result_t rc = api.zeInit(ZE_INIT_FLAG_GPU_ONLY); rc != ZE_RESULT_SUCCESS) {
    std::string reason = Failed("zeInit", rc);
    if (rc == ZE_RESULT_ERROR_UNINITIALIZED) {
      absl::StrAppend(&reason,
                      ": no Level Zero GPU driver (is intel-level-zero-gpu installed and a GPU "
                      "present?)");
    }
    j["reason"] = reason;
    return j.dump();
  }
  uint32_t num_drivers = 0;
  if (ze_result_t rc = api.zeDriverGet(&num_drivers, nullptr); rc != ZE_RESULT_SUCCESS) {
    j["reason"] = Failed("zeDriverGet", rc);
    return j.dump();
  }
  if (num_drivers == 0) {
    j["reason"] = "zeDriverGet: no Level Zero driver";
    return j.dump();
  }
  std::vector<ze_driver_handle_t> drivers(num_drivers);
  if (ze_result_t rc = api.zeDriverGet(&num_drivers, drivers.data()); rc != ZE_RESULT_SUCCESS) {
    j["reason"] = Failed("zeDriverGet", rc);
    return j.dump();
  }
  drivers.resize(num_drivers);

  // The first GPU of any driver; count them all.
  ze_driver_handle_t driver = nullptr;
  ze_device_handle_t device = nullptr;
  ze_device_properties_t props{};
  int gpus = 0;
  std::string last_error;
  for (ze_driver_handle_t d : drivers) {
    uint32_t n = 0;
    if (ze_result_t rc = api.zeDeviceGet(d, &n, nullptr); rc != ZE_RESULT_SUCCESS) {
      last_error = Failed("zeDeviceGet", rc);
      continue;
    }
    std::vector<ze_device_handle_t> devices(n);
    if (n == 0) continue;
    if (ze_result_t rc = api.zeDeviceGet(d, &n, devices.data()); rc != ZE_RESULT_SUCCESS) {
      last_error = Failed("zeDeviceGet", rc);
      continue;
    }
    devices.resize(n);
    for (ze_device_handle_t dev : devices) {
      ze_device_properties_t p{};
      p.stype = ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES;
      if (ze_result_t rc = api.zeDeviceGetProperties(dev, &p); rc != ZE_RESULT_SUCCESS) {
        last_error = Failed("zeDeviceGetProperties", rc);
        continue;
      }
      if (p.type != ZE_DEVICE_TYPE_GPU) continue;
      if (++gpus == 1) {
        driver = d;
        device = dev;
        props = p;
      }
    }
  }
  if (device == nullptr) {
    std::string reason =
        absl::StrCat("zeDeviceGet: no GPU device in ", drivers.size(), " Level Zero driver(s)");
    if (!last_error.empty()) absl::StrAppend(&reason, " (last error: ", last_error, ")");
    j["reason"] = reason;
    return j.dump();
  }
  j["device_count"] = gpus;
  if (api.zeDriverGetProperties != nullptr) {
    ze_driver_properties_t dp{};
    dp.stype = ZE_STRUCTURE_TYPE_DRIVER_PROPERTIES;
    if (api.zeDriverGetProperties(driver, &dp) == ZE_RESULT_SUCCESS) {
      j["driver_version"] = dp.driverVersion;
    }
  }
  j["name"] = std::string(props.name, strnlen(props.name, sizeof(props.name)));
  j["vendor_id"] = absl::StrFormat("0x%04x", props.vendorId);
  j["device_id"] = absl::StrFormat("0x%04x", props.deviceId);
  if (props.vendorId == 0x8086) j["vendor"] = "intel";
  const int64_t xe_cores = int64_t{props.numSlices} * props.numSubslicesPerSlice;
  j["compute_units"] = xe_cores;
  j["eu_count"] = xe_cores * props.numEUsPerSubslice;
  j["threads_per_eu"] = props.numThreadsPerEU;
  j["eu_simd_width"] = props.physicalEUSimdWidth;
  j["clock_khz"] = int64_t{props.coreClockRate} * 1000;  // reported in MHz
  j["max_mem_alloc_bytes"] = props.maxMemAllocSize;
  j["ecc"] = (props.flags & ZE_DEVICE_PROPERTY_FLAG_ECC) != 0;
  j["integrated"] = (props.flags & ZE_DEVICE_PROPERTY_FLAG_INTEGRATED) != 0;
  j["subdevice"] = (props.flags & ZE_DEVICE_PROPERTY_FLAG_SUBDEVICE) != 0;

  ze_device_compute_properties_t compute{};
  compute.stype = ZE_STRUCTURE_TYPE_DEVICE_COMPUTE_PROPERTIES;
  if (ze_result_t rc = api.zeDeviceGetComputeProperties(device, &compute);
      rc == ZE_RESULT_SUCCESS) {
    j["max_threads_per_block"] = compute.maxTotalGroupSize;
    j["shared_mem_per_block"] = compute.maxSharedLocalMemory;
    std::vector<uint32_t> sizes(compute.subGroupSizes,
                                compute.subGroupSizes + std::min<uint32_t>(compute.numSubGroupSizes,
                                                                           ZE_SUBGROUPSIZE_COUNT));
    j["sub_group_sizes"] = sizes;
    uint32_t warp = 0;
    if (std::find(sizes.begin(), sizes.end(), props.physicalEUSimdWidth) != sizes.end()) {
      warp = props.physicalEUSimdWidth;
    } else if (!sizes.empty()) {
      warp = *std::max_element(sizes.begin(), sizes.end());
    }
    if (warp > 0) j["warp_size"] = warp;
  } else {
    j["compute_properties_error"] = Failed("zeDeviceGetComputeProperties", rc);
  }

  uint32_t num_memories = 0;
  if (api.zeDeviceGetMemoryProperties(device, &num_memories, nullptr) == ZE_RESULT_SUCCESS &&
      num_memories > 0) {
    std::vector<ze_device_memory_properties_t> memories(num_memories);
    for (auto& m : memories) m.stype = ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES;
    if (api.zeDeviceGetMemoryProperties(device, &num_memories, memories.data()) ==
        ZE_RESULT_SUCCESS) {
      memories.resize(std::min<size_t>(num_memories, memories.size()));
      uint64_t total = 0;
      uint32_t clock_mhz = 0, bus_bits = 0;
      for (const auto& m : memories) {
        total += m.totalSize;
        clock_mhz = std::max(clock_mhz, m.maxClockRate);
        bus_bits = std::max(bus_bits, m.maxBusWidth);
      }
      j["memory_bytes"] = total;
      j["memory_count"] = memories.size();
      j["memory_clock_khz"] = int64_t{clock_mhz} * 1000;  // reported in MHz
      j["memory_bus_width_bits"] = bus_bits;
    }
  }
  if (!j.contains("memory_bytes")) j["memory_bytes"] = 0;

  if (api.zeDeviceGetCacheProperties != nullptr) {
    uint32_t num_caches = 0;
    if (api.zeDeviceGetCacheProperties(device, &num_caches, nullptr) == ZE_RESULT_SUCCESS &&
        num_caches > 0) {
      std::vector<ze_device_cache_properties_t> caches(num_caches);
      for (auto& c : caches) c.stype = ZE_STRUCTURE_TYPE_DEVICE_CACHE_PROPERTIES;
      if (api.zeDeviceGetCacheProperties(device, &num_caches, caches.data()) == ZE_RESULT_SUCCESS) {
        caches.resize(std::min<size_t>(num_caches, caches.size()));
        size_t largest = 0;
        for (const auto& c : caches) largest = std::max(largest, c.cacheSize);
        if (largest > 0) j["l2_bytes"] = largest;
      }
    }
  }
  *usable = true;
  return j.dump();
}

}  // namespace yirage::backends::level_zero
