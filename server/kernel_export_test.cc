#include "server/kernel_export.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

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

}  // namespace
}  // namespace yirage::server
