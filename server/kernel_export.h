// Turns a job's best candidate into files a user can build and call without
// YiRage: the generated source, a JSON manifest (entry point, argument order,
// shapes, dtypes, build command) and a build script.
#ifndef YIRAGE_SERVER_KERNEL_EXPORT_H_
#define YIRAGE_SERVER_KERNEL_EXPORT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/job_store.h"
#include "yirage/v1/job.pb.h"

namespace yirage::server {

// How an export is made.
struct ExportOptions {
  // The CPU build's target: a GCC -march value (-mcpu for Arm cores such as
  // neoverse-v2), e.g. what -march=native named on the worker that timed
  // it, or the portable x86-64-v3; "" builds for the machine that runs
  // build.sh (native).
  std::string march;
  // The candidate is not the job's best: the CPU symbols also carry its id
  // (yirage_<job>_c<candidate>_run), so that two exports of one job link
  // into one program.
  bool name_candidate = false;
};

// A CPU export's C symbol prefix: "yirage_" and the job id, characters
// outside [A-Za-z0-9_] replaced by '_' (and "_c<candidate>" with
// name_candidate).
std::string CpuSymbolBase(const std::string& job_id, int64_t candidate_id, bool name_candidate);

// InvalidArgument naming the field when `march` is not a compiler target
// name (letters, digits, '-', '_' and '.', at most 64).
absl::Status ValidateMarch(const std::string& march);

// CPU: kernel.cpp (the plan's entry points renamed yirage_<job>_run, _init
// and _fini, every other symbol hidden), yirage_<job>.h, manifest.json,
// build.sh (libyirage_<job>.so), call_example.cpp and yirage_kernel.py
// (ctypes, NumPy or PyTorch). CUDA: kernel.cu, manifest.json,
// yirage_kernel.py (NVRTC, PyTorch) and README.txt.
absl::StatusOr<yirage::v1::GetKernelResponse> ExportKernel(const std::string& job_id,
                                                           const JobStore::BestKernel& best,
                                                           const ExportOptions& options = {});

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_KERNEL_EXPORT_H_
