#include "server/local_workers.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace yirage::server {
namespace {

using ::testing::ElementsAre;

class LocalWorkersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/yirage_local_workers_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A stand-in for yirage-worker whose `--probe --device N` finds a device
  // for N < devices and exits 3 ("no device") otherwise, as the real one
  // does once the runtime's visibility variable names a missing device.
  std::string FakeWorker(int devices) {
    const std::string path = dir_ + "/fake-worker-" + std::to_string(devices);
    std::ofstream(path) << "#!/bin/sh\n"
                        << "device=0\n"
                        << "while [ $# -gt 0 ]; do\n"
                        << "  if [ \"$1\" = --device ]; then device=$2; fi\n"
                        << "  shift\n"
                        << "done\n"
                        << "[ \"$device\" -lt " << devices << " ] && exit 0\n"
                        << "exit 3\n";
    chmod(path.c_str(), 0755);
    return path;
  }

  std::string dir_;
};

TEST_F(LocalWorkersTest, CountsDevicesUpToTheFirstProbeThatFindsNone) {
  EXPECT_EQ(LocalWorkers::CountDevices(FakeWorker(0), "cuda"), 0);
  EXPECT_EQ(LocalWorkers::CountDevices(FakeWorker(1), "cuda"), 1);
  EXPECT_EQ(LocalWorkers::CountDevices(FakeWorker(3), "hip"), 3);
  // Past a round of eight probes.
  EXPECT_EQ(LocalWorkers::CountDevices(FakeWorker(11), "level_zero"), 11);
  EXPECT_EQ(LocalWorkers::CountDevices(dir_ + "/missing", "cuda"), 0);
}

TEST_F(LocalWorkersTest, AutoStartsOneWorkerPerDevice) {
  std::ofstream(dir_ + "/libyirage_backend_cuda.so") << "";
  auto specs = LocalWorkers::SpecsForMode("auto", dir_);
  ASSERT_TRUE(specs.ok()) << specs.status();
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_EQ((*specs)[0].backend, "cpu");
  EXPECT_FALSE((*specs)[0].per_device);
  EXPECT_EQ((*specs)[1].backend, "cuda");
  EXPECT_TRUE((*specs)[1].per_device);

  std::vector<LocalWorkers::Spec> expanded = LocalWorkers::ExpandDevices(FakeWorker(3), *specs);
  ASSERT_EQ(expanded.size(), 4u);
  EXPECT_EQ(expanded[0].backend, "cpu");
  EXPECT_TRUE(expanded[0].extra_args.empty());
  for (int d = 0; d < 3; ++d) {
    EXPECT_EQ(expanded[1 + d].backend, "cuda");
    EXPECT_EQ(expanded[1 + d].device, d);
    EXPECT_FALSE(expanded[1 + d].per_device);
    EXPECT_THAT(expanded[1 + d].extra_args, ElementsAre("--device", std::to_string(d)));
  }
}

TEST_F(LocalWorkersTest, ABackendWithoutDevicesStillGetsOneWorkerToSayWhy) {
  std::vector<LocalWorkers::Spec> expanded =
      LocalWorkers::ExpandDevices(FakeWorker(0), {{"cpu", {}}, {"hip", {}, /*per_device=*/true}});
  ASSERT_EQ(expanded.size(), 2u);
  EXPECT_EQ(expanded[1].backend, "hip");
  EXPECT_THAT(expanded[1].extra_args, ElementsAre("--device", "0"));
}

TEST_F(LocalWorkersTest, CpuModesAndNone) {
  auto cpu = LocalWorkers::SpecsForMode("cpu", dir_);
  ASSERT_TRUE(cpu.ok());
  ASSERT_EQ(cpu->size(), 1u);
  EXPECT_EQ((*cpu)[0].backend, "cpu");
  auto none = LocalWorkers::SpecsForMode("none", dir_);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  // No GPU backend library: auto is the CPU worker alone.
  auto alone = LocalWorkers::SpecsForMode("auto", dir_);
  ASSERT_TRUE(alone.ok());
  ASSERT_EQ(alone->size(), 1u);
  EXPECT_EQ(LocalWorkers::SpecsForMode("all", dir_).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The real worker: the CPU backend has exactly one device.
TEST_F(LocalWorkersTest, TheCpuBackendHasOneDevice) {
  const std::string worker = std::string(YIRAGE_BIN_DIR) + "/yirage-worker";
  if (access(worker.c_str(), X_OK) != 0) GTEST_SKIP() << worker << " is not built";
  EXPECT_EQ(LocalWorkers::CountDevices(worker, "cpu"), 1);
}

}  // namespace
}  // namespace yirage::server
