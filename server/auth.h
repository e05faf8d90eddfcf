// Who may call what: bearer tokens with roles (docs/security.md).
#ifndef YIRAGE_SERVER_AUTH_H_
#define YIRAGE_SERVER_AUTH_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"

namespace yirage::server {

enum class Role { kClient, kWorker, kAdmin };

// "client", "worker", "admin".
const char* RoleName(Role role);

// The roles an RPC accepts.
struct Access {
  bool client = false;
  bool worker = false;
  bool admin = false;

  bool Allows(Role role) const {
    return role == Role::kClient ? client : role == Role::kWorker ? worker : admin;
  }
};

// Jobs and registry reads: clients and admins.
inline constexpr Access kClientAccess{true, false, true};
// Registry writes, other callers' jobs, the worker list: admins.
inline constexpr Access kAdminAccess{false, false, true};
// The worker API.
inline constexpr Access kWorkerAccess{false, true, false};

// The caller of an authorized RPC: the token's name (its line number in
// the tokens file where it has none) and role. Without tokens every caller
// has no name ("") and every role.
struct Caller {
  std::string name;
  Role role = Role::kAdmin;
};

// The server's tokens. Without a tokens file every call is allowed (the
// server then listens on loopback only unless --insecure). With one, a
// call needs `authorization: Bearer TOKEN` metadata naming a token whose
// role the RPC accepts: none or an unknown token is UNAUTHENTICATED, a
// known token of another role PERMISSION_DENIED. Tokens are compared in
// time that depends on their lengths only and never logged.
// Thread-safe (Reload may run beside Authorize).
class Authenticator {
 public:
  // Tokens from `path`: one a line, `TOKEN ROLE [NAME]`; blank lines and
  // lines starting with '#' skipped. A token is at least 16 characters of
  // [A-Za-z0-9._~+/=-]; names are unique. A bad line is an error naming
  // the file, the line and what was expected. An empty path: every call
  // allowed.
  static absl::StatusOr<std::unique_ptr<Authenticator>> Open(const std::string& path);

  // Reads the tokens file again (SIGHUP). On an error the old tokens stay.
  absl::Status Reload() ABSL_LOCKS_EXCLUDED(mu_);

  // The caller of this RPC if its token's role is one `access` allows.
  absl::StatusOr<Caller> Authorize(const grpc::ServerContextBase& context,
                                   const Access& access) const ABSL_LOCKS_EXCLUDED(mu_);

  bool enabled() const { return !path_.empty(); }

  // The first token of `role`, for the workers the server starts itself.
  std::optional<std::string> TokenOf(Role role) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    std::string token;
    Role role;
    std::string name;
  };
  explicit Authenticator(std::string path) : path_(std::move(path)) {}
  static absl::StatusOr<std::vector<Entry>> Parse(const std::string& path);

  const std::string path_;
  mutable absl::Mutex mu_;
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);
};

// "cert:NAME" for a caller that presented a verified certificate (its
// subject alternative name or common name, as gRPC reports the peer
// identity); "" otherwise.
std::string PeerIdentity(const grpc::ServerContextBase& context);

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_AUTH_H_
