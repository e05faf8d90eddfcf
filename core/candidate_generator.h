// Turns a graph into candidate plans: partitions of its ops into kernels times
// a schedule per kernel, ranked by the cost model.
#ifndef YIRAGE_CORE_CANDIDATE_GENERATOR_H_
#define YIRAGE_CORE_CANDIDATE_GENERATOR_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/graph.h"
#include "yirage/v1/plan.pb.h"

namespace yirage::core {

struct SearchOptions {
  std::string backend = "cpu";
  int max_candidates = 0;  // 0 = no limit; the baseline is always kept
  // Target description used to bound schedules (cache sizes, thread count).
  int num_threads = 0;     // 0 = unknown
  int64_t cache_bytes = 0; // last-level cache per core, 0 = unknown
  int simd_width_floats = 8;
};

// Returns the plans, baseline first (one kernel per op, default schedules,
// Plan.baseline set), then the rest ordered by estimated cost, cheapest first,
// truncated to options.max_candidates. Every plan passes ValidatePlan and no
// two plans are equal.
absl::StatusOr<std::vector<yirage::v1::Plan>> GenerateCandidates(
    const Graph& graph, const SearchOptions& options);

// Checks a plan against its graph: every op in exactly one kernel, kernels in
// an order where every input is available, inputs/outputs lists complete and
// exact, KERNEL_ROW groups legal (AnalyzeRowGroup), KERNEL_GENERIC kernels
// holding one op, schedule fields positive.
absl::Status ValidatePlan(const Graph& graph, const yirage::v1::Plan& plan);

// Relative cost estimate of a plan (bytes moved plus flops, weighted); used to
// rank candidates and shown to users. Lower is better.
double EstimatePlanCost(const Graph& graph, const yirage::v1::Plan& plan,
                        const SearchOptions& options);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_CANDIDATE_GENERATOR_H_
