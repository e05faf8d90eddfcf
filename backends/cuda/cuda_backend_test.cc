// The CUDA backend through its C ABI: probe, compiling every candidate of the
// example graphs (NVRTC only: runs on the CPU-only CI machine), per-plan
// compile errors, and (NEEDS A GPU) fault isolation, timing and the
// benchmark graphs.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "backends/cuda/cuda_test_util.h"
#include "core/builtin_chips.h"
#include "core/chip_search.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace yirage::backends::cuda::testing {
namespace {

constexpr int kMaxCandidates = 40;

TEST(CudaBackendTest, ExportsTheAbi) {
  ASSERT_NE(Backend(), nullptr);
  EXPECT_EQ(Backend()->abi_version, YIRAGE_BACKEND_ABI_VERSION);
  EXPECT_STREQ(Backend()->name, "cuda");
  EXPECT_NE(BackendSymbol("YirageCudaBackendTestInjectCompileError"), nullptr);
  EXPECT_NE(BackendSymbol("YirageCudaBackendTestInjectFault"), nullptr);
}

TEST(CudaBackendTest, ProbeDescribesTheDeviceOrSaysWhyNot) {
  const ProbeResult p = Probe();
  ASSERT_TRUE(p.json.is_object()) << "probe JSON does not parse";
  EXPECT_EQ(p.json.value("backend", ""), "cuda");
  std::printf("[ probe    ] %s\n", p.json.dump().c_str());
  if (p.rc == YIRAGE_NO_DEVICE) {
    EXPECT_FALSE(p.json.value("reason", "").empty());
    return;
  }
  ASSERT_EQ(p.rc, YIRAGE_OK);
  for (const char* key : {"name", "compute_capability", "arch", "sm_count", "memory_bytes",
                          "l2_bytes", "shared_mem_per_block", "shared_mem_per_sm", "clock_khz",
                          "memory_clock_khz", "bus_width_bits", "warp_size",
                          "max_threads_per_block", "driver_version", "nvrtc_version"}) {
    EXPECT_TRUE(p.json.contains(key)) << key;
  }
  EXPECT_GT(p.json.value("sm_count", 0), 0);
  EXPECT_GT(p.json.value("l2_bytes", 0), 0);
  EXPECT_EQ(p.json.value("warp_size", 0), 32);
  const std::string cc = p.json.value("compute_capability", "");
  const std::string arch = p.json.value("arch", "");
  ASSERT_EQ(cc.size(), 3u);
  EXPECT_EQ(arch.substr(0, 5), std::string("sm_") + cc[0] + cc[2]);
}

// A graph file's proto, graph and CUDA candidates (at most
// `max_candidates`), or the first error.
struct GraphCandidates {
  yirage::v1::Graph proto;
  core::Graph graph;
  std::vector<yirage::v1::Plan> plans;
};
absl::StatusOr<GraphCandidates> LoadCandidates(
    const std::string& file, int max_candidates,
    const yirage::v1::CompileTarget& target = H200CompileTarget()) {
  absl::StatusOr<yirage::v1::Graph> proto = LoadGraph(file);
  if (!proto.ok()) return proto.status();
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(*proto);
  if (!g.ok()) return g.status();
  // As the scheduler searches for a CUDA worker on `target`: the H200's
  // registry entry (its figures drive the cost model's order) and what the
  // backend describes for the target.
  core::SearchOptions options;
  options.backend = "cuda";
  if (target.compute_capability() == 90) {
    absl::StatusOr<std::vector<yirage::v1::Chip>> chips = core::BuiltinChips();
    if (!chips.ok()) return chips.status();
    for (const yirage::v1::Chip& chip : *chips) {
      if (chip.chip_id() == "h200") options = core::SearchOptionsForChip(chip, options);
    }
  }
  options.kernels = DescribeKernels(target);
  options.max_candidates = max_candidates;
  absl::StatusOr<std::vector<yirage::v1::Plan>> plans = core::GenerateCandidates(*g, options);
  if (!plans.ok()) return plans.status();
  return GraphCandidates{*std::move(proto), *std::move(g), *std::move(plans)};
}

// $YIRAGE_LIST_PLANS: print every plan's description; $YIRAGE_DUMP_PLAN=i:
// plan i's generated source.
void PrintRequestedPlans(const std::vector<yirage::v1::Plan>& plans, const Compiled& c) {
  if (std::getenv("YIRAGE_LIST_PLANS") != nullptr) {
    for (int i = 0; i < c.response.plans_size(); ++i) {
      std::printf("  #%d %s\n", i, plans[i].description().c_str());
    }
  }
  if (const char* dump = std::getenv("YIRAGE_DUMP_PLAN"); dump != nullptr) {
    const int i = std::atoi(dump);
    if (i >= 0 && i < c.response.plans_size()) {
      std::printf("%s\n", c.response.plans(i).source().c_str());
    }
  }
}

// CPU-only (CI): every candidate the generator gives (up to kMaxCandidates)
// for every example graph and every benchmark graph compiles with NVRTC. One
// test per graph file.
class CandidatesCompileTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CandidatesCompileTest, AllCandidatesCompileWithNvrtc) {
  const std::string& file = GetParam();
  absl::StatusOr<GraphCandidates> loaded = LoadCandidates(file, kMaxCandidates);
  ASSERT_TRUE(loaded.ok()) << file << ": " << loaded.status();
  const yirage::v1::Graph* const proto = &loaded->proto;
  const std::vector<yirage::v1::Plan>* const plans = &loaded->plans;
  ASSERT_FALSE(plans->empty());
  Compiled c;
  CompileThroughAbi(*proto, *plans, &c);
  ExpectAllCompiled(c);
  int ok = 0, attention = 0, streamed = 0;
  for (const auto& p : c.response.plans()) {
    ok += p.ok() ? 1 : 0;
    attention += p.source().find("fused attention") != std::string::npos ? 1 : 0;
    streamed += p.source().find("streamed matmul") != std::string::npos ? 1 : 0;
  }
  std::printf(
      "[ compiled ] %-28s %d/%d candidates in %.1f s, %d with fused attention, %d streamed\n",
      proto->name().c_str(), ok, c.response.plans_size(), c.response.compile_seconds(), attention,
      streamed);
  PrintRequestedPlans(*plans, c);
  // The bench's attention graphs must reach the fused kernel.
  if (proto->name().rfind("gqa_decode", 0) == 0) {
    EXPECT_GT(attention, 0);
  }
  for (const char* prefix : {"gated_mlp_b", "rms_norm_linear_b", "lora_b"}) {
    if (proto->name().rfind(prefix, 0) == 0) {
      EXPECT_GT(streamed, 0);
    }
  }
}

// CPU-only (CI): the suite's graphs (examples/graphs/suite, real sizes) are
// accepted and planned, their first candidates (the library baseline and
// library plans among them) compile, and a graph with a matmul times its
// matmuls through cuBLASLt in the baseline.
class SuiteCompileTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SuiteCompileTest, FirstCandidatesCompileWithNvrtc) {
  constexpr int kSuiteCandidates = 8;
  absl::StatusOr<GraphCandidates> loaded = LoadCandidates(GetParam(), kSuiteCandidates);
  ASSERT_TRUE(loaded.ok()) << GetParam() << ": " << loaded.status();
  ASSERT_FALSE(loaded->plans.empty());
  ASSERT_TRUE(loaded->plans[0].baseline());
  bool has_matmul = false;
  for (const core::OpInfo& op : loaded->graph.ops()) {
    has_matmul = has_matmul || op.type == core::OpType::kMatmul;
  }
  Compiled c;
  CompileThroughAbi(loaded->proto, loaded->plans, &c);
  ExpectAllCompiled(c);
  int library = 0;
  for (const auto& p : c.response.plans()) {
    library += p.source().find("cuBLASLt") != std::string::npos ? 1 : 0;
  }
  if (has_matmul) {
    EXPECT_NE(c.response.plans(0).launch().ShortDebugString().find("library {"), std::string::npos)
        << "the baseline of a graph with matmuls calls the library";
    EXPECT_GT(library, 1) << "library candidates besides the baseline";
  }
  PrintRequestedPlans(loaded->plans, c);
  std::printf("[ compiled ] %-48s %d candidates in %.1f s, %d with library calls\n",
              loaded->proto.name().c_str(), c.response.plans_size(), c.response.compile_seconds(),
              library);
}

// A graph file's test name: its stem, characters GoogleTest refuses as '_'.
std::string GraphFileTestName(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = std::filesystem::path(info.param).stem();
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

// CPU-only (CI): the first candidates of random graphs a job could get
// (bench/random_graphs.py's seed-11 set, written at configure time into
// YIRAGE_RANDOM_GRAPH_DIR, or the environment's folder of that name) compile, so that what a device
// session times first is known to build.
class RandomGraphCompileTest : public ::testing::TestWithParam<std::string> {};

TEST_P(RandomGraphCompileTest, FirstCandidatesCompileWithNvrtc) {
  // YIRAGE_FIRST_CANDIDATES=N compiles N (to read a later candidate's code).
  int first = 12;
  if (const char* n = std::getenv("YIRAGE_FIRST_CANDIDATES"); n != nullptr) {
    first = std::max(1, std::atoi(n));
  }
  absl::StatusOr<GraphCandidates> loaded = LoadCandidates(GetParam(), first);
  ASSERT_TRUE(loaded.ok()) << GetParam() << ": " << loaded.status();
  ASSERT_FALSE(loaded->plans.empty());
  Compiled c;
  CompileThroughAbi(loaded->proto, loaded->plans, &c);
  ExpectAllCompiled(c);
  PrintRequestedPlans(loaded->plans, c);
  std::printf("[ compiled ] %-40s %d candidates in %.1f s\n", loaded->proto.name().c_str(),
              c.response.plans_size(), c.response.compile_seconds());
}

// The environment's YIRAGE_RANDOM_GRAPH_DIR, where set, replaces the
// configured folder (fresh graphs checked without touching the build's).
std::vector<std::string> RandomGraphFiles() {
  std::vector<std::string> files;
  std::string dir;
#ifdef YIRAGE_RANDOM_GRAPH_DIR
  dir = YIRAGE_RANDOM_GRAPH_DIR;
#endif
  if (const char* env = std::getenv("YIRAGE_RANDOM_GRAPH_DIR"); env != nullptr) dir = env;
  if (dir.empty()) return files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(RandomGraphCompileTest);
INSTANTIATE_TEST_SUITE_P(Random, RandomGraphCompileTest, ::testing::ValuesIn(RandomGraphFiles()),
                         GraphFileTestName);

INSTANTIATE_TEST_SUITE_P(Suite, SuiteCompileTest, ::testing::ValuesIn(GraphFilesIn("suite")),
                         GraphFileTestName);

// CPU-only (CI): attention with a head dim of 256 under the family's
// default knobs (the backend's choice) runs the prefill form, the one form
// that holds it, not the generic row kernels.
TEST(CudaBackendTest, DefaultAttentionKnobsTakeThePrefillFormForHeadDim256) {
  absl::StatusOr<GraphCandidates> loaded = LoadCandidates(
      SourceDir() + "/examples/graphs/suite/gemma2_9b_attention_prefill_h16_n1000_d256_bf16.json",
      8);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::vector<yirage::v1::Plan> defaults;
  for (const yirage::v1::Plan& p : loaded->plans) {
    if (p.kernels_size() == 1 && p.kernels(0).schedule().has_attention() &&
        p.kernels(0).schedule().attention().ByteSizeLong() == 0) {
      defaults.push_back(p);
    }
  }
  ASSERT_EQ(defaults.size(), 1u) << "the default-knob attention candidate among the first 8";
  Compiled c;
  CompileThroughAbi(loaded->proto, defaults, &c);
  ExpectAllCompiled(c);
  EXPECT_NE(c.response.plans(0).source().find("fused attention, prefill form"), std::string::npos)
      << c.response.plans(0).source().substr(0, 4000);
}

// Without cuBLASLt the probe says so (and only library plans fail): run in
// a child process, since the library is looked up once per process.
TEST(CudaBackendTest, ProbeSaysWhenCublasLtIsMissing) {
  if (std::getenv("YIRAGE_PROBE_CHILD") != nullptr) {
    const ProbeResult p = Probe();
    std::printf("CHILD_PROBE %s\n", p.json.dump().c_str());
    return;
  }
  const std::string out = ::testing::TempDir() + "/cublaslt_probe.txt";
  const std::string cmd =
      "YIRAGE_PROBE_CHILD=1 YIRAGE_CUBLASLT_LIBRARY=/nonexistent/libcublasLt.so.13 "
      "/proc/" +
      std::to_string(getpid()) +
      "/exe --gtest_filter=CudaBackendTest.ProbeSaysWhenCublasLtIsMissing > " + out + " 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(out);
  std::string line, json;
  while (std::getline(in, line)) {
    if (line.rfind("CHILD_PROBE ", 0) == 0) json = line.substr(12);
  }
  const nlohmann::json j = nlohmann::json::parse(json, nullptr, false);
  ASSERT_TRUE(j.is_object()) << "no probe line in the child's output";
  EXPECT_EQ(j.value("cublaslt_version", "x"), "");
  EXPECT_THAT(j.value("cublaslt_error", ""), ::testing::HasSubstr("cuBLASLt not found"));
  EXPECT_THAT(j.value("cublaslt_error", ""),
              ::testing::HasSubstr("/nonexistent/libcublasLt.so.13"));
  EXPECT_TRUE(Probe().json.contains("cublaslt_version"));
}

std::vector<std::string> AllGraphFiles() {
  std::vector<std::string> files = ExampleGraphFiles(false);
  for (const std::string& f : ExampleGraphFiles(true)) files.push_back(f);
  return files;
}

INSTANTIATE_TEST_SUITE_P(ExampleGraphs, CandidatesCompileTest, ::testing::ValuesIn(AllGraphFiles()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           const bool bench = info.param.find("/bench/") != std::string::npos;
                           return (bench ? "bench_" : "") + GraphFileTestName(info);
                         });

yirage::v1::Graph SmallGraph() {
  GraphBuilder b("small");
  b.Input("x", {4, 64}).Input("w", {64, 32});
  b.Op("m", "matmul", {"x", "w"}).Op("y", "silu", {"m"}).Output("y");
  return b.proto();
}

std::vector<std::vector<KernelSpec>> ThreePlans(const yirage::v1::Graph& g) {
  return {AllGeneric(g), OneRowGroup(g, Rows(2, 16)), AllRowSingles(g, Rows(4, 32))};
}

TEST(CudaBackendTest, InjectedCompileErrorFailsOnlyThatPlan) {
  auto inject =
      reinterpret_cast<void (*)(int32_t)>(BackendSymbol("YirageCudaBackendTestInjectCompileError"));
  ASSERT_NE(inject, nullptr);
  const yirage::v1::Graph proto = SmallGraph();
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
  ASSERT_TRUE(g.ok());
  inject(1);
  Compiled c;
  CompileThroughAbi(proto, MakePlans(*g, ThreePlans(proto)), &c);
  inject(-1);
  EXPECT_TRUE(c.response.plans(0).ok()) << c.response.plans(0).error();
  EXPECT_FALSE(c.response.plans(1).ok());
  EXPECT_NE(c.response.plans(1).error().find("injected by the test hook"), std::string::npos)
      << c.response.plans(1).error();
  EXPECT_TRUE(c.response.plans(2).ok()) << c.response.plans(2).error();
}

TEST(CudaBackendTest, BadPlanIsReportedNotFatal) {
  const yirage::v1::Graph proto = SmallGraph();
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
  ASSERT_TRUE(g.ok());
  std::vector<yirage::v1::Plan> plans = MakePlans(*g, ThreePlans(proto));
  plans[0].mutable_kernels(0)->set_ops(0, "nope");
  Compiled c;
  CompileThroughAbi(proto, plans, &c);
  EXPECT_FALSE(c.response.plans(0).ok());
  EXPECT_NE(c.response.plans(0).error().find("unknown op 'nope'"), std::string::npos)
      << c.response.plans(0).error();
  EXPECT_TRUE(c.response.plans(1).ok()) << c.response.plans(1).error();
}

// CPU-only: plans whose schedules the backend runs alike get one kernel key
// (the flat elementwise kernel takes no block_rows), plans that run other
// code get different keys.
TEST(CudaBackendTest, PlansThatRunTheSameCodeShareAKernelKey) {
  const std::string dir = std::string(YIRAGE_SOURCE_DIR) + "/examples/graphs/suite/";
  absl::StatusOr<GraphCandidates> gelu = LoadCandidates(dir + "kb1_gelu_fp16_4096x16384.json", 8);
  ASSERT_TRUE(gelu.ok()) << gelu.status();
  yirage::v1::Plan b1 = gelu->plans[1], b16 = gelu->plans[1];
  for (int k = 0; k < b16.kernels_size(); ++k) {
    b16.mutable_kernels(k)->mutable_schedule()->set_block_rows(16);
  }
  b16.set_description("the same plan at block_rows 16");
  // Another unroll (items a thread) is other code: 2 against 4.
  for (yirage::v1::Plan* p : {&b1, &b16}) {
    for (int k = 0; k < p->kernels_size(); ++k) {
      p->mutable_kernels(k)->mutable_schedule()->set_unroll(4);
    }
  }
  yirage::v1::Plan u2 = b1;
  for (int k = 0; k < u2.kernels_size(); ++k) {
    u2.mutable_kernels(k)->mutable_schedule()->set_unroll(2);
  }
  Compiled c;
  CompileThroughAbi(gelu->proto, {b1, b16, u2}, &c);
  ASSERT_EQ(c.response.plans_size(), 3);
  ExpectAllCompiled(c);
  EXPECT_FALSE(c.response.plans(0).kernel_key().empty());
  EXPECT_EQ(c.response.plans(0).kernel_key(), c.response.plans(1).kernel_key());
  EXPECT_NE(c.response.plans(0).kernel_key(), c.response.plans(2).kernel_key());
}

// CPU-only: without a device the request names its target; none is an error
// that says what to set, and another target gets code for it (sm_80: no
// thread-block clusters, no wgmma).
TEST(CudaBackendTest, WithoutADeviceTheRequestNamesItsTarget) {
  if (HasGpu()) GTEST_SKIP() << "a device is present: the backend compiles for it";
  const std::string dir = std::string(YIRAGE_SOURCE_DIR) + "/examples/graphs/bench/";
  absl::StatusOr<GraphCandidates> g = LoadCandidates(dir + "gqa_decode_b8.json", 12);
  ASSERT_TRUE(g.ok()) << g.status();
  yirage::v1::CompileRequest req;
  *req.mutable_graph() = g->proto;
  for (const auto& p : g->plans) *req.add_plans() = p;
  const std::string bytes = req.SerializeAsString();
  YirageModule* module = nullptr;
  void* resp = nullptr;
  size_t len = 0;
  char* error = nullptr;
  ASSERT_EQ(Backend()->compile(bytes.data(), bytes.size(), &module, &resp, &len, &error),
            YIRAGE_ERROR);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(error).find("CompileRequest.target"), std::string::npos) << error;
  Backend()->free_buffer(error);
  yirage::v1::CompileTarget bad = H200CompileTarget();
  bad.set_multiprocessors(0);
  *req.mutable_target() = bad;
  const std::string bad_bytes = req.SerializeAsString();
  error = nullptr;
  ASSERT_EQ(Backend()->compile(bad_bytes.data(), bad_bytes.size(), &module, &resp, &len, &error),
            YIRAGE_ERROR);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(error).find("multiprocessors must be at least 1"), std::string::npos)
      << error;
  Backend()->free_buffer(error);
  yirage::v1::CompileTarget ampere = H200CompileTarget();
  ampere.set_compute_capability(80);
  ampere.set_multiprocessors(108);
  ampere.set_max_shared_memory_per_block(166912);
  for (const char* name : {"gqa_decode_b8.json", "gated_mlp_b8.json"}) {
    SCOPED_TRACE(name);
    absl::StatusOr<GraphCandidates> graph = LoadCandidates(dir + name, 12, ampere);
    ASSERT_TRUE(graph.ok()) << graph.status();
    Compiled c;
    CompileThroughAbi(graph->proto, graph->plans, &c, ampere);
    ExpectAllCompiled(c);
    for (const auto& p : c.response.plans()) {
      // Every source carries the wgmma templates (unused code emits nothing);
      // a kernel that takes a warpgroup form says so in its summary line.
      EXPECT_EQ(p.source().find("wgmma.m64n"), std::string::npos);
      EXPECT_EQ(p.source().find("__cluster_dims__"), std::string::npos);
    }
  }
}

TEST(CudaBackendTest, BadRequestIsAnError) {
  const char junk[] = "\xff\xff\xff";
  YirageModule* module = nullptr;
  void* resp = nullptr;
  size_t len = 0;
  char* error = nullptr;
  EXPECT_EQ(Backend()->compile(junk, 3, &module, &resp, &len, &error), YIRAGE_ERROR);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(error).find("not a serialized"), std::string::npos) << error;
  Backend()->free_buffer(error);
}

TEST(CudaBackendTest, RunWithoutDeviceSaysSo) {
  if (HasGpu()) GTEST_SKIP() << "a GPU is present: this checks the compile-only path";
  const yirage::v1::Graph proto = SmallGraph();
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
  ASSERT_TRUE(g.ok());
  Compiled c;
  CompileThroughAbi(proto, MakePlans(*g, ThreePlans(proto)), &c);
  const core::CompareResult r = RunAndCompare(*g, c, 0);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.message.find("no CUDA device"), std::string::npos) << r.message;
}

// Runs plan `index` through the ABI; returns its return code (and *error).
int RunRc(const core::Graph& g, Compiled& c, int index, std::string* error) {
  Buffers b = MakeBuffers(g, core::MakeRandomInputs(g, 42 + index));
  char* err = nullptr;
  const int rc = Backend()->run(c.module, index, b.in_ptrs.data(), b.out_ptrs.data(), &err);
  *error = err != nullptr ? err : "";
  Backend()->free_buffer(err);
  return rc;
}

constexpr char kFaultChildEnv[] = "YIRAGE_CUDA_TEST_FAULT_CHILD";

// NEEDS A GPU; the child half of FaultingKernelFailsOnlyItself (skipped unless
// that test started this process). A faulting plan returns YIRAGE_DEVICE_LOST
// with the driver's error; after it every run of this process says DEVICE_LOST
// too (the sticky error cannot be cleared in-process), without hanging.
TEST(CudaBackendGpuTest, FaultChildProcess) {
  if (std::getenv(kFaultChildEnv) == nullptr) {
    GTEST_SKIP() << "run by FaultingKernelFailsOnlyItself in a child process";
  }
  YR_REQUIRE_GPU();
  auto inject =
      reinterpret_cast<void (*)(int32_t)>(BackendSymbol("YirageCudaBackendTestInjectFault"));
  ASSERT_NE(inject, nullptr);
  const yirage::v1::Graph proto = SmallGraph();
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
  ASSERT_TRUE(g.ok());
  inject(1);
  Compiled c;
  CompileThroughAbi(proto, MakePlans(*g, ThreePlans(proto)), &c);
  inject(-1);
  ExpectAllCompiled(c);
  const core::CompareResult r0 = RunAndCompare(*g, c, 0);
  EXPECT_TRUE(r0.ok) << "plan 0 before the fault: " << r0.message;
  std::string error;
  EXPECT_EQ(RunRc(*g, c, 1, &error), YIRAGE_DEVICE_LOST) << error;
  EXPECT_NE(error.find("CUDA_ERROR_"), std::string::npos) << error;
  EXPECT_EQ(RunRc(*g, c, 0, &error), YIRAGE_DEVICE_LOST) << error;
  EXPECT_NE(error.find("lost"), std::string::npos) << error;
}

// NEEDS A GPU: a faulting kernel's plan returns YIRAGE_DEVICE_LOST (checked in
// a child process, a fresh exec of this binary, so this one keeps its GPU);
// a process that did not fault (this one) runs the module's other plans.
TEST(CudaBackendGpuTest, FaultingKernelFailsOnlyItself) {
  YR_REQUIRE_GPU();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0) << "fork failed";
  if (pid == 0) {
    // exec at once: CUDA state must not be used across fork.
    setenv(kFaultChildEnv, "1", 1);
    const char* argv[] = {"cuda_backend_tests",
                          "--gtest_filter=CudaBackendGpuTest.FaultChildProcess", nullptr};
    execv("/proc/self/exe", const_cast<char* const*>(argv));
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << "the child died (signal " << WTERMSIG(status) << ")";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's checks failed (its output is above)";

  auto inject =
      reinterpret_cast<void (*)(int32_t)>(BackendSymbol("YirageCudaBackendTestInjectFault"));
  ASSERT_NE(inject, nullptr);
  const yirage::v1::Graph proto = SmallGraph();
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
  ASSERT_TRUE(g.ok());
  inject(1);  // the same module, its faulting plan never run here
  Compiled c;
  CompileThroughAbi(proto, MakePlans(*g, ThreePlans(proto)), &c);
  inject(-1);
  for (int i : {0, 2}) {
    const core::CompareResult r = RunAndCompare(*g, c, i);
    EXPECT_TRUE(r.ok) << "plan " << i << " in a process without the fault: " << r.message;
  }
}

YirageTiming TimePlan(const core::Graph& g, Compiled& c, int plan, int runs, std::string* error) {
  const std::vector<core::HostTensor> inputs = core::MakeRandomInputs(g, 7);
  Buffers b = MakeBuffers(g, inputs);
  YirageTimingOptions o{3, runs, 0.0, runs, 0, 0};
  YirageTiming t{};
  char* err = nullptr;
  if (Backend()->time(c.module, plan, b.in_ptrs.data(), b.out_ptrs.data(), &o, &t, &err) !=
      YIRAGE_OK) {
    *error = err != nullptr ? err : "time failed";
    Backend()->free_buffer(err);
  }
  return t;
}

// NEEDS A GPU: YirageTimingOptions.reuse_io. With it, time leaves the
// caller's output buffers alone (nothing copied back), also on a module
// that never ran (its inputs are copied in then); without it, time writes
// the outputs of the inputs it is given, the ones of another call's buffers
// included.
TEST(CudaBackendGpuTest, TimingWithReusedBuffersCopiesNoOutputs) {
  YR_REQUIRE_GPU();
  GraphBuilder gb("scale");
  gb.Input("x", {64, 4096}, yirage::v1::FLOAT16);
  gb.Op("y", "mul", {"x"}, {F("scalar", 2.0)}).Output("y");
  const yirage::v1::Graph proto = gb.proto();
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
  ASSERT_TRUE(g.ok());
  Compiled c;
  CompileThroughAbi(proto, MakePlans(*g, {OneRowGroup(proto, Rows(4))}), &c);
  ExpectAllCompiled(c);
  const std::vector<core::HostTensor> in_a = core::MakeRandomInputs(*g, 7);
  const std::vector<core::HostTensor> in_b = core::MakeRandomInputs(*g, 8);
  Buffers a = MakeBuffers(*g, in_a);
  Buffers b = MakeBuffers(*g, in_b);
  const std::vector<uint8_t> untouched = a.out[0];
  YirageTimingOptions o{1, 3, 0.0, 3, 0, /*reuse_io=*/1};
  YirageTiming t{};
  char* err = nullptr;
  // Never run: the inputs are copied in; the outputs stay as they were.
  ASSERT_EQ(Backend()->time(c.module, 0, a.in_ptrs.data(), a.out_ptrs.data(), &o, &t, &err),
            YIRAGE_OK)
      << (err != nullptr ? err : "");
  EXPECT_EQ(t.runs, 3);
  EXPECT_EQ(a.out[0], untouched);
  // After a run of the same buffers: still nothing copied back.
  ASSERT_EQ(Backend()->run(c.module, 0, a.in_ptrs.data(), b.out_ptrs.data(), &err), YIRAGE_OK);
  ASSERT_EQ(Backend()->time(c.module, 0, a.in_ptrs.data(), a.out_ptrs.data(), &o, &t, &err),
            YIRAGE_OK);
  EXPECT_EQ(a.out[0], untouched);
  // Without reuse_io, other buffers: their inputs in, their outputs out.
  o.reuse_io = 0;
  ASSERT_EQ(Backend()->time(c.module, 0, b.in_ptrs.data(), a.out_ptrs.data(), &o, &t, &err),
            YIRAGE_OK);
  const absl::StatusOr<std::vector<core::HostTensor>> ref = core::EvaluateReference(*g, in_b);
  ASSERT_TRUE(ref.ok());
  const core::CompareResult r =
      core::CompareEncodedOutputs(*g, *ref, {a.out_ptrs[0]}, core::DefaultTolerance(*g));
  EXPECT_TRUE(r.ok) << r.message;
}

// NEEDS A GPU: timing returns the requested runs, min <= median, and a kernel
// that moves 64x the bytes takes longer.
TEST(CudaBackendGpuTest, TimingIsSane) {
  YR_REQUIRE_GPU();
  auto graph = [](int64_t rows) {
    GraphBuilder b("scale");
    b.Input("x", {rows, 4096}, yirage::v1::FLOAT16);
    b.Op("y", "mul", {"x"}, {F("scalar", 2.0)}).Output("y");
    return b.proto();
  };
  double medians[2];
  int idx = 0;
  for (int64_t rows : {16, 1024}) {
    const yirage::v1::Graph proto = graph(rows);
    absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
    ASSERT_TRUE(g.ok());
    Compiled c;
    CompileThroughAbi(proto, MakePlans(*g, {OneRowGroup(proto, Rows(4))}), &c);
    ExpectAllCompiled(c);
    std::string error;
    const YirageTiming t = TimePlan(*g, c, 0, 50, &error);
    ASSERT_TRUE(error.empty()) << error;
    EXPECT_EQ(t.runs, 50);
    EXPECT_GT(t.min_us, 0.0);
    EXPECT_LE(t.min_us, t.median_us);
    EXPECT_LT(t.median_us, 1e5);
    medians[idx++] = t.median_us;
    const core::CompareResult r = RunAndCompare(*g, c, 0);
    EXPECT_TRUE(r.ok) << r.message;
  }
  EXPECT_LT(medians[0], medians[1]) << "16 rows vs 1024 rows";
}

// NEEDS A GPU: library plans (cuBLASLt with every epilogue, batch form and
// dtype; library calls reading and writing the tensors of generated kernels)
// match the reference, and the library baseline times.
TEST(CudaBackendGpuTest, LibraryPlansMatchReference) {
  YR_REQUIRE_GPU();
  const std::vector<LibraryTestGraph> graphs = ParsedLibraryTestGraphs();
  ASSERT_EQ(graphs.size(), LibraryTestGraphs().size());
  for (const LibraryTestGraph& lg : graphs) {
    SCOPED_TRACE(lg.proto.name());
    const core::Graph* const g = &lg.graph;
    const std::vector<yirage::v1::Plan> plans = LibraryCandidates(*g, DescribeKernels(), 24);
    ASSERT_FALSE(plans.empty());
    ASSERT_TRUE(plans[0].baseline());
    Compiled c;
    CompileThroughAbi(lg.proto, plans, &c);
    int library = 0;
    for (int i = 0; i < c.response.plans_size(); ++i) {
      EXPECT_NE(c.response.plans(i).launch().ShortDebugString().find("library {"),
                std::string::npos);
      const core::CompareResult r = RunAndCompare(*g, c, i);
      // The heuristic may offer fewer algorithms than the plan's index: that
      // plan fails, saying so; every other library plan must match.
      if (!r.ok && r.message.find("cuBLASLt offers") != std::string::npos) {
        bool later_algorithm = false;
        for (const auto& k : plans[i].kernels()) {
          later_algorithm |=
              k.kind() == yirage::v1::KERNEL_LIBRARY && k.schedule().library().algorithm() > 0;
        }
        EXPECT_TRUE(later_algorithm) << r.message;
        continue;
      }
      ++library;
      EXPECT_TRUE(r.ok) << "plan " << i << " [" << plans[i].description() << "]: " << r.message
                        << "\n"
                        << c.response.plans(i).source();
    }
    EXPECT_GE(library, 2);
    std::string error;
    const YirageTiming t = TimePlan(*g, c, 0, 20, &error);
    EXPECT_TRUE(error.empty()) << error;
    std::printf("[ library  ] %-22s %d library plans verified; baseline [%s] %.2f us\n",
                lg.proto.name().c_str(), library, plans[0].description().c_str(), t.median_us);
  }
}

// NEEDS A GPU: the X(1024, 8192) @ W^T + bias, ReLU: timed beside
// the library baseline, the best library plan's speedup is near 1 (the old
// generated baseline made it look 100x faster than it is).
TEST(CudaBackendGpuTest, GemmSpeedupIsAgainstTheLibrary) {
  YR_REQUIRE_GPU();
  absl::StatusOr<GraphCandidates> loaded = LoadCandidates(
      SourceDir() + "/examples/graphs/suite/kb2_gemm_bias_relu_fp16_m1024_k8192_n8192.json", 6);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  Compiled c;
  CompileThroughAbi(loaded->proto, loaded->plans, &c);
  ExpectAllCompiled(c);
  std::string error;
  const double baseline = TimePlan(loaded->graph, c, 0, 20, &error).median_us;
  ASSERT_TRUE(error.empty()) << error;
  double best = 1e30;
  for (int i = 1; i < c.response.plans_size(); ++i) {
    const YirageTiming t = TimePlan(loaded->graph, c, i, 20, &error);
    ASSERT_TRUE(error.empty()) << error;
    best = std::min(best, t.median_us);
  }
  std::printf("[ gemm     ] library baseline %.2f us, best candidate %.2f us: %.2fx\n", baseline,
              best, baseline / best);
  EXPECT_LT(baseline / best, 1.5);
  EXPECT_GT(baseline / best, 0.8);
}

// NEEDS A GPU: every candidate of every benchmark graph is verified against
// the reference; the fastest verified one is timed and printed next to the
// PyTorch H200 numbers (../shared/reference/h200-torch-baselines.csv).
TEST(CudaBackendGpuTest, BenchmarkGraphsVerifyAndTime) {
  YR_REQUIRE_GPU();
  // A short GPU session can cap the candidates per graph and pick graphs.
  const char* cap = std::getenv("YIRAGE_BENCH_MAX_CANDIDATES");
  const char* only = std::getenv("YIRAGE_BENCH_GRAPHS");  // substring of the file name
  for (const std::string& file : ExampleGraphFiles(true)) {
    if (only != nullptr && file.find(only) == std::string::npos) continue;
    SCOPED_TRACE(file);
    absl::StatusOr<GraphCandidates> loaded =
        LoadCandidates(file, cap != nullptr ? std::atoi(cap) : kMaxCandidates);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    const yirage::v1::Graph* const proto = &loaded->proto;
    const core::Graph* const g = &loaded->graph;
    const std::vector<yirage::v1::Plan>* const plans = &loaded->plans;
    Compiled c;
    CompileThroughAbi(*proto, *plans, &c);
    double best = 1e30, baseline = 0;
    int best_plan = -1, verified = 0;
    for (int i = 0; i < c.response.plans_size(); ++i) {
      const core::CompareResult r = RunAndCompare(*g, c, i);
      EXPECT_TRUE(r.ok) << proto->name() << " plan " << i << " (" << (*plans)[i].description()
                        << "): " << r.message;
      if (!r.ok) continue;
      ++verified;
      std::string error;
      const YirageTiming t = TimePlan(*g, c, i, 100, &error);
      EXPECT_TRUE(error.empty()) << error;
      if (i == 0) baseline = t.median_us;
      std::printf("PLAN %s #%d %9.2f us  %s\n", proto->name().c_str(), i, t.median_us,
                  (*plans)[i].description().c_str());
      if (error.empty() && t.median_us < best) {
        best = t.median_us;
        best_plan = i;
      }
    }
    int tensor_core_plans = 0;
    for (const auto& p : c.response.plans()) {
      if (p.ok() && p.source().find("tensor cores") != std::string::npos) ++tensor_core_plans;
    }
    const bool best_tc = best_plan >= 0 && c.response.plans(best_plan).source().find(
                                               "tensor cores") != std::string::npos;
    std::printf("[ bench    ] %-24s verified %2d/%2d  baseline %9.2f us  best %9.2f us  (%s)\n",
                proto->name().c_str(), verified, c.response.plans_size(), baseline, best,
                best_plan >= 0 ? (*plans)[best_plan].description().c_str() : "-");
    // One greppable line per graph (bench/gpu_e2e.sh collects them).
    std::printf(
        "BENCH %s best_us=%.2f baseline_us=%.2f best_plan=%d tensor_core=%d "
        "tc_plans=%d/%d plan=\"%s\"\n",
        proto->name().c_str(), best, baseline, best_plan, best_tc ? 1 : 0, tensor_core_plans,
        c.response.plans_size(), best_plan >= 0 ? (*plans)[best_plan].description().c_str() : "-");
    std::fflush(stdout);
  }
}

}  // namespace
}  // namespace yirage::backends::cuda::testing
