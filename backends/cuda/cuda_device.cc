#include "backends/cuda/cuda_device.h"

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_cublaslt.h"
#include "nlohmann/json.hpp"

namespace yirage::backends::cuda {

std::string ArchFor(int cc_major, int cc_minor) {
  return absl::StrCat("sm_", cc_major, cc_minor, cc_major >= 9 ? "a" : "");
}

std::string DeviceInfo::Arch() const { return ArchFor(cc_major, cc_minor); }

CudaTarget DeviceInfo::Target() const {
  CudaTarget t;
  t.sm = cc_major * 10 + cc_minor;
  t.max_smem_per_block =
      shared_mem_per_block_optin > 0 ? shared_mem_per_block_optin : shared_mem_per_block;
  t.sm_count = sm_count > 0 ? sm_count : t.sm_count;
  return t;
}

std::mutex& Device::mutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}

DeviceLock::DeviceLock() : lock_(Device::mutex()) {}

absl::StatusOr<Device*> Device::Get() {
  static const absl::StatusOr<Device*>* device = [] {
    auto fail = [](absl::Status s) { return new absl::StatusOr<Device*>(std::move(s)); };
    absl::StatusOr<const CudaDriver*> cu = LoadDriver();
    if (!cu.ok()) return fail(cu.status());
    const CudaDriver& d = **cu;
    if (absl::Status s = CheckCu(d, d.cuInit(0), "cuInit"); !s.ok()) return fail(s);
    int count = 0;
    if (absl::Status s = CheckCu(d, d.cuDeviceGetCount(&count), "cuDeviceGetCount"); !s.ok()) {
      return fail(s);
    }
    if (count < 1) return fail(absl::NotFoundError("no CUDA device"));
    auto* dev = new Device;
    dev->cu_ = *cu;
    if (absl::Status s = CheckCu(d, d.cuDeviceGet(&dev->dev_, 0), "cuDeviceGet"); !s.ok()) {
      return fail(s);
    }
    if (absl::Status s = CheckCu(d, d.cuDevicePrimaryCtxRetain(&dev->ctx_, dev->dev_),
                                 "cuDevicePrimaryCtxRetain");
        !s.ok()) {
      return fail(s);
    }
    DeviceInfo& info = dev->info_;
    char name[256] = {0};
    d.cuDeviceGetName(name, sizeof(name) - 1, dev->dev_);
    info.name = name;
    auto attr = [&](CUdevice_attribute a) {
      int v = 0;
      d.cuDeviceGetAttribute(&v, a, dev->dev_);
      return v;
    };
    info.cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    info.cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    info.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    info.l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
    info.shared_mem_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    info.shared_mem_per_block_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    info.shared_mem_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    info.clock_khz = attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE);
    info.memory_clock_khz = attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
    info.bus_width_bits = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
    info.warp_size = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    info.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
    size_t mem = 0;
    d.cuDeviceTotalMem(&mem, dev->dev_);
    info.memory_bytes = static_cast<int64_t>(mem);
    d.cuDriverGetVersion(&info.driver_version);
    return new absl::StatusOr<Device*>(dev);
  }();
  return *device;
}

absl::Status Device::MakeCurrent() {
  if (lost()) {
    return absl::UnavailableError(absl::StrCat(
        "the CUDA device is lost for this process (an earlier kernel fault: ", lost_reason_,
        "); restart the process"));
  }
  return CheckCu(*cu_, cu_->cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
}

void Device::MarkLost(const std::string& why) {
  if (lost_reason_.empty()) lost_reason_ = why.empty() ? std::string("unknown fault") : why;
}

bool IsDeviceLost(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable;
}

absl::StatusOr<std::string> NvrtcVersion() {
  absl::StatusOr<const Nvrtc*> nv = LoadNvrtc();
  if (!nv.ok()) return nv.status();
  int major = 0, minor = 0;
  if ((*nv)->nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) {
    return absl::InternalError("nvrtcVersion failed");
  }
  return absl::StrCat(major, ".", minor);
}

absl::StatusOr<std::string> CompileCubin(const std::string& source, const std::string& arch,
                                         const std::string& name) {
  absl::StatusOr<const Nvrtc*> loaded = LoadNvrtc();
  if (!loaded.ok()) return loaded.status();
  const Nvrtc& nv = **loaded;
  const std::string home = CudaHome();
  std::vector<std::string> opts = {absl::StrCat("--gpu-architecture=", arch), "--std=c++17",
                                   absl::StrCat("-I", home, "/include")};
  std::error_code ec;
  if (std::filesystem::is_directory(home + "/include/cccl", ec)) {
    opts.push_back(absl::StrCat("-I", home, "/include/cccl"));
  }
  // A batch of plans is one program of many kernels: split compilation
  // optimizes and assembles them on every core. An NVRTC that does not know
  // the option gets the program again without it.
  opts.push_back("--split-compile=0");
  std::vector<const char*> argv;
  for (const std::string& o : opts) argv.push_back(o.c_str());
  nvrtcProgram prog = nullptr;
  nvrtcResult rc = NVRTC_SUCCESS;
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (prog != nullptr) nv.nvrtcDestroyProgram(&prog);
    rc = nv.nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr);
    if (rc != NVRTC_SUCCESS) {
      return absl::InternalError(absl::StrCat("nvrtcCreateProgram: ", nv.nvrtcGetErrorString(rc)));
    }
    rc = nv.nvrtcCompileProgram(prog, static_cast<int>(argv.size()), argv.data());
    if (rc != NVRTC_ERROR_INVALID_OPTION) break;
    argv.pop_back();  // --split-compile
  }
  size_t log_size = 0;
  std::string log;
  if (nv.nvrtcGetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    log.resize(log_size);
    nv.nvrtcGetProgramLog(prog, log.data());
    log.resize(log_size - 1);
  }
  if (rc != NVRTC_SUCCESS) {
    nv.nvrtcDestroyProgram(&prog);
    return absl::InvalidArgumentError(
        absl::StrCat("NVRTC (", arch, "): ", nv.nvrtcGetErrorString(rc), "\n", log));
  }
  size_t size = 0;
  std::string cubin;
  rc = nv.nvrtcGetCUBINSize(prog, &size);
  if (rc == NVRTC_SUCCESS) {
    cubin.resize(size);
    rc = nv.nvrtcGetCUBIN(prog, cubin.data());
  }
  nv.nvrtcDestroyProgram(&prog);
  if (rc != NVRTC_SUCCESS || cubin.empty()) {
    return absl::InternalError(absl::StrCat("nvrtcGetCUBIN: ", nv.nvrtcGetErrorString(rc)));
  }
  return cubin;
}

std::string ProbeJson(bool* usable) {
  nlohmann::json j;
  j["backend"] = "cuda";
  *usable = false;
  absl::StatusOr<std::string> nvrtc = NvrtcVersion();
  j["nvrtc_version"] = nvrtc.ok() ? *nvrtc : std::string("");
  // Library matmuls (KERNEL_LIBRARY) need cuBLASLt; without it only they fail.
  if (absl::StatusOr<const CublasLt*> lt = LoadCublasLt(); lt.ok()) {
    j["cublaslt_version"] = std::to_string((*lt)->cublasLtGetVersion());
    j["cublaslt_library"] = (*lt)->library;
  } else {
    j["cublaslt_version"] = "";
    j["cublaslt_error"] = std::string(lt.status().message());
  }
  absl::StatusOr<Device*> dev = Device::Get();
  if (!dev.ok()) {
    j["reason"] = std::string(dev.status().message());
    return j.dump();
  }
  const DeviceInfo& i = (*dev)->info();
  j["name"] = i.name;
  j["compute_capability"] = absl::StrCat(i.cc_major, ".", i.cc_minor);
  j["arch"] = i.Arch();
  j["sm_count"] = i.sm_count;
  j["memory_bytes"] = i.memory_bytes;
  j["l2_bytes"] = i.l2_bytes;
  j["shared_mem_per_block"] = i.shared_mem_per_block;
  j["shared_mem_per_block_optin"] = i.shared_mem_per_block_optin;
  j["shared_mem_per_sm"] = i.shared_mem_per_sm;
  j["clock_khz"] = i.clock_khz;
  j["memory_clock_khz"] = i.memory_clock_khz;
  j["bus_width_bits"] = i.bus_width_bits;
  j["warp_size"] = i.warp_size;
  j["max_threads_per_block"] = i.max_threads_per_block;
  j["driver_version"] = i.driver_version;
  if (!nvrtc.ok()) {
    j["reason"] = std::string(nvrtc.status().message());
    return j.dump();
  }
  *usable = true;
  return j.dump();
}

}  // namespace yirage::backends::cuda
