// Load on one scheduler with simulated workers (bench/load.sh starts the
// server and runs this):
//   yirage-load --client ADDR --worker ADDR [--jobs 1000] [--workers 64]
//               [--graph FILE] [--candidates 8] [--submitters 8]
// 1. Submits --jobs jobs of --graph from --submitters threads at once and
//    times every SubmitJob, then waits until every job has been searched.
// 2. Starts --workers simulated workers on the worker port: each leases a
//    batch, reports a VERIFIED result for every candidate at once (no
//    compile, no run: what is measured is the scheduler), and leases again.
// 3. Waits until every job is finished, then checks that none was lost:
//    every job SUCCEEDED with candidates_evaluated = candidates_generated.
// Prints submit latency percentiles, results stored per second and the
// check; exits 1 if a job is missing, unfinished or short of results.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/rpc_util.h"
#include "core/graph_json.h"
#include "grpcpp/grpcpp.h"
#include "yirage/v1/job.grpc.pb.h"
#include "yirage/v1/worker.grpc.pb.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

void SetDeadline(grpc::ClientContext* context, double seconds) {
  context->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6)));
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5));
  return v[i];
}

// One simulated worker: lease, report every candidate VERIFIED, repeat,
// until `stop`. Counts the results the scheduler acknowledged.
void SimulatedWorker(std::shared_ptr<grpc::Channel> channel, int index, int work_ms,
                     const std::atomic<bool>* stop, std::atomic<int64_t>* stored,
                     std::atomic<int64_t>* last_ack_ns, std::atomic<int64_t>* rpc_errors) {
  auto stub = yirage::v1::WorkerService::NewStub(channel);
  yirage::v1::SynchronizeRequest request;
  request.set_worker_id("load-" + std::to_string(index));
  request.set_backend("cpu");
  request.set_hostname("load");
  request.set_pid(100000 + index);
  request.set_device_description("simulated");
  request.mutable_status()->mutable_idle();
  while (!stop->load()) {
    grpc::ClientContext context;
    SetDeadline(&context, 30);
    yirage::v1::SynchronizeResponse response;
    const grpc::Status status = stub->Synchronize(&context, request, &response);
    if (!status.ok()) {
      if ((*rpc_errors)++ < 3) {
        std::fprintf(stderr, "yirage-load: Synchronize: %s\n",
                     yirage::FromGrpc(status).ToString().c_str());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (response.acknowledged_size() > 0) {
      *stored += response.acknowledged_size();
      // When the last result was acknowledged: the rate is measured up to
      // it, not up to the next poll of the job list.
      const int64_t t = Clock::now().time_since_epoch().count();
      int64_t seen = last_ack_ns->load();
      while (seen < t && !last_ack_ns->compare_exchange_weak(seen, t)) {
      }
    }
    if (response.has_execute()) {
      const yirage::v1::Batch& batch = response.execute().batch();
      // The batch's "evaluation" (bench/chaos.sh gives it time to be hit).
      if (work_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(work_ms));
      yirage::v1::WorkerStatus::Executing* executing =
          request.mutable_status()->mutable_executing();
      executing->Clear();
      executing->set_batch_id(batch.batch_id());
      executing->set_lease_token(batch.lease_token());
      for (const yirage::v1::BatchCandidate& c : batch.candidates()) {
        yirage::v1::CandidateResult* r = executing->add_completed();
        r->set_candidate_id(c.candidate_id());
        r->set_status(yirage::v1::VERIFIED);
        // A plan's time is its own (the same on every worker), so that a
        // second worker's confirmation agrees, as it would on real ones.
        r->set_time_us(5.0 + static_cast<double>(
                                 std::hash<std::string>{}(c.plan().SerializeAsString()) % 4500) /
                                 100.0);
        r->set_baseline_time_us(60.0);
        r->set_evaluation_seconds(0.001);
        r->set_source("// simulated");
      }
      continue;  // report at once
    }
    if (request.status().has_executing() && response.acknowledged_size() > 0) {
      request.mutable_status()->mutable_idle();  // all reported: lease the next batch
      continue;
    }
    if (request.status().has_executing() && response.has_abandon()) {
      request.mutable_status()->mutable_idle();
      continue;
    }
    // Nothing to do: call again as the scheduler asks, at most 50 ms later
    // (a real worker waits the full interval; this drives the scheduler).
    std::this_thread::sleep_for(std::chrono::milliseconds(
        static_cast<int>(std::min(0.05, response.next_call_after_seconds()) * 1000)));
  }
  request.mutable_status()->mutable_idle()->set_stopping(true);
  grpc::ClientContext context;
  SetDeadline(&context, 5);
  yirage::v1::SynchronizeResponse ignored;
  (void)stub->Synchronize(&context, request, &ignored);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Load on one scheduler with simulated workers"};
  std::string client_address = "127.0.0.1:50051", worker_address = "127.0.0.1:50052";
  std::string graph_file = "examples/graphs/rms_norm_linear.json";
  int jobs = 1000, workers = 64, candidates = 8, submitters = 8;
  double timeout = 600;
  int work_ms = 0;
  app.add_option("--client", client_address, "the server's client API address");
  app.add_option("--worker", worker_address, "the server's worker API address");
  app.add_option("--graph", graph_file, "graph JSON every job submits");
  app.add_option("--jobs", jobs, "jobs to submit")->check(CLI::Range(1, 1000000));
  app.add_option("--workers", workers, "simulated workers")->check(CLI::Range(1, 4096));
  app.add_option("--candidates", candidates, "budget_candidates of each job")
      ->check(CLI::Range(1, 1000));
  app.add_option("--submitters", submitters, "threads submitting at once")
      ->check(CLI::Range(1, 256));
  app.add_option("--timeout", timeout, "seconds to wait for every job to finish");
  app.add_option("--work-ms", work_ms, "a simulated worker's time on a batch before it reports")
      ->check(CLI::Range(0, 600000));
  CLI11_PARSE(app, argc, argv);

  std::ifstream in(graph_file);
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<yirage::v1::Graph> graph = yirage::core::ParseGraphJson(text.str());
  if (!graph.ok()) {
    std::fprintf(stderr, "yirage-load: %s: %s\n", graph_file.c_str(),
                 std::string(graph.status().message()).c_str());
    return 2;
  }
  auto client_channel = yirage::MakeChannel(client_address);
  auto jobs_stub = yirage::v1::JobService::NewStub(client_channel);

  // 1. Submits.
  std::vector<std::string> job_ids(jobs);
  std::vector<double> latency(jobs, -1);
  std::atomic<int> next{0};
  std::atomic<int> submit_errors{0};
  const auto submit_start = Clock::now();
  {
    std::vector<std::thread> threads;
    for (int t = 0; t < submitters; ++t) {
      threads.emplace_back([&] {
        auto stub = yirage::v1::JobService::NewStub(client_channel);
        for (int i = next++; i < jobs; i = next++) {
          yirage::v1::SubmitJobRequest request;
          *request.mutable_graph() = *graph;
          request.set_backend("cpu");
          request.set_budget_candidates(candidates);
          grpc::ClientContext context;
          SetDeadline(&context, 60);
          yirage::v1::SubmitJobResponse response;
          const auto start = Clock::now();
          const grpc::Status status = stub->SubmitJob(&context, request, &response);
          latency[i] = Seconds(Clock::now() - start);
          if (status.ok()) {
            job_ids[i] = response.job_id();
          } else if (submit_errors++ < 3) {
            std::fprintf(stderr, "yirage-load: SubmitJob: %s\n", status.error_message().c_str());
          }
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  const double submit_seconds = Seconds(Clock::now() - submit_start);
  std::printf(
      "submitted %d jobs in %.2f s from %d threads (%d errors): %.0f jobs/s; latency "
      "p50 %.1f ms, p99 %.1f ms, max %.1f ms\n",
      jobs - submit_errors.load(), submit_seconds, submitters, submit_errors.load(),
      jobs / submit_seconds, Percentile(latency, 0.5) * 1e3, Percentile(latency, 0.99) * 1e3,
      Percentile(latency, 1.0) * 1e3);

  // The searches (off the RPC thread), before any worker: what follows
  // measures the ingestion of results alone.
  const auto search_start = Clock::now();
  int searching = jobs;
  while (searching > 0 && Seconds(Clock::now() - search_start) < timeout) {
    grpc::ClientContext context;
    SetDeadline(&context, 30);
    yirage::v1::ListJobsRequest request;
    request.set_limit(jobs + 10);
    yirage::v1::ListJobsResponse response;
    if (jobs_stub->ListJobs(&context, request, &response).ok()) {
      searching = 0;
      for (const yirage::v1::Job& job : response.jobs()) {
        searching += job.state() == yirage::v1::SEARCHING;
      }
    }
    if (searching > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const double search_seconds = Seconds(Clock::now() - submit_start);
  std::printf("every job searched %.2f s after the first submit: %.1f jobs/s\n", search_seconds,
              jobs / search_seconds);

  // 2. Workers, until every job is finished.
  std::atomic<bool> stop{false};
  std::atomic<int64_t> stored{0}, rpc_errors{0}, last_ack_ns{0};
  auto worker_channel = yirage::MakeChannel(worker_address);
  std::vector<std::thread> worker_threads;
  const auto work_start = Clock::now();
  for (int w = 0; w < workers; ++w) {
    worker_threads.emplace_back(SimulatedWorker, worker_channel, w, work_ms, &stop, &stored,
                                &last_ack_ns, &rpc_errors);
  }
  int finished = 0;
  double last_done = 0;
  while (Seconds(Clock::now() - work_start) < timeout) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    grpc::ClientContext context;
    SetDeadline(&context, 30);
    yirage::v1::ListJobsRequest request;
    request.set_limit(jobs + 10);
    yirage::v1::ListJobsResponse response;
    if (!jobs_stub->ListJobs(&context, request, &response).ok()) continue;
    finished = 0;
    for (const yirage::v1::Job& job : response.jobs()) {
      finished += job.state() == yirage::v1::SUCCEEDED || job.state() == yirage::v1::FAILED ||
                  job.state() == yirage::v1::CANCELLED;
    }
    last_done = Seconds(Clock::now() - work_start);
    if (finished >= jobs - submit_errors.load()) break;
  }
  stop = true;
  for (std::thread& t : worker_threads) t.join();
  const double ingest_seconds =
      last_ack_ns.load() > 0
          ? Seconds(Clock::time_point(Clock::duration(last_ack_ns.load())) - work_start)
          : last_done;
  std::printf(
      "%d workers: %lld results stored in %.2f s (the last acknowledged at %.2f s): %.0f "
      "results/s (%lld RPC errors)\n",
      workers, static_cast<long long>(stored.load()), last_done, ingest_seconds,
      stored.load() / std::max(ingest_seconds, 1e-9), static_cast<long long>(rpc_errors.load()));

  // 3. Nothing lost.
  int succeeded = 0, short_of_results = 0, missing = 0;
  for (const std::string& id : job_ids) {
    if (id.empty()) continue;
    grpc::ClientContext context;
    SetDeadline(&context, 30);
    yirage::v1::GetJobRequest request;
    request.set_job_id(id);
    yirage::v1::Job job;
    if (!jobs_stub->GetJob(&context, request, &job).ok()) {
      ++missing;
      continue;
    }
    succeeded += job.state() == yirage::v1::SUCCEEDED;
    short_of_results += job.candidates_evaluated() != job.candidates_generated();
  }
  const int submitted = jobs - submit_errors.load();
  std::printf("check: %d of %d submitted jobs SUCCEEDED, %d short of results, %d missing\n",
              succeeded, submitted, short_of_results, missing);
  return succeeded == submitted && short_of_results == 0 && missing == 0 ? 0 : 1;
}
