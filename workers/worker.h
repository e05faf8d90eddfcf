// The worker's side of the scheduler protocol: say what we are doing, do what
// the scheduler answers, call again when it says. Evaluation runs on its own
// thread so heartbeats (which renew the batch lease) keep flowing while a
// candidate compiles or runs. Results are kept until acknowledged, so a
// scheduler restart loses none of them.
#ifndef YIRAGE_WORKERS_WORKER_H_
#define YIRAGE_WORKERS_WORKER_H_

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "backends/backend_api.h"
#include "workers/backend_library.h"
#include "workers/batch_evaluator.h"
#include "yirage/v1/worker.grpc.pb.h"

namespace yirage::worker {

struct WorkerOptions {
  std::string scheduler = "127.0.0.1:50052";
  std::string backend = "cpu";
  // Which of the backend's devices (workers/device_select.h); part of the
  // generated worker id for GPU backends.
  int device = 0;
  std::string backend_dir;  // where libyirage_backend_<name>.so lives
  std::string worker_id;    // generated when empty
  double rpc_timeout_seconds = 10;
  // On SIGTERM the batch's current step (a compile, a candidate) may finish
  // and report for this long, with heartbeats, before the rest goes back.
  double drain_seconds = 20;
  // How to reach the scheduler (TLS, token); null: plaintext, no token.
  std::shared_ptr<grpc::Channel> channel;
  YirageTimingOptions timing{
      /*warmup_runs=*/3, /*max_runs=*/100,  /*target_seconds=*/0.05,
      /*min_runs=*/5,    /*flush_bytes=*/0, /*reuse_io=*/0};
};

class Worker {
 public:
  // REQUIRES: backend has a device (Probe said so); `kernels` is what it
  // runs there (BackendLibrary::Describe), reported to the scheduler.
  Worker(const WorkerOptions& options, std::unique_ptr<BackendLibrary> backend,
         std::string device_description, yirage::v1::BackendKernels kernels);
  ~Worker();

  const std::string& worker_id() const { return worker_id_; }

  // Runs until *stop becomes true, or until the device is lost. Returns only
  // then, after a last attempt to deliver finished results and to give back
  // the batch. Aborted means the device was lost: restart the process.
  absl::Status Run(const std::atomic<bool>* stop);

  // False when Run stopped draining with the evaluation still running (past
  // drain_seconds): end the process (std::_Exit) rather than destroy this
  // worker under it.
  bool drained() const { return drained_; }

 private:
  yirage::v1::SynchronizeRequest BuildRequest() ABSL_LOCKS_EXCLUDED(mu_);
  void HandleResponse(const yirage::v1::SynchronizeRequest& request,
                      const yirage::v1::SynchronizeResponse& response) ABSL_LOCKS_EXCLUDED(mu_);
  void StartBatch(const yirage::v1::Batch& batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void JoinFinishedEvaluation() ABSL_LOCKS_EXCLUDED(mu_);

  const WorkerOptions options_;
  std::unique_ptr<BackendLibrary> backend_;
  const std::string device_description_;
  const yirage::v1::BackendKernels kernels_;
  // Send kernels_ with the next call: at start, and when the scheduler asks.
  bool send_kernels_ ABSL_GUARDED_BY(mu_) = true;
  // One for the worker's life: it keeps the last batch's inputs and
  // reference for the job's next batch. Used by one evaluation at a time.
  BatchEvaluator evaluator_;
  std::string worker_id_;
  std::string hostname_;
  std::unique_ptr<yirage::v1::WorkerService::Stub> stub_;

  absl::Mutex mu_;
  std::optional<std::string> batch_id_ ABSL_GUARDED_BY(mu_);
  std::string lease_token_ ABSL_GUARDED_BY(mu_);  // the batch's
  int64_t current_candidate_ ABSL_GUARDED_BY(mu_) = 0;
  // The current candidate the scheduler last acknowledged hearing about.
  int64_t reported_candidate_ ABSL_GUARDED_BY(mu_) = 0;
  bool evaluation_done_ ABSL_GUARDED_BY(mu_) = false;
  bool abandon_ ABSL_GUARDED_BY(mu_) = false;
  int results_left_ ABSL_GUARDED_BY(mu_) = 0;  // candidates of the batch not yet evaluated
  std::deque<yirage::v1::CandidateResult> unacknowledged_ ABSL_GUARDED_BY(mu_);
  std::thread evaluation_;
  std::atomic<bool> wake_{false};
  std::atomic<bool> device_lost_{false};
  std::atomic<bool> stopping_{false};
  bool drained_ = true;  // set by Run only
  absl::Status device_lost_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace yirage::worker

#endif  // YIRAGE_WORKERS_WORKER_H_
