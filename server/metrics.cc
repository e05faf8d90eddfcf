#include "server/metrics.h"

#include <exception>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "prometheus/text_serializer.h"
#include "yirage/build_info.h"

namespace yirage::server {
namespace {

// Backends whose gauges are exported even at 0 (scheduler.cc's list).
const char* const kMetricsBackends[] = {"cpu", "cuda", "hip", "level_zero"};

// Seconds, from 10 ms to 6 h: jobs and their searches.
prometheus::Histogram::BucketBoundaries JobSecondsBuckets() {
  return {0.01, 0.05, 0.1, 0.25, 0.5,  1,    2.5,  5,    10,    30,
          60,   120,  300, 600,  1200, 1800, 3600, 7200, 10800, 21600};
}

// Seconds, from 1 ms to 1 min: candidate phases.
prometheus::Histogram::BucketBoundaries PhaseSecondsBuckets() {
  return {0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

// Seconds, from 0.1 ms to 10 s: RPCs and SQLite transactions.
prometheus::Histogram::BucketBoundaries FastSecondsBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};
}

std::string MetricLabel(const std::string& s) { return absl::AsciiStrToLower(s); }

}  // namespace

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  prometheus::BuildGauge()
      .Name("yirage_build_info")
      .Help("The running server's version and git commit (value 1).")
      .Register(*registry_)
      .Add({{"version", YIRAGE_VERSION}, {"git_sha", YIRAGE_GIT_SHA}})
      .Set(1);
  auto& jobs = prometheus::BuildGauge()
                   .Name("yirage_jobs")
                   .Help("Jobs in the database, by state.")
                   .Register(*registry_);
  for (auto state : {yirage::v1::SEARCHING, yirage::v1::QUEUED, yirage::v1::RUNNING,
                     yirage::v1::SUCCEEDED, yirage::v1::FAILED, yirage::v1::CANCELLED}) {
    jobs_[state] = &jobs.Add({{"state", MetricLabel(yirage::v1::JobState_Name(state))}});
  }
  candidates_ = &prometheus::BuildCounter()
                     .Name("yirage_candidates_evaluated_total")
                     .Help("Candidates that reached a final status, by outcome and backend.")
                     .Register(*registry_);
  workers_connected_ = &prometheus::BuildGauge()
                            .Name("yirage_workers_connected")
                            .Help("Workers heard from within the worker timeout, by backend.")
                            .Register(*registry_);
  candidates_queued_ = &prometheus::BuildGauge()
                            .Name("yirage_candidates_queued")
                            .Help("PENDING candidates of QUEUED and RUNNING jobs, by backend.")
                            .Register(*registry_);
  for (const char* backend : kMetricsBackends) {
    workers_connected_->Add({{"backend", backend}}).Set(0);
    candidates_queued_->Add({{"backend", backend}}).Set(0);
    for (auto status :
         {yirage::v1::VERIFIED, yirage::v1::MISMATCH, yirage::v1::ERROR, yirage::v1::SKIPPED}) {
      candidates_->Add({{"outcome", MetricLabel(yirage::v1::CandidateStatus_Name(status))},
                        {"backend", backend}});
    }
  }
  evaluation_seconds_ =
      &prometheus::BuildHistogram()
           .Name("yirage_candidate_evaluation_seconds")
           .Help("Wall time a worker spent on one candidate: compile share, run, verify, time.")
           .Register(*registry_)
           .Add({}, prometheus::Histogram::BucketBoundaries{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                                                            10, 30, 60});
  phase_seconds_ = &prometheus::BuildHistogram()
                        .Name("yirage_candidate_phase_seconds")
                        .Help(
                            "Worker-reported time of one candidate's phase (compile, verify, "
                            "time), by backend.")
                        .Register(*registry_);
  for (const char* backend : kMetricsBackends) {
    for (const char* phase : {"compile", "verify", "time"}) {
      phase_seconds_->Add({{"backend", backend}, {"phase", phase}}, PhaseSecondsBuckets());
    }
  }
  requeued_ = &prometheus::BuildCounter()
                   .Name("yirage_candidates_requeued_total")
                   .Help(
                       "Candidates handed back to the queue (redeliveries): a lease expired or "
                       "a worker gave its batch back.")
                   .Register(*registry_)
                   .Add({});
  auto& submitted = prometheus::BuildCounter()
                        .Name("yirage_job_submissions_total")
                        .Help("Job submissions, by result.")
                        .Register(*registry_);
  jobs_submitted_ = &submitted.Add({{"result", "accepted"}});
  jobs_rejected_ = &submitted.Add({{"result", "rejected"}});
  auto& duration = prometheus::BuildHistogram()
                       .Name("yirage_job_duration_seconds")
                       .Help("Submission to final state, by the state reached.")
                       .Register(*registry_);
  for (auto state : {yirage::v1::SUCCEEDED, yirage::v1::FAILED, yirage::v1::CANCELLED}) {
    job_duration_[state] = &duration.Add({{"state", MetricLabel(yirage::v1::JobState_Name(state))}},
                                         JobSecondsBuckets());
  }
  time_to_best_ = &prometheus::BuildHistogram()
                       .Name("yirage_job_time_to_best_seconds")
                       .Help(
                           "Submission to the stored result of a succeeded job's final best "
                           "candidate.")
                       .Register(*registry_)
                       .Add({}, JobSecondsBuckets());
  search_seconds_ = &prometheus::BuildHistogram()
                         .Name("yirage_search_duration_seconds")
                         .Help("The candidate search of one job.")
                         .Register(*registry_)
                         .Add({}, JobSecondsBuckets());
  batches_leased_ = &prometheus::BuildCounter()
                         .Name("yirage_batches_leased_total")
                         .Help("Batches leased to workers, by backend.")
                         .Register(*registry_);
  lease_expiries_ = &prometheus::BuildCounter()
                         .Name("yirage_lease_expiries_total")
                         .Help("Leased batches whose lease ran out, by backend.")
                         .Register(*registry_);
  for (const char* backend : kMetricsBackends) {
    batches_leased_->Add({{"backend", backend}});
    lease_expiries_->Add({{"backend", backend}});
  }
  worker_busy_ = &prometheus::BuildCounter()
                      .Name("yirage_worker_busy_seconds_total")
                      .Help(
                          "Seconds a worker held a leased batch (counted when the batch "
                          "completes, expires or is released).")
                      .Register(*registry_);
  grpc_requests_ = &prometheus::BuildCounter()
                        .Name("yirage_grpc_requests_total")
                        .Help("RPCs served on both gRPC ports, by method and status code.")
                        .Register(*registry_);
  grpc_seconds_ = &prometheus::BuildHistogram()
                       .Name("yirage_grpc_request_duration_seconds")
                       .Help("Time from an RPC's start to its status, by method.")
                       .Register(*registry_);
  transaction_seconds_ = &prometheus::BuildHistogram()
                              .Name("yirage_sqlite_transaction_seconds")
                              .Help(
                                  "SQLite write transactions, BEGIN (with the wait for the "
                                  "write lock) to COMMIT or ROLLBACK, by store.")
                              .Register(*registry_);
}

absl::StatusOr<std::unique_ptr<Metrics>> Metrics::Start(const std::string& listen) {
  std::unique_ptr<Metrics> m(new Metrics());
  try {
    m->exposer_ = std::make_unique<prometheus::Exposer>(listen, 2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on '", listen, "': ", e.what()));
  }
  auto ports = m->exposer_->GetListeningPorts();
  std::string host = listen.substr(0, listen.rfind(':'));
  m->address_ = absl::StrCat(host, ":", ports.empty() ? 0 : ports.front());
  m->exposer_->RegisterCollectable(m->registry_);
  return m;
}

std::unique_ptr<Metrics> Metrics::CreateUnserved() {
  return std::unique_ptr<Metrics>(new Metrics());
}

std::string Metrics::Render() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

void Metrics::SetJobsByState(const std::map<yirage::v1::JobState, int>& counts) {
  for (auto& [state, gauge] : jobs_) {
    auto it = counts.find(state);
    gauge->Set(it == counts.end() ? 0 : it->second);
  }
}

void Metrics::SetByBackend(prometheus::Family<prometheus::Gauge>* family,
                           std::set<std::string>* seen, const std::map<std::string, int>& counts) {
  for (const std::string& backend : *seen) {
    if (counts.count(backend) == 0) family->Add({{"backend", backend}}).Set(0);
  }
  for (const auto& [backend, n] : counts) {
    family->Add({{"backend", backend}}).Set(n);
    seen->insert(backend);
  }
}

void Metrics::SetConnectedWorkers(const std::map<std::string, int>& by_backend) {
  absl::MutexLock lock(&mu_);
  if (worker_backends_.empty())
    worker_backends_.insert(std::begin(kMetricsBackends), std::end(kMetricsBackends));
  SetByBackend(workers_connected_, &worker_backends_, by_backend);
}

void Metrics::SetCandidatesQueued(const std::map<std::string, int>& by_backend) {
  absl::MutexLock lock(&mu_);
  if (queued_backends_.empty())
    queued_backends_.insert(std::begin(kMetricsBackends), std::end(kMetricsBackends));
  SetByBackend(candidates_queued_, &queued_backends_, by_backend);
}

void Metrics::CandidateFinished(yirage::v1::CandidateStatus outcome, const std::string& backend,
                                int n) {
  if (n <= 0) return;
  if (outcome != yirage::v1::VERIFIED && outcome != yirage::v1::MISMATCH &&
      outcome != yirage::v1::ERROR && outcome != yirage::v1::SKIPPED) {
    return;
  }
  candidates_
      ->Add({{"outcome", MetricLabel(yirage::v1::CandidateStatus_Name(outcome))},
             {"backend", backend}})
      .Increment(n);
}

void Metrics::ObserveEvaluationSeconds(double seconds) { evaluation_seconds_->Observe(seconds); }

void Metrics::ObserveCandidatePhases(const std::string& backend, double compile_seconds,
                                     double verify_seconds, double time_seconds) {
  const std::pair<const char*, double> phases[] = {
      {"compile", compile_seconds}, {"verify", verify_seconds}, {"time", time_seconds}};
  for (const auto& [phase, seconds] : phases) {
    if (!(seconds > 0)) continue;
    phase_seconds_->Add({{"backend", backend}, {"phase", phase}}, PhaseSecondsBuckets())
        .Observe(seconds);
  }
}

void Metrics::CandidatesRequeued(int n) {
  if (n > 0) requeued_->Increment(n);
}
void Metrics::JobSubmitted() { jobs_submitted_->Increment(); }
void Metrics::JobRejected() { jobs_rejected_->Increment(); }

void Metrics::JobEnded(yirage::v1::JobState state, double seconds) {
  auto it = job_duration_.find(state);
  if (it != job_duration_.end() && seconds >= 0) it->second->Observe(seconds);
}

void Metrics::ObserveTimeToBest(double seconds) {
  if (seconds >= 0) time_to_best_->Observe(seconds);
}

void Metrics::ObserveSearchSeconds(double seconds) {
  if (seconds >= 0) search_seconds_->Observe(seconds);
}

void Metrics::BatchLeased(const std::string& backend) {
  batches_leased_->Add({{"backend", backend}}).Increment();
}

void Metrics::LeasesExpired(const std::string& backend, int n) {
  if (n > 0) lease_expiries_->Add({{"backend", backend}}).Increment(n);
}

void Metrics::WorkerBusy(const std::string& backend, const std::string& worker, double seconds) {
  if (seconds > 0) worker_busy_->Add({{"backend", backend}, {"worker", worker}}).Increment(seconds);
}

void Metrics::GrpcRequest(const std::string& method, const std::string& code, double seconds) {
  grpc_requests_->Add({{"method", method}, {"code", code}}).Increment();
  grpc_seconds_->Add({{"method", method}}, FastSecondsBuckets()).Observe(seconds);
}

void Metrics::ObserveTransaction(const std::string& store, double seconds) {
  transaction_seconds_->Add({{"store", store}}, FastSecondsBuckets()).Observe(seconds);
}

}  // namespace yirage::server
