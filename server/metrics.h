// Prometheus metrics of the scheduler, served on their own port.
#ifndef YIRAGE_SERVER_METRICS_H_
#define YIRAGE_SERVER_METRICS_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "prometheus/counter.h"
#include "prometheus/exposer.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "yirage/v1/job.pb.h"

namespace yirage::server {

// Thread-safe (prometheus-cpp metrics are atomic).
class Metrics {
 public:
  // Starts the HTTP exposer on `listen` ("host:port", port 0 picks one).
  static absl::StatusOr<std::unique_ptr<Metrics>> Start(const std::string& listen);

  // The address actually bound.
  const std::string& address() const { return address_; }

  void SetJobsByState(const std::map<yirage::v1::JobState, int>& counts);
  void SetConnectedWorkers(int n);
  void CandidateFinished(yirage::v1::CandidateStatus outcome, int n);
  void ObserveEvaluationSeconds(double seconds);
  void CandidatesRequeued(int n);
  void JobSubmitted();
  void JobRejected();

 private:
  Metrics() = default;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::string address_;
  std::map<yirage::v1::JobState, prometheus::Gauge*> jobs_;
  std::map<yirage::v1::CandidateStatus, prometheus::Counter*> candidates_;
  prometheus::Gauge* workers_connected_ = nullptr;
  prometheus::Histogram* evaluation_seconds_ = nullptr;
  prometheus::Counter* requeued_ = nullptr;
  prometheus::Counter* jobs_submitted_ = nullptr;
  prometheus::Counter* jobs_rejected_ = nullptr;
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_METRICS_H_
