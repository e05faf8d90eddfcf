// The scheduler: accepts jobs (validating the graph and generating candidate
// plans), answers workers' Synchronize calls with work, and runs periodic
// maintenance (lease expiry, budgets, metrics). All durable state lives in the
// JobStore; the scheduler itself keeps none, so a restarted server resumes
// exactly where the database says.
#ifndef YIRAGE_SERVER_SCHEDULER_H_
#define YIRAGE_SERVER_SCHEDULER_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/job_store.h"
#include "server/metrics.h"
#include "server/server_options.h"
#include "yirage/v1/job.pb.h"
#include "yirage/v1/worker.pb.h"

namespace yirage::server {

// Thread-safe.
class Scheduler {
 public:
  // REQUIRES: store and metrics outlive the scheduler.
  Scheduler(const ServerOptions& options, JobStore* store, Metrics* metrics);
  ~Scheduler();

  // Validates and queues a job. InvalidArgument (naming the op and field) for
  // a bad graph or request; nothing is stored then.
  absl::StatusOr<yirage::v1::SubmitJobResponse> Submit(
      const yirage::v1::SubmitJobRequest& request);

  // One round of the worker protocol (see worker.proto).
  absl::StatusOr<yirage::v1::SynchronizeResponse> Synchronize(
      const yirage::v1::SynchronizeRequest& request);

  // Starts/stops the maintenance thread.
  void StartMaintenance();
  void StopMaintenance();
  // One maintenance pass (also called by tests).
  absl::Status MaintainOnce();

  JobStore* store() { return store_; }

 private:
  const ServerOptions options_;
  JobStore* const store_;
  Metrics* const metrics_;
  std::atomic<bool> stop_{false};
  std::thread maintenance_;
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_SCHEDULER_H_
