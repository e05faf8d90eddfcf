#include "server/metrics.h"

#include <exception>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace yirage::server {

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
  m->registry_ = std::make_shared<prometheus::Registry>();

  auto& jobs = prometheus::BuildGauge()
                   .Name("yirage_jobs")
                   .Help("Jobs in the database, by state.")
                   .Register(*m->registry_);
  for (auto state : {yirage::v1::SEARCHING, yirage::v1::QUEUED, yirage::v1::RUNNING,
                     yirage::v1::SUCCEEDED, yirage::v1::FAILED, yirage::v1::CANCELLED}) {
    m->jobs_[state] =
        &jobs.Add({{"state", absl::AsciiStrToLower(yirage::v1::JobState_Name(state))}});
  }
  auto& candidates = prometheus::BuildCounter()
                         .Name("yirage_candidates_evaluated_total")
                         .Help("Candidates that reached a final status, by outcome.")
                         .Register(*m->registry_);
  for (auto status :
       {yirage::v1::VERIFIED, yirage::v1::MISMATCH, yirage::v1::ERROR, yirage::v1::SKIPPED}) {
    m->candidates_[status] = &candidates.Add(
        {{"outcome", absl::AsciiStrToLower(yirage::v1::CandidateStatus_Name(status))}});
  }
  m->workers_connected_ = &prometheus::BuildGauge()
                               .Name("yirage_workers_connected")
                               .Help("Workers heard from within the worker timeout.")
                               .Register(*m->registry_)
                               .Add({});
  m->evaluation_seconds_ =
      &prometheus::BuildHistogram()
           .Name("yirage_candidate_evaluation_seconds")
           .Help("Wall time a worker spent on one candidate: compile share, run, verify, time.")
           .Register(*m->registry_)
           .Add({}, prometheus::Histogram::BucketBoundaries{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5,
                                                            10, 30, 60});
  m->requeued_ = &prometheus::BuildCounter()
                      .Name("yirage_candidates_requeued_total")
                      .Help("Candidates handed back to the queue after a lease expired.")
                      .Register(*m->registry_)
                      .Add({});
  auto& submitted = prometheus::BuildCounter()
                        .Name("yirage_job_submissions_total")
                        .Help("Job submissions, by result.")
                        .Register(*m->registry_);
  m->jobs_submitted_ = &submitted.Add({{"result", "accepted"}});
  m->jobs_rejected_ = &submitted.Add({{"result", "rejected"}});
  m->exposer_->RegisterCollectable(m->registry_);
  return m;
}

void Metrics::SetJobsByState(const std::map<yirage::v1::JobState, int>& counts) {
  for (auto& [state, gauge] : jobs_) {
    auto it = counts.find(state);
    gauge->Set(it == counts.end() ? 0 : it->second);
  }
}

void Metrics::SetConnectedWorkers(int n) { workers_connected_->Set(n); }

void Metrics::CandidateFinished(yirage::v1::CandidateStatus outcome, int n) {
  auto it = candidates_.find(outcome);
  if (it != candidates_.end()) it->second->Increment(n);
}

void Metrics::ObserveEvaluationSeconds(double seconds) { evaluation_seconds_->Observe(seconds); }
void Metrics::CandidatesRequeued(int n) { requeued_->Increment(n); }
void Metrics::JobSubmitted() { jobs_submitted_->Increment(); }
void Metrics::JobRejected() { jobs_rejected_->Increment(); }

}  // namespace yirage::server
