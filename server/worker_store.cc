#include "server/worker_store.h"

#include "absl/strings/str_cat.h"
#include "core/status_macros.h"
#include "nlohmann/json.hpp"
#include "server/schema.h"

namespace yirage::server {

absl::StatusOr<std::unique_ptr<WorkerStore>> WorkerStore::Open(const std::string& path,
                                                               const WorkerStoreOptions& options) {
  YIRAGE_ASSIGN_OR_RETURN(std::shared_ptr<Connection> connection,
                          Connection::Open(path, "workers"));
  return OnConnection(std::move(connection), options);
}

std::unique_ptr<WorkerStore> WorkerStore::OnConnection(std::shared_ptr<Connection> connection,
                                                       const WorkerStoreOptions& options) {
  return std::unique_ptr<WorkerStore>(new WorkerStore(std::move(connection), options));
}

absl::StatusOr<bool> WorkerStore::Upsert(const yirage::v1::SynchronizeRequest& request, double now,
                                         const std::string& identity) {
  absl::MutexLock lock(&mu_);
  const bool executing = request.status().has_executing();
  const std::string state = executing                            ? "executing"
                            : request.status().idle().stopping() ? "stopping"
                                                                 : "idle";
  const double resolution = std::min(kLastSeenResolution, options_.worker_timeout_seconds / 10);
  if (auto it = written_.find(request.worker_id());
      it != written_.end() && !request.has_kernels()) {
    const Written& w = it->second;
    if (w.identity == identity && w.state == state && w.backend == request.backend() &&
        w.hostname == request.hostname() && w.pid == request.pid() &&
        w.device == request.device_description() && now >= w.last_seen &&
        now - w.last_seen < resolution) {
      return w.has_kernels;
    }
  }
  if (!identity.empty()) {
    YIRAGE_ASSIGN_OR_RETURN(Statement q,
                            db_->Prepare("SELECT identity FROM workers WHERE worker_id=?"));
    q.Bind(1, request.worker_id());
    YIRAGE_ASSIGN_OR_RETURN(bool found, q.Step());
    if (found && !q.ColumnText(0).empty() && q.ColumnText(0) != identity) {
      return absl::PermissionDeniedError(absl::StrCat("worker_id '", request.worker_id(),
                                                      "' belongs to '", q.ColumnText(0),
                                                      "'; this call is from '", identity,
                                                      "' (a worker id stays with the identity that "
                                                      "first used it)"));
    }
  }
  YIRAGE_ASSIGN_OR_RETURN(
      Statement s,
      db_->Prepare("INSERT INTO workers (worker_id, backend, hostname, pid, device, state, "
                   "first_seen, last_seen, kernels, identity, software) "
                   "VALUES (?,?,?,?,?,?,?,?,?,?,?) "
                   "ON CONFLICT(worker_id) DO UPDATE SET backend=excluded.backend, "
                   "hostname=excluded.hostname, pid=excluded.pid, device=excluded.device, "
                   "software=excluded.software, "
                   "state=excluded.state, "
                   "last_seen=excluded.last_seen, "
                   "kernels=COALESCE(excluded.kernels, workers.kernels), "
                   "identity=CASE WHEN workers.identity='' THEN excluded.identity "
                   "ELSE workers.identity END "
                   "RETURNING kernels IS NOT NULL"));
  s.Bind(1, request.worker_id())
      .Bind(2, request.backend())
      .Bind(3, request.hostname())
      .Bind(4, static_cast<int64_t>(request.pid()))
      .Bind(5, request.device_description())
      .Bind(6, state)
      .Bind(7, now)
      .Bind(8, now);
  // (The workers table's current_batch column is no longer written:
  // List reads a worker's batch from the lease table.)
  if (request.has_kernels()) {
    s.BindBlob(9, request.kernels().SerializeAsString());
  } else {
    s.BindNull(9);
  }
  s.Bind(10, identity);
  // The device rarely changes: its identity is parsed again only then.
  const auto known = written_.find(request.worker_id());
  const std::string software =
      known != written_.end() && known->second.device == request.device_description()
          ? known->second.software
          : SoftwareIdentity(request.device_description());
  s.Bind(11, software);
  YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
  const bool has_kernels = row && s.ColumnInt(0) != 0;
  YIRAGE_RETURN_IF_ERROR(s.Run());  // to the statement's end
  // The row's identity: the first non-empty one stays.
  Written& w = written_[request.worker_id()];
  const std::string stored_identity = w.identity.empty() ? identity : w.identity;
  w = Written{request.backend(),
              request.hostname(),
              request.device_description(),
              state,
              stored_identity,
              software,
              request.pid(),
              now,
              has_kernels};
  return has_kernels;
}

absl::StatusOr<std::optional<yirage::v1::BackendKernels>> WorkerStore::KernelsFor(
    const std::string& backend, const std::string& chip_id, double now) {
  absl::MutexLock lock(&mu_);
  YIRAGE_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("SELECT kernels FROM workers WHERE backend = ? AND kernels IS NOT "
                                "NULL ORDER BY (chip_id = ?) DESC, (last_seen >= ?) DESC, "
                                "last_seen DESC LIMIT 1"));
  s.Bind(1, backend).Bind(2, chip_id).Bind(3, now - options_.worker_timeout_seconds);
  YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
  if (!row) return std::optional<yirage::v1::BackendKernels>();
  yirage::v1::BackendKernels kernels;
  if (!kernels.ParseFromString(s.ColumnBlob(0))) {
    return absl::DataLossError(
        absl::StrCat("stored kernels of a '", backend, "' worker are unreadable"));
  }
  return std::optional<yirage::v1::BackendKernels>(std::move(kernels));
}

absl::Status WorkerStore::SetChip(const std::string& worker_id, const std::string& chip_id) {
  absl::MutexLock lock(&mu_);
  YIRAGE_ASSIGN_OR_RETURN(Statement s,
                          db_->Prepare("UPDATE workers SET chip_id = ? WHERE worker_id = ?"));
  s.Bind(1, chip_id).Bind(2, worker_id);
  return s.Run();
}

std::string SoftwareIdentity(const std::string& device_description) {
  nlohmann::json device = nlohmann::json::parse(device_description, nullptr, false);
  if (device.is_discarded() || !device.is_object()) return "";
  nlohmann::json id = nlohmann::json::object();
  for (const char* key : {"driver_version", "nvrtc_version", "cublaslt_version"}) {
    if (device.contains(key)) id[key] = device[key];
  }
  if (device.contains("compiler") && device["compiler"].is_object()) {
    for (const char* key : {"version", "march"}) {
      if (device["compiler"].contains(key)) id["compiler"][key] = device["compiler"][key];
    }
  }
  return id.empty() ? std::string() : id.dump();
}

absl::StatusOr<int> WorkerStore::CountWithSoftware(double now, const std::string& backend,
                                                   const std::string& chip_id,
                                                   const std::string& software) {
  absl::MutexLock lock(&mu_);
  YIRAGE_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("SELECT COUNT(*) FROM workers WHERE last_seen >= ? AND backend = ? "
                                "AND (?3 = '' OR chip_id = ?3) AND software = ?"));
  s.Bind(1, now - options_.worker_timeout_seconds)
      .Bind(2, backend)
      .Bind(3, chip_id)
      .Bind(4, software);
  return s.Count();
}

absl::StatusOr<std::string> WorkerStore::WorkerSoftware(const std::string& worker_id) {
  absl::MutexLock lock(&mu_);
  return WorkerSoftwareLocked(worker_id);
}

absl::StatusOr<std::string> WorkerStore::WorkerSoftwareLocked(const std::string& worker_id) {
  YIRAGE_ASSIGN_OR_RETURN(Statement s,
                          db_->Prepare("SELECT software FROM workers WHERE worker_id=?"));
  s.Bind(1, worker_id);
  YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
  return row ? s.ColumnText(0) : std::string();
}

absl::StatusOr<std::vector<yirage::v1::WorkerInfo>> WorkerStore::List(double now) {
  absl::MutexLock lock(&mu_);
  YIRAGE_ASSIGN_OR_RETURN(
      Statement s,
      db_->Prepare("SELECT worker_id, backend, hostname, pid, device, state, "
                   "COALESCE((SELECT b.batch_id FROM batches b WHERE b.worker_id = "
                   "workers.worker_id ORDER BY b.created DESC LIMIT 1), ''), last_seen, chip_id "
                   "FROM workers ORDER BY first_seen"));
  std::vector<yirage::v1::WorkerInfo> out;
  for (;;) {
    YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    yirage::v1::WorkerInfo w;
    w.set_worker_id(s.ColumnText(0));
    w.set_backend(s.ColumnText(1));
    w.set_hostname(s.ColumnText(2));
    w.set_pid(static_cast<int32_t>(s.ColumnInt(3)));
    w.set_device_description(s.ColumnText(4));
    w.set_state(s.ColumnText(5));
    w.set_current_batch(s.ColumnText(6));
    w.set_last_seen_unix(s.ColumnDouble(7));
    w.set_connected(now - w.last_seen_unix() <= options_.worker_timeout_seconds);
    w.set_chip_id(s.ColumnText(8));
    out.push_back(std::move(w));
  }
  return out;
}

absl::StatusOr<int> WorkerStore::CountConnected(double now, const std::string& backend,
                                                const std::string& chip_id) {
  absl::MutexLock lock(&mu_);
  return CountConnectedLocked(now, backend, chip_id);
}

absl::StatusOr<int> WorkerStore::CountConnectedLocked(double now, const std::string& backend,
                                                      const std::string& chip_id) {
  YIRAGE_ASSIGN_OR_RETURN(Statement s,
                          db_->Prepare("SELECT COUNT(*) FROM workers WHERE last_seen >= ? AND "
                                       "(?2 = '' OR backend = ?2) AND (?3 = '' OR chip_id = ?3)"));
  s.Bind(1, now - options_.worker_timeout_seconds).Bind(2, backend).Bind(3, chip_id);
  return s.Count();
}

absl::StatusOr<std::map<std::string, int>> WorkerStore::CountConnectedByBackend(double now) {
  absl::MutexLock lock(&mu_);
  YIRAGE_ASSIGN_OR_RETURN(Statement s,
                          db_->Prepare("SELECT backend, COUNT(*) FROM workers WHERE last_seen >= ? "
                                       "GROUP BY backend"));
  s.Bind(1, now - options_.worker_timeout_seconds);
  return s.CountsByKey();
}

absl::StatusOr<int> WorkerStore::CountConfirmers(double now, const std::string& backend,
                                                 const std::string& chip_id,
                                                 const std::string& exclude_worker) {
  absl::MutexLock lock(&mu_);
  return CountConfirmersLocked(now, backend, chip_id, exclude_worker);
}

absl::StatusOr<int> WorkerStore::CountConfirmersLocked(double now, const std::string& backend,
                                                       const std::string& chip_id,
                                                       const std::string& exclude_worker) {
  // A stopping worker said it leaves: it would never lease the confirmation.
  YIRAGE_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("SELECT COUNT(*) FROM workers WHERE last_seen >= ? AND backend = ? "
                                "AND state <> 'stopping' AND worker_id <> ? AND "
                                "(?4 = '' OR chip_id = '' OR chip_id = ?4)"));
  s.Bind(1, now - options_.worker_timeout_seconds)
      .Bind(2, backend)
      .Bind(3, exclude_worker)
      .Bind(4, chip_id);
  return s.Count();
}

}  // namespace yirage::server
