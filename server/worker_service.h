// WorkerService (worker API) on the gRPC callback API.
#ifndef YIRAGE_SERVER_WORKER_SERVICE_H_
#define YIRAGE_SERVER_WORKER_SERVICE_H_

#include "server/auth.h"
#include "server/scheduler.h"
#include "yirage/v1/worker.grpc.pb.h"

namespace yirage::server {

// Thread-safe.
class WorkerServiceImpl final : public yirage::v1::WorkerService::CallbackService {
 public:
  // REQUIRES: scheduler and auth outlive the service.
  WorkerServiceImpl(Scheduler* scheduler, const Authenticator* auth)
      : scheduler_(scheduler), auth_(auth) {}

  grpc::ServerUnaryReactor* Synchronize(grpc::CallbackServerContext* context,
                                        const yirage::v1::SynchronizeRequest* request,
                                        yirage::v1::SynchronizeResponse* response) override;

 private:
  Scheduler* const scheduler_;
  const Authenticator* const auth_;
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_WORKER_SERVICE_H_
