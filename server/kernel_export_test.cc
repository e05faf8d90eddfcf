#include "server/kernel_export.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace yirage::server {
namespace {

yirage::v1::Graph TwoInputGraph() {
  yirage::v1::Graph g;
  g.set_name("axpy");
  for (const char* name : {"A", "B"}) {
    auto* in = g.add_inputs();
    in->set_name(name);
    in->add_shape(4);
    in->add_shape(8);
    in->set_dtype(yirage::v1::FLOAT16);
  }
  auto* op = g.add_ops();
  op->set_name("Y");
  op->set_op("add");
  op->add_inputs("A");
  op->add_inputs("B");
  g.add_outputs("Y");
  return g;
}

JobStore::BestKernel CudaBest(const std::string& source) {
  JobStore::BestKernel best;
  best.backend = "cuda";
  best.graph = TwoInputGraph();
  best.source = source;
  best.candidate.set_candidate_id(7);
  best.candidate.set_time_us(3.5);
  best.candidate.mutable_plan()->set_description("one elementwise kernel");
  return best;
}

std::map<std::string, std::string> Files(const yirage::v1::GetKernelResponse& r) {
  std::map<std::string, std::string> files;
  for (const auto& f : r.files()) files[f.path()] = f.content();
  return files;
}

// One elementwise kernel and a split-K workspace, as the CUDA backend
// reports them (CompiledPlan.launch).
yirage::v1::LaunchManifest OneLaunch() {
  yirage::v1::LaunchManifest m;
  auto* b = m.add_buffers();
  b->set_bytes(256);
  b->set_zero_init(true);
  b->set_what("split-K workspace");
  auto* l = m.add_launches();
  l->set_name("yr_p0_k0");
  for (int64_t g : {4, 1, 1}) l->add_grid(g);
  l->set_block(128);
  for (int a : {0, 1, 2, 3}) l->add_args(a);
  return m;
}

TEST(KernelExportTest, CudaExportCarriesTheLaunchManifestAndAPythonLoader) {
  const std::string source =
      "extern \"C\" __global__ void yr_p0_k0(const void* a, const void* b, void* y, void* s) {}\n";
  JobStore::BestKernel best = CudaBest(source);
  best.launch = OneLaunch();
  auto exported = ExportKernel("job-1", best);
  ASSERT_TRUE(exported.ok()) << exported.status();
  auto files = Files(*exported);
  ASSERT_EQ(files.count("kernel.cu"), 1u);
  EXPECT_EQ(files["kernel.cu"], source);
  ASSERT_EQ(files.count("yirage_kernel.py"), 1u);
  ASSERT_EQ(files.count("README.txt"), 1u);
  EXPECT_NE(files["README.txt"].find("yirage_kernel.run(A, B)"), std::string::npos);
  const auto manifest = nlohmann::json::parse(files["manifest.json"]);
  EXPECT_EQ(manifest["format"], "yirage-cuda-kernel/1");
  EXPECT_EQ(manifest["source"], "kernel.cu");
  ASSERT_EQ(manifest["launches"].size(), 1u);
  EXPECT_EQ(manifest["launches"][0]["name"], "yr_p0_k0");
  EXPECT_EQ(manifest["launches"][0]["grid"][0], 4);
  EXPECT_EQ(manifest["launches"][0]["args"].size(), 4u);
  ASSERT_EQ(manifest["buffers"].size(), 1u);
  EXPECT_EQ(manifest["buffers"][0]["bytes"], 256);
  EXPECT_TRUE(manifest["buffers"][0]["zero_init"].get<bool>());
  ASSERT_EQ(manifest["inputs"].size(), 2u);
  EXPECT_EQ(manifest["inputs"][1]["name"], "B");
  EXPECT_EQ(manifest["inputs"][1]["dtype"], "float16");
  EXPECT_EQ(manifest["outputs"][0]["shape"], nlohmann::json({4, 8}));

  // The loader is valid Python (it needs torch and a GPU to run; compiling
  // it to bytecode needs neither).
  if (std::system("python3 -c 'pass' >/dev/null 2>&1") != 0) GTEST_SKIP() << "no python3";
  const auto dir =
      std::filesystem::temp_directory_path() / ("yirage_export_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "yirage_kernel.py") << files["yirage_kernel.py"];
  const std::string cmd =
      "python3 -m py_compile '" + (dir / "yirage_kernel.py").string() + "' 2>&1";
  EXPECT_EQ(std::system(cmd.c_str()), 0);
  std::filesystem::remove_all(dir);
}

TEST(KernelExportTest, CudaCandidateWithoutLaunchManifestIsRefusedWithAReason) {
  auto exported = ExportKernel("job-2", CudaBest("extern \"C\" __global__ void k() {}\n"));
  ASSERT_FALSE(exported.ok());
  EXPECT_EQ(exported.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(exported.status().message().find("launch manifest"), absl::string_view::npos);
}

TEST(KernelExportTest, UnsupportedBackendSaysSo) {
  auto best = CudaBest("x");
  best.backend = "hip";
  auto exported = ExportKernel("job-4", best);
  ASSERT_FALSE(exported.ok());
  EXPECT_EQ(exported.status().code(), absl::StatusCode::kUnimplemented);
}

// A CPU plan as the CPU backend writes one: entry points yirage_plan_0,
// _init and _fini, and (not the backend's habit, but what an export must
// survive) a helper of external linkage that both exports define.
JobStore::BestKernel CpuBest(const std::string& op, int bias) {
  JobStore::BestKernel best;
  best.backend = "cpu";
  best.graph = TwoInputGraph();
  for (auto& in : *best.graph.mutable_inputs()) in.set_dtype(yirage::v1::FLOAT32);
  best.source = absl::StrCat(
      "static int yr_p0_ready = 0;\n"
      "int yr_helper() { return ",
      bias,
      "; }\n"
      "extern \"C\" void yirage_plan_0_fini(void) { yr_p0_ready = 0; }\n"
      "extern \"C\" int yirage_plan_0_init(void) { yirage_plan_0_fini(); yr_p0_ready = 1; "
      "return 0; }\n"
      "extern \"C\" int yirage_plan_0(const void* const* inputs, void* const* outputs) {\n"
      "  if (!yr_p0_ready) return 1;\n"
      "  const float* a = (const float*)inputs[0];\n"
      "  const float* b = (const float*)inputs[1];\n"
      "  float* y = (float*)outputs[0];\n"
      "  for (int i = 0; i < 32; ++i) y[i] = a[i] ",
      op,
      " b[i] + yr_helper();\n"
      "  return 0;\n}\n");
  best.candidate.set_candidate_id(3);
  best.candidate.mutable_plan()->set_description("one loop");
  return best;
}

void WriteFiles(const std::map<std::string, std::string>& files, const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir);
  for (const auto& [path, content] : files) std::ofstream(dir / path) << content;
}

TEST(KernelExportTest, CpuExportNamesItsSymbolsAfterTheJobAndShipsAHeader) {
  auto exported = ExportKernel("job-0a1b", CpuBest("+", 1), {.march = "x86-64-v3"});
  ASSERT_TRUE(exported.ok()) << exported.status();
  auto files = Files(*exported);
  for (const char* f : {"kernel.cpp", "yirage_job_0a1b.h", "manifest.json", "build.sh",
                        "call_example.cpp", "yirage_kernel.py"}) {
    EXPECT_TRUE(files.count(f)) << f;
  }
  const std::string& src = files["kernel.cpp"];
  EXPECT_EQ(src.find("yirage_plan_0"), std::string::npos) << src;
  EXPECT_NE(src.find("int yirage_job_0a1b_run("), std::string::npos) << src;
  EXPECT_NE(src.find("int yirage_job_0a1b_init(void)"), std::string::npos) << src;
  EXPECT_NE(src.find("#include \"yirage_job_0a1b.h\""), std::string::npos);
  const std::string& h = files["yirage_job_0a1b.h"];
  EXPECT_NE(h.find("yirage_job_0a1b_API int yirage_job_0a1b_run(const void* const* inputs"),
            std::string::npos)
      << h;
  EXPECT_NE(h.find("A: float32 [4, 8]"), std::string::npos) << h;
  const auto manifest = nlohmann::json::parse(files["manifest.json"]);
  EXPECT_EQ(manifest["format"], "yirage-kernel/2");
  EXPECT_EQ(manifest["entry_point"], "yirage_job_0a1b_run");
  EXPECT_EQ(manifest["library"], "libyirage_job_0a1b.so");
  EXPECT_EQ(manifest["march"], "x86-64-v3");
  const std::string build = manifest["build"];
  EXPECT_NE(build.find("-march=x86-64-v3"), std::string::npos) << build;
  EXPECT_NE(build.find("-fvisibility=hidden"), std::string::npos) << build;
  // Arm cores go by -mcpu; no target builds for the machine at hand.
  auto arm = ExportKernel("job-1", CpuBest("+", 1), {.march = "neoverse-v2"});
  ASSERT_TRUE(arm.ok());
  EXPECT_NE(Files(*arm)["manifest.json"].find("-mcpu=neoverse-v2"), std::string::npos);
  auto native = ExportKernel("job-1", CpuBest("+", 1));
  ASSERT_TRUE(native.ok());
  EXPECT_NE(Files(*native)["manifest.json"].find("-march=native"), std::string::npos);
  // A candidate other than the best carries its id too.
  ExportOptions named;
  named.name_candidate = true;
  auto other = ExportKernel("job-1", CpuBest("+", 1), named);
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(Files(*other).count("yirage_job_1_c3.h"));
}

TEST(KernelExportTest, AMarchThatIsNoTargetNameIsRefused) {
  for (const std::string& bad :
       std::vector<std::string>{"native -fplugin=x.so", "a;b", std::string(65, 'x')}) {
    auto exported = ExportKernel("job-1", CpuBest("+", 1), {.march = bad});
    ASSERT_FALSE(exported.ok()) << bad;
    EXPECT_EQ(exported.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(exported.status().message().find("march"), absl::string_view::npos);
  }
}

// Two exported CPU kernels (each with its own yr_helper) built as their
// build.sh says and linked into one program: each call runs its own code.
// Then the Python wrapper of one, on NumPy arrays.
TEST(KernelExportTest, TwoCpuExportsLinkIntoOneProgram) {
  if (std::system("g++ --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no g++";
  const auto dir =
      std::filesystem::temp_directory_path() / ("yirage_export2_" + std::to_string(::getpid()));
  auto add = ExportKernel("job-aa", CpuBest("+", 10));
  auto sub = ExportKernel("job-bb", CpuBest("-", 20));
  ASSERT_TRUE(add.ok() && sub.ok());
  WriteFiles(Files(*add), dir / "a");
  WriteFiles(Files(*sub), dir / "b");
  for (const char* d : {"a", "b"}) {
    const std::string cmd = "sh '" + (dir / d / "build.sh").string() + "' >/dev/null 2>&1 && '" +
                            (dir / d / "call_example").string() + "' >/dev/null";
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
  std::ofstream(dir / "main.cpp") << R"(#include <cstdio>
#include "yirage_job_aa.h"
#include "yirage_job_bb.h"
int main() {
  float a[32], b[32], y[32], z[32];
  for (int i = 0; i < 32; ++i) { a[i] = i; b[i] = 1; }
  const void* in[] = {a, b};
  void* out_y[] = {y};
  void* out_z[] = {z};
  if (yirage_job_aa_init() || yirage_job_bb_init()) return 2;
  if (yirage_job_aa_run(in, out_y) || yirage_job_bb_run(in, out_z)) return 3;
  yirage_job_aa_fini();
  yirage_job_bb_fini();
  std::printf("%g %g\n", y[5], z[5]);
  return y[5] == 5 + 1 + 10 && z[5] == 5 - 1 + 20 ? 0 : 1;
}
)";
  const std::string d = dir.string();
  const std::string link = "cd '" + d + "' && g++ -O1 main.cpp -Ia -Ib -La -Lb -lyirage_job_aa " +
                           "-lyirage_job_bb -Wl,-rpath,'" + d + "/a:" + d + "/b' -o main " +
                           ">/dev/null 2>&1 && ./main >/dev/null";
  EXPECT_EQ(std::system(link.c_str()), 0) << link;
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") == 0) {
    const std::string py = "cd '" + d +
                           "/b' && /usr/bin/python3 -c 'import numpy as np, yirage_kernel as k; "
                           "y = k.run(np.arange(32, dtype=np.float32).reshape(4, 8), "
                           "np.ones((4, 8), np.float32)); assert y[0, 5] == 5 - 1 + 20, y'";
    EXPECT_EQ(std::system(py.c_str()), 0) << py;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace yirage::server
