#include "core/candidate_generator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "core/cost_model.h"
#include "core/fingerprint.h"
#include "core/fused_pattern.h"
#include "core/generic_chain.h"
#include "core/graph.h"
#include "core/graph_hash.h"
#include "core/kernel_family.h"
#include "core/library_matmul.h"
#include "core/parallel_for.h"
#include "core/partition_enumerator.h"
#include "core/rewrite.h"
#include "core/row_group.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "yirage/v1/plan.pb.h"

namespace yirage::core {
namespace {

using yirage::v1::KernelPlan;
using yirage::v1::Plan;
using yirage::v1::Schedule;

// Bound on the plans generated before options.max_candidates applies,
// baseline included.
constexpr int kMaxGeneratedPlans = 200;

// Schedule knobs. block_rows values above every kernel's row count are not
// generated; tile_n and unroll vary only for groups holding a matmul.
constexpr int kBlockRowsChoices[] = {1, 4, 16, 64};
constexpr int kTileNChoices[] = {64, 256};
constexpr int kUnrollChoices[] = {1, 4};
constexpr int kDefaultTileN = 64;
constexpr int kDefaultTileK = 256;
constexpr int kBaselineBlockRows = 4;
// PARALLEL_COLS is offered to groups with at most this many rows that hold a
// matmul or have fewer rows than threads.
constexpr int64_t kMaxColsRows = 256;
// Library plans of the job's graph placed right after the baseline.
constexpr int kLibraryPlansFirst = 3;
// The hedge (HedgeIndex): how far over the best estimate the fewest-kernel
// plan may be, and the budget after the baseline it needs.
constexpr double kHedgeCostRatio = 1.5;
constexpr int kMinHedgeSlots = 4;

// One uniform schedule choice, applied to every KERNEL_ROW kernel of a plan.
struct ScheduleVariant {
  bool cols = false;   // PARALLEL_COLS where the group qualifies
  int block_rows = 1;  // PARALLEL_ROWS kernels (clipped to their rows)
  int tile_n = kDefaultTileN;
  int unroll = 1;
  // A point of a backend kernel family (options.kernels.families(family)
  // .points(point)) for the chains of that family within its limits; -1:
  // none. Chains of a family never take the generic knobs: outside a
  // point they get the family's defaults (so their plans dedupe).
  int family = -1;
  int point = -1;
  // GPU row kernels (not family chains): threads per block, 0 = the
  // backend's default; from the chip's block_threads.
  int gpu_threads = 0;
};

// What a group's schedule depends on.
struct GroupShape {
  int64_t num_rows = 1;
  bool has_matmul = false;
  int64_t max_n = 1;  // widest matmul output
  int64_t max_k = 1;  // deepest matmul reduction
  // The backend kernel family whose pattern the group's ops match
  // (core/kernel_family.h; index into options.kernels.families()), or -1.
  int family = -1;
  // Every op elementwise with one output shape: a backend whose row kernels
  // are flat (RowKernels.flat_elementwise) runs it over the elements, so
  // rows, columns and threads do not apply; items a thread (unroll) do.
  bool flat_elementwise = false;
  // Concats and slices (at least one) among elementwise ops: a backend
  // with RowKernels.gather_cols runs it over its elements under
  // PARALLEL_COLS.
  bool gather = false;
  const Graph* graph = nullptr;
  std::vector<int> ops;
};

GroupShape ShapeOf(const Graph& graph, absl::Span<const int> ops, const RowGroupInfo* row,
                   const SearchOptions& options) {
  GroupShape shape;
  shape.graph = &graph;
  shape.ops.assign(ops.begin(), ops.end());
  if (row != nullptr) shape.num_rows = std::max<int64_t>(1, row->num_rows);
  for (int op_index : ops) {
    const OpInfo& op = graph.op(op_index);
    if (op.type != OpType::kMatmul) continue;
    shape.has_matmul = true;
    const std::vector<int64_t>& a = graph.tensor(op.inputs[0]).shape;
    const std::vector<int64_t>& out = graph.tensor(op.output).shape;
    shape.max_k = std::max<int64_t>(shape.max_k, a.empty() ? 1 : a.back());
    shape.max_n = std::max<int64_t>(shape.max_n, out.empty() ? 1 : out.back());
  }
  const std::vector<int>& op_list = shape.ops;
  shape.flat_elementwise = !op_list.empty();
  bool moves = false, others = false;
  for (int op_index : op_list) {
    const OpInfo& op = graph.op(op_index);
    shape.flat_elementwise =
        shape.flat_elementwise && IsElementwise(op.type) &&
        graph.tensor(op.output).shape == graph.tensor(graph.op(op_list.front()).output).shape;
    moves = moves || op.type == OpType::kConcat || op.type == OpType::kSlice;
    others = others ||
             !(IsElementwise(op.type) || op.type == OpType::kConcat || op.type == OpType::kSlice);
  }
  shape.gather = moves && !others;
  shape.family = MatchFamily(options.kernels, graph, op_list);
  return shape;
}

Schedule GenericSchedule(const SearchOptions& options) {
  Schedule schedule;
  schedule.set_parallel(yirage::v1::PARALLEL_ROWS);
  schedule.set_block_rows(1);
  schedule.set_tile_n(kDefaultTileN);
  schedule.set_tile_k(kDefaultTileK);
  schedule.set_vector_width(EffectiveSimdWidth(options));
  schedule.set_unroll(1);
  return schedule;
}

// The schedule `variant` gives a KERNEL_ROW group. Tiles are clipped to the
// group's matmul dims so that equivalent schedules compare equal.
Schedule RowSchedule(const GroupShape& shape, const ScheduleVariant& variant,
                     const SearchOptions& options) {
  Schedule schedule = GenericSchedule(options);
  if (shape.family >= 0) {
    // A family's chain: the variant's point where it is that family's and
    // the chain is within its limits, else the family's defaults.
    const yirage::v1::KernelFamily& family = options.kernels.families(shape.family);
    if (variant.family == shape.family && WithinLimits(family.points(variant.point).limits(),
                                                       family.pattern(), *shape.graph, shape.ops)) {
      schedule.MergeFrom(family.points(variant.point).schedule());
    }
    SetFamilyDefault(family.pattern(), &schedule);  // where no point (or an empty one) set it
    return schedule;
  }
  if (shape.flat_elementwise && options.kernels.row().flat_elementwise()) {
    schedule.set_unroll(variant.unroll);
    return schedule;
  }
  if (variant.gpu_threads > 0 && options.warp_size > 0) {
    schedule.set_warps(variant.gpu_threads / options.warp_size);
  }
  if (shape.has_matmul) {
    schedule.set_tile_n(static_cast<int>(std::min<int64_t>(variant.tile_n, shape.max_n)));
    schedule.set_tile_k(static_cast<int>(std::min<int64_t>(kDefaultTileK, shape.max_k)));
    schedule.set_unroll(variant.unroll);
  }
  const bool cols_ok = (shape.num_rows <= kMaxColsRows &&
                        (shape.has_matmul || shape.num_rows < EffectiveThreads(options))) ||
                       (shape.gather && options.kernels.row().gather_cols());
  if (variant.cols && cols_ok) {
    schedule.set_parallel(yirage::v1::PARALLEL_COLS);
    schedule.set_block_rows(static_cast<int>(shape.num_rows));
  } else {
    schedule.set_block_rows(
        static_cast<int>(std::min<int64_t>(variant.block_rows, shape.num_rows)));
  }
  return schedule;
}

// Tensors a kernel reads from memory (produced outside it, first-use order)
// and writes to memory (graph outputs and tensors read outside it, op order).
// `in_kernel(op)` says whether an op belongs to the kernel.
template <typename InKernel>
void KernelTensors(const Graph& graph, absl::Span<const int> ops, InKernel in_kernel,
                   std::vector<int>* inputs, std::vector<int>* outputs) {
  for (int op : ops) {
    for (int t : graph.op(op).inputs) {
      const int producer = graph.tensor(t).producer;
      if (producer >= 0 && in_kernel(producer)) continue;
      if (std::find(inputs->begin(), inputs->end(), t) == inputs->end()) inputs->push_back(t);
    }
  }
  for (int op : ops) {
    const TensorInfo& out = graph.tensor(graph.op(op).output);
    bool escapes = out.is_graph_output;
    for (int consumer : out.consumers) escapes = escapes || !in_kernel(consumer);
    if (escapes) outputs->push_back(graph.op(op).output);
  }
}

std::vector<int> GroupOps(const KernelGroup& group) {
  std::vector<int> ops;
  for (int i = group.begin; i < group.end; ++i) ops.push_back(i);
  return ops;
}

// A kernel for `group` (a contiguous range of ops), without name.
// A kernel of `ops` (ascending, not necessarily contiguous), without name.
KernelPlan MakeKernelOf(const Graph& graph, const std::vector<int>& ops,
                        yirage::v1::KernelKind kind, const Schedule& schedule) {
  KernelPlan kernel;
  kernel.set_kind(kind);
  for (int op : ops) kernel.add_ops(graph.op(op).name);
  std::vector<int> inputs, outputs;
  KernelTensors(
      graph, ops, [&ops](int op) { return std::binary_search(ops.begin(), ops.end(), op); },
      &inputs, &outputs);
  for (int t : inputs) kernel.add_inputs(graph.tensor(t).name);
  for (int t : outputs) kernel.add_outputs(graph.tensor(t).name);
  *kernel.mutable_schedule() = schedule;
  return kernel;
}

KernelPlan MakeKernel(const Graph& graph, const KernelGroup& group, const Schedule& schedule) {
  KernelPlan kernel;
  kernel.set_kind(group.kind);
  std::vector<int> ops = GroupOps(group);
  for (int op : ops) kernel.add_ops(graph.op(op).name);
  std::vector<int> inputs, outputs;
  KernelTensors(
      graph, ops, [&group](int op) { return op >= group.begin && op < group.end; }, &inputs,
      &outputs);
  for (int t : inputs) kernel.add_inputs(graph.tensor(t).name);
  for (int t : outputs) kernel.add_outputs(graph.tensor(t).name);
  *kernel.mutable_schedule() = schedule;
  return kernel;
}

// Summary of the uniform schedule: "rows b16 n256 k256 v8 u1" (matmul knobs
// only when the plan holds a matmul), "cols ..." when every KERNEL_ROW kernel
// splits columns, "cols ... + rows b4" when some do not qualify, "fused" and
// the family point's label when every KERNEL_ROW kernel is a family's.
// `with_fused`: name the family point of family kernels beside row kernels.
std::string VariantToString(const Graph& graph, const ScheduleVariant& v, const Plan& plan,
                            const SearchOptions& options, bool with_fused = true) {
  bool any_rows = false, any_cols = false, any_matmul = false, all_fused = true;
  bool any_fused = false, point_applies = false;
  for (const KernelPlan& kernel : plan.kernels()) {
    std::vector<int> ops;
    for (const std::string& op : kernel.ops()) {
      ops.push_back(graph.FindOp(op));
      any_matmul = any_matmul || graph.op(ops.back()).type == OpType::kMatmul;
    }
    if (kernel.kind() != yirage::v1::KERNEL_ROW) continue;
    const int family = MatchFamily(options.kernels, graph, ops);
    all_fused = all_fused && family >= 0;
    any_fused = any_fused || family >= 0;
    if (family >= 0 && family == v.family) {
      const yirage::v1::KernelFamily& f = options.kernels.families(family);
      point_applies =
          point_applies || WithinLimits(f.points(v.point).limits(), f.pattern(), graph, ops);
    }
    const bool cols = kernel.schedule().parallel() == yirage::v1::PARALLEL_COLS;
    any_cols = any_cols || cols;
    any_rows = any_rows || !cols;
  }
  if (!any_rows && !any_cols) return "generic";
  // Family chains take none of the generic knobs.
  std::string fused = "fused";
  if (point_applies) {
    const std::string& label = options.kernels.families(v.family).points(v.point).label();
    if (!label.empty()) absl::StrAppend(&fused, " ", label);
  }
  if (all_fused) return fused;
  if (any_fused && with_fused) {
    // Family kernels beside row kernels: their point, then the row knobs,
    // so that plans differing only in the point read differently.
    return absl::StrCat(fused, " + ", VariantToString(graph, v, plan, options, false));
  }
  if (v.gpu_threads > 0) {
    const std::string base =
        VariantToString(graph, ScheduleVariant{v.cols, v.block_rows, v.tile_n, v.unroll}, plan,
                        options, with_fused);
    return absl::StrCat(base, " threads ", v.gpu_threads);
  }
  const std::string knobs =
      any_matmul ? absl::StrCat("n", v.tile_n, " k", kDefaultTileK, " v",
                                EffectiveSimdWidth(options), " u", v.unroll)
                 : absl::StrCat("v", EffectiveSimdWidth(options),
                                v.unroll > 1 ? absl::StrCat(" u", v.unroll) : std::string());
  if (!any_cols) return absl::StrCat("rows b", v.block_rows, " ", knobs);
  if (!any_rows) return absl::StrCat("cols ", knobs);
  return absl::StrCat("cols ", knobs, " + rows b", v.block_rows);
}

std::vector<ScheduleVariant> MakeVariants(const Graph& graph, PartitionEnumerator& enumerator,
                                          const SearchOptions& options) {
  int64_t max_rows = 1;
  bool has_matmul = false;
  int64_t max_width = 0;
  for (int i = 0; i < enumerator.num_ops(); ++i) {
    if (const RowGroupInfo* row = enumerator.RowGroup(i, i + 1); row != nullptr) {
      max_rows = std::max(max_rows, row->num_rows);
      for (int64_t w : row->row_width) max_width = std::max(max_width, w);
      // A reduction's row is its input's.
      const std::vector<int64_t>& in = graph.tensor(graph.op(i).inputs[0]).shape;
      if (!in.empty()) max_width = std::max(max_width, in.back());
    } else {
      max_width = std::numeric_limits<int64_t>::max();
    }
    has_matmul = has_matmul || graph.op(i).type == OpType::kMatmul;
  }
  std::vector<int> blocks;
  for (int b : kBlockRowsChoices) {
    if (b <= max_rows) blocks.push_back(b);
  }
  // Graphs whose rows are all narrow (RowKernels.narrow_row_max_width) also
  // take the backend's narrow block: a thread a row, where 64 rows a block
  // give each row several threads that mostly idle and combine through
  // shuffles.
  const yirage::v1::RowKernels& row_kernels = options.kernels.row();
  const int narrow_rows = row_kernels.narrow_block_rows();
  if (row_kernels.narrow_row_max_width() > 0 && max_width <= row_kernels.narrow_row_max_width() &&
      narrow_rows > 0 && narrow_rows <= max_rows &&
      std::find(blocks.begin(), blocks.end(), narrow_rows) == blocks.end()) {
    blocks.push_back(narrow_rows);
  }
  std::vector<int> tiles = {kDefaultTileN};
  std::vector<int> unrolls = {1};
  // GPU elementwise groups (GroupShape.flat_elementwise) take unroll in any
  // graph: the backend's default and 4 items a thread, which suits ops
  // heavier than a few instructions (gelu's erf).
  if (has_matmul || options.kernels.row().flat_elementwise()) {
    unrolls.assign(std::begin(kUnrollChoices), std::end(kUnrollChoices));
  }
  if (has_matmul) {
    tiles.assign(std::begin(kTileNChoices), std::end(kTileNChoices));
    // On CPUs the target chip's cache per core bounds the tiles: drop choices
    // it cannot hold, keep its largest if none fit. GPU backends size their
    // shared-memory staging per kernel themselves (and fall back when a shape
    // does not fit), so the coarse square-tile bound would only cut good plans.
    if (!options.tile_sizes.empty() && !options.kernels.gpu()) {
      const int largest = options.tile_sizes.back();
      std::vector<int> fitting;
      for (int t : tiles) {
        if (t <= largest) fitting.push_back(t);
      }
      tiles = fitting.empty() ? std::vector<int>{largest} : fitting;
    }
  }
  std::vector<ScheduleVariant> variants;
  for (bool cols : {false, true}) {
    for (int b : blocks) {
      for (int t : tiles) {
        for (int u : unrolls) variants.push_back({cols, b, t, u});
      }
    }
  }
  // Every point of the backend's kernel families, for the chains of each
  // (other kernels get the first variant's schedule under them, so only
  // plans with a family chain are new). A family's points are the backend's
  // to choose (backends/cuda/cuda_families.cc).
  for (int f = 0; f < options.kernels.families_size(); ++f) {
    const yirage::v1::KernelFamily& family = options.kernels.families(f);
    bool matched = false;
    for (int op = 0; op < enumerator.num_ops() && !matched; ++op) {
      matched = graph.op(op).type == OpType::kMatmul;
    }
    if (!matched) continue;  // every family pattern holds a matmul
    for (int p = 0; p < family.points_size(); ++p) {
      ScheduleVariant v = variants.front();
      v.family = f;
      v.point = p;
      variants.push_back(v);
    }
  }
  // The widest block the chip allows (its block_threads: warp-size
  // multiples within the block and per-CU limits), for row kernels.
  if (options.kernels.row().threads_knob() && !options.block_threads.empty() &&
      options.block_threads.back() > 256) {
    ScheduleVariant v = variants.front();
    v.gpu_threads = options.block_threads.back();
    variants.push_back(v);
  }
  return variants;
}

// `schedule` serialized deterministically: equal schedules, equal bytes.
std::string DeterministicBytes(const Schedule& schedule) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  {
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    schedule.SerializeToCodedStream(&coded);
  }
  return out;
}

// Distinct (group, schedule) kernels with their costs, so that each is built
// and costed once however many partitions and variants share it.
struct KernelCache {
  using Key = std::tuple<int, int, int, std::string>;  // begin, end, kind, schedule
  std::map<Key, int> ids;                              // kernel -> index into costs
  std::vector<double> costs;                           // EstimateKernelCost of each kernel
};

// The id of (group, schedule) in `cache`, building and costing it when new.
int CachedKernelId(const Graph& graph, PartitionEnumerator& enumerator,
                   const SearchOptions& options, const KernelGroup& group, const Schedule& s,
                   KernelCache* cache) {
  KernelCache::Key key{group.begin, group.end, group.kind, DeterministicBytes(s)};
  auto [it, inserted] = cache->ids.try_emplace(key, static_cast<int>(cache->costs.size()));
  if (inserted) {
    const RowGroupInfo* row = group.kind == yirage::v1::KERNEL_ROW
                                  ? enumerator.RowGroup(group.begin, group.end)
                                  : nullptr;
    cache->costs.push_back(EstimateKernelCost(graph, MakeKernel(graph, group, s), row, options));
  }
  return it->second;
}

Schedule GroupSchedule(const Graph& graph, PartitionEnumerator& enumerator,
                       const KernelGroup& group, const ScheduleVariant& variant,
                       const SearchOptions& options) {
  if (group.kind != yirage::v1::KERNEL_ROW) return GenericSchedule(options);
  const RowGroupInfo* row = enumerator.RowGroup(group.begin, group.end);
  return RowSchedule(ShapeOf(graph, GroupOps(group), row, options), variant, options);
}

Plan MakePlan(const Graph& graph, const Partition& partition,
              const std::vector<Schedule>& schedules) {
  Plan plan;
  for (size_t i = 0; i < partition.size(); ++i) {
    KernelPlan* kernel = plan.add_kernels();
    *kernel = MakeKernel(graph, partition[i], schedules[i]);
    kernel->set_name(absl::StrCat("k", i));
  }
  return plan;
}

// True when `group` can run as a library matmul (core/library_matmul.h).
bool IsLibraryGroup(const Graph& graph, const KernelGroup& group) {
  return graph.op(group.begin).type == OpType::kMatmul &&
         MatchLibraryMatmul(graph, GroupOps(group)).ok();
}

// The model's hedge among `ordered` (the candidates after the baseline, in
// the order they are timed) when only the first `slots` are: the cheapest
// plan of the fewest kernels, where it falls past the cut and its estimate is
// within kHedgeCostRatio of the best. Launches and memory latency dominate
// small graphs, where the model is least sure and one kernel instead of
// several pays most. -1: no hedge (no cut, too few slots, the plan already
// in, or too dear).
int HedgeIndex(const std::vector<Plan>& ordered, int slots) {
  if (slots < kMinHedgeSlots || static_cast<int>(ordered.size()) <= slots) return -1;
  int best = -1;
  double cheapest = std::numeric_limits<double>::infinity();
  for (int k = 0; k < static_cast<int>(ordered.size()); ++k) {
    const Plan& p = ordered[k];
    cheapest = std::min(cheapest, p.estimated_cost());
    if (best < 0 || p.kernels_size() < ordered[best].kernels_size() ||
        (p.kernels_size() == ordered[best].kernels_size() &&
         p.estimated_cost() < ordered[best].estimated_cost())) {
      best = k;
    }
  }
  if (best < slots) return -1;  // timed anyway
  return ordered[best].estimated_cost() <= kHedgeCostRatio * cheapest ? best : -1;
}

bool HasLibraryKernel(const Plan& plan) {
  for (const KernelPlan& kernel : plan.kernels()) {
    if (kernel.kind() == yirage::v1::KERNEL_LIBRARY) return true;
  }
  return false;
}

// `partition` with every group the library takes as a KERNEL_LIBRARY kernel
// (algorithm `algo`) and the others at `variant`'s schedule; nullopt when no
// group qualifies.
std::optional<Plan> LibraryPlan(const Graph& graph, PartitionEnumerator& enumerator,
                                const Partition& partition, const ScheduleVariant& variant,
                                int algo, const SearchOptions& options) {
  Partition groups = partition;
  std::vector<Schedule> schedules;
  int library = 0;
  for (KernelGroup& group : groups) {
    if (IsLibraryGroup(graph, group)) {
      group.kind = yirage::v1::KERNEL_LIBRARY;
      Schedule schedule = GenericSchedule(options);
      schedule.mutable_library()->set_algorithm(algo);
      schedules.push_back(schedule);
      ++library;
    } else {
      schedules.push_back(GroupSchedule(graph, enumerator, group, variant, options));
    }
  }
  if (library == 0) return std::nullopt;
  Plan plan = MakePlan(graph, groups, schedules);
  std::string text = absl::StrCat(PartitionToString(graph, partition), " library");
  if (algo > 0) absl::StrAppend(&text, " algo ", algo);
  if (library < static_cast<int>(groups.size())) {
    absl::StrAppend(&text, " + ", VariantToString(graph, variant, plan, options));
  }
  plan.set_description(text);
  return plan;
}

absl::Status ValidatePlanAgainst(const Graph& graph, const Plan& plan);

// Same kernels: kinds and ops (schedules aside).
bool SameKernels(const Plan& a, const Plan& b) {
  if (a.kernels_size() != b.kernels_size()) return false;
  for (int k = 0; k < a.kernels_size(); ++k) {
    if (a.kernels(k).kind() != b.kernels(k).kind()) return false;
    if (!std::equal(a.kernels(k).ops().begin(), a.kernels(k).ops().end(),
                    b.kernels(k).ops().begin(), b.kernels(k).ops().end())) {
      return false;
    }
  }
  return true;
}

// Every matmul as a library call with the longest epilogue it takes, and
// the other ops gathered, in order, into as few row kernels as are legal,
// even across the library calls between them (silu(X W1) * (X W2) becomes
// two library calls and one elementwise kernel). Kernels run in the order of
// their last op. nullopt when the graph has no library matmul or the plan
// would not be valid.
std::optional<Plan> GatheredLibraryPlan(const Graph& graph, const SearchOptions& options) {
  const int num_ops = static_cast<int>(graph.ops().size());
  std::vector<std::pair<std::vector<int>, yirage::v1::KernelKind>> kernels;
  std::vector<int> rest;
  for (int i = 0; i < num_ops;) {
    if (graph.op(i).type == OpType::kMatmul && MatchLibraryMatmul(graph, {i}).ok()) {
      std::vector<int> chain = {i};
      while (chain.back() + 1 < num_ops) {
        std::vector<int> longer = chain;
        longer.push_back(chain.back() + 1);
        if (!MatchLibraryMatmul(graph, longer).ok()) break;
        chain = std::move(longer);
      }
      i = chain.back() + 1;
      kernels.emplace_back(std::move(chain), yirage::v1::KERNEL_LIBRARY);
      continue;
    }
    rest.push_back(i++);
  }
  if (kernels.empty()) return std::nullopt;
  std::vector<int> group;
  for (int op : rest) {
    std::vector<int> wider = group;
    wider.push_back(op);
    if (group.empty() || AnalyzeRowGroup(graph, wider).ok()) {
      group = std::move(wider);
      continue;
    }
    kernels.emplace_back(std::move(group), yirage::v1::KERNEL_ROW);
    group = {op};
  }
  if (!group.empty()) kernels.emplace_back(std::move(group), yirage::v1::KERNEL_ROW);
  std::stable_sort(kernels.begin(), kernels.end(),
                   [](const auto& a, const auto& b) { return a.first.back() < b.first.back(); });
  Plan plan;
  std::vector<std::string> parts;
  for (auto& [ops, kind] : kernels) {
    Schedule schedule = GenericSchedule(options);
    if (kind == yirage::v1::KERNEL_LIBRARY) schedule.mutable_library();  // its first algorithm
    if (kind == yirage::v1::KERNEL_ROW) {
      absl::StatusOr<RowGroupInfo> row = AnalyzeRowGroup(graph, ops);
      if (!row.ok()) {
        if (ops.size() != 1) return std::nullopt;
        kind = yirage::v1::KERNEL_GENERIC;  // one op that fits no row group
      } else {
        ScheduleVariant variant;  // one row a block: the GPU backends' flat and register rows
        schedule = RowSchedule(ShapeOf(graph, ops, &*row, options), variant, options);
      }
    }
    KernelPlan* kernel = plan.add_kernels();
    *kernel = MakeKernelOf(graph, ops, kind, schedule);
    kernel->set_name(absl::StrCat("k", plan.kernels_size() - 1));
    std::vector<std::string> names;
    for (int op : ops) names.push_back(graph.op(op).name);
    parts.push_back(absl::StrCat("[", absl::StrJoin(names, "+"), "]"));
  }
  plan.set_description(absl::StrCat(absl::StrJoin(parts, ""), " library, the rest gathered"));
  if (!ValidatePlanAgainst(graph, plan).ok()) return std::nullopt;
  return plan;
}

struct Combo {
  double cost;
  int partition;
  int variant;
};

absl::Status CheckOptions(const SearchOptions& options) {
  if (options.max_candidates < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_candidates must be >= 0, got ", options.max_candidates));
  }
  if (options.num_threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_threads must be >= 0, got ", options.num_threads));
  }
  if (options.cache_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache_bytes must be >= 0, got ", options.cache_bytes));
  }
  if (options.simd_width_floats <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("simd_width_floats must be positive, got ", options.simd_width_floats));
  }
  return absl::OkStatus();
}

absl::Status CheckSchedule(const KernelPlan& kernel) {
  const Schedule& s = kernel.schedule();
  if (s.parallel() != yirage::v1::PARALLEL_ROWS && s.parallel() != yirage::v1::PARALLEL_COLS) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel ", kernel.name(), ": schedule.parallel must be PARALLEL_ROWS or PARALLEL_COLS"));
  }
  const std::pair<const char*, int> fields[] = {{"block_rows", s.block_rows()},
                                                {"tile_n", s.tile_n()},
                                                {"tile_k", s.tile_k()},
                                                {"vector_width", s.vector_width()},
                                                {"unroll", s.unroll()}};
  for (const auto& [field, value] : fields) {
    if (value <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("kernel ", kernel.name(), ": schedule.", field,
                                                     " must be positive, got ", value));
    }
  }
  return absl::OkStatus();
}

// Compares a kernel's listed tensors with the expected ones; `what` is
// "input" or "output"; `why(t)` says why an expected tensor t belongs there.
absl::Status CheckTensorList(const Graph& graph, const KernelPlan& kernel, const char* what,
                             const google::protobuf::RepeatedPtrField<std::string>& listed,
                             const std::vector<int>& expected,
                             const std::function<std::string(int)>& why) {
  std::set<std::string> seen;
  for (const std::string& name : listed) {
    if (!seen.insert(name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("kernel ", kernel.name(), ": ", what, " '", name, "' is listed twice"));
    }
    const int t = graph.FindTensor(name);
    if (std::find(expected.begin(), expected.end(), t) == expected.end() || t < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("kernel ", kernel.name(), ": extra ", what, " '", name, "' (",
                       std::string_view(what) == "input"
                           ? "its ops do not read it from memory"
                           : "it is neither a graph output nor read by another kernel",
                       ")"));
    }
  }
  for (int t : expected) {
    const std::string& name = graph.tensor(t).name;
    if (!seen.contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat("kernel ", kernel.name(), ": missing ", what,
                                                     " '", name, "' (", why(t), ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidatePlanAgainst(const Graph& graph, const Plan& plan) {
  const int num_ops = static_cast<int>(graph.ops().size());
  if (plan.kernels_size() == 0) return absl::InvalidArgumentError("plan has no kernels");

  // Pass 1: names, kinds, and which kernel holds each op.
  std::vector<int> kernel_of_op(num_ops, -1);
  std::vector<std::vector<int>> kernel_ops(plan.kernels_size());
  std::set<std::string> names;
  for (int k = 0; k < plan.kernels_size(); ++k) {
    const KernelPlan& kernel = plan.kernels(k);
    if (kernel.name().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("kernels[", k, "] has no name"));
    }
    if (!names.insert(kernel.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("kernel name '", kernel.name(), "' is used twice"));
    }
    if (kernel.kind() != yirage::v1::KERNEL_ROW && kernel.kind() != yirage::v1::KERNEL_GENERIC &&
        kernel.kind() != yirage::v1::KERNEL_LIBRARY) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kernel ", kernel.name(), ": kind must be KERNEL_ROW, KERNEL_GENERIC or KERNEL_LIBRARY"));
    }
    if (kernel.ops_size() == 0) {
      return absl::InvalidArgumentError(absl::StrCat("kernel ", kernel.name(), " has no ops"));
    }
    for (const std::string& name : kernel.ops()) {
      const int op = graph.FindOp(name);
      if (op < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("kernel ", kernel.name(), ": unknown op '", name, "'"));
      }
      if (kernel_of_op[op] >= 0) {
        return absl::InvalidArgumentError(absl::StrCat("op '", name, "' appears twice: in kernel ",
                                                       plan.kernels(kernel_of_op[op]).name(),
                                                       " and in kernel ", kernel.name()));
      }
      if (!kernel_ops[k].empty() && op < kernel_ops[k].back()) {
        return absl::InvalidArgumentError(
            absl::StrCat("kernel ", kernel.name(), ": ops are not in topological order (op '", name,
                         "' comes after op '", graph.op(kernel_ops[k].back()).name, "')"));
      }
      kernel_of_op[op] = k;
      kernel_ops[k].push_back(op);
    }
  }
  for (int op = 0; op < num_ops; ++op) {
    if (kernel_of_op[op] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("op '", graph.op(op).name, "' is in no kernel"));
    }
  }

  // Pass 2: per kernel, execution order, exact tensor lists, kind, schedule.
  for (int k = 0; k < plan.kernels_size(); ++k) {
    const KernelPlan& kernel = plan.kernels(k);
    const std::vector<int>& ops = kernel_ops[k];
    for (int op : ops) {
      for (int t : graph.op(op).inputs) {
        const int producer = graph.tensor(t).producer;
        if (producer >= 0 && kernel_of_op[producer] > k) {
          return absl::InvalidArgumentError(absl::StrCat(
              "kernel ", kernel.name(), ": op '", graph.op(op).name, "' reads '",
              graph.tensor(t).name, "' before kernel ", plan.kernels(kernel_of_op[producer]).name(),
              " produces it (kernels are out of order)"));
        }
      }
    }
    std::vector<int> inputs, outputs;
    KernelTensors(
        graph, ops, [&](int op) { return kernel_of_op[op] == k; }, &inputs, &outputs);
    auto why_input = [&](int t) {
      for (int op : ops) {
        const std::vector<int>& in = graph.op(op).inputs;
        if (std::find(in.begin(), in.end(), t) != in.end()) {
          return absl::StrCat("read by op '", graph.op(op).name, "'");
        }
      }
      return std::string("read by the kernel");
    };
    auto why_output = [&](int t) {
      for (int consumer : graph.tensor(t).consumers) {
        if (kernel_of_op[consumer] != k) {
          return absl::StrCat("read by op '", graph.op(consumer).name, "' in kernel ",
                              plan.kernels(kernel_of_op[consumer]).name());
        }
      }
      return std::string("a graph output");
    };
    if (absl::Status s =
            CheckTensorList(graph, kernel, "input", kernel.inputs(), inputs, why_input);
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            CheckTensorList(graph, kernel, "output", kernel.outputs(), outputs, why_output);
        !s.ok()) {
      return s;
    }
    if (kernel.kind() == yirage::v1::KERNEL_GENERIC) {
      if (ops.size() != 1) {
        if (absl::StatusOr<GenericChain> chain = AnalyzeGenericChain(graph, ops); !chain.ok()) {
          std::vector<std::string> op_names(kernel.ops().begin(), kernel.ops().end());
          return absl::InvalidArgumentError(
              absl::StrCat("kernel ", kernel.name(), ": KERNEL_GENERIC holds ", ops.size(),
                           " ops (", absl::StrJoin(op_names, ", "),
                           "); it must hold one, or a chain of elementwise ops before an axis op: ",
                           chain.status().message()));
        }
      }
    } else if (kernel.kind() == yirage::v1::KERNEL_LIBRARY) {
      if (absl::StatusOr<LibraryMatmul> lm = MatchLibraryMatmul(graph, ops); !lm.ok()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "kernel ", kernel.name(), ": not a library matmul: ", lm.status().message()));
      }
      if (const yirage::v1::FamilyPattern family = ScheduleFamily(kernel.schedule());
          family != yirage::v1::FAMILY_PATTERN_UNSPECIFIED) {
        return absl::InvalidArgumentError(
            absl::StrCat("kernel ", kernel.name(),
                         ": a KERNEL_LIBRARY kernel takes schedule.library, not schedule.",
                         PatternName(family)));
      }
      if (kernel.schedule().library().algorithm() < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "kernel ", kernel.name(), ": schedule.library.algorithm must be >= 0, got ",
            kernel.schedule().library().algorithm()));
      }
    } else if (absl::StatusOr<RowGroupInfo> row = AnalyzeRowGroup(graph, ops); !row.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "kernel ", kernel.name(), ": not a legal KERNEL_ROW group: ", row.status().message()));
    } else if (absl::Status family =
                   CheckFamilySchedule(graph, ops, kernel.name(), kernel.schedule());
               !family.ok()) {
      return family;
    }
    if (absl::Status s = CheckSchedule(kernel); !s.ok()) return s;
  }
  return absl::OkStatus();
}

double EstimatePlanCostAgainst(const Graph& graph, const Plan& plan, const SearchOptions& options) {
  double cost = 0;
  for (const KernelPlan& kernel : plan.kernels()) {
    std::vector<int> ops;
    bool analyzable = kernel.kind() == yirage::v1::KERNEL_ROW && kernel.ops_size() > 0;
    for (const std::string& name : kernel.ops()) {
      const int op = graph.FindOp(name);
      if (op < 0 || (!ops.empty() && op <= ops.back())) {
        analyzable = false;  // AnalyzeRowGroup requires known ops in order
        break;
      }
      ops.push_back(op);
    }
    absl::StatusOr<RowGroupInfo> row = absl::UnknownError("not a row kernel");
    if (analyzable) row = AnalyzeRowGroup(graph, ops);
    cost += EstimateKernelCost(graph, kernel, row.ok() ? &*row : nullptr, options);
  }
  return cost;
}

// The plans of one graph (no rewrites), baseline first.
absl::StatusOr<std::vector<Plan>> GeneratePlansForGraph(const Graph& graph,
                                                        const SearchOptions& options) {
  if (graph.ops().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", graph.name(), "' has no ops"));
  }
  PartitionEnumerator enumerator(graph, options.kernels.generic_prologue());
  const std::vector<Partition> partitions = enumerator.Enumerate();  // [0] is the baseline
  const std::vector<ScheduleVariant> variants = MakeVariants(graph, enumerator, options);
  KernelCache cache;

  // The baseline: singletons, default schedule.
  const ScheduleVariant baseline_variant{false, kBaselineBlockRows, kDefaultTileN, 1};
  std::vector<Schedule> baseline_schedules;
  std::vector<int> baseline_signature;
  for (const KernelGroup& group : partitions[0]) {
    baseline_schedules.push_back(
        GroupSchedule(graph, enumerator, group, baseline_variant, options));
    baseline_signature.push_back(
        CachedKernelId(graph, enumerator, options, group, baseline_schedules.back(), &cache));
  }

  // Kernel ids of every (partition, group, variant), and every combination's
  // cost: plan costs are sums of kernel costs.
  std::vector<std::vector<std::vector<int>>> ids(partitions.size());
  std::map<std::pair<int, int>, std::vector<int>> range_ids;
  std::vector<Combo> combos;
  combos.reserve(partitions.size() * variants.size());
  for (size_t p = 0; p < partitions.size(); ++p) {
    for (const KernelGroup& group : partitions[p]) {
      auto [it, inserted] = range_ids.try_emplace({group.begin, group.end});
      if (inserted) {
        for (const ScheduleVariant& v : variants) {
          it->second.push_back(CachedKernelId(graph, enumerator, options, group,
                                              GroupSchedule(graph, enumerator, group, v, options),
                                              &cache));
        }
      }
      ids[p].push_back(it->second);
    }
    for (size_t v = 0; v < variants.size(); ++v) {
      double cost = 0;
      for (const std::vector<int>& group_ids : ids[p]) cost += cache.costs[group_ids[v]];
      combos.push_back({cost, static_cast<int>(p), static_cast<int>(v)});
    }
  }
  std::sort(combos.begin(), combos.end(), [](const Combo& a, const Combo& b) {
    return std::tie(a.cost, a.partition, a.variant) < std::tie(b.cost, b.partition, b.variant);
  });

  // Selection within the bound: every knob combination of the cheapest
  // partition, then every partition at its cheapest schedule, then the rest
  // by cost. Plans with identical kernels count once.
  std::set<std::vector<int>> seen = {baseline_signature};
  std::vector<Combo> selected;
  auto try_add = [&](const Combo& c) {
    if (static_cast<int>(selected.size()) + 1 >= kMaxGeneratedPlans) return false;
    std::vector<int> signature;
    for (const std::vector<int>& group_ids : ids[c.partition]) {
      signature.push_back(group_ids[c.variant]);
    }
    if (!seen.insert(std::move(signature)).second) return false;
    selected.push_back(c);
    return true;
  };
  if (!combos.empty()) {
    const int best = combos.front().partition;
    for (const Combo& c : combos) {
      if (c.partition == best) try_add(c);
    }
  }
  std::vector<bool> covered(partitions.size(), false);
  for (const Combo& c : combos) {
    if (!covered[c.partition] && try_add(c)) covered[c.partition] = true;
  }
  for (const Combo& c : combos) try_add(c);

  // Build the plans, cost them, order them.
  std::vector<std::pair<Plan, Combo>> ranked;
  for (const Combo& c : selected) {
    std::vector<Schedule> schedules;
    for (const KernelGroup& group : partitions[c.partition]) {
      schedules.push_back(GroupSchedule(graph, enumerator, group, variants[c.variant], options));
    }
    Plan plan = MakePlan(graph, partitions[c.partition], schedules);
    plan.set_description(absl::StrCat(PartitionToString(graph, partitions[c.partition]), " ",
                                      VariantToString(graph, variants[c.variant], plan, options)));
    plan.set_estimated_cost(EstimatePlanCostAgainst(graph, plan, options));
    ranked.emplace_back(std::move(plan), c);
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return std::make_tuple(a.first.estimated_cost(), a.second.partition, a.second.variant) <
           std::make_tuple(b.first.estimated_cost(), b.second.partition, b.second.variant);
  });

  std::vector<Plan> plans;
  Plan generated = MakePlan(graph, partitions[0], baseline_schedules);
  generated.set_description(absl::StrCat(PartitionToString(graph, partitions[0]), " baseline"));
  generated.set_estimated_cost(EstimatePlanCostAgainst(graph, generated, options));
  std::optional<Plan> library_baseline;
  if (options.kernels.has_library()) {
    library_baseline = LibraryPlan(graph, enumerator, partitions[0], baseline_variant, 0, options);
  }
  if (library_baseline.has_value()) {
    // The baseline is what a user has (matmuls through the library, one
    // kernel per op); the generated one-kernel-per-op plan stays a candidate.
    library_baseline->set_baseline(true);
    library_baseline->set_description(
        absl::StrCat(PartitionToString(graph, partitions[0]), " baseline (library matmuls)"));
    library_baseline->set_estimated_cost(
        EstimatePlanCostAgainst(graph, *library_baseline, options));
    plans.push_back(*std::move(library_baseline));
    // Library plans of every other partition, cheapest first; the cheapest
    // (the singletons' where none is cheaper) also with the library's next
    // algorithms, right after it.
    std::vector<std::pair<Plan, int>> library;  // plan, partition
    for (size_t p = 1; p < partitions.size(); ++p) {
      std::optional<Plan> plan =
          LibraryPlan(graph, enumerator, partitions[p], variants.front(), 0, options);
      if (!plan.has_value()) continue;
      plan->set_estimated_cost(EstimatePlanCostAgainst(graph, *plan, options));
      library.emplace_back(*std::move(plan), static_cast<int>(p));
    }
    std::stable_sort(library.begin(), library.end(), [](const auto& a, const auto& b) {
      return a.first.estimated_cost() < b.first.estimated_cost();
    });
    const bool fused_best =
        !library.empty() && library.front().first.estimated_cost() < plans.front().estimated_cost();
    const int best = fused_best ? library.front().second : 0;
    const size_t after = fused_best ? 1 : 0;
    // Another algorithm changes only the library's own kernels; where the
    // plan it would vary costs about its launches (matmuls of a few KB, for
    // which cuBLASLt's heuristic also offers fewer algorithms than asked),
    // timing more of them would only spend the budget.
    const Plan& varied = fused_best ? library.front().first : plans.front();
    const double launches =
        RooflineOf(options).launch_seconds * static_cast<double>(varied.kernels_size());
    const int algorithms = varied.estimated_cost() > kMinAlgorithmLaunches * launches
                               ? options.kernels.library().algorithms()
                               : 1;
    for (int algo = algorithms - 1; algo >= 1; --algo) {
      std::optional<Plan> plan =
          LibraryPlan(graph, enumerator, partitions[best],
                      best == 0 ? baseline_variant : variants.front(), algo, options);
      plan->set_estimated_cost(EstimatePlanCostAgainst(graph, *plan, options));
      library.insert(library.begin() + after, {*std::move(plan), best});
    }
    // The gathered plan, unless a partition already gave the same kernels.
    if (std::optional<Plan> gathered = GatheredLibraryPlan(graph, options); gathered.has_value()) {
      gathered->set_estimated_cost(EstimatePlanCostAgainst(graph, *gathered, options));
      bool seen_before = false;
      for (const auto& [plan, partition] : library) {
        seen_before = seen_before || SameKernels(plan, *gathered);
      }
      if (!seen_before) {
        library.insert(library.begin() + (library.empty() ? 0 : 1), {*std::move(gathered), -1});
      }
    }
    for (auto& [plan, partition] : library) plans.push_back(std::move(plan));
    plans.push_back(std::move(generated));
  } else {
    generated.set_baseline(true);
    plans.push_back(std::move(generated));
  }
  for (auto& [plan, combo] : ranked) {
    if (options.max_candidates > 0 && static_cast<int>(plans.size()) >= options.max_candidates) {
      break;
    }
    plans.push_back(std::move(plan));
  }
  for (const Plan& plan : plans) {
    if (absl::Status s = ValidatePlanAgainst(graph, plan); !s.ok()) {
      return absl::InternalError(
          absl::StrCat("generated plan '", plan.description(), "' is invalid: ", s.message()));
    }
  }
  return plans;
}

// (job graph hash, rewritten graph hash) pairs whose fingerprints matched in
// this process.
std::mutex verified_mu;
std::set<std::pair<Hash128, Hash128>>& VerifiedPairs() {
  static auto* pairs = new std::set<std::pair<Hash128, Hash128>>();
  return *pairs;
}
void RecordVerified(const Hash128& job, const Hash128& rewritten) {
  // A long-running server records the pairs of every job it searches:
  // bounded, the memory stays bounded too (a pair forgotten is only
  // fingerprinted again).
  constexpr size_t kMaxVerifiedPairs = 1 << 16;
  std::lock_guard<std::mutex> lock(verified_mu);
  if (VerifiedPairs().size() >= kMaxVerifiedPairs) VerifiedPairs().clear();
  VerifiedPairs().insert({job, rewritten});
}
bool WasVerified(const Hash128& job, const Hash128& rewritten) {
  std::lock_guard<std::mutex> lock(verified_mu);
  return VerifiedPairs().contains({job, rewritten});
}

}  // namespace

absl::Status ValidatePlan(const Graph& graph, const Plan& plan) {
  if (!plan.has_graph()) return ValidatePlanAgainst(graph, plan);
  absl::StatusOr<Graph> own = Graph::FromProto(plan.graph());
  if (!own.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan.graph is invalid: ", own.status().message()));
  }
  if (absl::Status s = CheckSameSignature(graph, *own); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("plan.graph does not keep the job graph's inputs and outputs: ", s.message()));
  }
  if (!plan.fingerprint_verified()) {
    return absl::InvalidArgumentError(
        "plan.graph is set but fingerprint_verified is false: rewritten graphs must pass the "
        "fingerprint check before dispatch");
  }
  const Hash128 job_hash = CanonicalGraphHash(graph);
  const Hash128 own_hash = CanonicalGraphHash(*own);
  if (job_hash != own_hash && !WasVerified(job_hash, own_hash)) {
    FingerprintOptions fo;
    // The plan names its trials; a plan from elsewhere (a worker decodes
    // what the server sends) gets at most kMaxPlanFingerprintTrials, so that
    // its check stays as cheap as the search's own (plan_fuzz found 8,654).
    fo.trials = std::clamp(plan.fingerprint_trials(), 1, kMaxPlanFingerprintTrials);
    const FingerprintResult r = CheckFingerprintEquivalent(graph, *own, fo);
    if (!r.equivalent) {
      return absl::InvalidArgumentError(
          absl::StrCat("plan.graph is not fingerprint-equivalent to the job graph: ", r.message));
    }
    RecordVerified(job_hash, own_hash);
  }
  if (absl::Status s = ValidatePlanAgainst(*own, plan); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("against plan.graph: ", s.message()));
  }
  return absl::OkStatus();
}

double EstimatePlanCost(const Graph& graph, const Plan& plan, const SearchOptions& options) {
  if (!plan.has_graph()) return EstimatePlanCostAgainst(graph, plan, options);
  absl::StatusOr<Graph> own = Graph::FromProto(plan.graph());
  if (!own.ok()) return EstimatePlanCostAgainst(graph, plan, options);  // meaningless, harmless
  return EstimatePlanCostAgainst(*own, plan, options);
}

absl::StatusOr<std::vector<Plan>> GenerateCandidates(const Graph& graph,
                                                     const SearchOptions& options) {
  return GenerateCandidatesWithStats(graph, options, nullptr);
}

absl::StatusOr<std::vector<Plan>> GenerateCandidatesWithStats(const Graph& graph,
                                                              const SearchOptions& options,
                                                              SearchStats* stats) {
  const auto start = std::chrono::steady_clock::now();
  SearchStats local;
  SearchStats& st = stats != nullptr ? *stats : local;
  st = SearchStats{};
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  if (graph.ops().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("graph '", graph.name(), "' has no ops"));
  }
  const int threads = std::max(1, options.search_threads > 0
                                      ? options.search_threads
                                      : static_cast<int>(std::thread::hardware_concurrency()));

  // 1. Rewritten graphs, fingerprint-verified.
  std::vector<RewrittenGraph> rewritten;
  if (options.enable_rewrites) {
    RewriteOptions ro;
    ro.max_graphs = options.max_rewrite_graphs;
    ro.time_budget_seconds = options.rewrite_time_budget_seconds;
    ro.threads = threads;
    ro.fingerprint.trials = options.fingerprint_trials;
    RewriteStats rs;
    absl::StatusOr<std::vector<RewrittenGraph>> found = ExploreRewrites(graph, ro, &rs);
    if (!found.ok()) return found.status();
    rewritten = *std::move(found);
    st.graphs_explored = rs.graphs_explored;
    st.rewrites_generated = rs.rewrites_generated;
    st.duplicates = rs.duplicates;
    st.rewrites_verified = rs.rewrites_verified;
    st.rewrites_rejected = rs.rewrites_rejected;
    st.fingerprint_checks = rs.fingerprint_checks;
    st.budget_exhausted = rs.budget_exhausted;
    st.rewrite_seconds = rs.seconds;
    st.rewrites_skipped = rs.skipped;
    st.fingerprint_shape_reduction = rs.shape_reduction;
    const Hash128 job_hash = CanonicalGraphHash(graph);
    for (const RewrittenGraph& r : rewritten) RecordVerified(job_hash, r.hash);
  }

  // 2. Plans of every graph, in parallel.
  const int num_graphs = 1 + static_cast<int>(rewritten.size());
  std::vector<absl::StatusOr<std::vector<Plan>>> per_graph(num_graphs,
                                                           absl::UnknownError("not run"));
  SearchOptions inner = options;
  inner.max_candidates = 0;
  ParallelFor(num_graphs, threads, [&](int64_t i) {
    const Graph& g = i == 0 ? graph : *rewritten[i - 1].graph;
    per_graph[i] = GeneratePlansForGraph(g, inner);
  });
  if (!per_graph[0].ok()) return per_graph[0].status();

  // 3. Merge: baseline, then every other plan by cost (ties: the original
  // graph's first, in their own order).
  // The original graph's first library plans come right after the baseline
  // whatever their estimate, so a job always times the library's best forms.
  std::vector<Plan> front, rest;
  for (int i = 0; i < num_graphs; ++i) {
    if (!per_graph[i].ok()) continue;  // a rewritten graph with no plans: skip it
    std::vector<Plan>& plans = *per_graph[i];
    if (i == 0) {
      for (size_t k = 1; k < plans.size(); ++k) {
        const bool first =
            static_cast<int>(front.size()) < kLibraryPlansFirst && HasLibraryKernel(plans[k]);
        (first ? front : rest).push_back(std::move(plans[k]));
      }
      continue;
    }
    const RewrittenGraph& r = rewritten[i - 1];
    std::vector<Plan> own;
    for (Plan& p : plans) {
      p.set_baseline(false);
      own.push_back(std::move(p));
    }
    std::stable_sort(own.begin(), own.end(), [](const Plan& a, const Plan& b) {
      return a.estimated_cost() < b.estimated_cost();
    });
    if (static_cast<int>(own.size()) > options.max_plans_per_rewrite) {
      own.resize(std::max(1, options.max_plans_per_rewrite));
    }
    const std::string tag = absl::StrCat("rw:", absl::StrJoin(r.rewrites, "+"), " ");
    for (size_t k = 0; k < own.size(); ++k) {
      Plan& p = own[k];
      *p.mutable_graph() = r.graph->proto();
      p.mutable_graph()->set_name(
          absl::StrCat(graph.name(), "/", HashToString(r.hash).substr(0, 8)));
      for (const std::string& name : r.rewrites) p.add_rewrites(name);
      p.set_fingerprint_verified(true);
      p.set_fingerprint_trials(r.fingerprint.trials);
      p.set_fingerprint_false_pass_bound(r.fingerprint.false_pass_bound);
      p.set_description(tag + p.description());
      rest.push_back(std::move(p));
    }
  }
  auto by_cost = [](const Plan& a, const Plan& b) {
    return a.estimated_cost() < b.estimated_cost();
  };
  std::stable_sort(rest.begin(), rest.end(), by_cost);
  std::vector<Plan> ordered;
  ordered.reserve(front.size() + rest.size());
  for (Plan& p : front) ordered.push_back(std::move(p));
  for (Plan& p : rest) ordered.push_back(std::move(p));
  std::vector<Plan> plans;
  plans.push_back(std::move((*per_graph[0])[0]));
  const int limit = options.max_candidates > 0 ? options.max_candidates : kMaxGeneratedPlans;
  // Where the budget cuts the order, the hedge (HedgeIndex) takes its last place.
  const int hedge = HedgeIndex(ordered, limit - 1);
  for (int k = 0; k < static_cast<int>(ordered.size()); ++k) {
    if (static_cast<int>(plans.size()) >= limit - (hedge >= 0 ? 1 : 0)) break;
    plans.push_back(std::move(ordered[k]));
  }
  if (hedge >= 0) {
    st.hedged_plan = ordered[hedge].description();
    plans.push_back(std::move(ordered[hedge]));
  }
  for (const Plan& plan : plans) {
    if (!plan.has_graph()) continue;  // checked by GeneratePlansForGraph
    if (absl::Status s = ValidatePlan(graph, plan); !s.ok()) {
      return absl::InternalError(
          absl::StrCat("generated plan '", plan.description(), "' is invalid: ", s.message()));
    }
    ++st.rewritten_plans;
  }
  st.plans = static_cast<int>(plans.size());
  st.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return plans;
}

}  // namespace yirage::core
