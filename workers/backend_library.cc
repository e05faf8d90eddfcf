#include "workers/backend_library.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace yirage::worker {
namespace {

std::string TakeString(const YirageBackendV1* api, char* text) {
  if (!text) return "";
  std::string out(text);
  api->free_buffer(text);
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<BackendLibrary>> BackendLibrary::Load(const std::string& name,
                                                                     const std::string& directory) {
  std::string file = absl::StrCat("libyirage_backend_", name, ".so");
  return LoadFile(name, directory.empty() ? file : absl::StrCat(directory, "/", file));
}

absl::StatusOr<std::unique_ptr<BackendLibrary>> BackendLibrary::LoadFile(const std::string& name,
                                                                         const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    return absl::NotFoundError(
        absl::StrCat("cannot load backend '", name, "' from ", path, ": ", dlerror()));
  }
  auto get = reinterpret_cast<YirageBackendGetV1Fn>(dlsym(handle, YIRAGE_BACKEND_ENTRY_POINT));
  if (!get) {
    dlclose(handle);
    return absl::FailedPreconditionError(
        absl::StrCat(path, " does not export ", YIRAGE_BACKEND_ENTRY_POINT));
  }
  const YirageBackendV1* api = get();
  if (!api || api->abi_version != YIRAGE_BACKEND_ABI_VERSION) {
    dlclose(handle);
    return absl::FailedPreconditionError(
        absl::StrCat(path, " speaks backend ABI ", api ? api->abi_version : 0,
                     "; this worker speaks ", YIRAGE_BACKEND_ABI_VERSION));
  }
  std::unique_ptr<BackendLibrary> lib(new BackendLibrary());
  lib->handle_ = handle;
  lib->api_ = api;
  lib->name_ = name;
  lib->path_ = path;
  return lib;
}

BackendLibrary::~BackendLibrary() {
  // Generated code may still be mapped by modules; leaking the handle at exit
  // is harmless, closing it under a live module is not.
}

absl::StatusOr<std::string> BackendLibrary::Probe(bool* has_device) {
  char* json = nullptr;
  int rc = api_->probe(&json);
  std::string text = TakeString(api_, json);
  if (rc == YIRAGE_OK) {
    *has_device = true;
  } else if (rc == YIRAGE_NO_DEVICE) {
    *has_device = false;
  } else {
    return absl::InternalError(absl::StrCat("backend '", name_, "' probe failed: ", text));
  }
  return text;
}

absl::StatusOr<yirage::v1::BackendKernels> BackendLibrary::Describe(
    const yirage::v1::CompileTarget* target) {
  std::string bytes;
  if (target != nullptr) target->SerializeToString(&bytes);
  void* out = nullptr;
  size_t out_len = 0;
  char* error = nullptr;
  const int rc =
      api_->describe(bytes.empty() ? nullptr : bytes.data(), bytes.size(), &out, &out_len, &error);
  std::string message = TakeString(api_, error);
  if (rc != YIRAGE_OK) {
    if (out) api_->free_buffer(out);
    const std::string text = absl::StrCat("backend '", name_, "' ", message);
    return rc == YIRAGE_NO_DEVICE ? absl::FailedPreconditionError(text) : absl::InternalError(text);
  }
  yirage::v1::BackendKernels kernels;
  const bool parsed = kernels.ParseFromArray(out, static_cast<int>(out_len));
  if (out) api_->free_buffer(out);
  if (!parsed) {
    return absl::InternalError(
        absl::StrCat("backend '", name_, "' returned a malformed kernel description"));
  }
  return kernels;
}

absl::StatusOr<std::unique_ptr<CompiledModule>> BackendLibrary::Compile(
    const yirage::v1::CompileRequest& request, yirage::v1::CompileResponse* response) {
  std::string bytes;
  request.SerializeToString(&bytes);
  YirageModule* module = nullptr;
  void* out = nullptr;
  size_t out_len = 0;
  char* error = nullptr;
  int rc = api_->compile(bytes.data(), bytes.size(), &module, &out, &out_len, &error);
  std::string message = TakeString(api_, error);
  if (rc != YIRAGE_OK) {
    if (out) api_->free_buffer(out);
    if (module) api_->release(module);
    return absl::InternalError(absl::StrCat("backend '", name_, "' compile: ", message));
  }
  bool parsed = response->ParseFromArray(out, static_cast<int>(out_len));
  if (out) api_->free_buffer(out);
  auto compiled = std::make_unique<CompiledModule>(api_, module);
  if (!parsed || response->plans_size() != request.plans_size()) {
    return absl::InternalError(
        absl::StrCat("backend '", name_, "' returned a malformed compile response"));
  }
  return compiled;
}

CompiledModule::~CompiledModule() {
  if (module_) api_->release(module_);
}

absl::Status CompiledModule::Run(int plan_index, const std::vector<const void*>& inputs,
                                 const std::vector<void*>& outputs) {
  char* error = nullptr;
  int rc = api_->run(module_, plan_index, inputs.data(), outputs.data(), &error);
  std::string message = TakeString(api_, error);
  if (rc == YIRAGE_DEVICE_LOST) return absl::AbortedError("device lost: " + message);
  if (rc != YIRAGE_OK) return absl::InternalError(message.empty() ? "run failed" : message);
  return absl::OkStatus();
}

absl::StatusOr<YirageTiming> CompiledModule::Time(int plan_index,
                                                  const std::vector<const void*>& inputs,
                                                  const std::vector<void*>& outputs,
                                                  const YirageTimingOptions& options) {
  YirageTiming timing{};
  char* error = nullptr;
  int rc =
      api_->time(module_, plan_index, inputs.data(), outputs.data(), &options, &timing, &error);
  std::string message = TakeString(api_, error);
  if (rc == YIRAGE_DEVICE_LOST) return absl::AbortedError("device lost: " + message);
  if (rc != YIRAGE_OK) return absl::InternalError(message.empty() ? "timing failed" : message);
  return timing;
}

}  // namespace yirage::worker
