// A backend shared library loaded at run time through the C ABI in
// backends/backend_api.h, wrapped in absl::Status-returning C++.
#ifndef YIRAGE_WORKERS_BACKEND_LIBRARY_H_
#define YIRAGE_WORKERS_BACKEND_LIBRARY_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "backends/backend_api.h"
#include "yirage/v1/backend.pb.h"

namespace yirage::worker {

class CompiledModule;

class BackendLibrary {
 public:
  // Loads libyirage_backend_<name>.so from `directory` (or the loader's search
  // path when empty) and checks its ABI version.
  static absl::StatusOr<std::unique_ptr<BackendLibrary>> Load(const std::string& name,
                                                              const std::string& directory);
  // Loads the backend named `name` from the library file `path`.
  static absl::StatusOr<std::unique_ptr<BackendLibrary>> LoadFile(const std::string& name,
                                                                  const std::string& path);
  ~BackendLibrary();

  const std::string& name() const { return name_; }
  const std::string& path() const { return path_; }

  // The device description (JSON). *has_device is false when the backend's
  // runtime or device is absent; the JSON then carries the reason.
  absl::StatusOr<std::string> Probe(bool* has_device);

  // What the backend runs on its device (its describe call), or where it
  // has none on `target`'s (nullptr: none given; then FailedPrecondition
  // when the answer depends on a device).
  absl::StatusOr<yirage::v1::BackendKernels> Describe(
      const yirage::v1::CompileTarget* target = nullptr);

  absl::StatusOr<std::unique_ptr<CompiledModule>> Compile(const yirage::v1::CompileRequest& request,
                                                          yirage::v1::CompileResponse* response);

 private:
  friend class CompiledModule;
  BackendLibrary() = default;
  void* handle_ = nullptr;
  const YirageBackendV1* api_ = nullptr;
  std::string name_;
  std::string path_;
};

// Run and Time return Aborted when the backend says the device is lost for
// this process (a CUDA sticky error): nothing more can run here.
inline bool IsDeviceLost(const absl::Status& status) {
  return status.code() == absl::StatusCode::kAborted;
}

// Plans compiled together. Not thread-safe.
class CompiledModule {
 public:
  CompiledModule(const YirageBackendV1* api, YirageModule* module) : api_(api), module_(module) {}
  ~CompiledModule();

  absl::Status Run(int plan_index, const std::vector<const void*>& inputs,
                   const std::vector<void*>& outputs);
  absl::StatusOr<YirageTiming> Time(int plan_index, const std::vector<const void*>& inputs,
                                    const std::vector<void*>& outputs,
                                    const YirageTimingOptions& options);

 private:
  const YirageBackendV1* api_;
  YirageModule* module_;
};

}  // namespace yirage::worker

#endif  // YIRAGE_WORKERS_BACKEND_LIBRARY_H_
