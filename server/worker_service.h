// WorkerService (worker API) on the gRPC callback API.
#ifndef YIRAGE_SERVER_WORKER_SERVICE_H_
#define YIRAGE_SERVER_WORKER_SERVICE_H_

#include "server/auth.h"
#include "server/rpc_pool.h"
#include "server/scheduler.h"
#include "yirage/v1/worker.grpc.pb.h"

namespace yirage::server {

// Thread-safe.
class WorkerServiceImpl final : public yirage::v1::WorkerService::CallbackService {
 public:
  // REQUIRES: scheduler, auth and pool outlive the service, and the pool
  // outlives the gRPC server's shutdown (calls finish on it).
  WorkerServiceImpl(Scheduler* scheduler, const Authenticator* auth, RpcPool* pool)
      : scheduler_(scheduler), auth_(auth), pool_(pool) {}

  grpc::ServerUnaryReactor* Synchronize(grpc::CallbackServerContext* context,
                                        const yirage::v1::SynchronizeRequest* request,
                                        yirage::v1::SynchronizeResponse* response) override;

 private:
  Scheduler* const scheduler_;
  const Authenticator* const auth_;
  RpcPool* const pool_;
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_WORKER_SERVICE_H_
