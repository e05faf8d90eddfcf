#include "backends/cuda/cuda_module.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/graph.h"

namespace yirage::backends::cuda {

namespace {

// CompiledPlan.kernel_key: the plan's code generated as plan 0, without the
// line naming the plan, and its launches. Two plans whose schedules this
// backend runs alike (knobs a kernel form does not use) get the same.
std::string KernelKey(const CudaCodegen& codegen, const yirage::v1::Plan& plan) {
  absl::StatusOr<PlanCode> canonical = codegen.GeneratePlan(plan, 0, false);
  if (!canonical.ok()) return "";
  std::string key = std::move(canonical->source);
  if (absl::StartsWith(key, "// ---- plan ")) key.erase(0, key.find('\n') + 1);
  return key + "\n// launches: " + LaunchManifestOf(*canonical).ShortDebugString();
}

// Without a device: the request's target, which must name every figure the
// code generator sizes kernels by.
absl::StatusOr<CudaTarget> RequestedTarget(const yirage::v1::CompileTarget* requested,
                                           const absl::Status& no_device) {
  const std::string why = absl::StrCat("no CUDA device (", no_device.message(), "), so ");
  if (requested == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(why,
                     "CompileRequest.target must name the device to compile for "
                     "(compute_capability, multiprocessors, max_shared_memory_per_block)"));
  }
  const yirage::v1::CompileTarget& t = *requested;
  if (t.compute_capability() < 70 || t.compute_capability() > 129) {
    return absl::InvalidArgumentError(absl::StrCat(
        why,
        "CompileRequest.target.compute_capability must be 70 to 129 (major * 10 + minor), got ",
        t.compute_capability()));
  }
  if (t.multiprocessors() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(why, "CompileRequest.target.multiprocessors must be at least 1, got ",
                     t.multiprocessors()));
  }
  if (t.max_shared_memory_per_block() < 48 * 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat(why,
                     "CompileRequest.target.max_shared_memory_per_block must be at least 49152 "
                     "bytes, got ",
                     t.max_shared_memory_per_block()));
  }
  CudaTarget target;
  target.sm = t.compute_capability();
  target.sm_count = t.multiprocessors();
  target.max_smem_per_block = t.max_shared_memory_per_block();
  return target;
}

std::atomic<int> injected_error_plan{-1};
std::atomic<int> injected_fault_plan{-1};
std::atomic<int64_t> claimed_smem{0};

std::string Truncate(std::string text) {
  if (text.size() > kMaxDiagnosticBytes) {
    text.resize(kMaxDiagnosticBytes);
    text += "\n... (diagnostics truncated)";
  }
  return text;
}

// The device's figures, with the shared memory a test claims (if any).
CudaTarget DeviceTarget(const Device& device) {
  CudaTarget target = device.info().Target();
  if (const int64_t claimed = claimed_smem.load(); claimed > 0) target.max_smem_per_block = claimed;
  return target;
}

}  // namespace

void SetInjectedCompileError(int plan_index) { injected_error_plan.store(plan_index); }
void SetInjectedFault(int plan_index) { injected_fault_plan.store(plan_index); }
void SetClaimedSharedMemory(int64_t bytes) { claimed_smem.store(bytes); }

CudaModule::CudaModule(Device* device, std::vector<int64_t> input_bytes,
                       std::vector<int64_t> output_bytes, int num_plans)
    : device_(device),
      input_bytes_(std::move(input_bytes)),
      output_bytes_(std::move(output_bytes)),
      plans_(num_plans) {}

CudaModule::~CudaModule() {
  if (device_ == nullptr || device_->lost()) return;
  DeviceLock lock;
  if (device_->MakeCurrent().ok()) FreeDeviceState();
}

void CudaModule::FreeDeviceState() {
  if (gen_ != device_->generation()) return;  // nothing was made
  const CudaDriver& cu = device_->cu();
  for (PlanState& p : plans_) {
    p.matmuls.clear();
    if (p.generation != gen_) continue;
    for (CUdeviceptr b : p.buffers) cu.cuMemFree(b);
    p.buffers.clear();
    p.generation = -1;
  }
  if (lt_handle_ != nullptr) {
    if (absl::StatusOr<const CublasLt*> lt = LoadCublasLt(); lt.ok()) {
      (*lt)->cublasLtDestroy(lt_handle_);
    }
    lt_handle_ = nullptr;
  }
  for (CUdeviceptr b : io_) cu.cuMemFree(b);
  io_.clear();
  if (flush_ != 0) cu.cuMemFree(flush_);
  flush_ = 0;
  for (CUmodule m : cu_modules_) {
    if (m != nullptr) cu.cuModuleUnload(m);
  }
  cu_modules_.clear();
  gen_ = -1;
}

int CudaModule::AddImage(std::string cubin) {
  images_.push_back(std::move(cubin));
  return static_cast<int>(images_.size()) - 1;
}

void CudaModule::SetPlan(int plan, PlanCode code, int image) {
  plans_[plan].ok = true;
  plans_[plan].code = std::move(code);
  plans_[plan].image = image;
}

absl::Status CudaModule::CheckPlan(int plan) const {
  if (plan < 0 || plan >= num_plans()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan index ", plan, " out of range (module has ", num_plans(), " plans)"));
  }
  if (!plans_[plan].ok) {
    return absl::FailedPreconditionError(absl::StrCat("plan ", plan, " did not compile"));
  }
  if (device_ == nullptr) {
    return absl::FailedPreconditionError("no CUDA device: this module was compiled only");
  }
  return absl::OkStatus();
}

absl::Status CudaModule::Fail(CUresult rc, const std::string& what) {
  const std::string text = absl::StrCat(what, ": ", DriverErrorText(device_->cu(), rc));
  if (IsStickyError(rc) || device_->lost()) {
    device_->MarkLost(text);
    return absl::UnavailableError(
        absl::StrCat(text, "; the CUDA device is lost for this process (sticky error)"));
  }
  return absl::InternalError(text);
}

absl::Status CudaModule::Prepare(int plan) {
  const CudaDriver& cu = device_->cu();
  if (gen_ != device_->generation()) {
    // First use in this context.
    cu_modules_.assign(images_.size(), nullptr);
    io_.clear();
    loaded_inputs_.clear();
    flush_ = 0;
    flush_bytes_ = 0;
    for (PlanState& p : plans_) {
      p.generation = -1;
      p.fns.clear();
      p.matmuls.clear();
      p.buffers.clear();
    }
    lt_handle_ = nullptr;
    gen_ = device_->generation();
    std::vector<int64_t> sizes = input_bytes_;
    sizes.insert(sizes.end(), output_bytes_.begin(), output_bytes_.end());
    for (int64_t bytes : sizes) {
      CUdeviceptr p = 0;
      if (CUresult rc = cu.cuMemAlloc(&p, static_cast<size_t>(std::max<int64_t>(bytes, 16)));
          rc != CUDA_SUCCESS) {
        return Fail(rc, "cuMemAlloc (graph inputs/outputs)");
      }
      io_.push_back(p);
    }
  }
  PlanState& ps = plans_[plan];
  if (ps.generation == gen_) return absl::OkStatus();
  if (cu_modules_[ps.image] == nullptr) {
    CUmodule m = nullptr;
    if (CUresult rc = cu.cuModuleLoadData(&m, images_[ps.image].data()); rc != CUDA_SUCCESS) {
      return Fail(rc, "cuModuleLoadData");
    }
    cu_modules_[ps.image] = m;
  }
  ps.fns.clear();
  ps.matmuls.clear();
  for (const KernelLaunch& l : ps.code.launches) {
    if (l.library.has_value()) {
      absl::StatusOr<const CublasLt*> lt = LoadCublasLt();
      if (!lt.ok()) return lt.status();
      if (lt_handle_ == nullptr) {
        if (cublasStatus_t st = (*lt)->cublasLtCreate(&lt_handle_); st != CUBLAS_STATUS_SUCCESS) {
          lt_handle_ = nullptr;
          return absl::InternalError(absl::StrCat("cublasLtCreate: ", CublasStatusText(*lt, st)));
        }
      }
      auto matmul = std::make_unique<PreparedMatmul>();
      if (absl::Status s = matmul->Init(*lt, lt_handle_, *l.library); !s.ok()) {
        ps.matmuls.clear();
        return absl::Status(s.code(), absl::StrCat(l.name, ": ", s.message()));
      }
      ps.fns.push_back(nullptr);
      ps.matmuls.push_back(std::move(matmul));
      continue;
    }
    ps.matmuls.push_back(nullptr);
    CUfunction fn = nullptr;
    if (CUresult rc = cu.cuModuleGetFunction(&fn, cu_modules_[ps.image], l.name.c_str());
        rc != CUDA_SUCCESS) {
      return Fail(rc, absl::StrCat("cuModuleGetFunction(", l.name, ")"));
    }
    if (l.smem_bytes > 48 * 1024) {
      if (CUresult rc = cu.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                              l.smem_bytes);
          rc != CUDA_SUCCESS) {
        return Fail(rc, absl::StrCat(l.name, ": ", l.smem_bytes, " bytes of shared memory"));
      }
    }
    ps.fns.push_back(fn);
  }
  for (CUdeviceptr b : ps.buffers) cu.cuMemFree(b);
  ps.buffers.clear();
  for (const PlanBuffer& b : ps.code.buffers) {
    CUdeviceptr p = 0;
    if (CUresult rc = cu.cuMemAlloc(&p, static_cast<size_t>(b.bytes)); rc != CUDA_SUCCESS) {
      for (CUdeviceptr q : ps.buffers) cu.cuMemFree(q);
      ps.buffers.clear();
      return Fail(rc, absl::StrCat("cuMemAlloc(", b.bytes, " bytes for ", b.what, ")"));
    }
    ps.buffers.push_back(p);
    if (b.zero_init) {
      if (CUresult rc = cu.cuMemsetD8(p, 0, static_cast<size_t>(b.bytes)); rc != CUDA_SUCCESS) {
        return Fail(rc, "cuMemsetD8");
      }
    }
  }
  // TMA descriptors hold buffer addresses: made now that the buffers are
  // in place, not in the timed launches.
  ps.tensor_maps.assign(ps.code.launches.size(), {});
  const int num_io = static_cast<int>(io_.size());
  for (size_t k = 0; k < ps.code.launches.size(); ++k) {
    for (const TensorMapArg& t : ps.code.launches[k].tensor_maps) {
      if (cu.cuTensorMapEncodeTiled == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat(ps.code.launches[k].name,
                         ": TMA descriptors need a driver of CUDA 12 or later "
                         "(cuTensorMapEncodeTiled is missing)"));
      }
      const CUdeviceptr base = t.buffer < num_io ? io_[t.buffer] : ps.buffers[t.buffer - num_io];
      // Rank 2, or 3 with a batch dim.
      const int rank = static_cast<int>(t.dims.size());
      if ((rank != 2 && rank != 3) || t.box.size() != t.dims.size()) {
        return absl::InternalError(
            absl::StrCat(ps.code.launches[k].name,
                         ": a tensor map needs 2 or 3 dims and a box extent a dim (got ", rank,
                         " dims, ", t.box.size(), " box extents)"));
      }
      cuuint64_t dims[3];
      cuuint32_t box[3];
      for (int d = 0; d < rank; ++d) {
        dims[d] = static_cast<cuuint64_t>(t.dims[d]);
        box[d] = static_cast<cuuint32_t>(t.box[d]);
      }
      const cuuint64_t strides[2] = {static_cast<cuuint64_t>(t.stride_bytes),
                                     static_cast<cuuint64_t>(t.batch_stride_bytes)};
      const cuuint32_t element_strides[3] = {1, 1, 1};
      const CUtensorMapDataType type =
          t.data_type == "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16"  ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
          : t.data_type == "CU_TENSOR_MAP_DATA_TYPE_FLOAT32" ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                                             : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
      CUtensorMap map;
      if (CUresult rc = cu.cuTensorMapEncodeTiled(
              &map, type, rank, reinterpret_cast<void*>(base), dims, strides, box, element_strides,
              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
          rc != CUDA_SUCCESS) {
        return Fail(rc, absl::StrCat(ps.code.launches[k].name, ": cuTensorMapEncodeTiled"));
      }
      ps.tensor_maps[k].push_back(map);
    }
  }
  ps.generation = gen_;
  return absl::OkStatus();
}

absl::Status CudaModule::CopyIn(const void* const* inputs) {
  loaded_inputs_.clear();
  for (size_t i = 0; i < input_bytes_.size(); ++i) {
    if (CUresult rc = device_->cu().cuMemcpyHtoD(io_[i], inputs[i], input_bytes_[i]);
        rc != CUDA_SUCCESS) {
      return Fail(rc, absl::StrCat("copying input ", i, " to the device"));
    }
  }
  loaded_inputs_.assign(inputs, inputs + input_bytes_.size());
  return absl::OkStatus();
}

absl::Status CudaModule::CopyOut(void* const* outputs) {
  for (size_t i = 0; i < output_bytes_.size(); ++i) {
    if (CUresult rc =
            device_->cu().cuMemcpyDtoH(outputs[i], io_[input_bytes_.size() + i], output_bytes_[i]);
        rc != CUDA_SUCCESS) {
      return Fail(rc, absl::StrCat("copying output ", i, " from the device"));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaModule::Launch(int plan) {
  PlanState& ps = plans_[plan];
  const int num_io = static_cast<int>(io_.size());
  std::vector<CUdeviceptr> values;
  std::vector<void*> params;
  for (size_t k = 0; k < ps.code.launches.size(); ++k) {
    const KernelLaunch& l = ps.code.launches[k];
    values.assign(l.args.size(), 0);
    params.clear();
    // TMA descriptors first (by value: the driver copies each parameter
    // from the pointer it is given), then the buffers.
    for (CUtensorMap& map : ps.tensor_maps[k]) params.push_back(&map);
    for (size_t a = 0; a < l.args.size(); ++a) {
      const int id = l.args[a];
      values[a] = id < num_io ? io_[id] : ps.buffers[id - num_io];
      params.push_back(&values[a]);
    }
    if (ps.matmuls[k] != nullptr) {
      // A, B, C, bias, D, workspace (cuda_codegen.h LibraryMatmulCall).
      if (absl::Status s = ps.matmuls[k]->Run(values[0], values[1], values[2], values[3], values[4],
                                              values[5], nullptr);
          !s.ok()) {
        return absl::InternalError(absl::StrCat("plan ", plan, ": ", l.name, ": ", s.message()));
      }
      continue;
    }
    const CudaDriver& cu = device_->cu();
    const unsigned gx = static_cast<unsigned>(l.grid[0]), gy = static_cast<unsigned>(l.grid[1]),
                   gz = static_cast<unsigned>(l.grid[2]), bx = static_cast<unsigned>(l.block),
                   smem = static_cast<unsigned>(l.smem_bytes);
    // A cooperative launch fails (CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE)
    // rather than run a grid whose blocks could not all be resident.
    CUresult rc = l.cooperative ? cu.cuLaunchCooperativeKernel(ps.fns[k], gx, gy, gz, bx, 1, 1,
                                                               smem, nullptr, params.data())
                                : cu.cuLaunchKernel(ps.fns[k], gx, gy, gz, bx, 1, 1, smem, nullptr,
                                                    params.data(), nullptr);
    if (rc != CUDA_SUCCESS) return Fail(rc, absl::StrCat("plan ", plan, ": launching ", l.name));
  }
  return absl::OkStatus();
}

absl::Status CudaModule::Run(int plan, const void* const* inputs, void* const* outputs) {
  if (absl::Status s = CheckPlan(plan); !s.ok()) return s;
  DeviceLock lock;
  if (absl::Status s = device_->MakeCurrent(); !s.ok()) return s;
  if (absl::Status s = Prepare(plan); !s.ok()) return s;
  if (absl::Status s = CopyIn(inputs); !s.ok()) return s;
  if (absl::Status s = Launch(plan); !s.ok()) return s;
  if (CUresult rc = device_->cu().cuCtxSynchronize(); rc != CUDA_SUCCESS) {
    return Fail(rc, absl::StrCat("plan ", plan, ": kernel failed"));
  }
  return CopyOut(outputs);
}

absl::StatusOr<YirageTiming> CudaModule::Time(int plan, const void* const* inputs,
                                              void* const* outputs,
                                              const YirageTimingOptions* options) {
  if (absl::Status s = CheckPlan(plan); !s.ok()) return s;
  DeviceLock lock;
  if (absl::Status s = device_->MakeCurrent(); !s.ok()) return s;
  if (absl::Status s = Prepare(plan); !s.ok()) return s;
  const CudaDriver& cu = device_->cu();
  YirageTimingOptions o{3, 100, 0.05, 10, 0, 0};
  if (options != nullptr) o = *options;
  const int warmup = std::max(0, o.warmup_runs);
  const int max_runs = o.max_runs > 0 ? o.max_runs : 100;
  const double target = o.target_seconds > 0 ? o.target_seconds : 0.05;
  const int min_runs = std::min(max_runs, std::max(1, o.min_runs));
  const int64_t flush_bytes = o.flush_bytes == 0
                                  ? std::max<int64_t>(2 * device_->info().l2_bytes, 64 << 20)
                                  : std::max<int64_t>(0, o.flush_bytes);
  if (flush_bytes > 0 && flush_bytes_ != flush_bytes) {
    if (flush_ != 0) cu.cuMemFree(flush_);
    flush_ = 0;
    flush_bytes_ = 0;
    if (CUresult rc = cu.cuMemAlloc(&flush_, static_cast<size_t>(flush_bytes));
        rc != CUDA_SUCCESS) {
      return Fail(rc, "cuMemAlloc (L2 flush buffer)");
    }
    flush_bytes_ = flush_bytes;
  }
  // reuse_io: the caller's inputs are unchanged since its last call; they
  // are still on the device if that call copied these same buffers.
  const bool inputs_loaded = o.reuse_io != 0 && !loaded_inputs_.empty() &&
                             std::equal(loaded_inputs_.begin(), loaded_inputs_.end(), inputs);
  if (!inputs_loaded) {
    if (absl::Status s = CopyIn(inputs); !s.ok()) return s;
  }
  for (int i = 0; i < warmup; ++i) {
    if (absl::Status s = Launch(plan); !s.ok()) return s;
  }
  if (CUresult rc = cu.cuCtxSynchronize(); rc != CUDA_SUCCESS) {
    return Fail(rc, absl::StrCat("plan ", plan, ": kernel failed"));
  }
  CUevent start = nullptr, stop = nullptr;
  if (CUresult rc = cu.cuEventCreate(&start, CU_EVENT_DEFAULT); rc != CUDA_SUCCESS) {
    return Fail(rc, "cuEventCreate");
  }
  if (CUresult rc = cu.cuEventCreate(&stop, CU_EVENT_DEFAULT); rc != CUDA_SUCCESS) {
    cu.cuEventDestroy(start);
    return Fail(rc, "cuEventCreate");
  }
  std::vector<double> times;
  double total = 0;
  absl::Status status;
  while (static_cast<int>(times.size()) < max_runs &&
         (total < target || static_cast<int>(times.size()) < min_runs)) {
    if (flush_bytes_ > 0) {
      if (CUresult rc = cu.cuMemsetD8(flush_, static_cast<unsigned char>(times.size() & 0xff),
                                      static_cast<size_t>(flush_bytes_));
          rc != CUDA_SUCCESS) {
        status = Fail(rc, "L2 flush");
        break;
      }
    }
    CUresult rc = cu.cuEventRecord(start, nullptr);
    if (rc == CUDA_SUCCESS) {
      status = Launch(plan);
      if (!status.ok()) break;
      rc = cu.cuEventRecord(stop, nullptr);
    }
    if (rc == CUDA_SUCCESS) rc = cu.cuEventSynchronize(stop);
    float ms = 0;
    if (rc == CUDA_SUCCESS) rc = cu.cuEventElapsedTime(&ms, start, stop);
    if (rc != CUDA_SUCCESS) {
      status = Fail(rc, absl::StrCat("plan ", plan, ": timed run failed"));
      break;
    }
    times.push_back(1000.0 * ms);
    total += ms * 1e-3;
  }
  if (!device_->lost()) {  // a lost context cannot destroy anything
    cu.cuEventDestroy(start);
    cu.cuEventDestroy(stop);
  }
  if (!status.ok()) return status;
  if (o.reuse_io == 0) {
    if (absl::Status s = CopyOut(outputs); !s.ok()) return s;
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

absl::StatusOr<CudaTarget> DescribeTarget(const yirage::v1::CompileTarget* requested) {
  absl::StatusOr<Device*> device = Device::Get();
  if (device.ok()) return DeviceTarget(**device);
  return RequestedTarget(requested, device.status());
}

absl::StatusOr<std::unique_ptr<CudaModule>> BuildModule(const yirage::v1::CompileRequest& request,
                                                        yirage::v1::CompileResponse* response) {
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<core::Graph> graph = core::Graph::FromProto(request.graph());
  if (!graph.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("CompileRequest.graph is invalid: ", graph.status().message()));
  }
  absl::StatusOr<Device*> device = Device::Get();
  CudaTarget target;
  std::string arch;
  if (device.ok()) {
    target = DeviceTarget(**device);
    arch = (*device)->info().Arch();
  } else {
    absl::StatusOr<CudaTarget> requested =
        RequestedTarget(request.has_target() ? &request.target() : nullptr, device.status());
    if (!requested.ok()) return requested.status();
    target = *requested;
    arch = ArchFor(target.sm / 10, target.sm % 10);
  }
  std::vector<int64_t> in_bytes, out_bytes;
  for (int t = 0; t < graph->num_inputs(); ++t) {
    in_bytes.push_back(graph->tensor(t).num_elements() * core::DTypeSize(graph->tensor(t).dtype));
  }
  for (int t : graph->outputs()) {
    out_bytes.push_back(graph->tensor(t).num_elements() * core::DTypeSize(graph->tensor(t).dtype));
  }
  const int num_plans = request.plans_size();
  auto module =
      std::make_unique<CudaModule>(device.ok() ? *device : nullptr, in_bytes, out_bytes, num_plans);
  response->Clear();
  const std::string prelude = CudaCodegen::Prelude();
  const CudaCodegen codegen(*graph, target);
  std::vector<PlanCode> code(num_plans);
  std::vector<int> pending;
  for (int i = 0; i < num_plans; ++i) {
    yirage::v1::CompiledPlan* out = response->add_plans();
    absl::StatusOr<PlanCode> pc =
        codegen.GeneratePlan(request.plans(i), i, injected_fault_plan.load() == i);
    if (!pc.ok()) {
      out->set_ok(false);
      out->set_error(Truncate(absl::StrCat("code generation failed: ", pc.status().message())));
      continue;
    }
    code[i] = *std::move(pc);
    if (injected_error_plan.load() == i) {
      code[i].source += "\n#error \"injected by the test hook\"\n";
    }
    out->set_source(prelude + code[i].source);
    *out->mutable_launch() = LaunchManifestOf(code[i]);
    if (injected_fault_plan.load() != i && injected_error_plan.load() != i) {
      out->set_kernel_key(KernelKey(codegen, request.plans(i)));
    }
    pending.push_back(i);
  }
  auto compile = [&](const std::vector<int>& plans) -> absl::StatusOr<std::string> {
    std::string all = prelude;
    for (int i : plans) all += code[i].source;
    return CompileCubin(all, arch, absl::StrCat(request.graph().name(), ".cu"));
  };
  auto accept = [&](int i, int image) {
    response->mutable_plans(i)->set_ok(true);
    module->SetPlan(i, std::move(code[i]), image);
  };
  if (!pending.empty()) {
    absl::StatusOr<std::string> all = compile(pending);
    if (all.ok()) {
      const int image = module->AddImage(*std::move(all));
      for (int i : pending) accept(i, image);
    } else {
      for (int i : pending) {
        absl::StatusOr<std::string> one = pending.size() == 1 ? all : compile(std::vector<int>{i});
        if (one.ok()) {
          accept(i, module->AddImage(*std::move(one)));
        } else {
          response->mutable_plans(i)->set_ok(false);
          response->mutable_plans(i)->set_error(Truncate(std::string(one.status().message())));
        }
      }
    }
  }
  response->set_compile_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  return module;
}

}  // namespace yirage::backends::cuda
