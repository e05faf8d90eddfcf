// The built-in chip catalog (datasheet numbers, see each chip's metadata
// "source").
#ifndef YIRAGE_CORE_BUILTIN_CHIPS_H_
#define YIRAGE_CORE_BUILTIN_CHIPS_H_

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "yirage/v1/registry.pb.h"

namespace yirage::core {

// The catalog as a JSON list (the import format).
std::string_view BuiltinChipsJson();
// The catalog, parsed and validated.
absl::StatusOr<std::vector<yirage::v1::Chip>> BuiltinChips();

}  // namespace yirage::core

#endif  // YIRAGE_CORE_BUILTIN_CHIPS_H_
