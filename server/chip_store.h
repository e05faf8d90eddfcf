// The chip registry's durable state: one row per chip in the `chips` table
// (schema version 2 of server/job_store.cc, which also writes the built-in
// catalog). Every write is one transaction, validated first, so nothing
// partial is ever stored; a listener hears of each committed change.
#ifndef YIRAGE_SERVER_CHIP_STORE_H_
#define YIRAGE_SERVER_CHIP_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/database.h"
#include "yirage/v1/registry.pb.h"

namespace yirage::server {

struct ChipFilter {
  std::string vendor;  // empty = any
  std::string backend;
  std::string category;
};

struct ImportReport {
  int added = 0;
  int updated = 0;
  int unchanged = 0;
};

// Thread-safe. Uses its own SQLite connection to the server's database (WAL
// and a busy timeout make that safe beside the JobStore's).
class ChipStore {
 public:
  // Opens `path`, applying the server's schema migrations if needed.
  static absl::StatusOr<std::unique_ptr<ChipStore>> Open(const std::string& path);

  // Called after each committed change, outside the store's lock, in commit
  // order per thread. Set before the store is shared.
  using Listener = std::function<void(const yirage::v1::ChipEvent&)>;
  void SetListener(Listener listener) { listener_ = std::move(listener); }

  // Validates and stores a chip. AlreadyExists unless `overwrite` when the id
  // is taken. *created says whether it is new. Returns the stored chip.
  absl::StatusOr<yirage::v1::Chip> Register(const yirage::v1::Chip& chip, bool overwrite,
                                            double now, bool* created);
  absl::StatusOr<yirage::v1::Chip> Get(const std::string& chip_id);
  // Ordered by vendor, then id.
  absl::StatusOr<std::vector<yirage::v1::Chip>> List(const ChipFilter& filter);
  // NotFound if absent.
  absl::Status Delete(const std::string& chip_id, double now);
  // All or nothing: every chip is validated and, when its id exists with a
  // different description, `overwrite` must be set (else AlreadyExists naming
  // the chip); identical chips count as unchanged.
  absl::StatusOr<ImportReport> Import(const std::vector<yirage::v1::Chip>& chips, bool overwrite,
                                      double now);

  // Changes whenever a chip is written or deleted (for caches).
  uint64_t generation() const { return generation_.load(); }

 private:
  explicit ChipStore(std::unique_ptr<Database> db) : db_(std::move(db)) {}
  absl::StatusOr<std::optional<yirage::v1::Chip>> LoadLocked(const std::string& chip_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status WriteLocked(const yirage::v1::Chip& chip) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Notify(const std::vector<yirage::v1::ChipEvent>& events);

  absl::Mutex mu_;
  std::unique_ptr<Database> db_ ABSL_GUARDED_BY(mu_);
  Listener listener_;
  std::atomic<uint64_t> generation_{1};
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_CHIP_STORE_H_
