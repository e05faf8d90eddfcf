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

namespace {

// The seed's ids: vendor prefix and the product's short name. Where the
// product comes in several forms, the one the seed's figures describe
// (the SXM module of the largest memory).
constexpr std::pair<std::string_view, std::string_view> kSeedAliases[] = {
    {"nvidia_v100", "v100_sxm2_32gb"},
    {"nvidia_t4", "t4"},
    {"nvidia_a100", "a100_sxm4_80gb"},
    {"nvidia_a30", "a30"},
    {"nvidia_a10", "a10"},
    {"nvidia_l4", "l4"},
    {"nvidia_l40s", "l40s"},
    {"nvidia_rtx3090", "rtx_3090"},
    {"nvidia_rtx4090", "rtx_4090"},
    {"nvidia_h100", "h100_sxm"},
    {"nvidia_h200", "h200"},
    {"nvidia_gh200", "gh200"},
    {"nvidia_b200", "b200"},
    {"amd_mi210", "mi210"},
    {"amd_mi250x", "mi250x"},
    {"amd_mi300x", "mi300x"},
    {"amd_mi325x", "mi325x"},
    {"intel_pvc", "max_1550"},
    {"intel_max1550", "max_1550"},
    {"intel_arc_b580", "arc_b580"},
};

}  // namespace

std::optional<std::string_view> SeedChipAlias(std::string_view chip_id) {
  for (const auto& [seed, id] : kSeedAliases) {
    if (seed == chip_id) return id;
  }
  return std::nullopt;
}

absl::Span<const std::pair<std::string_view, std::string_view>> SeedChipAliases() {
  return kSeedAliases;
}

}  // namespace yirage::core
