#include "client/roofline_command.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace yirage::client {
namespace {

std::filesystem::path FreshDir(const std::string& name) {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / (name + "-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void MakeSdk(const std::filesystem::path& dir) {
  std::filesystem::create_directories(dir / "yirage");
  std::ofstream(dir / "yirage" / "roofline.py") << "\n";
}

TEST(RooflineDataTest, TheMessagesInProtobufsJsonMappingWithoutRewrittenGraphs) {
  yirage::v1::Job job;
  job.set_job_id("job-1");
  job.set_graph_name("g");
  job.set_state(yirage::v1::SUCCEEDED);
  job.mutable_best()->set_candidate_id(7);
  yirage::v1::Candidate c;
  c.set_candidate_id(7);
  c.set_status(yirage::v1::VERIFIED);
  c.set_time_us(12.5);
  c.mutable_plan()->set_description("[A+B] rows");
  c.mutable_plan()->mutable_graph()->set_name("rewritten");
  c.mutable_work()->set_flops(2e9);
  c.mutable_work()->set_bytes(1e6);
  c.mutable_work()->set_dtype(yirage::v1::FLOAT16);
  yirage::v1::Chip chip;
  chip.set_chip_id("nvidia_h200");
  chip.mutable_memory()->set_bandwidth_gbps(4800);
  chip.mutable_compute()->set_peak_tflops_fp16(989.4);

  const nlohmann::json data = RooflineData(job, {c}, chip, "nvidia_h200", "");
  EXPECT_EQ(data["format"], "yirage-roofline/1");
  EXPECT_EQ(data["job"]["job_id"], "job-1");
  EXPECT_EQ(data["job"]["state"], "SUCCEEDED");
  EXPECT_EQ(data["job"]["best"]["candidate_id"], "7");  // int64: a string in the mapping
  ASSERT_EQ(data["candidates"].size(), 1u);
  const nlohmann::json& cand = data["candidates"][0];
  EXPECT_EQ(cand["status"], "VERIFIED");
  EXPECT_DOUBLE_EQ(cand["time_us"].get<double>(), 12.5);
  EXPECT_DOUBLE_EQ(cand["work"]["flops"].get<double>(), 2e9);
  EXPECT_EQ(cand["work"]["dtype"], "FLOAT16");
  EXPECT_EQ(cand["plan"]["description"], "[A+B] rows");
  EXPECT_FALSE(cand["plan"].contains("graph"));
  EXPECT_DOUBLE_EQ(data["chip"]["memory"]["bandwidth_gbps"].get<double>(), 4800);
  EXPECT_DOUBLE_EQ(data["chip"]["compute"]["peak_tflops_fp16"].get<double>(), 989.4);
  EXPECT_FALSE(data.contains("chip_error"));

  const nlohmann::json none = RooflineData(job, {}, std::nullopt, "gone", "chip 'gone' is not");
  EXPECT_TRUE(none["chip"].is_null());
  EXPECT_EQ(none["chip_id"], "gone");
  EXPECT_EQ(none["chip_error"], "chip 'gone' is not");
  EXPECT_TRUE(none["candidates"].empty());
}

TEST(RooflineDataTest, FindPythonPrefersTheEnvironmentThenDebians) {
  EXPECT_EQ(FindPython("/opt/venv/bin/python"), "/opt/venv/bin/python");
  const std::string fallback = FindPython(nullptr);
  EXPECT_EQ(fallback, access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3");
  EXPECT_EQ(FindPython(""), fallback);
}

TEST(RooflineDataTest, FindPythonSdkTakesTheFirstFolderHoldingThePackage) {
  const std::filesystem::path root = FreshDir("yirage-roofline-sdk-test");
  const std::filesystem::path env = root / "env", source = root / "source";
  const std::filesystem::path bin = root / "prefix" / "bin";
  const std::filesystem::path installed = root / "prefix" / "share" / "yirage" / "python";
  std::filesystem::create_directories(bin);
  MakeSdk(source);
  EXPECT_EQ(FindPythonSdk(nullptr, bin.string(), source.string()), source.string());
  MakeSdk(installed);
  EXPECT_EQ(FindPythonSdk(nullptr, bin.string(), source.string()), installed.string());
  MakeSdk(env);
  EXPECT_EQ(FindPythonSdk(env.c_str(), bin.string(), source.string()), env.string());
  // A folder without the package is passed over; none at all gives "".
  EXPECT_EQ(FindPythonSdk((root / "nothing").c_str(), bin.string(), source.string()),
            installed.string());
  EXPECT_EQ(FindPythonSdk(nullptr, (root / "elsewhere").string(), (root / "no").string()), "");
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace yirage::client
