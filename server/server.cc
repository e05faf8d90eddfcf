#include "server/server.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/rpc_util.h"
#include "core/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/support/server_interceptor.h"
#include "spdlog/spdlog.h"

namespace yirage::server {
namespace {

std::string HostOf(const std::string& address) {
  auto colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

bool IsLoopback(const std::string& address) {
  const std::string host = HostOf(address);
  return host == "localhost" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

// Plaintext, TLS, or TLS with client certificates, as the options say.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> CredentialsFor(const ServerOptions& o) {
  if (o.tls_cert_path.empty() && o.tls_key_path.empty()) {
    if (!o.tls_client_ca_path.empty()) {
      return absl::InvalidArgumentError("--tls-client-ca: needs --tls-cert and --tls-key");
    }
    return grpc::InsecureServerCredentials();
  }
  if (o.tls_cert_path.empty() || o.tls_key_path.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key: give both or neither");
  }
  YIRAGE_ASSIGN_OR_RETURN(std::string cert, ReadTextFile(o.tls_cert_path, "--tls-cert"));
  YIRAGE_ASSIGN_OR_RETURN(std::string key, ReadTextFile(o.tls_key_path, "--tls-key"));
  grpc::SslServerCredentialsOptions ssl(
      o.tls_client_ca_path.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                   : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  if (!o.tls_client_ca_path.empty()) {
    YIRAGE_ASSIGN_OR_RETURN(ssl.pem_root_certs,
                            ReadTextFile(o.tls_client_ca_path, "--tls-client-ca"));
  }
  ssl.pem_key_cert_pairs.push_back({key, cert});
  return grpc::SslServerCredentials(ssl);
}

// The status code's canonical name ("OK", "INVALID_ARGUMENT", ...): gRPC's
// codes are absl's canonical codes, number for number.
std::string GrpcCodeName(grpc::StatusCode code) {
  std::string name = absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
  return name.empty() ? "UNKNOWN" : name;
}

// Counts and times every RPC, unary or streaming, of every service on a
// port (ours, health checking and reflection): one interceptor a call,
// from its start to the status the server sends. A call that ends without
// one (the caller went away) counts as CANCELLED.
class RpcMetricsInterceptor : public grpc::experimental::Interceptor {
 public:
  RpcMetricsInterceptor(Metrics* metrics, std::string method)
      : metrics_(metrics), method_(std::move(method)), start_(std::chrono::steady_clock::now()) {}
  ~RpcMetricsInterceptor() override {
    if (!reported_) Report(grpc::StatusCode::CANCELLED);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (!reported_ && methods->QueryInterceptionHookPoint(
                          grpc::experimental::InterceptionHookPoints::PRE_SEND_STATUS)) {
      Report(methods->GetSendStatus().error_code());
    }
    methods->Proceed();
  }

 private:
  void Report(grpc::StatusCode code) {
    reported_ = true;
    metrics_->GrpcRequest(
        method_, GrpcCodeName(code),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
  }

  Metrics* const metrics_;
  const std::string method_;
  const std::chrono::steady_clock::time_point start_;
  bool reported_ = false;
};

class RpcMetricsInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit RpcMetricsInterceptorFactory(Metrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    // "/package.Service/Method" -> "package.Service/Method". Methods no
    // service here serves share one label, so that callers cannot grow
    // the metric's label set.
    std::string method = info->method() != nullptr ? info->method() : "";
    if (!method.empty() && method[0] == '/') method.erase(0, 1);
    return new RpcMetricsInterceptor(metrics_, Served(method) ? std::move(method) : "unknown");
  }

 private:
  // Whether `method` ("package.Service/Method") is one of ours (in the
  // generated descriptors), health checking's or reflection's.
  static bool Served(const std::string& method) {
    if (method.rfind("yirage.v1.", 0) == 0) {
      std::string full = method;
      std::replace(full.begin(), full.end(), '/', '.');
      return google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(full) != nullptr;
    }
    return method == "grpc.health.v1.Health/Check" || method == "grpc.health.v1.Health/Watch" ||
           method == "grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo" ||
           method == "grpc.reflection.v1.ServerReflection/ServerReflectionInfo";
  }

  Metrics* const metrics_;
};

absl::StatusOr<std::unique_ptr<grpc::Server>> BuildGrpcServer(
    const std::string& listen, const std::vector<grpc::Service*>& services, int max_message_bytes,
    const std::shared_ptr<grpc::ServerCredentials>& credentials, Metrics* metrics,
    std::string* bound) {
  grpc::ServerBuilder builder;
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<RpcMetricsInterceptorFactory>(metrics));
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  int port = 0;
  builder.AddListeningPort(listen, credentials, &port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  builder.SetMaxReceiveMessageSize(max_message_bytes);
  builder.SetMaxSendMessageSize(256 << 20);
  auto server = builder.BuildAndStart();
  if (!server || port == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on '", listen, "' (address in use or invalid)"));
  }
  *bound = absl::StrCat(HostOf(listen), ":", port);
  return server;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Server>> Server::Start(const ServerOptions& options) {
  if (options.local_workers != "none" && options.local_workers != "cpu" &&
      options.local_workers != "auto") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--local-workers: expected auto, cpu or none, got '", options.local_workers, "'"));
  }
  // Without tokens anyone who reaches a port may submit, lease and report:
  // loopback only, unless the operator says otherwise.
  if (options.auth_tokens_path.empty() && !options.insecure) {
    for (const auto& [flag, address] : {std::pair{"--listen", options.client_listen},
                                        std::pair{"--worker-listen", options.worker_listen}}) {
      if (!IsLoopback(address)) {
        return absl::InvalidArgumentError(absl::StrCat(
            flag, " ", address,
            ": not a loopback address; without --auth-tokens the server serves loopback only "
            "(give --auth-tokens FILE, or --insecure to serve anyone who reaches the port)"));
      }
    }
  }
  YIRAGE_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                          CredentialsFor(options));
  std::unique_ptr<Server> s(new Server());
  s->options_ = options;
  // First, so that the stores' transactions are timed from their opening.
  YIRAGE_ASSIGN_OR_RETURN(s->metrics_, Metrics::Start(options.metrics_listen));
  SetTransactionObserver([m = s->metrics_.get()](const std::string& store, double seconds) {
    m->ObserveTransaction(store, seconds);
  });
  YIRAGE_ASSIGN_OR_RETURN(s->auth_, Authenticator::Open(options.auth_tokens_path));
  // Workers, jobs and leases: one connection (server/connection.h says why).
  YIRAGE_ASSIGN_OR_RETURN(std::shared_ptr<Connection> scheduler_db,
                          Connection::Open(options.db_path, "scheduler"));
  s->worker_store_ = WorkerStore::OnConnection(scheduler_db, options.workers);
  YIRAGE_ASSIGN_OR_RETURN(s->store_,
                          JobStore::OnConnection(scheduler_db, s->worker_store_.get(),
                                                 options.confirm_winners, options.finalists));
  YIRAGE_ASSIGN_OR_RETURN(s->lease_store_, LeaseStore::OnConnection(scheduler_db, options.leases));
  YIRAGE_ASSIGN_OR_RETURN(s->chip_store_, ChipStore::Open(options.db_path));
  const CatalogReport& catalog = s->chip_store_->catalog_report();
  spdlog::info(
      "chip catalog: {} added, {} updated, {} unchanged, {} user chips kept, {} deleted kept",
      catalog.added, catalog.updated, catalog.unchanged, catalog.user_kept, catalog.deleted_kept);
  s->chip_broadcaster_ = std::make_unique<ChipBroadcaster>();
  s->chip_store_->SetListener(
      [b = s->chip_broadcaster_.get()](const yirage::v1::ChipEvent& e) { b->Publish(e); });
  s->scheduler_ =
      std::make_unique<Scheduler>(options, s->store_.get(), s->lease_store_.get(),
                                  s->worker_store_.get(), s->metrics_.get(), s->chip_store_.get());
  s->job_service_ = std::make_unique<JobServiceImpl>(s->scheduler_.get(), s->store_.get(),
                                                     s->worker_store_.get(), s->auth_.get());
  s->registry_service_ =
      std::make_unique<RegistryServiceImpl>(s->chip_store_.get(), s->chip_broadcaster_.get(),
                                            options.max_candidates_default, s->auth_.get());
  s->rpc_pool_ = std::make_unique<RpcPool>(std::max(1, options.rpc_threads));
  s->worker_service_ =
      std::make_unique<WorkerServiceImpl>(s->scheduler_.get(), s->auth_.get(), s->rpc_pool_.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  YIRAGE_ASSIGN_OR_RETURN(
      s->client_server_,
      BuildGrpcServer(options.client_listen, {s->job_service_.get(), s->registry_service_.get()},
                      options.max_message_bytes, credentials, s->metrics_.get(),
                      &s->client_address_));
  YIRAGE_ASSIGN_OR_RETURN(
      s->worker_server_,
      BuildGrpcServer(options.worker_listen, {s->worker_service_.get()}, options.max_message_bytes,
                      credentials, s->metrics_.get(), &s->worker_address_));
  // A restart first settles what the crash left: expired leases go back to
  // the queue, finished jobs are closed.
  if (auto st = s->scheduler_->MaintainOnce(); !st.ok()) return st;
  s->scheduler_->StartMaintenance();

  std::string worker_binary = options.worker_binary;
  if (worker_binary.empty()) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    std::string exe = n > 0 ? std::string(self, n) : std::string("yirage-server");
    worker_binary = exe.substr(0, exe.rfind('/') + 1) + "yirage-worker";
  }
  std::string worker_target = s->worker_address_;
  if (HostOf(worker_target) == "0.0.0.0" || HostOf(worker_target) == "[::]") {
    worker_target = "127.0.0.1" + worker_target.substr(worker_target.rfind(':'));
  }
  YIRAGE_ASSIGN_OR_RETURN(
      auto specs, LocalWorkers::SpecsForMode(options.local_workers,
                                             worker_binary.substr(0, worker_binary.rfind('/'))));
  // Local workers trust the server's own certificate (a self-signed one, or
  // a chain file that ends with its CA) and, under mTLS, present it; with
  // tokens they take the first worker token.
  std::vector<std::string> connect_args;
  if (!options.tls_cert_path.empty()) {
    connect_args = {"--tls-ca", options.tls_cert_path};
    if (!options.tls_client_ca_path.empty()) {
      connect_args.insert(connect_args.end(),
                          {"--tls-cert", options.tls_cert_path, "--tls-key", options.tls_key_path});
    }
  }
  if (options.log_format != "text") {
    connect_args.insert(connect_args.end(), {"--log-format", options.log_format});
  }
  std::string worker_token;
  if (s->auth_->enabled() && !specs.empty()) {
    std::optional<std::string> token = s->auth_->TokenOf(Role::kWorker);
    if (!token.has_value()) {
      return absl::InvalidArgumentError(
          "--local-workers: --auth-tokens has no token of role worker for them");
    }
    worker_token = *token;
  }
  s->local_workers_ = std::make_unique<LocalWorkers>(worker_binary, worker_target,
                                                     std::move(connect_args), worker_token);
  YIRAGE_RETURN_IF_ERROR(s->local_workers_->Start(specs));
  // The search plans what the backend's workers said they run, so wait
  // (bounded) for the local CPU worker's first call: jobs submitted right
  // after start-up get its library and kernels. GPU workers may find no
  // device and exit, so start-up does not wait for them.
  for (const LocalWorkers::Spec& spec : specs) {
    if (spec.backend != "cpu") continue;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    bool described = false;
    while (!described && std::chrono::steady_clock::now() < deadline) {
      auto kernels = s->worker_store_->KernelsFor("cpu", "", UnixNow());
      described = kernels.ok() && kernels->has_value();
      if (!described) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (!described) {
      spdlog::warn(
          "the local cpu worker has not said what it runs after 15 s; jobs get "
          "generic row kernels until it does");
    }
  }
  return s;
}

absl::Status Server::ReloadTokens() { return auth_->Reload(); }

void Server::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  spdlog::info("shutting down: draining RPCs");
  auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(5);
  // Open WatchChips streams would otherwise hold the drain until the deadline.
  if (chip_broadcaster_) chip_broadcaster_->CloseAll();
  if (client_server_) client_server_->Shutdown(deadline);
  if (worker_server_) worker_server_->Shutdown(deadline);
  if (local_workers_) local_workers_->Stop();
  if (scheduler_) scheduler_->StopMaintenance();
}

Server::~Server() {
  Shutdown();
  // The stores, destroyed after this, may still run a transaction.
  SetTransactionObserver(nullptr);
}

}  // namespace yirage::server
