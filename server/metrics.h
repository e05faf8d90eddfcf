// Prometheus metrics of the scheduler, served on their own port. The names
// and labels are a contract (dashboards and alerts use them): every metric
// is listed, with its labels, in docs/observability.md.
#ifndef YIRAGE_SERVER_METRICS_H_
#define YIRAGE_SERVER_METRICS_H_

#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "yirage/v1/job.pb.h"

namespace yirage::server {

// Thread-safe (prometheus-cpp metrics are atomic, their families locked).
class Metrics {
 public:
  // Starts the HTTP exposer on `listen` ("host:port", port 0 picks one).
  static absl::StatusOr<std::unique_ptr<Metrics>> Start(const std::string& listen);
  // The metrics without an HTTP endpoint (tests read them through Render).
  static std::unique_ptr<Metrics> CreateUnserved();

  // The address actually bound ("" when unserved).
  const std::string& address() const { return address_; }
  // Every metric in the Prometheus text format, as /metrics serves it.
  std::string Render() const;

  void SetJobsByState(const std::map<yirage::v1::JobState, int>& counts);
  // Gauges by backend: backends missing from `counts` read 0.
  void SetConnectedWorkers(const std::map<std::string, int>& by_backend);
  void SetCandidatesQueued(const std::map<std::string, int>& by_backend);
  void CandidateFinished(yirage::v1::CandidateStatus outcome, const std::string& backend, int n);
  void ObserveEvaluationSeconds(double seconds);
  // A worker's per-phase times of one candidate; phases <= 0 are not observed.
  void ObserveCandidatePhases(const std::string& backend, double compile_seconds,
                              double verify_seconds, double time_seconds);
  void CandidatesRequeued(int n);
  void JobSubmitted();
  void JobRejected();
  // A job reached its final `state` (SUCCEEDED, FAILED or CANCELLED)
  // `seconds` after it was submitted.
  void JobEnded(yirage::v1::JobState state, double seconds);
  // A succeeded job's final best result was stored `seconds` after submission.
  void ObserveTimeToBest(double seconds);
  void ObserveSearchSeconds(double seconds);
  void BatchLeased(const std::string& backend);
  void LeasesExpired(const std::string& backend, int n);
  // A worker held a batch for `seconds` (the batch completed, expired or was
  // released).
  void WorkerBusy(const std::string& backend, const std::string& worker, double seconds);
  // One RPC: `method` "package.Service/Method", `code` the status name ("OK").
  void GrpcRequest(const std::string& method, const std::string& code, double seconds);
  // One write transaction of store `store`, BEGIN to COMMIT or ROLLBACK.
  void ObserveTransaction(const std::string& store, double seconds);

 private:
  Metrics();
  // Sets one gauge of `family` per backend: those of `counts`, and 0 on the
  // backends set before and missing now.
  void SetByBackend(prometheus::Family<prometheus::Gauge>* family, std::set<std::string>* seen,
                    const std::map<std::string, int>& counts);

  absl::Mutex mu_;
  std::set<std::string> worker_backends_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> queued_backends_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::string address_;
  std::map<yirage::v1::JobState, prometheus::Gauge*> jobs_;
  prometheus::Family<prometheus::Counter>* candidates_ = nullptr;
  prometheus::Family<prometheus::Gauge>* workers_connected_ = nullptr;
  prometheus::Family<prometheus::Gauge>* candidates_queued_ = nullptr;
  prometheus::Histogram* evaluation_seconds_ = nullptr;
  prometheus::Family<prometheus::Histogram>* phase_seconds_ = nullptr;
  prometheus::Counter* requeued_ = nullptr;
  prometheus::Counter* jobs_submitted_ = nullptr;
  prometheus::Counter* jobs_rejected_ = nullptr;
  std::map<yirage::v1::JobState, prometheus::Histogram*> job_duration_;
  prometheus::Histogram* time_to_best_ = nullptr;
  prometheus::Histogram* search_seconds_ = nullptr;
  prometheus::Family<prometheus::Counter>* batches_leased_ = nullptr;
  prometheus::Family<prometheus::Counter>* lease_expiries_ = nullptr;
  prometheus::Family<prometheus::Counter>* worker_busy_ = nullptr;
  prometheus::Family<prometheus::Counter>* grpc_requests_ = nullptr;
  prometheus::Family<prometheus::Histogram>* grpc_seconds_ = nullptr;
  prometheus::Family<prometheus::Histogram>* transaction_seconds_ = nullptr;
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_METRICS_H_
