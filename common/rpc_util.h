// Small helpers shared by the server, the worker and the client.
#ifndef YIRAGE_COMMON_RPC_UTIL_H_
#define YIRAGE_COMMON_RPC_UTIL_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

// How a client or worker reaches the server (docs/security.md).
struct ChannelOptions {
  // The first line of this file, else the environment variable
  // YIRAGE_TOKEN, is sent with every call as "authorization: Bearer TOKEN";
  // neither: no token.
  std::string token_file;
  // PEM root certificates: TLS, the server's certificate checked against
  // them; empty: plaintext.
  std::string tls_ca_path;
  // This side's PEM certificate chain and key, for servers that require
  // client certificates (mTLS); both or neither, and only with tls_ca_path.
  std::string tls_cert_path;
  std::string tls_key_path;
};

// A plaintext channel to `address` ("host:port") without a token.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);
// A channel as `options` say. InvalidArgument or NotFound naming the flag
// for a file that cannot be read, an empty token file or an incomplete pair.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const std::string& address,
                                                           const ChannelOptions& options);

// The whole of a text file; NotFound naming `flag` and the path.
absl::StatusOr<std::string> ReadTextFile(const std::string& path, const std::string& flag);

// Random lowercase hex string of `n` characters (ids).
std::string RandomHex(int n);
// `n` hex digits from the operating system's random source (getrandom(2)),
// for secrets such as lease tokens.
std::string SecureRandomHex(int n);
// Equal strings, compared in time that depends on their lengths only.
bool ConstantTimeEquals(const std::string& a, const std::string& b);

}  // namespace yirage

#endif  // YIRAGE_COMMON_RPC_UTIL_H_
