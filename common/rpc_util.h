// Small helpers shared by the server, the worker and the client.
#ifndef YIRAGE_COMMON_RPC_UTIL_H_
#define YIRAGE_COMMON_RPC_UTIL_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"

namespace yirage {

// Seconds since the Unix epoch, as a double (what SQLite rows store).
double UnixNow();

// grpc::Status <-> absl::Status, keeping code and message.
absl::Status FromGrpc(const grpc::Status& status);
grpc::Status ToGrpc(const absl::Status& status);

// A client context whose deadline is `timeout` from now. Every RPC we make
// carries one.
std::unique_ptr<grpc::ClientContext> ContextWithDeadline(std::chrono::milliseconds timeout);

// An insecure channel to `address` ("host:port").
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);

// Random lowercase hex string of `n` characters (ids).
std::string RandomHex(int n);
// `n` hex digits from the operating system's random source (std::random_device),
// for secrets such as lease tokens.
std::string SecureRandomHex(int n);
// Equal strings, compared in time that depends on their lengths only.
bool ConstantTimeEquals(const std::string& a, const std::string& b);

}  // namespace yirage

#endif  // YIRAGE_COMMON_RPC_UTIL_H_
