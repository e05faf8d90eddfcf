// The JSON graph format (docs/graph-format.md) <-> yirage.v1.Graph.
#ifndef YIRAGE_CORE_GRAPH_JSON_H_
#define YIRAGE_CORE_GRAPH_JSON_H_

#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "yirage/v1/graph.pb.h"

namespace yirage::core {

// Parses the JSON text. Errors name the field ("ops[2].inputs", "inputs[0].dtype")
// and what was expected. Structural checks only; Graph::FromProto does the rest.
absl::StatusOr<yirage::v1::Graph> ParseGraphJson(std::string_view text);

// Writes the same format back (attrs as plain JSON numbers, strings, booleans).
std::string GraphToJson(const yirage::v1::Graph& graph);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_GRAPH_JSON_H_
