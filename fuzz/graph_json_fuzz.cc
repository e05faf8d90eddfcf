// libFuzzer target: the graph JSON parser and the graph validator
// (everything a SubmitJob's graph goes through before the search). Any
// input may be refused; none may crash, hang or leak, and a graph that is
// accepted must survive a round trip through GraphToJson.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/graph.h"
#include "core/graph_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<yirage::v1::Graph> proto = yirage::core::ParseGraphJson(text);
  if (!proto.ok()) return 0;
  absl::StatusOr<yirage::core::Graph> graph = yirage::core::Graph::FromProto(*proto);
  if (!graph.ok()) return 0;
  // What the parser accepted, written back, parses to an accepted graph.
  absl::StatusOr<yirage::v1::Graph> again =
      yirage::core::ParseGraphJson(yirage::core::GraphToJson(*proto));
  if (!again.ok() || !yirage::core::Graph::FromProto(*again).ok()) std::abort();
  return 0;
}
