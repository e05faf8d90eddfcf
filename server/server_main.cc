// yirage-server: the scheduler daemon.
#include <signal.h>

#include <cstdio>
#include <iostream>

#include "CLI/CLI.hpp"
#include "common/log_format.h"
#include "server/server.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  yirage::server::ServerOptions options;
  CLI::App app{"yirage-server: the YiRage scheduler daemon"};
  app.add_option("--listen", options.client_listen, "client API address (host:port, port 0 = any)")
      ->capture_default_str();
  app.add_option("--worker-listen", options.worker_listen, "worker API address")
      ->capture_default_str();
  app.add_option("--metrics-listen", options.metrics_listen, "Prometheus metrics address")
      ->capture_default_str();
  app.add_option("--db", options.db_path, "SQLite database path")->capture_default_str();
  app.add_option("--local-workers", options.local_workers,
                 "spawn workers for local devices: auto (the CPU, and one worker per device of "
                 "each GPU backend found), cpu or none")
      ->capture_default_str();
  app.add_option("--worker-binary", options.worker_binary,
                 "yirage-worker to spawn (default: beside this binary)");
  app.add_option("--lease-seconds", options.leases.lease_seconds,
                 "a batch whose worker is silent this long goes to another worker")
      ->capture_default_str();
  app.add_option("--batch-size", options.leases.batch_size, "candidates per leased batch")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-attempts", options.leases.max_attempts,
                 "a candidate that killed this many workers is marked failed")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-graph-ops", options.graph_limits.max_ops,
                 "ops a submitted graph may have (after compound ops expand)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-tensor-elements", options.graph_limits.max_tensor_elements,
                 "elements one tensor of a submitted graph may have")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-graph-bytes", options.graph_limits.max_total_bytes,
                 "bytes a graph's tensors may take together (the target chip's memory, if less)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--max-message-bytes", options.max_message_bytes,
                 "largest gRPC request either port accepts")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  options.search_threads = 2;
  app.add_option("--search-threads", options.search_threads,
                 "threads that search submitted jobs (SubmitJob returns the job SEARCHING at "
                 "once); 0 searches inside SubmitJob")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  app.add_option("--rpc-threads", options.rpc_threads,
                 "threads that serve worker calls (concurrent reports and leases are committed "
                 "in one SQLite transaction)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  app.add_option("--search-seconds", options.search_seconds,
                 "a job's rewrite search stops after this long (0 = no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--max-candidates", options.max_candidates_default,
                 "candidates per job when the job sets no budget")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--auth-tokens", options.auth_tokens_path,
                 "tokens file: one 'TOKEN ROLE [NAME]' a line (roles client, worker, admin); "
                 "every call then needs 'authorization: Bearer TOKEN'; reloaded on SIGHUP");
  app.add_flag("--insecure", options.insecure,
               "without --auth-tokens, serve non-loopback addresses anyway (anyone who reaches "
               "a port may submit, lease and report)");
  app.add_option("--confirm-winners", options.confirm_winners,
                 "run each job's best candidate again on a second connected worker of its "
                 "backend and chip before the job succeeds (a refuted one loses)")
      ->capture_default_str();
  app.add_option("--finalists", options.finalists,
                 "after the search, time each job's best N candidates again, interleaved with "
                 "the baseline on one worker, and take the best median speedup of that round "
                 "(0 or 1: no final round)")
      ->check(CLI::Range(0, 16))
      ->capture_default_str();
  app.add_option("--tls-cert", options.tls_cert_path, "PEM certificate chain: TLS on both ports");
  app.add_option("--tls-key", options.tls_key_path, "PEM private key of --tls-cert");
  app.add_option("--tls-client-ca", options.tls_client_ca_path,
                 "PEM CA certificates: callers must present a certificate they signed (mTLS)");
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  std::string log_format = "text";
  app.add_option("--log-format", log_format,
                 "text, or json: one JSON object a line (time, level, logger, msg)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "json"}));
  CLI11_PARSE(app, argc, argv);
  spdlog::set_level(spdlog::level::from_str(log_level));
  options.log_format = log_format;
  if (absl::Status st = yirage::SetLogFormat(log_format, "yirage-server"); !st.ok()) {
    std::fprintf(stderr, "yirage-server: %s\n", std::string(st.message()).c_str());
    return 2;
  }
  // Logs often go to a file or pipe: flush every line so nothing is lost to
  // a crash and a reader sees events as they happen.
  spdlog::flush_on(spdlog::level::trace);

  // SIGTERM/SIGINT are taken synchronously by sigwait below, so no handler
  // runs in a random thread.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto server = yirage::server::Server::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "yirage-server: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  // One parseable line for people and for tests that start us on port 0.
  std::printf("yirage-server listening client=%s worker=%s metrics=%s db=%s\n",
              (*server)->client_address().c_str(), (*server)->worker_address().c_str(),
              (*server)->metrics_address().c_str(), options.db_path.c_str());
  std::fflush(stdout);
  int sig = 0;
  // SIGHUP reloads the tokens file; SIGTERM and SIGINT stop.
  while (sigwait(&signals, &sig) == 0 && sig == SIGHUP) {
    if (absl::Status st = (*server)->ReloadTokens(); !st.ok()) {
      spdlog::error("SIGHUP: tokens not reloaded, the old ones stay: {}",
                    std::string(st.message()));
    }
  }
  spdlog::info("received signal {}", sig);
  (*server)->Shutdown();
  std::printf("yirage-server stopped\n");
  return 0;
}
