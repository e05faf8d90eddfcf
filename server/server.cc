#include "server/server.h"

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/rpc_util.h"
#include "core/status_macros.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "spdlog/spdlog.h"

namespace yirage::server {
namespace {

std::string HostOf(const std::string& address) {
  auto colon = address.rfind(':');
  return colon == std::string::npos ? address : address.substr(0, colon);
}

absl::StatusOr<std::unique_ptr<grpc::Server>> BuildGrpcServer(
    const std::string& listen, const std::vector<grpc::Service*>& services, int max_message_bytes,
    std::string* bound) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &port);
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
  std::unique_ptr<Server> s(new Server());
  s->options_ = options;
  YIRAGE_ASSIGN_OR_RETURN(s->worker_store_, WorkerStore::Open(options.db_path, options.workers));
  YIRAGE_ASSIGN_OR_RETURN(s->store_, JobStore::Open(options.db_path, s->worker_store_.get()));
  YIRAGE_ASSIGN_OR_RETURN(s->lease_store_, LeaseStore::Open(options.db_path, options.leases));
  YIRAGE_ASSIGN_OR_RETURN(s->chip_store_, ChipStore::Open(options.db_path));
  const CatalogReport& catalog = s->chip_store_->catalog_report();
  spdlog::info(
      "chip catalog: {} added, {} updated, {} unchanged, {} user chips kept, {} deleted kept",
      catalog.added, catalog.updated, catalog.unchanged, catalog.user_kept, catalog.deleted_kept);
  s->chip_broadcaster_ = std::make_unique<ChipBroadcaster>();
  s->chip_store_->SetListener(
      [b = s->chip_broadcaster_.get()](const yirage::v1::ChipEvent& e) { b->Publish(e); });
  YIRAGE_ASSIGN_OR_RETURN(s->metrics_, Metrics::Start(options.metrics_listen));
  s->scheduler_ =
      std::make_unique<Scheduler>(options, s->store_.get(), s->lease_store_.get(),
                                  s->worker_store_.get(), s->metrics_.get(), s->chip_store_.get());
  s->job_service_ = std::make_unique<JobServiceImpl>(s->scheduler_.get(), s->store_.get(),
                                                     s->worker_store_.get());
  s->registry_service_ = std::make_unique<RegistryServiceImpl>(
      s->chip_store_.get(), s->chip_broadcaster_.get(), options.max_candidates_default);
  s->worker_service_ = std::make_unique<WorkerServiceImpl>(s->scheduler_.get());

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  YIRAGE_ASSIGN_OR_RETURN(
      s->client_server_,
      BuildGrpcServer(options.client_listen, {s->job_service_.get(), s->registry_service_.get()},
                      options.max_message_bytes, &s->client_address_));
  YIRAGE_ASSIGN_OR_RETURN(s->worker_server_,
                          BuildGrpcServer(options.worker_listen, {s->worker_service_.get()},
                                          options.max_message_bytes, &s->worker_address_));
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
  s->local_workers_ = std::make_unique<LocalWorkers>(worker_binary, worker_target);
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

Server::~Server() { Shutdown(); }

}  // namespace yirage::server
