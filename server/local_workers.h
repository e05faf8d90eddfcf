// Spawns yirage-worker processes for the local devices and restarts them when
// they die, with a growing back-off so a worker that cannot start does not
// spin.
#ifndef YIRAGE_SERVER_LOCAL_WORKERS_H_
#define YIRAGE_SERVER_LOCAL_WORKERS_H_

#include <sys/types.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace yirage::server {

class LocalWorkers {
 public:
  struct Spec {
    std::string backend;  // "cpu", ...
    std::vector<std::string> extra_args;
    // Start() probes the backend's devices and starts one worker per device
    // it finds (`--device N`), or one for device 0 when it finds none: that
    // worker exits with code 3 saying why, and is not restarted.
    bool per_device = false;
    int device = -1;  // the `--device` given, -1: none (the worker's default, 0)
  };

  // mode: "none", "cpu" or "auto" (the CPU, plus one worker per device of
  // each GPU backend library found in `backend_dir`; see Spec::per_device).
  // InvalidArgument otherwise.
  static absl::StatusOr<std::vector<Spec>> SpecsForMode(const std::string& mode,
                                                        const std::string& backend_dir);

  // How many devices `backend` has here: `worker_binary --backend B --probe
  // --device N` for N = 0, 1, ... (eight at a time) up to the first that
  // exits non-zero or runs past `timeout_seconds`; at most kMaxDevices.
  static constexpr int kMaxDevices = 64;
  static int CountDevices(const std::string& worker_binary, const std::string& backend,
                          double timeout_seconds = 60);

  // `specs` with every per_device spec replaced by one spec per device
  // (CountDevices; at least one, device 0).
  static std::vector<Spec> ExpandDevices(const std::string& worker_binary,
                                         const std::vector<Spec>& specs);

  // Workers call `scheduler_address` with `connect_args` (TLS flags) added
  // to their command line and, when `token` is set, YIRAGE_TOKEN=token in
  // their environment (not on the command line, which every user can read).
  LocalWorkers(std::string worker_binary, std::string scheduler_address,
               std::vector<std::string> connect_args = {}, std::string token = "");
  ~LocalWorkers();

  // Starts one supervised worker per spec (per device of a per_device spec,
  // probed first). Thread-safe.
  absl::Status Start(const std::vector<Spec>& specs);
  // Sends SIGTERM to every worker, waits (then SIGKILL), stops supervising.
  void Stop();

  // PIDs of running workers (tests kill them).
  std::vector<pid_t> Pids();

 private:
  struct Child {
    Spec spec;
    pid_t pid = -1;
    int restarts = 0;
    double next_start = 0;
  };
  pid_t Spawn(const Spec& spec);
  void SuperviseLoop();

  const std::string worker_binary_;
  const std::string scheduler_address_;
  const std::vector<std::string> connect_args_;
  const std::string token_;
  absl::Mutex mu_;
  std::vector<Child> children_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stop_{false};
  std::thread supervisor_;
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_LOCAL_WORKERS_H_
