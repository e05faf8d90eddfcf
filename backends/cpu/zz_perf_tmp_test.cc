#include "backends/cpu/cpu_test_util.h"
namespace yirage::backends::cpu::testing {
TEST(PerfTmp, Mlp) {
  GraphBuilder b("mlp");
  b.Input("x", {32, 2048}).Input("nw", {2048}).Input("w", {2048, 2048});
  b.Op("n", "rms_norm", {"x"}); b.Op("m", "mul", {"n", "nw"});
  b.Op("y", "matmul", {"m", "w"}).Output("y");
  b.Op("s", "silu", {"y"}).Output("s");
  auto g = core::Graph::FromProto(b.proto());
  std::vector<yirage::v1::Plan> ps = {MakePlan(*g, AllGeneric(b.proto())),
      MakePlan(*g, {Row({"n","m","y","s"}, Rows(4, 256, 256))}),
      MakePlan(*g, {Row({"n","m","y","s"}, Rows(8, 512, 128, 16))}),
      MakePlan(*g, {Row({"n","m","y","s"}, Cols(64, 256))}),
      MakePlan(*g, {Row({"n","m","y","s"}, Rows(32, 64, 512, 0, 4))})};
  Compiled c; CompileThroughAbi(b.proto(), ps, &c);
  printf("compile %.2f s\n", c.response.compile_seconds());
  Buffers buf = MakeBuffers(*g, core::MakeRandomInputs(*g, 1));
  for (int i = 0; i < (int)ps.size(); ++i) {
    RunAndCompare(*g, c, i);
    YirageTiming t; char* e = nullptr;
    Backend()->time(c.module, i, buf.in_ptrs.data(), buf.out_ptrs.data(), nullptr, &t, &e);
    printf("plan %d median %.1f us min %.1f runs %d  GFLOP/s %.1f\n", i, t.median_us, t.min_us, t.runs, 2.0*32*2048*2048/t.median_us/1e3);
  }
}
}
namespace yirage::backends::cpu::testing {
TEST(PerfTmp, Dump) {
  GraphBuilder b("mlp");
  b.Input("x", {32, 2048}).Input("nw", {2048}).Input("w", {2048, 2048});
  b.Op("n", "rms_norm", {"x"}); b.Op("m", "mul", {"n", "nw"});
  b.Op("y", "matmul", {"m", "w"}).Output("y");
  auto g = core::Graph::FromProto(b.proto());
  Compiled c; CompileThroughAbi(b.proto(), {MakePlan(*g, {Row({"n","m","y"}, Rows(4, 256, 256))})}, &c);
  FILE* f = fopen("/tmp/yrt/plan.cc", "w"); fputs(c.response.plans(0).source().c_str(), f); fclose(f);
}
}
