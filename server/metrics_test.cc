#include "server/metrics.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/database.h"
#include "server/test_dir.h"
#include "yirage/build_info.h"

namespace yirage::server {
namespace {

using ::testing::HasSubstr;

// Every metric, with its labels, once its event happened; names, labels and
// types are what docs/observability.md promises.
TEST(MetricsTest, EachMetricAppearsWithItsLabels) {
  std::unique_ptr<Metrics> m = Metrics::CreateUnserved();
  m->SetJobsByState({{yirage::v1::RUNNING, 2}});
  m->SetConnectedWorkers({{"cpu", 3}});
  m->SetCandidatesQueued({{"cuda", 7}});
  m->CandidateFinished(yirage::v1::VERIFIED, "cpu", 4);
  m->ObserveEvaluationSeconds(0.2);
  m->ObserveCandidatePhases("cpu", 1.5, 0.25, 0);
  m->CandidatesRequeued(2);
  m->JobSubmitted();
  m->JobEnded(yirage::v1::SUCCEEDED, 90);
  m->JobEnded(yirage::v1::CANCELLED, 3);
  m->ObserveTimeToBest(60);
  m->ObserveSearchSeconds(0.5);
  m->BatchLeased("cpu");
  m->LeasesExpired("cuda", 2);
  m->WorkerBusy("cpu", "w1", 2.5);
  m->GrpcRequest("yirage.v1.JobService/SubmitJob", "OK", 0.001);
  m->GrpcRequest("yirage.v1.JobService/SubmitJob", "INVALID_ARGUMENT", 0.002);
  m->ObserveTransaction("jobs", 0.003);
  const std::string text = m->Render();

  EXPECT_THAT(text, HasSubstr("# TYPE yirage_build_info gauge"));
  EXPECT_THAT(text, HasSubstr(std::string("yirage_build_info{git_sha=\"") + YIRAGE_GIT_SHA +
                              "\",version=\"" + YIRAGE_VERSION + "\"} 1"));
  EXPECT_THAT(text, HasSubstr("yirage_jobs{state=\"running\"} 2"));
  EXPECT_THAT(text, HasSubstr("# TYPE yirage_workers_connected gauge"));
  EXPECT_THAT(text, HasSubstr("yirage_workers_connected{backend=\"cpu\"} 3"));
  EXPECT_THAT(text, HasSubstr("yirage_workers_connected{backend=\"cuda\"} 0"));
  EXPECT_THAT(text, HasSubstr("# TYPE yirage_candidates_queued gauge"));
  EXPECT_THAT(text, HasSubstr("yirage_candidates_queued{backend=\"cuda\"} 7"));
  EXPECT_THAT(text, HasSubstr("yirage_candidates_queued{backend=\"cpu\"} 0"));
  EXPECT_THAT(
      text, HasSubstr("yirage_candidates_evaluated_total{backend=\"cpu\",outcome=\"verified\"} 4"));
  EXPECT_THAT(text, HasSubstr("yirage_candidate_evaluation_seconds_count 1"));
  EXPECT_THAT(text, HasSubstr("# TYPE yirage_candidate_phase_seconds histogram"));
  EXPECT_THAT(
      text, HasSubstr("yirage_candidate_phase_seconds_count{backend=\"cpu\",phase=\"compile\"} 1"));
  EXPECT_THAT(
      text, HasSubstr("yirage_candidate_phase_seconds_count{backend=\"cpu\",phase=\"verify\"} 1"));
  // A phase the worker did not measure (0) is not observed.
  EXPECT_THAT(text,
              HasSubstr("yirage_candidate_phase_seconds_count{backend=\"cpu\",phase=\"time\"} 0"));
  EXPECT_THAT(text, HasSubstr("yirage_candidates_requeued_total 2"));
  EXPECT_THAT(text, HasSubstr("yirage_job_submissions_total{result=\"accepted\"} 1"));
  EXPECT_THAT(text, HasSubstr("# TYPE yirage_job_duration_seconds histogram"));
  EXPECT_THAT(text, HasSubstr("yirage_job_duration_seconds_count{state=\"succeeded\"} 1"));
  EXPECT_THAT(text, HasSubstr("yirage_job_duration_seconds_sum{state=\"succeeded\"} 90"));
  EXPECT_THAT(text, HasSubstr("yirage_job_duration_seconds_count{state=\"cancelled\"} 1"));
  EXPECT_THAT(text, HasSubstr("yirage_job_duration_seconds_count{state=\"failed\"} 0"));
  // Buckets reach hours.
  EXPECT_THAT(text,
              HasSubstr("yirage_job_duration_seconds_bucket{state=\"succeeded\",le=\"21600\"} 1"));
  EXPECT_THAT(text, HasSubstr("yirage_job_time_to_best_seconds_count 1"));
  EXPECT_THAT(text, HasSubstr("yirage_job_time_to_best_seconds_sum 60"));
  EXPECT_THAT(text, HasSubstr("yirage_search_duration_seconds_count 1"));
  EXPECT_THAT(text, HasSubstr("# TYPE yirage_batches_leased_total counter"));
  EXPECT_THAT(text, HasSubstr("yirage_batches_leased_total{backend=\"cpu\"} 1"));
  EXPECT_THAT(text, HasSubstr("yirage_lease_expiries_total{backend=\"cuda\"} 2"));
  EXPECT_THAT(text, HasSubstr("yirage_lease_expiries_total{backend=\"cpu\"} 0"));
  EXPECT_THAT(text, HasSubstr("# TYPE yirage_worker_busy_seconds_total counter"));
  EXPECT_THAT(text,
              HasSubstr("yirage_worker_busy_seconds_total{backend=\"cpu\",worker=\"w1\"} 2.5"));
  EXPECT_THAT(text, HasSubstr("# TYPE yirage_grpc_requests_total counter"));
  EXPECT_THAT(text, HasSubstr("yirage_grpc_requests_total{code=\"OK\",method=\"yirage.v1."
                              "JobService/SubmitJob\"} 1"));
  EXPECT_THAT(text, HasSubstr("yirage_grpc_requests_total{code=\"INVALID_ARGUMENT\",method="
                              "\"yirage.v1.JobService/SubmitJob\"} 1"));
  EXPECT_THAT(text, HasSubstr("yirage_grpc_request_duration_seconds_count{method=\"yirage.v1."
                              "JobService/SubmitJob\"} 2"));
  EXPECT_THAT(text, HasSubstr("# TYPE yirage_sqlite_transaction_seconds histogram"));
  EXPECT_THAT(text, HasSubstr("yirage_sqlite_transaction_seconds_count{store=\"jobs\"} 1"));
}

// A backend whose gauge was set reads 0 once it has nothing.
TEST(MetricsTest, BackendGaugesFallBackToZero) {
  std::unique_ptr<Metrics> m = Metrics::CreateUnserved();
  m->SetCandidatesQueued({{"triton", 5}});
  EXPECT_THAT(m->Render(), HasSubstr("yirage_candidates_queued{backend=\"triton\"} 5"));
  m->SetCandidatesQueued({});
  EXPECT_THAT(m->Render(), HasSubstr("yirage_candidates_queued{backend=\"triton\"} 0"));
}

// Each write transaction is reported with its store's name: committed, and
// rolled back.
TEST(MetricsTest, TransactionsAreTimedByStore) {
  const auto dir = FreshTestDir("yirage_metrics_test");
  auto db = Database::Open((dir / "t.db").string(), {{"CREATE TABLE t (x INTEGER)"}}, "leases");
  ASSERT_TRUE(db.ok()) << db.status();
  std::unique_ptr<Metrics> m = Metrics::CreateUnserved();
  SetTransactionObserver(
      [&](const std::string& store, double seconds) { m->ObserveTransaction(store, seconds); });
  {
    Transaction tx(db->get());
    ASSERT_TRUE(tx.status().ok());
    ASSERT_TRUE((*db)->Exec("INSERT INTO t VALUES (1)").ok());
    ASSERT_TRUE(tx.Commit().ok());
  }
  {
    Transaction rolled_back(db->get());  // never committed
  }
  SetTransactionObserver(nullptr);
  {
    Transaction unobserved(db->get());
    ASSERT_TRUE(unobserved.Commit().ok());
  }
  EXPECT_THAT(m->Render(),
              HasSubstr("yirage_sqlite_transaction_seconds_count{store=\"leases\"} 2"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace yirage::server
