// Backends whose runtime or device is absent, through the real binaries: the
// HIP and Level Zero workers exit with code 3 and say why, a supervising
// server does not restart them, and a job for such a backend is accepted but
// says it is waiting for a worker.
#include <unistd.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/process_harness.h"

namespace yirage::testing {
namespace {

using nlohmann::json;
using std::chrono::seconds;
using ::testing::HasSubstr;

// How many lines of `text` contain every one of `needles`.
int CountLines(const std::string& text, const std::vector<std::string>& needles) {
  int n = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    bool all = true;
    for (const std::string& needle : needles) all &= line.find(needle) != std::string::npos;
    n += all ? 1 : 0;
  }
  return n;
}

bool BackendBuilt(const std::string& backend) {
  return access((BinDir() + "/libyirage_backend_" + backend + ".so").c_str(), R_OK) == 0;
}

class DeviceDetectionTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!BackendBuilt(GetParam())) {
      GTEST_SKIP() << "libyirage_backend_" << GetParam() << ".so is not built (headers missing)";
    }
    dir_ = MakeTempDir("device_detection_" + GetParam());
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "---- server log ----\n" << server_.Log() << "\n";
    server_.Kill();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  std::string dir_;
  ServerProcess server_;
};

// The expected start of each backend's no-device reason on a machine without
// that GPU: the runtime library is missing, or it is there and finds nothing.
std::vector<std::string> ReasonStarts(const std::string& backend) {
  if (backend == "hip") return {"libamdhip64.so not found (dlopen: ", "hipInit: ", "hipGetDevice"};
  return {"libze_loader.so.1 not found (dlopen: ", "zeInit: ", "zeDriverGet: ", "zeDeviceGet: "};
}

bool StartsWithAny(const std::string& s, const std::vector<std::string>& prefixes) {
  for (const std::string& p : prefixes) {
    if (s.rfind(p, 0) == 0) return true;
  }
  return false;
}

TEST_P(DeviceDetectionTest, WorkerWithoutADeviceExitsWithCode3AndTheReason) {
  const std::string backend = GetParam();
  CommandResult probe =
      RunCommand({BinDir() + "/yirage-worker", "--backend", backend, "--probe"}, seconds(60));
  json device = probe.Json();
  if (probe.exit_code == 0) GTEST_SKIP() << "this machine has a " << backend << " device";
  ASSERT_EQ(probe.exit_code, 3) << probe.out << probe.err;
  ASSERT_TRUE(device.is_object()) << probe.out;
  EXPECT_EQ(device["backend"], backend);
  ASSERT_TRUE(device["reason"].is_string()) << probe.out;
  const std::string reason = device["reason"];
  EXPECT_TRUE(StartsWithAny(reason, ReasonStarts(backend))) << reason;

  std::string error;
  ASSERT_TRUE(server_.Start(dir_ + "/yirage.db", {"--local-workers", "none"}, &error)) << error;
  CommandResult worker = RunCommand(
      {BinDir() + "/yirage-worker", "--scheduler", server_.worker_address(), "--backend", backend},
      seconds(60));
  EXPECT_EQ(worker.exit_code, 3) << worker.err;
  EXPECT_THAT(worker.err,
              HasSubstr("yirage-worker: backend '" + backend + "' has no device: " + reason));
  // It never registered with the scheduler.
  json workers = server_.Client({"workers", "--json"}).Json();
  ASSERT_TRUE(workers.is_object());
  EXPECT_TRUE(workers["workers"].empty()) << workers.dump();
}

TEST_P(DeviceDetectionTest, AutoModeGivesUpOnTheWorkerAndAJobSaysItIsWaiting) {
  const std::string backend = GetParam();
  CommandResult probe =
      RunCommand({BinDir() + "/yirage-worker", "--backend", backend, "--probe"}, seconds(60));
  if (probe.exit_code == 0) GTEST_SKIP() << "this machine has a " << backend << " device";
  std::string error;
  ASSERT_TRUE(server_.Start(dir_ + "/yirage.db", {"--local-workers", "auto"}, &error)) << error;
  // The server starts this backend's local worker, which finds no device,
  // exits with code 3 and is not restarted.
  auto gave_up = [&] {
    return CountLines(server_.Log(), {"local " + backend + " worker (pid ",
                                      "exited with code 3: no device; not restarting it"});
  };
  auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (std::chrono::steady_clock::now() < deadline && gave_up() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::this_thread::sleep_for(seconds(2));  // a restart would have happened by now
  const std::string log = server_.Log();
  EXPECT_EQ(gave_up(), 1) << log;
  EXPECT_EQ(CountLines(log, {"started local " + backend + " worker"}), 1) << log;
  EXPECT_EQ(CountLines(log, {"yirage-worker: backend '" + backend + "' has no device: "}), 1)
      << log;

  // A job for it is accepted (a worker may connect later) and says why it
  // does not progress.
  CommandResult r = server_.Client({"submit", SourceDir() + "/examples/graphs/softmax.json",
                                    "--backend", backend, "--budget-candidates", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string job_id = r.Json()["job_id"];
  const std::string waiting = "waiting: no connected worker for backend '" + backend + "'";
  json job = server_.WaitForSearch(job_id);
  EXPECT_EQ(job["state"], "QUEUED");
  EXPECT_EQ(job["message"], waiting);
  r = server_.Client({"get", job_id});
  EXPECT_THAT(r.out, HasSubstr("message    " + waiting));
  ASSERT_EQ(server_.Client({"cancel", job_id}).exit_code, 0);
  job = server_.Client({"get", job_id, "--json"}).Json();
  EXPECT_EQ(job["state"], "CANCELLED");
  EXPECT_EQ(job["message"], "cancelled by a client");
}

INSTANTIATE_TEST_SUITE_P(Backends, DeviceDetectionTest, ::testing::Values("hip", "level_zero"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace yirage::testing
