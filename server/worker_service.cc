#include "server/worker_service.h"

#include <chrono>

#include "common/rpc_util.h"

namespace yirage::server {

grpc::ServerUnaryReactor* WorkerServiceImpl::Synchronize(
    grpc::CallbackServerContext* context, const yirage::v1::SynchronizeRequest* request,
    yirage::v1::SynchronizeResponse* response) {
  auto* reactor = context->DefaultReactor();
  if (context->deadline() < std::chrono::system_clock::now()) {
    // Leasing a batch to a caller that has given up would strand it until
    // the lease expires.
    reactor->Finish(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed"));
    return reactor;
  }
  auto result = scheduler_->Synchronize(*request);
  if (result.ok()) *response = std::move(*result);
  reactor->Finish(ToGrpc(result.status()));
  return reactor;
}

}  // namespace yirage::server
