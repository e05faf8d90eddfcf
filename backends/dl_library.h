// Opening a runtime library at run time (dlopen) and binding its symbols, for
// backends that must load on machines without that runtime.
#ifndef YIRAGE_BACKENDS_DL_LIBRARY_H_
#define YIRAGE_BACKENDS_DL_LIBRARY_H_

#include <dlfcn.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace yirage::backends {

// dlopens the first of `names` that loads; returns its handle (and *opened =
// its name), or nullptr with *tried listing each failure's dlerror().
inline void* DlopenFirst(const std::vector<std::string>& names, std::string* opened,
                         std::string* tried) {
  for (const std::string& name : names) {
    if (void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL); handle != nullptr) {
      *opened = name;
      return handle;
    }
    const char* err = dlerror();
    absl::StrAppend(tried, tried->empty() ? "" : "; ", err != nullptr ? std::string(err) : name);
  }
  return nullptr;
}

// Binds `name` in `handle` to *fn; appends the name to *missing when absent.
template <typename Fn>
void BindSymbol(void* handle, const char* name, Fn* fn, std::string* missing) {
  *fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (*fn == nullptr && missing != nullptr) {
    absl::StrAppend(missing, missing->empty() ? "" : ", ", name);
  }
}

}  // namespace yirage::backends

#endif  // YIRAGE_BACKENDS_DL_LIBRARY_H_
