// Turns a graph into candidate plans: partitions of its ops into kernels times
// a schedule per kernel, ranked by the cost model.
#ifndef YIRAGE_CORE_CANDIDATE_GENERATOR_H_
#define YIRAGE_CORE_CANDIDATE_GENERATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/graph.h"
#include "yirage/v1/backend.pb.h"
#include "yirage/v1/plan.pb.h"

namespace yirage::core {

struct SearchOptions {
  std::string backend = "cpu";
  // What the backend runs on the target (its workers report it: the
  // backend's `describe` call). The search plans only these: row kernels as
  // `kernels.row` says, KERNEL_LIBRARY kernels where `kernels.library` is
  // set (then the baseline's matmuls are library calls, the generated
  // one-kernel-per-op plan becomes an ordinary candidate, and library plans
  // are offered first, with `kernels.library.algorithms` algorithms each
  // where the plan costs more than its launches: kMinAlgorithmLaunches),
  // and the points of `kernels.families` for the chains they match
  // (core/kernel_family.h). Empty: generic row kernels only.
  yirage::v1::BackendKernels kernels;
  int max_candidates = 0;  // 0 = no limit; the baseline is always kept
  // Target description used to bound schedules (cache sizes, thread count).
  int num_threads = 0;      // 0 = unknown
  int64_t cache_bytes = 0;  // last-level cache per core, 0 = unknown
  int simd_width_floats = 8;

  // ---- The target chip (set by core/chip_search.h from the chip registry;
  // 0 / empty = unknown, keep the generator's defaults). ----
  std::string chip_id;
  int warp_size = 0;              // threads of a warp/wavefront/sub-group; 1 on CPUs
  int num_compute_units = 0;      // SMs, CUs, Xe cores, CPU cores
  int max_threads_per_block = 0;  // GPU block (work-group) limit
  // On-chip bytes the operand tiles of one kernel may occupy: shared memory
  // per block on GPUs, L2 per core on CPUs.
  int64_t max_tile_bytes = 0;
  std::vector<int> tile_sizes;  // tile_n / tile_k choices, ascending, each fitting max_tile_bytes
  std::vector<int> block_threads;  // threads per block: multiples of warp_size <= the limits
  std::vector<int> grid_blocks;    // grid sizes: whole waves over num_compute_units
  // The target's roofline, for the cost model (core/cost_model.h): the
  // registry's figures, 0 = unknown (the model's defaults).
  double memory_bandwidth_gbps = 0;
  double peak_tflops_fp32 = 0;  // vector units (CUDA cores, SIMD lanes)
  double peak_tflops_fp16 = 0;  // matrix units (tensor cores, AMX); 0 = none
  double peak_tflops_bf16 = 0;

  // ---- Algebraic rewrites (core/rewrite.h): the original graph and every
  // fingerprint-verified rewritten graph are planned and ranked together. ----
  bool enable_rewrites = true;
  int max_rewrite_graphs = 32;  // distinct rewritten graphs fingerprinted, at most
  int fingerprint_trials = 3;
  int max_plans_per_rewrite = 40;          // plans kept per rewritten graph (cheapest first)
  double rewrite_time_budget_seconds = 0;  // 0 = no limit (max_rewrite_graphs bounds the work)
  int search_threads = 0;                  // scheduler threads; 0 = hardware_concurrency()
};

// What a search did (GenerateCandidatesWithStats), for logs and users.
struct SearchStats {
  int graphs_explored = 0;     // distinct rewritten graphs fingerprinted
  int rewrites_generated = 0;  // rewritten graphs produced by rules, duplicates included
  int duplicates = 0;          // dropped: canonical hash already seen
  int rewrites_verified = 0;   // passed the fingerprint (planned)
  int rewrites_rejected = 0;   // failed the fingerprint (never dispatched)
  int64_t fingerprint_checks = 0;
  int plans = 0;            // plans returned
  int rewritten_plans = 0;  // of which on a rewritten graph
  // Where the budget cut the order and the fewest-kernel plan within reach
  // of the best estimate took the last place (the model's hedge): its
  // description; else empty.
  std::string hedged_plan;
  bool budget_exhausted = false;
  std::string rewrites_skipped;  // why no rewrite was tried (graph too large), or empty
  double rewrite_seconds = 0;    // wall time of the rewrite search and fingerprints
  double seconds = 0;            // wall time of the whole search

  // Fingerprints ran on the graphs with their dimensions divided by this
  // (core/rewrite.h ReduceShapes; 1 = full size).
  int64_t fingerprint_shape_reduction = 1;
};

// Returns the plans, baseline first (one kernel per op, default schedules,
// matmuls as library calls where options.kernels has a library; Plan.baseline set),
// then (with a library) the first library plans, then the rest ordered by
// estimated cost, cheapest first, truncated to options.max_candidates. Where that
// cuts the order (at least 5 candidates), the cheapest plan of the fewest kernels
// takes the last place if its estimate is within 1.5x of the best (a hedge
// on the cost model). Every plan passes ValidatePlan and no two plans are equal.
absl::StatusOr<std::vector<yirage::v1::Plan>> GenerateCandidates(const Graph& graph,
                                                                 const SearchOptions& options);

// GenerateCandidates plus what the search did. Rewritten plans carry their own
// graph (Plan.graph), the rules applied (Plan.rewrites) and their fingerprint
// (Plan.fingerprint_*); they rank with the original graph's plans by cost,
// after the baseline (at most 200 plans in all when max_candidates is 0).
// `stats` may be null. Fingerprinting and per-graph planning run on
// options.search_threads threads.
absl::StatusOr<std::vector<yirage::v1::Plan>> GenerateCandidatesWithStats(
    const Graph& graph, const SearchOptions& options, SearchStats* stats);

// Checks a plan against its graph: every op in exactly one kernel, kernels in
// an order where every input is available, inputs/outputs lists complete and
// exact, KERNEL_ROW groups legal (AnalyzeRowGroup), KERNEL_GENERIC kernels
// holding one op, schedule fields positive. A plan with its own graph
// (Plan.graph) is checked against that graph, which must keep `graph`'s
// signature (CheckSameSignature), carry fingerprint_verified, and be
// fingerprint-equivalent to `graph`: pairs verified in this process are
// remembered, others are fingerprinted here.
absl::Status ValidatePlan(const Graph& graph, const yirage::v1::Plan& plan);
// The most fingerprint trials ValidatePlan runs for a rewritten plan, whatever
// its fingerprint_trials says.
inline constexpr int kMaxPlanFingerprintTrials = 16;

// The library's further algorithms are offered only for plans whose
// estimate is above this many times their kernels' launch overhead: below,
// the matmuls are a few KB and no algorithm can change the time.
inline constexpr double kMinAlgorithmLaunches = 2.0;

// Relative cost estimate of a plan (bytes moved plus flops, weighted); used to
// rank candidates and shown to users. Lower is better. A plan with its own
// graph is costed against that graph.
double EstimatePlanCost(const Graph& graph, const yirage::v1::Plan& plan,
                        const SearchOptions& options);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_CANDIDATE_GENERATOR_H_
