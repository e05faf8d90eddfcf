// yirage-search-bench: wall time of the candidate search (rewrites,
// fingerprints, partitioning and schedules: GenerateCandidatesWithStats) per
// graph, with the options the scheduler uses for a job without budgets
// (server/scheduler.cc Submit: backend cpu, --max-candidates 64 by default,
// the chip's search space when --chip names a built-in chip).
//
//   yirage-search-bench [--runs N] [--chip ID | --chip-json FILE] [--backend B]
//                       [--max-candidates N] [--full-size] [--list] [--json-dir DIR]
//                       [--backend-lib PATH] [GRAPH.json ...]
//
// --full-size times the rewrite search alone (ExploreRewrites with the
// options GenerateCandidatesWithStats passes it) with shape reduction off, so
// every fingerprint runs on the graph's own shapes; the plans column is then 0.
// --list prints the last run's plans in order, with their estimated cost.
// --json-dir writes them to DIR/NAME.json (NAME: the graph file's stem) as
// {"graph", "chip_id", "plans": [{"description", "estimated_cost"}]}, the
// order bench/rank_quality.py --order compares a job's measured times with.
// --chip-json takes the chip from a file (`yirage-client chips get ID`:
// a detected chip, which has no built-in entry) in place of --chip.
// --backend-lib loads a backend library (libyirage_backend_cuda.so, ...) and
// plans what it says it runs (its describe call) on the --chip's target, as
// the scheduler does once a worker of that backend has reported: without it
// the search plans generic row kernels only. No device is needed.
//
// Without graphs it runs every examples/graphs/*.json under the source tree.
// Prints one row per graph: median (and min/max) seconds over N runs, the
// distinct verified rewritten graphs, the plans (rewritten ones), the
// fingerprint checks, and why rewrites were skipped when they were.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "common/rpc_util.h"
#include "core/builtin_chips.h"
#include "core/candidate_generator.h"
#include "core/chip.h"
#include "core/chip_search.h"
#include "core/graph.h"
#include "core/graph_json.h"
#include "core/rewrite.h"
#include "nlohmann/json.hpp"
#include "workers/backend_library.h"

namespace {

using yirage::core::Graph;

int Run(int argc, char** argv) {
  int runs = 5;
  int max_candidates = 64;
  std::string chip_id;
  std::string chip_json;
  std::string json_dir;
  bool full_size = false;
  bool list_plans = false;
  std::string backend = "cpu";
  std::string backend_lib;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--chip" && i + 1 < argc) {
      chip_id = argv[++i];
    } else if (a == "--chip-json" && i + 1 < argc) {
      chip_json = argv[++i];
    } else if (a == "--json-dir" && i + 1 < argc) {
      json_dir = argv[++i];
    } else if (a == "--max-candidates" && i + 1 < argc) {
      max_candidates = std::atoi(argv[++i]);
    } else if (a == "--full-size") {
      full_size = true;
    } else if (a == "--backend" && i + 1 < argc) {
      backend = argv[++i];
    } else if (a == "--backend-lib" && i + 1 < argc) {
      backend_lib = argv[++i];
    } else if (a == "--list") {
      list_plans = true;
    } else if (a == "--help" || a == "-h") {
      std::printf(
          "usage: %s [--runs N] [--chip ID | --chip-json FILE] [--backend B] [--max-candidates N] "
          "[--full-size] [--list] [--json-dir DIR] [--backend-lib PATH] [GRAPH.json ...]\n",
          argv[0]);
      return 0;
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) {
    for (const auto& e :
         std::filesystem::directory_iterator(std::string(YIRAGE_SOURCE_DIR) + "/examples/graphs")) {
      if (e.path().extension() == ".json") files.push_back(e.path().string());
    }
    std::sort(files.begin(), files.end());
  }
  yirage::core::SearchOptions options;
  options.backend = backend;
  options.max_candidates = max_candidates;
  // The chip: a built-in one by id, or one from a file.
  std::optional<yirage::v1::Chip> chip;
  if (!chip_json.empty()) {
    absl::StatusOr<std::string> text = yirage::ReadTextFile(chip_json, "--chip-json");
    absl::StatusOr<yirage::v1::Chip> parsed =
        text.ok() ? yirage::core::ParseChipJson(*text) : text.status();
    if (!parsed.ok()) {
      std::fprintf(stderr, "%s: %s\n", chip_json.c_str(),
                   std::string(parsed.status().message()).c_str());
      return 1;
    }
    chip = *std::move(parsed);
  } else if (!chip_id.empty()) {
    absl::StatusOr<std::vector<yirage::v1::Chip>> chips = yirage::core::BuiltinChips();
    if (!chips.ok()) {
      std::fprintf(stderr, "built-in chips: %s\n", std::string(chips.status().message()).c_str());
      return 1;
    }
    for (const yirage::v1::Chip& c : *chips) {
      if (c.chip_id() == chip_id) chip = c;
    }
    if (!chip.has_value()) {
      std::fprintf(stderr, "no built-in chip '%s'\n", chip_id.c_str());
      return 1;
    }
  }
  if (chip.has_value()) {
    const yirage::v1::Chip& c = *chip;
    options = yirage::core::SearchOptionsForChip(c, options);
    if (!backend_lib.empty()) {
      yirage::v1::CompileTarget target;
      const std::string& arch = c.arch_code();
      if (arch.rfind("sm_", 0) == 0) target.set_compute_capability(std::atoi(arch.c_str() + 3));
      target.set_multiprocessors(c.compute().num_compute_units());
      target.set_max_shared_memory_per_block(
          static_cast<int64_t>(c.compute().shared_mem_per_block_kb() * 1024));
      absl::StatusOr<std::unique_ptr<yirage::worker::BackendLibrary>> lib =
          yirage::worker::BackendLibrary::LoadFile(c.backend(), backend_lib);
      absl::StatusOr<yirage::v1::BackendKernels> kernels =
          lib.ok() ? (*lib)->Describe(&target) : lib.status();
      if (!kernels.ok()) {
        std::fprintf(stderr, "%s: %s\n", backend_lib.c_str(),
                     std::string(kernels.status().message()).c_str());
        return 1;
      }
      options.kernels = *kernels;
    }
  }
  std::printf("%-24s %9s %9s %9s %9s %8s %8s %8s\n", "graph", "median_s", "min_s", "max_s",
              "rewrite_s", "verified", "plans", "fp_chks");
  for (const std::string& file : files) {
    absl::StatusOr<std::string> text = yirage::ReadTextFile(file, "GRAPH");
    absl::StatusOr<yirage::v1::Graph> proto =
        text.ok() ? yirage::core::ParseGraphJson(*text) : text.status();
    if (!proto.ok()) {
      std::fprintf(stderr, "%s: %s\n", file.c_str(), std::string(proto.status().message()).c_str());
      return 1;
    }
    absl::StatusOr<Graph> graph = Graph::FromProto(*proto);
    if (!graph.ok()) {
      std::fprintf(stderr, "%s: %s\n", file.c_str(), std::string(graph.status().message()).c_str());
      return 1;
    }
    std::vector<double> seconds;
    std::vector<double> rewrite_seconds;
    yirage::core::SearchStats stats;
    std::vector<yirage::v1::Plan> last_plans;
    for (int r = 0; r < runs; ++r) {
      const auto start = std::chrono::steady_clock::now();
      absl::StatusOr<std::vector<yirage::v1::Plan>> plans;
      if (full_size) {
        yirage::core::RewriteOptions ro;
        ro.max_graphs = options.max_rewrite_graphs;
        ro.time_budget_seconds = options.rewrite_time_budget_seconds;
        ro.threads = options.search_threads;
        ro.fingerprint.trials = options.fingerprint_trials;
        ro.reduce_shapes_above_work = 0;
        yirage::core::RewriteStats rs;
        absl::StatusOr<std::vector<yirage::core::RewrittenGraph>> found =
            yirage::core::ExploreRewrites(*graph, ro, &rs);
        if (!found.ok()) {
          plans = found.status();
        } else {
          plans = std::vector<yirage::v1::Plan>{};
        }
        stats = yirage::core::SearchStats{};
        stats.rewrites_verified = rs.rewrites_verified;
        stats.fingerprint_checks = rs.fingerprint_checks;
        stats.rewrite_seconds = rs.seconds;
        stats.rewrites_skipped = rs.skipped;
      } else {
        plans = yirage::core::GenerateCandidatesWithStats(*graph, options, &stats);
      }
      seconds.push_back(
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
      rewrite_seconds.push_back(stats.rewrite_seconds);
      if (!plans.ok()) {
        std::fprintf(stderr, "%s: %s\n", file.c_str(),
                     std::string(plans.status().message()).c_str());
        return 1;
      }
      last_plans = *std::move(plans);
    }
    std::vector<double> sorted = seconds;
    std::sort(sorted.begin(), sorted.end());
    std::sort(rewrite_seconds.begin(), rewrite_seconds.end());
    const std::string name = std::filesystem::path(file).stem().string();
    std::printf("%-24s %9.3f %9.3f %9.3f %9.3f %8d %4d(%2d) %8lld\n", name.c_str(),
                sorted[sorted.size() / 2], sorted.front(), sorted.back(),
                rewrite_seconds[rewrite_seconds.size() / 2], stats.rewrites_verified, stats.plans,
                stats.rewritten_plans, static_cast<long long>(stats.fingerprint_checks));
    if (stats.fingerprint_shape_reduction > 1) {
      std::printf("    fingerprinted with dimensions divided by %lld\n",
                  static_cast<long long>(stats.fingerprint_shape_reduction));
    }
    if (!stats.rewrites_skipped.empty()) {
      std::printf("    rewrites skipped: %s\n", stats.rewrites_skipped.c_str());
    }
    if (!json_dir.empty()) {
      nlohmann::json doc = {{"graph", graph->name()}, {"chip_id", options.chip_id}};
      nlohmann::json plans = nlohmann::json::array();
      for (const yirage::v1::Plan& p : last_plans) {
        plans.push_back({{"description", p.description()}, {"estimated_cost", p.estimated_cost()}});
      }
      doc["plans"] = std::move(plans);
      std::filesystem::create_directories(json_dir);
      std::ofstream(std::filesystem::path(json_dir) / (name + ".json")) << doc.dump(1) << "\n";
    }
    if (list_plans) {
      for (size_t i = 0; i < last_plans.size(); ++i) {
        std::printf("    #%zu cost %.3g  %s\n", i, last_plans[i].estimated_cost(),
                    last_plans[i].description().c_str());
      }
    }
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
