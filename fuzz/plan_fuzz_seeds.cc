// Writes the plan fuzzer's seed corpus: every candidate the search plans
// for the fuzz graph (CPU and CUDA backends), one serialized
// yirage.v1.Plan a file.   plan_fuzz_seeds DIR
#include <cstdio>
#include <fstream>
#include <string>

#include "core/candidate_generator.h"
#include "fuzz/fuzz_graph.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: plan_fuzz_seeds DIR\n");
    return 2;
  }
  int n = 0;
  for (const char* backend : {"cpu", "cuda"}) {
    yirage::core::SearchOptions options;
    options.backend = backend;
    absl::StatusOr<std::vector<yirage::v1::Plan>> plans =
        yirage::core::GenerateCandidates(yirage::fuzz::PlanFuzzGraph(), options);
    if (!plans.ok()) {
      std::fprintf(stderr, "plan_fuzz_seeds: %s\n", std::string(plans.status().message()).c_str());
      return 1;
    }
    for (const yirage::v1::Plan& plan : *plans) {
      std::ofstream(std::string(argv[1]) + "/plan_" + std::to_string(n++), std::ios::binary)
          << plan.SerializeAsString();
    }
  }
  std::printf("plan_fuzz_seeds: %d plans in %s\n", n, argv[1]);
  return 0;
}
