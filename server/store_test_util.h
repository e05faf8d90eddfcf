// The stores' test fixture (server/job_store_test.cc, server/lease_store_test.cc).
#ifndef YIRAGE_SERVER_STORE_TEST_UTIL_H_
#define YIRAGE_SERVER_STORE_TEST_UTIL_H_

#include <filesystem>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/job_store.h"
#include "server/lease_store.h"
#include "server/test_dir.h"
#include "server/worker_store.h"

namespace yirage::server::testing {

using yirage::v1::CandidateResult;

inline yirage::v1::Plan MakePlan(const std::string& description, bool baseline) {
  yirage::v1::Plan plan;
  plan.set_description(description);
  plan.set_baseline(baseline);
  auto* k = plan.add_kernels();
  k->set_name("k0");
  k->add_ops("Y");
  return plan;
}

inline std::vector<yirage::v1::Plan> MakePlans(int n) {
  std::vector<yirage::v1::Plan> plans = {MakePlan("baseline", true)};
  for (int i = 1; i < n; ++i) plans.push_back(MakePlan("plan " + std::to_string(i), false));
  return plans;
}

inline yirage::v1::SubmitJobRequest MakeRequest() {
  yirage::v1::SubmitJobRequest request;
  request.mutable_graph()->set_name("g");
  request.set_backend("cpu");
  return request;
}

// A fresh database with the job, lease and worker stores on it, as the
// server opens them.
class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = FreshTestDir("yirage_store_test");
    options_.batch_size = 2;
    options_.lease_seconds = 10;
    options_.max_attempts = 2;
    Reopen();
  }
  void TearDown() override {
    leases_.reset();
    store_.reset();
    workers_.reset();
    std::filesystem::remove_all(dir_);
  }
  void Reopen() {
    leases_.reset();
    store_.reset();
    workers_.reset();
    auto workers = WorkerStore::Open((dir_ / "yirage.db").string(), worker_options_);
    ASSERT_TRUE(workers.ok()) << workers.status();
    workers_ = std::move(*workers);
    auto store = JobStore::Open((dir_ / "yirage.db").string(), workers_.get());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    // The three on one connection, as the server opens them.
    auto leases = LeaseStore::OnConnection(workers_->connection(), options_);
    ASSERT_TRUE(leases.ok()) << leases.status();
    leases_ = std::move(*leases);
  }
  CandidateResult Verified(int64_t id, double time_us) {
    CandidateResult r;
    r.set_candidate_id(id);
    r.set_status(yirage::v1::VERIFIED);
    r.set_time_us(time_us);
    r.set_baseline_time_us(100);
    r.set_source("extern \"C\" int yirage_plan_0(const void* const*, void* const*) {}");
    return r;
  }
  google::protobuf::RepeatedPtrField<CandidateResult> Results(
      std::initializer_list<CandidateResult> rs) {
    google::protobuf::RepeatedPtrField<CandidateResult> out;
    for (const auto& r : rs) *out.Add() = r;
    return out;
  }

  std::filesystem::path dir_;
  LeaseStoreOptions options_;
  WorkerStoreOptions worker_options_;
  std::unique_ptr<WorkerStore> workers_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<LeaseStore> leases_;
};

}  // namespace yirage::server::testing

#endif  // YIRAGE_SERVER_STORE_TEST_UTIL_H_
