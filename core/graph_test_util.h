// Helpers shared by core's unit tests (each test file is its own TU in a
// plain build and shares one with its neighbours in a unity build, so
// shared helpers live here rather than as copies).
#ifndef YIRAGE_CORE_GRAPH_TEST_UTIL_H_
#define YIRAGE_CORE_GRAPH_TEST_UTIL_H_

#include <utility>

#include "absl/status/statusor.h"
#include "core/graph.h"
#include "gtest/gtest.h"
#include "yirage/v1/graph.pb.h"

namespace yirage::core {

// The graph of `proto`, which must be valid (a test failure otherwise).
inline Graph MustBuild(const yirage::v1::Graph& proto) {
  absl::StatusOr<Graph> graph = Graph::FromProto(proto);
  EXPECT_TRUE(graph.ok()) << graph.status();
  return *std::move(graph);
}

}  // namespace yirage::core

#endif  // YIRAGE_CORE_GRAPH_TEST_UTIL_H_
