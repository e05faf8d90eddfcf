#include "server/chip_store.h"

#include <optional>
#include <set>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/rpc_util.h"
#include "core/builtin_chips.h"
#include "core/chip.h"
#include "core/status_macros.h"
#include "server/schema.h"

namespace yirage::server {
namespace {

using yirage::v1::Chip;
using yirage::v1::ChipEvent;

ChipEvent MakeEvent(ChipEvent::Kind kind, const Chip& chip, double now) {
  ChipEvent e;
  e.set_kind(kind);
  e.set_chip_id(chip.chip_id());
  if (kind != ChipEvent::DELETED) *e.mutable_chip() = chip;
  e.set_event_unix(now);
  return e;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ChipStore>> ChipStore::Open(const std::string& path) {
  auto catalog = core::BuiltinChips();
  if (!catalog.ok()) {
    // A broken catalog is a build defect (core/chip_test.cc guards it).
    return absl::InternalError(absl::StrCat("the built-in chip catalog is invalid: ",
                                            std::string(catalog.status().message())));
  }
  return Open(path, *catalog, UnixNow());
}

absl::StatusOr<std::unique_ptr<ChipStore>> ChipStore::Open(const std::string& path,
                                                           const std::vector<Chip>& catalog,
                                                           double now) {
  YIRAGE_ASSIGN_OR_RETURN(auto db, Database::Open(path, SchemaMigrations(), "chips"));
  std::unique_ptr<ChipStore> store(new ChipStore(std::move(db)));
  YIRAGE_RETURN_IF_ERROR(store->SyncCatalog(catalog, now));
  return store;
}

absl::Status ChipStore::SyncCatalog(const std::vector<Chip>& catalog, double now) {
  for (const Chip& chip : catalog) {
    YIRAGE_RETURN_IF_ERROR(core::ValidateChip(chip));
  }
  absl::MutexLock lock(&mu_);
  Transaction tx(db_.get());
  YIRAGE_RETURN_IF_ERROR(tx.status());
  CatalogReport report;
  for (const Chip& input : catalog) {
    YIRAGE_ASSIGN_OR_RETURN(Statement deleted,
                            db_->Prepare("SELECT 1 FROM deleted_builtin_chips WHERE chip_id = ?"));
    deleted.Bind(1, input.chip_id());
    YIRAGE_ASSIGN_OR_RETURN(bool was_deleted, deleted.Step());
    if (was_deleted) {
      ++report.deleted_kept;
      continue;
    }
    YIRAGE_ASSIGN_OR_RETURN(Statement origin,
                            db_->Prepare("SELECT origin FROM chips WHERE chip_id = ?"));
    origin.Bind(1, input.chip_id());
    YIRAGE_ASSIGN_OR_RETURN(bool exists, origin.Step());
    if (exists && origin.ColumnText(0) != "builtin") {
      ++report.user_kept;
      continue;
    }
    YIRAGE_ASSIGN_OR_RETURN(std::optional<Chip> existing, LoadLocked(input.chip_id()));
    if (existing.has_value() && core::SameChip(*existing, input)) {
      ++report.unchanged;
      continue;
    }
    Chip chip = input;
    chip.set_created_unix(existing.has_value() ? existing->created_unix() : now);
    chip.set_updated_unix(now);
    YIRAGE_RETURN_IF_ERROR(WriteLocked(chip, "builtin"));
    (existing.has_value() ? report.updated : report.added)++;
  }
  YIRAGE_RETURN_IF_ERROR(tx.Commit());
  if (report.added + report.updated > 0) generation_.fetch_add(1);
  catalog_report_ = report;
  return absl::OkStatus();
}

absl::StatusOr<std::optional<Chip>> ChipStore::LoadLocked(const std::string& chip_id) {
  YIRAGE_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("SELECT body, created, updated FROM chips WHERE chip_id = ?"));
  s.Bind(1, chip_id);
  YIRAGE_ASSIGN_OR_RETURN(bool found, s.Step());
  if (!found) return std::optional<Chip>();
  auto chip = core::ParseChipJson(s.ColumnText(0));
  if (!chip.ok()) {
    return absl::InternalError(absl::StrCat(
        "stored chip '", chip_id, "' is unreadable: ", std::string(chip.status().message())));
  }
  chip->set_created_unix(s.ColumnDouble(1));
  chip->set_updated_unix(s.ColumnDouble(2));
  return std::optional<Chip>(std::move(*chip));
}

absl::Status ChipStore::WriteLocked(const Chip& chip, const char* origin) {
  YIRAGE_ASSIGN_OR_RETURN(
      Statement s, db_->Prepare("INSERT INTO chips (chip_id, vendor, backend, category, body, "
                                "created, updated, origin) "
                                "VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(chip_id) DO UPDATE SET "
                                "vendor=excluded.vendor, backend=excluded.backend, "
                                "category=excluded.category, body=excluded.body, "
                                "updated=excluded.updated, origin=excluded.origin"));
  s.Bind(1, chip.chip_id())
      .Bind(2, chip.vendor())
      .Bind(3, chip.backend())
      .Bind(4, chip.category())
      .Bind(5, core::ChipToJson(chip).dump())
      .Bind(6, chip.created_unix())
      .Bind(7, chip.updated_unix())
      .Bind(8, std::string_view(origin));
  YIRAGE_RETURN_IF_ERROR(s.Run());
  if (std::string_view(origin) == "builtin") return absl::OkStatus();
  YIRAGE_ASSIGN_OR_RETURN(Statement forget,
                          db_->Prepare("DELETE FROM deleted_builtin_chips WHERE chip_id = ?"));
  forget.Bind(1, chip.chip_id());
  return forget.Run();
}

void ChipStore::Notify(const std::vector<ChipEvent>& events) {
  if (!events.empty()) generation_.fetch_add(1);
  if (!listener_) return;
  for (const ChipEvent& e : events) listener_(e);
}

absl::StatusOr<Chip> ChipStore::Register(const Chip& input, bool overwrite, double now,
                                         bool* created) {
  YIRAGE_RETURN_IF_ERROR(core::ValidateChip(input));
  Chip chip = input;
  ChipEvent event;
  {
    absl::MutexLock lock(&mu_);
    Transaction tx(db_.get());
    YIRAGE_RETURN_IF_ERROR(tx.status());
    YIRAGE_ASSIGN_OR_RETURN(std::optional<Chip> existing, LoadLocked(chip.chip_id()));
    if (existing.has_value() && !overwrite) {
      return absl::AlreadyExistsError(absl::StrCat(
          "chip '", chip.chip_id(), "': already registered (pass overwrite to replace it)"));
    }
    *created = !existing.has_value();
    chip.set_created_unix(existing.has_value() ? existing->created_unix() : now);
    chip.set_updated_unix(now);
    YIRAGE_RETURN_IF_ERROR(WriteLocked(chip, "user"));
    YIRAGE_RETURN_IF_ERROR(tx.Commit());
    event = MakeEvent(*created ? ChipEvent::REGISTERED : ChipEvent::UPDATED, chip, now);
  }
  Notify({event});
  return chip;
}

absl::StatusOr<Chip> ChipStore::Get(const std::string& chip_id) {
  if (chip_id.empty()) return absl::InvalidArgumentError("chip_id: must be set");
  absl::MutexLock lock(&mu_);
  YIRAGE_ASSIGN_OR_RETURN(std::optional<Chip> chip, LoadLocked(chip_id));
  if (!chip.has_value()) {
    // A seed id (nvidia_h100, ...) names its catalog chip, unless a chip of
    // that id was registered (looked up first).
    if (std::optional<std::string_view> id = core::SeedChipAlias(chip_id); id.has_value()) {
      YIRAGE_ASSIGN_OR_RETURN(chip, LoadLocked(std::string(*id)));
    }
  }
  if (!chip.has_value()) return absl::NotFoundError(absl::StrCat("no chip '", chip_id, "'"));
  return std::move(*chip);
}

absl::StatusOr<std::vector<Chip>> ChipStore::List(const ChipFilter& filter) {
  absl::MutexLock lock(&mu_);
  YIRAGE_ASSIGN_OR_RETURN(Statement s,
                          db_->Prepare("SELECT chip_id, body, created, updated FROM chips WHERE "
                                       "(?1 = '' OR vendor = ?1) AND (?2 = '' OR backend = ?2) AND "
                                       "(?3 = '' OR category = ?3) ORDER BY vendor, chip_id"));
  s.Bind(1, filter.vendor).Bind(2, filter.backend).Bind(3, filter.category);
  std::vector<Chip> out;
  for (;;) {
    YIRAGE_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) break;
    auto chip = core::ParseChipJson(s.ColumnText(1));
    if (!chip.ok()) {
      return absl::InternalError(absl::StrCat("stored chip '", s.ColumnText(0), "' is unreadable: ",
                                              std::string(chip.status().message())));
    }
    chip->set_created_unix(s.ColumnDouble(2));
    chip->set_updated_unix(s.ColumnDouble(3));
    out.push_back(std::move(*chip));
  }
  return out;
}

absl::Status ChipStore::Delete(const std::string& chip_id, double now) {
  if (chip_id.empty()) return absl::InvalidArgumentError("chip_id: must be set");
  ChipEvent event;
  {
    absl::MutexLock lock(&mu_);
    Transaction tx(db_.get());
    YIRAGE_RETURN_IF_ERROR(tx.status());
    YIRAGE_ASSIGN_OR_RETURN(Statement origin,
                            db_->Prepare("SELECT origin FROM chips WHERE chip_id = ?"));
    origin.Bind(1, chip_id);
    YIRAGE_ASSIGN_OR_RETURN(bool found, origin.Step());
    if (!found) return absl::NotFoundError(absl::StrCat("no chip '", chip_id, "'"));
    const bool builtin = origin.ColumnText(0) == "builtin";
    YIRAGE_ASSIGN_OR_RETURN(Statement s, db_->Prepare("DELETE FROM chips WHERE chip_id = ?"));
    s.Bind(1, chip_id);
    YIRAGE_RETURN_IF_ERROR(s.Run());
    if (builtin) {
      YIRAGE_ASSIGN_OR_RETURN(
          Statement remember,
          db_->Prepare("INSERT OR REPLACE INTO deleted_builtin_chips (chip_id, deleted) "
                       "VALUES (?, ?)"));
      remember.Bind(1, chip_id).Bind(2, now);
      YIRAGE_RETURN_IF_ERROR(remember.Run());
    }
    YIRAGE_RETURN_IF_ERROR(tx.Commit());
    event.set_kind(ChipEvent::DELETED);
    event.set_chip_id(chip_id);
    event.set_event_unix(now);
  }
  Notify({event});
  return absl::OkStatus();
}

absl::StatusOr<ImportReport> ChipStore::Import(const std::vector<Chip>& chips, bool overwrite,
                                               double now) {
  std::set<std::string> ids;
  for (const Chip& chip : chips) {
    YIRAGE_RETURN_IF_ERROR(core::ValidateChip(chip));
    if (!ids.insert(chip.chip_id()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("chip '", chip.chip_id(), "': chip_id: appears more than once"));
    }
  }
  ImportReport report;
  std::vector<ChipEvent> events;
  {
    absl::MutexLock lock(&mu_);
    Transaction tx(db_.get());
    YIRAGE_RETURN_IF_ERROR(tx.status());
    for (const Chip& input : chips) {
      YIRAGE_ASSIGN_OR_RETURN(std::optional<Chip> existing, LoadLocked(input.chip_id()));
      if (existing.has_value() && core::SameChip(*existing, input)) {
        ++report.unchanged;
        continue;
      }
      if (existing.has_value() && !overwrite) {
        return absl::AlreadyExistsError(
            absl::StrCat("chip '", input.chip_id(),
                         "': already registered with a different description (pass overwrite to "
                         "replace it); nothing was imported"));
      }
      Chip chip = input;
      chip.set_created_unix(existing.has_value() ? existing->created_unix() : now);
      chip.set_updated_unix(now);
      YIRAGE_RETURN_IF_ERROR(WriteLocked(chip, "user"));
      (existing.has_value() ? report.updated : report.added)++;
      events.push_back(
          MakeEvent(existing.has_value() ? ChipEvent::UPDATED : ChipEvent::REGISTERED, chip, now));
    }
    YIRAGE_RETURN_IF_ERROR(tx.Commit());
  }
  Notify(events);
  return report;
}

}  // namespace yirage::server
