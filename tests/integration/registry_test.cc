// The chip registry through the real binaries: persistence across restarts,
// import/export between servers, WatchChips, validation, and CPU detection.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"
#include "tests/integration/process_harness.h"

namespace yirage::testing {
namespace {

using nlohmann::json;
using std::chrono::seconds;

json AcmeChip() {
  return json::parse(R"({
    "chip_id": "acme_x1", "chip_name": "ACME X1", "vendor": "other", "category": "gpu",
    "arch_name": "Roadrunner", "arch_code": "rr1", "backend": "triton",
    "memory": {"capacity_gb": 48, "bandwidth_gbps": 1200, "memory_type": "HBM3", "ecc": true},
    "compute": {"warp_size": 32, "num_compute_units": 100, "max_threads_per_block": 1024,
                "shared_mem_per_block_kb": 96, "l2_cache_mb": 40, "peak_tflops_fp32": 40.5},
    "features": {"tensor_cores": true, "bf16": true},
    "metadata": {"source": "ACME X1 datasheet rev 3"}
  })");
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_FALSE(dir_.empty());
  }
  void TearDown() override {
    if (HasFailure()) {
      std::cerr << "---- server log ----\n"
                << a_.Log() << "\n---- server B log ----\n"
                << b_.Log() << "\n";
    }
    a_.Kill();
    b_.Kill();
    std::filesystem::remove_all(dir_);
  }
  void Start(ServerProcess& server, const std::string& db,
             const std::vector<std::string>& args = {"--local-workers", "none"}) {
    std::string error;
    ASSERT_TRUE(server.Start(dir_ + "/" + db, args, &error)) << error;
  }
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  json Chips(ServerProcess& server) {
    CommandResult r = server.Client({"chips", "list", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    json j = r.Json();
    return j.is_object() ? j["chips"] : json::array();
  }

  std::string dir_;
  ServerProcess a_, b_;
};

TEST_F(RegistryTest, RegisteredChipSurvivesARestart) {
  Start(a_, "a.db");
  const size_t builtin = Chips(a_).size();
  EXPECT_GE(builtin, 40u);
  std::string file = Write("acme.json", AcmeChip().dump());
  CommandResult r = a_.Client({"chips", "register", file});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("registered acme_x1"), std::string::npos) << r.out;
  CommandResult before = a_.Client({"chips", "get", "acme_x1"});
  ASSERT_EQ(before.exit_code, 0) << before.err;
  EXPECT_EQ(before.Json(), AcmeChip());

  ASSERT_EQ(a_.Stop(), 0);
  Start(a_, "a.db");
  CommandResult after = a_.Client({"chips", "get", "acme_x1"});
  ASSERT_EQ(after.exit_code, 0) << after.err;
  EXPECT_EQ(after.out, before.out);
  EXPECT_EQ(Chips(a_).size(), builtin + 1);  // the catalog was not seeded twice
  // Registering it again is refused unless --overwrite.
  r = a_.Client({"chips", "register", file});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("chip 'acme_x1': already registered"), std::string::npos) << r.err;
  json changed = AcmeChip();
  changed["memory"]["bandwidth_gbps"] = 1500;
  r = a_.Client({"chips", "register", Write("acme2.json", changed.dump()), "--overwrite"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(a_.Client({"chips", "get", "acme_x1"}).Json()["memory"]["bandwidth_gbps"], 1500);
  // Filters.
  r = a_.Client({"chips", "list", "--vendor", "amd", "--category", "gpu", "--json"});
  ASSERT_EQ(r.exit_code, 0);
  std::set<std::string> ids;
  const json listed = r.Json();
  ASSERT_TRUE(listed.is_object()) << r.out;
  for (const json& c : listed["chips"]) {
    EXPECT_EQ(c["vendor"], "amd");
    EXPECT_EQ(c["category"], "gpu");
    ids.insert(c["chip_id"].get<std::string>());
  }
  EXPECT_TRUE(ids.count("mi300x"));
  EXPECT_FALSE(ids.count("epyc_9654"));
  // Delete.
  ASSERT_EQ(a_.Client({"chips", "delete", "acme_x1"}).exit_code, 0);
  r = a_.Client({"chips", "get", "acme_x1"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("no chip 'acme_x1'"), std::string::npos) << r.err;
  // The search space of a chip.
  r = a_.Client({"chips", "search-config", "h100_sxm", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.Json()["grid_blocks"], json::array({132, 264, 528}));
  EXPECT_EQ(r.Json()["tile_sizes"], json::array({16, 32, 64, 128}));
}

TEST_F(RegistryTest, ExportFromOneServerImportsIntoAnother) {
  Start(a_, "a.db");
  Start(b_, "b.db");
  ASSERT_EQ(a_.Client({"chips", "register", Write("acme.json", AcmeChip().dump())}).exit_code, 0);
  std::string exported = dir_ + "/catalog.json";
  CommandResult r = a_.Client({"chips", "export", exported});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = b_.Client({"chips", "import", exported, "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json report = r.Json();
  EXPECT_EQ(report["added"], 1);
  EXPECT_EQ(report["updated"], 0);
  EXPECT_EQ(report["unchanged"].get<size_t>(), Chips(a_).size() - 1);
  std::string exported_b = dir_ + "/catalog_b.json";
  ASSERT_EQ(b_.Client({"chips", "export", exported_b}).exit_code, 0);
  EXPECT_EQ(ReadAll(exported_b), ReadAll(exported));
  // A filtered export holds only those chips.
  ASSERT_EQ(a_.Client({"chips", "export", dir_ + "/amd.json", "--vendor", "amd"}).exit_code, 0);
  json amd = json::parse(ReadAll(dir_ + "/amd.json"));
  ASSERT_TRUE(amd.is_array());
  EXPECT_GE(amd.size(), 5u);
  for (const json& c : amd) EXPECT_EQ(c["vendor"], "amd");
}

TEST_F(RegistryTest, WatchSeesARegistrationByAnotherClient) {
  Start(a_, "a.db");
  const std::string out_path = dir_ + "/watch.out";
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int fd = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::string bin = BinDir() + "/yirage-client";
    std::string server = a_.client_address();
    execl(bin.c_str(), bin.c_str(), "--server", server.c_str(), "chips", "watch", "--json",
          "--count", "2", "--for", "60", static_cast<char*>(nullptr));
    _exit(127);
  }
  auto wait_for = [&](const std::string& needle) {
    auto deadline = std::chrono::steady_clock::now() + seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (ReadAll(out_path).find(needle) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  };
  ASSERT_TRUE(wait_for("\"WATCHING\"")) << ReadAll(out_path);
  ASSERT_EQ(a_.Client({"chips", "register", Write("acme.json", AcmeChip().dump())}).exit_code, 0);
  ASSERT_EQ(a_.Client({"chips", "delete", "acme_x1"}).exit_code, 0);
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + seconds(30);
  while (waitpid(pid, &status, WNOHANG) != pid) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      FAIL() << "watch did not end: " << ReadAll(out_path);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadAll(out_path);
  std::vector<json> events;
  std::istringstream lines(ReadAll(out_path));
  for (std::string line; std::getline(lines, line);) {
    json j = json::parse(line, nullptr, false);
    if (!j.is_discarded()) events.push_back(j);
  }
  ASSERT_EQ(events.size(), 3u) << ReadAll(out_path);
  EXPECT_EQ(events[1]["event"], "REGISTERED");
  EXPECT_EQ(events[1]["chip_id"], "acme_x1");
  EXPECT_EQ(events[1]["chip"]["memory"]["bandwidth_gbps"], 1200);
  EXPECT_EQ(events[2]["event"], "DELETED");
  EXPECT_EQ(events[2]["chip_id"], "acme_x1");
}

TEST_F(RegistryTest, EveryValidationErrorIsRefusedNamingChipAndField) {
  Start(a_, "a.db");
  const size_t before = Chips(a_).size();
  struct Case {
    std::string text;
    std::string expected;
  };
  auto with = [](std::function<void(json&)> edit) {
    json j = AcmeChip();
    edit(j);
    return j.dump();
  };
  std::vector<Case> cases = {
      {"{\"chip_id\": \"acme_x1\", ", "malformed JSON"},
      {with([](json& j) { j.erase("chip_id"); }), "chip_id: missing"},
      {with([](json& j) { j["chip_id"] = "Acme X1"; }), "chip 'Acme X1': chip_id"},
      {with([](json& j) { j["vendor"] = "acme"; }), "chip 'acme_x1': vendor: unknown value 'acme'"},
      {with([](json& j) { j["category"] = "qpu"; }), "chip 'acme_x1': category: unknown value"},
      {with([](json& j) { j["backend"] = "opencl"; }), "chip 'acme_x1': backend: unknown value"},
      {with([](json& j) { j["memory"]["capacity_gb"] = 0; }),
       "chip 'acme_x1': memory.capacity_gb: must be > 0"},
      {with([](json& j) { j["memory"]["bandwidth_gbps"] = -1; }),
       "chip 'acme_x1': memory.bandwidth_gbps: must be > 0"},
      {with([](json& j) { j["compute"]["l2_cache_mb"] = -2; }),
       "chip 'acme_x1': compute.l2_cache_mb: must be >= 0"},
      {with([](json& j) { j["compute"]["clock_ghz"] = 2; }),
       "chip 'acme_x1': compute.clock_ghz: unknown field"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].text);
    std::string file = Write("bad" + std::to_string(i) + ".json", cases[i].text);
    CommandResult r = a_.Client({"chips", "register", file});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find(cases[i].expected), std::string::npos) << r.err;
  }
  // An import with one bad chip stores none of them.
  json good = AcmeChip();
  json bad = AcmeChip();
  bad["chip_id"] = "acme_x2";
  bad["memory"]["bandwidth_gbps"] = 0;
  CommandResult r =
      a_.Client({"chips", "import", Write("list.json", json::array({good, bad}).dump())});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("chip 'acme_x2': memory.bandwidth_gbps"), std::string::npos) << r.err;
  r = a_.Client({"chips", "import", Write("notlist.json", "[{\"chip_id\": ]")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("malformed JSON"), std::string::npos) << r.err;
  EXPECT_EQ(Chips(a_).size(), before);
  // A job naming a chip the registry lacks is refused.
  r = a_.Client({"submit", SourceDir() + "/examples/graphs/softmax.json", "--chip", "no_such"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("chip_id: no chip 'no_such'"), std::string::npos) << r.err;
  r = a_.Client({"submit", SourceDir() + "/examples/graphs/softmax.json", "--chip", "h100_sxm",
                 "--backend", "cpu"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("is a cuda chip"), std::string::npos) << r.err;
  // Without --backend the chip decides: a cuda job, waiting for a worker.
  r = a_.Client(
      {"submit", SourceDir() + "/examples/graphs/softmax.json", "--chip", "h100_sxm", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  CommandResult job = a_.Client({"get", r.Json()["job_id"].get<std::string>(), "--json"});
  ASSERT_EQ(job.exit_code, 0) << job.err;
  EXPECT_EQ(job.Json()["backend"], "cuda") << job.out;
  EXPECT_EQ(job.Json()["chip_id"], "h100_sxm") << job.out;
  // The seed's id names the same chip.
  r = a_.Client(
      {"submit", SourceDir() + "/examples/graphs/softmax.json", "--chip", "nvidia_h100", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  job = a_.Client({"get", r.Json()["job_id"].get<std::string>(), "--json"});
  ASSERT_EQ(job.exit_code, 0) << job.err;
  EXPECT_EQ(job.Json()["backend"], "cuda") << job.out;
  EXPECT_EQ(job.Json()["chip_id"], "h100_sxm") << job.out;
}

// /proc/cpuinfo, read independently of the probe.
struct CpuInfo {
  std::string vendor, model;
  std::set<std::string> flags;
  std::set<std::pair<std::string, std::string>> cores;
  int processors = 0;
};

CpuInfo ReadCpuInfo() {
  CpuInfo info;
  std::ifstream in("/proc/cpuinfo");
  std::string physical;
  for (std::string line; std::getline(in, line);) {
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon);
    key.erase(key.find_last_not_of(" \t") + 1);
    std::string value = colon + 1 < line.size() ? line.substr(colon + 2) : "";
    if (key == "processor") ++info.processors;
    if (key == "vendor_id" && info.vendor.empty()) info.vendor = value;
    if (key == "model name" && info.model.empty()) info.model = value;
    if (key == "flags" && info.flags.empty()) {
      std::istringstream f(value);
      for (std::string flag; f >> flag;) info.flags.insert(flag);
    }
    if (key == "physical id") physical = value;
    if (key == "core id") info.cores.insert({physical, value});
  }
  return info;
}

TEST_F(RegistryTest, CpuDetectionMatchesProcCpuinfo) {
  CpuInfo cpu = ReadCpuInfo();
  ASSERT_FALSE(cpu.model.empty()) << "no model name in /proc/cpuinfo";
  CommandResult probe = RunCommand({BinDir() + "/yirage-worker", "--backend", "cpu", "--probe"});
  ASSERT_EQ(probe.exit_code, 0) << probe.err;
  json device = probe.Json();
  ASSERT_TRUE(device.is_object()) << probe.out;
  EXPECT_EQ(device["model"], cpu.model);
  EXPECT_EQ(device["vendor"], cpu.vendor);
  const int cores = cpu.cores.empty() ? cpu.processors : static_cast<int>(cpu.cores.size());
  EXPECT_EQ(device["cores_physical"], cores);
  for (const char* f : {"avx2", "avx512f", "amx_tile", "fma"}) {
    bool in_probe = false;
    for (const json& s : device["simd"]) in_probe |= s == f;
    EXPECT_EQ(in_probe, cpu.flags.count(f) == 1) << f;
  }

  // A server with a local CPU worker resolves the worker's chip.
  Start(a_, "a.db", {"--local-workers", "cpu"});
  json worker;
  auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (std::chrono::steady_clock::now() < deadline) {
    json list = a_.Client({"workers", "--json"}).Json();
    if (list.is_object() && !list["workers"].empty() && list["workers"][0]["chip_id"] != "") {
      worker = list["workers"][0];
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_TRUE(worker.is_object()) << "no worker reported a chip";
  const std::string chip_id = worker["chip_id"];
  CommandResult r = a_.Client({"chips", "get", chip_id});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json chip = r.Json();
  EXPECT_EQ(chip["category"], "cpu");
  EXPECT_EQ(chip["backend"], "cpu");
  const std::string vendor = cpu.vendor == "AuthenticAMD"   ? "amd"
                             : cpu.vendor == "GenuineIntel" ? "intel"
                                                            : "";
  if (!vendor.empty()) {
    EXPECT_EQ(chip["vendor"], vendor);
  }
  if (chip["metadata"].value("detected", "") == "unknown-device") {
    // Described from what was measured: it must be this machine.
    EXPECT_EQ(chip["chip_name"], cpu.model);
    EXPECT_EQ(chip["compute"]["num_compute_units"], cores);
    EXPECT_EQ(chip["features"].value("avx2", false), cpu.flags.count("avx2") == 1);
    EXPECT_EQ(chip["features"].value("avx512", false), cpu.flags.count("avx512f") == 1);
    EXPECT_EQ(chip["features"].value("amx", false), cpu.flags.count("amx_tile") == 1);
    const int simd = cpu.flags.count("avx512f") ? 512 : cpu.flags.count("avx2") ? 256 : 0;
    if (simd > 0) {
      EXPECT_EQ(chip["compute"]["simd_width_bits"], simd);
    }
  } else {
    // A catalog CPU: its match pattern occurs in the model name.
    EXPECT_TRUE(chip["metadata"].contains("source"));
  }
  // The text listing shows the chip too, and a job without --chip targets it.
  r = a_.Client({"workers"});
  EXPECT_NE(r.out.find(chip_id), std::string::npos) << r.out;
  r = a_.Client({"submit", SourceDir() + "/examples/graphs/softmax.json", "--json",
                 "--budget-candidates", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(a_.Log().find("chip " + chip_id), std::string::npos);
  // Restarting with the same worker device re-matches, registering nothing new.
  const size_t chips = Chips(a_).size();
  ASSERT_EQ(a_.Stop(), 0);
  Start(a_, "a.db", {"--local-workers", "cpu"});
  deadline = std::chrono::steady_clock::now() + seconds(60);
  std::string again;
  while (std::chrono::steady_clock::now() < deadline && again.empty()) {
    json list = a_.Client({"workers", "--json"}).Json();
    if (list.is_object()) {
      for (const json& w : list["workers"]) {
        if (w["connected"] == true && w["chip_id"] != "" && w["worker_id"] != worker["worker_id"]) {
          again = w["chip_id"];
        }
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(again, chip_id);
  EXPECT_EQ(Chips(a_).size(), chips);
}

// A job that names its chip runs only on workers of that chip; --any-chip
// lets any worker of the backend run it; a job without --chip targets the
// workers' chip and is bound to nothing.
TEST_F(RegistryTest, AJobForAChipRunsOnlyOnWorkersOfThatChip) {
  Start(a_, "a.db", {"--local-workers", "cpu"});
  std::string worker_chip;
  auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (std::chrono::steady_clock::now() < deadline && worker_chip.empty()) {
    json list = a_.Client({"workers", "--json"}).Json();
    if (list.is_object() && !list["workers"].empty()) worker_chip = list["workers"][0]["chip_id"];
    if (worker_chip.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  ASSERT_FALSE(worker_chip.empty()) << "no worker reported a chip";
  const json other = json::parse(R"({
    "chip_id": "bound_test_cpu", "chip_name": "Bound test CPU", "vendor": "other",
    "category": "cpu", "backend": "cpu",
    "memory": {"capacity_gb": 16, "bandwidth_gbps": 25.6, "memory_type": "DDR5"},
    "compute": {"num_compute_units": 2, "peak_tflops_fp32": 0.2}
  })");
  ASSERT_EQ(a_.Client({"chips", "register", Write("other.json", other.dump())}).exit_code, 0);
  const std::string graph = SourceDir() + "/examples/graphs/softmax.json";
  auto submit = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"submit", graph, "--json", "--budget-candidates", "2"});
    CommandResult r = a_.Client(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? r.Json()["job_id"].get<std::string>() : std::string();
  };
  auto wait = [&](const std::string& job_id) {
    CommandResult r = a_.Client({"watch", job_id, "--json"});
    return r.Json().is_object() ? r.Json() : json::object();
  };
  // Bound to a chip no worker has: it waits, and says for what.
  const std::string bound = submit({"--chip", "bound_test_cpu"});
  // Bound to the worker's chip, and free to go anywhere: both run.
  const std::string own = submit({"--chip", worker_chip});
  const std::string any = submit({"--chip", "bound_test_cpu", "--any-chip"});
  const std::string plain = submit({});
  for (const std::string& job_id : {own, any, plain}) {
    json job = wait(job_id);
    EXPECT_EQ(job["state"], "SUCCEEDED") << job.dump();
  }
  json job = a_.Client({"get", bound, "--json"}).Json();
  EXPECT_EQ(job["state"], "QUEUED") << job.dump();
  EXPECT_EQ(job["chip_bound"], true) << job.dump();
  EXPECT_EQ(job["message"],
            "waiting: no connected worker for backend 'cpu' and chip 'bound_test_cpu' (the job "
            "is bound to its chip)")
      << job.dump();
  EXPECT_EQ(job["candidates_evaluated"], 0) << job.dump();
  CommandResult text = a_.Client({"get", bound});
  EXPECT_NE(text.out.find("bound_test_cpu (runs only on workers of this chip)"), std::string::npos)
      << text.out;
  EXPECT_EQ(a_.Client({"get", own, "--json"}).Json()["chip_bound"], true);
  EXPECT_FALSE(a_.Client({"get", any, "--json"}).Json().value("chip_bound", false));
  EXPECT_FALSE(a_.Client({"get", plain, "--json"}).Json().value("chip_bound", false));
  // --any-chip without --chip is a usage error.
  CommandResult r = a_.Client({"submit", graph, "--any-chip"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

}  // namespace
}  // namespace yirage::testing
