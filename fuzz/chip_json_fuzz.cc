// libFuzzer target: chip JSON import, one chip and the list format that
// `registry import` sends. Any input may be refused; none may crash, hang
// or leak, and every accepted chip must survive a round trip through
// ChipToJson as the same chip.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "core/chip.h"

namespace {

void RoundTrip(const yirage::v1::Chip& chip) {
  const std::string text = yirage::core::ChipToJson(chip).dump();
  absl::StatusOr<yirage::v1::Chip> again = yirage::core::ParseChipJson(text);
  if (!again.ok()) {
    std::fprintf(stderr, "an accepted chip, written back, is refused: %s\n%s\n",
                 std::string(again.status().message()).c_str(), text.c_str());
    std::abort();
  }
  if (!yirage::core::SameChip(chip, *again)) {
    std::fprintf(stderr, "an accepted chip comes back different:\n%s\n%s\n", text.c_str(),
                 yirage::core::ChipToJson(*again).dump().c_str());
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (absl::StatusOr<std::vector<yirage::v1::Chip>> list = yirage::core::ParseChipListJson(text);
      list.ok()) {
    for (const yirage::v1::Chip& chip : *list) RoundTrip(chip);
  }
  if (absl::StatusOr<yirage::v1::Chip> chip = yirage::core::ParseChipJson(text); chip.ok()) {
    RoundTrip(*chip);
  }
  return 0;
}
