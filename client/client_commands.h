// The commands of yirage-client. Each returns the process exit code: 0 only
// on success; errors go to stderr.
#ifndef YIRAGE_CLIENT_CLIENT_COMMANDS_H_
#define YIRAGE_CLIENT_CLIENT_COMMANDS_H_

#include <chrono>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "yirage/v1/job.grpc.pb.h"

namespace yirage::client {

struct SubmitOptions {
  std::string graph_path;
  std::string backend;  // empty: the --chip's backend, else cpu (the server decides)
  int budget_candidates = 0;
  double budget_seconds = 0;
  double rtol = 0;
  double atol = 0;
  std::string chip_id;
  bool any_chip = false;  // SubmitJobRequest.any_chip
  bool no_cache = false;  // SubmitJobRequest.no_cache
  bool wait = false;
  // The submission's id (SubmitJobRequest.request_id); empty: a random one,
  // so that the retries of an unanswered submit find its job.
  std::string request_id;
};

struct SpecSubmitOptions {
  std::string spec_path;
  std::vector<std::string> variants;  // empty: all
  bool print_graphs = false;          // print each variant's graph JSON, submit nothing
  // backend, budgets, chip, cache, wait; rtol and atol (where set) replace
  // every variant's; graph_path and request_id are not used.
  SubmitOptions submit;
};

class ClientCommands {
 public:
  // Calls the server at `server` (for messages) through `channel`.
  ClientCommands(const std::string& server, std::shared_ptr<grpc::Channel> channel,
                 std::chrono::milliseconds rpc_timeout, bool json, std::ostream& out,
                 std::ostream& err);

  int Submit(const SubmitOptions& options);
  // One job a variant of a spec file (client/spec_file.h); with `wait`, a
  // summary table of them once all have ended.
  int SubmitSpec(const SpecSubmitOptions& options);
  int Watch(const std::string& job_id);
  int Get(const std::string& job_id);
  int List(int limit);
  int Cancel(const std::string& job_id);
  int Candidates(const std::string& job_id);
  // The job's trial tree: graphs by rewrite, their partitions, and each
  // candidate's schedule and result (GetTrialTree).
  int Tree(const std::string& job_id);
  // Writes a job's kernel (`candidate_id` 0: the best) to `out_dir`; `march`:
  // the CPU build's compiler target ("" native).
  int Kernel(const std::string& job_id, const std::string& out_dir, const std::string& march = "",
             int64_t candidate_id = 0);
  int Workers();

 private:
  // Follows the job (WatchJob, else GetJob) until it ends; with `progress`,
  // shows it meanwhile. The ended job goes to `final_job` where given, else
  // it is printed.
  int WaitForJob(const std::string& job_id, bool progress, yirage::v1::Job* final_job = nullptr);
  // The request for `graph` under `options`, with a fresh request_id where
  // the options have none.
  yirage::v1::SubmitJobRequest SubmitRequest(const yirage::v1::Graph& graph,
                                             const SubmitOptions& options);
  // Sends the request, again (same request_id) while the server is
  // unreachable or slow, up to three times; notes a repeat or a cache
  // answer on stderr. `what` names it in messages.
  grpc::Status SendSubmit(const std::string& what, const yirage::v1::SubmitJobRequest& request,
                          yirage::v1::SubmitJobResponse* response);
  // "submitted JOB (N candidates)" on stderr.
  void SaySubmitted(const yirage::v1::SubmitJobResponse& response);
  int Fail(const std::string& what, const grpc::Status& status);
  void PrintJob(const yirage::v1::Job& job);

  std::unique_ptr<yirage::v1::JobService::Stub> stub_;
  std::string server_;
  std::chrono::milliseconds rpc_timeout_;
  bool json_;
  std::ostream& out_;
  std::ostream& err_;
};

}  // namespace yirage::client

#endif  // YIRAGE_CLIENT_CLIENT_COMMANDS_H_
