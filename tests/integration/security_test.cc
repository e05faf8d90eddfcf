// Process-level tests of docs/security.md: tokens and roles on every RPC of
// both ports, TLS and mTLS with certificates made here by openssl, SIGHUP
// reloading the tokens, and the loopback-only rule without tokens.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <sstream>
#include <thread>

#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/integration/process_harness.h"
#include "yirage/v1/job.grpc.pb.h"
#include "yirage/v1/registry.grpc.pb.h"
#include "yirage/v1/worker.grpc.pb.h"

namespace yirage::testing {
namespace {

using nlohmann::json;
using std::chrono::seconds;

constexpr char kClientToken[] = "client-token-0123456789abcdef";
constexpr char kClient2Token[] = "client2-token-0123456789abcdef";
constexpr char kWorkerToken[] = "worker-token-0123456789abcdef";
constexpr char kAdminToken[] = "admin-token-0123456789abcdef";
constexpr char kWorker2Token[] = "worker2-token-0123456789abcdef";

// The program `name` on PATH, or "".
std::string OnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_FALSE(dir_.empty());
    tokens_ = dir_ + "/tokens";
    WriteFile(tokens_, TokensFile());
    for (const auto& [name, token] : {std::pair{"client", kClientToken},
                                      {"client2", kClient2Token},
                                      {"worker", kWorkerToken},
                                      {"admin", kAdminToken}}) {
      WriteFile(dir_ + "/" + name + ".token", std::string(token) + "\n");
    }
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "---- server log ----\n" << server_.Log() << "\n";
    server_.Kill();
    std::filesystem::remove_all(dir_);
  }
  static std::string TokensFile() {
    return std::string("# token role name\n") + kClientToken + " client alice\n" + kClient2Token +
           " client bob\n" + kWorkerToken + " worker gpu-pool\n\n" + kAdminToken + " admin ops\n" +
           kWorker2Token + " worker other-pool\n";
  }
  void StartServer(const std::vector<std::string>& args) {
    std::string error;
    ASSERT_TRUE(server_.Start(dir_ + "/yirage.db", args, &error)) << error;
  }
  // Makes a CA, a server certificate for localhost and 127.0.0.1 (server.pem
  // holds it and the CA, so that it also serves as a trust root) and a
  // client certificate, all signed by the CA.
  void MakeCertificates() {
    const std::string openssl = OnPath("openssl");
    ASSERT_FALSE(openssl.empty()) << "openssl not found (scripts/install-deps.sh installs it)";
    auto run = [&](std::vector<std::string> argv) {
      argv[0] = openssl;
      CommandResult r = RunCommand(argv, seconds(60));
      ASSERT_EQ(r.exit_code, 0) << argv[1] << ": " << r.err;
    };
    const std::string d = dir_ + "/";
    const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt",
                                         "ec_paramgen_curve:prime256v1", "-nodes"};
    auto req = [&](std::vector<std::string> argv) {
      std::vector<std::string> full = {"openssl", "req"};
      full.insert(full.end(), ec.begin(), ec.end());
      full.insert(full.end(), argv.begin(), argv.end());
      run(full);
    };
    req({"-x509", "-keyout", d + "ca.key", "-out", d + "ca.pem", "-days", "2", "-subj",
         "/CN=yirage-test-ca"});
    WriteFile(d + "server.ext", "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
    WriteFile(d + "client.ext", "basicConstraints=CA:FALSE\n");
    for (const std::string& who : {std::string("server"), std::string("client")}) {
      req({"-keyout", d + who + ".key", "-out", d + who + ".csr", "-subj", "/CN=" + who});
      run({"openssl", "x509", "-req", "-in", d + who + ".csr", "-CA", d + "ca.pem", "-CAkey",
           d + "ca.key", "-CAcreateserial", "-days", "2", "-out", d + who + "_leaf.pem", "-extfile",
           d + who + ".ext"});
    }
    std::ifstream leaf(d + "server_leaf.pem"), ca(d + "ca.pem");
    std::stringstream chain;
    chain << leaf.rdbuf() << ca.rdbuf();
    WriteFile(d + "server.pem", chain.str());
    std::filesystem::copy_file(d + "client_leaf.pem", d + "client.pem");
  }

  std::string dir_, tokens_;
  ServerProcess server_;
};

// A call's outcome code for one caller (a token or none).
using Call = std::function<grpc::StatusCode(grpc::ClientContext*)>;

struct Rpc {
  std::string name;
  bool client, worker, admin;  // the roles it accepts
  Call call;
};

template <typename Stub, typename Req, typename Resp>
Call Unary(Stub* stub, grpc::Status (Stub::*method)(grpc::ClientContext*, const Req&, Resp*),
           Req request) {
  return [stub, method, request](grpc::ClientContext* context) {
    Resp response;
    return (stub->*method)(context, request, &response).error_code();
  };
}

TEST_F(SecurityTest, EveryRpcChecksTokenAndRole) {
  StartServer({"--local-workers", "none", "--auth-tokens", tokens_});
  auto client_channel =
      grpc::CreateChannel(server_.client_address(), grpc::InsecureChannelCredentials());
  auto worker_channel =
      grpc::CreateChannel(server_.worker_address(), grpc::InsecureChannelCredentials());
  auto jobs = yirage::v1::JobService::NewStub(client_channel);
  auto chips = yirage::v1::RegistryService::NewStub(client_channel);
  auto workers = yirage::v1::WorkerService::NewStub(worker_channel);
  using JS = yirage::v1::JobService::Stub;
  using RS = yirage::v1::RegistryService::Stub;
  using WS = yirage::v1::WorkerService::Stub;
  // Requests naming a job or chip that does not exist: an allowed caller
  // gets NOT_FOUND, which is neither refusal.
  auto no_job = [](auto request) {
    request.set_job_id("job-none");
    return request;
  };
  auto no_chip = [](auto request) {
    request.set_chip_id("no-such-chip");
    return request;
  };
  const auto get_job = no_job(yirage::v1::GetJobRequest());
  const auto cancel = no_job(yirage::v1::CancelJobRequest());
  const auto list_candidates = no_job(yirage::v1::ListCandidatesRequest());
  const auto get_kernel = no_job(yirage::v1::GetKernelRequest());
  const auto get_chip = no_chip(yirage::v1::GetChipRequest());
  const auto delete_chip = no_chip(yirage::v1::DeleteChipRequest());
  yirage::v1::SynchronizeRequest sync;  // no worker id: refused after auth
  const std::vector<Rpc> rpcs = {
      {"SubmitJob", true, false, true, Unary(jobs.get(), &JS::SubmitJob, {})},
      {"GetJob", true, false, true, Unary(jobs.get(), &JS::GetJob, get_job)},
      {"ListJobs", true, false, true, Unary(jobs.get(), &JS::ListJobs, {})},
      {"CancelJob", true, false, true, Unary(jobs.get(), &JS::CancelJob, cancel)},
      {"ListCandidates", true, false, true,
       Unary(jobs.get(), &JS::ListCandidates, list_candidates)},
      {"GetKernel", true, false, true, Unary(jobs.get(), &JS::GetKernel, get_kernel)},
      {"GetTrialTree", true, false, true,
       Unary(jobs.get(), &JS::GetTrialTree, no_job(yirage::v1::GetTrialTreeRequest()))},
      {"ListWorkers", false, false, true, Unary(jobs.get(), &JS::ListWorkers, {})},
      {"RegisterChip", false, false, true, Unary(chips.get(), &RS::RegisterChip, {})},
      {"GetChip", true, false, true, Unary(chips.get(), &RS::GetChip, get_chip)},
      {"ListChips", true, false, true, Unary(chips.get(), &RS::ListChips, {})},
      {"DeleteChip", false, false, true, Unary(chips.get(), &RS::DeleteChip, delete_chip)},
      {"ImportChips", false, false, true, Unary(chips.get(), &RS::ImportChips, {})},
      {"ExportChips", true, false, true, Unary(chips.get(), &RS::ExportChips, {})},
      {"GetSearchSpace", true, false, true, Unary(chips.get(), &RS::GetSearchSpace, get_chip)},
      {"WatchChips", true, false, true,
       [&](grpc::ClientContext* context) {
         context->set_deadline(std::chrono::system_clock::now() + seconds(5));
         auto reader = chips->WatchChips(context, {});
         yirage::v1::ChipEvent event;
         if (reader->Read(&event)) {
           context->TryCancel();
           return grpc::StatusCode::OK;  // the WATCHING event: served
         }
         return reader->Finish().error_code();
       }},
      {"WatchJob", true, false, true,
       [&](grpc::ClientContext* context) {
         yirage::v1::WatchJobRequest watch;
         watch.set_job_id("job-none");
         auto reader = jobs->WatchJob(context, watch);
         yirage::v1::JobEvent event;
         while (reader->Read(&event)) {
         }
         return reader->Finish().error_code();  // NOT_FOUND once let in
       }},
      {"Synchronize", false, true, false, Unary(workers.get(), &WS::Synchronize, sync)},
  };
  const std::vector<std::pair<std::string, std::string>> callers = {
      {"no token", ""},
      {"unknown token", "not-a-token-0123456789abcdef"},
      {"client", kClientToken},
      {"worker", kWorkerToken},
      {"admin", kAdminToken}};
  for (const Rpc& rpc : rpcs) {
    for (const auto& [who, token] : callers) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + seconds(10));
      if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
      const grpc::StatusCode code = rpc.call(&context);
      SCOPED_TRACE(rpc.name + " as " + who + ": code " + std::to_string(code));
      if (token.empty() || who == "unknown token") {
        EXPECT_EQ(code, grpc::StatusCode::UNAUTHENTICATED);
        continue;
      }
      const bool allowed = who == "client" ? rpc.client : who == "worker" ? rpc.worker : rpc.admin;
      if (allowed) {
        EXPECT_NE(code, grpc::StatusCode::UNAUTHENTICATED);
        EXPECT_NE(code, grpc::StatusCode::PERMISSION_DENIED);
      } else {
        EXPECT_EQ(code, grpc::StatusCode::PERMISSION_DENIED);
      }
    }
  }
  // A token in the wrong form of header is no token.
  {
    grpc::ClientContext context;
    context.AddMetadata("authorization", kAdminToken);
    yirage::v1::ListJobsResponse response;
    EXPECT_EQ(jobs->ListJobs(&context, {}, &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  // Health checking stays open.
  {
    grpc::GenericStub generic(client_channel);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + seconds(10));
    grpc::ByteBuffer request, response;  // an empty HealthCheckRequest: the server as a whole
    grpc::Slice empty("");
    request = grpc::ByteBuffer(&empty, 1);
    std::promise<grpc::Status> done;
    generic.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                      &response, [&](grpc::Status s) { done.set_value(s); });
    EXPECT_TRUE(done.get_future().get().ok());
  }
  // A worker id stays with the token that first used it: another worker
  // token cannot speak for it (an Idle under its id would give its batch
  // away).
  {
    yirage::v1::SynchronizeRequest idle;
    idle.set_worker_id("w1");
    idle.set_backend("cpu");
    idle.mutable_status()->mutable_idle();
    auto call = [&](const char* token) {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + seconds(10));
      context.AddMetadata("authorization", std::string("Bearer ") + token);
      yirage::v1::SynchronizeResponse response;
      return workers->Synchronize(&context, idle, &response);
    };
    EXPECT_TRUE(call(kWorkerToken).ok());
    grpc::Status other = call(kWorker2Token);
    EXPECT_EQ(other.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_NE(other.error_message().find("belongs to 'token:gpu-pool'"), std::string::npos)
        << other.error_message();
    EXPECT_TRUE(call(kWorkerToken).ok());
  }
  // The log never shows a token.
  for (const char* token : {kClientToken, kWorkerToken, kAdminToken}) {
    EXPECT_EQ(server_.Log().find(token), std::string::npos);
  }
}

TEST_F(SecurityTest, ClientsCancelTheirOwnJobsAndAdminsAny) {
  StartServer({"--local-workers", "none", "--auth-tokens", tokens_});
  auto submit = [&](const std::string& token_file) {
    CommandResult r = server_.Client({"--token-file", token_file, "submit",
                                      SourceDir() + "/examples/graphs/softmax.json", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    json j = r.Json();
    return j.is_object() && j.contains("job_id") ? j["job_id"].get<std::string>() : "";
  };
  const std::string alice = dir_ + "/client.token", bob = dir_ + "/client2.token",
                    ops = dir_ + "/admin.token";
  const std::string job1 = submit(alice), job2 = submit(alice);
  ASSERT_FALSE(job1.empty());
  CommandResult got = server_.Client({"--token-file", bob, "get", job1, "--json"});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  EXPECT_EQ(got.Json()["owner"], "alice");
  CommandResult refused = server_.Client({"--token-file", bob, "cancel", job1});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_NE(refused.err.find("alice"), std::string::npos) << refused.err;
  EXPECT_EQ(server_.WaitForSearch(job1, std::chrono::seconds(60), {"--token-file", bob})["state"],
            "QUEUED");
  EXPECT_EQ(server_.Client({"--token-file", alice, "cancel", job1}).exit_code, 0);
  EXPECT_EQ(server_.Client({"--token-file", ops, "cancel", job2}).exit_code, 0);
  // The token from the environment when no file is given: none here, so refused.
  CommandResult anonymous = server_.Client({"list"});
  EXPECT_NE(anonymous.exit_code, 0);
  EXPECT_NE(anonymous.err.find("Bearer"), std::string::npos) << anonymous.err;
}

TEST_F(SecurityTest, SighupReloadsTheTokens) {
  StartServer({"--local-workers", "none", "--auth-tokens", tokens_});
  const std::string alice = dir_ + "/client.token";
  ASSERT_EQ(server_.Client({"--token-file", alice, "list"}).exit_code, 0);
  const std::string fresh = "fresh-token-0123456789abcdef";
  WriteFile(dir_ + "/fresh.token", fresh + "\n");
  WriteFile(tokens_, fresh + " client carol\n" + kWorkerToken + " worker pool\n");
  ASSERT_EQ(kill(server_.pid(), SIGHUP), 0);
  bool reloaded = false;
  for (int i = 0; i < 100 && !reloaded; ++i) {
    reloaded = server_.Client({"--token-file", dir_ + "/fresh.token", "list"}).exit_code == 0;
    if (!reloaded) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(reloaded);
  EXPECT_NE(server_.Client({"--token-file", alice, "list"}).exit_code, 0);
  // A broken file keeps the tokens in force.
  WriteFile(tokens_, "short client\n");
  ASSERT_EQ(kill(server_.pid(), SIGHUP), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(server_.Client({"--token-file", dir_ + "/fresh.token", "list"}).exit_code, 0);
  EXPECT_NE(server_.Log().find("tokens not reloaded"), std::string::npos);
}

TEST_F(SecurityTest, ATokenThatIsNotOneWordIsRefusedWithAMessage) {
  StartServer({"--local-workers", "none", "--auth-tokens", tokens_});
  // The line of the tokens file rather than the token alone, and a control
  // character: gRPC aborts the process on such a header value, so the
  // client and the worker must refuse the token before any call.
  WriteFile(dir_ + "/line.token", std::string(kWorkerToken) + " worker pool\n");
  WriteFile(dir_ + "/control.token", std::string("abc\x01") + kWorkerToken + "\n");
  for (const std::string& file : {dir_ + "/line.token", dir_ + "/control.token"}) {
    CommandResult client = server_.Client({"--token-file", file, "list"});
    EXPECT_GT(client.exit_code, 0) << client.err;
    EXPECT_LT(client.exit_code, 128) << "a signal: " << client.err;
    EXPECT_NE(client.err.find("one word of printable ASCII"), std::string::npos) << client.err;
    CommandResult worker =
        RunCommand({BinDir() + "/yirage-worker", "--scheduler", server_.worker_address(),
                    "--backend", "cpu", "--token-file", file},
                   seconds(30));
    EXPECT_GT(worker.exit_code, 0) << worker.err;
    EXPECT_LT(worker.exit_code, 128) << "a signal: " << worker.err;
    EXPECT_NE(worker.err.find("one word of printable ASCII"), std::string::npos) << worker.err;
  }
}

TEST_F(SecurityTest, MutualTlsWithTokensRunsAJobEndToEnd) {
  ASSERT_NO_FATAL_FAILURE(MakeCertificates());
  const std::string d = dir_ + "/";
  StartServer({"--local-workers", "cpu", "--auth-tokens", tokens_, "--tls-cert", d + "server.pem",
               "--tls-key", d + "server.key", "--tls-client-ca", d + "ca.pem"});
  const std::vector<std::string> tls = {"--tls-ca",       d + "ca.pem",      "--tls-cert",
                                        d + "client.pem", "--tls-key",       d + "client.key",
                                        "--token-file",   d + "client.token"};
  auto with = [](std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  CommandResult job =
      server_.Client(with(tls, {"submit", SourceDir() + "/examples/graphs/softmax.json", "--wait",
                                "--json", "--budget-candidates", "2"}),
                     seconds(300));
  ASSERT_EQ(job.exit_code, 0) << job.err;
  EXPECT_EQ(job.Json()["state"], "SUCCEEDED") << job.out;
  // Without a client certificate, or in plaintext, the handshake fails.
  CommandResult no_cert = server_.Client(
      {"--tls-ca", d + "ca.pem", "--token-file", d + "client.token", "--timeout", "3", "list"});
  EXPECT_NE(no_cert.exit_code, 0);
  CommandResult plain =
      server_.Client({"--token-file", d + "client.token", "--timeout", "3", "list"});
  EXPECT_NE(plain.exit_code, 0);
  // A certificate the CA did not sign is refused too.
  CommandResult wrong_ca = server_.Client(
      {"--tls-ca", d + "client.pem", "--token-file", d + "client.token", "--timeout", "3", "list"});
  EXPECT_NE(wrong_ca.exit_code, 0);
}

TEST_F(SecurityTest, WithoutTokensOnlyLoopbackUnlessInsecure) {
  const std::vector<std::string> base = {
      BinDir() + "/yirage-server", "--listen",    "0.0.0.0:0", "--worker-listen", "127.0.0.1:0",
      "--metrics-listen",          "127.0.0.1:0", "--db",      dir_ + "/a.db"};
  CommandResult refused = RunCommand(base, seconds(30));
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("--listen 0.0.0.0:0: not a loopback address"), std::string::npos)
      << refused.err;
  // A tokens file missing a worker token for the local workers is refused
  // at start-up, naming what is missing.
  WriteFile(dir_ + "/clients_only", std::string(kClientToken) + " client alice\n");
  std::string error;
  ServerProcess no_worker_token;
  EXPECT_FALSE(no_worker_token.Start(
      dir_ + "/b.db", {"--local-workers", "cpu", "--auth-tokens", dir_ + "/clients_only"}, &error));
  EXPECT_NE(no_worker_token.Log().find("no token of role worker"), std::string::npos)
      << no_worker_token.Log();
  // With --insecure it serves (and answers on loopback).
  std::vector<std::string> insecure = base;
  insecure.push_back("--insecure");
  insecure.push_back("--local-workers");
  insecure.push_back("none");
  const std::string log = dir_ + "/insecure.log";
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : insecure) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (freopen(log.c_str(), "w", stdout) == nullptr) _exit(126);
    execv(argv[0], argv.data());
    _exit(127);
  }
  ASSERT_GT(pid, 0);
  bool listening = false;
  for (int i = 0; i < 200 && !listening; ++i) {
    std::ifstream in(log);
    std::stringstream text;
    text << in.rdbuf();
    listening = text.str().find("listening client=0.0.0.0:") != std::string::npos;
    if (!listening) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(listening);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

}  // namespace
}  // namespace yirage::testing
