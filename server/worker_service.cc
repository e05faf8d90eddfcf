#include "server/worker_service.h"

#include "server/serve_unary.h"

namespace yirage::server {

grpc::ServerUnaryReactor* WorkerServiceImpl::Synchronize(
    grpc::CallbackServerContext* context, const yirage::v1::SynchronizeRequest* request,
    yirage::v1::SynchronizeResponse* response) {
  return ServeUnary(context, [&]() -> absl::Status {
    auto result = scheduler_->Synchronize(*request);
    if (result.ok()) *response = std::move(*result);
    return result.status();
  });
}

}  // namespace yirage::server
