// The CPU backend through its C ABI: probe, request errors, failure isolation
// of bad plans, compile timeouts, run errors and timing.
#include <cstdlib>
#include <string>
#include <vector>

#include "backends/cpu/cpu_test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace yirage::backends::cpu::testing {
namespace {

using ::testing::HasSubstr;

yirage::v1::Graph SmallGraph() {
  GraphBuilder b("small");
  b.Input("x", {9, 16}).Input("w", {16, 8});
  b.Op("e", "exp", {"x"});
  b.Op("y", "matmul", {"e", "w"}).Output("y");
  return b.proto();
}

TEST(CpuBackendTest, TableAndProbe) {
  const YirageBackendV1* be = Backend();
  ASSERT_NE(be, nullptr);
  EXPECT_EQ(be->abi_version, YIRAGE_BACKEND_ABI_VERSION);
  EXPECT_STREQ(be->name, "cpu");
  char* json = nullptr;
  ASSERT_EQ(be->probe(&json), YIRAGE_OK) << (json != nullptr ? json : "");
  const nlohmann::json j = nlohmann::json::parse(json);
  be->free_buffer(json);
  EXPECT_GE(j.at("cores_logical").get<int>(), 1);
  EXPECT_GE(j.at("cores_physical").get<int>(), 1);
  EXPECT_GE(j.at("omp_threads").get<int>(), 1);
  EXPECT_GT(j.at("memory_bytes").get<int64_t>(), 0);
  EXPECT_TRUE(j.at("simd").is_array());
  EXPECT_TRUE(j.at("cache_bytes").contains("l1d"));
  EXPECT_FALSE(j.at("compiler").at("version").get<std::string>().empty());
  EXPECT_FALSE(j.contains("reason"));
}

TEST(CpuBackendTest, ProbeWithoutCompilerIsNoDevice) {
  setenv("YIRAGE_CPU_COMPILER", "/nonexistent/yirage-c++", 1);
  char* json = nullptr;
  const int rc = Backend()->probe(&json);
  unsetenv("YIRAGE_CPU_COMPILER");
  ASSERT_NE(json, nullptr);
  const nlohmann::json j = nlohmann::json::parse(json);
  Backend()->free_buffer(json);
  EXPECT_EQ(rc, YIRAGE_NO_DEVICE);
  EXPECT_THAT(j.at("reason").get<std::string>(), HasSubstr("/nonexistent/yirage-c++"));
}

TEST(CpuBackendTest, BadRequestsFailTheCall) {
  YirageModule* module = nullptr;
  void* resp = nullptr;
  size_t len = 0;
  char* error = nullptr;
  const std::string garbage = "\xff\xff\xff not a proto";
  EXPECT_EQ(Backend()->compile(garbage.data(), garbage.size(), &module, &resp, &len, &error),
            YIRAGE_ERROR);
  ASSERT_NE(error, nullptr);
  EXPECT_THAT(std::string(error), HasSubstr("CompileRequest"));
  Backend()->free_buffer(error);
  EXPECT_EQ(module, nullptr);

  yirage::v1::CompileRequest req;
  *req.mutable_graph() = SmallGraph();
  req.mutable_graph()->mutable_ops(1)->set_op("no_such_op");
  const std::string bytes = req.SerializeAsString();
  error = nullptr;
  EXPECT_EQ(Backend()->compile(bytes.data(), bytes.size(), &module, &resp, &len, &error),
            YIRAGE_ERROR);
  ASSERT_NE(error, nullptr);
  EXPECT_THAT(std::string(error), HasSubstr("no_such_op"));
  Backend()->free_buffer(error);
}

// Generic chains (core/generic_chain.h): elementwise ops before and after a
// reduction, norm or softmax over the first or a middle axis, in one kernel,
// match the float64 reference; so do the same ops one a kernel. (The CPU
// backend runs chains it is given; its description does not offer them to
// the search.)
TEST(CpuBackendTest, GenericChainsMatchTheReference) {
  GraphBuilder b("chains");
  b.Input("x", {6, 10}).Input("xb", {10});
  b.Input("y", {3, 20, 8}).Input("yw", {3, 1, 8}).Input("z", {4, 9, 5}).Input("zw", {9, 1});
  b.Op("xe", "exp", {"x"}).Op("xs", "reduce_sum", {"xe"}, {I("axis", 0)});
  b.Op("xt", "tanh", {"xs"}).Op("xy", "add", {"xt", "xb"}).Output("xy");
  b.Op("ym", "mul", {"y"}, {F("scalar", 0.25)}).Op("yp", "softmax", {"ym"}, {I("axis", 1)});
  b.Op("yy", "mul", {"yp", "yw"}).Output("yy");
  b.Op("za", "abs", {"z"}).Op("zs", "sub", {"za", "zw"});
  b.Op("zn", "rms_norm", {"zs"}, {I("axis", 1)}).Output("zn");
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(b.proto());
  ASSERT_TRUE(g.ok()) << g.status();
  const yirage::v1::Plan chains =
      MakePlan(*g, {GenericOps({"xe", "xs", "xt", "xy"}), GenericOps({"ym", "yp", "yy"}),
                    GenericOps({"za", "zs", "zn"})});
  const yirage::v1::Plan apart = MakePlan(*g, AllGeneric(b.proto()));
  Compiled c;
  CompileThroughAbi(b.proto(), {chains, apart}, &c);
  ASSERT_EQ(c.response.plans_size(), 2);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(c.response.plans(i).ok()) << c.response.plans(i).error();
    RunAndCompare(*g, c, i);
  }
}

// Per-row ops (core/row_group.h rule 5): elementwise ops after a
// keepdim=false reduction, in its row kernel, their inputs indexed by row.
TEST(CpuBackendTest, PerRowOpsMatchTheReference) {
  GraphBuilder b("per_row");
  b.Input("x", {37, 50}).Input("s", {37}).Input("y", {4, 6, 24}).Input("yb", {6});
  b.Op("g", "gelu", {"x"}).Op("m", "reduce_mean", {"g"}, {I("axis", 1), B("keepdim", false)});
  b.Op("p", "mul", {"m", "s"}).Op("q", "add", {"p"}, {F("scalar", 0.5)}).Output("m").Output("q");
  b.Op("ym", "reduce_max", {"y"}, {I("axis", 2), B("keepdim", false)});
  b.Op("yd", "sub", {"ym", "yb"}).Op("ye", "exp", {"yd"}).Output("ye");
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(b.proto());
  ASSERT_TRUE(g.ok()) << g.status();
  Compiled c;
  CompileThroughAbi(b.proto(),
                    {MakePlan(*g, {Row({"g", "m", "p", "q"}, Rows(1)), Row({"ym", "yd", "ye"})}),
                     MakePlan(*g, AllGeneric(b.proto()))},
                    &c);
  ASSERT_EQ(c.response.plans_size(), 2);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(c.response.plans(i).ok()) << c.response.plans(i).error();
    RunAndCompare(*g, c, i);
  }
}

TEST(CpuBackendTest, RejectedPlansFailOnlyThemselves) {
  const yirage::v1::Graph proto = SmallGraph();
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
  ASSERT_TRUE(g.ok()) << g.status();
  const yirage::v1::Plan good = MakePlan(*g, {Row({"e", "y"}, Rows(4))});
  yirage::v1::Plan unknown_op = MakePlan(*g, {Row({"e", "zz"}, Rows(4))});
  yirage::v1::Plan missing_input = good;
  missing_input.mutable_kernels(0)->clear_inputs();
  yirage::v1::Plan two_generic = MakePlan(*g, {Generic("e"), Generic("y")});
  two_generic.mutable_kernels(0)->add_ops("y");
  const yirage::v1::Plan missing_op = MakePlan(*g, {Generic("e")});
  Compiled c;
  CompileThroughAbi(proto, {good, unknown_op, missing_input, two_generic, missing_op, good}, &c);
  EXPECT_TRUE(c.response.plans(0).ok()) << c.response.plans(0).error();
  EXPECT_TRUE(c.response.plans(5).ok()) << c.response.plans(5).error();
  EXPECT_FALSE(c.response.plans(1).ok());
  EXPECT_THAT(c.response.plans(1).error(), HasSubstr("unknown op 'zz'"));
  EXPECT_FALSE(c.response.plans(2).ok());
  EXPECT_THAT(c.response.plans(2).error(), HasSubstr("not in the kernel's inputs"));
  EXPECT_FALSE(c.response.plans(3).ok());
  EXPECT_THAT(c.response.plans(3).error(), HasSubstr("KERNEL_GENERIC holds 2 ops"));
  EXPECT_FALSE(c.response.plans(4).ok());
  EXPECT_THAT(c.response.plans(4).error(), HasSubstr("'y' is in no kernel"));
  RunAndCompare(*g, c, 0);
  RunAndCompare(*g, c, 5);
  // Running a failed plan is an error, not a crash.
  Buffers b = MakeBuffers(*g, core::MakeRandomInputs(*g, 1));
  char* error = nullptr;
  EXPECT_EQ(Backend()->run(c.module, 1, b.in_ptrs.data(), b.out_ptrs.data(), &error), YIRAGE_ERROR);
  ASSERT_NE(error, nullptr);
  Backend()->free_buffer(error);
  error = nullptr;
  EXPECT_EQ(Backend()->run(c.module, 99, b.in_ptrs.data(), b.out_ptrs.data(), &error),
            YIRAGE_ERROR);
  Backend()->free_buffer(error);
}

TEST(CpuBackendTest, IllegalRowGroupIsRejectedWithTheRule) {
  GraphBuilder b("bad_group");
  b.Input("x", {4, 4}).Input("a", {4, 4});
  b.Op("e", "exp", {"x"});
  b.Op("y", "matmul", {"a", "e"}).Output("y");  // B = e would be in-group
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(b.proto());
  ASSERT_TRUE(g.ok()) << g.status();
  Compiled c;
  CompileThroughAbi(b.proto(),
                    {MakePlan(*g, {Row({"e", "y"})}), MakePlan(*g, {Row({"e"}), Row({"y"})})}, &c);
  EXPECT_FALSE(c.response.plans(0).ok());
  EXPECT_THAT(c.response.plans(0).error(), HasSubstr("rule 3"));
  RunAndCompare(*g, c, 1);
}

TEST(CpuBackendTest, CompileErrorFailsOnlyThatPlan) {
  auto inject =
      reinterpret_cast<void (*)(int32_t)>(BackendSymbol("YirageCpuBackendTestInjectCompileError"));
  ASSERT_NE(inject, nullptr);
  const yirage::v1::Graph proto = SmallGraph();
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
  ASSERT_TRUE(g.ok());
  const std::vector<yirage::v1::Plan> plans = {MakePlan(*g, {Row({"e", "y"}, Rows(2))}),
                                               MakePlan(*g, {Generic("e"), Generic("y")}),
                                               MakePlan(*g, {Row({"e", "y"}, Cols(4))})};
  inject(1);
  Compiled c;
  CompileThroughAbi(proto, plans, &c);
  inject(-1);
  ASSERT_EQ(c.response.plans_size(), 3);
  EXPECT_FALSE(c.response.plans(1).ok());
  EXPECT_THAT(c.response.plans(1).error(), HasSubstr("injected by the test hook"));
  EXPECT_LE(c.response.plans(1).error().size(), 4096u + 64u);
  EXPECT_THAT(c.response.plans(1).source(), HasSubstr("yirage_plan_1"));
  EXPECT_GT(c.response.compile_seconds(), 0);
  RunAndCompare(*g, c, 0);
  RunAndCompare(*g, c, 2);
}

TEST(CpuBackendTest, CompileTimeoutFailsThePlan) {
  const yirage::v1::Graph proto = SmallGraph();
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
  ASSERT_TRUE(g.ok());
  Compiled c;
  CompileThroughAbi(proto, {MakePlan(*g, {Row({"e", "y"})})}, &c, /*timeout_seconds=*/0.001);
  EXPECT_FALSE(c.response.plans(0).ok());
  EXPECT_THAT(c.response.plans(0).error(), HasSubstr("timeout"));
}

TEST(CpuBackendTest, SourceHasTheEntryPoint) {
  const yirage::v1::Graph proto = SmallGraph();
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
  ASSERT_TRUE(g.ok());
  Compiled c;
  CompileThroughAbi(proto, {MakePlan(*g, {Generic("e"), Generic("y")})}, &c);
  ASSERT_TRUE(c.response.plans(0).ok()) << c.response.plans(0).error();
  EXPECT_THAT(c.response.plans(0).source(),
              HasSubstr("extern \"C\" int yirage_plan_0(const void* const* inputs"));
}

TEST(CpuBackendTest, TimingIsSane) {
  const yirage::v1::Graph proto = SmallGraph();
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
  ASSERT_TRUE(g.ok());
  Compiled c;
  CompileThroughAbi(proto, {MakePlan(*g, {Row({"e", "y"}, Rows(4))})}, &c);
  ASSERT_TRUE(c.response.plans(0).ok()) << c.response.plans(0).error();
  Buffers b = MakeBuffers(*g, core::MakeRandomInputs(*g, 7));
  char* error = nullptr;

  YirageTimingOptions opts{1, 5, 10.0, 2, 1 << 20, 0};
  YirageTiming t{};
  ASSERT_EQ(Backend()->time(c.module, 0, b.in_ptrs.data(), b.out_ptrs.data(), &opts, &t, &error),
            YIRAGE_OK)
      << (error != nullptr ? error : "");
  EXPECT_EQ(t.runs, 5);  // max_runs bounds a long target
  EXPECT_GT(t.median_us, 0);
  EXPECT_GT(t.min_us, 0);
  EXPECT_LE(t.min_us, t.median_us);

  opts = {0, 50, 1e-9, 3, 0, 0};  // tiny target: min_runs decides; default flush
  ASSERT_EQ(Backend()->time(c.module, 0, b.in_ptrs.data(), b.out_ptrs.data(), &opts, &t, &error),
            YIRAGE_OK);
  EXPECT_EQ(t.runs, 3);

  // Flushes count against the wall clock: 128 MiB written before each run
  // (milliseconds) ends a 1 ms target after min_runs, well before max_runs.
  opts = {0, 1000, 1e-3, 2, int64_t{128} << 20, 0};
  ASSERT_EQ(Backend()->time(c.module, 0, b.in_ptrs.data(), b.out_ptrs.data(), &opts, &t, &error),
            YIRAGE_OK);
  EXPECT_GE(t.runs, 2);
  EXPECT_LT(t.runs, 1000);

  ASSERT_EQ(Backend()->time(c.module, 0, b.in_ptrs.data(), b.out_ptrs.data(), nullptr, &t, &error),
            YIRAGE_OK);
  EXPECT_GE(t.runs, 3);
  EXPECT_LE(t.runs, 100);
  EXPECT_GT(t.median_us, 0);

  EXPECT_EQ(Backend()->time(c.module, 3, b.in_ptrs.data(), b.out_ptrs.data(), &opts, &t, &error),
            YIRAGE_ERROR);
  Backend()->free_buffer(error);
}

TEST(CpuBackendTest, ReleaseRemovesTheTempDirectory) {
  const yirage::v1::Graph proto = SmallGraph();
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
  ASSERT_TRUE(g.ok());
  const std::string tmp = ::testing::TempDir() + "yirage_cpu_release_test";
  std::system(("rm -rf " + tmp + " && mkdir -p " + tmp).c_str());
  const char* old = std::getenv("TMPDIR");
  const std::string saved = old != nullptr ? old : "";
  setenv("TMPDIR", tmp.c_str(), 1);
  {
    Compiled c;
    CompileThroughAbi(proto, {MakePlan(*g, {Generic("e"), Generic("y")})}, &c);
    if (old != nullptr) {
      setenv("TMPDIR", saved.c_str(), 1);
    } else {
      unsetenv("TMPDIR");
    }
    EXPECT_EQ(std::system(("test -n \"$(ls -A " + tmp + ")\"").c_str()), 0);  // in use
  }
  EXPECT_EQ(std::system(("test -z \"$(ls -A " + tmp + ")\"").c_str()), 0);
}

// Library plans (KERNEL_LIBRARY through OpenBLAS's cblas_sgemm, 16-bit
// operands converted to float32) match the reference (LibraryTestGraphs).
TEST(CpuBackendTest, LibraryPlansMatchReference) {
  const std::vector<LibraryTestGraph> graphs = ParsedLibraryTestGraphs();
  ASSERT_EQ(graphs.size(), LibraryTestGraphs().size());
  for (const LibraryTestGraph& t : graphs) {
    SCOPED_TRACE(t.proto.name());
    const core::Graph* const g = &t.graph;
    const std::vector<yirage::v1::Plan> library =
        LibraryCandidates(*g, DescribeThroughAbi(Backend(), nullptr), 12);
    ASSERT_GE(library.size(), 2u);
    Compiled c;
    CompileThroughAbi(t.proto, library, &c);
    for (int i = 0; i < static_cast<int>(library.size()); ++i) {
      EXPECT_NE(c.response.plans(i).source().find("cblas_sgemm"), std::string::npos);
      RunAndCompare(*g, c, i);
    }
  }
}

}  // namespace
}  // namespace yirage::backends::cpu::testing
