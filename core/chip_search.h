// The search space a target chip gets: SearchOptions bounds derived from the
// chip's registry entry (tiles from shared memory or cache, threads from the
// warp size and block limits, grids from the compute units, vector width
// from the SIMD width), then the chip's search_config overrides.
#ifndef YIRAGE_CORE_CHIP_SEARCH_H_
#define YIRAGE_CORE_CHIP_SEARCH_H_

#include "core/candidate_generator.h"
#include "yirage/v1/registry.pb.h"

namespace yirage::core {

// `base` with every chip-derived field set (see docs/chip-registry.md,
// "Search space"). backend and max_candidates of `base` are kept unless the
// chip's search_config sets max_candidates and base has none.
SearchOptions SearchOptionsForChip(const yirage::v1::Chip& chip, SearchOptions base);

// The SearchSpace message of options (what `chips search-config` shows).
yirage::v1::SearchSpace SearchSpaceOf(const SearchOptions& options);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_CHIP_SEARCH_H_
