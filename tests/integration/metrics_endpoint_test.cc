// The server's /metrics after a real job (a local CPU worker), checked by
// name and by `promtool check metrics` (Debian package prometheus; the test
// skips, saying so, where promtool is not installed), and its JSON logs
// (--log-format json).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/integration/process_harness.h"

namespace yirage::testing {
namespace {

TEST(MetricsEndpointTest, PromtoolAcceptsTheMetricsOfARealJob) {
  const std::string dir = MakeTempDir("metrics_endpoint");
  ASSERT_FALSE(dir.empty());
  ServerProcess server;
  std::string error;
  ASSERT_TRUE(server.Start(
      dir + "/yirage.db",
      {"--local-workers", "cpu", "--confirm-winners", "false", "--log-format", "json"}, &error))
      << error;
  CommandResult submit = server.Client({"submit", SourceDir() + "/examples/graphs/softmax.json",
                                        "--json", "--budget-candidates", "1"});
  ASSERT_EQ(submit.exit_code, 0) << submit.err;
  const std::string job_id = submit.Json().value("job_id", "");
  ASSERT_FALSE(job_id.empty()) << submit.out;
  nlohmann::json job = server.WaitForJob(job_id, std::chrono::seconds(120));
  ASSERT_EQ(job.value("state", ""), "SUCCEEDED") << job.dump() << server.Log();
  // A rejected call, for a non-OK code.
  EXPECT_NE(server.Client({"get", "job-doesnotexist"}).exit_code, 0);

  // Gauges are refreshed by the maintenance loop (every 0.5 s).
  const std::vector<std::string> expected = {
      "yirage_build_info{git_sha=\"",
      "yirage_jobs{state=\"succeeded\"} 1",
      "yirage_candidates_queued{backend=\"cpu\"} 0",
      "yirage_workers_connected{backend=\"cpu\"} 1",
      "yirage_candidates_evaluated_total{backend=\"cpu\",outcome=\"verified\"}",
      "yirage_job_duration_seconds_count{state=\"succeeded\"} 1",
      "yirage_job_time_to_best_seconds_count 1",
      "yirage_search_duration_seconds_count 1",
      "yirage_batches_leased_total{backend=\"cpu\"}",
      "yirage_worker_busy_seconds_total{backend=\"cpu\",worker=\"",
      "yirage_lease_expiries_total{backend=\"cpu\"} 0",
      "yirage_candidates_requeued_total",
      "yirage_grpc_requests_total{code=\"OK\",method=\"yirage.v1.JobService/SubmitJob\"} 1",
      "yirage_grpc_requests_total{code=\"OK\",method=\"yirage.v1.WorkerService/Synchronize\"}",
      "yirage_grpc_requests_total{code=\"NOT_FOUND\",method=\"yirage.v1.JobService/GetJob\"} 1",
      "yirage_grpc_request_duration_seconds_count{method=\"yirage.v1.JobService/GetJob\"}",
      // Workers, jobs and leases share one connection (server/connection.h).
      "yirage_sqlite_transaction_seconds_count{store=\"scheduler\"}",
      "yirage_sqlite_transaction_seconds_count{store=\"chips\"}",
  };
  std::string metrics;
  for (int i = 0; i < 100; ++i) {
    metrics = HttpGet(server.metrics_address(), "/metrics");
    bool all = true;
    for (const std::string& e : expected) all = all && metrics.find(e) != std::string::npos;
    if (all) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (const std::string& e : expected) {
    EXPECT_NE(metrics.find(e), std::string::npos) << e << "\n" << metrics;
  }

  // --log-format json: every log line is one JSON object (the two status
  // lines yirage-server prints itself are not log lines).
  int json_lines = 0;
  std::istringstream log(server.Log());
  for (std::string line; std::getline(log, line);) {
    if (line.rfind("yirage-server ", 0) == 0 || line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object()) {
      // The local worker shares the server's output and logs as text.
      continue;
    }
    EXPECT_TRUE(j.contains("time") && j.contains("level") && j.contains("logger") &&
                j.contains("msg"))
        << line;
    ++json_lines;
  }
  EXPECT_GT(json_lines, 0) << server.Log();
  EXPECT_EQ(server.Stop(), 0);
  // The CPU worker reported its candidates' phase times: the compile
  // histogram counted at least one.
  const size_t count =
      metrics.find("yirage_candidate_phase_seconds_count{backend=\"cpu\",phase=\"compile\"} ");
  ASSERT_NE(count, std::string::npos) << metrics;
  EXPECT_GT(std::stod(metrics.substr(metrics.find("} ", count) + 2)), 0) << metrics;

  // The body, after the HTTP response's headers.
  const size_t body = metrics.find("\r\n\r\n");
  ASSERT_NE(body, std::string::npos) << metrics;
  const std::string file = dir + "/metrics.txt";
  std::ofstream(file) << metrics.substr(body + 4);
  const bool have_promtool = RunCommand({"/bin/sh", "-c", "command -v promtool"}).exit_code == 0;
  if (!have_promtool) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "promtool not installed (Debian package prometheus, in "
                    "scripts/install-deps.sh): /metrics was checked by name only";
  }
  CommandResult check = RunCommand({"/bin/sh", "-c", "promtool check metrics < '" + file + "'"});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace yirage::testing
