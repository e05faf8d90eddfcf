#include "server/auth.h"

#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/rpc_util.h"
#include "spdlog/spdlog.h"

namespace yirage::server {
namespace {

constexpr size_t kMinTokenLength = 16;

bool TokenCharsOk(const std::string& token) {
  for (char c : token) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("._~+/=-").find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

// The token of "authorization: Bearer TOKEN", or empty.
std::string BearerToken(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return "";
  const std::string value(it->second.data(), it->second.size());
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWith(value, kBearer)) return "";
  return value.substr(kBearer.size());
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kClient:
      return "client";
    case Role::kWorker:
      return "worker";
    case Role::kAdmin:
      return "admin";
  }
  return "?";
}

std::string PeerIdentity(const grpc::ServerContextBase& context) {
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return "";
  for (const grpc::string_ref& name : auth->GetPeerIdentity()) {
    return absl::StrCat("cert:", std::string(name.data(), name.size()));
  }
  return "";
}

absl::StatusOr<std::unique_ptr<Authenticator>> Authenticator::Open(const std::string& path) {
  if (path.empty()) return std::unique_ptr<Authenticator>(new Authenticator(""));
  auto entries = Parse(path);
  if (!entries.ok()) return entries.status();
  std::unique_ptr<Authenticator> auth(new Authenticator(path));
  absl::MutexLock lock(&auth->mu_);
  auth->entries_ = std::move(*entries);
  return auth;
}

absl::StatusOr<std::vector<Authenticator::Entry>> Authenticator::Parse(const std::string& path) {
  absl::StatusOr<std::string> file = ReadTextFile(path, "--auth-tokens");
  if (!file.ok()) return file.status();
  std::vector<Entry> entries;
  std::set<std::string> names;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(*file, '\n')) {
    ++number;
    const std::string where = absl::StrCat("--auth-tokens ", path, " line ", number, ": ");
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    std::vector<std::string> fields =
        absl::StrSplit(text, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() < 2 || fields.size() > 3) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "expected 'TOKEN ROLE [NAME]', got ", fields.size(), " fields"));
    }
    Entry e;
    e.token = fields[0];
    if (e.token.size() < kMinTokenLength || !TokenCharsOk(e.token)) {
      // The token itself is never echoed.
      return absl::InvalidArgumentError(absl::StrCat(
          where, "a token must be at least ", kMinTokenLength,
          " characters of letters, digits and ._~+/=- (got ", e.token.size(), " characters)"));
    }
    if (fields[1] == "client") {
      e.role = Role::kClient;
    } else if (fields[1] == "worker") {
      e.role = Role::kWorker;
    } else if (fields[1] == "admin") {
      e.role = Role::kAdmin;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "role must be client, worker or admin, got '", fields[1], "'"));
    }
    e.name = fields.size() == 3 ? fields[2] : absl::StrCat("token-line-", number);
    if (!names.insert(e.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, "name '", e.name, "' used twice"));
    }
    for (const Entry& other : entries) {
      if (other.token == e.token) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "the same token as '", other.name, "'"));
      }
    }
    entries.push_back(std::move(e));
  }
  if (entries.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--auth-tokens ", path, ": no tokens"));
  }
  return entries;
}

absl::Status Authenticator::Reload() {
  if (!enabled()) return absl::OkStatus();
  auto entries = Parse(path_);
  if (!entries.ok()) return entries.status();
  absl::MutexLock lock(&mu_);
  entries_ = std::move(*entries);
  spdlog::info("auth: {} tokens loaded from {}", entries_.size(), path_);
  return absl::OkStatus();
}

absl::StatusOr<Caller> Authenticator::Authorize(const grpc::ServerContextBase& context,
                                                const Access& access) const {
  if (!enabled()) return Caller{"", Role::kAdmin};
  const std::string token = BearerToken(context);
  if (token.empty()) {
    return absl::UnauthenticatedError(
        "this server requires 'authorization: Bearer TOKEN' metadata (yirage-client and "
        "yirage-worker: --token-file or YIRAGE_TOKEN)");
  }
  absl::MutexLock lock(&mu_);
  // Every entry is compared, so the time does not say which one matched.
  const Entry* found = nullptr;
  for (const Entry& e : entries_) {
    if (ConstantTimeEquals(e.token, token) && found == nullptr) found = &e;
  }
  if (found == nullptr) return absl::UnauthenticatedError("unknown token");
  if (!access.Allows(found->role)) {
    std::string allowed;
    for (Role r : {Role::kClient, Role::kWorker, Role::kAdmin}) {
      if (access.Allows(r)) absl::StrAppend(&allowed, allowed.empty() ? "" : " or ", RoleName(r));
    }
    return absl::PermissionDeniedError(absl::StrCat("token '", found->name, "' has role ",
                                                    RoleName(found->role), "; this call needs ",
                                                    allowed));
  }
  return Caller{found->name, found->role};
}

std::optional<std::string> Authenticator::TokenOf(Role role) const {
  absl::MutexLock lock(&mu_);
  for (const Entry& e : entries_) {
    if (e.role == role) return e.token;
  }
  return std::nullopt;
}

}  // namespace yirage::server
