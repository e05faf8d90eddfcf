// The shared bodies of a code-generating backend's compile() and describe()
// entry points (backends/backend_api.h): output checks, request parsing, and
// the serialized response handed to the caller.
#ifndef YIRAGE_BACKENDS_BACKEND_COMPILE_UTIL_H_
#define YIRAGE_BACKENDS_BACKEND_COMPILE_UTIL_H_

#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "backends/backend_abi_util.h"
#include "backends/backend_api.h"
#include "yirage/v1/backend.pb.h"

namespace yirage::backends {

// Parses the serialized CompileRequest, calls
//   build(const CompileRequest&, CompileResponse*) -> absl::StatusOr<YirageModule*>
// (a new'ed module the caller will release), and returns the serialized
// response through *response. YIRAGE_ERROR with *error for null outputs, a
// malformed request or a failed build. REQUIRES: called inside Guard().
template <typename Build>
int CompileRequestWith(const void* request, size_t request_len, YirageModule** module,
                       void** response, size_t* response_len, char** error, Build&& build) {
  if (module == nullptr || response == nullptr || response_len == nullptr) {
    SetError(error, "compile: null output pointer");
    return YIRAGE_ERROR;
  }
  *module = nullptr;
  *response = nullptr;
  *response_len = 0;
  yirage::v1::CompileRequest req;
  if (request == nullptr || !req.ParseFromArray(request, static_cast<int>(request_len))) {
    SetError(error, "compile: the request is not a serialized yirage.v1.CompileRequest");
    return YIRAGE_ERROR;
  }
  yirage::v1::CompileResponse resp;
  absl::StatusOr<YirageModule*> built = build(req, &resp);
  if (!built.ok()) {
    SetError(error, absl::StrCat("compile: ", std::string(built.status().message())));
    return YIRAGE_ERROR;
  }
  const std::string bytes = resp.SerializeAsString();
  void* buf = std::malloc(bytes.size() > 0 ? bytes.size() : 1);
  if (buf == nullptr) {
    SetError(error, "compile: out of memory");
    return YIRAGE_ERROR;  // *built leaks only on out-of-memory
  }
  std::memcpy(buf, bytes.data(), bytes.size());
  *response = buf;
  *response_len = bytes.size();
  *module = *built;
  return YIRAGE_OK;
}

// The shared body of describe(): parses the optional serialized
// CompileTarget, calls
//   describe(const CompileTarget* target_or_null) -> absl::StatusOr<BackendKernels>
// and returns the serialized answer through *response. YIRAGE_ERROR with
// *error for null outputs or a malformed target; YIRAGE_NO_DEVICE when
// `describe` fails with FailedPrecondition (no device and no target).
// REQUIRES: called inside Guard().
template <typename Describe>
int DescribeWith(const void* target, size_t target_len, void** response, size_t* response_len,
                 char** error, Describe&& describe) {
  if (response == nullptr || response_len == nullptr) {
    SetError(error, "describe: null output pointer");
    return YIRAGE_ERROR;
  }
  *response = nullptr;
  *response_len = 0;
  yirage::v1::CompileTarget parsed;
  if (target_len > 0 &&
      (target == nullptr || !parsed.ParseFromArray(target, static_cast<int>(target_len)))) {
    SetError(error, "describe: the target is not a serialized yirage.v1.CompileTarget");
    return YIRAGE_ERROR;
  }
  absl::StatusOr<yirage::v1::BackendKernels> kernels = describe(target_len > 0 ? &parsed : nullptr);
  if (!kernels.ok()) {
    SetError(error, absl::StrCat("describe: ", std::string(kernels.status().message())));
    return absl::IsFailedPrecondition(kernels.status()) ? YIRAGE_NO_DEVICE : YIRAGE_ERROR;
  }
  const std::string bytes = kernels->SerializeAsString();
  void* buf = std::malloc(bytes.size() > 0 ? bytes.size() : 1);
  if (buf == nullptr) {
    SetError(error, "describe: out of memory");
    return YIRAGE_ERROR;
  }
  std::memcpy(buf, bytes.data(), bytes.size());
  *response = buf;
  *response_len = bytes.size();
  return YIRAGE_OK;
}

}  // namespace yirage::backends

#endif  // YIRAGE_BACKENDS_BACKEND_COMPILE_UTIL_H_
