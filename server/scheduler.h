// The scheduler: accepts jobs (validating the graph and generating candidate
// plans), answers workers' Synchronize calls with work, and runs periodic
// maintenance (lease expiry, budgets, metrics). All durable state lives in the
// stores (jobs and candidates, leased batches, workers, chips); the scheduler
// itself keeps none, so a restarted server resumes exactly where the database
// says.
#ifndef YIRAGE_SERVER_SCHEDULER_H_
#define YIRAGE_SERVER_SCHEDULER_H_

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/chip_store.h"
#include "server/job_store.h"
#include "server/lease_store.h"
#include "server/metrics.h"
#include "server/server_options.h"
#include "server/worker_store.h"
#include "yirage/v1/job.pb.h"
#include "yirage/v1/worker.pb.h"

namespace yirage::server {

// Thread-safe.
class Scheduler {
 public:
  // REQUIRES: the stores and metrics outlive the scheduler. Without a chip
  // store, jobs get no chip-derived search space and workers no chip.
  Scheduler(const ServerOptions& options, JobStore* store, LeaseStore* leases, WorkerStore* workers,
            Metrics* metrics, ChipStore* chips = nullptr);
  ~Scheduler();

  // Validates and stores a job. InvalidArgument (naming the op and field)
  // for a bad graph or request; nothing is stored then. With
  // options.search_threads > 0 the job is stored SEARCHING and a search
  // thread (StartMaintenance) generates its candidates (the response has
  // none); with 0, the search runs here and the job is stored QUEUED. The search space follows
  // from the target chip: request.chip_id (which must exist; an empty backend
  // then means the chip's), else the chip most connected workers of the
  // backend matched, if any. `owner` names who submitted it (the token's
  // name; "" without tokens).
  absl::StatusOr<yirage::v1::SubmitJobResponse> Submit(const yirage::v1::SubmitJobRequest& request,
                                                       const std::string& owner = "");

  // One round of the worker protocol (see worker.proto). `identity` is the
  // caller's (token name or certificate; "" when neither), to which the
  // worker id is bound (WorkerStore::Upsert).
  absl::StatusOr<yirage::v1::SynchronizeResponse> Synchronize(
      const yirage::v1::SynchronizeRequest& request, const std::string& identity = "");

  // Starts/stops the maintenance thread.
  void StartMaintenance();
  void StopMaintenance();
  // One maintenance pass (also called by tests).
  absl::Status MaintainOnce();

  // Observes a job that just reached its final state in the metrics
  // (duration, and for a success the time to its best result). Called by
  // whoever ended it: the scheduler, or the job service on a cancel.
  void JobEnded(const yirage::v1::Job& job);

  // The registry chip a worker's device description matches; an unknown
  // device is registered from its measured properties (metadata detected =
  // unknown-device). "" when the description names no device. Cached per
  // worker until its description or the registry changes.
  absl::StatusOr<std::string> ResolveWorkerChip(const yirage::v1::SynchronizeRequest& request);

 private:
  // The candidates of `request` (validated; `graph` built from it) for the
  // chip `target` (none: the generator's defaults) and what the search did.
  // Sets the job's resolved tolerance on `graph` first: the families' limits
  // read it (reduced-precision forms such as TF32). InvalidArgument when the
  // generator refuses the graph.
  absl::StatusOr<std::vector<yirage::v1::Plan>> Search(
      const yirage::v1::SubmitJobRequest& request, core::Graph& graph,
      const std::optional<yirage::v1::Chip>& target, yirage::v1::SearchSummary* summary);
  void LogQueued(const std::string& job_id, const yirage::v1::SubmitJobRequest& request,
                 const std::vector<yirage::v1::Plan>& plans,
                 const yirage::v1::SearchSummary& summary);
  // JobEnded for the job `job_id` as stored now.
  void ObserveJobEnd(const std::string& job_id);
  // Searches a SEARCHING job and stores its candidates (or fails it).
  void RunSearch(const std::string& job_id);

  absl::StatusOr<std::string> MatchOrRegisterDevice(const std::string& backend,
                                                    const std::string& device_description);
  // The chip for a job without chip_id: that of the connected workers of
  // `backend` (the most common one). nullopt when none has one.
  absl::StatusOr<std::optional<yirage::v1::Chip>> ConnectedWorkersChip(const std::string& backend);

  struct WorkerChip {
    std::string device_description;
    uint64_t generation = 0;
    std::string chip_id;
  };

  const ServerOptions options_;
  JobStore* const store_;
  LeaseStore* const leases_;
  WorkerStore* const workers_;
  Metrics* const metrics_;
  ChipStore* const chips_;
  absl::Mutex worker_chips_mu_;
  absl::flat_hash_map<std::string, WorkerChip> worker_chips_ ABSL_GUARDED_BY(worker_chips_mu_);
  std::atomic<bool> stop_{false};
  std::thread maintenance_;
  absl::Mutex search_mu_;
  std::deque<std::string> search_queue_ ABSL_GUARDED_BY(search_mu_);  // SEARCHING job ids
  // Jobs queued or being searched: maintenance queues the other SEARCHING
  // jobs (a job whose cached winner failed searches afresh).
  absl::flat_hash_set<std::string> searching_ ABSL_GUARDED_BY(search_mu_);
  std::vector<std::thread> searchers_;
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_SCHEDULER_H_
