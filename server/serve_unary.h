// The one way our callback services answer a unary call.
#ifndef YIRAGE_SERVER_SERVE_UNARY_H_
#define YIRAGE_SERVER_SERVE_UNARY_H_

#include <chrono>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "common/rpc_util.h"
#include "grpcpp/grpcpp.h"
#include "server/auth.h"
#include "server/rpc_pool.h"

namespace yirage::server {

// Why a call is not served: its caller hung up or its deadline passed
// (work nobody waits for is not done, and a batch is never leased to a
// caller that gave up); nullopt to serve it.
inline std::optional<grpc::Status> GaveUp(grpc::CallbackServerContext* context) {
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the caller");
  }
  if (context->deadline() < std::chrono::system_clock::now()) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed");
  }
  return std::nullopt;
}

// Runs `body(caller)` (returning absl::Status) when `auth` lets the caller
// make a call that `access` allows and the caller has not given up, and
// finishes the call with the result. With a `pool`, `body` runs there,
// where it may block, and whether the caller gave up is asked again when
// its turn comes; it runs after the handler has returned, so it holds what
// it uses by value (the request and response pointers stay valid until the
// call is finished). Without one it runs here, on gRPC's callback thread.
// Every RPC states its access here, so none is served unchecked.
template <typename Body>
grpc::ServerUnaryReactor* ServeUnaryOn(RpcPool* pool, grpc::CallbackServerContext* context,
                                       const Authenticator& auth, const Access& access, Body body) {
  auto* reactor = context->DefaultReactor();
  if (std::optional<grpc::Status> gave_up = GaveUp(context); gave_up.has_value()) {
    reactor->Finish(*gave_up);
    return reactor;
  }
  absl::StatusOr<Caller> caller = auth.Authorize(*context, access);
  if (!caller.ok()) {
    reactor->Finish(ToGrpc(caller.status()));
  } else if (pool == nullptr) {
    reactor->Finish(ToGrpc(body(*caller)));
  } else {
    pool->Run([reactor, context, caller = std::move(*caller), body = std::move(body)]() mutable {
      std::optional<grpc::Status> gave_up = GaveUp(context);
      reactor->Finish(gave_up.has_value() ? *gave_up : ToGrpc(body(caller)));
    });
  }
  return reactor;
}

// ServeUnaryOn without a pool: the client API's calls (on the pool they
// measured slower, bench/RESULTS.md).
template <typename Body>
grpc::ServerUnaryReactor* ServeUnary(grpc::CallbackServerContext* context,
                                     const Authenticator& auth, const Access& access, Body body) {
  return ServeUnaryOn(nullptr, context, auth, access, std::move(body));
}

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_SERVE_UNARY_H_
