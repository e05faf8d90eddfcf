// yirage-verify-bench: wall time of what a worker does on the host for each
// batch and candidate, whatever its backend: the seeded inputs and the
// float64 reference (once a batch), and per candidate the comparison of the
// outputs it copied back with the reference: "encoded" is the worker's
// (CompareEncodedOutputs over the raw bytes), "decode" + "compare" the same
// through DecodeTensor and CompareOutputs (the tests' way).
//
//   yirage-verify-bench [--runs N] GRAPH.json ...
//
// The "outputs" decoded and compared are the reference stored in each
// output's dtype (EncodeTensor), so the comparison passes and walks every
// element, as it does for a candidate that verifies. Prints per graph the
// elements of its outputs and the median seconds of each step over N runs
// (default 3), with the threads the machine offers.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "common/rpc_util.h"
#include "core/graph.h"
#include "core/graph_json.h"
#include "core/tensor.h"

namespace {

using yirage::core::Graph;
using yirage::core::HostTensor;

double Seconds(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Run(int argc, char** argv) {
  int runs = 3;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc) {
      runs = std::max(1, std::atoi(argv[++i]));
    } else if (a.rfind("--", 0) == 0) {
      std::fprintf(stderr, "usage: yirage-verify-bench [--runs N] GRAPH.json ...\n");
      return 2;
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: yirage-verify-bench [--runs N] GRAPH.json ...\n");
    return 2;
  }
  std::printf("%u hardware threads, median of %d runs, seconds\n",
              std::thread::hardware_concurrency(), runs);
  std::printf("%-48s %12s %8s %10s %8s %8s %8s\n", "graph", "out_elems", "inputs", "reference",
              "encoded", "decode", "compare");
  // The reference compared with itself must pass; says why where not.
  auto matches_itself = [](const std::string& file, const yirage::core::CompareResult& r) {
    if (!r.ok) {
      std::fprintf(stderr, "%s: the reference does not match itself: %s\n", file.c_str(),
                   r.message.c_str());
    }
    return r.ok;
  };
  for (const std::string& file : files) {
    absl::StatusOr<std::string> text = yirage::ReadTextFile(file, "GRAPH");
    absl::StatusOr<yirage::v1::Graph> proto =
        text.ok() ? yirage::core::ParseGraphJson(*text) : text.status();
    absl::StatusOr<Graph> graph = proto.ok() ? Graph::FromProto(*proto) : proto.status();
    if (!graph.ok()) {
      std::fprintf(stderr, "%s: %s\n", file.c_str(), std::string(graph.status().message()).c_str());
      return 1;
    }
    std::vector<double> t_inputs, t_reference, t_encoded, t_decode, t_compare;
    int64_t elements = 0;
    for (int r = 0; r < runs; ++r) {
      auto start = std::chrono::steady_clock::now();
      std::vector<HostTensor> inputs = yirage::core::MakeRandomInputs(*graph, 1);
      t_inputs.push_back(Seconds(start));
      start = std::chrono::steady_clock::now();
      absl::StatusOr<std::vector<HostTensor>> reference =
          yirage::core::EvaluateReference(*graph, inputs);
      t_reference.push_back(Seconds(start));
      if (!reference.ok()) {
        std::fprintf(stderr, "%s: %s\n", file.c_str(),
                     std::string(reference.status().message()).c_str());
        return 1;
      }
      inputs.clear();
      std::vector<std::vector<uint8_t>> stored;
      elements = 0;
      for (size_t o = 0; o < reference->size(); ++o) {
        const auto dtype = graph->tensor(graph->outputs()[o]).dtype;
        stored.push_back(yirage::core::EncodeTensor((*reference)[o], dtype));
        elements += static_cast<int64_t>((*reference)[o].data.size());
      }
      const yirage::core::Tolerance tolerance = yirage::core::DefaultTolerance(*graph);
      std::vector<const void*> raw;
      for (const auto& b : stored) raw.push_back(b.data());
      start = std::chrono::steady_clock::now();
      const yirage::core::CompareResult encoded =
          yirage::core::CompareEncodedOutputs(*graph, *reference, raw, tolerance);
      t_encoded.push_back(Seconds(start));
      if (!matches_itself(file, encoded)) return 1;
      start = std::chrono::steady_clock::now();
      std::vector<HostTensor> got;
      for (size_t o = 0; o < reference->size(); ++o) {
        const auto& t = graph->tensor(graph->outputs()[o]);
        got.push_back(yirage::core::DecodeTensor(stored[o].data(), t.shape, t.dtype));
      }
      t_decode.push_back(Seconds(start));
      start = std::chrono::steady_clock::now();
      const yirage::core::CompareResult cmp =
          yirage::core::CompareOutputs(*graph, *reference, got, tolerance);
      t_compare.push_back(Seconds(start));
      if (!matches_itself(file, cmp)) return 1;
    }
    std::string name = file.substr(file.find_last_of('/') + 1);
    std::printf("%-48s %12lld %8.3f %10.3f %8.3f %8.3f %8.3f\n", name.c_str(),
                static_cast<long long>(elements), Median(t_inputs), Median(t_reference),
                Median(t_encoded), Median(t_decode), Median(t_compare));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
