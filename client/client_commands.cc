#include "client/client_commands.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <thread>

#include "client/call_failure.h"
#include "client/job_json.h"
#include "client/progress_line.h"
#include "client/text_table.h"
#include "common/rpc_util.h"
#include "core/graph_json.h"

namespace yirage::client {
namespace {

bool IsFinal(yirage::v1::JobState s) {
  return s == yirage::v1::SUCCEEDED || s == yirage::v1::FAILED || s == yirage::v1::CANCELLED;
}

std::string Fixed(double v, int digits) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(digits) << v;
  return os.str();
}

}  // namespace

ClientCommands::ClientCommands(const std::string& server, std::shared_ptr<grpc::Channel> channel,
                               std::chrono::milliseconds rpc_timeout, bool json, std::ostream& out,
                               std::ostream& err)
    : stub_(yirage::v1::JobService::NewStub(channel)),
      server_(server),
      rpc_timeout_(rpc_timeout),
      json_(json),
      out_(out),
      err_(err) {}

int ClientCommands::Fail(const std::string& what, const grpc::Status& status) {
  return ReportCallFailure(err_, server_, what, status);
}

void ClientCommands::PrintJob(const yirage::v1::Job& job) {
  if (json_) {
    out_ << JobToJson(job).dump(2) << "\n";
    return;
  }
  out_ << "job        " << job.job_id() << "\n"
       << "graph      " << job.graph_name() << "\n"
       << "state      " << yirage::v1::JobState_Name(job.state()) << "\n"
       << "backend    " << job.backend() << "\n"
       << "candidates " << job.candidates_generated() << " generated, "
       << job.candidates_evaluated() << " evaluated, " << job.candidates_failed() << " failed, "
       << job.candidates_pending() << " pending\n"
       << "tolerance  rtol " << job.tolerance().rtol() << " atol " << job.tolerance().atol()
       << "\n";
  if (!job.cached_from().empty()) {
    out_ << "cached     answered from job " << job.cached_from()
         << " (its winner verified and timed again here; no search)\n";
  }
  if (!job.chip_id().empty()) {
    out_ << "chip       " << job.chip_id()
         << (job.chip_bound() ? " (runs only on workers of this chip)" : "") << "\n";
  }
  // When it was submitted, started (first leased) and ended, in UTC, and
  // how long it waited and ran.
  auto when = [](double unix_seconds) {
    const std::time_t t = static_cast<std::time_t>(unix_seconds);
    std::tm tm{};
    gmtime_r(&t, &tm);
    char text[32];
    std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S", &tm);
    return std::string(text) + " UTC";
  };
  if (job.created_unix() > 0) {
    out_ << "times      submitted " << when(job.created_unix());
    if (job.started_unix() > 0) {
      out_ << ", started " << Fixed(job.started_unix() - job.created_unix(), 1) << " s later";
    }
    if (job.finished_unix() > 0) {
      out_ << ", ended " << Fixed(job.finished_unix() - job.created_unix(), 1)
           << " s after submitting";
      if (job.started_unix() > 0) {
        out_ << " (ran " << Fixed(job.finished_unix() - job.started_unix(), 1) << " s)";
      }
    }
    out_ << "\n";
  }
  const auto& search = job.search();
  out_ << "search     " << Fixed(search.search_seconds() * 1e3, 1)
       << " ms: " << search.graphs_explored() << " rewritten graphs explored, "
       << search.rewrites_verified() << " proved equivalent by fingerprint, "
       << search.rewrites_rejected() << " rejected; " << search.rewritten_plans() << " of "
       << job.candidates_generated() << " candidates run a rewritten graph\n";
  if (!search.note().empty()) out_ << "           " << search.note() << "\n";
  if (!search.hedged_plan().empty()) {
    out_ << "           last candidate, past the budget but kept as the cost model's hedge: ["
         << search.hedged_plan() << "]\n";
  }
  if (job.has_best()) {
    const auto& b = job.best();
    out_ << "best       candidate " << b.candidate_id() << " [" << b.description() << "]\n"
         << "           " << Fixed(b.time_us(), 2) << " us vs "
         << (search.baseline_kind().empty() ? "" : search.baseline_kind() + " ") << "baseline "
         << Fixed(b.baseline_time_us(), 2) << " us: " << Fixed(b.speedup(), 2) << "x speedup\n"
         << "           verified, max abs error " << b.max_abs_error() << ", max rel error "
         << b.max_rel_error() << "\n";
    if (b.final_of() != 0) {
      out_ << "           final round: candidate " << b.final_of()
           << " timed again beside the other finalists and the baseline, median of rounds "
           << Fixed(b.time_us(), 2) << " us (IQR " << Fixed(b.time_iqr_us(), 2) << ")\n";
    }
    // Run again on a second worker (docs/security.md); else why not.
    constexpr char kUnconfirmed[] = "the winner was not confirmed: ";
    if (b.has_confirmation()) {
      out_ << "           confirmed by " << b.confirmation().worker_id() << " ("
           << Fixed(b.confirmation().speedup(), 2) << "x speedup, "
           << Fixed(b.confirmation().time_us(), 2) << " us)\n";
    } else if (job.message().rfind(kUnconfirmed, 0) == 0) {
      out_ << "           not confirmed: " << job.message().substr(sizeof(kUnconfirmed) - 1)
           << "\n";
    } else if (!IsFinal(job.state())) {
      out_ << "           not confirmed yet\n";
    }
  } else {
    out_ << "best       none yet\n";
  }
  if (!job.message().empty()) out_ << "message    " << job.message() << "\n";
}

int ClientCommands::Submit(const SubmitOptions& options) {
  std::ifstream in(options.graph_path);
  if (!in) {
    err_ << "yirage-client: cannot read graph file '" << options.graph_path << "'\n";
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  auto graph = core::ParseGraphJson(text.str());
  if (!graph.ok()) {
    err_ << "yirage-client: " << options.graph_path << ": " << graph.status().message() << "\n";
    return 1;
  }
  yirage::v1::SubmitJobRequest request = SubmitRequest(*graph, options);
  yirage::v1::SubmitJobResponse response;
  grpc::Status status = SendSubmit(options.graph_path, request, &response);
  if (!status.ok()) return Fail("submit " + options.graph_path, status);
  if (!options.wait) {
    if (json_) {
      out_ << nlohmann::json{{"job_id", response.job_id()},
                             {"candidates_generated", response.candidates_generated()},
                             {"existing", response.existing()},
                             {"cached_from", response.cached_from()}}
                  .dump(2)
           << "\n";
    } else {
      out_ << response.job_id() << "\n";
    }
    return 0;
  }
  if (!json_) SaySubmitted(response);
  return WaitForJob(response.job_id(), !json_);
}

void ClientCommands::SaySubmitted(const yirage::v1::SubmitJobResponse& response) {
  if (response.candidates_generated() > 0) {
    err_ << "submitted " << response.job_id() << " (" << response.candidates_generated()
         << " candidates)\n";
  } else {
    err_ << "submitted " << response.job_id() << " (searching)\n";
  }
}

yirage::v1::SubmitJobRequest ClientCommands::SubmitRequest(const yirage::v1::Graph& graph,
                                                           const SubmitOptions& options) {
  yirage::v1::SubmitJobRequest request;
  *request.mutable_graph() = graph;
  request.set_backend(options.backend);
  request.set_budget_candidates(options.budget_candidates);
  request.set_budget_seconds(options.budget_seconds);
  request.mutable_tolerance()->set_rtol(options.rtol);
  request.mutable_tolerance()->set_atol(options.atol);
  request.set_chip_id(options.chip_id);
  request.set_any_chip(options.any_chip);
  request.set_no_cache(options.no_cache);
  request.set_request_id(options.request_id.empty() ? "cli-" + RandomHex(24) : options.request_id);
  return request;
}

grpc::Status ClientCommands::SendSubmit(const std::string& what,
                                        const yirage::v1::SubmitJobRequest& request,
                                        yirage::v1::SubmitJobResponse* response_ptr) {
  yirage::v1::SubmitJobResponse& response = *response_ptr;
  // A submit whose reply did not come (the server unreachable a moment, or
  // slow) is sent again with the same request_id, which finds its job
  // rather than making a second one.
  grpc::Status status;
  for (int attempt = 0;; ++attempt) {
    // Submission may include candidate generation: allow it more time.
    auto context = ContextWithDeadline(std::max(rpc_timeout_, std::chrono::milliseconds(60000)));
    status = stub_->SubmitJob(context.get(), request, &response);
    const bool retry = status.error_code() == grpc::StatusCode::UNAVAILABLE ||
                       status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (status.ok() || !retry || attempt == 2) break;
    err_ << "yirage-client: submit " << what << ": " << status.error_message()
         << "; sending it again (request_id " << request.request_id() << ")\n";
    std::this_thread::sleep_for(std::chrono::seconds(1 << attempt));
  }
  if (!status.ok()) return status;
  if (response.existing() && !json_) {
    err_ << "request_id " << request.request_id() << " was submitted before: job "
         << response.job_id() << "\n";
  }
  if (!response.cached_from().empty() && !json_) {
    err_ << "answered from the cache: job " << response.cached_from()
         << "'s winner, verified again here (--no-cache to search)\n";
  }
  return grpc::Status::OK;
}

int ClientCommands::WaitForJob(const std::string& job_id, bool progress,
                               yirage::v1::Job* final_job) {
  const bool tty = progress && isatty(fileno(stderr));
  std::string last_line;
  // Shows the job's progress; true once it has ended (then it is printed).
  auto show = [&](const yirage::v1::Job& job) {
    if (progress) {
      if (tty) {
        err_ << "\r" << TerminalProgressLine(job, UnixNow(), TerminalColumns(fileno(stderr)))
             << "\033[K" << std::flush;
      } else if (std::string line = PlainProgressLine(job); line != last_line) {
        err_ << line << "\n";
        last_line = line;
      }
    }
    if (!IsFinal(job.state())) return false;
    if (tty) err_ << "\n";
    if (final_job != nullptr) {
      *final_job = job;
    } else {
      PrintJob(job);
    }
    return true;
  };
  // WatchJob streams each change; a stream lasts at most kWatchSpan (every
  // call has a deadline) and is opened again while the job runs. A server
  // without WatchJob is polled instead.
  constexpr auto kWatchSpan = std::chrono::minutes(10);
  bool streaming = true;
  for (;;) {
    yirage::v1::Job job;
    grpc::Status status;
    if (streaming) {
      auto context = ContextWithDeadline(kWatchSpan);
      yirage::v1::WatchJobRequest request;
      request.set_job_id(job_id);
      auto reader = stub_->WatchJob(context.get(), request);
      yirage::v1::JobEvent event;
      bool ended = false;
      while (!ended && reader->Read(&event)) {
        job = event.job();
        ended = show(job);
      }
      if (ended) {
        context->TryCancel();
        reader->Finish();
        return job.state() == yirage::v1::SUCCEEDED ? 0 : 1;
      }
      status = reader->Finish();
      if (status.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
        streaming = false;  // an older server
        continue;
      }
      if (status.ok() || status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) continue;
    } else {
      yirage::v1::GetJobRequest request;
      request.set_job_id(job_id);
      auto context = ContextWithDeadline(rpc_timeout_);
      status = stub_->GetJob(context.get(), request, &job);
      if (status.ok()) {
        if (show(job)) return job.state() == yirage::v1::SUCCEEDED ? 0 : 1;
        std::this_thread::sleep_for(std::chrono::milliseconds(tty ? 200 : 500));
        continue;
      }
    }
    // The server may be restarting (a stream it ends as it stops reads as
    // CANCELLED here, not the job's state); its state is durable: keep
    // waiting, and say so.
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE ||
        status.error_code() == grpc::StatusCode::CANCELLED) {
      if (progress) {
        const std::string note = "server " + server_ + " unreachable; retrying (the job is kept)";
        if (tty) {
          err_ << "\r" << note << "\033[K" << std::flush;
        } else if (last_line != note) {
          err_ << note << "\n";
          last_line = note;
        }
      }
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    if (tty) err_ << "\n";
    return Fail("watch " + job_id, status);
  }
}

int ClientCommands::Watch(const std::string& job_id) { return WaitForJob(job_id, true); }

int ClientCommands::Get(const std::string& job_id) {
  yirage::v1::GetJobRequest request;
  request.set_job_id(job_id);
  yirage::v1::Job job;
  auto context = ContextWithDeadline(rpc_timeout_);
  grpc::Status status = stub_->GetJob(context.get(), request, &job);
  if (!status.ok()) return Fail("get " + job_id, status);
  PrintJob(job);
  return 0;
}

int ClientCommands::List(int limit) {
  yirage::v1::ListJobsRequest request;
  request.set_limit(limit);
  yirage::v1::ListJobsResponse response;
  auto context = ContextWithDeadline(rpc_timeout_);
  grpc::Status status = stub_->ListJobs(context.get(), request, &response);
  if (!status.ok()) return Fail("list", status);
  if (json_) {
    nlohmann::json jobs = nlohmann::json::array();
    for (const auto& job : response.jobs()) jobs.push_back(JobToJson(job));
    out_ << nlohmann::json{{"jobs", jobs}}.dump(2) << "\n";
    return 0;
  }
  TextTable table({"JOB", "GRAPH", "STATE", "CANDIDATES", "BEST"});
  for (const auto& job : response.jobs()) {
    std::string best = job.has_best() ? Fixed(job.best().time_us(), 1) + " us (" +
                                            Fixed(job.best().speedup(), 2) + "x)"
                                      : "-";
    table.Add({job.job_id(), job.graph_name(), yirage::v1::JobState_Name(job.state()),
               std::to_string(job.candidates_evaluated()) + "/" +
                   std::to_string(job.candidates_generated()),
               best});
  }
  table.Print(out_);
  return 0;
}

int ClientCommands::Cancel(const std::string& job_id) {
  yirage::v1::CancelJobRequest request;
  request.set_job_id(job_id);
  yirage::v1::Job job;
  auto context = ContextWithDeadline(rpc_timeout_);
  grpc::Status status = stub_->CancelJob(context.get(), request, &job);
  if (!status.ok()) return Fail("cancel " + job_id, status);
  PrintJob(job);
  return 0;
}

int ClientCommands::Candidates(const std::string& job_id) {
  yirage::v1::ListCandidatesRequest request;
  request.set_job_id(job_id);
  yirage::v1::ListCandidatesResponse response;
  auto context = ContextWithDeadline(rpc_timeout_);
  grpc::Status status = stub_->ListCandidates(context.get(), request, &response);
  if (!status.ok()) return Fail("candidates " + job_id, status);
  if (json_) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& c : response.candidates()) list.push_back(CandidateToJson(c));
    out_ << nlohmann::json{{"job_id", job_id}, {"candidates", list}}.dump(2) << "\n";
    return 0;
  }
  // STATUS is the numeric check on the device; PROOF is the fingerprint
  // check of a rewritten graph against the job's graph ("original": no
  // rewrite, nothing to prove). EST_US is the cost model's estimate
  // (core/cost_model.h), beside the measured TIME_US.
  TextTable table(
      {"ID", "STATUS", "TIME_US", "EST_US", "SPEEDUP", "MAX_ABS", "PROOF", "PLAN / ERROR"});
  for (const auto& c : response.candidates()) {
    bool timed = c.time_us() > 0;
    std::string proof = "original";
    if (c.plan().has_graph()) {
      std::ostringstream p;
      if (c.plan().fingerprint_verified()) {
        p << "fp x" << c.plan().fingerprint_trials() << " <" << std::setprecision(1)
          << c.plan().fingerprint_false_pass_bound();
      } else {
        p << "UNPROVED";
      }
      proof = p.str();
    }
    std::string last = c.plan().description();
    if (c.same_kernel_as() != 0)
      last += "  (same kernel as " + std::to_string(c.same_kernel_as()) + ")";
    if (c.confirms() != 0) last += "  (confirms #" + std::to_string(c.confirms()) + ")";
    if (c.final_of() != 0) last += "  (final round of #" + std::to_string(c.final_of()) + ")";
    if (!c.error().empty()) last += "  ! " + c.error().substr(0, 160);
    table.Add(
        {std::to_string(c.candidate_id()), yirage::v1::CandidateStatus_Name(c.status()),
         timed ? Fixed(c.time_us(), 2) : "-",
         c.plan().estimated_cost() > 0 ? Fixed(c.plan().estimated_cost() * 1e6, 2) : "-",
         timed && c.baseline_time_us() > 0 ? Fixed(c.baseline_time_us() / c.time_us(), 2) : "-",
         c.status() == yirage::v1::VERIFIED || c.status() == yirage::v1::MISMATCH
             ? Fixed(c.max_abs_error(), 6)
             : "-",
         proof, last});
  }
  table.Print(out_);
  return 0;
}

int ClientCommands::Tree(const std::string& job_id) {
  yirage::v1::GetTrialTreeRequest request;
  request.set_job_id(job_id);
  yirage::v1::TrialTree tree;
  auto context = ContextWithDeadline(rpc_timeout_);
  grpc::Status status = stub_->GetTrialTree(context.get(), request, &tree);
  if (!status.ok()) return Fail("tree " + job_id, status);
  if (json_) {
    nlohmann::json nodes = nlohmann::json::array();
    for (const yirage::v1::TrialNode& n : tree.nodes()) {
      nlohmann::json j = {
          {"node_id", n.node_id()},
          {"parent_id", n.parent_id()},
          {"kind", yirage::v1::TrialNode::Kind_Name(n.kind())},
          {"label", n.label()},
          {"rewrites", std::vector<std::string>(n.rewrites().begin(), n.rewrites().end())},
          {"candidates", n.candidates()},
          {"verified", n.verified()},
          {"best_speedup", n.best_speedup()}};
      if (n.kind() == yirage::v1::TrialNode::CANDIDATE) {
        j["candidate_id"] = n.candidate_id();
        j["status"] = yirage::v1::CandidateStatus_Name(n.status());
        j["time_us"] = n.time_us();
        j["speedup"] = n.speedup();
        j["baseline"] = n.baseline();
        j["best"] = n.best();
        if (!n.error().empty()) j["error"] = n.error();
      }
      nodes.push_back(std::move(j));
    }
    out_ << nlohmann::json{{"job_id", tree.job_id()}, {"nodes", nodes}}.dump(2) << "\n";
    return 0;
  }
  // Drawn by the server, so that every client shows the same tree.
  out_ << tree.text();
  return 0;
}

int ClientCommands::Kernel(const std::string& job_id, const std::string& out_dir,
                           const std::string& march, int64_t candidate_id) {
  yirage::v1::GetKernelRequest request;
  request.set_job_id(job_id);
  request.set_march(march);
  request.set_candidate_id(candidate_id);
  yirage::v1::GetKernelResponse response;
  auto context = ContextWithDeadline(rpc_timeout_);
  grpc::Status status = stub_->GetKernel(context.get(), request, &response);
  if (!status.ok()) return Fail("kernel " + job_id, status);
  std::error_code ec;
  std::filesystem::create_directories(out_dir, ec);
  if (ec) {
    err_ << "yirage-client: cannot create '" << out_dir << "': " << ec.message() << "\n";
    return 1;
  }
  nlohmann::json written = nlohmann::json::array();
  for (const auto& f : response.files()) {
    std::filesystem::path path = std::filesystem::path(out_dir) / f.path();
    std::ofstream file(path, std::ios::binary);
    file << f.content();
    if (!file) {
      err_ << "yirage-client: cannot write '" << path.string() << "'\n";
      return 1;
    }
    if (path.extension() == ".sh") {
      std::filesystem::permissions(path, std::filesystem::perms::owner_exec,
                                   std::filesystem::perm_options::add, ec);
    }
    written.push_back(path.string());
  }
  if (json_) {
    out_ << nlohmann::json{{"job_id", job_id},
                           {"candidate_id", response.candidate_id()},
                           {"files", written}}
                .dump(2)
         << "\n";
  } else {
    out_ << "wrote the kernel of candidate " << response.candidate_id() << " to " << out_dir
         << ":\n";
    for (const auto& p : written) out_ << "  " << p.get<std::string>() << "\n";
    bool has_build = false, has_loader = false;
    for (const auto& f : response.files()) {
      has_build |= f.path() == "build.sh";
      has_loader |= f.path() == "yirage_kernel.py";
    }
    if (has_build) {
      out_ << "build it with: sh " << out_dir
           << "/build.sh (the header declares its entry points)\n"
           << "call it from Python (NumPy or PyTorch, from " << out_dir
           << "): import yirage_kernel; yirage_kernel.run(...)\n";
    } else if (has_loader) {
      out_ << "call it from PyTorch (see " << out_dir << "/README.txt): import yirage_kernel; "
           << "yirage_kernel.run(...)\n";
    }
  }
  return 0;
}

int ClientCommands::Workers() {
  yirage::v1::ListWorkersRequest request;
  yirage::v1::ListWorkersResponse response;
  auto context = ContextWithDeadline(rpc_timeout_);
  grpc::Status status = stub_->ListWorkers(context.get(), request, &response);
  if (!status.ok()) return Fail("workers", status);
  if (json_) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& w : response.workers()) list.push_back(WorkerToJson(w));
    out_ << nlohmann::json{{"workers", list}}.dump(2) << "\n";
    return 0;
  }
  TextTable table({"WORKER", "BACKEND", "STATE", "CONNECTED", "CHIP", "DEVICE"});
  for (const auto& w : response.workers()) {
    nlohmann::json device = WorkerToJson(w)["device"];
    std::string name =
        device.is_object() && device.contains("model") && device["model"].is_string()
            ? device["model"].get<std::string>()
        : device.is_object() && device.contains("model_name") && device["model_name"].is_string()
            ? device["model_name"].get<std::string>()
            : (device.is_object() && device.contains("name") && device["name"].is_string()
                   ? device["name"].get<std::string>()
                   : "");
    table.Add({w.worker_id(), w.backend(), w.state(), w.connected() ? "yes" : "no",
               w.chip_id().empty() ? "-" : w.chip_id(), name});
  }
  table.Print(out_);
  return 0;
}

}  // namespace yirage::client
