// The chip model of the registry: the JSON format of a chip (see
// docs/chip-registry.md), validation, and matching the device description a
// backend's probe() returns to a registry chip.
#ifndef YIRAGE_CORE_CHIP_H_
#define YIRAGE_CORE_CHIP_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "yirage/v1/registry.pb.h"

namespace yirage::core {

// The values vendor, category and backend may take.
const std::vector<std::string>& ChipVendors();
const std::vector<std::string>& ChipCategories();
const std::vector<std::string>& ChipBackends();

// metadata["detected"] of a chip registered from a device no registry entry
// matched.
inline constexpr char kDetectedUnknownDevice[] = "unknown-device";

// Checks every field: chip_id of [a-z0-9_] (at most 64), chip_name set,
// vendor/category/backend among the known values, memory capacity and
// bandwidth > 0 (a detected unknown device may leave bandwidth 0: unmeasured),
// every other number >= 0 and finite, search-config entries > 0.
// InvalidArgument "chip 'ID': FIELD: why".
absl::Status ValidateChip(const yirage::v1::Chip& chip);

// One chip object (nested keys memory/compute/features/metadata/
// search_config) to a Chip. Unknown keys are refused, except in "features",
// where an unknown boolean lands in features.other. `where` names the chip in
// messages when its id is missing (e.g. "chip #3"). Validates the result.
absl::StatusOr<yirage::v1::Chip> ChipFromJson(const nlohmann::json& j,
                                              const std::string& where = "chip");
// Parses one chip object from text.
absl::StatusOr<yirage::v1::Chip> ParseChipJson(std::string_view text);
// Parses a list of chip objects (or {"chips": [...]}) from text; refuses
// duplicate ids. All or nothing.
absl::StatusOr<std::vector<yirage::v1::Chip>> ParseChipListJson(std::string_view text);

// The JSON object of a chip: identity keys always, other fields when set.
// Server timestamps are left out unless `with_timestamps`.
nlohmann::json ChipToJson(const yirage::v1::Chip& chip, bool with_timestamps = false);
// A JSON list of chips (the import/export format), pretty-printed.
std::string ChipListToJsonText(const std::vector<yirage::v1::Chip>& chips);

// Equal in everything but the server timestamps.
bool SameChip(const yirage::v1::Chip& a, const yirage::v1::Chip& b);

// Lowercases, drops "(R)"/"(TM)", turns every other non-alphanumeric into a
// space and collapses spaces: "Intel(R) Xeon(R) Platinum 8480+" ->
// "intel xeon platinum 8480".
std::string NormalizeDeviceName(std::string_view name);

// The result of matching a device description against the registry.
struct ChipMatch {
  std::string chip_id;
  std::string reason;  // how it matched, for logs
};

// Finds the registry chip a probe() JSON describes (see docs/chip-registry.md,
// "Matching"): among chips of the worker's backend, those whose name patterns
// (metadata "match", '|'-separated; default the chip name) occur in the
// device name at word boundaries, minus those whose measured properties
// (compute capability / gfx arch, compute units, memory size) contradict; the
// longest pattern wins, then the closest memory size. nullopt: no match.
std::optional<ChipMatch> MatchDevice(const nlohmann::json& device, const std::string& backend,
                                     const std::vector<yirage::v1::Chip>& registry);

// A chip describing a device from its measured properties alone, for a device
// no registry entry matches: id "detected_<backend>_<name>_<hash>", metadata
// detected=unknown-device and source naming the probe. InvalidArgument when
// the description lacks a device name.
absl::StatusOr<yirage::v1::Chip> ChipFromDevice(const nlohmann::json& device,
                                                const std::string& backend);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_CHIP_H_
