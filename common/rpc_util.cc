#include "common/rpc_util.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/support/client_interceptor.h"

namespace yirage {

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

std::unique_ptr<grpc::ClientContext> ContextWithDeadline(std::chrono::milliseconds timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(std::chrono::system_clock::now() + timeout);
  return context;
}

namespace {

// Adds the bearer token to every call's metadata. (gRPC's call credentials
// are not sent over plaintext channels; tokens must work on both.)
class BearerInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit BearerInterceptor(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* const header_;
};

class BearerInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerInterceptorFactory(const std::string& token) : header_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new BearerInterceptor(&header_);
  }

 private:
  const std::string header_;
};

grpc::ChannelArguments DefaultArguments() {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(256 << 20);
  args.SetMaxSendMessageSize(256 << 20);
  return args;
}

}  // namespace

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address) {
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), DefaultArguments());
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, ": cannot read '", path, "'"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

namespace {

// A token goes into an `authorization` header: one word of printable
// ASCII (gRPC aborts the process on a header value with a control
// character, so it is refused here first).
absl::Status CheckToken(const std::string& token, const std::string& where) {
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    if (c < 0x21 || c > 0x7e) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": the token holds ", c == ' ' ? "a space" : "a control or non-ASCII character",
          " at offset ", i,
          " (a token is one word of printable ASCII: give the token alone, not a line of the "
          "server's --auth-tokens file)"));
    }
  }
  return absl::OkStatus();
}

// The token of --token-file FILE (its first line, trimmed), else of the
// environment variable YIRAGE_TOKEN, else "".
absl::StatusOr<std::string> ResolveToken(const std::string& token_file) {
  if (!token_file.empty()) {
    auto text = ReadTextFile(token_file, "--token-file");
    if (!text.ok()) return text.status();
    std::string token(absl::StripAsciiWhitespace(text->substr(0, text->find('\n'))));
    if (token.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--token-file ", token_file, ": the first line holds no token"));
    }
    if (absl::Status s = CheckToken(token, absl::StrCat("--token-file ", token_file)); !s.ok()) {
      return s;
    }
    return token;
  }
  const char* env = std::getenv("YIRAGE_TOKEN");
  if (env == nullptr) return std::string();
  std::string token(absl::StripAsciiWhitespace(env));
  if (absl::Status s = CheckToken(token, "YIRAGE_TOKEN"); !s.ok()) return s;
  return token;
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const std::string& address,
                                                           const ChannelOptions& options) {
  absl::StatusOr<std::string> token = ResolveToken(options.token_file);
  if (!token.ok()) return token.status();
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (options.tls_cert_path.empty() != options.tls_key_path.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key: give both or neither");
  }
  if (options.tls_ca_path.empty()) {
    if (!options.tls_cert_path.empty()) {
      return absl::InvalidArgumentError("--tls-cert: needs --tls-ca (the server's roots)");
    }
  } else {
    grpc::SslCredentialsOptions ssl;
    auto roots = ReadTextFile(options.tls_ca_path, "--tls-ca");
    if (!roots.ok()) return roots.status();
    ssl.pem_root_certs = *roots;
    if (!options.tls_cert_path.empty()) {
      auto cert = ReadTextFile(options.tls_cert_path, "--tls-cert");
      if (!cert.ok()) return cert.status();
      auto key = ReadTextFile(options.tls_key_path, "--tls-key");
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *cert;
      ssl.pem_private_key = *key;
    }
    credentials = grpc::SslCredentials(ssl);
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  if (!token->empty()) {
    interceptors.push_back(std::make_unique<BearerInterceptorFactory>(*token));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      address, credentials, DefaultArguments(), std::move(interceptors));
}

std::string RandomHex(int n) {
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(n, '0');
  for (char& c : out) c = kDigits[rng() & 15];
  return out;
}

std::string SecureRandomHex(int n) {
  // getrandom(2) once for all the digits (std::random_device opens its
  // source for every object, a cost on every leased batch).
  std::string bytes((n + 1) / 2, '\0');
  size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t got = getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      std::random_device fallback;
      for (size_t i = filled; i < bytes.size(); ++i) bytes[i] = static_cast<char>(fallback());
      break;
    }
    filled += static_cast<size_t>(got);
  }
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(n, '0');
  for (int i = 0; i < n; ++i) {
    const auto byte = static_cast<unsigned char>(bytes[i / 2]);
    out[i] = kDigits[i % 2 == 0 ? byte & 15 : byte >> 4];
  }
  return out;
}

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]);
  }
  return diff == 0;
}

}  // namespace yirage
