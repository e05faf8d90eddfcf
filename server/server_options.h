// Settings of one yirage-server process.
#ifndef YIRAGE_SERVER_SERVER_OPTIONS_H_
#define YIRAGE_SERVER_SERVER_OPTIONS_H_

#include <string>

#include "core/graph.h"
#include "server/lease_store.h"
#include "server/worker_store.h"

namespace yirage::server {

struct ServerOptions {
  std::string client_listen = "127.0.0.1:50051";  // JobService
  std::string worker_listen = "127.0.0.1:50052";  // WorkerService
  std::string metrics_listen = "127.0.0.1:9464";  // Prometheus text format at /metrics
  std::string db_path = "yirage.db";
  // "auto" (the CPU, plus one per GPU once those backends exist), "cpu", "none".
  std::string local_workers = "none";
  // The log format the server writes ("text" or "json"); local workers write
  // the same.
  std::string log_format = "text";
  std::string worker_binary;  // default: yirage-worker beside the server binary
  double maintenance_interval_seconds = 0.5;
  double worker_poll_seconds = 1.0;  // how often an idle worker calls again
  int max_candidates_default = 64;   // when a job sets no candidate budget
  // Threads that search submitted jobs (SubmitJob stores the job SEARCHING
  // and returns); 0 searches inside SubmitJob.
  int search_threads = 0;
  // Threads that serve worker calls (reports and leases wait for SQLite's
  // write lock; concurrent ones are committed together).
  int rpc_threads = 16;
  // The rewrite search of one job stops after this long (its memory is
  // bounded by SearchOptions.max_rewrite_graphs); 0 = no limit.
  double search_seconds = 30;
  LeaseStoreOptions leases;
  // Bounds on a submitted graph; a job whose target chip has less memory
  // than max_total_bytes is held to the chip's.
  core::GraphLimits graph_limits;
  int max_message_bytes = 16 << 20;  // largest gRPC request either port takes
  // Bearer tokens and roles (server/auth.h); empty: every call allowed, and
  // then only loopback addresses unless `insecure`.
  std::string auth_tokens_path;
  bool insecure = false;
  // A job's best candidate is run again on a second worker of its backend
  // and chip, where one is connected, before the job succeeds.
  bool confirm_winners = true;
  // The final round: a job's best `finalists` candidates timed again side by
  // side with the baseline before its winner is chosen (0 or 1: none).
  int finalists = 3;
  // TLS on both gRPC ports (PEM files); with tls_client_ca, callers must
  // present a certificate it signed (mTLS).
  std::string tls_cert_path;
  std::string tls_key_path;
  std::string tls_client_ca_path;
  WorkerStoreOptions workers;
};

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_SERVER_OPTIONS_H_
