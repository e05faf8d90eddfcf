// Process-level tests: the real yirage-server, yirage-worker and yirage-client
// talking over loopback ports, each test with its own database and ports.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_join.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/integration/process_harness.h"
#include "tests/process_util.h"
#include "yirage/v1/job.grpc.pb.h"
#include "yirage/v1/worker.grpc.pb.h"

namespace yirage::testing {
namespace {

// Whether process `pid` has exited (gone, or a zombie nobody reaped yet).
bool ProcessGone(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t paren = line.rfind(')');
  return paren == std::string::npos || paren + 2 >= line.size() || line[paren + 2] == 'Z';
}

using nlohmann::json;
using std::chrono::seconds;

std::string Example(const std::string& name) {
  return SourceDir() + "/examples/graphs/" + name + ".json";
}

bool IsFinal(const std::string& status) {
  return status == "VERIFIED" || status == "MISMATCH" || status == "ERROR";
}

// A candidate verified by its worker whose result a second worker did not
// confirm (with several workers, the winner is run again before the job
// succeeds; timing noise rarely halves a speedup, but it may).
bool Refuted(const nlohmann::json& candidate) {
  return candidate["status"] == "ERROR" &&
         candidate["error"].get<std::string>().rfind("not confirmed", 0) == 0;
}

class EndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    if (HasFailure()) {
      std::cerr << "---- server log ----\n" << server_.Log() << "\n";
    }
    server_.Kill();
    std::filesystem::remove_all(dir_);
  }
  // Synchronize on the server's worker port as a hand-driven worker does
  // (10 s deadline).
  std::function<grpc::Status(const yirage::v1::SynchronizeRequest&,
                             yirage::v1::SynchronizeResponse*)>
  WorkerCaller() {
    std::shared_ptr<yirage::v1::WorkerService::Stub> api = yirage::v1::WorkerService::NewStub(
        grpc::CreateChannel(server_.worker_address(), grpc::InsecureChannelCredentials()));
    return [api](const yirage::v1::SynchronizeRequest& request,
                 yirage::v1::SynchronizeResponse* response) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      return api->Synchronize(&context, request, response);
    };
  }
  void StartServer(const std::vector<std::string>& args) {
    std::string error;
    ASSERT_TRUE(server_.Start(dir_ + "/yirage.db", args, &error)) << error;
  }
  // Submits without waiting; returns the job id.
  std::string Submit(const std::string& graph, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"submit", graph, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    CommandResult r = server_.Client(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    json j = r.Json();
    if (!j.is_object() || !j.contains("job_id")) return "";
    return j["job_id"];
  }
  json Candidates(const std::string& job_id) {
    CommandResult r = server_.Client({"candidates", job_id, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    json j = r.Json();
    return j.is_object() ? j["candidates"] : json::array();
  }
  // The job's own candidates: without the rows that run its winner again on
  // a second worker (where one is connected) to confirm it.
  json OwnCandidates(const std::string& job_id) {
    json own = json::array();
    for (const auto& c : Candidates(job_id)) {
      if (c["confirms"].get<int64_t>() == 0 && c["final_of"].get<int64_t>() == 0) own.push_back(c);
    }
    return own;
  }
  json Workers() {
    CommandResult r = server_.Client({"workers", "--json"});
    json j = r.Json();
    return j.is_object() ? j["workers"] : json::array();
  }

  std::string dir_;
  ServerProcess server_;
};

TEST_F(EndToEndTest, EveryExampleGraphSucceedsVerifiedAndExportsAKernel) {
  StartServer({"--local-workers", "cpu"});
  // The CPU-sized examples (examples/graphs also holds GPU benchmark shapes).
  const std::vector<std::string> graphs = {"rms_norm_linear", "gated_mlp", "lora", "softmax",
                                           "norm_transformer"};
  for (const std::string& name : graphs) {
    SCOPED_TRACE(name);
    CommandResult r = server_.Client(
        {"submit", Example(name), "--wait", "--json", "--budget-candidates", "3"}, seconds(300));
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    json job = r.Json();
    ASSERT_TRUE(job.is_object()) << r.out;
    EXPECT_EQ(job["state"], "SUCCEEDED");
    EXPECT_EQ(job["candidates_generated"], 3);
    EXPECT_EQ(job["candidates_evaluated"], 3);
    ASSERT_TRUE(job["best"].is_object());
    EXPECT_TRUE(job["best"]["verified"].get<bool>());
    EXPECT_GT(job["best"]["time_us"].get<double>(), 0);
    EXPECT_GT(job["best"]["baseline_time_us"].get<double>(), 0);
    EXPECT_GT(job["best"]["speedup"].get<double>(), 0);

    // The exported kernel builds and runs with no YiRage code at all.
    std::string out = dir_ + "/kernel_" + name;
    CommandResult k = server_.Client({"kernel", job["job_id"], "--out", out});
    ASSERT_EQ(k.exit_code, 0) << k.err;
    std::ifstream manifest_file(out + "/manifest.json");
    json manifest = json::parse(manifest_file, nullptr, false);
    ASSERT_TRUE(manifest.is_object());
    EXPECT_EQ(manifest["candidate_id"], job["best"]["candidate_id"]);
    EXPECT_FALSE(manifest["inputs"].empty());
    // Built for what -march=native named on the worker (GCC names it).
    if (RunCommand({"/bin/sh", "-c", "g++ -march=native -Q --help=target | grep -q -- -march="})
            .exit_code == 0) {
      EXPECT_NE(manifest["march"], "native") << manifest.dump(2);
    }
    CommandResult build = RunCommand({"/bin/sh", out + "/build.sh"}, seconds(180));
    ASSERT_EQ(build.exit_code, 0) << build.out << build.err;
    CommandResult call = RunCommand({out + "/call_example"});
    EXPECT_EQ(call.exit_code, 0) << call.out << call.err;
  }
}

// `kernel --candidate N --march T`: any verified candidate exports, named
// after the job and the candidate, built for the target asked; its Python
// wrapper runs it; a candidate that is not the job's is refused.
TEST_F(EndToEndTest, AnyVerifiedCandidateExportsForTheTargetAsked) {
  StartServer({"--local-workers", "cpu"});
  CommandResult r = server_.Client(
      {"submit", Example("softmax"), "--wait", "--json", "--budget-candidates", "3"}, seconds(300));
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json job = r.Json();
  ASSERT_EQ(job["state"], "SUCCEEDED") << r.out;
  const std::string job_id = job["job_id"];
  int64_t other = 0;
  for (const auto& c : OwnCandidates(job_id)) {
    if (c["status"] == "VERIFIED" && c["candidate_id"] != job["best"]["candidate_id"]) {
      other = c["candidate_id"].get<int64_t>();
    }
  }
  ASSERT_NE(other, 0) << "no second verified candidate";
  const std::string out = dir_ + "/candidate";
  CommandResult k = server_.Client({"kernel", job_id, "--out", out, "--candidate",
                                    std::to_string(other), "--march", "x86-64-v3"});
  ASSERT_EQ(k.exit_code, 0) << k.err;
  std::ifstream manifest_file(out + "/manifest.json");
  const json manifest = json::parse(manifest_file, nullptr, false);
  ASSERT_TRUE(manifest.is_object());
  EXPECT_EQ(manifest["candidate_id"], other);
  std::string base = "yirage_" + job_id + "_c" + std::to_string(other);
  std::replace(base.begin(), base.end(), '-', '_');
  EXPECT_EQ(manifest["entry_point"], base + "_run");
  EXPECT_NE(manifest["build"].get<std::string>().find("-march=x86-64-v3"), std::string::npos);
  EXPECT_TRUE(std::ifstream(out + "/" + base + ".h").good());
  CommandResult build = RunCommand({"/bin/sh", out + "/build.sh"}, seconds(180));
  ASSERT_EQ(build.exit_code, 0) << build.out << build.err;
  EXPECT_EQ(RunCommand({out + "/call_example"}).exit_code, 0);
  if (RunCommand({"/usr/bin/python3", "-c", "import numpy"}).exit_code == 0) {
    const std::vector<int64_t> shape = manifest["inputs"][0]["shape"];
    const std::string dims = absl::StrJoin(shape, ", ");
    CommandResult py = RunCommand(
        {"/usr/bin/python3", "-c",
         "import sys, numpy as np; sys.path.insert(0, '" + out +
             "'); import yirage_kernel as k; x = np.random.rand(" + dims +
             ").astype(np.float32); y = k.run(x); e = np.exp(4 * (x - x.max(-1, keepdims=True))); "
             "assert np.allclose(y, e / e.sum(-1, keepdims=True), atol=1e-4), 'mismatch'"});
    EXPECT_EQ(py.exit_code, 0) << py.out << py.err;
  }
  CommandResult bad = server_.Client({"kernel", job_id, "--out", out, "--candidate", "999999"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("no candidate 999999"), std::string::npos) << bad.err;
  CommandResult march = server_.Client({"kernel", job_id, "--out", out, "--march", "a;b"});
  EXPECT_NE(march.exit_code, 0);
  EXPECT_NE(march.err.find("march"), std::string::npos) << march.err;
}

// WatchJob: a snapshot, then each candidate as it finishes, the best as it
// changes and the final state last; the stream then closes OK. An unknown
// job is NOT_FOUND; a watch whose deadline passes first says so.
TEST_F(EndToEndTest, WatchJobStreamsEveryChangeUntilTheJobEnds) {
  StartServer({"--local-workers", "cpu"});
  auto jobs = yirage::v1::JobService::NewStub(
      grpc::CreateChannel(server_.client_address(), grpc::InsecureChannelCredentials()));
  const std::string job_id = Submit(Example("softmax"), {"--budget-candidates", "4"});
  ASSERT_FALSE(job_id.empty());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + seconds(240));
  yirage::v1::WatchJobRequest request;
  request.set_job_id(job_id);
  auto reader = jobs->WatchJob(&context, request);
  std::vector<yirage::v1::JobEvent> events;
  yirage::v1::JobEvent event;
  while (reader->Read(&event)) events.push_back(event);
  const grpc::Status status = reader->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.front().kind(), yirage::v1::JobEvent::SNAPSHOT);
  EXPECT_EQ(events.back().kind(), yirage::v1::JobEvent::STATE);
  const yirage::v1::Job& last = events.back().job();
  EXPECT_EQ(last.state(), yirage::v1::SUCCEEDED);
  std::set<int64_t> reported;
  int bests = 0, finalists = 0;
  for (const auto& e : events) {
    if (e.kind() == yirage::v1::JobEvent::CANDIDATE) {
      EXPECT_TRUE(reported.insert(e.candidate().candidate_id()).second) << "reported twice";
      EXPECT_NE(e.candidate().status(), yirage::v1::PENDING);
      EXPECT_NE(e.candidate().status(), yirage::v1::LEASED);
      // The final round's rows are events too, but not the job's candidates.
      if (e.candidate().final_of() != 0) {
        ++finalists;
        reported.erase(e.candidate().candidate_id());
      }
    }
    bests += e.kind() == yirage::v1::JobEvent::BEST;
  }
  // Every candidate finished after the snapshot is reported once.
  const int at_snapshot = events.front().job().candidates_evaluated();
  EXPECT_EQ(at_snapshot + static_cast<int>(reported.size()), last.candidates_evaluated());
  EXPECT_GE(finalists, 2) << "the final round of the best few";
  EXPECT_NE(last.best().final_of(), 0) << "chosen in the final round";
  if (at_snapshot == 0) {
    EXPECT_GE(bests, 1);
  }
  // Watches `id` for at most `secs`: the events read (the last in `event`)
  // and how the stream ended.
  auto watch = [&](const std::string& id, int secs, int* n) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(secs));
    yirage::v1::WatchJobRequest w;
    w.set_job_id(id);
    auto r = jobs->WatchJob(&context, w);
    *n = 0;
    while (r->Read(&event)) ++*n;
    return r->Finish().error_code();
  };
  int n = 0;
  // A finished job: its snapshot, then the stream closes.
  EXPECT_EQ(watch(job_id, 10, &n), grpc::StatusCode::OK);
  EXPECT_EQ(n, 1);
  EXPECT_EQ(event.kind(), yirage::v1::JobEvent::SNAPSHOT);
  EXPECT_EQ(watch("job-none", 10, &n), grpc::StatusCode::NOT_FOUND);
  // A job that cannot run (no worker of its backend) outlives a 1 s watch.
  const std::string stuck = Submit(Example("softmax"), {"--backend", "hip"});
  ASSERT_FALSE(stuck.empty());
  EXPECT_EQ(watch(stuck, 1, &n), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_GE(n, 1);
  // The CLI's watch follows the stream to the end.
  CommandResult watched = server_.Client({"watch", job_id, "--json"}, seconds(30));
  EXPECT_EQ(watched.exit_code, 0) << watched.err;
  EXPECT_EQ(watched.Json()["state"], "SUCCEEDED") << watched.out;
  // Without --json (and no terminal) it writes plain progress lines.
  CommandResult plain = server_.Client({"watch", job_id}, seconds(30));
  EXPECT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.err.find(job_id + " SUCCEEDED 4/4 candidates"), std::string::npos) << plain.err;
}

TEST_F(EndToEndTest, BadGraphsAreRejectedAndTheServerKeepsServing) {
  StartServer({"--local-workers", "none"});
  struct Case {
    std::string json_text;
    std::vector<std::string> expected;  // fragments of the error
  };
  std::vector<Case> cases = {
      {R"({"name":"g","inputs":[{"name":"A","shape":[4,8],"dtype":"float32"},
          {"name":"B","shape":[9,4],"dtype":"float32"}],
          "ops":[{"name":"Y","op":"matmul","inputs":["A","B"]}],"outputs":["Y"]})",
       {"'Y'", "[4, 8]", "[9, 4]"}},
      {R"({"name":"g","inputs":[{"name":"A","shape":[4],"dtype":"float32"}],
          "ops":[{"name":"Y","op":"frobnicate","inputs":["A"]}],"outputs":["Y"]})",
       {"'Y'", "frobnicate"}},
      {R"({"name":"g","inputs":[{"name":"A","shape":[4],"dtype":"float64"}],
          "ops":[{"name":"Y","op":"exp","inputs":["A"]}],"outputs":["Y"]})",
       {"float64"}},
      {R"({"name":"g","inputs":[{"name":"A","shape":[4],"dtype":"float32"}],
          "ops":[{"name":"Y","op":"exp","inputs":["Q"]}],"outputs":["Y"]})",
       {"'Y'", "'Q'"}},
      {R"({"name":"g","inputs":[{"name":"A","shape":[4],"dtype":"float32"}],
          "ops":[{"name":"Y","op":"exp","inputs":["A"]}],"outputs":["Z"]})",
       {"'Z'"}},
      {R"({"name":"g", "inputs": [})", {"JSON"}},
      // Sizes a worker cannot hold, or that overflow 64 bits, and names that
      // would reach generated code: refused, naming the limit.
      {R"({"name":"g","inputs":[{"name":"A","shape":[100000,100000],"dtype":"float32"}],
          "ops":[{"name":"Y","op":"exp","inputs":["A"]}],"outputs":["Y"]})",
       {"[100000, 100000]", "10000000000 elements", "limit"}},
      {R"({"name":"g","inputs":[{"name":"A","shape":[4294967296,4294967296,4,4],"dtype":"float32"}],
          "ops":[{"name":"Y","op":"exp","inputs":["A"]}],"outputs":["Y"]})",
       {"more than 2^63 elements"}},
      {R"({"name":"g","inputs":[{"name":"A","shape":[4],"dtype":"float32"}],
          "ops":[{"name":"Y\");system(\"id","op":"exp","inputs":["A"]}],"outputs":["Y\");system(\"id"]})",
       {"ops[0]: name", "position 1"}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].json_text);
    std::string path = dir_ + "/bad" + std::to_string(i) + ".json";
    std::ofstream(path) << cases[i].json_text;
    CommandResult r = server_.Client({"submit", path});
    EXPECT_NE(r.exit_code, 0);
    for (const auto& fragment : cases[i].expected) {
      EXPECT_NE(r.err.find(fragment), std::string::npos)
          << "missing '" << fragment << "' in " << r.err;
    }
  }
  // A graph that parses locally but fails server-side validation is refused
  // by the server itself with the same kind of message (the client does not
  // validate shapes).
  CommandResult list = server_.Client({"list", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_TRUE(list.Json()["jobs"].empty()) << "nothing may be queued for a bad graph";
  // Unknown job ids and bad backends get clear errors too.
  CommandResult missing = server_.Client({"get", "job-doesnotexist"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("job-doesnotexist"), std::string::npos) << missing.err;
  CommandResult backend = server_.Client({"submit", Example("softmax"), "--backend", "tpu9"});
  EXPECT_NE(backend.exit_code, 0);
  EXPECT_NE(backend.err.find("tpu9"), std::string::npos) << backend.err;
  // Still serving: a good job is accepted.
  std::string job = Submit(Example("softmax"));
  EXPECT_FALSE(job.empty());
  EXPECT_EQ(server_.WaitForSearch(job)["state"], "QUEUED");  // no workers in this test
  // A submit repeating a request id (a retry whose first reply was lost)
  // returns the first job; the CLI says so.
  CommandResult first = server_.Client({"submit", Example("softmax"), "--request-id", "r-1"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  CommandResult again =
      server_.Client({"submit", Example("softmax"), "--request-id", "r-1", "--json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.Json()["job_id"], std::string(absl::StripAsciiWhitespace(first.out)));
  EXPECT_EQ(again.Json()["existing"], true);
  EXPECT_EQ(server_.Client({"list", "--json"}).Json()["jobs"].size(), 2u)
      << "softmax's first job and the one of request id r-1";
  // The CLI: --version, usage errors exit 2, YIRAGE_SERVER is the default
  // address.
  const std::string client = BinDir() + "/yirage-client";
  CommandResult version = RunCommand({client, "--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_NE(version.out.find("yirage-client "), std::string::npos) << version.out;
  EXPECT_EQ(RunCommand({client, "--no-such-flag", "list"}).exit_code, 2);
  EXPECT_EQ(RunCommand({client, "submit"}).exit_code, 2) << "the graph is required";
  CommandResult by_env = RunCommand(
      {"/usr/bin/env", "YIRAGE_SERVER=" + server_.client_address(), client, "list", "--json"});
  ASSERT_EQ(by_env.exit_code, 0) << by_env.err;
  EXPECT_EQ(by_env.Json()["jobs"].size(), 2u);
  // `get` says when the job was submitted (not started: no worker here).
  CommandResult shown = server_.Client({"get", job});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  EXPECT_NE(shown.out.find("times      submitted 20"), std::string::npos) << shown.out;
  EXPECT_NE(shown.out.find(" UTC"), std::string::npos) << shown.out;
  EXPECT_EQ(shown.out.find(", started"), std::string::npos) << shown.out;
}

// Over the real worker port: results for a leased batch without its lease
// token (under the holder's worker id or another) are refused and change
// nothing; the holder's results finish the job.
TEST_F(EndToEndTest, ForgedResultsAreRefusedAndTheLeaseHolderFinishesTheJob) {
  // The confirmation alone (no final round between the search and it).
  StartServer({"--local-workers", "none", "--finalists", "0"});
  const std::string job = Submit(Example("softmax"), {"--budget-candidates", "2"});
  ASSERT_FALSE(job.empty());
  ASSERT_EQ(server_.WaitForSearch(job)["state"], "QUEUED");
  auto call = WorkerCaller();
  yirage::v1::SynchronizeRequest hello;
  hello.set_worker_id("w1");
  hello.set_backend("cpu");
  hello.mutable_status()->mutable_idle();
  yirage::v1::SynchronizeResponse leased;
  ASSERT_TRUE(call(hello, &leased).ok());
  ASSERT_TRUE(leased.has_execute());
  const yirage::v1::Batch& batch = leased.execute().batch();
  ASSERT_EQ(batch.candidates_size(), 2);
  auto report = [&](const std::string& worker, const std::string& token, double fast_us) {
    yirage::v1::SynchronizeRequest r;
    r.set_worker_id(worker);
    r.set_backend("cpu");
    auto* executing = r.mutable_status()->mutable_executing();
    executing->set_batch_id(batch.batch_id());
    executing->set_lease_token(token);
    for (const auto& c : batch.candidates()) {
      auto* result = executing->add_completed();
      result->set_candidate_id(c.candidate_id());
      result->set_status(yirage::v1::VERIFIED);
      const bool baseline = c.candidate_id() == batch.baseline_candidate_id();
      result->set_time_us(baseline ? 100 : fast_us);
      result->set_baseline_time_us(100);
    }
    return r;
  };
  for (const auto& [worker, token] : {std::pair<std::string, std::string>{"w1", ""},
                                      {"forger", ""},
                                      {"forger", batch.lease_token()},
                                      {"w1", "0123456789abcdef0123456789abcdef"}}) {
    yirage::v1::SynchronizeResponse refused;
    grpc::Status status = call(report(worker, token, 0.001), &refused);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << worker;
    EXPECT_NE(status.error_message().find("lease token"), std::string::npos)
        << status.error_message();
  }
  json candidates = Candidates(job);
  for (const auto& c : candidates) EXPECT_NE(c["status"], "VERIFIED") << c.dump();
  yirage::v1::SynchronizeResponse stored;
  ASSERT_TRUE(call(report("w1", batch.lease_token(), 50), &stored).ok());
  EXPECT_EQ(stored.acknowledged_size(), 2);
  CommandResult got = server_.Client({"get", job, "--json"});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  json j = got.Json();
  // w1's result wins, but "forger" is connected too (its calls were
  // refused, not its presence): it runs the winner again before the job
  // succeeds, under a lease of its own.
  EXPECT_EQ(j["state"], "RUNNING") << j.dump();
  EXPECT_DOUBLE_EQ(j["best"]["time_us"].get<double>(), 50);
  yirage::v1::SynchronizeResponse nothing;
  EXPECT_FALSE(call(hello, &nothing).ok() && nothing.has_execute()) << "w1 may not confirm itself";
  yirage::v1::SynchronizeRequest second = hello;
  second.set_worker_id("forger");
  yirage::v1::SynchronizeResponse confirm;
  ASSERT_TRUE(call(second, &confirm).ok());
  ASSERT_TRUE(confirm.has_execute());
  const yirage::v1::Batch& check = confirm.execute().batch();
  ASSERT_EQ(check.candidates_size(), 1);
  auto* executing = second.mutable_status()->mutable_executing();
  executing->set_batch_id(check.batch_id());
  executing->set_lease_token(check.lease_token());
  auto* result = executing->add_completed();
  result->set_candidate_id(check.candidates(0).candidate_id());
  result->set_status(yirage::v1::VERIFIED);
  result->set_time_us(55);
  result->set_baseline_time_us(100);
  ASSERT_TRUE(call(second, &stored).ok());
  j = server_.Client({"get", job, "--json"}).Json();
  EXPECT_EQ(j["state"], "SUCCEEDED") << j.dump();
  EXPECT_DOUBLE_EQ(j["best"]["time_us"].get<double>(), 50);
  EXPECT_EQ(j["best"]["confirmation"]["worker_id"], "forger") << j.dump();
}

// A worker with a real lease reports a fantastic time (0.001 us against a
// 1e6 us baseline) for every candidate it gets, beside an honest CPU worker:
// each forged winner is run again by the honest worker and refuted, and the
// job succeeds with the honest worker's best, which the forger confirms
// (it can only confirm a consistent result or refute; it cannot promote).
TEST_F(EndToEndTest, AForgedWinnerIsRefutedByASecondWorker) {
  // The confirmation alone (no final round between the search and it).
  StartServer({"--local-workers", "none", "--batch-size", "2", "--finalists", "0"});
  const std::string job = Submit(Example("softmax"), {"--budget-candidates", "4"});
  ASSERT_FALSE(job.empty());
  json searched = server_.WaitForSearch(job);
  ASSERT_EQ(searched["state"], "QUEUED") << searched.dump();
  const int generated = searched["candidates_generated"];
  ASSERT_GE(generated, 3) << "the forger's batch and at least one for the honest worker";
  auto call = WorkerCaller();
  yirage::v1::SynchronizeRequest idle;
  idle.set_worker_id("forger");
  idle.set_backend("cpu");
  idle.mutable_status()->mutable_idle();
  std::mutex forged_mu;
  std::set<int64_t> forged;  // every candidate the forger reported
  // The forger's results for `batch`: all VERIFIED, absurdly fast.
  auto forge = [&](const yirage::v1::Batch& batch) {
    yirage::v1::SynchronizeRequest r = idle;
    auto* executing = r.mutable_status()->mutable_executing();
    executing->set_batch_id(batch.batch_id());
    executing->set_lease_token(batch.lease_token());
    std::lock_guard<std::mutex> lock(forged_mu);
    for (const auto& c : batch.candidates()) {
      auto* result = executing->add_completed();
      result->set_candidate_id(c.candidate_id());
      result->set_status(yirage::v1::VERIFIED);
      result->set_time_us(0.001);
      result->set_baseline_time_us(1e6);
      result->set_source("// forged");
      forged.insert(c.candidate_id());
    }
    return r;
  };
  // The forger leases the first batch (the baseline and the first candidate).
  yirage::v1::SynchronizeResponse leased;
  ASSERT_TRUE(call(idle, &leased).ok());
  ASSERT_TRUE(leased.has_execute());
  const yirage::v1::Batch first = leased.execute().batch();
  ASSERT_EQ(first.candidates_size(), 2);

  // The honest worker takes the rest before the forger reports, so that the
  // forger never gets an ordinary candidate again.
  const pid_t honest =
      SpawnProcess({BinDir() + "/yirage-worker", "--scheduler", server_.worker_address(),
                    "--backend", "cpu", "--worker-id", "honest"},
                   dir_ + "/honest.log", dir_ + "/honest.log");
  ASSERT_GT(honest, 0);
  bool rest_taken = false;
  for (auto until = std::chrono::steady_clock::now() + seconds(60);
       !rest_taken && std::chrono::steady_clock::now() < until;) {
    rest_taken = true;
    for (const auto& c : Candidates(job)) rest_taken &= c["status"] != "PENDING";
    if (!rest_taken) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(rest_taken) << "the honest worker never leased the rest";

  yirage::v1::SynchronizeResponse stored;
  ASSERT_TRUE(call(forge(first), &stored).ok());
  ASSERT_EQ(stored.acknowledged_size(), 2);
  ASSERT_FALSE(stored.has_execute());
  // From now on the forger polls as a worker does and forges whatever it
  // gets: only confirmations are left for it.
  std::atomic<bool> stop{false};
  std::thread forger([&] {
    while (!stop.load()) {
      yirage::v1::SynchronizeResponse response;
      if (call(idle, &response).ok() && response.has_execute()) {
        yirage::v1::SynchronizeResponse ignored;
        (void)call(forge(response.execute().batch()), &ignored);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  });
  json done = server_.WaitForJob(job, seconds(180));
  stop = true;
  forger.join();
  kill(honest, SIGTERM);
  waitpid(honest, nullptr, 0);
  ASSERT_TRUE(done.is_object());
  EXPECT_EQ(done["state"], "SUCCEEDED") << done.dump();
  EXPECT_EQ(done["candidates_generated"], generated) << "confirmations are not candidates";
  EXPECT_EQ(done["candidates_evaluated"], generated);
  ASSERT_TRUE(done["best"].is_object()) << done.dump();
  EXPECT_EQ(done["best"]["worker_id"], "honest") << done.dump();
  const int64_t best = done["best"]["candidate_id"];
  ASSERT_TRUE(done["best"]["confirmation"].is_object()) << done.dump();
  EXPECT_EQ(done["best"]["confirmation"]["worker_id"], "forger");
  EXPECT_LT(done["best"]["speedup"].get<double>(), 1000) << "an honest measurement";

  int refuted = 0, confirmations = 0;
  for (const auto& c : Candidates(job)) {
    const int64_t id = c["candidate_id"];
    if (c["confirms"].get<int64_t>() != 0) {
      ++confirmations;
      continue;
    }
    if (forged.count(id) == 0) continue;
    EXPECT_NE(id, best);
    // Refuted by the honest worker (or, had it timed one consistently,
    // confirmed; at a millionth of the baseline's time it cannot).
    EXPECT_EQ(c["status"], "ERROR") << c.dump();
    EXPECT_NE(c["error"].get<std::string>().find("not confirmed by worker honest: timed at"),
              std::string::npos)
        << c.dump();
    ++refuted;
  }
  EXPECT_EQ(refuted, 2) << "the baseline and the first candidate";
  EXPECT_EQ(confirmations, 3) << "two refuted, one confirmed";
  // `get` says who confirmed the winner.
  CommandResult shown = server_.Client({"get", job});
  EXPECT_NE(shown.out.find("confirmed by forger"), std::string::npos) << shown.out;
}

TEST_F(EndToEndTest, KilledWorkerIsReplacedAndNoCandidateIsLost) {
  StartServer({"--local-workers", "cpu", "--confirm-winners", "false", "--lease-seconds", "3",
               "--batch-size", "3"});
  std::string job_id = Submit(Example("rms_norm_linear"), {"--budget-candidates", "12"});
  ASSERT_FALSE(job_id.empty());
  // Wait until a worker is in the middle of a batch, then SIGKILL it.
  int killed = 0;
  auto deadline = std::chrono::steady_clock::now() + seconds(120);
  while (!killed && std::chrono::steady_clock::now() < deadline) {
    for (const auto& w : Workers()) {
      if (w["state"] == "executing" && w["connected"].get<bool>()) {
        json job = server_.Client({"get", job_id, "--json"}).Json();
        if (job.is_object() && job["candidates_evaluated"].get<int>() >= 1) {
          killed = w["pid"];
          ASSERT_EQ(kill(killed, SIGKILL), 0);
          break;
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_NE(killed, 0) << "never saw an executing worker";
  json job = server_.WaitForJob(job_id, seconds(300));
  ASSERT_TRUE(job.is_object());
  EXPECT_EQ(job["state"], "SUCCEEDED") << job.dump();
  json candidates = OwnCandidates(job_id);
  EXPECT_EQ(candidates.size(), 12u);
  int verified = 0;
  for (const auto& c : candidates) {
    EXPECT_TRUE(IsFinal(c["status"])) << c.dump();
    verified += c["status"] == "VERIFIED";
  }
  EXPECT_GT(verified, 0);
  // The server restarted the worker: a live one with another pid.
  bool replaced = false;
  for (const auto& w : Workers()) {
    replaced |= w["connected"].get<bool>() && w["pid"].get<int>() != killed;
  }
  EXPECT_TRUE(replaced);
  EXPECT_NE(server_.Log().find("killed by signal 9"), std::string::npos);
}

TEST_F(EndToEndTest, KilledServerResumesTheJobKeepingEveryMeasuredResult) {
  StartServer({"--local-workers", "cpu", "--confirm-winners", "false", "--lease-seconds", "3",
               "--batch-size", "2"});
  std::string job_id = Submit(Example("rms_norm_linear"), {"--budget-candidates", "10"});
  ASSERT_FALSE(job_id.empty());
  auto deadline = std::chrono::steady_clock::now() + seconds(120);
  json before;
  while (std::chrono::steady_clock::now() < deadline) {
    json job = server_.Client({"get", job_id, "--json"}).Json();
    if (job.is_object() && job["candidates_evaluated"].get<int>() >= 3 &&
        job["state"] == "RUNNING") {
      before = OwnCandidates(job_id);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(before.empty()) << "the job never got going";
  std::vector<int> worker_pids;
  for (const auto& w : Workers()) worker_pids.push_back(w["pid"].get<int>());
  ASSERT_FALSE(worker_pids.empty());
  server_.Kill();  // SIGKILL: no chance to clean up
  // Its local workers go with it (SIGTERM on the parent's death) instead of
  // lingering as orphans that retry the dead address forever.
  for (int pid : worker_pids) {
    auto gone_by = std::chrono::steady_clock::now() + seconds(30);
    while (!ProcessGone(pid) && std::chrono::steady_clock::now() < gone_by) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    EXPECT_TRUE(ProcessGone(pid)) << "local worker " << pid << " outlived its server";
  }

  StartServer({"--local-workers", "cpu", "--confirm-winners", "false", "--lease-seconds", "3",
               "--batch-size", "2"});
  json job = server_.WaitForJob(job_id, seconds(300));
  ASSERT_TRUE(job.is_object());
  EXPECT_EQ(job["state"], "SUCCEEDED") << job.dump();
  json after = OwnCandidates(job_id);
  ASSERT_EQ(after.size(), before.size());
  int kept = 0;
  for (size_t i = 0; i < before.size(); ++i) {
    EXPECT_TRUE(IsFinal(after[i]["status"])) << after[i].dump();
    if (IsFinal(before[i]["status"])) {
      // Measured before the crash: kept exactly (a winner that a second
      // worker did not confirm since is ERROR, its measurement kept).
      if (!Refuted(after[i])) {
        EXPECT_EQ(after[i]["status"], before[i]["status"]);
      }
      EXPECT_EQ(after[i]["time_us"], before[i]["time_us"]);
      EXPECT_EQ(after[i]["worker_id"], before[i]["worker_id"]);
      ++kept;
    }
  }
  EXPECT_GE(kept, 3) << Candidates(job_id).dump();
}

// A worker whose timings of one plan are lucky at first (the test backend's
// YIRAGE_TEST_LUCKY_PLAN: synthetic times, that plan 1 us in its first
// batch and 1000 us after it, the others 50 to 89 us, the baseline 100 us,
// whatever the load): the search measures it far ahead of the rest,
// the final round times it beside the other finalists and the baseline, and
// the best median speedup of that round wins, not the lucky draw.
TEST_F(EndToEndTest, TheFinalRoundSeesThroughALuckyMeasurement) {
  std::string wrapper = dir_ + "/lucky-worker.sh";
  std::ofstream(wrapper) << "#!/bin/sh\nexec " << BinDir() << "/yirage-worker \"$@\" "
                         << "--backend-library " << BinDir() << "/libyirage_backend_crashtest.so\n";
  std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
  constexpr char kLucky[] = "[S+Y] rows b4";
  setenv("YIRAGE_TEST_LUCKY_PLAN", kLucky, 1);
  StartServer({"--local-workers", "cpu", "--confirm-winners", "false", "--worker-binary", wrapper,
               "--finalists", "3"});
  unsetenv("YIRAGE_TEST_LUCKY_PLAN");
  const std::string job_id = Submit(Example("softmax"), {"--budget-candidates", "6"});
  ASSERT_FALSE(job_id.empty());
  json job = server_.WaitForJob(job_id, seconds(300));
  ASSERT_TRUE(job.is_object());
  ASSERT_EQ(job["state"], "SUCCEEDED") << job.dump();
  std::set<int64_t> lucky;
  int finalists = 0;
  double lucky_speedup = 0, best_other = 0;  // in the search
  for (const auto& c : Candidates(job_id)) {
    const bool is_lucky = c["description"].get<std::string>().find(kLucky) != std::string::npos;
    if (c["final_of"].get<int64_t>() != 0) {
      ++finalists;
      if (is_lucky) {
        EXPECT_EQ(c["status"], "VERIFIED") << c.dump();
        EXPECT_LT(c["speedup"].get<double>(), 1.0) << "side by side it is slower";
      }
    } else if (is_lucky && c["same_kernel_as"] == 0) {
      lucky_speedup = std::max(lucky_speedup, c["speedup"].get<double>());
      lucky.insert(c["candidate_id"].get<int64_t>());
    } else if (!is_lucky && c["status"] == "VERIFIED" && c["same_kernel_as"] == 0) {
      best_other = std::max(best_other, c["speedup"].get<double>());
    }
  }
  // Without a final round the lucky draw would have won.
  EXPECT_GT(lucky_speedup, best_other) << Candidates(job_id).dump();
  ASSERT_FALSE(lucky.empty()) << Candidates(job_id).dump();
  EXPECT_EQ(finalists, 3);
  const int64_t final_of = job["best"]["final_of"];
  EXPECT_NE(final_of, 0) << job.dump();
  EXPECT_EQ(lucky.count(final_of), 0u) << "the lucky plan won: " << job.dump();
  // `get` says how the winner was chosen.
  CommandResult shown = server_.Client({"get", job_id});
  EXPECT_NE(shown.out.find("final round: candidate " + std::to_string(final_of)), std::string::npos)
      << shown.out;
}

// The result cache: the same graph submitted again is answered from the
// first job (its winner and baseline verified and timed again on the
// worker, no search); --no-cache searches. After a restart whose workers
// crash on the cached winner, the cached job searches afresh, says why, and
// the first job answers no more. Timings are synthetic (the test backend's:
// the baseline 100 us, every other plan 50 to 89 us), so that the first
// job's winner is a kernel of ours whatever the machine's load.
TEST_F(EndToEndTest, TheSameGraphIsAnsweredFromTheCacheAndVerifiedAgain) {
  std::string wrapper = dir_ + "/crashing-worker.sh";
  std::ofstream(wrapper) << "#!/bin/sh\nexec " << BinDir() << "/yirage-worker \"$@\" "
                         << "--backend-library " << BinDir() << "/libyirage_backend_crashtest.so\n";
  std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
  // The server and the workers it starts keep the environment of its start.
  setenv("YIRAGE_TEST_LUCKY_PLAN", "(no plan has this)", 1);
  StartServer({"--local-workers", "cpu", "--confirm-winners", "false", "--worker-binary", wrapper});
  unsetenv("YIRAGE_TEST_LUCKY_PLAN");
  const std::string graph = Example("softmax");
  const std::string first = Submit(graph, {"--budget-candidates", "6"});
  ASSERT_FALSE(first.empty());
  json done = server_.WaitForJob(first, seconds(300));
  ASSERT_EQ(done["state"], "SUCCEEDED") << done.dump();
  CommandResult again = server_.Client({"submit", graph, "--json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.Json()["cached_from"], first) << again.out;
  EXPECT_EQ(again.Json()["candidates_generated"], 2);
  const std::string cached = again.Json()["job_id"];
  json job = server_.WaitForJob(cached, seconds(120));
  EXPECT_EQ(job["state"], "SUCCEEDED") << job.dump();
  EXPECT_EQ(job["cached_from"], first);
  EXPECT_EQ(job["candidates_evaluated"], 2) << "verified and timed again here";
  for (const auto& c : Candidates(cached)) {
    EXPECT_EQ(c["status"], "VERIFIED") << c.dump();
    EXPECT_FALSE(c["worker_id"].get<std::string>().empty());
  }
  CommandResult shown = server_.Client({"get", cached});
  EXPECT_NE(shown.out.find("answered from job " + first), std::string::npos) << shown.out;
  // Another tolerance is another question; --no-cache always searches.
  CommandResult other =
      server_.Client({"submit", graph, "--json", "--rtol", "0.01", "--budget-candidates", "2"});
  EXPECT_EQ(other.Json()["cached_from"], "") << other.out;
  CommandResult fresh =
      server_.Client({"submit", graph, "--json", "--no-cache", "--budget-candidates", "2"});
  EXPECT_EQ(fresh.Json()["cached_from"], "") << fresh.out;
  server_.WaitForJob(other.Json()["job_id"], seconds(300));
  server_.WaitForJob(fresh.Json()["job_id"], seconds(300));

  // Workers that crash on the cached winner's plan (its description says
  // "(cached from ...)"): it fails, and the job searches afresh.
  ASSERT_EQ(server_.Stop(), 0);
  setenv("YIRAGE_TEST_CRASH_PLAN", "(cached from", 1);
  setenv("YIRAGE_TEST_LUCKY_PLAN", "(no plan has this)", 1);
  StartServer({"--local-workers", "cpu", "--confirm-winners", "false", "--worker-binary", wrapper,
               "--lease-seconds", "2", "--max-attempts", "1"});
  unsetenv("YIRAGE_TEST_CRASH_PLAN");
  unsetenv("YIRAGE_TEST_LUCKY_PLAN");
  CommandResult third = server_.Client({"submit", graph, "--json", "--budget-candidates", "4"});
  ASSERT_EQ(third.exit_code, 0) << third.err;
  const std::string answered = third.Json()["cached_from"];
  EXPECT_FALSE(answered.empty()) << third.out;
  ASSERT_EQ(third.Json()["candidates_generated"], 2)
      << "the baseline and a winner of ours (synthetic times): " << third.out;
  const std::string researched = third.Json()["job_id"];
  job = server_.WaitForJob(researched, seconds(300));
  EXPECT_EQ(job["state"], "SUCCEEDED") << job.dump();
  EXPECT_NE(job["message"].get<std::string>().find("the cached winner of job " + answered +
                                                   " failed here"),
            std::string::npos)
      << job.dump();
  EXPECT_EQ(job["candidates_generated"].get<int>(), 4) << "a full search, in its budget";
  // The failed source answers no more (the re-searched job may).
  CommandResult fourth = server_.Client({"submit", graph, "--json"});
  EXPECT_NE(fourth.Json()["cached_from"], answered) << fourth.out;
}

TEST_F(EndToEndTest, CandidateThatKeepsKillingWorkersIsMarkedFailed) {
  // Workers whose backend segfaults when it runs the plans that fuse the norm
  // and the scale in one kernel before the matmul ([N+S][Y]).
  std::string wrapper = dir_ + "/crashing-worker.sh";
  std::ofstream(wrapper) << "#!/bin/sh\nexec " << BinDir() << "/yirage-worker \"$@\" "
                         << "--backend-library " << BinDir() << "/libyirage_backend_crashtest.so\n";
  std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
  setenv("YIRAGE_TEST_CRASH_PLAN", "[N+S][Y]", 1);
  StartServer({"--local-workers", "cpu", "--confirm-winners", "false", "--worker-binary", wrapper,
               "--lease-seconds", "2", "--max-attempts", "2", "--batch-size", "2"});
  unsetenv("YIRAGE_TEST_CRASH_PLAN");
  std::string job_id = Submit(Example("rms_norm_linear"), {"--budget-candidates", "8"});
  ASSERT_FALSE(job_id.empty());
  json job = server_.WaitForJob(job_id, seconds(400));
  ASSERT_TRUE(job.is_object());
  EXPECT_EQ(job["state"], "SUCCEEDED") << job.dump();
  int crashed = 0, verified = 0;
  for (const auto& c : OwnCandidates(job_id)) {
    std::string description = c["description"];
    if (description.find("[N+S][Y]") != std::string::npos) {
      EXPECT_EQ(c["status"], "ERROR") << c.dump();
      EXPECT_EQ(c["attempts"], 2) << c.dump();
      EXPECT_NE(c["error"].get<std::string>().find("killed its worker 2 times"), std::string::npos)
          << c.dump();
      ++crashed;
    } else if (!Refuted(c)) {
      EXPECT_EQ(c["status"], "VERIFIED") << c.dump();  // innocent bystanders are unharmed
      EXPECT_EQ(c["attempts"], 0) << c.dump();
      ++verified;
    }
  }
  EXPECT_GT(crashed, 0);
  EXPECT_GT(verified, 0);
  EXPECT_EQ(job["best"]["plan"].get<std::string>().find("[N+S][Y]"), std::string::npos);
}

// SIGTERM in the middle of a batch: the worker lets its current step end
// (heartbeating), delivers what finished, gives the rest back and exits 0;
// nothing is blamed on it and the next worker finishes the job without
// waiting for a lease to expire.
TEST_F(EndToEndTest, SigtermDrainsTheBatchAndGivesTheRestBack) {
  // A lease far longer than the CPU worker's evaluation of the job on a
  // loaded CI machine, so that finishing before it ends shows that no
  // expiry was waited for.
  StartServer({"--local-workers", "none", "--lease-seconds", "300", "--batch-size", "4"});
  const std::string job_id = Submit(Example("rms_norm_linear"), {"--budget-candidates", "8"});
  ASSERT_FALSE(job_id.empty());
  auto start_worker = [&](const std::string& id) {
    return SpawnProcess({BinDir() + "/yirage-worker", "--scheduler", server_.worker_address(),
                         "--backend", "cpu", "--worker-id", id},
                        dir_ + "/" + id + ".log", dir_ + "/" + id + ".log");
  };
  const pid_t first = start_worker("drain-1");
  ASSERT_GT(first, 0);
  bool executing = false;
  for (auto until = std::chrono::steady_clock::now() + seconds(60);
       !executing && std::chrono::steady_clock::now() < until;) {
    for (const auto& w : Workers())
      executing |= w["worker_id"] == "drain-1" && w["state"] == "executing";
    if (!executing) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(executing) << "the worker never took a batch";
  ASSERT_EQ(kill(first, SIGTERM), 0);
  int status = -1;
  for (auto until = std::chrono::steady_clock::now() + seconds(40);
       std::chrono::steady_clock::now() < until;) {
    if (waitpid(first, &status, WNOHANG) == first) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(WIFEXITED(status)) << "the worker did not exit within 40 s of SIGTERM";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // Given back at once: nothing stays leased to the stopped worker.
  for (const auto& c : Candidates(job_id)) {
    EXPECT_NE(c["status"], "LEASED") << c.dump();
    EXPECT_EQ(c["attempts"], 0) << c.dump();
  }
  const auto second_started = std::chrono::steady_clock::now();
  const pid_t second = start_worker("drain-2");
  ASSERT_GT(second, 0);
  json job = server_.WaitForJob(job_id, seconds(270));
  kill(second, SIGTERM);
  waitpid(second, nullptr, 0);
  ASSERT_TRUE(job.is_object());
  EXPECT_EQ(job["state"], "SUCCEEDED") << job.dump();
  // Within the 300 s lease: no expiry was waited for.
  EXPECT_LT(std::chrono::steady_clock::now() - second_started, seconds(270));
  for (const auto& c : Candidates(job_id)) EXPECT_EQ(c["attempts"], 0) << c.dump();
}

// SIGTERM while a compile outlasts --drain-seconds: the worker gives up,
// gives the batch back and exits at once, and its compiler (a stand-in that
// hangs on a compile, with a child of its own as the driver has cc1plus)
// dies with it.
TEST_F(EndToEndTest, DrainThatRunsOutGivesTheBatchBackAndLeavesNoCompiler) {
  const std::string compiler = dir_ + "/hanging-cc";
  {
    std::ofstream script(compiler);
    script << "#!/bin/sh\n"
           << "[ \"$1\" = --version ] && { echo 'hanging-cc 1.0'; exit 0; }\n"
           // The probe's target query, answered as clang does (no listing).
           << "[ \"$1\" = -march=native ] && exit 1\n"
           << "d=$(dirname \"$0\"); sleep 300 & echo $! > \"$d/child.pid\"\n"
           << "echo $$ > \"$d/driver.pid\"; wait\n";
  }
  ASSERT_EQ(chmod(compiler.c_str(), 0755), 0);
  StartServer({"--local-workers", "none", "--lease-seconds", "60", "--batch-size", "4"});
  const std::string job_id = Submit(Example("rms_norm_linear"), {"--budget-candidates", "4"});
  ASSERT_FALSE(job_id.empty());
  setenv("YIRAGE_CPU_COMPILER", compiler.c_str(), 1);
  const pid_t worker =
      SpawnProcess({BinDir() + "/yirage-worker", "--scheduler", server_.worker_address(),
                    "--backend", "cpu", "--worker-id", "hung", "--drain-seconds", "2"},
                   dir_ + "/hung.log", dir_ + "/hung.log");
  unsetenv("YIRAGE_CPU_COMPILER");
  ASSERT_GT(worker, 0);
  const pid_t driver = PidFromFile(dir_ + "/driver.pid", seconds(60));
  const pid_t child = PidFromFile(dir_ + "/child.pid", seconds(5));
  ASSERT_GT(driver, 0) << "the worker never started its compiler";
  ASSERT_GT(child, 0);
  const auto sigterm = std::chrono::steady_clock::now();
  ASSERT_EQ(kill(worker, SIGTERM), 0);
  int status = -1;
  for (auto until = sigterm + seconds(30); std::chrono::steady_clock::now() < until;) {
    if (waitpid(worker, &status, WNOHANG) == worker) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(WIFEXITED(status)) << "the worker did not exit within 30 s of SIGTERM";
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The 2 s drain, then a few calls: far from the compiler's 60 s timeout.
  EXPECT_LT(std::chrono::steady_clock::now() - sigterm, seconds(15));
  const std::string log = ReadFile(dir_ + "/hung.log");
  EXPECT_NE(log.find("giving the batch back"), std::string::npos) << log;
  // No compiler left running (zombies waiting for init count as gone).
  EXPECT_TRUE(ProcessGoneWithin(driver, seconds(5))) << "the compiler outlived its worker";
  EXPECT_TRUE(ProcessGoneWithin(child, seconds(5))) << "the compiler's child outlived its worker";
  // The batch came back: nothing leased, nothing blamed.
  for (const auto& c : Candidates(job_id)) {
    EXPECT_NE(c["status"], "LEASED") << c.dump();
    EXPECT_EQ(c["attempts"], 0) << c.dump();
  }
  server_.Client({"cancel", job_id});
}

TEST_F(EndToEndTest, CancelMetricsAndCleanShutdown) {
  StartServer({"--local-workers", "none"});
  std::string job_id = Submit(Example("gated_mlp"));
  ASSERT_FALSE(job_id.empty());
  CommandResult cancel = server_.Client({"cancel", job_id, "--json"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_EQ(cancel.Json()["state"], "CANCELLED");
  CommandResult again = server_.Client({"cancel", job_id});
  EXPECT_NE(again.exit_code, 0);
  // Waiting on a cancelled job is not success.
  EXPECT_EQ(server_.Client({"watch", job_id}).exit_code, 1);

  // Metrics are refreshed by the maintenance loop.
  std::string metrics;
  for (int i = 0; i < 50; ++i) {
    metrics = HttpGet(server_.metrics_address(), "/metrics");
    if (metrics.find("yirage_jobs{state=\"cancelled\"} 1") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_NE(metrics.find("yirage_jobs{state=\"cancelled\"} 1"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("yirage_workers_connected"), std::string::npos);
  EXPECT_NE(metrics.find("yirage_candidates_evaluated_total"), std::string::npos);
  EXPECT_NE(metrics.find("yirage_candidate_evaluation_seconds"), std::string::npos);
  EXPECT_NE(metrics.find("yirage_job_submissions_total{result=\"accepted\"} 1"), std::string::npos);

  int status = server_.Stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_NE(server_.Log().find("yirage-server stopped"), std::string::npos);
}

// A spec file's variants become one job each; --wait ends with a summary
// of them (best time, speedup, and TFLOP/s and GB/s from the spec's
// formulas); a spec with a mistake submits nothing.
TEST_F(EndToEndTest, ASpecFileSubmitsOneJobPerVariant) {
  StartServer({"--local-workers", "cpu", "--confirm-winners", "false"});
  const std::string spec = dir_ + "/spec.yaml";
  {
    std::ofstream out(spec);
    out << "name: scaled_softmax\n"
           "dims: {R: 8, C: 64}\n"
           "dtype: float32\n"
           "inputs: {X: [R, C]}\n"
           "ops:\n"
           "  - {name: S, op: mul, inputs: [X], attrs: {scalar: 1 / sqrt(C)}}\n"
           "  - {name: Y, op: softmax, inputs: [S], attrs: {axis: -1}}\n"
           "outputs: [Y]\n"
           "flops: 5 * R * C\n"
           "bytes: 8 * R * C\n"
           "variants:\n"
           "  small: {}\n"
           "  tall: {dims: {R: 32}, rtol: 1e-3}\n";
  }
  CommandResult r = server_.Client(
      {"submit-spec", spec, "--wait", "--json", "--budget-candidates", "2"}, seconds(600));
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  json summary = r.Json();
  ASSERT_TRUE(summary.is_object()) << r.out;
  EXPECT_EQ(summary["spec"], "scaled_softmax");
  ASSERT_EQ(summary["variants"].size(), 2u) << r.out;
  const json& tall = summary["variants"][1];
  EXPECT_EQ(tall["variant"], "tall");
  EXPECT_EQ(tall["dims"]["R"], 32);
  EXPECT_EQ(tall["state"], "SUCCEEDED");
  EXPECT_DOUBLE_EQ(tall["flops"].get<double>(), 5.0 * 32 * 64);
  const double us = tall["best_time_us"].get<double>();
  ASSERT_GT(us, 0);
  EXPECT_NEAR(tall["gbps"].get<double>(), 8.0 * 32 * 64 / us * 1e-3, 1e-9);
  // Each job is its variant's graph, with its tolerance.
  json job = server_.Client({"get", tall["job_id"], "--json"}).Json();
  EXPECT_EQ(job["graph"], "scaled_softmax_tall") << job.dump();
  EXPECT_EQ(server_.Client({"get", summary["variants"][0]["job_id"], "--json"}).Json()["graph"],
            "scaled_softmax_small");
  // The table, for one variant by name.
  CommandResult table = server_.Client(
      {"submit-spec", spec, "--variant", "small", "--wait", "--budget-candidates", "2"},
      seconds(600));
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("VARIANT  DIMS"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("small    C=64 R=8"), std::string::npos) << table.out;
  EXPECT_EQ(table.out.find("tall"), std::string::npos) << table.out;
  // --print-graphs: the variants' graph JSON, submitting nothing.
  const size_t jobs = server_.Client({"list", "--json"}).Json()["jobs"].size();
  CommandResult printed = server_.Client({"submit-spec", spec, "--print-graphs"});
  ASSERT_EQ(printed.exit_code, 0) << printed.err;
  const json graphs = printed.Json();
  ASSERT_TRUE(graphs.is_array() && graphs.size() == 2) << printed.out;
  EXPECT_EQ(graphs[1]["name"], "scaled_softmax_tall");
  EXPECT_EQ(graphs[1]["inputs"][0]["shape"], json::array({32, 64})) << graphs[1].dump();
  // Mistakes: an unknown variant is a usage error, a bad spec an error;
  // neither submits anything.
  CommandResult unknown = server_.Client({"submit-spec", spec, "--variant", "huge"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("no variant 'huge' (the spec's: small, tall)"), std::string::npos)
      << unknown.err;
  {
    std::ofstream out(spec, std::ios::app);
    out << "  bad: {dims: {R: 7}, dtype: int4}\n";
  }
  CommandResult bad = server_.Client({"submit-spec", spec});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("variant 'bad'"), std::string::npos) << bad.err;
  EXPECT_EQ(server_.Client({"list", "--json"}).Json()["jobs"].size(), jobs)
      << "a spec with a bad variant submits no job";
}

}  // namespace
}  // namespace yirage::testing
