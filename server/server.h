// One yirage-server: the client API, the worker API and the metrics endpoint
// on separate ports, the scheduler, and optionally supervised local workers.
#ifndef YIRAGE_SERVER_SERVER_H_
#define YIRAGE_SERVER_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/grpcpp.h"
#include "server/auth.h"
#include "server/chip_store.h"
#include "server/job_service.h"
#include "server/local_workers.h"
#include "server/metrics.h"
#include "server/registry_service.h"
#include "server/rpc_pool.h"
#include "server/scheduler.h"
#include "server/server_options.h"
#include "server/worker_service.h"

namespace yirage::server {

class Server {
 public:
  // Opens the database, binds every port (port 0 picks a free one) and starts
  // serving, maintenance and local workers.
  static absl::StatusOr<std::unique_ptr<Server>> Start(const ServerOptions& options);
  ~Server();

  // The addresses actually bound.
  const std::string& client_address() const { return client_address_; }
  const std::string& worker_address() const { return worker_address_; }
  const std::string& metrics_address() const { return metrics_->address(); }

  // Reads --auth-tokens again (SIGHUP); on an error the old tokens stay.
  absl::Status ReloadTokens();

  // Drains: stops taking calls, stops local workers, finishes maintenance.
  void Shutdown();

 private:
  Server() = default;
  ServerOptions options_;
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<WorkerStore> worker_store_;  // before store_, which asks it
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<LeaseStore> lease_store_;
  std::unique_ptr<ChipStore> chip_store_;
  // Declared before the gRPC servers: outlives every WatchChips stream.
  std::unique_ptr<ChipBroadcaster> chip_broadcaster_;
  std::unique_ptr<Metrics> metrics_;
  std::unique_ptr<Scheduler> scheduler_;
  // After the scheduler, before the services and gRPC servers: destroyed
  // after them (calls finish on it) and before the scheduler its work uses.
  std::unique_ptr<RpcPool> rpc_pool_;
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<RegistryServiceImpl> registry_service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<grpc::Server> client_server_;
  std::unique_ptr<grpc::Server> worker_server_;
  std::unique_ptr<LocalWorkers> local_workers_;
  std::string client_address_;
  std::string worker_address_;
  bool shut_down_ = false;
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_SERVER_H_
