// JobService (client API) on the gRPC callback API.
#ifndef YIRAGE_SERVER_JOB_SERVICE_H_
#define YIRAGE_SERVER_JOB_SERVICE_H_

#include "server/auth.h"
#include "server/scheduler.h"
#include "yirage/v1/job.grpc.pb.h"

namespace yirage::server {

// Thread-safe. Each call checks its deadline before doing work and answers
// DEADLINE_EXCEEDED rather than work nobody waits for.
class JobServiceImpl final : public yirage::v1::JobService::CallbackService {
 public:
  // Submits through the scheduler (the search); reads and cancels jobs in
  // `jobs`, lists workers from `workers`. REQUIRES: all three outlive it.
  JobServiceImpl(Scheduler* scheduler, JobStore* jobs, WorkerStore* workers,
                 const Authenticator* auth)
      : scheduler_(scheduler), jobs_(jobs), workers_(workers), auth_(auth) {}

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context,
                                      const yirage::v1::SubmitJobRequest* request,
                                      yirage::v1::SubmitJobResponse* response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const yirage::v1::GetJobRequest* request,
                                   yirage::v1::Job* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const yirage::v1::ListJobsRequest* request,
                                     yirage::v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const yirage::v1::CancelJobRequest* request,
                                      yirage::v1::Job* response) override;
  grpc::ServerUnaryReactor* ListCandidates(grpc::CallbackServerContext* context,
                                           const yirage::v1::ListCandidatesRequest* request,
                                           yirage::v1::ListCandidatesResponse* response) override;
  grpc::ServerUnaryReactor* GetKernel(grpc::CallbackServerContext* context,
                                      const yirage::v1::GetKernelRequest* request,
                                      yirage::v1::GetKernelResponse* response) override;
  grpc::ServerUnaryReactor* ListWorkers(grpc::CallbackServerContext* context,
                                        const yirage::v1::ListWorkersRequest* request,
                                        yirage::v1::ListWorkersResponse* response) override;
  // The job's trial tree (server/trial_tree.h).
  grpc::ServerUnaryReactor* GetTrialTree(grpc::CallbackServerContext* context,
                                         const yirage::v1::GetTrialTreeRequest* request,
                                         yirage::v1::TrialTree* response) override;
  // Streams the job's events (server/job_watch.h); the caller's deadline
  // bounds it.
  grpc::ServerWriteReactor<yirage::v1::JobEvent>* WatchJob(
      grpc::CallbackServerContext* context, const yirage::v1::WatchJobRequest* request) override;

 private:
  // The -march the CPU worker `worker_id` compiles for (its probe's
  // compiler.march); "" when unknown.
  std::string WorkerMarch(const std::string& worker_id);

  Scheduler* const scheduler_;
  JobStore* const jobs_;
  WorkerStore* const workers_;
  const Authenticator* const auth_;
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_JOB_SERVICE_H_
