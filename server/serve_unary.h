// The one way our callback services answer a unary call.
#ifndef YIRAGE_SERVER_SERVE_UNARY_H_
#define YIRAGE_SERVER_SERVE_UNARY_H_

#include <chrono>

#include "absl/status/status.h"
#include "common/rpc_util.h"
#include "grpcpp/grpcpp.h"
#include "server/auth.h"
#include "server/rpc_pool.h"

namespace yirage::server {

// Runs `body(caller)` (returning absl::Status) when `auth` lets the caller
// make a call that `access` allows, unless the caller already hung up or its
// deadline passed — work nobody waits for is not done, and a batch is never
// leased to a caller that gave up — and finishes the call with the result.
// Every RPC states its access here, so none is served unchecked.
template <typename Body>
grpc::ServerUnaryReactor* ServeUnary(grpc::CallbackServerContext* context,
                                     const Authenticator& auth, const Access& access, Body body) {
  auto* reactor = context->DefaultReactor();
  if (context->IsCancelled()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the caller"));
  } else if (context->deadline() < std::chrono::system_clock::now()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed"));
  } else if (absl::StatusOr<Caller> caller = auth.Authorize(*context, access); !caller.ok()) {
    reactor->Finish(ToGrpc(caller.status()));
  } else {
    reactor->Finish(ToGrpc(body(*caller)));
  }
  return reactor;
}

// As ServeUnary, with `body` run on `pool`, where it may block, and the call
// finished from there. The checks above are made again when `body` is about
// to run: the call may have been cancelled or run past its deadline while
// queued. `body` runs after the handler has returned, so it holds what it
// uses by value (the request and response pointers stay valid until the
// call is finished).
template <typename Body>
grpc::ServerUnaryReactor* ServeUnaryOn(RpcPool* pool, grpc::CallbackServerContext* context,
                                       const Authenticator& auth, const Access& access, Body body) {
  auto* reactor = context->DefaultReactor();
  if (context->IsCancelled()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the caller"));
  } else if (context->deadline() < std::chrono::system_clock::now()) {
    reactor->Finish(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed"));
  } else if (absl::StatusOr<Caller> caller = auth.Authorize(*context, access); !caller.ok()) {
    reactor->Finish(ToGrpc(caller.status()));
  } else {
    pool->Run([reactor, context, caller = std::move(*caller), body = std::move(body)]() mutable {
      if (context->IsCancelled()) {
        reactor->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the caller"));
      } else if (context->deadline() < std::chrono::system_clock::now()) {
        reactor->Finish(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed"));
      } else {
        reactor->Finish(ToGrpc(body(caller)));
      }
    });
  }
  return reactor;
}

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_SERVE_UNARY_H_
