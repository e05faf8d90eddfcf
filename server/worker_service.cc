#include "server/worker_service.h"

#include "server/serve_unary.h"

namespace yirage::server {

grpc::ServerUnaryReactor* WorkerServiceImpl::Synchronize(
    grpc::CallbackServerContext* context, const yirage::v1::SynchronizeRequest* request,
    yirage::v1::SynchronizeResponse* response) {
  // On the pool: a report and a lease wait for SQLite's write lock.
  return ServeUnaryOn(pool_, context, *auth_, kWorkerAccess,
                      [this, context, request, response](const Caller& caller) -> absl::Status {
                        // The worker id stays with who first used it: the token's name, else a
                        // verified client certificate's.
                        const std::string identity =
                            caller.name.empty() ? PeerIdentity(*context) : "token:" + caller.name;
                        auto result = scheduler_->Synchronize(*request, identity);
                        if (result.ok()) *response = std::move(*result);
                        return result.status();
                      });
}

}  // namespace yirage::server
