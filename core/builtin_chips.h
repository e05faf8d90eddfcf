// The built-in chip catalog: data/chips/VENDOR.json, one JSON list of chips
// (the import format of docs/chip-registry.md) a vendor, embedded at build
// time. The server upserts it into the registry at every start-up
// (server/chip_store.h).
#ifndef YIRAGE_CORE_BUILTIN_CHIPS_H_
#define YIRAGE_CORE_BUILTIN_CHIPS_H_

#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "yirage/v1/registry.pb.h"

namespace yirage::core {

// One catalog file: its vendor (the file's name without .json) and its text.
struct CatalogFile {
  std::string_view vendor;
  std::string_view json;
};

// The embedded files, in name order.
absl::Span<const CatalogFile> BuiltinCatalogFiles();

// Parses and validates catalog files by the registry's rules (ValidateChip)
// and the catalog's own: every chip of its file's vendor, every chip_id once
// over all files, every chip naming the source of its numbers in
// metadata.source. Marks each chip metadata.builtin = "true". Errors name the
// file and the chip.
absl::StatusOr<std::vector<yirage::v1::Chip>> ParseCatalog(absl::Span<const CatalogFile> files);

// ParseCatalog(BuiltinCatalogFiles()).
absl::StatusOr<std::vector<yirage::v1::Chip>> BuiltinChips();

// The catalog chip a chip id of the seed project names (nvidia_h100 ->
// h100_sxm, amd_mi300x -> mi300x, intel_pvc -> max_1550, ...), or nullopt
// for any other id. Registry lookups accept these as aliases.
std::optional<std::string_view> SeedChipAlias(std::string_view chip_id);

// Every (seed id, catalog id) pair SeedChipAlias knows.
absl::Span<const std::pair<std::string_view, std::string_view>> SeedChipAliases();

}  // namespace yirage::core

#endif  // YIRAGE_CORE_BUILTIN_CHIPS_H_
