#include "core/builtin_chips.h"

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/chip.h"

namespace yirage::core {
namespace {

// Generated from data/chips/*.json by cmake/embed_catalog.cmake.
constexpr CatalogFile kCatalogFiles[] = {
#include "chip_catalog.inc"
};

}  // namespace

absl::Span<const CatalogFile> BuiltinCatalogFiles() { return kCatalogFiles; }

absl::StatusOr<std::vector<yirage::v1::Chip>> ParseCatalog(absl::Span<const CatalogFile> files) {
  std::vector<yirage::v1::Chip> out;
  std::set<std::string, std::less<>> ids;
  for (const CatalogFile& file : files) {
    const std::string vendor(file.vendor);
    const std::string where = absl::StrCat("data/chips/", vendor, ".json");
    auto chips = ParseChipListJson(file.json);
    if (!chips.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", std::string(chips.status().message())));
    }
    for (yirage::v1::Chip& chip : *chips) {
      const std::string name = absl::StrCat(where, ": chip '", chip.chip_id(), "'");
      if (chip.vendor() != vendor) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ": vendor: is '", chip.vendor(), "', expected the file's vendor '", vendor, "'"));
      }
      auto source = chip.metadata().find("source");
      if (source == chip.metadata().end() || source->second.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            name, ": metadata.source: must name the datasheets its numbers come from"));
      }
      if (!ids.insert(chip.chip_id()).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, ": chip_id: appears more than once in the catalog"));
      }
      (*chip.mutable_metadata())["builtin"] = "true";
      out.push_back(std::move(chip));
    }
  }
  return out;
}

absl::StatusOr<std::vector<yirage::v1::Chip>> BuiltinChips() {
  return ParseCatalog(BuiltinCatalogFiles());
}

}  // namespace yirage::core
