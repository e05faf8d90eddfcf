// Durable state of the workers the scheduler has heard from: who they are,
// what they are doing, the registry chip their device matched and what their
// backend runs there (BackendKernels), in SQLite (the `workers` table of
// server/schema.cc). One row a worker id, kept after it disconnects.
#ifndef YIRAGE_SERVER_WORKER_STORE_H_
#define YIRAGE_SERVER_WORKER_STORE_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/connection.h"
#include "server/database.h"
#include "yirage/v1/backend.pb.h"
#include "yirage/v1/job.pb.h"
#include "yirage/v1/worker.pb.h"

namespace yirage::server {

struct WorkerStoreOptions {
  double worker_timeout_seconds = 10;  // not heard of for this long: disconnected
};

// The toolkit and driver a worker's device description (its backend's probe)
// names: driver, NVRTC and cuBLASLt versions, the compiler's version and
// -march, as a canonical JSON object; "" when it names none. Results timed
// under one are reused (the result cache) only where a worker has the same.
std::string SoftwareIdentity(const std::string& device_description);

// Thread-safe: every method takes the mutex of the store's connection, but
// the ...Locked ones, whose callers (a JobStore on the same connection)
// hold it.
class WorkerStore {
 public:
  // Opens (creating or migrating) the database at `path` on a connection
  // of its own.
  static absl::StatusOr<std::unique_ptr<WorkerStore>> Open(const std::string& path,
                                                           const WorkerStoreOptions& options);
  // The same on `connection`, which other stores may share (server/connection.h).
  static std::unique_ptr<WorkerStore> OnConnection(std::shared_ptr<Connection> connection,
                                                   const WorkerStoreOptions& options);

  // The store's connection: a JobStore asks this store's ...Locked methods
  // with the connection's mutex held.
  const std::shared_ptr<Connection>& connection() const { return connection_; }

  // Records the worker's call (and its BackendKernels when the request
  // carries them). Returns whether the store holds the worker's kernels.
  // A call that changes nothing but the time is written only once the
  // stored last_seen is kLastSeenResolution old (a worker calls many times
  // a second under load; being heard of is judged in seconds).
  // A worker id is bound to the first non-empty `identity` that calls with
  // it (the caller's token name or certificate); a call with another
  // identity is PermissionDenied and changes nothing.
  absl::StatusOr<bool> Upsert(const yirage::v1::SynchronizeRequest& request, double now,
                              const std::string& identity = "");
  // Records the registry chip a worker's device matched ("" = none).
  absl::Status SetChip(const std::string& worker_id, const std::string& chip_id);
  // The kernels the search plans `backend`'s jobs with: those of the most
  // recent worker of `backend` that sent them, one of chip `chip_id` first,
  // then connected ones; nullopt when no worker of it ever did.
  absl::StatusOr<std::optional<yirage::v1::BackendKernels>> KernelsFor(const std::string& backend,
                                                                       const std::string& chip_id,
                                                                       double now);
  // Every worker ever heard of, oldest first; `connected` as of `now`;
  // current_batch the latest batch leased to it that is still leased.
  absl::StatusOr<std::vector<yirage::v1::WorkerInfo>> List(double now);
  // Workers heard of within worker_timeout_seconds of `now`; of one backend
  // unless `backend` is empty, of registry chip `chip_id` unless it is empty.
  absl::StatusOr<int> CountConnected(double now, const std::string& backend = "",
                                     const std::string& chip_id = "") ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<int> CountConnectedLocked(double now, const std::string& backend,
                                           const std::string& chip_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The connected workers of `backend` (and of registry chip `chip_id`
  // unless it is empty) whose SoftwareIdentity is `software`.
  absl::StatusOr<int> CountWithSoftware(double now, const std::string& backend,
                                        const std::string& chip_id, const std::string& software);
  // SoftwareIdentity of worker `worker_id`'s device ("" for an unknown worker).
  absl::StatusOr<std::string> WorkerSoftware(const std::string& worker_id) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<std::string> WorkerSoftwareLocked(const std::string& worker_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The connected workers (as CountConnected) by backend; backends with none
  // are left out.
  absl::StatusOr<std::map<std::string, int>> CountConnectedByBackend(double now);
  // Workers that could confirm a result `exclude_worker` reported for a job
  // of `backend` and `chip_id`: connected as CountConnected says, not
  // stopping, not `exclude_worker`, and of chip `chip_id` where both the
  // job and the worker have one.
  absl::StatusOr<int> CountConfirmers(double now, const std::string& backend,
                                      const std::string& chip_id, const std::string& exclude_worker)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<int> CountConfirmersLocked(double now, const std::string& backend,
                                            const std::string& chip_id,
                                            const std::string& exclude_worker)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

 private:
  WorkerStore(std::shared_ptr<Connection> connection, const WorkerStoreOptions& options)
      : connection_(std::move(connection)),
        mu_(connection_->mu),
        db_(DatabaseOf(*connection_)),
        options_(options) {}

  // What the last write of a worker's row stored.
  struct Written {
    std::string backend, hostname, device, state, identity;
    std::string software;  // SoftwareIdentity(device)
    int64_t pid = 0;
    double last_seen = 0;
    bool has_kernels = false;
  };
  // At most this stale a stored last_seen (and worker_timeout_seconds / 10).
  static constexpr double kLastSeenResolution = 1.0;

  const std::shared_ptr<Connection> connection_;
  absl::Mutex& mu_;  // connection_->mu
  Database* const db_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Written> written_ ABSL_GUARDED_BY(mu_);
  const WorkerStoreOptions options_;
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_WORKER_STORE_H_
