// The shared body of a code-generating backend's compile() entry point
// (backends/backend_api.h): output checks, request parsing, and the
// serialized response handed to the caller.
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

}  // namespace yirage::backends

#endif  // YIRAGE_BACKENDS_BACKEND_COMPILE_UTIL_H_
