// Test helpers for the CUDA backend: load the built backend through the C ABI,
// compile plans, run them and compare with the float64 reference. Graph and
// plan builders are shared with the CPU backend tests (cpu_test_util.h).
#ifndef YIRAGE_BACKENDS_CUDA_CUDA_TEST_UTIL_H_
#define YIRAGE_BACKENDS_CUDA_CUDA_TEST_UTIL_H_

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend_api.h"
#include "backends/cpu/cpu_test_util.h"
#include "core/candidate_generator.h"
#include "core/graph.h"
#include "core/graph_json.h"
#include "core/kernel_family.h"
#include "core/tensor.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "yirage/v1/backend.pb.h"

namespace yirage::backends::cuda::testing {

using cpu::testing::AllGeneric;
using cpu::testing::AllRowSingles;
using cpu::testing::B;
using cpu::testing::Buffers;
using cpu::testing::Cols;
using cpu::testing::DescribeThroughAbi;
using cpu::testing::F;
using cpu::testing::Generic;
using cpu::testing::GenericOps;
using cpu::testing::GraphBuilder;
using cpu::testing::I;
using cpu::testing::KernelSpec;
using cpu::testing::LibraryCandidates;
using cpu::testing::LibraryTestGraph;
using cpu::testing::LibraryTestGraphs;
using cpu::testing::MakeBuffers;
using cpu::testing::MakePlan;
using cpu::testing::OneRowGroup;
using cpu::testing::ParsedLibraryTestGraphs;
using cpu::testing::Row;
using cpu::testing::Rows;
using cpu::testing::S;

// $YIRAGE_CUDA_BACKEND_LIB (a bundle shipped to a GPU host), else the build's.
inline std::string BackendPath() {
  const char* env = std::getenv("YIRAGE_CUDA_BACKEND_LIB");
  if (env != nullptr && env[0] != '\0') return env;
  return std::string(YIRAGE_BIN_DIR) + "/libyirage_backend_cuda.so";
}

// $YIRAGE_SOURCE_DIR (a checkout on a GPU host), else the build's source tree.
inline std::string SourceDir() {
  const char* env = std::getenv("YIRAGE_SOURCE_DIR");
  if (env != nullptr && env[0] != '\0') return env;
  return YIRAGE_SOURCE_DIR;
}

inline void* BackendHandle() {
  static void* handle = dlopen(BackendPath().c_str(), RTLD_NOW | RTLD_LOCAL);
  return handle;
}

inline const YirageBackendV1* Backend() {
  static const YirageBackendV1* backend = []() -> const YirageBackendV1* {
    void* h = BackendHandle();
    if (h == nullptr) {
      ADD_FAILURE() << "dlopen " << BackendPath() << ": " << dlerror();
      return nullptr;
    }
    auto get = reinterpret_cast<YirageBackendGetV1Fn>(dlsym(h, YIRAGE_BACKEND_ENTRY_POINT));
    return get != nullptr ? get() : nullptr;
  }();
  return backend;
}

inline void* BackendSymbol(const char* name) {
  void* h = BackendHandle();
  return h != nullptr ? dlsym(h, name) : nullptr;
}

// probe(): the JSON and whether a device is usable.
struct ProbeResult {
  int rc = YIRAGE_ERROR;
  nlohmann::json json;
};
inline ProbeResult Probe() {
  ProbeResult r;
  char* out = nullptr;
  r.rc = Backend()->probe(&out);
  if (out != nullptr) {
    r.json = nlohmann::json::parse(out, nullptr, false);
    Backend()->free_buffer(out);
  }
  return r;
}
inline bool HasGpu() {
  static const bool has = Probe().rc == YIRAGE_OK;
  return has;
}
// What plans compile for: the device's SM version and count, or (no GPU) the
// target CompileThroughAbi names, an H200 (sm_90, 132 SMs).
struct CompileTarget {
  int sm = 90;
  int sm_count = 132;
};
inline CompileTarget TargetOfCompiles() {
  CompileTarget t;
  if (!HasGpu()) return t;
  const nlohmann::json j = Probe().json;
  const std::string arch = j.value("arch", "sm_90");  // "sm_90a"
  if (arch.size() >= 5 && arch.rfind("sm_", 0) == 0) t.sm = std::atoi(arch.c_str() + 3);
  t.sm_count = j.value("sm_count", t.sm_count);
  return t;
}
#define YR_REQUIRE_GPU()                                                                   \
  do {                                                                                     \
    if (!::yirage::backends::cuda::testing::HasGpu()) {                                    \
      GTEST_SKIP() << "NEEDS A GPU: the CUDA backend's probe() found no usable device ("   \
                   << ::yirage::backends::cuda::testing::Probe().json.value("reason", "?") \
                   << "); run bench/gpu_check.sh on a GPU host";                           \
    }                                                                                      \
  } while (0)

// Hand-made plans give a kernel family's knobs the way a row kernel's are
// given: WithGpu's split_k, warps and stages, Rows(n)'s block_rows
// (attention's query rows per block), WithForm (the streamed matmul's
// StreamedMatmulSchedule.Form or attention's AttentionSchedule.Merge, by
// number) and WithWarpRows (attention's). MakePlans then moves them into the
// typed knobs of the family that takes the kernel's ops (TypeFamilyKnobs),
// as the search does; a kernel of no family keeps the row knobs only.
inline yirage::v1::Schedule WithGpu(yirage::v1::Schedule s, int split_k, int warps = 0,
                                    int stages = 0) {
  s.set_split_k(split_k);
  s.set_warps(warps);
  s.set_stages(stages);
  return s;
}

// `s` with a family's form (carried in the typed knobs until MakePlans).
inline yirage::v1::Schedule WithForm(yirage::v1::Schedule s, int form) {
  if (s.has_attention()) {
    s.mutable_attention()->set_merge(static_cast<yirage::v1::AttentionSchedule::Merge>(form));
  } else {
    s.mutable_streamed_matmul()->set_form(
        static_cast<yirage::v1::StreamedMatmulSchedule::Form>(form));
  }
  return s;
}

// `s` with fused attention's query rows per warp set.
inline yirage::v1::Schedule WithWarpRows(yirage::v1::Schedule s, int warp_rows) {
  const int form = s.streamed_matmul().form();
  s.mutable_attention()->set_warp_rows(warp_rows);
  if (form != 0) {
    s.mutable_attention()->set_merge(static_cast<yirage::v1::AttentionSchedule::Merge>(form));
  }
  return s;
}

// `s` as fused attention's prefill form: `rows` query rows a block (64, 128
// or 192), key tiles of `key_tile`, `stages`, S issued behind O += P V
// (`overlap`).
inline yirage::v1::Schedule WithPrefill(yirage::v1::Schedule s, int rows, int key_tile, int stages,
                                        bool overlap) {
  s.set_block_rows(rows);
  s.set_stages(stages);
  yirage::v1::AttentionSchedule* a = s.mutable_attention();
  a->set_prefill(true);
  a->set_key_tile(key_tile);
  a->set_overlap(overlap);
  return s;
}

// `s` as fused attention's warp-specialized prefill form: key tiles of
// `key_tile`, `stages`.
inline yirage::v1::Schedule WithPrefillWs(yirage::v1::Schedule s, int key_tile, int stages) {
  s = WithPrefill(std::move(s), 0, key_tile, stages, false);
  s.mutable_attention()->set_warp_specialized(true);
  return s;
}

// `s` with fused attention's K and V tiles by TMA (the decode form; the
// warp-specialized prefill form's Q, K and V tiles).
inline yirage::v1::Schedule WithTma(yirage::v1::Schedule s) {
  const int form = s.streamed_matmul().form();
  s.mutable_attention()->set_tma(true);
  if (form != 0) {
    s.mutable_attention()->set_merge(static_cast<yirage::v1::AttentionSchedule::Merge>(form));
  }
  return s;
}

// `s` with the GEMM family's knobs (cuda_gemm.h).
inline yirage::v1::Schedule WithGemm(yirage::v1::Schedule s, int tile_m, int tile_n, int stages,
                                     bool pingpong, int cluster_m, int cluster_n, int split_k = 0) {
  yirage::v1::GemmSchedule* g = s.mutable_gemm();
  g->set_tile_m(tile_m);
  g->set_tile_n(tile_n);
  g->set_stages(stages);
  g->set_pingpong(pingpong);
  g->set_cluster_m(cluster_m);
  g->set_cluster_n(cluster_n);
  g->set_split_k(split_k);
  return s;
}

// The GEMM family's sm_80 form (gemm_sm80.cuh): tile, stages, K ranges
// (1: none; 0: the planner's choice).
inline yirage::v1::Schedule WithMmaGemm(yirage::v1::Schedule s, int tile_m, int tile_n, int stages,
                                        int split_k = 1) {
  s = WithGemm(std::move(s), tile_m, tile_n, stages, false, 0, 0, split_k);
  s.mutable_gemm()->set_mma_sync(true);
  return s;
}

struct Compiled {
  YirageModule* module = nullptr;
  yirage::v1::CompileResponse response;
  Compiled() = default;
  Compiled(const Compiled&) = delete;
  Compiled& operator=(const Compiled&) = delete;
  ~Compiled() {
    if (module != nullptr) Backend()->release(module);
  }
};

// What compile-only tests (no device) compile for: an H200 (sm_90a, 132
// SMs, 227 KiB of shared memory a block).
inline yirage::v1::CompileTarget H200CompileTarget() {
  yirage::v1::CompileTarget t;
  t.set_compute_capability(90);
  t.set_multiprocessors(132);
  t.set_max_shared_memory_per_block(232448);
  return t;
}

// What the backend runs, through the ABI: for the device, or without one for
// `target`.
inline yirage::v1::BackendKernels DescribeKernels(
    const yirage::v1::CompileTarget& target = H200CompileTarget()) {
  return DescribeThroughAbi(Backend(), &target);
}

// Moves the family knobs of `plan`'s hand-made schedules (see WithGpu) into
// the typed knobs of the family whose pattern and limits take each kernel.
inline void TypeFamilyKnobs(const core::Graph& g, yirage::v1::Plan* plan) {
  static const yirage::v1::BackendKernels kernels = DescribeKernels();
  for (yirage::v1::KernelPlan& k : *plan->mutable_kernels()) {
    if (k.kind() != yirage::v1::KERNEL_ROW) continue;
    yirage::v1::Schedule* s = k.mutable_schedule();
    const int form = s->has_streamed_matmul() ? static_cast<int>(s->streamed_matmul().form())
                                              : static_cast<int>(s->attention().merge());
    const int warp_rows = s->attention().warp_rows();
    const yirage::v1::AttentionSchedule given = s->attention();
    const yirage::v1::GemmSchedule gemm = s->gemm();
    s->clear_family();
    std::vector<int> ops;
    for (const std::string& name : k.ops()) ops.push_back(g.FindOp(name));
    const int f = core::MatchFamily(kernels, g, ops);
    if (f < 0) continue;
    if (kernels.families(f).pattern() == yirage::v1::GEMM) {
      *s->mutable_gemm() = gemm;
    } else if (kernels.families(f).pattern() == yirage::v1::STREAMED_MATMUL) {
      yirage::v1::StreamedMatmulSchedule* m = s->mutable_streamed_matmul();
      m->set_form(static_cast<yirage::v1::StreamedMatmulSchedule::Form>(form));
      m->set_stages(s->stages());
      m->set_warps(s->warps());
      m->set_split_k(s->split_k());
    } else {
      yirage::v1::AttentionSchedule* a = s->mutable_attention();
      a->set_merge(static_cast<yirage::v1::AttentionSchedule::Merge>(form));
      a->set_block_rows(s->block_rows());
      a->set_warp_rows(warp_rows);
      a->set_warps(s->warps());
      a->set_stages(s->stages());
      a->set_split_k(s->split_k());
      a->set_prefill(given.prefill());
      a->set_key_tile(given.key_tile());
      a->set_overlap(given.overlap());
      a->set_warp_specialized(given.warp_specialized());
      a->set_tma(given.tma());
    }
  }
}

// Compiles `plans` through the ABI, for the device, or without one for
// `target` (default: H200CompileTarget()).
inline void CompileThroughAbi(const yirage::v1::Graph& graph,
                              const std::vector<yirage::v1::Plan>& plans, Compiled* out,
                              const yirage::v1::CompileTarget& target = H200CompileTarget()) {
  yirage::v1::CompileRequest req;
  *req.mutable_graph() = graph;
  for (const auto& p : plans) *req.add_plans() = p;
  *req.mutable_target() = target;
  const std::string bytes = req.SerializeAsString();
  void* resp = nullptr;
  size_t resp_len = 0;
  char* error = nullptr;
  const int rc =
      Backend()->compile(bytes.data(), bytes.size(), &out->module, &resp, &resp_len, &error);
  ASSERT_EQ(rc, YIRAGE_OK) << (error != nullptr ? error : "");
  ASSERT_TRUE(out->response.ParseFromArray(resp, static_cast<int>(resp_len)));
  Backend()->free_buffer(resp);
  ASSERT_EQ(out->response.plans_size(), static_cast<int>(plans.size()));
}

inline std::vector<yirage::v1::Plan> MakePlans(const core::Graph& g,
                                               const std::vector<std::vector<KernelSpec>>& specs) {
  std::vector<yirage::v1::Plan> ps;
  for (size_t i = 0; i < specs.size(); ++i) {
    ps.push_back(MakePlan(g, specs[i], "plan " + std::to_string(i)));
    TypeFamilyKnobs(g, &ps.back());
  }
  return ps;
}

// Every plan compiled; the message shows the first error.
inline void ExpectAllCompiled(const Compiled& c) {
  for (int i = 0; i < c.response.plans_size(); ++i) {
    const yirage::v1::CompiledPlan& p = c.response.plans(i);
    EXPECT_TRUE(p.ok()) << "plan " << i << ": " << p.error() << "\n" << p.source();
    if (!p.ok()) return;
  }
}

// Runs plan `index` and compares every output with the float64 reference.
// Returns the comparison.
// `seed` offsets the inputs' seed (a repeated run gets other inputs).
inline core::CompareResult RunAndCompare(const core::Graph& g, Compiled& c, int index,
                                         core::Tolerance tol = {}, int seed = 0) {
  core::CompareResult result;
  const yirage::v1::CompiledPlan& cp = c.response.plans(index);
  if (!cp.ok()) {
    result.message = "did not compile: " + cp.error();
    return result;
  }
  const std::vector<core::HostTensor> inputs = core::MakeRandomInputs(g, 42 + index + 1000 * seed);
  absl::StatusOr<std::vector<core::HostTensor>> ref = core::EvaluateReference(g, inputs);
  if (!ref.ok()) {
    result.message = std::string(ref.status().message());
    return result;
  }
  Buffers b = MakeBuffers(g, inputs);
  char* error = nullptr;
  if (Backend()->run(c.module, index, b.in_ptrs.data(), b.out_ptrs.data(), &error) != YIRAGE_OK) {
    result.message = std::string("run failed: ") + (error != nullptr ? error : "");
    Backend()->free_buffer(error);
    return result;
  }
  std::vector<core::HostTensor> got;
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    const core::TensorInfo& t = g.tensor(g.outputs()[k]);
    got.push_back(core::DecodeTensor(b.out[k].data(), t.shape, t.dtype));
  }
  if (tol.rtol == 0 && tol.atol == 0) tol = core::ResolveTolerance(g, g.proto().tolerance());
  return core::CompareOutputs(g, *ref, got, tol);
}

// Each plan run `runs` times, on other inputs each time (kernels that keep
// state between launches, such as counters, must stay right).
inline void CheckCudaPlans(const yirage::v1::Graph& proto,
                           const std::vector<std::vector<KernelSpec>>& specs,
                           core::Tolerance tol = {}, int runs = 1) {
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
  ASSERT_TRUE(g.ok()) << g.status();
  Compiled c;
  CompileThroughAbi(proto, MakePlans(*g, specs), &c);
  for (int i = 0; i < static_cast<int>(specs.size()); ++i) {
    for (int run = 0; run < runs; ++run) {
      const core::CompareResult r = RunAndCompare(*g, c, i, tol, run);
      EXPECT_TRUE(r.ok) << proto.name() << " plan " << i << " run " << run << ": " << r.message
                        << "\n"
                        << c.response.plans(i).source();
    }
  }
}

// Graph files examples/graphs/<subdir>/*.json (subdir "" for the top level).
inline std::vector<std::string> GraphFilesIn(const std::string& subdir) {
  std::vector<std::string> files;
  const std::string dir = SourceDir() + "/examples/graphs" + (subdir.empty() ? "" : "/" + subdir);
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Example graphs: examples/graphs/*.json and examples/graphs/bench/*.json.
inline std::vector<std::string> ExampleGraphFiles(bool bench) {
  return GraphFilesIn(bench ? "bench" : "");
}

inline absl::StatusOr<yirage::v1::Graph> LoadGraph(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return core::ParseGraphJson(ss.str());
}

}  // namespace yirage::backends::cuda::testing

#endif  // YIRAGE_BACKENDS_CUDA_CUDA_TEST_UTIL_H_
