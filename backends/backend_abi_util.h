// Helpers for implementing the C ABI of backends/backend_api.h: strings handed
// to the caller (who frees them with free_buffer, i.e. free()) and the guard
// that keeps C++ exceptions from crossing the boundary.
#ifndef YIRAGE_BACKENDS_BACKEND_ABI_UTIL_H_
#define YIRAGE_BACKENDS_BACKEND_ABI_UTIL_H_

#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

#include "backends/backend_api.h"

namespace yirage::backends {

// A malloc'ed copy of `s`, NUL-terminated; null if out of memory.
inline char* CopyString(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out != nullptr) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

// Sets *error (when error is non-null) to a copy of `message`.
inline void SetError(char** error, const std::string& message) {
  if (error != nullptr) *error = CopyString(message);
}

// Runs `body` (returning a YIRAGE_* code); an exception becomes YIRAGE_ERROR
// with "<backend> backend: exception: ..." in *error.
template <typename F>
int Guard(const char* backend, char** error, F&& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    SetError(error, std::string(backend) + " backend: exception: " + e.what());
  } catch (...) {
    SetError(error, std::string(backend) + " backend: unknown exception");
  }
  return YIRAGE_ERROR;
}

}  // namespace yirage::backends

#endif  // YIRAGE_BACKENDS_BACKEND_ABI_UTIL_H_
