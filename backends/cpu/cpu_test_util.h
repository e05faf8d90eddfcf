// Test helpers for the CPU backend tests: load the built backend through the
// C ABI, build graphs and plans, run plans and compare with the reference.
#ifndef YIRAGE_BACKENDS_CPU_CPU_TEST_UTIL_H_
#define YIRAGE_BACKENDS_CPU_CPU_TEST_UTIL_H_

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "backends/backend_api.h"
#include "core/candidate_generator.h"
#include "core/graph.h"
#include "core/graph_json.h"
#include "core/tensor.h"
#include "gtest/gtest.h"
#include "yirage/v1/backend.pb.h"
#include "yirage/v1/graph.pb.h"
#include "yirage/v1/plan.pb.h"

namespace yirage::backends::cpu::testing {

// The backend library loaded once per test binary.
inline const YirageBackendV1* Backend() {
  static const YirageBackendV1* backend = [] {
    const std::string path = std::string(YIRAGE_BIN_DIR) + "/libyirage_backend_cpu.so";
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      ADD_FAILURE() << "dlopen " << path << ": " << dlerror();
      return static_cast<const YirageBackendV1*>(nullptr);
    }
    auto get = reinterpret_cast<YirageBackendGetV1Fn>(dlsym(handle, YIRAGE_BACKEND_ENTRY_POINT));
    return get != nullptr ? get() : nullptr;
  }();
  return backend;
}

inline void* BackendSymbol(const char* name) {
  const std::string path = std::string(YIRAGE_BIN_DIR) + "/libyirage_backend_cpu.so";
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  return handle != nullptr ? dlsym(handle, name) : nullptr;
}

// ---- graph building ----
struct AttrSpec {
  std::string key;
  yirage::v1::AttrValue value;
};
inline AttrSpec F(const std::string& key, double v) {
  AttrSpec a{key, {}};
  a.value.set_f(v);
  return a;
}
inline AttrSpec I(const std::string& key, int64_t v) {
  AttrSpec a{key, {}};
  a.value.set_i(v);
  return a;
}
inline AttrSpec B(const std::string& key, bool v) {
  AttrSpec a{key, {}};
  a.value.set_b(v);
  return a;
}
inline AttrSpec S(const std::string& key, const std::string& v) {
  AttrSpec a{key, {}};
  a.value.set_s(v);
  return a;
}

class GraphBuilder {
 public:
  explicit GraphBuilder(const std::string& name) { proto_.set_name(name); }
  GraphBuilder& Input(const std::string& name, std::vector<int64_t> shape,
                      yirage::v1::DType dtype = yirage::v1::FLOAT32) {
    yirage::v1::TensorSpec* t = proto_.add_inputs();
    t->set_name(name);
    for (int64_t d : shape) t->add_shape(d);
    t->set_dtype(dtype);
    return *this;
  }
  GraphBuilder& Op(const std::string& name, const std::string& op, std::vector<std::string> inputs,
                   std::vector<AttrSpec> attrs = {}) {
    yirage::v1::OpNode* n = proto_.add_ops();
    n->set_name(name);
    n->set_op(op);
    for (const std::string& i : inputs) n->add_inputs(i);
    for (const AttrSpec& a : attrs) (*n->mutable_attrs())[a.key] = a.value;
    return *this;
  }
  GraphBuilder& Output(const std::string& name) {
    proto_.add_outputs(name);
    return *this;
  }
  const yirage::v1::Graph& proto() const { return proto_; }

 private:
  yirage::v1::Graph proto_;
};

// ---- plan building ----
struct KernelSpec {
  yirage::v1::KernelKind kind;
  std::vector<std::string> ops;
  yirage::v1::Schedule schedule;
};

inline yirage::v1::Schedule Rows(int block_rows, int tile_n = 0, int tile_k = 0, int vec = 0,
                                 int unroll = 0) {
  yirage::v1::Schedule s;
  s.set_parallel(yirage::v1::PARALLEL_ROWS);
  s.set_block_rows(block_rows);
  s.set_tile_n(tile_n);
  s.set_tile_k(tile_k);
  s.set_vector_width(vec);
  s.set_unroll(unroll);
  return s;
}
inline yirage::v1::Schedule Cols(int tile_n = 0, int tile_k = 0) {
  yirage::v1::Schedule s;
  s.set_parallel(yirage::v1::PARALLEL_COLS);
  s.set_block_rows(1);
  s.set_tile_n(tile_n);
  s.set_tile_k(tile_k);
  return s;
}
inline KernelSpec Row(std::vector<std::string> ops, yirage::v1::Schedule s = Rows(4)) {
  return {yirage::v1::KERNEL_ROW, std::move(ops), s};
}
inline KernelSpec Generic(const std::string& op) {
  return {yirage::v1::KERNEL_GENERIC, {op}, Rows(1)};
}
// A KERNEL_GENERIC chain: elementwise ops before an axis op (core/generic_chain.h).
inline KernelSpec GenericOps(std::vector<std::string> ops) {
  return {yirage::v1::KERNEL_GENERIC, std::move(ops), Rows(1)};
}

// A plan whose kernels' inputs/outputs lists are derived from the graph.
inline yirage::v1::Plan MakePlan(const core::Graph& g, const std::vector<KernelSpec>& kernels,
                                 const std::string& description = "") {
  yirage::v1::Plan plan;
  plan.set_description(description);
  std::map<std::string, int> kernel_of;
  for (size_t k = 0; k < kernels.size(); ++k) {
    for (const std::string& op : kernels[k].ops) kernel_of[op] = static_cast<int>(k);
  }
  for (size_t k = 0; k < kernels.size(); ++k) {
    yirage::v1::KernelPlan* kp = plan.add_kernels();
    kp->set_name("k" + std::to_string(k));
    kp->set_kind(kernels[k].kind);
    *kp->mutable_schedule() = kernels[k].schedule;
    std::set<std::string> seen;
    for (const std::string& name : kernels[k].ops) {
      kp->add_ops(name);
      const int id = g.FindOp(name);
      if (id < 0) continue;  // deliberately bad plans
      for (int t : g.op(id).inputs) {
        const std::string& in = g.tensor(t).name;
        auto it = kernel_of.find(in);
        const bool inside =
            it != kernel_of.end() && it->second == static_cast<int>(k) && g.tensor(t).producer >= 0;
        if (!inside && seen.insert(in).second) kp->add_inputs(in);
      }
    }
    for (const std::string& name : kernels[k].ops) {
      const int id = g.FindOp(name);
      if (id < 0) continue;
      const core::TensorInfo& t = g.tensor(g.op(id).output);
      bool needed = t.is_graph_output;
      for (int c : t.consumers) {
        auto it = kernel_of.find(g.op(c).name);
        if (it == kernel_of.end() || it->second != static_cast<int>(k)) needed = true;
      }
      if (needed) kp->add_outputs(t.name);
    }
  }
  return plan;
}

struct Compiled {
  YirageModule* module = nullptr;
  yirage::v1::CompileResponse response;
  Compiled() = default;
  Compiled(const Compiled&) = delete;
  Compiled& operator=(const Compiled&) = delete;
  ~Compiled() {
    if (module != nullptr) Backend()->release(module);
  }
};

// The graphs of both backends' library matmul tests: every epilogue (bias +
// relu with B transposed; batched bf16 with a scale and a residual; float32
// with tanh gelu), folded and shared batches, and a library call between
// generated kernels whose output is also a graph output.
inline std::vector<std::string> LibraryTestGraphs() {
  return {
      // bias + relu, B given transposed
      R"({"name": "lib_bias_relu", "inputs": [{"name": "X", "shape": [96, 512], "dtype": "float16"},
          {"name": "W", "shape": [256, 512], "dtype": "float16"}, {"name": "b", "shape": [256], "dtype": "float16"}],
          "ops": [{"name": "Y", "op": "matmul", "inputs": ["X", "W"], "attrs": {"transpose_b": true}},
                  {"name": "Z", "op": "add", "inputs": ["Y", "b"]}, {"name": "R", "op": "relu", "inputs": ["Z"]}],
          "outputs": ["R"]})",
      // batched, alpha and a residual, bf16
      R"({"name": "lib_batch_residual", "inputs": [{"name": "A", "shape": [4, 64, 128], "dtype": "bfloat16"},
          {"name": "B", "shape": [4, 128, 96], "dtype": "bfloat16"}, {"name": "C", "shape": [4, 64, 96], "dtype": "bfloat16"}],
          "ops": [{"name": "Y", "op": "matmul", "inputs": ["A", "B"]}, {"name": "S", "op": "mul", "inputs": ["Y"], "attrs": {"scalar": 0.5}},
                  {"name": "Z", "op": "add", "inputs": ["C", "S"]}], "outputs": ["Z"]})",
      // float32 (TF32 allowed by the tolerance), tanh gelu
      R"({"name": "lib_fp32_gelu", "inputs": [{"name": "X", "shape": [64, 256], "dtype": "float32"},
          {"name": "W", "shape": [256, 128], "dtype": "float32"}],
          "ops": [{"name": "Y", "op": "matmul", "inputs": ["X", "W"]}, {"name": "G", "op": "gelu", "inputs": ["Y"], "attrs": {"approximate": "tanh"}}],
          "outputs": ["G"], "tolerance": {"rtol": 0.01, "atol": 0.01}})",
      // A's batch folded into its rows; then A shared by a batched B
      R"({"name": "lib_fold_and_share", "inputs": [{"name": "X", "shape": [3, 40, 64], "dtype": "float16"},
          {"name": "W", "shape": [64, 72], "dtype": "float16"}, {"name": "b", "shape": [72], "dtype": "float16"},
          {"name": "P", "shape": [32, 72], "dtype": "float16"}, {"name": "Q", "shape": [4, 72, 48], "dtype": "float16"}],
          "ops": [{"name": "Y", "op": "matmul", "inputs": ["X", "W"]}, {"name": "Z", "op": "add", "inputs": ["Y", "b"]},
                  {"name": "V", "op": "matmul", "inputs": ["P", "Q"]}], "outputs": ["Z", "V"]})",
      // grouped heads: B shared by A's innermost lead dim, which folds
      // into A's rows (grouped-query attention's products)
      R"({"name": "lib_grouped_heads", "inputs": [{"name": "A", "shape": [2, 3, 24, 64], "dtype": "float16"},
          {"name": "B", "shape": [2, 1, 64, 40], "dtype": "float16"}],
          "ops": [{"name": "Y", "op": "matmul", "inputs": ["A", "B"]}], "outputs": ["Y"]})",
      // a generated kernel feeds the library (rms_norm -> matmul), whose
      // output is both a graph output and read by a generated softmax
      R"({"name": "lib_between_kernels", "inputs": [{"name": "X", "shape": [48, 256], "dtype": "float16"},
          {"name": "W", "shape": [256, 320], "dtype": "float16"}],
          "ops": [{"name": "N", "op": "rms_norm", "inputs": ["X"]}, {"name": "Y", "op": "matmul", "inputs": ["N", "W"]},
                  {"name": "P", "op": "softmax", "inputs": ["Y"]}], "outputs": ["Y", "P"]})",
  };
}

// LibraryTestGraphs() parsed: the proto and its validated graph each.
struct LibraryTestGraph {
  yirage::v1::Graph proto;
  core::Graph graph;
};
inline std::vector<LibraryTestGraph> ParsedLibraryTestGraphs() {
  std::vector<LibraryTestGraph> graphs;
  for (const std::string& text : LibraryTestGraphs()) {
    absl::StatusOr<yirage::v1::Graph> proto = core::ParseGraphJson(text);
    EXPECT_TRUE(proto.ok()) << proto.status();
    if (!proto.ok()) continue;
    absl::StatusOr<core::Graph> g = core::Graph::FromProto(*proto);
    EXPECT_TRUE(g.ok()) << g.status();
    if (g.ok()) graphs.push_back({*std::move(proto), *std::move(g)});
  }
  return graphs;
}

// What `backend` runs (its describe call through the ABI, for its device or
// `target`), as its worker reports it to the scheduler; fails the test when
// the call fails.
inline yirage::v1::BackendKernels DescribeThroughAbi(const YirageBackendV1* backend,
                                                     const yirage::v1::CompileTarget* target) {
  yirage::v1::BackendKernels kernels;
  if (backend == nullptr) {
    ADD_FAILURE() << "no backend";
    return kernels;
  }
  const std::string bytes = target != nullptr ? target->SerializeAsString() : std::string();
  void* out = nullptr;
  size_t len = 0;
  char* error = nullptr;
  const int rc =
      backend->describe(bytes.empty() ? nullptr : bytes.data(), bytes.size(), &out, &len, &error);
  EXPECT_EQ(rc, YIRAGE_OK) << (error != nullptr ? error : "");
  if (rc == YIRAGE_OK) {
    EXPECT_TRUE(kernels.ParseFromArray(out, static_cast<int>(len)));
  }
  backend->free_buffer(out);
  backend->free_buffer(error);
  return kernels;
}

// The candidates the search gives `g` for a backend that runs `kernels` (at
// most `max_candidates`), keeping those with a KERNEL_LIBRARY kernel; the
// baseline first.
inline std::vector<yirage::v1::Plan> LibraryCandidates(const core::Graph& g,
                                                       const yirage::v1::BackendKernels& kernels,
                                                       int max_candidates) {
  core::SearchOptions options;
  options.backend = kernels.backend();
  options.kernels = kernels;
  options.max_candidates = max_candidates;
  absl::StatusOr<std::vector<yirage::v1::Plan>> plans = core::GenerateCandidates(g, options);
  EXPECT_TRUE(plans.ok()) << plans.status();
  std::vector<yirage::v1::Plan> library;
  for (const yirage::v1::Plan& p : plans.ok() ? *plans : std::vector<yirage::v1::Plan>{}) {
    for (const auto& k : p.kernels()) {
      if (k.kind() == yirage::v1::KERNEL_LIBRARY) {
        library.push_back(p);
        break;
      }
    }
  }
  return library;
}

// Compiles through the ABI; fails the test when the call itself fails.
inline void CompileThroughAbi(const yirage::v1::Graph& graph,
                              const std::vector<yirage::v1::Plan>& plans, Compiled* out,
                              double timeout_seconds = 0) {
  yirage::v1::CompileRequest req;
  *req.mutable_graph() = graph;
  for (const auto& p : plans) *req.add_plans() = p;
  req.set_timeout_seconds(timeout_seconds);
  const std::string bytes = req.SerializeAsString();
  void* resp = nullptr;
  size_t resp_len = 0;
  char* error = nullptr;
  const int rc =
      Backend()->compile(bytes.data(), bytes.size(), &out->module, &resp, &resp_len, &error);
  ASSERT_EQ(rc, YIRAGE_OK) << (error != nullptr ? error : "");
  ASSERT_TRUE(out->response.ParseFromArray(resp, static_cast<int>(resp_len)));
  Backend()->free_buffer(resp);
  ASSERT_EQ(out->response.plans_size(), static_cast<int>(plans.size()));
}

// Output buffers for a graph, in graph output order.
struct Buffers {
  std::vector<std::vector<uint8_t>> in, out;
  std::vector<const void*> in_ptrs;
  std::vector<void*> out_ptrs;
};
inline Buffers MakeBuffers(const core::Graph& g, const std::vector<core::HostTensor>& inputs) {
  Buffers b;
  for (int i = 0; i < g.num_inputs(); ++i) {
    b.in.push_back(core::EncodeTensor(inputs[i], g.tensor(i).dtype));
  }
  for (int t : g.outputs()) {
    b.out.emplace_back(g.tensor(t).num_elements() * core::DTypeSize(g.tensor(t).dtype), 0xAB);
  }
  for (auto& v : b.in) b.in_ptrs.push_back(v.data());
  for (auto& v : b.out) b.out_ptrs.push_back(v.data());
  return b;
}

// Runs plan `index` of a compiled module and compares every output with the
// float64 reference (the graph's default tolerance unless given).
inline void RunAndCompare(const core::Graph& g, Compiled& c, int index, core::Tolerance tol = {}) {
  SCOPED_TRACE("plan " + std::to_string(index));
  const yirage::v1::CompiledPlan& cp = c.response.plans(index);
  ASSERT_TRUE(cp.ok()) << cp.error() << "\n" << cp.source();
  const std::vector<core::HostTensor> inputs = core::MakeRandomInputs(g, 42 + index);
  absl::StatusOr<std::vector<core::HostTensor>> ref = core::EvaluateReference(g, inputs);
  ASSERT_TRUE(ref.ok()) << ref.status();
  Buffers b = MakeBuffers(g, inputs);
  char* error = nullptr;
  ASSERT_EQ(Backend()->run(c.module, index, b.in_ptrs.data(), b.out_ptrs.data(), &error), YIRAGE_OK)
      << (error != nullptr ? error : "");
  std::vector<core::HostTensor> got;
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    const core::TensorInfo& t = g.tensor(g.outputs()[k]);
    got.push_back(core::DecodeTensor(b.out[k].data(), t.shape, t.dtype));
  }
  if (tol.rtol == 0 && tol.atol == 0) tol = core::DefaultTolerance(g);
  const core::CompareResult r = core::CompareOutputs(g, *ref, got, tol);
  EXPECT_TRUE(r.ok) << r.message << "\n" << cp.source();
}

// Compiles all plans in one request and checks each against the reference.
inline void CheckPlans(const yirage::v1::Graph& proto,
                       const std::vector<std::vector<KernelSpec>>& plans,
                       core::Tolerance tol = {}) {
  absl::StatusOr<core::Graph> g = core::Graph::FromProto(proto);
  ASSERT_TRUE(g.ok()) << g.status();
  std::vector<yirage::v1::Plan> ps;
  for (size_t i = 0; i < plans.size(); ++i) {
    ps.push_back(MakePlan(*g, plans[i], "plan " + std::to_string(i)));
  }
  Compiled c;
  CompileThroughAbi(proto, ps, &c);
  for (size_t i = 0; i < plans.size(); ++i) RunAndCompare(*g, c, static_cast<int>(i), tol);
}

// One GENERIC kernel per op, in graph order.
inline std::vector<KernelSpec> AllGeneric(const yirage::v1::Graph& proto) {
  std::vector<KernelSpec> ks;
  for (const auto& op : proto.ops()) ks.push_back(Generic(op.name()));
  return ks;
}
// One ROW kernel per op, in graph order.
inline std::vector<KernelSpec> AllRowSingles(const yirage::v1::Graph& proto,
                                             yirage::v1::Schedule s) {
  std::vector<KernelSpec> ks;
  for (const auto& op : proto.ops()) ks.push_back(Row({op.name()}, s));
  return ks;
}
// All ops in one ROW kernel.
inline std::vector<KernelSpec> OneRowGroup(const yirage::v1::Graph& proto, yirage::v1::Schedule s) {
  KernelSpec k = Row({}, s);
  for (const auto& op : proto.ops()) k.ops.push_back(op.name());
  return {k};
}

}  // namespace yirage::backends::cpu::testing

#endif  // YIRAGE_BACKENDS_CPU_CPU_TEST_UTIL_H_
