#include "server/job_service.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/rpc_util.h"
#include "nlohmann/json.hpp"
#include "server/job_watch.h"
#include "server/kernel_export.h"
#include "server/serve_unary.h"
#include "server/trial_tree.h"

namespace yirage::server {
namespace {

absl::Status RequireJobId(const std::string& job_id) {
  if (job_id.empty()) return absl::InvalidArgumentError("job_id: must be set");
  return absl::OkStatus();
}

// A stream that ends at once with `status` (a refused WatchJob).
class RefusedJobWatch : public grpc::ServerWriteReactor<yirage::v1::JobEvent> {
 public:
  explicit RefusedJobWatch(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace

std::string JobServiceImpl::WorkerMarch(const std::string& worker_id) {
  if (worker_id.empty()) return "";
  auto workers = workers_->List(UnixNow());
  if (!workers.ok()) return "";
  for (const auto& w : *workers) {
    if (w.worker_id() != worker_id) continue;
    const nlohmann::json d = nlohmann::json::parse(w.device_description(), nullptr, false);
    if (!d.is_object() || !d.contains("compiler") || !d["compiler"].is_object()) return "";
    const nlohmann::json& m = d["compiler"].value("march", nlohmann::json());
    if (!m.is_string() || !ValidateMarch(m.get<std::string>()).ok()) return "";
    return m.get<std::string>();
  }
  return "";
}

namespace {

// How often a watch reads its job: well under a person's notice, a read of
// one row and an index probe a watcher.
constexpr std::chrono::milliseconds kWatchInterval{250};

}  // namespace

grpc::ServerWriteReactor<yirage::v1::JobEvent>* JobServiceImpl::WatchJob(
    grpc::CallbackServerContext* context, const yirage::v1::WatchJobRequest* request) {
  if (absl::StatusOr<Caller> caller = auth_->Authorize(*context, kClientAccess); !caller.ok()) {
    return new RefusedJobWatch(ToGrpc(caller.status()));
  }
  if (auto s = RequireJobId(request->job_id()); !s.ok()) return new RefusedJobWatch(ToGrpc(s));
  return new JobWatchReactor(context, jobs_, request->job_id(), kWatchInterval);
}

grpc::ServerUnaryReactor* JobServiceImpl::SubmitJob(grpc::CallbackServerContext* context,
                                                    const yirage::v1::SubmitJobRequest* request,
                                                    yirage::v1::SubmitJobResponse* response) {
  return ServeUnary(context, *auth_, kClientAccess, [&](const Caller& caller) -> absl::Status {
    auto result = scheduler_->Submit(*request, caller.name);
    if (!result.ok()) return result.status();
    *response = std::move(*result);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobServiceImpl::GetJob(grpc::CallbackServerContext* context,
                                                 const yirage::v1::GetJobRequest* request,
                                                 yirage::v1::Job* response) {
  return ServeUnary(context, *auth_, kClientAccess, [&](const Caller&) -> absl::Status {
    if (auto s = RequireJobId(request->job_id()); !s.ok()) return s;
    auto job = jobs_->GetJob(request->job_id());
    if (!job.ok()) return job.status();
    *response = std::move(*job);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobServiceImpl::ListJobs(grpc::CallbackServerContext* context,
                                                   const yirage::v1::ListJobsRequest* request,
                                                   yirage::v1::ListJobsResponse* response) {
  return ServeUnary(context, *auth_, kClientAccess, [&](const Caller&) -> absl::Status {
    auto jobs = jobs_->ListJobs(request->limit());
    if (!jobs.ok()) return jobs.status();
    for (auto& job : *jobs) *response->add_jobs() = std::move(job);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobServiceImpl::CancelJob(grpc::CallbackServerContext* context,
                                                    const yirage::v1::CancelJobRequest* request,
                                                    yirage::v1::Job* response) {
  return ServeUnary(context, *auth_, kClientAccess, [&](const Caller& caller) -> absl::Status {
    if (auto s = RequireJobId(request->job_id()); !s.ok()) return s;
    // Clients cancel their own jobs; admins (and everyone without tokens) any.
    auto job = jobs_->CancelJob(request->job_id(), UnixNow(),
                                caller.role == Role::kAdmin ? nullptr : &caller.name);
    if (!job.ok()) return job.status();
    scheduler_->JobEnded(*job);
    *response = std::move(*job);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobServiceImpl::ListCandidates(
    grpc::CallbackServerContext* context, const yirage::v1::ListCandidatesRequest* request,
    yirage::v1::ListCandidatesResponse* response) {
  return ServeUnary(context, *auth_, kClientAccess, [&](const Caller&) -> absl::Status {
    if (auto s = RequireJobId(request->job_id()); !s.ok()) return s;
    auto candidates = jobs_->ListCandidates(request->job_id(), /*with_work=*/true);
    if (!candidates.ok()) return candidates.status();
    for (auto& c : *candidates) *response->add_candidates() = std::move(c);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobServiceImpl::GetTrialTree(
    grpc::CallbackServerContext* context, const yirage::v1::GetTrialTreeRequest* request,
    yirage::v1::TrialTree* response) {
  return ServeUnary(context, *auth_, kClientAccess, [&](const Caller&) -> absl::Status {
    if (auto s = RequireJobId(request->job_id()); !s.ok()) return s;
    auto job = jobs_->GetJob(request->job_id());
    if (!job.ok()) return job.status();
    auto candidates = jobs_->ListCandidates(request->job_id(), /*with_work=*/false);
    if (!candidates.ok()) return candidates.status();
    *response = BuildTrialTree(*job, *candidates);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobServiceImpl::GetKernel(grpc::CallbackServerContext* context,
                                                    const yirage::v1::GetKernelRequest* request,
                                                    yirage::v1::GetKernelResponse* response) {
  return ServeUnary(context, *auth_, kClientAccess, [&](const Caller&) -> absl::Status {
    if (auto s = RequireJobId(request->job_id()); !s.ok()) return s;
    if (request->candidate_id() < 0) {
      return absl::InvalidArgumentError(absl::StrCat("candidate_id: ", request->candidate_id(),
                                                     " (a candidate's id, or 0 for the best)"));
    }
    auto best = jobs_->GetKernel(request->job_id(), request->candidate_id());
    if (!best.ok()) return best.status();
    ExportOptions options;
    options.march = request->march();
    if (options.march.empty() && best->backend == "cpu") {
      // The default target: what -march=native named on the worker that
      // timed the candidate (its probe says), so the export builds the code
      // that was measured; native where the worker is gone or did not say.
      options.march = WorkerMarch(best->candidate.worker_id());
    }
    // Another candidate than the best carries its id in the CPU symbols.
    options.name_candidate = request->candidate_id() != 0;
    auto files = ExportKernel(request->job_id(), *best, options);
    if (!files.ok()) return files.status();
    *response = std::move(*files);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* JobServiceImpl::ListWorkers(grpc::CallbackServerContext* context,
                                                      const yirage::v1::ListWorkersRequest*,
                                                      yirage::v1::ListWorkersResponse* response) {
  return ServeUnary(context, *auth_, kAdminAccess, [&](const Caller&) -> absl::Status {
    auto workers = workers_->List(UnixNow());
    if (!workers.ok()) return workers.status();
    for (auto& w : *workers) *response->add_workers() = std::move(w);
    return absl::OkStatus();
  });
}

}  // namespace yirage::server
