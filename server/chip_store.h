// The chip registry's durable state: one row per chip in the `chips` table
// (server/schema.cc). Every write is one transaction, validated first, so
// nothing partial is ever stored; a listener hears of each committed change.
// Each row records its origin: the built-in catalog (data/chips, upserted at
// every Open) or a user (Register, Import), whose chips Open never touches.
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

// What Open did with the built-in catalog.
struct CatalogReport {
  int added = 0;    // new in the catalog (or a new database)
  int updated = 0;  // the catalog changed them
  int unchanged = 0;
  int user_kept = 0;     // a user's chip of the same id, left as it is
  int deleted_kept = 0;  // deleted by an operator, not brought back
};

// Thread-safe. Uses its own SQLite connection to the server's database (WAL
// and a busy timeout make that safe beside the JobStore's).
class ChipStore {
 public:
  // Opens `path`, applying the server's schema migrations if needed, and
  // upserts `catalog` (default: core::BuiltinChips()) in one transaction:
  // a catalog chip is added where its id is free, and replaces a stored
  // catalog chip that differs; a user's chip of the same id and a catalog
  // chip an operator deleted stay as they are. Stored catalog chips that the
  // catalog no longer lists are kept (workers may name them).
  static absl::StatusOr<std::unique_ptr<ChipStore>> Open(const std::string& path);
  static absl::StatusOr<std::unique_ptr<ChipStore>> Open(
      const std::string& path, const std::vector<yirage::v1::Chip>& catalog, double now);

  // What Open did with the catalog (for the server's start-up log).
  const CatalogReport& catalog_report() const { return catalog_report_; }

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
  // NotFound if absent. A catalog chip stays deleted across restarts until
  // a chip of its id is registered or imported again.
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
  // origin: "builtin" or "user". A user's write also forgets a deletion of
  // the catalog chip of that id.
  absl::Status WriteLocked(const yirage::v1::Chip& chip, const char* origin)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status SyncCatalog(const std::vector<yirage::v1::Chip>& catalog, double now);
  void Notify(const std::vector<yirage::v1::ChipEvent>& events);

  absl::Mutex mu_;
  std::unique_ptr<Database> db_ ABSL_GUARDED_BY(mu_);
  Listener listener_;
  std::atomic<uint64_t> generation_{1};
  CatalogReport catalog_report_;
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_CHIP_STORE_H_
